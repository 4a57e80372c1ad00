#!/usr/bin/env bash
# Builds target/hookstamp.wasm (profile wasm: release with lto, panic=abort,
# codegen-units 1; wasm32-wasip1), keeping only the exports it uses and the
# code they reach (binaryen's wasm-opt, dead code removal only);
# `build-wasm.sh clippy` lints the wasm glue instead (warnings denied);
# `build-wasm.sh noop` builds target/noop.wasm, the empty filter the
# benchmark measures beside hookstamp (benches/noop-filter).
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
trim=trim
case "$cmd" in
  clippy) extra=(-- -D warnings) ;;
  noop) cmd=build dir=benches/noop-filter built=noop_filter.wasm name=noop.wasm trim=trim-sdk ;;
esac
if [ "${HOOKSTAMP_WASM_ROUTE:-}" != debian ] && rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  (cd "$dir" && cargo "$cmd" --profile wasm --lib --target "$target" "${extra[@]}")
  out=$dir/target/$target/wasm/$built
else
  # Separate target dir: another rustc must not invalidate the native build.
  (cd "$dir" && PATH=/usr/bin:$PATH RUSTC_BOOTSTRAP=1 \
    CARGO_TARGET_DIR=target/debian-wasm \
    CARGO_TARGET_WASM32_WASIP1_LINKER=wasm-ld \
    CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="-L /usr/lib/wasm32-wasi" \
    /usr/bin/cargo "$cmd" --profile wasm --lib --target "$target" -Zbuild-std=std,panic_abort "${extra[@]}")
  out=$dir/target/debian-wasm/$target/wasm/$built
fi
[ "$cmd" = clippy ] && exit 0
command -v wasm-opt >/dev/null || { echo "wasm-opt (binaryen) is missing: run make setup" >&2; exit 1; }
# Only the callbacks hookstamp uses stay exported: Envoy skips the others.
# hookstamp's own body callback takes the place of the SDK's.
python3 scripts/wasm-exports.py "$trim" "$out" "target/$name.trimmed"
# Then the code only they reached goes too (nothing else is optimised).
# The module carries no target_features section (the profile strips it), so
# the features are named here: they must cover what rustc's wasm32 default
# emits, and wasm-opt refuses the module otherwise.
wasm-opt --enable-bulk-memory --enable-sign-ext --enable-nontrapping-float-to-int \
  --enable-mutable-globals --remove-unused-module-elements "target/$name.trimmed" -o "target/$name"
rm -f "target/$name.trimmed"
echo "built target/$name ($(stat -c %s "target/$name") bytes)"
