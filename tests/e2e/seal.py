"""The stamp seal, as a queue written in Python verifies it: written from
the specification in docs/keys.md, apart from the filter's code. `python3
seal.py` prints its test vectors."""

import hashlib
import hmac
import time

VERSION = "hookstamp-seal-v1"


def canonical(t, method, path, stamps, body_sha256_hex):
    """The text the seal's HMAC covers: the version, the seal's time, the
    method, the path as sent, a name:value line for each stamp before the
    seal (in order), and the held body's SHA-256 (hex) or '-'."""
    lines = [VERSION, str(t), method, path] + [f"{n}:{v}" for n, v in stamps] + [body_sha256_hex or "-"]
    return ("\n".join(lines) + "\n").encode()


def make(key, t, method, path, stamps, body=None):
    """A seal value (what the filter stamps); `body` is the held body's
    bytes, or None where the filter did not hold it."""
    digest = hashlib.sha256(body).hexdigest() if body is not None else None
    mac = hmac.new(key, canonical(t, method, path, stamps, digest), hashlib.sha256).hexdigest()
    return f"t={t},v1={mac}"


def verify(keys, method, path, headers, body, held, tolerance_s=300, now=None):
    """What a queue does with a request: `headers` in arrival order; `held`
    whether the source is one whose body the filter holds (keys or a
    signature read it). Returns None when the seal holds, else why not."""
    now = int(time.time()) if now is None else now
    stamps = [(n.lower(), v) for n, v in headers if n.lower().startswith("x-hookstamp-")]
    seals = [v for n, v in stamps if n == "x-hookstamp-seal"]
    if not seals:
        return "unsealed"
    if len(seals) > 1 or stamps[-1][0] != "x-hookstamp-seal":
        return "the seal is not the one last stamp"
    fields = dict(p.split("=", 1) for p in seals[0].split(",") if "=" in p)
    try:
        t = int(fields["t"])
    except (KeyError, ValueError):
        return "malformed"
    if abs(now - t) > tolerance_s:
        return "stale"
    digest = hashlib.sha256(body).hexdigest() if held else None
    text = canonical(t, method, path, stamps[:-1], digest)
    for key in keys:
        want = hmac.new(key, text, hashlib.sha256).hexdigest()
        if hmac.compare_digest(want, fields.get("v1", "")):
            return None
    return "mismatch"


VECTORS = [
    # (key, t, method, path, stamps, body or None)
    (b"queue-key", 1700000000, "POST", "/webhooks/github",
     [("x-hookstamp-source", "github"), ("x-hookstamp-tenant", "default")], None),
    (b"queue-key", 1700000000, "POST", "/webhooks/stripe",
     [("x-hookstamp-source", "stripe"), ("x-hookstamp-tenant", "acme"),
      ("x-hookstamp-dedupe-key", "evt_1")], b'{"id":"evt_1"}'),
]

if __name__ == "__main__":
    for key, t, method, path, stamps, body in VECTORS:
        print(key.decode(), t, method, path, stamps, body and body.decode(), "->", make(key, t, method, path, stamps, body))
