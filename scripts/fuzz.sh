#!/usr/bin/env bash
# Runs each fuzz target for SECONDS (default 60), seeded from the case
# tables. A crash fails the run and leaves its reproducer in
# fuzz/artifacts/<target>/: copy it into fuzz/regressions/<target>/ (and,
# for a wrong answer, add a case to tests/cases or tests/config_errors.json).
# fuzz/regressions/ holds the corpus minimised with `cargo fuzz cmin`; it
# seeds every run and tests/fuzz_regressions.rs replays it natively.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v cargo-fuzz >/dev/null 2>&1 || cargo install cargo-fuzz --locked
(cd tests/e2e && python3 fuzz_seeds.py)
# The nightly toolchain where rustup has it (with AddressSanitizer);
# otherwise the stable one, without a sanitizer.
if rustup run nightly rustc --version >/dev/null 2>&1; then
  fuzz=(cargo +nightly fuzz run)
else
  echo "fuzz: no nightly toolchain; stable without a sanitizer"
  export RUSTC_BOOTSTRAP=1
  fuzz=(cargo fuzz run --sanitizer none)
fi
mkdir -p target
for t in config resolve; do
  log=target/fuzz-$t.log
  rc=0
  "${fuzz[@]}" "$t" "fuzz/corpus/$t" "fuzz/regressions/$t" -- \
    -max_total_time="$seconds" -max_len=70000 -print_final_stats=1 >"$log" 2>&1 || rc=$?
  echo "fuzz $t: $(grep -E '^stat::number_of_executed_units' "$log" | awk '{print $2}') runs, exit $rc"
  if [ "$rc" -ne 0 ]; then
    grep -E "panicked|SUMMARY|Test unit written|ERROR" "$log" | head -20
    exit "$rc"
  fi
done
