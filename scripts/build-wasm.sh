#!/usr/bin/env bash
# Builds the filter (profile wasm: release with lto, panic=abort,
# codegen-units 1; wasm32-wasip1, with WebAssembly's SIMD) and writes
# binaryen's `wasm-opt -Oz` of cargo's artifact to target/hookstamp.wasm:
# both export exactly the ABI callbacks hookstamp implements, and the tests
# load both in Envoy (target/hookstamp.wasm.cargo-path names cargo's).
# `build-wasm.sh clippy` lints the wasm glue instead (warnings denied);
# `build-wasm.sh noop` builds target/noop.wasm, the empty proxy-wasm SDK
# filter the benchmark measures beside hookstamp (benches/noop-filter),
# keeping only the exports hookstamp has (binaryen's wasm-metadce);
# `build-wasm.sh crash` builds target/crash.wasm, the same filter with the
# feature `crash` (it aborts on an x-crash header), which the tests of
# Envoy's failure policies load.
# Uses rustup's wasm32-wasip1 target where it is installed; otherwise
# Debian's rustc-web + rust-web-src + lld, building std from source.
set -euo pipefail
cd "$(dirname "$0")/.."
target=wasm32-wasip1
cmd=${1:-build}
dir=.
built=hookstamp.wasm
name=hookstamp.wasm
extra=()
# The crate's own flags (cargo rustc gives them to hookstamp alone, whose
# invocation also runs the link-time optimisation of the whole module): the
# crate is built at opt-level 2 for the request path, and at 2 LLVM's
# inliner (threshold 225) and loop unroller (300) would grow the
# configuration's checking, which runs once, past the 384 KiB ceiling.
# Held to 60 and 50 the module fits and keeps most of 2's speed; the
# dependencies' own optimisation (Ed25519's curve at 3) is left alone.
# BENCHMARKS.md has the thresholds measured, bytes and instructions.
crate_flags=(-C llvm-args=-inline-threshold=60 -C llvm-args=-unroll-threshold=50)
case "$cmd" in
  build) cmd=rustc extra=(-- "${crate_flags[@]}") ;;
  clippy) extra=(-- -D warnings) ;;
  noop) cmd=build dir=benches/noop-filter built=noop_filter.wasm name=noop.wasm ;;
  crash) cmd=build dir=benches/noop-filter built=noop_filter.wasm name=crash.wasm extra=(--features crash) ;;
esac
debian=
if [ "${HOOKSTAMP_WASM_ROUTE:-}" = debian ] || ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  debian=1
fi
# hookstamp's .wasm uses WebAssembly's 128-bit vectors (SHA-256's message
# schedule, src/sha256/block.rs; the JSON scan's sixteen bytes at once);
# V8 has run them since 9.1. Its panic locations name the registry's files
# without this machine's path to the registry (1 KiB of the module, and
# the same bytes wherever it is built). The flags go in RUSTFLAGS after
# the caller's own: where RUSTFLAGS is set cargo reads no other flags. The
# empty filter is built with the same vectors, for its `hand` line's
# SHA-256, which is hookstamp's (benches/noop-filter).
if [ -n "${CARGO_ENCODED_RUSTFLAGS:-}" ]; then
  echo "build-wasm.sh: CARGO_ENCODED_RUSTFLAGS would replace the .wasm's own flags (-C target-feature=+simd128): unset it" >&2
  exit 1
fi
flags="-C target-feature=+simd128"
if [ "$dir" = . ]; then
  # The registry's sources are where the remapping looks: fetched first,
  # by the cargo that builds, so a fresh machine's first build drops them
  # as every later one does.
  if [ -n "$debian" ]; then PATH=/usr/bin:$PATH /usr/bin/cargo fetch --quiet; else cargo fetch --quiet; fi
  for src in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/; do
    # Cargo splits these flags at whitespace: a path with a space keeps
    # its name in the module rather than breaking the build.
    case "$src" in *[[:space:]]*) continue ;; esac
    [ -d "$src" ] && flags="$flags --remap-path-prefix=$src="
  done
fi
if [ -z "$debian" ]; then
  (cd "$dir" && RUSTFLAGS="${RUSTFLAGS:-} $flags" cargo "$cmd" --profile wasm --lib --target "$target" "${extra[@]}")
  out=$dir/target/$target/wasm/$built
else
  # Separate target dir: another rustc must not invalidate the native build.
  (cd "$dir" && PATH=/usr/bin:$PATH RUSTC_BOOTSTRAP=1 \
    CARGO_TARGET_DIR=target/debian-wasm \
    CARGO_TARGET_WASM32_WASIP1_LINKER=wasm-ld \
    RUSTFLAGS="-L /usr/lib/wasm32-wasi ${RUSTFLAGS:-} $flags" \
    /usr/bin/cargo "$cmd" --profile wasm --lib --target "$target" -Zbuild-std=std,panic_abort "${extra[@]}")
  out=$dir/target/debian-wasm/$target/wasm/$built
fi
[ "$cmd" = clippy ] && exit 0
# The module carries no target_features section (the profile strips it),
# so the features rustc's wasm32 default emits are named for binaryen.
features=(--enable-bulk-memory --enable-sign-ext --enable-nontrapping-float-to-int --enable-mutable-globals --enable-simd)
if [ "$name" = crash.wasm ]; then
  cp "$out" "target/$name"
elif [ "$name" = hookstamp.wasm ]; then
  command -v wasm-opt >/dev/null || { echo "wasm-opt (binaryen) is missing: run make setup" >&2; exit 1; }
  # binaryen's size optimisation over cargo's artifact: the same exports and
  # behaviour (the tests load both), some 50 KiB smaller. The low 1 KiB of
  # memory is the far end of rustc's stack (laid out first): no address
  # computation of the filter's wraps into it, so a constant added to a
  # pointer folds into the load's offset (2.7 KiB less).
  wasm-opt -Oz --low-memory-unused "${features[@]}" "$out" -o "target/$name.new"
  mv "target/$name.new" "target/$name"
  # Where cargo's own artifact is, for the test that loads it in Envoy.
  echo "$PWD/$out" > target/hookstamp.wasm.cargo-path
else
  command -v wasm-metadce >/dev/null || { echo "wasm-metadce (binaryen) is missing: run make setup" >&2; exit 1; }
  # The SDK exports every callback, and Envoy calls every exported one on
  # each request: the empty filter keeps hookstamp's exports only, and
  # metadce drops the code only the others reached.
  graph=$(mktemp)
  python3 - "$graph" <<'PY'
import json, sys
keep = ["memory", "_initialize", "proxy_abi_version_0_2_1", "proxy_on_memory_allocate",
        "proxy_on_vm_start", "proxy_on_configure", "proxy_on_context_create",
        "proxy_on_request_headers", "proxy_on_request_body", "proxy_on_request_trailers",
        "proxy_on_tick", "proxy_on_delete"]
json.dump([{"name": k, "root": True, "export": k} for k in keep], open(sys.argv[1], "w"))
PY
  wasm-metadce "${features[@]}" --graph-file "$graph" "$out" -o "target/$name" >/dev/null
  rm -f "$graph"
fi
echo "built target/$name ($(stat -c %s "target/$name") bytes)"
