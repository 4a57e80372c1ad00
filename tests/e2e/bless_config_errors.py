"""Regenerates tests/config_errors.json from the harness: review the diff before committing."""
import json, subprocess, tempfile, os
S = lambda **kw: {"sources": [dict({"id": "s1"}, **kw)]}
configs = [
 ("not JSON", "{\"sources\": ["),
 ("not an object", []),
 ("sources missing", {}),
 ("unknown top-level field", {"sources": [], "prefx": "/x"}),
 ("bad routing, delivery, prefix, max_json_bytes", {"routing": "host", "delivery": "later", "prefix": "webhooks", "max_json_bytes": 0, "sources": []}),
 ("prefix that no path can match (found by fuzzing)", {"prefix": "/ho/?/ok*s", "sources": [{"id": "github", "dedupe": "github"}]}),
 ("prefix with whitespace or a fragment", {"prefix": "/web hooks#x", "sources": []}),
 ("max_json_bytes not an integer", {"max_json_bytes": 1.5, "sources": []}),
 ("max_held_bytes not a positive integer", {"max_held_bytes": -1, "sources": []}),
 ("max_held_bytes below 3 x max_json_bytes", {"max_json_bytes": 2097152, "max_held_bytes": 6291455, "sources": []}),
 ("max_json_bytes above the default max_held_bytes", {"max_json_bytes": 134217728, "sources": []}),
 ("max_hold_ms not a positive integer", {"max_hold_ms": 0, "sources": []}),
 ("prefix with a dot segment, a percent or a semicolon", {"prefix": "/a/../webhooks", "sources": []}),
 ("prefix with a percent escape", {"prefix": "/%77ebhooks", "sources": []}),
 ("source ids a server reads as a path segment", {"sources": [{"id": ".", "dedupe": "github"}, {"id": "..", "dedupe": "github"}]}),
 ("source id missing", {"sources": [{"tenant": "acme"}]}),
 ("bad source id and tenant", {"sources": [{"id": "a/b", "tenant": "a.b"}]}),
 ("source id too long", {"sources": [{"id": "x" * 65}]}),
 ("duplicate source ids", {"sources": [{"id": "a", "dedupe": "github"}, {"id": "a", "dedupe": "github"}]}),
 ("unknown source field", S(dedupe="github", sink=[])),
 ("dedupe: unknown preset", S(dedupe="strpe")),
 ("dedupe: none of preset/header/json", S(dedupe={"ttl_ms": 5})),
 ("dedupe: two forms", S(dedupe={"preset": "github", "header": "x-id"})),
 ("dedupe: empty header", S(dedupe={"header": ""})),
 ("dedupe: empty json segment", S(dedupe={"json": "a..b"})),
 ("dedupe: ttl_ms not positive", S(dedupe={"preset": "stripe", "ttl_ms": 0})),
 ("dedupe: ttl_ms not an integer", S(dedupe={"preset": "stripe", "ttl_ms": "1h"})),
 ("dedupe: unknown field", S(dedupe={"preset": "stripe", "ttl": 5})),
 ("dedupe: stamp header", S(dedupe={"header": "X-Hookstamp-Dedupe-Key"})),
 ("dedupe: stamp header spelled with underscores", S(dedupe={"header": "x_hookstamp_dedupe_key"})),
 ("sink: bad ordering_key form", S(dedupe="github", sinks=[{"type": "sqs", "ordered": True, "ordering_key": {"header": "a", "json": "b"}}, {"type": "sqs", "ordered": True, "ordering_key": "x"}, {"type": "sqs", "ordered": True, "ordering_key": {"json": ""}}])),
 ("sink: ordering_key without ordered", S(dedupe="github", sinks=[{"type": "sqs", "ordering_key": {"header": "x-entity-id"}}, {"type": "google_pubsub", "ordering_key": {"json": "a"}}])),
 ("sink: non-bool ordered", S(dedupe="github", sinks=[{"type": "sqs", "ordered": "yes"}])),
 ("sink: ordered under direct delivery", {"delivery": "direct", "sources": [{"id": "s1", "dedupe": "github", "sinks": [{"type": "http"}, {"type": "sqs", "ordered": True}]}]}),
 ("sink: header key not stored (none)", S(dedupe="github", store_headers="none", sinks=[{"type": "sqs", "ordered": True, "ordering_key": {"header": "x-entity-id"}}])),
 ("sink: header key not in the stored list", S(dedupe="github", store_headers=["x-other"], sinks=[{"type": "sqs", "ordered": True, "ordering_key": {"header": "X-Entity-Id"}}])),
 ("sink: credential header never stored", S(dedupe="github", sinks=[{"ordered": True, "ordering_key": {"header": "Authorization"}}, {"ordered": True, "ordering_key": {"header": "cookie"}}])),
 ("sink: pubsub legacy key empty, or on an ordered sink", S(dedupe="github", sinks=[{"type": "google_pubsub", "ordering_key": ""}, {"type": "google_pubsub", "ordered": True, "ordering_key": "k"}])),
 ("sink: unknown field and bad type", S(dedupe="github", sinks=[{"type": "sqs", "queue": "q"}, {"type": 5}, "log"])),
 ("bad store_headers", S(dedupe="github", store_headers="some")),
 ("too many sinks", S(dedupe="github", sinks=[{}] * 65536)),
 ("every error at once", {"sources": [{"id": "a", "dedupe": "nope", "sinks": [{"ordering_key": {"json": "x"}}]}, {"id": "b", "dedupe": {"json": "a."}, "sinks": [{"ordered": 1}]}]}),
]
out = []
with tempfile.TemporaryDirectory() as d:
    for name, cfg in configs:
        p = os.path.join(d, "c.json")
        open(p, "w").write(cfg if isinstance(cfg, str) else json.dumps(cfg))
        r = subprocess.run(["target/debug/hookstamp", "check", p], capture_output=True, text=True)
        assert r.returncode == 1, (name, r.stderr)
        errors = r.stderr.splitlines()
        out.append({"name": name, "config": cfg if not isinstance(cfg, str) else None, "config_text": cfg if isinstance(cfg, str) else None, "errors": errors})
rows = []
for o in out:
    o = {k: v for k, v in o.items() if v is not None}
    if o["name"] == "too many sinks":
        o["config"] = S(dedupe="github"); o["sinks_repeat"] = 65536
        o = {k: v for k, v in o.items() if v is not None}
    rows.append("  " + json.dumps(o))
open("tests/config_errors.json", "w").write("[\n" + ",\n".join(rows) + "\n]\n")
for o in out:
    print("##", o["name"]); [print("   ", e[:200]) for e in o["errors"]]
