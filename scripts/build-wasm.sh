#!/usr/bin/env bash
# Builds target/hookstamp.wasm (profile wasm: release with lto, panic=abort,
# codegen-units 1; wasm32-wasip1);
# `build-wasm.sh clippy` lints the wasm glue instead (warnings denied).
# Uses rustup's wasm32-wasip1 target where it is installed; otherwise
# Debian's rustc-web + rust-web-src + lld, building std from source.
set -euo pipefail
cd "$(dirname "$0")/.."
target=wasm32-wasip1
cmd=${1:-build}
extra=()
[ "$cmd" = clippy ] && extra=(-- -D warnings)
if [ "${HOOKSTAMP_WASM_ROUTE:-}" != debian ] && rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  cargo "$cmd" --profile wasm --lib --target "$target" "${extra[@]}"
  out=target/$target/wasm/hookstamp.wasm
else
  # Separate target dir: another rustc must not invalidate the native build.
  PATH=/usr/bin:$PATH RUSTC_BOOTSTRAP=1 \
  CARGO_TARGET_DIR=target/debian-wasm \
  CARGO_TARGET_WASM32_WASIP1_LINKER=wasm-ld \
  CARGO_TARGET_WASM32_WASIP1_RUSTFLAGS="-L /usr/lib/wasm32-wasi" \
    /usr/bin/cargo "$cmd" --profile wasm --lib --target "$target" -Zbuild-std=std,panic_abort "${extra[@]}"
  out=target/debian-wasm/$target/wasm/hookstamp.wasm
fi
[ "$cmd" = clippy ] && exit 0
cp "$out" target/hookstamp.wasm
echo "built target/hookstamp.wasm ($(stat -c %s target/hookstamp.wasm) bytes)"
