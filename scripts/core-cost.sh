#!/bin/sh
# The native core's instructions per request (callgrind), for bench_envoy.py's
# rows (b), (c) and (d) through the lifecycle (benches/requests/main.rs): each row
# run for 200 and 1200 requests, the difference over 1000. Symbols kept, so
# `callgrind_annotate target/core-cost/<row>.1200.out` shows where it goes.
# OPT=2 builds it at the .wasm crate's opt-level (in a target dir of its
# own; without the inliner's and unroller's thresholds build-wasm.sh adds):
# where the .wasm's own work goes, by function, which V8's code does not say.
set -eu
cd "$(dirname "$0")/.."
opt=${OPT:-}
export CARGO_TARGET_DIR=target${opt:+/opt-$opt}
[ -z "$opt" ] || export CARGO_PROFILE_BENCH_OPT_LEVEL="$opt" CARGO_PROFILE_RELEASE_OPT_LEVEL="$opt"
CARGO_PROFILE_BENCH_STRIP=false CARGO_PROFILE_BENCH_DEBUG=1 \
  cargo bench --bench requests --no-run --message-format=json 2>/dev/null \
  | sed -n 's/.*"executable":"\([^"]*requests[^"]*\)".*/\1/p' > target/core-cost.bin
bin=$(tail -n1 target/core-cost.bin)
mkdir -p target/core-cost
for row in ${*:-b c d}; do
  for n in 200 1200; do
    valgrind --tool=callgrind --callgrind-out-file="target/core-cost/$row.$n.out" \
      "$bin" "$row" "$n" >/dev/null 2>&1
  done
  a=$(sed -n 's/^summary: //p' "target/core-cost/$row.200.out")
  b=$(sed -n 's/^summary: //p' "target/core-cost/$row.1200.out")
  echo "($row) $(( (b - a) / 1000 )) instructions per request"
done
