"""SHA-256 and HMAC-SHA256 as each build computes them (in the .wasm,
hookstamp's own compression, src/sha256/block.rs, in WebAssembly's
vectors; in the module, ring's) held to Python's hashlib and hmac through
a real Envoy, at every body length around SHA-256's 64-byte blocks and
their 55/56-byte padding edge: the body's digest as its dedupe key, and
GitHub's signature over it, right and one bit wrong."""

import hashlib
import hmac
import random
import uuid

import pytest

import proxy
import upstream

SECRET = "digest-secret"
CONFIG = {"sources": [
    {"id": "digest", "dedupe": {"sha256": "body"}},
    {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_SECRET"}]}},
]}
# Every length to four blocks, then past the buffer's other edges.
LENGTHS = list(range(0, 260)) + [1000, 1023, 1024, 1025, 4095, 4096, 4097, 60000]


@pytest.fixture(scope="module")
def edge(build):
    up = upstream.start()
    port = proxy.free_port()
    e = build.start({"d": (port, CONFIG)}, up.server_address[1], {"GH_SECRET": SECRET})
    yield {"port": port, "up": up}
    e.stop()
    up.shutdown()


def post(edge, path, body, headers=()):
    tid = uuid.uuid4().hex
    status, _, _ = proxy.request(edge["port"], "POST", path, list(headers), body=body, test_id=tid)
    record = edge["up"].records.get(tid)
    return status, dict(record["stamps"]) if record else None


def test_sha256_and_hmac_agree_with_pythons_at_every_length(edge):
    rng = random.Random(9421)
    for n in LENGTHS:
        body = rng.randbytes(n)
        status, stamps = post(edge, "/webhooks/digest", body)
        assert status == 200 and stamps["x-hookstamp-dedupe-key"] == hashlib.sha256(body).hexdigest(), n
        sig = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        delivery = [("x-github-delivery", f"d-{n}"), ("x-github-event", "push")]
        status, stamps = post(edge, "/webhooks/gh", body, delivery + [("x-hub-signature-256", sig)])
        assert status == 200 and stamps["x-hookstamp-verified"] == "true", n
        # One bit of the signature wrong: refused.
        bad = sig[:-1] + ("0" if sig[-1] != "0" else "1")
        status, stamps = post(edge, "/webhooks/gh", body, delivery + [("x-hub-signature-256", bad)])
        assert status == 401 and stamps is None, n
