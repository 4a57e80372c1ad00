#!/usr/bin/env bash
# Builds target/oci, an OCI image layout holding the filter as Istio's
# WasmPlugin fetcher (and Envoy Gateway) take it: one tar+gzip layer with
# plugin.wasm at its root. No docker daemon: umoci (Debian). Push it with
#   skopeo copy oci:target/oci:<version> docker://REGISTRY/hookstamp:<version>
# and reference it by the digest this prints.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v umoci >/dev/null || { echo "umoci is missing: run make setup" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
rm -rf target/oci target/oci-bundle
umoci init --layout target/oci
umoci new --image "target/oci:$version"
umoci unpack --rootless --image "target/oci:$version" target/oci-bundle >/dev/null
install -m 0644 target/hookstamp.wasm target/oci-bundle/rootfs/plugin.wasm
umoci repack --image "target/oci:$version" target/oci-bundle
umoci config --image "target/oci:$version" \
  --config.label "org.opencontainers.image.title=hookstamp" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0"
umoci gc --layout target/oci
rm -rf target/oci-bundle
digest=$(python3 -c "import json,sys; print(next(m['digest'] for m in json.load(open('target/oci/index.json'))['manifests'] if m.get('annotations',{}).get('org.opencontainers.image.ref.name') == sys.argv[1]))" "$version")
echo "$digest" > target/oci.digest
echo "built target/oci:$version ($digest): one layer, plugin.wasm sha256 $(sha256sum target/hookstamp.wasm | cut -d' ' -f1)"
