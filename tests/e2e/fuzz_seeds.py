"""Seeds the fuzz corpora from the case tables: every config (good and bad)
for `config`, every case request for `resolve` (in its input layout)."""

import json
import sys
from pathlib import Path

from cases import ROOT, body_of, tables

out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "fuzz" / "corpus")
# Latin with accents, CJK and an emoji, escapes between: 82 bytes.
TEXT = "caf\u00e9 cr\u00e8me \u65e5\u672c\u8a9e\\n\U0001f600 na\u00efve r\u00e9sum\u00e9 ".encode() * 2
(out / "config").mkdir(parents=True, exist_ok=True)
(out / "resolve").mkdir(parents=True, exist_ok=True)
n = 0
for i, (name, table) in enumerate(tables()):
    (out / "config" / f"{name}.json").write_text(json.dumps(table["config"]))
    for j, case in enumerate(table["cases"]):
        req = case["request"]
        sel = i | (0x80 if req.get("method", "POST") != "POST" else 0)
        parts = [req["path"].lstrip("/").encode()]
        parts += [f"{k}:{v}".encode() for k, v in req.get("headers", [])]
        body = body_of(req) or b""
        if len(body) > 65536:
            continue
        (out / "resolve" / f"{name}-{j}").write_bytes(bytes([sel]) + b"\xff".join(parts + [body]))
        n += 1
        # A JSON body's first string value also as text beyond ASCII (past
        # the scanner's 16- and 64-byte runs), and cut inside a character:
        # the scanner checks UTF-8 where a string leaves ASCII.
        at = body.find(b'":"')
        if body.startswith(b"{") and at >= 0:
            for k, text in enumerate([TEXT, TEXT + b"\xc3", b"a" * 70 + b"\xed\xa0\x80"]):
                spliced = body[:at + 3] + text + body[at + 3:]
                (out / "resolve" / f"{name}-{j}-text{k}").write_bytes(bytes([sel]) + b"\xff".join(parts + [spliced]))
                n += 1
for k, row in enumerate(json.loads((ROOT / "tests" / "config_errors.json").read_text())):
    text = row.get("config_text") or json.dumps(row["config"])
    (out / "config" / f"error-{k}.json").write_text(text)
print(f"fuzz seeds: {n} requests, configs in {out}")
