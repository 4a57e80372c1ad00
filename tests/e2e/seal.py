"""The stamp seal as a queue written in Python checks it: an HTTP message
signature (RFC 9421, hmac-sha256) with an RFC 9530 Content-Digest, written
from docs/keys.md and the RFCs, apart from the filter's code and from any
signature library (test_seal.py checks the filter with two of those too).
`python3 seal.py` prints docs/keys.md's test vectors."""

import base64
import hashlib
import hmac
import re
import time

LABEL = "hookstamp"
ALG = "hmac-sha256"
STAMP_PREFIX = "x-hookstamp-"
SEAL_FIELDS = ("signature-input", "signature", "content-digest")
DERIVED = ("@method", "@path", "@query")


def stamp_like(name):
    """A name a queue's server could read as a stamp: any case, `_` for `-`
    (gunicorn, WSGI and others fold x_hookstamp_dedupe_key into the stamp)."""
    return name.lower().replace("_", "-").startswith(STAMP_PREFIX)


def seal_like(name):
    return name.lower().replace("_", "-") in SEAL_FIELDS


# ------------------------------------------------ Structured Fields (RFC 8941)
# Only what the seal's fields use: a Dictionary whose members are Inner Lists
# or Items (Strings, Integers, Tokens, Byte Sequences, Booleans), with
# Parameters.

class Malformed(ValueError):
    pass


KEY = re.compile(r"[a-z*][a-z0-9_.*-]*")
TOKEN = re.compile(r"[A-Za-z*][A-Za-z0-9!#$%&'*+.^_`|~:/-]*")


class Reader:
    def __init__(self, text):
        self.s, self.i = text, 0

    def peek(self):
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self, pattern):
        m = pattern.match(self.s, self.i)
        if not m:
            raise Malformed(f"at {self.i}: {self.s[self.i:self.i + 10]!r}")
        self.i = m.end()
        return m.group(0)

    def spaces(self, ows=False):
        while self.peek() == " " or (ows and self.peek() == "\t"):
            self.i += 1

    def bare_item(self):
        c = self.peek()
        if c == '"':
            out, self.i = [], self.i + 1
            while True:
                c = self.peek()
                self.i += 1
                if c == "":
                    raise Malformed("an unterminated string")
                if c == "\\":
                    c = self.peek()
                    if c not in ('"', "\\"):
                        raise Malformed("a bad escape")
                    self.i += 1
                elif c == '"':
                    return "".join(out)
                elif not " " <= c <= "~":
                    raise Malformed("a string byte")
                out.append(c)
        if c == ":":
            self.i += 1
            raw = self.take(re.compile(r"[A-Za-z0-9+/=]*"))
            if self.peek() != ":":
                raise Malformed("an unterminated byte sequence")
            self.i += 1
            return base64.b64decode(raw, validate=True)
        if c == "?":
            self.i += 1
            return {"1": True, "0": False}.get(self.take(re.compile(r"[01]")))
        if c == "-" or c.isdigit():
            n = self.take(re.compile(r"-?[0-9]{1,15}(?![.0-9])"))
            return int(n)
        return Token(self.take(TOKEN))

    def params(self):
        out = {}
        while self.peek() == ";":
            self.i += 1
            self.spaces()
            k = self.take(KEY)
            v = True
            if self.peek() == "=":
                self.i += 1
                v = self.bare_item()
            out[k] = v
        return out

    def member(self):
        if self.peek() == "(":
            self.i += 1
            items = []
            while True:
                self.spaces()
                if self.peek() == ")":
                    self.i += 1
                    return items, self.params()
                items.append((self.bare_item(), self.params()))
                if self.peek() not in (" ", ")"):
                    raise Malformed("an inner list")
        return self.bare_item(), self.params()


class Token(str):
    pass


def dictionary(text):
    """RFC 8941's Dictionary: {key: (value, params)}, a value an Inner List
    ([(item, params)]) or an Item; a key given twice keeps its last value."""
    r, out = Reader(text), {}
    r.spaces()
    while r.peek():
        k = r.take(KEY)
        if r.peek() == "=":
            r.i += 1
            out[k] = r.member()
        else:
            out[k] = (True, r.params())
        r.spaces(ows=True)
        if not r.peek():
            break
        if r.peek() != ",":
            raise Malformed("a dictionary")
        r.i += 1
        r.spaces(ows=True)
        if not r.peek():
            raise Malformed("a trailing comma")
    return out


def serialize(value):
    if isinstance(value, bool):
        return "?1" if value else "?0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, bytes):
        return ":" + base64.b64encode(value).decode() + ":"
    if isinstance(value, Token):
        return str(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def serialize_params(params):
    return "".join(f";{k}" if v is True else f";{k}={serialize(v)}" for k, v in params.items())


def serialize_inner_list(items, params):
    return "(" + " ".join(serialize(i) + serialize_params(p) for i, p in items) + ")" + serialize_params(params)


# ---------------------------------------------------------- the signature base

def split_target(target):
    """(@path, @query) of a request target: the path without its query ('/'
    if empty), and the query with its '?' ('?' alone if none)."""
    path, q, query = target.partition("?")
    return path or "/", "?" + query


def field_value(headers, name):
    """A field's value in the signature base (RFC 9421 section 2.1): every
    line of that name (any case), trimmed, joined by ', '; None if absent."""
    lines = [v.strip(" \t") for n, v in headers if n.lower() == name]
    return ", ".join(lines) if lines else None


def component_lines(method, target, headers, covered):
    """The signature base's lines before @signature-params, each with its
    newline; None if a covered field is absent."""
    path, query = split_target(target)
    derived = {"@method": method, "@path": path, "@query": query}
    out = []
    for name in covered:
        value = derived[name] if name in derived else field_value(headers, name)
        if value is None:
            return None
        out.append(f'"{name}": {value}\n')
    return "".join(out)


def digest_field(body):
    """RFC 9530's Content-Digest of a body, with sha-256."""
    return "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":"


def nonce(key, created, request_id, lines):
    """The filter's nonce: derived, so that a seal made at a given second is
    reproducible; unique to each request by its x-request-id, and unknown
    in advance to anyone without the key (it hashes the HMAC of the lines)."""
    mac = hmac.new(key, lines.encode(), hashlib.sha256).digest()
    return hashlib.sha256(f"hookstamp-nonce\n{created}\n{request_id}\n".encode() + mac).hexdigest()[:32]


def make(key, key_id, created, expires_s, method, target, stamps, body=None, request_id=""):
    """The fields the filter adds after `stamps` ([(name, value)] in
    order): content-digest (where it held the whole `body`),
    signature-input and signature."""
    fields = [("content-digest", digest_field(body))] if body is not None else []
    covered = list(DERIVED) + [n for n, _ in stamps] + [n for n, _ in fields]
    lines = component_lines(method, target, stamps + fields, covered)
    params = {"created": created, "expires": created + expires_s, "nonce": nonce(key, created, request_id, lines),
              "alg": ALG, "keyid": key_id, "tag": LABEL}
    inner = serialize_inner_list([(c, {}) for c in covered], params)
    base = lines + '"@signature-params": ' + inner
    mac = hmac.new(key, base.encode(), hashlib.sha256).digest()
    return fields + [("signature-input", f"{LABEL}={inner}"), ("signature", f"{LABEL}={serialize(mac)}")]


# ------------------------------------------------------------- the queue's side

def verify(keys, method, target, headers, body, now=None, max_age_s=300, skew_s=5, require_digest=False):
    """What a queue does with a request: `keys` {keyid: key bytes} (the
    keys it accepts), `headers` [(name, value)] in arrival order, `body` the
    bytes received; `require_digest` for a source whose body the filter
    holds. None when the seal holds, else why not."""
    now = int(time.time()) if now is None else now
    sig_input, sig = field_value(headers, "signature-input"), field_value(headers, "signature")
    if sig_input is None or sig is None:
        return "unsealed"
    try:
        inputs, sigs = dictionary(sig_input), dictionary(sig)
    except (Malformed, ValueError):
        return "malformed"
    if LABEL not in inputs or LABEL not in sigs:
        return "unsealed"
    (covered, params), (mac, _) = inputs[LABEL], sigs[LABEL]
    if not isinstance(covered, list) or not isinstance(mac, bytes) or \
            not all(isinstance(c, str) and not isinstance(c, Token) and not p for c, p in covered):
        return "malformed"
    covered = [c for c, _ in covered]
    if params.get("tag") != LABEL or params.get("alg") != ALG:
        return "not the filter's seal"
    created, expires = params.get("created"), params.get("expires")
    if not (type(created) is int and type(expires) is int and isinstance(params.get("nonce"), str)):
        return "malformed"
    if expires < now - skew_s or created > now + skew_s or now - created > max_age_s + skew_s:
        return "stale"
    why = coverage(covered, headers, body, require_digest)
    if why:
        return why
    key = keys.get(params.get("keyid"))
    if key is None:
        return "unknown key"
    lines = component_lines(method, target, headers, covered)
    if lines is None:
        return "a covered field is missing"
    # The label's member as RFC 9421 section 2.3 takes it: serialized again.
    base = lines + '"@signature-params": ' + serialize_inner_list(*inputs[LABEL])
    if not hmac.compare_digest(hmac.new(key, base.encode(), hashlib.sha256).digest(), mac):
        return "mismatch"
    return None


def coverage(covered, headers, body, require_digest):
    """What the queue's policy asks of the covered list: the method, path and
    query; every stamp-like header in the spelling it came in (a
    x_hookstamp_dedupe_key the signature does not name is refused, not
    ignored); the seal's own fields in their standard spelling only; a
    Content-Digest covered and matching the body."""
    if any(d not in covered for d in DERIVED):
        return "the method, path or query is not covered"
    for name, _ in headers:
        if stamp_like(name) and name.lower() not in covered:
            return f"an uncovered stamp: {name}"
        if seal_like(name) and name.lower() not in SEAL_FIELDS:
            return f"a seal field spelled another way: {name}"
    digest = field_value(headers, "content-digest")
    if "content-digest" in covered:
        if digest is None:
            return "a covered field is missing"
        try:
            got = dictionary(digest).get("sha-256", (None, {}))[0]
        except (Malformed, ValueError):
            return "malformed"
        if not isinstance(got, bytes) or not hmac.compare_digest(got, hashlib.sha256(body).digest()):
            return "the body does not match its digest"
    elif digest is not None or require_digest:
        return "the body is not covered"
    return None


VECTORS = [
    # (key, key_id, created, expires_s, method, target, stamps, body or None)
    (b"queue-key", "queue-1", 1700000000, 300, "POST", "/webhooks/github",
     [("x-hookstamp-source", "github"), ("x-hookstamp-tenant", "default")], None),
    (b"queue-key", "queue-1", 1700000000, 300, "POST", "/webhooks/stripe?x=1",
     [("x-hookstamp-source", "stripe"), ("x-hookstamp-tenant", "acme"), ("x-hookstamp-dedupe-key", "evt_1"),
      ("x-hookstamp-dedupe-ttl-ms", "259200000"), ("x-hookstamp-idempotency-key", "acme:stripe:evt_1")],
     b'{"id":"evt_1"}'),
]

if __name__ == "__main__":
    for key, key_id, t, expires_s, method, target, stamps, body in VECTORS:
        print(method, target, "body:", "not held" if body is None else body.decode())
        for name, value in make(key, key_id, t, expires_s, method, target, stamps, body):
            print(f"  {name}: {value}")
