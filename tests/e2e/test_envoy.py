"""The real filter in a real Envoy: the shared case table replayed through
it, plus what only a proxy can show (spoofing, chunked and oversized bodies,
HTTP/2 trailers, metrics, refused configs). Every test that takes `env` or
`build` runs through both builds, the .wasm ([wasm]) and the dynamic module
([so]) (conftest.py); one Envoy of each build serves the tests of `env`.
Envoy or a build missing is a failure."""

import hashlib
import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid

from pathlib import Path

import pytest

import proxy
import upstream
from cases import ROOT, agrees, body_of, harness, tables

TABLES = dict(tables())
SPOOF = [("X-Hookstamp-Dedupe-Key", "evil"), ("x-hookstamp-lane-0", "0" * 32),
         ("X-HOOKSTAMP-SOURCE", "stripe"), ("x-hookstamp-anything", "x"),
         ("x_hookstamp_dedupe_key", "evil"), ("X_HookStamp-Lane_0-Key", "evil")]

# The Envoy-only configuration: a unique source id so its counters are ours.
BIG = {"sources": [{"id": "big", "dedupe": "stripe", "sinks": [
    {"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]}]}

# Room in the VM for about two 64 KiB bodies at a time (each counted twice:
# Envoy's buffer and the filter's copy), not three; a body must be in
# within 1.5 s of its headers, and one still arriving after 1 s is slow.
HELD = {"max_json_bytes": 65536, "max_held_bytes": 4 * 65536, "max_hold_ms": 1500, "sources": [
    {"id": "held", "dedupe": "stripe", "sinks": [{"type": "sqs", "ordered": True,
                                                   "ordering_key": {"json": "data.object.customer"}}]}]}


@pytest.fixture(scope="module")
def env(build):
    up = upstream.start()
    configs = {name: (proxy.free_port(), t["config"]) for name, t in TABLES.items()}
    configs["big"] = (proxy.free_port(), BIG)
    # The same source behind Envoy's default buffer limit (1 MiB, equal to
    # the default max_json_bytes): the limit docs/deployment.md asks for at least.
    configs["big_default_limit"] = (proxy.free_port(), BIG, None)
    configs["held"] = (proxy.free_port(), HELD)
    if build.name == "wasm":
        # Cargo's own artifact, as built, unchanged: every build output is right.
        cargo = Path((ROOT / "target" / "hookstamp.wasm.cargo-path").read_text().strip())
        configs["cargo_artifact"] = (proxy.free_port(), BIG, None, cargo)
    # The tables' secrets, where the build reads them (the VM's environment;
    # Envoy's own for the module).
    secrets = {k: v for t in TABLES.values() for k, v in t.get("env", {}).items()}
    e = build.start(configs, up.server_address[1], secrets)
    yield {"envoy": e, "up": up, "ports": {n: v[0] for n, v in configs.items()}, "build": build}
    e.stop()
    up.shutdown()
    # The filter must never have failed under any of it.
    assert "panicked" not in e.log_text()


FILTER_REPLIES = {401: {"error": "invalid_signature"}, 404: {"error": "unknown_source"},
                  405: {"error": "method_not_allowed"}, 408: {"error": "body_timeout"},
                  413: {"error": "body_too_large_to_verify"}, 503: {"error": "busy"},
                  403: {"error": "handshake_refused"}}


def send(env, table, req, extra=(), **kw):
    """Sends a table request through Envoy; returns (outcome, record)."""
    tid = uuid.uuid4().hex
    body = body_of(req)
    if "chunks" in kw:
        body = None
    status, _, reply = proxy.request(
        env["ports"][table], req.get("method", "POST"), req["path"],
        list(req.get("headers", [])) + list(extra), body=body, test_id=tid, **kw)
    record = env["up"].records.get(tid)
    if status in FILTER_REPLIES and record is None:
        assert json.loads(reply) == FILTER_REPLIES[status]
        return {"action": "reject", "status": status}, None
    if status == 400 and record is None:
        # Envoy's own codec refused the request before any filter.
        return {"action": "refused by envoy", "status": 400}, None
    assert status == 200, reply
    if record is None:
        # Answered by the filter: a handshake, or an event dropped.
        return {"action": "answer", "status": 200, "body": reply.decode()}, None
    if not record["stamps"]:
        return {"action": "pass"}, record
    return {"action": "forward", "headers": record["stamps"]}, record


# A table made at a fixed time (signatures) is made again at the time of the
# run for Envoy, whose clock cannot be set: see test_signatures_through_envoy.
CASES = [(t, i, c["name"]) for t, table in TABLES.items() if "now" not in table
         for i, c in enumerate(table["cases"])]
# Table cases Envoy 1.40's HTTP/1 codec answers 400 itself.
REFUSED_BY_ENVOY = set()


@pytest.mark.parametrize("spoofed", [False, True], ids=["plain", "spoofed"])
@pytest.mark.parametrize("table,index,name", CASES, ids=[f"{t}:{n}" for t, _, n in CASES])
def test_case_table(env, table, index, name, spoofed):
    case = TABLES[table]["cases"][index]
    # The native harness and the table agree...
    assert agrees(case["expect"], harness(TABLES[table]["config"], case["request"], env=TABLES[table].get("env")))
    # ...and so does the real filter, whatever stamps the client sent.
    got, record = send(env, table, case["request"], SPOOF if spoofed else ())
    if got["action"] == "refused by envoy":
        # A spelling Envoy's codec refuses never reaches the upstream; the
        # filter answers it the same way when Envoy lets it through.
        assert case["expect"]["action"] == "reject" and (table, name) in REFUSED_BY_ENVOY, name
        return
    assert agrees(case["expect"], got), got
    if record is not None:
        body = body_of(case["request"]) or b""
        assert record["body_bytes"] == len(body)
        assert record["body_sha256"] == hashlib.sha256(body).hexdigest()


@pytest.mark.parametrize("name", [t for t, table in TABLES.items() if "now" in table])
def test_signatures_through_envoy(env, name):
    """The signature recipes of each table made at a fixed time
    (tests/cases/verify.json, schemes.json), made again now by the
    providers' own libraries (tests/e2e/signing.py) and sent through
    Envoy, whose secrets come from vm_config.environment_variables: the
    filter agrees with the table and with `hookstamp stamp --now` on each;
    a forged or refused request never reaches the upstream, and a flagged
    one never carries a dedupe key."""
    import signing
    now = int(time.time())
    table = TABLES[name]
    counted = {"verify": ("stripe", 3), "schemes": ("discord", 3)}[name]
    before = counter(env, "hookstamp_signature_failures_total", source=counted[0], reason="mismatch")
    for case in signing.TABLE_CASES[name](now, margin=30):
        assert agrees(case["expect"], harness(table["config"], case["request"], now=now, env=table["env"])), case["name"]
        got, record = send(env, name, case["request"])
        assert agrees(case["expect"], got), (case["name"], got)
        if got["action"] == "forward" and dict(got["headers"]).get("x-hookstamp-verified") == "false":
            assert "x-hookstamp-dedupe-key" not in dict(got["headers"])
    assert counter(env, "hookstamp_signature_failures_total", source=counted[0], reason="mismatch") == before + counted[1]
    assert counter(env, "hookstamp_signatures_verified_total", source=counted[0]) > 0


def table_case(table, name):
    return next(c for c in TABLES[table]["cases"] if c["name"] == name)


@pytest.mark.parametrize("split", [1, 7, 4096])
def test_chunked_body_gives_the_same_stamps(env, split):
    case = table_case("stripe", "full event")
    body = body_of(case["request"])
    chunks = [body[i:i + split] for i in range(0, len(body), split)]
    got, record = send(env, "stripe", case["request"], chunks=chunks)
    assert got == case["expect"]
    assert record["body_bytes"] == len(body)


@pytest.mark.parametrize("listener", ["big", "big_default_limit"])
@pytest.mark.parametrize("size,chunked", [(1048577, False), (1048577, True),
                                          (10 * 1048576, False), (10 * 1048576, True)])
def test_oversized_body_forwarded_whole_keys_missing(env, listener, size, chunked):
    # Behind Envoy's default buffer limit a chunked body crossing
    # max_json_bytes would get Envoy's 413, had the filter asked Envoy to
    # buffer (StopIterationAndBuffer); it asks for watermark buffering.
    head, tail = b'{"id":"evt_big","data":{"object":{"customer":"cus_1"}},"pad":"', b'"}'
    body = head + b"x" * (size - len(head) - len(tail)) + tail
    req = {"path": "/webhooks/big"}
    before = counter(env, "hookstamp_body_over_limit_total", source="big")
    kw = {"chunks": [body[i:i + 65536] for i in range(0, len(body), 65536)]} if chunked else {}
    tid = uuid.uuid4().hex
    status, _, reply = proxy.request(env["ports"][listener], "POST", req["path"], [],
                                     body=None if chunked else body, test_id=tid, timeout=60, **kw)
    assert status == 200, reply
    rec = env["up"].records[tid]
    assert rec["body_bytes"] == len(body)
    assert rec["body_sha256"] == hashlib.sha256(body).hexdigest()
    names = [n for n, _ in rec["stamps"]]
    assert "x-hookstamp-dedupe-key" not in names
    assert "x-hookstamp-lane-0-key" not in names  # the keyless lane: no key stamp
    assert counter(env, "hookstamp_body_over_limit_total", source="big") == before + 1


def event(evt, size):
    """A Stripe-like event of exactly `size` bytes."""
    head = b'{"id":"%s","data":{"object":{"customer":"cus_1"}},"pad":"' % evt.encode()
    return head + b"x" * (size - len(head) - 2) + b'"}'


def stall(port, body, declared=True, sent=100, path="/webhooks/held"):
    """A connection that sends headers (a content-length, or chunked) and
    the first `sent` bytes of `body`, then stalls; the caller closes it."""
    s = socket.create_connection(("127.0.0.1", port))
    length = b"content-length: %d\r\n" % len(body) if declared else b"transfer-encoding: chunked\r\n"
    part = body[:sent] if declared else b"%x\r\n%s\r\n" % (sent, body[:sent])
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nhost: hookstamp.test\r\n" + length + b"\r\n" + part)
    return s


def post_held(env, evt, size=65536):
    """One whole body-keyed hook to the held listener: (status, its dedupe
    key stamp or None, whether the upstream saw it)."""
    body, tid = event(evt, size), uuid.uuid4().hex
    status, headers, reply = proxy.request(env["ports"]["held"], "POST", "/webhooks/held", [],
                                           body=body, test_id=tid)
    rec = env["up"].records.get(tid)
    if status != 200:
        assert rec is None, (status, reply)
        assert json.loads(reply) == FILTER_REPLIES[status]
        return status, dict(headers), None
    assert rec["body_sha256"] == hashlib.sha256(body).hexdigest()
    return status, dict(headers), dict(rec["stamps"]).get("x-hookstamp-dedupe-key")


def test_full_budget_answers_503_and_the_retry_is_stamped(env):
    """Bodies held at once stay within max_held_bytes: one that does not
    fit is answered 503 with retry-after (the provider retries), never
    forwarded without its keys; what was held is given back."""
    before = counter(env, "hookstamp_busy_total", source="held")
    held = [stall(env["ports"]["held"], event(f"evt_hold{i}", 65536), sent=65000) for i in range(2)]
    time.sleep(0.3)
    status, headers, key = post_held(env, "evt_busy")
    assert (status, key) == (503, None)
    assert headers.get("retry-after") == "1"
    # The second held upload may itself have found the budget full.
    assert counter(env, "hookstamp_busy_total", source="held") >= before + 1
    for s in held:
        s.close()
    time.sleep(0.3)
    assert post_held(env, "evt_busy")[::2] == (200, "evt_busy")


def test_late_body_is_answered_408_and_gives_its_bytes_back(env):
    before = counter(env, "hookstamp_body_timeout_total", source="held")
    for declared in (True, False):
        s = stall(env["ports"]["held"], event("evt_late", 1000), declared)
        s.settimeout(5)
        t0 = time.time()
        reply = s.recv(4096)
        waited = time.time() - t0
        s.close()
        assert reply.startswith(b"HTTP/1.1 408"), reply
        assert b'{"error":"body_timeout"}' in reply
        # max_hold_ms 1500, checked on a 20 ms tick.
        assert 1.0 < waited < 3.5, waited
    # At least these two (an upload of an earlier test may time out too).
    assert counter(env, "hookstamp_body_timeout_total", source="held") >= before + 2
    assert post_held(env, "evt_after_late")[::2] == (200, "evt_after_late")


def test_a_stalled_upload_flood_cannot_take_a_hooks_keys(env):
    """One client holds as many stalled uploads as it likes. While they are
    young the budget is full of work and a hook is answered 503 (never
    forwarded keyless); once they are slow (past slow_body_ms) the tick
    answers the largest 408 until the budget is down to three quarters,
    and a hook is stamped on its first try."""
    before = counter(env, "hookstamp_body_too_slow_total", source="held")
    # Large declared bodies first, then small ones and chunked ones, until
    # the worker's budget takes nothing more.
    sizes = [65536] * 3 + [1000] * 180
    t0 = time.time()
    flood = [stall(env["ports"]["held"], event(f"evt_flood{i}", n), declared=i % 3 != 2, sent=n - 10)
             for i, n in enumerate(sizes)]
    try:
        time.sleep(0.3)
        status, _, key = post_held(env, "evt_young", 2000)
        assert (status, key) == (503, None), "the flood filled the budget"
        time.sleep(max(0.0, t0 + 1.1 - time.time()))
        assert time.time() - t0 < 1.4, "still before max_hold_ms"
        status, _, key = post_held(env, "evt_legit", 2000)
        assert (status, key) == (200, "evt_legit")
        assert counter(env, "hookstamp_body_too_slow_total", source="held") > before
    finally:
        for s in flood:
            s.close()


def test_no_body_is_stamped_at_the_headers(env):
    case = table_case("stripe", "no body: no json keys")
    got, record = send(env, "stripe", case["request"])
    assert got == case["expect"]
    assert record["body_bytes"] == 0


def test_spoofed_headers_stripped_on_pass_and_reject(env):
    before = counter(env, "hookstamp_spoofed_headers_stripped_unrouted_total")
    got, rec = send(env, "stripe", {"method": "GET", "path": "/webhooks/stripe"}, SPOOF)
    assert got == {"action": "pass"} and rec["stamps"] == []
    got, _ = send(env, "stripe", {"path": "/webhooks/nope", "body": "{}"}, SPOOF)
    assert got == {"action": "reject", "status": 404}
    assert counter(env, "hookstamp_spoofed_headers_stripped_unrouted_total") == before + 2 * len(SPOOF)


def counter(env, name, **labels):
    """A metric's value from /stats/prometheus, summed over the series whose
    labels include these (0 when absent): a missing-key counter summed over
    its reasons, say."""
    want = {f'{k}="{v}"' for k, v in labels.items()}
    total = 0
    for line in env["envoy"].stats().splitlines():
        m = re.match(r"^(\w+)\{(.*)\} (\S+)$", line)
        if m and m.group(1) == name and want <= set(filter(None, m.group(2).split(","))):
            total += int(float(m.group(3)))
    return total


def test_lane_key_missing_counter_rises(env):
    name = "hookstamp_lane_key_missing_total"
    before = counter(env, name, source="big", sink="0")
    for _ in range(3):
        send(env, "big", {"path": "/webhooks/big", "body": '{"id":"e","data":{"object":{}}}'})
    send(env, "big", {"path": "/webhooks/big", "body": '{"id":"e","data":{"object":{"customer":"c"}}}'})
    assert counter(env, name, source="big", sink="0") == before + 3
    text = env["envoy"].stats()
    assert f'{name}{{source="big",sink="0",reason="absent"}} ' in text
    assert counter(env, name, source="big", sink="0", reason="absent") >= 3
    assert "hookstamp_requests_stamped_total{source=\"big\"}" in text
    assert re.search(r"^hookstamp_sources_without_dedupe\{\} \d+$", text, re.M)
    version = re.search(r'^version = "(.*)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
    assert f'hookstamp_build_info{{version="{version}"}} 1' in text
    # No key ever leaks into a metric name.
    assert "cus_" not in text and "evt_" not in text


def h2_request(port, path, headers, body, trailers, method="POST"):
    """One HTTP/2 (prior knowledge) request with trailers; returns (status, body)."""
    import h2.config
    import h2.connection
    import h2.events
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(conn.data_to_send())
        sid = conn.get_next_available_stream_id()
        conn.send_headers(sid, [(":method", method), (":path", path), (":scheme", "http"),
                                (":authority", "hookstamp.test")] + headers)
        if trailers:
            conn.send_data(sid, body)
            conn.send_headers(sid, trailers, end_stream=True)
        else:
            conn.send_data(sid, body, end_stream=True)
        s.sendall(conn.data_to_send())
        status, data, done = None, b"", False
        while not done:
            chunk = s.recv(65536)
            if not chunk:
                break
            for ev in conn.receive_data(chunk):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = dict(ev.headers)[b":status"].decode()
                elif isinstance(ev, h2.events.DataReceived):
                    data += ev.data
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                elif isinstance(ev, h2.events.StreamEnded):
                    done = True
            s.sendall(conn.data_to_send())
        return status, data


def test_http2_with_trailers(env):
    case = table_case("stripe", "full event")
    req = case["request"]
    tid = uuid.uuid4().hex
    status, _ = h2_request(env["ports"]["stripe"], req["path"],
                           [(k.lower(), v) for k, v in req["headers"]] + [("x-test-id", tid)],
                           body_of(req), [("x-trailer", "t")])
    assert status == "200"
    assert env["up"].records[tid]["stamps"] == case["expect"]["headers"]


@pytest.mark.parametrize("struct", [False, True], ids=["StringValue", "Struct"])
def test_both_configuration_forms_load_and_stamp(env, build, struct):
    """The filter's configuration as JSON text or as YAML (a Struct, whose
    numbers are doubles: max_json_bytes and ttl_ms must still be integers;
    Envoy hands the module a Struct as JSON text)."""
    config = dict(BIG, max_json_bytes=4096, sources=[dict(BIG["sources"][0], dedupe={"json": "id", "ttl_ms": 60000})])
    port = proxy.free_port()
    boot = build.bootstrap({"form": (port, config)}, env["up"].server_address[1])
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"][0] = build.filter(config, struct=struct)
    loads_and_stamps(boot, port, env["up"])


def loads_and_stamps(boot, port, up):
    """The bootstrap loads, and its BIG-like source stamps a hook with its
    dedupe key and its ttl (60000)."""
    e = proxy.Envoy(boot)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        tid = uuid.uuid4().hex
        status, _, _ = proxy.request(port, "POST", "/webhooks/big", [], test_id=tid,
                                     body=b'{"id":"evt_f","data":{"object":{"customer":"cus_f"}}}')
        stamps = dict(up.records[tid]["stamps"])
        assert status == 200 and stamps["x-hookstamp-dedupe-key"] == "evt_f"
        assert stamps["x-hookstamp-dedupe-ttl-ms"] == "60000"
    finally:
        e.stop()


def test_a_struct_with_a_fractional_integer_is_refused(env, build):
    config = dict(BIG, max_json_bytes=4096.5)
    boot = build.bootstrap({"x": (proxy.free_port(), config)}, env["up"].server_address[1])
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"][0] = build.filter(config, struct=True)
    code, log = proxy.wait_exit(boot)
    assert code != 0
    assert "config: max_json_bytes must be a positive integer of at most 4294967295, got 4096.5" in log


def test_bad_config_is_refused_naming_the_source(env, build):
    """A configuration error refuses the load, every error logged."""
    bad = {"sources": [{"id": "stripe", "dedupe": "strpe",
                        "sinks": [{"type": "sqs", "ordering_key": {"header": "x-id"}}]}]}
    boot = build.bootstrap({"bad": (proxy.free_port(), bad)}, env["up"].server_address[1])
    code, log = proxy.wait_exit(boot)
    assert code != 0
    assert "source 'stripe' dedupe: unknown preset \"strpe\"" in log
    assert "source 'stripe' sink 0 (sqs): ordering_key needs \"ordered\": true" in log
    assert "rejected the configuration (2 error(s))" in log


def test_a_warning_at_load_is_in_envoys_log_naming_the_source_and_sink(env, build):
    """An ordered sink of a source of any tenant without "group_scope":
    "tenant" is warned of at load, in Envoy's log, by source and sink; the
    configuration runs."""
    port = proxy.free_port()
    config = {"routing": "tenant_path", "sources": [{"id": "shared", "dedupe": "stripe", "sinks": [
        {"type": "sqs", "ordered": True, "group_scope": "tenant", "ordering_key": {"json": "c"}},
        {"type": "sqs", "ordered": True, "ordering_key": {"json": "c"}}]}]}
    e = build.start({"warned": (port, config)}, env["up"].server_address[1])
    try:
        tid = uuid.uuid4().hex
        status, _, _ = proxy.request(port, "POST", "/webhooks/acme/shared", [], body=b'{"id":"e","c":"k"}',
                                     test_id=tid)
        stamps = dict(env["up"].records[tid]["stamps"])
        assert status == 200 and stamps["x-hookstamp-lane-0-group"] == "k:acme/k", stamps
        assert stamps["x-hookstamp-lane-1-group"] == "k"
    finally:
        e.stop()
    log = e.log_text()  # whole once Envoy has stopped
    assert "source 'shared' sink 1: the source takes more than one tenant (by its tenant_path route)" in log, \
        log[-3000:]
    assert "source 'shared' sink 0:" not in log


def test_example_configs_validate():
    files = sorted((ROOT / "envoy").glob("*.yaml"))
    assert files, "no example Envoy configs"
    for f in files:
        r = subprocess.run([proxy.envoy_bin(), "--mode", "validate", "-c", str(f)],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"{f}: {r.stdout[-2000:]}{r.stderr[-2000:]}"


def istio_docs():
    import yaml
    return {p.stem: yaml.safe_load(p.read_text()) for p in (ROOT / "envoy" / "istio").glob("*.yaml")}


def check_config(config, *flags, code=0, env=None):
    """`hookstamp check` over a plugin configuration; returns (stdout, stderr)."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        f.write(config if isinstance(config, str) else json.dumps(config))
        f.flush()
        r = subprocess.run([str(ROOT / "target" / "debug" / "hookstamp"), "check", f.name, *flags],
                           capture_output=True, text=True, env={**os.environ, **(env or {})})
        assert r.returncode == code, r.stderr
        return r.stdout, r.stderr


def test_istio_envoyfilter_wasm_config_validates(tmp_path):
    doc = istio_docs()["envoyfilter"]
    ext = next(p for p in doc["spec"]["configPatches"] if p["applyTo"] == "EXTENSION_CONFIG")
    wasm = ext["patch"]["value"]["typed_config"]
    cfg = wasm["config"]
    assert cfg["allow_on_headers_stop_iteration"] is True
    assert cfg["failure_policy"] == "FAIL_RELOAD"
    # The secret comes from the sidecar's environment: check says so when
    # it is missing, and passes with it set.
    secret_var = cfg["vm_config"]["environment_variables"]["host_env_keys"][0]
    _, err = check_config(cfg["configuration"]["value"], code=1)
    assert f"the environment variable {secret_var} is not set" in err
    check_config(cfg["configuration"]["value"], env={secret_var: "whsec_example"})
    # The same filter, with the module as a local file, in a bootstrap.
    cfg["vm_config"]["code"] = {"local": {"filename": str(proxy.WASM)}}
    boot = proxy.bootstrap({"x": (proxy.free_port(), {"sources": []})}, 1, proxy.free_port())
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"][0] = {"name": "hookstamp", "typed_config": wasm}
    f = tmp_path / "istio.json"
    f.write_text(json.dumps(boot))
    # Envoy reads the secret from its own environment (host_env_keys).
    r = subprocess.run([proxy.envoy_bin(), "--mode", "validate", "-c", str(f)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, secret_var: "whsec_example"})
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def test_istio_wasmplugin_is_header_keyed_only():
    doc = istio_docs()["wasmplugin"]
    config = doc["spec"]["pluginConfig"]
    # The WasmPlugin form cannot hold headers for a body: no json keys.
    out = check_config(config, "--deployment", "wasmplugin")[0]
    assert out == "ok for a deployment that cannot hold headers for a body (a WasmPlugin, Envoy Gateway)\n"
    _, err = check_config(TABLES["stripe"]["config"], "--deployment", "wasmplugin", code=1)
    assert "source 'stripe': it reads the body (JSON keys or a signature)" in err
    assert "allow_on_headers_stop_iteration" in err


@proxy.only("wasm")  # the flag is the Wasm filter's; a module always gets the body
def test_body_source_without_allow_on_headers_stop_iteration_is_answered_not_hung(env, build):
    """Where the filter cannot hold headers (Istio's WasmPlugin), Envoy never
    hands it the body: the request is answered 408 at max_hold_ms, the log
    names the flag, a counter rises; a header-keyed source still works."""
    port = proxy.free_port()
    config = dict(HELD, sources=HELD["sources"] + [{"id": "gh", "dedupe": "github"}])
    boot = build.bootstrap({"noallow": (port, config)}, env["up"].server_address[1])
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"][0]["typed_config"]["config"]["allow_on_headers_stop_iteration"] = False
    e = proxy.Envoy(boot)
    try:
        t0 = time.time()
        status, _, reply = proxy.request(port, "POST", "/webhooks/held", [], body=event("evt_na", 500))
        assert (status, json.loads(reply)) == (408, {"error": "body_timeout"})
        assert time.time() - t0 < 4
        tid = uuid.uuid4().hex
        status, _, _ = proxy.request(port, "POST", "/webhooks/gh", [("x-github-delivery", "g1")],
                                     body=b"{}", test_id=tid)
        assert status == 200 and dict(env["up"].records[tid]["stamps"])["x-hookstamp-dedupe-key"] == "g1"
        assert 'hookstamp_body_never_seen_total{source="held"} 1' in e.stats()
    finally:
        e.stop()
    log = e.log_text()  # whole once Envoy has stopped
    assert "source 'held': a request held for its body got none" in log
    assert "allow_on_headers_stop_iteration: true" in log


def shipped_bootstrap(build, upstream_port):
    """The build's shipped bootstrap (envoy/envoy.yaml; for the module
    envoy/dynamic-module/envoy.yaml), its ports moved: (boot, port)."""
    boot = build.shipped()
    port = proxy.free_port()
    boot["admin"]["address"]["socket_address"]["port_value"] = proxy.free_port()
    boot["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = port
    ep = boot["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    ep["endpoint"]["address"]["socket_address"]["port_value"] = upstream_port
    return boot, port


def test_shipped_bootstrap_hardening(env, build):
    """envoy/envoy.yaml (envoy/dynamic-module/envoy.yaml) as shipped, ports
    moved: Envoy's own path and header hygiene in front of the filter, only
    the prefix routed, the shipped access log's lines."""
    boot, port = shipped_bootstrap(build, env["up"].server_address[1])
    lst = boot["static_resources"]["listeners"][0]
    # The shipped access log's format, written to a file the test reads.
    hcm = lst["filter_chains"][0]["filters"][0]["typed_config"]
    shipped = hcm["access_log"][0]["typed_config"]["log_format"]
    access = Path(tempfile.mkdtemp()) / "access.log"
    hcm["access_log"] = [{"name": "envoy.access_loggers.file", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
        "path": str(access), "log_format": shipped}}]
    e = build.envoy(boot)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]

        def go(path, headers=(), body=b"{}"):
            tid = uuid.uuid4().hex
            status, _, _ = proxy.request(port, "POST", path, list(headers), body=body, test_id=tid)
            return status, env["up"].records.get(tid)
        gh = [("X-GitHub-Delivery", "d-ship"), ("x_hookstamp_dedupe_key", "evil")]
        status, rec = go("/%77ebhooks/github", gh)
        assert status == 200 and rec["path"] == "/webhooks/github"
        assert dict(rec["stamps"])["x-hookstamp-dedupe-key"] == "d-ship"
        assert not any("_" in n for n, _ in rec["stamps"])
        assert go("/webhooks%2Fgithub", gh) == (400, None)
        status, rec = go("/health")
        assert (status, rec) == (404, None)
        # The edge settings, as a client sees them: at most 100 streams a
        # connection and 64 KiB sent ahead a stream.
        import h2.config
        import h2.connection
        c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        c.initiate_connection()
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(c.data_to_send())
            c.receive_data(sock.recv(65536))
        assert c.remote_settings.max_concurrent_streams == 100
        assert c.remote_settings.initial_window_size == 65536
        hcm = lst["filter_chains"][0]["filters"][0]["typed_config"]
        assert (hcm["request_headers_timeout"], hcm["stream_idle_timeout"]) == ("5s", "15s")
        # The access log: the filter's decision and why, a JSON line each.
        assert go("/webhooks/nope", gh)[0] == 404
        assert go("/webhooks/stripe?token=hush", [("X-Entity-Id", "e-9")],
                  body=b'{"id":"evt_log","data":{"object":{"customer":"cus_log"}}}')[0] == 200
        e.stop()
        lines = [json.loads(l) for l in access.read_text().splitlines()]
        by_path = {l["path"]: l for l in lines if l["status"] != 400}
        assert by_path["/webhooks/nope"]["details"] == "hookstamp.unknown_source"
        assert by_path["/webhooks/nope"]["status"] == 404
        logged = by_path["/webhooks/stripe"]
        assert (logged["source"], logged["dedupe_key"], logged["lane_0_key"]) == ("stripe", "evt_log", "cus_log")
        assert by_path["/webhooks/github"]["dedupe_key"] == "d-ship"
        # Envoy's own answers say so too: a path it refused before any filter.
        assert {"status": 400, "details": "path_normalization_failed"}.items() <= \
            next(l for l in lines if l["status"] == 400).items()
        text = access.read_text()
        assert "hush" not in text and "evil" not in text, "no query string, no client-sent stamp"
        monitors = {m["name"] for m in boot["overload_manager"]["resource_monitors"]}
        assert monitors == {"envoy.resource_monitors.fixed_heap",
                            "envoy.resource_monitors.global_downstream_max_connections"}
    finally:
        e.stop()


def test_example_config_file_matches_the_bootstrap():
    import yaml
    boot = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    cfg = hcm["http_filters"][0]["typed_config"]["config"]
    assert cfg["allow_on_headers_stop_iteration"] is True
    assert cfg["failure_policy"] == "FAIL_RELOAD"
    # The YAML form: a google.protobuf.Struct.
    assert cfg["configuration"]["@type"] == "type.googleapis.com/google.protobuf.Struct"
    embedded = cfg["configuration"]["value"]
    assert embedded == json.loads((ROOT / "envoy" / "hookstamp.json").read_text())
    check_config(embedded)


def harness_headers(config, path, headers, body):
    req = {"path": path, "headers": headers, "body": body.decode()}
    return harness(config, req)


@pytest.mark.parametrize("kind", ["60 KiB header value", "1000 headers", "spoofed in every casing"])
def test_hostile_headers(env, kind):
    config = TABLES["stripe"]["config"]
    body = b'{"id":"evt_h","data":{"object":{"customer":"cus_h"}}}'
    if kind == "60 KiB header value":
        headers = [("x-entity-id", "k" * 61440)]
    elif kind == "1000 headers":
        headers = [(f"x-filler-{i}", f"v{i}") for i in range(999)] + [("x-entity-id", "last")]
    else:
        headers = [(c, "forged") for c in ("x-hookstamp-lane-1-key", "X-HOOKSTAMP-LANE-1-KEY",
                                           "X-Hookstamp-Lane-1-Key", "x-HookStamp-lane-1-KEY")]
        headers.append(("x-entity-id", "real"))
    want = harness_headers(config, "/webhooks/stripe", headers, body)
    got, rec = send(env, "stripe", {"path": "/webhooks/stripe", "headers": headers, "body": body.decode()})
    assert got == want
    assert rec["body_bytes"] == len(body)


def test_vm_never_failed(env, build):
    """After everything above (the module's hostile and oversized cases
    included), the filter still answers and has never failed (no Wasm VM
    failed; the module never panicked)."""
    case = table_case("stripe", "full event")
    assert send(env, "stripe", case["request"])[0] == case["expect"]
    failures = build.failures(env["envoy"])
    assert not failures, failures


EXPORTS = ["memory", "_initialize", "proxy_abi_version_0_2_1", "proxy_on_memory_allocate",
           "proxy_on_vm_start", "proxy_on_configure", "proxy_on_context_create",
           "proxy_on_request_headers", "proxy_on_request_body", "proxy_on_request_trailers",
           "proxy_on_tick", "proxy_on_delete"]


def exports(module):
    """A module's export names, read by binaryen's wasm-dis."""
    text = subprocess.run(["wasm-dis", str(module)], check=True, capture_output=True, text=True).stdout
    return re.findall(r'^ \(export "([^"]+)"', text, re.M)


# The .wasm's ceiling: Istio's WasmPlugin pulls it, and every worker's VM
# holds it.
WASM_CEILING = 384 * 1024


def test_every_build_output_exports_exactly_the_callbacks_hookstamp_implements():
    """Envoy calls every exported callback on every request (about a
    microsecond each in V8), and an export of a callback hookstamp does not
    implement would answer for it: cargo's artifact, and the module
    binaryen's wasm-opt makes of it, export hookstamp's own callbacks only;
    the module shipped is under the ceiling."""
    cargo = Path((ROOT / "target" / "hookstamp.wasm.cargo-path").read_text().strip())
    assert sorted(exports(cargo)) == sorted(EXPORTS)
    assert sorted(exports(proxy.WASM)) == sorted(EXPORTS)
    size = proxy.WASM.stat().st_size
    assert size <= WASM_CEILING, f"target/hookstamp.wasm is {size} bytes, over {WASM_CEILING}"


@proxy.only("wasm")  # the module's artifact is target/libhookstamp.so itself
def test_cargo_artifact_stamps_body_sources_in_envoy(env):
    """The module as cargo built it, loaded by Envoy: a body source is
    stamped from its body, chunked or not."""
    body = b'{"id":"evt_cargo","data":{"object":{"customer":"cus_c"}}}'
    for chunks in (None, [body[:10], body[10:]]):
        tid = uuid.uuid4().hex
        status, _, _ = proxy.request(env["ports"]["cargo_artifact"], "POST", "/webhooks/big", [],
                                     body=None if chunks else body, chunks=chunks, test_id=tid)
        assert status == 200
        stamps = dict(env["up"].records[tid]["stamps"])
        assert stamps["x-hookstamp-dedupe-key"] == "evt_cargo"
        assert stamps["x-hookstamp-lane-0-key"] == "cus_c"


def test_stamp_names_in_trailers_are_stripped(env):
    """HTTP/1 chunked trailers and HTTP/2 trailers, on stamped, passed and
    rejected requests alike: no stamp name reaches the upstream."""
    before = counter(env, "hookstamp_spoofed_trailers_stripped_total")
    evil = [("x-hookstamp-dedupe-key", "evil"), ("X_HOOKSTAMP_LANE_0", "evil"), ("x-checksum", "ok")]
    case = table_case("stripe", "full event")
    body = body_of(case["request"])
    for path in ("/webhooks/stripe", "/health"):
        tid = uuid.uuid4().hex
        with socket.create_connection(("127.0.0.1", env["ports"]["stripe"]), timeout=10) as s:
            head = "".join(f"{k}: {v}\r\n" for k, v in case["request"]["headers"])
            trailer = "".join(f"{k}: {v}\r\n" for k, v in evil)
            s.sendall((f"POST {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\nx-test-id: {tid}\r\n"
                       f"transfer-encoding: chunked\r\n{head}\r\n").encode()
                      + b"%x\r\n%s\r\n0\r\n" % (len(body), body) + trailer.encode() + b"\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")
        rec = env["up"].records[tid]
        assert rec["trailers"] == ["x-checksum"], rec["trailers"]
        if path == "/webhooks/stripe":
            assert rec["stamps"] == case["expect"]["headers"]
    tid = uuid.uuid4().hex
    status, _ = h2_request(env["ports"]["stripe"], "/webhooks/stripe",
                           [(k.lower(), v) for k, v in case["request"]["headers"]] + [("x-test-id", tid)],
                           body, [(k.lower(), v) for k, v in evil])
    assert status == "200"
    assert env["up"].records[tid]["trailers"] == ["x-checksum"]
    assert counter(env, "hookstamp_spoofed_trailers_stripped_total") == before + 6


def test_lowercase_post_over_http2_is_405(env):
    """`:method: post` reaches the filter over HTTP/2 (HTTP/1 codecs refuse
    it); Werkzeug would upper-case it and run its POST handler."""
    before = counter(env, "hookstamp_method_not_allowed_total")
    status, data = h2_request(env["ports"]["stripe"], "/webhooks/stripe", [], b"{}", [], method="post")
    assert status == "405" and json.loads(data) == {"error": "method_not_allowed"}
    assert counter(env, "hookstamp_method_not_allowed_total") == before + 1


def test_faults_upstream_down_slow_and_client_gone(build):
    """Upstream down: Envoy answers 503 (the provider retries) and the next
    request is stamped as usual; a slow upstream; a client that disconnects
    mid-body. The filter's state stays clean throughout."""
    config = TABLES["stripe"]["config"]
    case = table_case("stripe", "full event")
    req = case["request"]
    dead = proxy.free_port()
    port = proxy.free_port()
    e = build.start({"f": (port, config)}, dead)
    try:
        status, _, _ = proxy.request(port, "POST", req["path"], req["headers"], body=body_of(req))
        assert status == 503
        up = upstream.start(dead)
        try:
            tid = uuid.uuid4().hex
            status, _, _ = proxy.request(port, "POST", req["path"], req["headers"],
                                         body=body_of(req), test_id=tid)
            assert status == 200 and up.records[tid]["stamps"] == case["expect"]["headers"]
            # Slow upstream: the stamps do not depend on it.
            tid = uuid.uuid4().hex
            status, _, _ = proxy.request(port, "POST", req["path"],
                                         req["headers"] + [["x-test-delay-ms", "1500"]],
                                         body=body_of(req), test_id=tid)
            assert status == 200 and up.records[tid]["stamps"] == case["expect"]["headers"]
            # A client gone mid-body: nothing forwarded, the next one is fine.
            with socket.create_connection(("127.0.0.1", port)) as s:
                s.sendall(b"POST /webhooks/stripe HTTP/1.1\r\nhost: x\r\nx-test-id: gone\r\n"
                          b"content-length: 1000\r\n\r\n{\"id\":\"evt_gone\"")
            tid = uuid.uuid4().hex
            status, _, _ = proxy.request(port, "POST", req["path"], req["headers"],
                                         body=body_of(req), test_id=tid)
            assert status == 200 and up.records[tid]["stamps"] == case["expect"]["headers"]
            assert "gone" not in up.records
        finally:
            up.shutdown()
        assert "panicked" not in e.log_text()
    finally:
        e.stop()


def test_check_finds_every_configuration_in_what_users_have(tmp_path):
    """`hookstamp check` over the shipped files as they are: a bootstrap,
    the fleet's, the Istio manifests; a multi-document YAML with a broken
    filter names where each finding is."""
    bin_ = str(ROOT / "target" / "debug" / "hookstamp")

    def check(path, env=None):
        return subprocess.run([bin_, "check", str(path)], capture_output=True, text=True,
                              env={**os.environ, **(env or {})})
    for f in ["envoy/hookstamp.json", "envoy/envoy.yaml", "envoy/fleet/envoy.yaml", "envoy/istio/wasmplugin.yaml"]:
        r = check(ROOT / f)
        assert r.returncode == 0, (f, r.stderr)
    r = check(ROOT / "envoy/istio/envoyfilter.yaml", {"STRIPE_WEBHOOK_SECRET": "whsec_x"})
    assert r.returncode == 0, r.stderr
    assert "EnvoyFilter hookstamp" in r.stdout
    bad = tmp_path / "two.yaml"
    bad.write_text(
        "kind: WasmPlugin\nmetadata: {name: one}\nspec:\n  pluginConfig:\n"
        "    sources: [{id: stripe, dedupe: stripe}]\n---\n"
        "kind: Other\nmetadata: {name: two}\nspec:\n  filter:\n    typed_config:\n"
        "      '@type': type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm\n"
        "      config:\n        allow_on_headers_stop_iteration: true\n"
        "        configuration: {value: {sources: [{id: a, dedupe: strpe}]}}\n")
    r = check(bad)
    assert r.returncode == 1
    assert "document 1 (WasmPlugin one) spec.pluginConfig: source 'stripe': it reads the body" in r.stderr
    assert "document 2 (Other two) at spec.filter.typed_config: source 'a' dedupe: unknown preset" in r.stderr
    r = check(ROOT / "envoy/istio/destinationrule.yaml")
    assert r.returncode == 1 and "no hookstamp configuration" in r.stderr


def test_githubs_own_example_payloads_as_json_and_as_a_form(env):
    """GitHub's published example payloads (npm @octokit/webhooks-examples:
    every event type), each sent as JSON and as GitHub's form content type
    (payload=<url-encoded JSON>) to a source whose lane reads the integer
    repository.id: the harness and Envoy agree on every one, and the lane key
    is the repository's id, or the keyless lane where the event has none."""
    import urllib.parse
    examples = json.loads((ROOT / "tests" / "e2e" / "node_modules" / "@octokit" / "webhooks-examples" /
                           "api.github.com" / "index.json").read_text())
    config = TABLES["keys"]["config"]
    sent = keyed = 0
    for event in examples:
        for i, payload in enumerate(event["examples"]):
            text = json.dumps(payload)
            repo = payload.get("repository") if isinstance(payload.get("repository"), dict) else {}
            want = str(repo["id"]) if isinstance(repo.get("id"), int) else ""
            for ctype, body in [("application/json", text),
                                ("application/x-www-form-urlencoded", "payload=" + urllib.parse.quote_plus(text))]:
                req = {"path": "/webhooks/github_form", "body": body,
                       "headers": [["Content-Type", ctype], ["X-GitHub-Delivery", f"{event['name']}-{i}"]]}
                got, _ = send(env, "keys", req)
                stamps = dict(got["headers"])
                assert stamps.get("x-hookstamp-lane-0-key") == (want or None), (event["name"], i, ctype)
                assert stamps["x-hookstamp-dedupe-key"] == f"{event['name']}-{i}"
                if sent % 50 == 0:  # the harness on a sample (a process each)
                    assert harness(config, req) == got, (event["name"], i, ctype)
                sent += 1
                keyed += bool(want)
    assert sent > 600 and keyed > 500, (sent, keyed)


def test_every_answer_of_the_filter_has_its_own_details_in_the_access_log(build):
    """%RESPONSE_CODE_DETAILS% names each answer and, for a signature, why
    it failed; the shipped access-log format prints it with the stamps."""
    import yaml
    shipped = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
    hcm0 = shipped["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    fmt = hcm0["access_log"][0]["typed_config"]["log_format"]
    # The Istio gateway's access log is the same, logger and format.
    istio = yaml.safe_load((ROOT / "envoy" / "istio" / "accesslog.yaml").read_text())
    assert istio["spec"]["configPatches"][0]["patch"]["value"]["typed_config"]["access_log"] == hcm0["access_log"]
    cfg = {"max_hold_ms": 1000, "sources": [
        {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_DETAILS"}]}},
        {"id": "b", "dedupe": {"json": "id"}},
        {"id": "fl", "dedupe": {"json": "id"}, "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "c"}}],
         "verify": {"scheme": "github", "secrets": [{"env": "GH_DETAILS"}], "on_failure": "flag"}}]}
    up = upstream.start()
    port = proxy.free_port()
    secrets = {"GH_DETAILS": "s"}
    boot = build.bootstrap({"d": (port, cfg)}, up.server_address[1], secrets=secrets)
    access = Path(tempfile.mkdtemp()) / "access.log"
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["access_log"] = [{"name": "envoy.access_loggers.file", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
        "path": str(access), "log_format": fmt}}]
    e = build.envoy(boot, secrets)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        cases = {
            "missing": [],
            "malformed": [("x-hub-signature-256", "sha1=00")],
            "mismatch": [("x-hub-signature-256", "sha256=" + "0" * 64)],
        }
        for why, headers in cases.items():
            status = proxy.request(port, "POST", f"/webhooks/gh?case={why}", headers + [("x-github-delivery", why)],
                                   body=b"{}")[0]
            assert status == 401
        assert proxy.request(port, "POST", "/webhooks/none", [], body=b"{}")[0] == 404
        assert proxy.request(port, "PUT", "/webhooks/gh", [], body=b"{}")[0] == 405
        s = stall(port, b"{}" * 10, sent=2, path="/webhooks/b")
        s.settimeout(5)
        assert s.recv(4096).startswith(b"HTTP/1.1 408")
        s.close()
        # Stamped, and why something is missing: a forged hook in flag mode
        # (keyless, unverified), and a body without its dedupe key.
        forged = [("x-hub-signature-256", "sha256=" + "0" * 64)]
        assert proxy.request(port, "POST", "/webhooks/fl", forged, body=b'{"id":"e1","c":"cus_1"}')[0] == 200
        assert proxy.request(port, "POST", "/webhooks/b", [], body=b'{"x":1}')[0] == 200
        assert proxy.request(port, "POST", "/webhooks/b", [], body=b'{"id":"e2"}')[0] == 200
    finally:
        e.stop()
        up.shutdown()
    lines = [json.loads(l) for l in access.read_text().splitlines()]
    details = [l["details"] for l in lines]
    assert details == ["hookstamp.invalid_signature.missing", "hookstamp.invalid_signature.malformed",
                       "hookstamp.invalid_signature.mismatch", "hookstamp.unknown_source",
                       "hookstamp.method_not_allowed", "hookstamp.body_timeout",
                       "via_upstream", "via_upstream", "via_upstream"], details
    assert [l["why"] for l in lines[-3:]] == ["signature=mismatch event-type=unverified dedupe=unverified lane-0=unverified",
                                              "dedupe=absent", None], lines[-3:]
    assert lines[-3]["verified"] == "false" and "cus_1" not in json.dumps(lines)


def test_check_warns_of_a_secret_given_inline_in_key_values_and_never_shows_it(tmp_path):
    """Envoy's /config_dump and debug log show key_values: check names the
    variable and recommends host_env_keys; the value appears nowhere."""
    boot = proxy.bootstrap({"x": (proxy.free_port(), {"sources": [
        {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_INLINE"}]}},
        {"id": "bad", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_INLINE"}],
                                                    "whsec_c2VjcmV0LWluLWEtbmFtZQ": 1}}]})},
        1, proxy.free_port(), env={"GH_INLINE": "the-inline-secret-value"})
    f = tmp_path / "boot.json"
    f.write_text(json.dumps(boot))
    r = subprocess.run([str(ROOT / "target" / "debug" / "hookstamp"), "check", str(f)], capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "an unknown field that is not a name (not shown" in out
    assert "whsec_c2VjcmV0LWluLWEtbmFtZQ" not in out and "the-inline-secret-value" not in out
    del boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    good = json.loads(f.read_text())
    cfg = good["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"][
        "http_filters"][0]["typed_config"]["config"]["configuration"]
    value = json.loads(cfg["value"])
    value["sources"] = value["sources"][:1]
    cfg["value"] = json.dumps(value)
    f.write_text(json.dumps(good))
    r = subprocess.run([str(ROOT / "target" / "debug" / "hookstamp"), "check", str(f)], capture_output=True, text=True)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "the secret variable GH_INLINE is given inline" in out and "host_env_keys" in out
    assert "the-inline-secret-value" not in out


def test_rate_limits_on_the_stamps_with_envoys_local_ratelimit(env, build):
    """envoy/ratelimit/local_ratelimit.yaml in the shipped bootstrap: a
    source's and a tenant's hooks are limited by the stamps the filter
    added, never by a client's claim; the others pass."""
    import yaml
    boot, port = shipped_bootstrap(build, env["up"].server_address[1])
    snippet = yaml.safe_load((ROOT / "envoy" / "ratelimit" / "local_ratelimit.yaml").read_text())
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm.pop("access_log")
    hcm["http_filters"].insert(1, snippet["http_filter"])
    hcm["route_config"]["virtual_hosts"][0]["routes"][0]["route"]["rate_limits"] = snippet["route_rate_limits"]
    e = build.envoy(boot)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        def post(path, headers, body=b"{}"):
            return proxy.request(port, "POST", path, headers, body=body)[0]
        github = [post("/webhooks/github", [("X-GitHub-Delivery", f"d-rl{i}"), ("x-hookstamp-source", "stripe")])
                  for i in range(5)]
        assert github == [200, 200, 200, 429, 429], github
        event = b'{"id":"evt_rl","data":{"object":{"customer":"cus_rl"}}}'
        acme = [post("/webhooks/stripe", [("x-hookstamp-tenant", "globex")], event) for _ in range(4)]
        assert acme == [200, 200, 429, 429], "the stamped tenant (acme), not the client's claim (globex)"
    finally:
        e.stop()


def test_check_reads_stdin_says_warnings_beside_errors_and_strict_fails_them():
    exe = str(ROOT / "target" / "debug" / "hookstamp")
    run = lambda args, text: subprocess.run([exe, *args], input=text, capture_output=True, text=True)
    # Errors and warnings together: the warning is not hidden by the error.
    both = json.dumps({"sources": [{"id": "a", "dedupe": "nope"},
                                   {"id": "j", "dedupe": {"json": "$.id"}}]})
    r = run(["check", "-"], both)
    assert r.returncode == 1
    assert 'unknown preset "nope"' in r.stderr and "warning: source 'j' dedupe: json path \"$.id\" looks like JSONPath" in r.stderr
    # A warning alone: ok, unless --strict.
    warned = json.dumps({"sources": [{"id": "b"}]})
    assert run(["check", "-"], warned).returncode == 0
    r = run(["check", "-", "--strict"], warned)
    assert r.returncode == 1 and "warning: source 'b' has no dedupe" in r.stderr
    # Each command's own help.
    for cmd, first in [("check", "check  FILE"), ("stamp", "stamp  FILE"), ("explain", "explain  why"),
                       ("batch", "batch  the same")]:
        r = run([cmd, "--help"], "")
        assert r.returncode == 0 and r.stdout.startswith(first), (cmd, r.stdout[:80])


# What ends a run of plain bytes in a JSON string, each as it is written in
# the body: an escaped quote, an escaped backslash, a \u escape, and
# characters of two, three and four UTF-8 bytes.
RUN_ENDS = ['\\"', "\\\\", "\\u00e9", "é", "€", "😀"]


def test_strings_scan_alike_wherever_a_run_ends(env):
    """The JSON scan compares sixteen bytes at once (SSE2 natively, WebAssembly's
    vectors in the .wasm) and sixty-four in a long string's bulk: a byte that
    ends a run, at every offset of the first eighty, in the string skipped
    before the keys and in the key's own value, gives the keys Python's json
    reads; a raw control byte or a byte that starts no character there is
    refused, and the bytes just inside those edges are not."""
    for at in range(80):
        for end in RUN_ENDS:
            pad = "x" * at + end + "y" * (80 - at)
            customer = "cus_" + "z" * at + end + "w" * 3
            text = ('{"pad":"' + pad + '","id":"evt_' + str(at) + '","data":{"object":{"customer":"'
                    + customer + '"}}}')
            want = json.loads(text)
            tid = uuid.uuid4().hex
            status, _, _ = proxy.request(env["ports"]["big"], "POST", "/webhooks/big", [],
                                         body=text.encode(), test_id=tid)
            assert status == 200, (at, end)
            stamps = dict(env["up"].records[tid]["stamps"])
            assert stamps["x-hookstamp-dedupe-key"] == want["id"], (at, end)
            # A stamp's value is percent-encoded past printable ASCII (docs/keys.md).
            lane_key = urllib.parse.unquote(stamps["x-hookstamp-lane-0-key"])
            assert lane_key == want["data"]["object"]["customer"], (at, end)
        # Raw bytes at the edges of what ends a run: a control byte (0x01,
        # 0x1f) or a byte that starts no character (0x80, 0xff) is refused;
        # DEL (0x7f) and a space are plain.
        for byte, plain in [(0x01, False), (0x1f, False), (0x80, False), (0xff, False), (0x7f, True), (0x20, True)]:
            raw = b'{"pad":"' + b"x" * at + bytes([byte]) + b'","id":"evt_raw"}'
            tid = uuid.uuid4().hex
            proxy.request(env["ports"]["big"], "POST", "/webhooks/big", [], body=raw, test_id=tid)
            record = env["up"].records.get(tid)
            keyed = record is not None and dict(record["stamps"]).get("x-hookstamp-dedupe-key") == "evt_raw"
            assert keyed == plain, (at, hex(byte))
