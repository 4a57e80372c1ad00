"""The stamp seal through a real Envoy, checked by the queue's side written
apart from the filter (seal.py): every sealed request verifies; a changed
body, a client-made or copied seal, a stale one and a wrong key do not."""

import hashlib
import hmac
import json
import subprocess
import tempfile
import time
import uuid

import pytest

import proxy
import seal
import upstream
from cases import HARNESS

KEY = "seal-key-for-the-queue"
CONFIG = {"seal": {"keys": [{"env": "HOOKSTAMP_SEAL_KEY"}]}, "sources": [
    {"id": "github", "dedupe": "github",
     "sinks": [{"type": "kafka", "ordered": True, "ordering_key": {"header": "x-github-hook-id"}}]},
    {"id": "stripe", "dedupe": "stripe",
     "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
    {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_SECRET"}]}},
]}
# Whether the filter holds (and so seals) the body: keys or a signature read it.
HELD = {"github": False, "stripe": True, "gh": True}


@pytest.fixture(scope="module")
def edge(build):
    """An Envoy of each build ([wasm], [so]) sealing what it stamps."""
    up = upstream.start()
    port = proxy.free_port()
    e = build.start({"s": (port, CONFIG)}, up.server_address[1], {"HOOKSTAMP_SEAL_KEY": KEY, "GH_SECRET": "gh-secret"})
    yield {"port": port, "up": up}
    e.stop()
    up.shutdown()


def send(edge, source, headers, body, query=""):
    tid = uuid.uuid4().hex
    path = f"/webhooks/{source}{query}"
    status = proxy.request(edge["port"], "POST", path, headers, body=body, test_id=tid)[0]
    return status, edge["up"].records.get(tid), path


def requests():
    gh_body = b'{"zen":"sealed"}'
    sig = "sha256=" + hmac.new(b"gh-secret", gh_body, hashlib.sha256).hexdigest()
    return [
        ("github", [("x-github-delivery", "d-1"), ("x-github-hook-id", "7"), ("x-hookstamp-seal", "t=1,v1=forged")],
         b'{"action":"opened"}', ""),
        ("stripe", [("content-type", "application/json")],
         b'{"id":"evt_seal","data":{"object":{"customer":"cus_seal"}}}', "?x=1"),
        ("gh", [("x-github-delivery", "d-2"), ("x-hub-signature-256", sig)], gh_body, ""),
    ]


def test_every_sealed_request_verifies_in_the_queues_own_code(edge):
    for source, headers, body, query in requests():
        status, rec, path = send(edge, source, headers, body, query)
        assert status == 200, source
        assert rec["path"] == path
        stamps = rec["stamps"]
        assert stamps[-1][0] == "x-hookstamp-seal" and "forged" not in stamps[-1][1]
        assert seal.verify([KEY.encode()], "POST", path, stamps, body, HELD[source]) is None, (source, stamps)
        # What the queue detects.
        assert seal.verify([KEY.encode()], "POST", path, stamps, body + b" ", HELD[source]) == (
            "mismatch" if HELD[source] else None), "the held body is covered"
        assert seal.verify([b"another key"], "POST", path, stamps, body, HELD[source]) == "mismatch"
        assert seal.verify([b"another key", KEY.encode()], "POST", path, stamps, body, HELD[source]) is None, \
            "a rotation list"
        t = int(stamps[-1][1].split(",")[0][2:])
        assert seal.verify([KEY.encode()], "POST", path, stamps, body, HELD[source], now=t + 301) == "stale"
        assert seal.verify([KEY.encode()], "POST", "/webhooks/other", stamps, body, HELD[source]) == "mismatch"
        changed = [s if s[0] != "x-hookstamp-tenant" else [s[0], "evil"] for s in stamps]
        assert seal.verify([KEY.encode()], "POST", path, changed, body, HELD[source]) == "mismatch"


def test_stamps_made_anywhere_but_the_filter_do_not_verify(edge):
    # A request that reached the queue around the filter (another listener,
    # the queue's own port): a client's stamps, unsealed or with a copied seal.
    status, rec, path = send(edge, "github", [("x-github-delivery", "d-9"), ("x-github-hook-id", "7")], b"{}")
    copied = rec["stamps"][-1]
    client = [["x-hookstamp-source", "github"], ["x-hookstamp-tenant", "default"],
              ["x-hookstamp-dedupe-key", "d-chosen"]]
    assert seal.verify([KEY.encode()], "POST", path, client, b"{}", False) == "unsealed"
    assert seal.verify([KEY.encode()], "POST", path, client + [copied], b"{}", False) == "mismatch"


def test_the_harness_seals_as_the_filter_does():
    """`hookstamp stamp --now` gives the seal the filter gives at that
    second: the queue's code verifies both."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(CONFIG, f)
    body = b'{"id":"evt_cli","data":{"object":{"customer":"cus_cli"}}}'
    now = int(time.time())
    out = subprocess.run([str(HARNESS), "stamp", f.name, "--path", "/webhooks/stripe", "-H",
                          "content-type: application/json", "--body", "-", "--now", str(now)],
                         input=body, capture_output=True, env={"HOOKSTAMP_SEAL_KEY": KEY, "GH_SECRET": "x",
                                                               "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    headers = json.loads(out.stdout)["headers"]
    assert headers[-1][0] == "x-hookstamp-seal" and headers[-1][1].startswith(f"t={now},")
    assert seal.verify([KEY.encode()], "POST", "/webhooks/stripe", headers, body, True, now=now) is None
