"""The shared case table (tests/cases/*.json): loading, bodies, and the
native harness's answer for a case. Used by the Envoy tests and by bless."""

import json
import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "cases"
HARNESS = Path(os.environ.get("HOOKSTAMP_BIN", ROOT / "target" / "debug" / "hookstamp"))


def tables():
    """[(name, table)] for every case file, sorted by name."""
    return [(p.stem, json.loads(p.read_text())) for p in sorted(CASES.glob("*.json"))]


def body_of(req):
    """The request body as bytes: body (text), body_hex, body_pad (prefix +
    fill repeated so that the whole is `size` bytes + suffix), or body_parts
    ([text, times] pairs, concatenated)."""
    if "body" in req:
        return req["body"].encode()
    if "body_hex" in req:
        return bytes.fromhex(req["body_hex"])
    if "body_pad" in req:
        p = req["body_pad"]
        head, tail = p["prefix"].encode(), p["suffix"].encode()
        n = p["size"] - len(head) - len(tail)
        return head + p["fill"].encode() * n + tail
    if "body_parts" in req:
        return b"".join(text.encode() * times for text, times in req["body_parts"])
    return None


def harness(config, req, now=None, env=None):
    """What `hookstamp stamp` answers for this case (at `now`, with `env`
    added to the environment)."""
    with tempfile.TemporaryDirectory() as d:
        cfg = Path(d) / "config.json"
        cfg.write_text(json.dumps(config))
        args = [str(HARNESS), "stamp", str(cfg), "--path", req["path"],
                "--method", req.get("method", "POST")]
        for name, value in req.get("headers", []):
            args += ["-H", f"{name}: {value}"]
        body = body_of(req)
        if body is not None:
            (Path(d) / "body").write_bytes(body)
            args += ["--body", str(Path(d) / "body")]
        if now is not None:
            args += ["--now", str(now)]
        out = subprocess.run(args, check=True, capture_output=True, env={**os.environ, **(env or {})})
        return json.loads(out.stdout)


def agrees(want, got):
    """Whether an answer is what a case expects: `headers` lists every
    stamp in contract order; `stamps` names only the stamps a case is about
    (None: absent)."""
    if "stamps" not in want:
        return want == got
    have = dict(got.get("headers", []))
    return got["action"] == want["action"] and all(
        have.get(n) == v for n, v in want["stamps"].items())
