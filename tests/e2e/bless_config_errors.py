"""Fills in the `errors` of tests/config_errors.json from the harness.

The file is the one source of truth for the config error cases: to add one,
add a row with its `name` and `config` (or `config_text` for text that is
not JSON; `sinks_repeat: N` gives the first source N empty sinks) and
`"errors": []`, run this from the project root after `cargo build`, and
review every message it writes before committing. The codes of each row
(its errors' scopes and codes, which the table test asserts) are written by
`HOOKSTAMP_BLESS=1 cargo test --test table config_error_table`, which needs
the sentences blessed first: run this, then that, then this again (it
writes the file in its own layout)."""
import json
import os
import subprocess
import tempfile

PATH = "tests/config_errors.json"
rows = json.load(open(PATH))
with tempfile.TemporaryDirectory() as d:
    for row in rows:
        if "config_text" in row:
            text = row["config_text"]
        else:
            cfg = json.loads(json.dumps(row["config"]))
            if "sinks_repeat" in row:
                cfg["sources"][0]["sinks"] = [{}] * row["sinks_repeat"]
            text = json.dumps(cfg)
        p = os.path.join(d, "c.json")
        open(p, "w").write(text)
        r = subprocess.run(["target/debug/hookstamp", "check", p], capture_output=True, text=True)
        assert r.returncode == 1, (row["name"], r.stdout, r.stderr)
        # The errors only: check says the warnings beside them.
        row["errors"] = [l for l in r.stderr.splitlines() if not l.startswith("warning: ")]
open(PATH, "w").write("[\n" + ",\n".join("  " + json.dumps(r) for r in rows) + "\n]\n")
for row in rows:
    print("##", row["name"])
    for e in row["errors"]:
        print("   ", e[:200])
