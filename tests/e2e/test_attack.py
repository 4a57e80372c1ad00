"""Attacks on a real Envoy with the built filter, each on an Envoy of its
own, through both builds ([wasm], [so]): thousands of stalled requests
reaching their deadline in one tick (which once failed the VM for good),
streams reset mid-hold, and Envoy's own memory while a verified source
holds slow forged uploads; and (the .wasm's own) a failed VM under each
failure policy."""

import json
import time
import uuid

import pytest

import attack
import proxy
import upstream

EVENT = b'{"id":"evt_%s","type":"invoice.paid","data":{"object":{"customer":"cus_%s"}}}'

ATTACKED = {"max_hold_ms": 2000, "slow_body_ms": 1000, "sources": [
    {"id": "stripe", "dedupe": "stripe",
     "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
    {"id": "github", "dedupe": "github"}]}


@pytest.fixture()
def edge(build):
    attack.raise_fd_limit()
    up = upstream.start()
    port = proxy.free_port()
    e = build.start({"edge": (port, ATTACKED)}, up.server_address[1])
    yield {"envoy": e, "up": up, "port": port, "build": build}
    e.stop()
    up.shutdown()


def deliver(edge, n):
    """One body-keyed delivery and one header-keyed one, sent whole: both
    stamped, with their keys."""
    tid = uuid.uuid4().hex
    status, _, _ = proxy.request(edge["port"], "POST", "/webhooks/stripe", [("content-type", "application/json")],
                                 body=EVENT % (str(n).encode(), str(n).encode()), test_id=tid, timeout=10)
    rec = edge["up"].records.get(tid)
    assert status == 200, status
    assert dict(rec["stamps"])["x-hookstamp-dedupe-key"] == f"evt_{n}"
    assert dict(rec["stamps"])["x-hookstamp-lane-0-key"] == f"cus_{n}"
    tid = uuid.uuid4().hex
    status, _, _ = proxy.request(edge["port"], "POST", "/webhooks/github", [("x-github-delivery", f"d-{n}")],
                                 body=b"{}", test_id=tid, timeout=10)
    assert status == 200, status
    assert dict(edge["up"].records[tid]["stamps"])["x-hookstamp-dedupe-key"] == f"d-{n}"


def counter(envoy, name):
    for line in envoy.stats("/stats").splitlines():
        if line.startswith(f"wasmcustom.{name}:"):
            return int(line.rsplit(":", 1)[1])
    raise KeyError(name)


def test_ten_thousand_stalled_requests_reach_their_deadline_and_the_vm_lives(edge):
    """5 000 HTTP/1 connections and 5 000 HTTP/2 streams (50 connections)
    send the headers of a body-keyed hook and stall. Their deadlines pass
    within one tick; the filter answers each 408, at most 25 a VM call
    (Envoy nests the replies of one call: ~270 in one tick exhausted V8's
    stack and failed the VM for good). Meanwhile and afterwards, the VM
    stamps deliveries."""
    t0 = time.time()
    h1 = attack.Http1(edge["port"], 5000, "/webhooks/stripe", declared=1000)
    h2c = attack.Http2(edge["port"], 50, 100, "/webhooks/stripe", declared=1000)
    opened = time.time() - t0
    try:
        assert opened < 1.8, f"the flood took {opened:.1f} s to open: its deadlines would not coincide"
        deliver(edge, 1)
        # All 10 000 answered 408 once their deadline passes.
        def done():
            a, b = h1.poll(), h2c.poll()
            return a.get("408", 0) + b.get("408", 0) == 10_000 and (a, b)
        result = attack.wait_for(done, 40, step=0.5)
        assert result, (h1.count(), h2c.count())
        took = time.time() - t0
        print(f"10 000 stalled requests answered 408 within {took:.1f} s of the first")
        assert not edge["build"].failures(edge["envoy"]), edge["build"].failures(edge["envoy"])
        assert "Maximum call stack" not in edge["envoy"].log_text()
        assert counter(edge["envoy"], "hookstamp_body_timeout_total.source=stripe;") == 10_000
        for n in range(2, 12):
            deliver(edge, n)
        # GET passes, as ever: the VM is not failed closed.
        assert proxy.request(edge["port"], "GET", "/elsewhere")[0] == 200
    finally:
        h1.close()
        h2c.close()


def test_streams_reset_mid_hold_give_everything_back(edge):
    """An HTTP/2 client opens 2 000 held streams and resets half of them:
    what they held returns at once, the other half reach their deadline,
    and the VM stamps throughout."""
    h2c = attack.Http2(edge["port"], 20, 100, "/webhooks/stripe", declared=1000)
    try:
        time.sleep(0.2)
        assert h2c.reset_half() == 1000
        deliver(edge, 100)
        done = attack.wait_for(lambda: h2c.poll().get("408", 0) == 1000 and h2c.count(), 20, step=0.5)
        assert done, h2c.count()
        assert done.get("reset") == 1000
        deliver(edge, 101)
        assert not edge["build"].failures(edge["envoy"])
    finally:
        h2c.close()


def crash_edge(policy):
    """An Envoy whose filter is target/crash.wasm (it aborts on an x-crash
    header) under `policy`, as the shipped bootstraps set it."""
    from cases import ROOT
    module = ROOT / "target" / "crash.wasm"
    assert module.exists(), "target/crash.wasm is built by make test-e2e (scripts/build-wasm.sh crash)"
    up = upstream.start()
    port = proxy.free_port()
    boot = proxy.bootstrap({"crash": (port, "0", None, module)}, up.server_address[1], proxy.free_port())
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    wasm = hcm["http_filters"][0]["typed_config"]["config"]
    wasm["failure_policy"] = policy
    if policy == "FAIL_RELOAD":
        wasm["reload_config"] = {"backoff": {"base_interval": "1s", "max_interval": "10s"}}
    e = proxy.Envoy(boot)
    assert e.proc.poll() is None, e.log_text()[-4000:]
    return e, up, port


def get(port, headers=()):
    tid = uuid.uuid4().hex
    try:
        status = proxy.request(port, "GET", "/x", list(headers), test_id=tid, timeout=5)[0]
    except OSError:
        status = "reset"
    return status, tid


@pytest.mark.parametrize("policy", ["FAIL_RELOAD", "FAIL_CLOSED"])
def test_a_failed_vm_comes_back_under_fail_reload_only(policy):
    """The shipped failure policy: FAIL_RELOAD answers 503 while the VM is
    failed (nothing passes unfiltered) and starts a new VM after its
    backoff; FAIL_CLOSED answers 503 until Envoy restarts."""
    e, up, port = crash_edge(policy)
    try:
        assert get(port)[0] == 200
        status, tid = get(port, [("x-crash", "1")])
        assert status != 200 and tid not in up.records
        seen = []
        end = time.time() + 8
        while time.time() < end:
            status, tid = get(port)
            seen.append(status)
            if status == 200:
                break
            assert tid not in up.records, "a request passed a failed VM"
            time.sleep(0.25)
        reloads = [l for l in e.stats("/stats").splitlines() if ".vm_reload_success:" in l]
        if policy == "FAIL_RELOAD":
            assert seen[-1] == 200, seen
            assert 503 in seen, "fail closed while the VM is failed"
            assert any(not l.endswith(": 0") for l in reloads), reloads
        else:
            assert 200 not in seen and set(seen) == {503}, seen
    finally:
        e.stop()


def test_slow_forged_uploads_cannot_grow_envoy_past_the_budget(build):
    """A verified source with header keys: the filter keeps only the HMAC's
    state, but Envoy buffers each body while the filter holds the request.
    200 uploads of 1 MiB with a well-formed forged signature send 512 KiB
    each and stall: Envoy's buffered bytes are charged to the budget, so
    Envoy grows by about the budget (16 MiB), not by the 100 MiB sent."""
    attack.raise_fd_limit()
    held = 16 << 20
    cfg = {"max_json_bytes": 1 << 20, "max_held_bytes": held, "max_hold_ms": 5000, "sources": [
        {"id": "github", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_SECRET"}]}}]}
    up = upstream.start()
    port = proxy.free_port()
    e = build.start({"gh": (port, cfg)}, up.server_address[1], {"GH_SECRET": "s"})
    uploads = None
    try:
        for i in range(20):  # warm the worker up: the baseline after it
            proxy.request(port, "GET", "/warm")
        before = e.rss_kib()
        forged = [("x-hub-signature-256", "sha256=" + "0" * 64), ("x-github-delivery", "forged")]
        uploads = attack.Http1(port, 200, "/webhooks/github", declared=1 << 20, sent=0, extra=forged)
        chunk = b"x" * 65536
        for _ in range(8):
            for s in uploads.socks:
                try:
                    s.send(chunk)
                except OSError:
                    pass
            time.sleep(0.05)
        time.sleep(1.0)
        grown = (e.rss_kib() - before) / 1024
        answers = uploads.poll()
        print(f"200 slow forged uploads of 512 KiB: Envoy +{grown:.0f} MiB, answered {answers}")
        assert answers.get("503", 0) >= 150, answers
        assert grown < 2 * held / (1 << 20) + 16, f"Envoy grew {grown:.0f} MiB"
        assert not up.records, "a forged upload reached the upstream"
    finally:
        if uploads:
            uploads.close()
        e.stop()
        up.shutdown()
