"""`make image`'s OCI image through a real registry: Debian's
docker-registry on 127.0.0.1, skopeo to push and pull; the image pulled
back has one tar+gzip layer whose plugin.wasm is the built module, byte for
byte, and the registry serves it under the digest the build printed."""

import gzip
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import time
import urllib.request

import proxy
from cases import ROOT


def tool(name):
    exe = shutil.which(name)
    if not exe:
        raise RuntimeError(f"{name} is not installed: run `make setup`")
    return exe


def test_image_round_trips_through_a_local_registry(tmp_path):
    subprocess.run(["scripts/image.sh"], cwd=ROOT, check=True, capture_output=True)
    digest = (ROOT / "target" / "oci.digest").read_text().strip()
    version = json.loads((ROOT / "target" / "oci" / "index.json").read_text())["manifests"][0][
        "annotations"]["org.opencontainers.image.ref.name"]
    port = proxy.free_port()
    cfg = tmp_path / "registry.yml"
    cfg.write_text(f"version: 0.1\nstorage: {{filesystem: {{rootdirectory: {tmp_path / 'data'}}}}}\n"
                   f"http: {{addr: 127.0.0.1:{port}}}\nlog: {{level: error}}\n")
    reg = subprocess.Popen([tool("docker-registry"), "serve", str(cfg)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        ref = f"docker://127.0.0.1:{port}/hookstamp:{version}"
        subprocess.run([tool("skopeo"), "copy", "--dest-tls-verify=false",
                        f"oci:{ROOT / 'target' / 'oci'}:{version}", ref], check=True, capture_output=True)
        inspect = json.loads(subprocess.run([tool("skopeo"), "inspect", "--tls-verify=false", ref],
                                            check=True, capture_output=True, text=True).stdout)
        assert inspect["Digest"] == digest
        assert len(inspect["Layers"]) == 1
        pulled = tmp_path / "pulled"
        subprocess.run([tool("skopeo"), "copy", "--src-tls-verify=false",
                        f"docker://127.0.0.1:{port}/hookstamp@{digest}", f"oci:{pulled}:x"],
                       check=True, capture_output=True)
    finally:
        reg.terminate()
        reg.wait(10)
    index = json.loads((pulled / "index.json").read_text())
    manifest = json.loads((pulled / "blobs" / "sha256" / index["manifests"][0]["digest"][7:]).read_text())
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    blob = (pulled / "blobs" / "sha256" / layer["digest"][7:]).read_bytes()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tar:
        files = [m for m in tar.getmembers() if m.isfile()]
        assert [m.name.lstrip("./") for m in files] == ["plugin.wasm"]
        wasm = tar.extractfile(files[0]).read()
    assert hashlib.sha256(wasm).hexdigest() == hashlib.sha256(proxy.WASM.read_bytes()).hexdigest()
