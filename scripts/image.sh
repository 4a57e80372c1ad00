#!/usr/bin/env bash
# Builds target/oci, an OCI image layout holding the filter as Istio's
# WasmPlugin fetcher (and Envoy Gateway) take it: one tar+gzip layer with
# plugin.wasm at its root. No docker daemon: umoci (Debian). Push it with
#   skopeo copy oci:target/oci:<version> docker://REGISTRY/hookstamp:<version>
# and reference it by the digest this prints (also in target/oci.digest).
#
# Reproducible: the same target/hookstamp.wasm gives the same manifest
# digest on every build and every machine. Every time in the image is
# SOURCE_DATE_EPOCH (default 0, 1970-01-01T00:00:00Z): the config's
# created time, the layer's history entry, the layer's file times
# (plugin.wasm and its directory); owners are 0:0 (umoci's rootless
# mapping), the modes fixed (0644, the directory 0755), and umoci's gzip
# header carries no build time.
#
#   scripts/image.sh [OUT]    the layout in OUT (default target/oci), the
#                             digest in OUT.digest; the module is
#                             $HOOKSTAMP_WASM (default target/hookstamp.wasm)
set -euo pipefail
cd "$(dirname "$0")/.."
command -v umoci >/dev/null || { echo "umoci is missing: run make setup (or scripts/setup.sh image)" >&2; exit 1; }
out=${1:-target/oci}
wasm=${HOOKSTAMP_WASM:-target/hookstamp.wasm}
[ -f "$wasm" ] || { echo "$wasm is missing: run make wasm" >&2; exit 1; }
epoch=${SOURCE_DATE_EPOCH:-0}
case "$epoch" in '' | *[!0-9]*) echo "SOURCE_DATE_EPOCH must be whole seconds since 1970, got '$epoch'" >&2; exit 1 ;; esac
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
bundle=$(mktemp -d)
trap 'rm -rf "$bundle"' EXIT
rm -rf "$out"
mkdir -p "$(dirname "$out")"
umoci init --layout "$out"
umoci new --image "$out:$version"
umoci unpack --rootless --image "$out:$version" "$bundle/b" >/dev/null
install -m 0644 "$wasm" "$bundle/b/rootfs/plugin.wasm"
chmod 0755 "$bundle/b/rootfs"
# The layer's tar records each file's time: fixed, as umoci has no option.
touch -h -d "@$epoch" "$bundle/b/rootfs/plugin.wasm" "$bundle/b/rootfs"
umoci repack --image "$out:$version" --history.created "$created" \
  --history.created_by "scripts/image.sh: plugin.wasm" "$bundle/b"
umoci config --no-history --image "$out:$version" --created "$created" \
  --config.label "org.opencontainers.image.title=hookstamp" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.licenses=Apache-2.0"
umoci gc --layout "$out"
digest=$(python3 -c "import json,sys; print(next(m['digest'] for m in json.load(open(sys.argv[1] + '/index.json'))['manifests'] if m.get('annotations',{}).get('org.opencontainers.image.ref.name') == sys.argv[2]))" "$out" "$version")
echo "$digest" > "$out.digest"
echo "built $out:$version ($digest): one layer, plugin.wasm sha256 $(sha256sum "$wasm" | cut -d' ' -f1)"
