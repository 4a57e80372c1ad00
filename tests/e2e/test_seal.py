"""The stamp seal through a real Envoy (both builds), checked the way a
queue would: by the project's own verifier written apart from the filter
(seal.py), and by two RFC 9421 libraries, PyPI's http-message-signatures
and npm's (seal.mjs), each with the queue's policy around it (every
stamp-like header covered, the body matching its Content-Digest). Every
sealed request verifies in all three; a changed body, a changed or added
stamp in any spelling, another method, path or query, changed parameters,
an expired seal, a wrong key, and stamps made around the filter do not."""

import base64
import datetime
import hashlib
import hmac
import json
import re
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from http_message_signatures import (HTTPMessageSignaturesException, HTTPMessageVerifier, InvalidSignature,
                                     MappingKeyResolver, algorithms)

import proxy
import seal
import upstream
from cases import HARNESS

HERE = Path(__file__).resolve().parent
KEY = "seal-key-for-the-queue"
KID = "queue-2025-01"
KEYS = {KID: KEY.encode()}
CONFIG = {"seal": {"keys": [{"env": "HOOKSTAMP_SEAL_KEY"}], "key_id": KID}, "sources": [
    {"id": "github", "dedupe": "github",
     "sinks": [{"type": "kafka", "ordered": True, "ordering_key": {"header": "x-github-hook-id"}}]},
    {"id": "stripe", "dedupe": "stripe",
     "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
    {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_SECRET"}]}},
    {"id": "ghs", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_SECRET"}],
                                                 "mode": "stream"}},
]}
# Whether the filter holds (and so seals) the body: keys or a signature read
# it; a streamed signature holds nothing.
HELD = {"github": False, "stripe": True, "gh": True, "ghs": False}
# A client's own seal fields, in every spelling: none reaches the queue.
FORGED = [("signature-input", 'hookstamp=("@method");created=1;keyid="x"'), ("Signature", "hookstamp=:AAAA:"),
          ("content_digest", "sha-256=:AAAA:"), ("Signature_Input", "forged=()"), ("x-hookstamp-seal", "forged")]


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
        ("github", [("x-github-delivery", "d-1"), ("x-github-hook-id", "7")] + FORGED, b'{"action":"opened"}', ""),
        ("stripe", [("content-type", "application/json")] + FORGED,
         b'{"id":"evt_seal","data":{"object":{"customer":"cus_seal"}}}', "?x=1"),
        ("gh", [("x-github-delivery", "d-2"), ("x-hub-signature-256", sig)] + FORGED, gh_body, ""),
        ("ghs", [("x-github-delivery", "d-3"), ("x-hub-signature-256", sig)] + FORGED, gh_body, "?y"),
    ]


# ------------------------------------------------------------ the verifiers

class Message:
    """A request as http-message-signatures reads one: its headers' items()
    every field line in arrival order."""

    class Lines(list):
        def items(self):
            return list(self)

    def __init__(self, method, target, headers):
        self.method, self.url, self.headers = method, "http://queue.internal" + target, self.Lines(headers)


def pylib(keys, method, target, headers, body, digest):
    """PyPI's http-message-signatures with the queue's policy: None if the
    seal holds, else why not."""
    names = {n.lower() for n, _ in headers}
    need_digest = digest or "content-digest" in names
    require = ["@method", "@path", "@query", *sorted(n for n in names if seal.stamp_like(n))]
    require += ["content-digest"] if need_digest else []
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.HMAC_SHA256,
                                   key_resolver=MappingKeyResolver(public_keys=keys, private_keys={}))
    try:
        verifier.verify(Message(method, target, headers), max_age=datetime.timedelta(seconds=300),
                        expect_tag=seal.LABEL, require_components=require, body=body if need_digest else None)
    except (InvalidSignature, HTTPMessageSignaturesException) as e:
        return f"{type(e).__name__}: {e}"
    return None


def nodelib(keys, cases):
    """npm's http-message-signatures with the queue's policy (seal.mjs), one
    process for all: for each (method, target, headers, body, digest), None
    if the seal holds, else why not."""
    reqs = [{"method": m, "url": "http://queue.internal" + t, "headers": h, "body": base64.b64encode(b).decode(),
             "digest": d} for m, t, h, b, d in cases]
    keys = {k: v.decode() for k, v in keys.items()}
    r = subprocess.run(["node", str(HERE / "seal.mjs")], input=json.dumps({"keys": keys, "requests": reqs}),
                       cwd=HERE, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def verdicts(cases, keys=KEYS, now=None):
    """Each case's verdicts: (seal.py's, PyPI's, npm's), None where it holds."""
    node = nodelib(keys, cases)
    return [(seal.verify(keys, m, t, h, b, now=now, require_digest=d), pylib(keys, m, t, h, b, d), n)
            for (m, t, h, b, d), n in zip(cases, node)]


def all_hold(cases, **kw):
    for case, v in zip(cases, verdicts(cases, **kw)):
        assert v == (None, None, None), (case, v)


def none_hold(named, **kw):
    """Every verifier refuses every case: [(name, case)]."""
    for (name, case), v in zip(named, verdicts([c for _, c in named], **kw)):
        assert all(x is not None for x in v), (name, case, v)


# ------------------------------------------------------ what a queue refuses

def tampered(method, target, headers, body, held):
    """The ways a sealed request can be changed on its way to the queue, each
    of which the queue must refuse: [(what, case)]."""
    def case(m=method, t=target, h=headers, b=body):
        return (m, t, h, b, held)

    def replace(name, value):
        return [(n, value if n.lower() == name else v) for n, v in headers]

    source = target.split("/")[2].split("?")[0]
    out = [
        ("a stamp changed", case(h=replace("x-hookstamp-tenant", "evil"))),
        ("a stamp repeated", case(h=headers + [("X-Hookstamp-Dedupe-Key", "chosen")])),
        ("a stamp spelled with underscores", case(h=headers + [("x_hookstamp_dedupe_key", "chosen")])),
        ("a stamp in mixed case and underscores", case(h=headers + [("X_Hookstamp_Verified", "true")])),
        ("a stamp removed", case(h=[(n, v) for n, v in headers if n.lower() != "x-hookstamp-tenant"])),
        ("another method", case(m="PUT")),
        ("another path", case(t=target.replace(f"/webhooks/{source}", "/webhooks/other"))),
        ("another query", case(t=target + ("&evil=1" if "?" in target else "?evil=1"))),
        ("a later expiry", case(h=[(n, re.sub(r"expires=\d+", "expires=9999999999", v)) for n, v in headers])),
        ("an earlier creation", case(h=[(n, re.sub(r"created=(\d+)", lambda m: f"created={int(m[1]) - 1}", v))
                                      for n, v in headers])),
        ("unsealed", case(h=[(n, v) for n, v in headers if n.lower() not in ("signature", "signature-input")])),
        ("a second signature input", case(h=headers + [("Signature-Input", 'hookstamp=("@method")')])),
    ]
    if held:
        out += [
            ("a changed body", case(b=body + b" ")),
            ("the digest removed", case(h=[(n, v) for n, v in headers if n.lower() != "content-digest"])),
            ("the digest of another body",
             case(h=replace("content-digest", seal.digest_field(body + b" ")), b=body + b" ")),
        ]
    return out


def received(rec):
    """The headers the queue received, as (name, value) in arrival order."""
    return [tuple(h) for h in rec["headers"]]


def test_every_sealed_request_verifies_and_no_tampered_one_does(edge):
    genuine, bad = [], []
    for source, headers, body, query in requests():
        status, rec, path = send(edge, source, headers, body, query)
        assert status == 200, (source, rec)
        assert rec["path"] == path
        got = received(rec)
        names = [n.lower() for n, _ in got]
        # The client's seal fields are gone, in every spelling; the filter's
        # own are after the stamps, once each.
        assert "forged" not in json.dumps(got) and "AAAA" not in json.dumps(got), got
        for n in ("signature_input", "content_digest", "x-hookstamp-seal"):
            assert n not in names
        assert names.count("signature-input") == names.count("signature") == 1
        assert names.count("content-digest") == (1 if HELD[source] else 0), source
        fields = dict((n, v) for n, v in rec["seal"])
        covered = seal.dictionary(fields["signature-input"])["hookstamp"][0]
        want = ["@method", "@path", "@query"] + [n for n, _ in rec["stamps"]] + (
            ["content-digest"] if HELD[source] else [])
        assert [c for c, _ in covered] == want, source
        if source == "ghs":
            assert dict(rec["stamps"])["x-hookstamp-verified"] == "stream"
        genuine.append(("POST", path, got, body, HELD[source]))
        bad += tampered("POST", path, got, body, HELD[source])
        if not HELD[source]:
            # Where the filter did not hold the body, the seal does not
            # cover it, and says so (no content-digest).
            assert seal.verify(KEYS, "POST", path, got, body + b" ") is None
    all_hold(genuine)
    # A rotation: the queue knows the next key's id too.
    all_hold(genuine, keys={**KEYS, "queue-2025-02": b"next key"})
    none_hold(bad)
    none_hold([("another key", c) for c in genuine], keys={KID: b"another key"})
    none_hold([("another key id", c) for c in genuine], keys={"queue-2024-12": KEY.encode()})
    # The seal is good for 300 s, and no longer.
    t = int(re.search(r"created=(\d+)", dict(genuine[0][2])["signature-input"])[1])
    assert seal.verify(KEYS, *genuine[0][:4], now=t + 300) is None
    assert seal.verify(KEYS, *genuine[0][:4], now=t + 306) == "stale"


def test_each_request_has_its_own_nonce(edge):
    """Two requests alike in every stamp, in the same second, differ in their
    nonce: Envoy's x-request-id goes into it."""
    nonces = set()
    for _ in range(2):
        _, rec, _ = send(edge, "github", [("x-github-delivery", "d-same")], b"{}")
        nonces.add(re.search(r'nonce="([0-9a-f]{32})"', dict(rec["seal"])["signature-input"])[1])
    assert len(nonces) == 2


def test_stamps_made_anywhere_but_the_filter_do_not_verify(edge):
    # A request that reached the queue around the filter (another listener,
    # the queue's own port): a client's stamps, unsealed or with a copied seal.
    status, rec, path = send(edge, "github", [("x-github-delivery", "d-9"), ("x-github-hook-id", "7")], b"{}")
    copied = [(n, v) for n, v in received(rec) if seal.seal_like(n)]
    client = [("x-hookstamp-source", "github"), ("x-hookstamp-tenant", "default"),
              ("x-hookstamp-dedupe-key", "d-chosen")]
    none_hold([("unsealed", ("POST", path, client, b"{}", False)),
               ("a copied seal", ("POST", path, client + copied, b"{}", False))])
    assert seal.verify(KEYS, "POST", path, client, b"{}") == "unsealed"


def stamp_cli(now, body):
    """`hookstamp stamp --now` for the stripe source: the headers it adds."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(CONFIG, f)
    out = subprocess.run([str(HARNESS), "stamp", f.name, "--path", "/webhooks/stripe", "-H",
                          "content-type: application/json", "--body", "-", "--now", str(now)],
                         input=body, capture_output=True, env={"HOOKSTAMP_SEAL_KEY": KEY, "GH_SECRET": "x",
                                                               "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return [tuple(h) for h in json.loads(out.stdout)["headers"]]


def test_the_harness_seals_as_the_filter_does():
    """`hookstamp stamp --now` gives the seal the filter gives at that
    second: all three verifiers take it; one made 400 s ago has expired."""
    body = b'{"id":"evt_cli","data":{"object":{"customer":"cus_cli"}}}'
    now = int(time.time())
    headers = stamp_cli(now, body)
    assert [n for n, _ in headers[-3:]] == ["content-digest", "signature-input", "signature"]
    assert f"created={now};expires={now + 300};" in headers[-2][1] and f'keyid="{KID}"' in headers[-2][1]
    request = [("content-type", "application/json")] + headers
    all_hold([("POST", "/webhooks/stripe", request, body, True)])
    old = [("content-type", "application/json")] + stamp_cli(now - 400, body)
    none_hold([("expired", ("POST", "/webhooks/stripe", old, body, True))])
    assert seal.verify(KEYS, "POST", "/webhooks/stripe", old, body, now=now - 400) is None
    # The same second, the same seal: reproducible.
    assert stamp_cli(now - 400, body) == old[1:]
