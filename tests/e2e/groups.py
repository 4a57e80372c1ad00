"""The lane groups table, tests/cases/groups.json, computed apart from the
filter: each ordered sink's group from the stamp contract of docs/keys.md
alone (the percent-encoding, the 128-byte rule, the brokers' limits, the
keyless group and `"group_scope": "tenant"`), with Python's hashlib.

`python3 tests/e2e/groups.py --bless` writes the table; without it, the
table is compared with what this computes (exit 1, naming the cases, where
they differ). The case table runs it natively (tests/table.rs) and through
Envoy with both builds (test_envoy.py, test_dynmod.py)."""

import hashlib
import json
import sys
from pathlib import Path

TABLE = Path(__file__).resolve().parents[1] / "cases" / "groups.json"

# The longest group each broker takes, in characters (docs/keys.md, "A
# lane's group, per sink type"); another sink type has no limit a group
# reaches.
LIMITS = {"sqs": 128, "sns": 128, "kinesis": 256, "rabbitmq": 255}
MAX_LANE_KEY = 128


def encode(raw):
    """The stamp encoding: bytes 0x21-0x7E but `%` stay, every other byte
    is %XX, uppercase hex."""
    return "".join(chr(b) if 0x21 <= b <= 0x7E and b != 0x25 else f"%{b:02X}" for b in raw)


def hashed(raw):
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def lane_key(raw):
    """A lane key after the 128-byte rule."""
    return raw if len(raw) <= MAX_LANE_KEY else hashed(raw).encode()


def fit(stamped, raw, sink_type):
    """The group as the broker takes it: as stamped where it fits, else
    the hash of its raw form."""
    limit = LIMITS.get(sink_type)
    return stamped if limit is None or len(stamped) <= limit else hashed(raw)


def group(sink, tenant, source_id, key):
    """A sink's group for a request of `tenant` to `source_id` whose lane
    key is `key` (raw bytes; None: the keyless lane)."""
    if key is None:
        g = f"{tenant}/{source_id}"
        return fit(g, g.encode(), sink["type"])
    k = lane_key(key)
    if sink.get("group_scope") == "tenant":
        return fit(f"k:{tenant}/{encode(k)}", b"k:" + tenant.encode() + b"/" + k, sink["type"])
    return fit(encode(k), k, sink["type"])


def keyed(t, **extra):
    return {"type": t, "ordered": True, **extra, "ordering_key": {"json": "customer"}}


LONG_SOURCE, LONG_TENANT = "s" * 64, "t" * 64
# A tenant of 64 characters, for a path.
TENANT_64 = ("tenant-64_" * 7)[:64]

CONFIG = {
    "sources": [
        {"id": "groups", "dedupe": {"json": "id"},
         "sinks": [keyed(t) for t in ["sqs", "sns", "kinesis", "rabbitmq", "kafka", "google_pubsub"]]},
        {"id": LONG_SOURCE, "tenant": LONG_TENANT, "dedupe": {"json": "id"},
         "sinks": [{"type": "sqs", "ordered": True}, {"type": "kinesis", "ordered": True}]},
        # A source of any tenant whose queue the tenants share: its groups
        # behind their tenant, but for one sink left to its key (the
        # collisions the others avoid), and a keyless one.
        {"id": "shared", "routing": "tenant_path", "dedupe": {"json": "id"},
         "sinks": [keyed(t, group_scope="tenant") for t in ["sqs", "sns", "kinesis", "rabbitmq", "google_pubsub"]]
         + [keyed("kafka", group_scope="key"), {"type": "sqs", "ordered": True, "group_scope": "tenant"}]},
    ]
}
SOURCES = {s["id"]: s for s in CONFIG["sources"]}
JSON = [["Content-Type", "application/json"]]

# (name, source, tenant (None: the source's own, by the path form),
# customer (None: none in the body), event id)
RECIPES = [
    ("a plain key: every sink's group is the key", "groups", None, "cus_123", "evt_0"),
    ("a key with a space and an accent: the stamped (percent-encoded) group, printable ASCII, which SQS takes as is",
     "groups", None, "cus 1/é", "evt_1"),
    ("a key of 40 accented letters: 240 stamped characters, hashed for SQS and SNS (128), as is for Kinesis (256), "
     "RabbitMQ (255), Kafka and Pub/Sub", "groups", None, "é" * 40, "evt_2"),
    ("a key of 43 accented letters: 258 stamped characters, hashed for Kinesis too, and for RabbitMQ at 255",
     "groups", None, "é" * 43, "evt_3"),
    ("128 plain characters: the SQS limit exactly, as is", "groups", None, "c" * 128, "evt_4"),
    ("the keyless group of a 64-character tenant and source is 129 characters: hashed for SQS, as is for Kinesis",
     LONG_SOURCE, None, None, "evt_k"),
    ("group_scope tenant: acme's cus_123 is k:acme/cus_123; the sink left to its key groups it as cus_123",
     "shared", "acme", "cus_123", "evt_s0"),
    ("group_scope tenant: globex's cus_123 is k:globex/cus_123, never acme's group; the sink left to its key shares "
     "acme's", "shared", "globex", "cus_123", "evt_s1"),
    ("group_scope tenant: acme's key globex/shared, globex's keyless group, is k:acme/globex/shared; the sink left "
     "to its key hands it globex's keyless group", "shared", "acme", "globex/shared", "evt_s2"),
    ("group_scope tenant: globex without a key is in its keyless group globex/shared on every sink",
     "shared", "globex", None, "evt_s3"),
    ("group_scope tenant: a key with a space and an accent is stamped percent-encoded behind k:acme/",
     "shared", "acme", "cus 1/é", "evt_s4"),
    ("group_scope tenant: k:acme/ and 121 plain characters is 128, the SQS limit exactly, as is",
     "shared", "acme", "c" * 121, "evt_s5"),
    ("group_scope tenant: k:acme/ and 122 plain characters is 129: hashed for SQS and SNS, of k:acme/ and the key",
     "shared", "acme", "c" * 122, "evt_s6"),
    ("group_scope tenant: k:acme/ and 40 accented letters is 247 characters: hashed for SQS and SNS, as is for "
     "RabbitMQ, Kinesis and Pub/Sub", "shared", "acme", "é" * 40, "evt_s7"),
    ("group_scope tenant: k:acme/ and 42 accented letters is 259 characters: hashed for RabbitMQ (255) and Kinesis "
     "(256) too, as is for Pub/Sub", "shared", "acme", "é" * 42, "evt_s8"),
    ("group_scope tenant: a key of 200 bytes is hashed by the 128-byte rule first, then behind k:acme/: 78 "
     "characters, as is everywhere", "shared", "acme", "x" * 200, "evt_s9"),
    ("group_scope tenant: a 64-character tenant and 62 plain characters is 129: hashed for SQS and SNS, as is for "
     "Kinesis", "shared", TENANT_64, "c" * 62, "evt_s10"),
]


def case(name, source_id, tenant, customer, event):
    src = SOURCES[source_id]
    path = f"/webhooks/{tenant}/{source_id}" if tenant else f"/webhooks/{source_id}"
    tenant = tenant or src.get("tenant", "default")
    if customer is None and source_id == LONG_SOURCE:
        request = {"path": path, "body": json.dumps({"id": event}, separators=(",", ":"))}
    else:
        doc = {"id": event, **({"customer": customer} if customer is not None else {})}
        request = {"path": path, "headers": JSON, "body": json.dumps(doc, ensure_ascii=False)}
    stamps = {}
    for i, sink in enumerate(src["sinks"]):
        key = customer.encode() if customer is not None and "ordering_key" in sink else None
        # The keyless lane has no key stamp.
        stamps[f"x-hookstamp-lane-{i}-key"] = encode(lane_key(key)) if key is not None else None
        stamps[f"x-hookstamp-lane-{i}-group"] = group(sink, tenant, source_id, key)
    return {"name": name, "request": request, "expect": {"action": "forward", "stamps": stamps}}


ABOUT = ("each ordered sink's group fits its broker (SQS and SNS FIFO MessageGroupId: 128 characters; Kinesis "
         "PartitionKey: 256; RabbitMQ routing key: 255 bytes): the stamped key where it fits, else sha256: and the "
         "raw key's hex SHA-256; with \"group_scope\": \"tenant\", k:<tenant>/<stamped key>, hashed as "
         "k:<tenant>/<key>; expectations computed apart (tests/e2e/groups.py, Python's hashlib)")


def table():
    return {"about": ABOUT, "config": CONFIG, "cases": [case(*r) for r in RECIPES]}


def text(t):
    return json.dumps(t, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    want = table()
    if "--bless" in sys.argv:
        TABLE.write_text(text(want))
        print(f"wrote {TABLE.name}: {len(want['cases'])} cases")
        sys.exit(0)
    have = json.loads(TABLE.read_text())
    differ = [c["name"] for c in want["cases"] if c not in have["cases"]]
    differ += [c["name"] for c in have["cases"] if c not in want["cases"]]
    if have["config"] != want["config"]:
        differ.append("the config")
    for name in differ:
        print(f"differs: {name}")
    print(f"{TABLE.name}: {len(have['cases'])} cases, {'as computed' if not differ else 'not as computed'}")
    sys.exit(1 if differ else 0)
