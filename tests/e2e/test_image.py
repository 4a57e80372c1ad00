"""`make image`'s OCI image through a real registry: Debian's
docker-registry on 127.0.0.1, skopeo to push and pull; the image pulled
back has one tar+gzip layer whose plugin.wasm is the built module, byte for
byte, and the registry serves it under the digest the build printed. The
build is reproducible: the same module gives the same digest every time."""

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
import urllib.request
from pathlib import Path

import proxy
from cases import ROOT


def tool(name):
    exe = shutil.which(name)
    if not exe:
        raise RuntimeError(f"{name} is not installed: run `make setup`")
    return exe


def module(tmp_path):
    """A copy of the built module: what the image holds, whatever rebuilds
    target/hookstamp.wasm meanwhile."""
    copy = tmp_path / "hookstamp.wasm"
    copy.write_bytes(proxy.WASM.read_bytes())
    return copy


def build(out, wasm, **env):
    """scripts/image.sh of `wasm` into `out`; returns the digest it printed
    and wrote."""
    r = subprocess.run(["scripts/image.sh", str(out)], cwd=ROOT, check=True, capture_output=True, text=True,
                       env={**os.environ, "HOOKSTAMP_WASM": str(wasm), **env})
    digest = Path(f"{out}.digest").read_text().strip()
    assert f"({digest})" in r.stdout, r.stdout
    return digest


def blob(layout, digest):
    return (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()


def test_image_round_trips_through_a_local_registry(tmp_path):
    oci, wasm = tmp_path / "oci", module(tmp_path)
    digest = build(oci, wasm)
    version = json.loads((oci / "index.json").read_text())["manifests"][0][
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
                        f"oci:{oci}:{version}", ref], check=True, capture_output=True)
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
        pulled_wasm = tar.extractfile(files[0]).read()
    assert hashlib.sha256(pulled_wasm).hexdigest() == hashlib.sha256(wasm.read_bytes()).hexdigest()


def test_the_same_module_gives_the_same_digest_on_every_build(tmp_path):
    """The manifests pin the image by digest: two builds of one module (a
    second apart, so a build time would differ) give one digest; every time
    in the image is SOURCE_DATE_EPOCH (0 by default), and another epoch
    gives another digest, stable too."""
    wasm = module(tmp_path)
    first = build(tmp_path / "a", wasm)
    time.sleep(1.1)
    # Another copy, elsewhere, of another mode and time: the same image.
    other = tmp_path / "elsewhere" / "module.wasm"
    other.parent.mkdir()
    other.write_bytes(wasm.read_bytes())
    other.chmod(0o600)
    assert build(tmp_path / "b", other) == first
    assert (tmp_path / "a" / "index.json").read_bytes() == (tmp_path / "b" / "index.json").read_bytes()
    layout = tmp_path / "a"
    manifest = json.loads(blob(layout, first))
    config = json.loads(blob(layout, manifest["config"]["digest"]))
    assert config["created"] == "1970-01-01T00:00:00Z"
    assert {h["created"] for h in config.get("history", [])} <= {"1970-01-01T00:00:00Z"}
    (layer,) = manifest["layers"]
    raw = blob(layout, layer["digest"])
    # gzip's header time: umoci's is a constant (Go's zero time, cut to 32
    # bits), never the build's.
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as g:
        g.read()
        assert abs(g.mtime - time.time()) > 86400 * 365
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(raw))) as tar:
        members = tar.getmembers()
    assert "plugin.wasm" in [m.name.lstrip("./") for m in members]
    assert {(m.mtime, m.uid, m.gid) for m in members} == {(0, 0, 0)}
    later = build(tmp_path / "c", wasm, SOURCE_DATE_EPOCH="1700000000")
    assert later != first
    assert build(tmp_path / "d", wasm, SOURCE_DATE_EPOCH="1700000000") == later
