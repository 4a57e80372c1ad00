"""A panic in the dynamic module never takes Envoy down, proven in Envoy
(the .so only: in the .wasm a panic fails the VM, and Envoy's failure
policy answers). HOOKSTAMP_PANIC_PROBE=<hook> in Envoy's environment
(src/dynmod/probe.rs) makes that hook panic once. For each hook the module
has a probe in, Envoy runs with it armed and gets what reaches the hook: a
header source's request (filter_new, request_headers), a body source's
(request_body), one with HTTP/2 trailers (request_trailers), a stalled
body the tick answers (scheduled, filter_destroy: the stream it ends), a
configuration pushed through LDS (config_new) and one replaced by the next
push (config_destroy). Asserted each time: the request whose callback
panicked is answered 500 (and nothing reaches the upstream); Envoy stays
up and stamps the next hooks 2xx; the tick still answers a stalled body
408; hookstamp_panics_total counts the panic once; Envoy's log has the
panic's message (the module's panic hook) and the barrier's line."""

import json
import re
import time
import uuid

import pytest

import proxy
import test_envoy as te
import test_reload
from cases import ROOT

# A header source (the dedupe key is GitHub's delivery header) and a body
# source (Stripe's: the event id in the JSON body); a body is late after
# max_hold_ms.
HOLD_MS = 700
CONFIG = {"max_hold_ms": HOLD_MS, "sources": [{"id": "hdr", "dedupe": "github"},
                                              {"id": "body", "dedupe": "stripe"}]}
PROBE_CALL = re.compile(r'probe::fire\("(\w+)"\)|on_stream\(\s*"(\w+)"')


def probed_hooks():
    """Every hook src/dynmod/mod.rs arms a probe in, as it names them."""
    text = (ROOT / "src" / "dynmod" / "mod.rs").read_text()
    return sorted({a or b for a, b in PROBE_CALL.findall(text)})


HOOKS = ["filter_new", "request_headers", "request_body", "request_trailers", "scheduled",
         "filter_destroy", "config_new", "config_destroy"]


def test_every_probed_hook_is_tested():
    assert sorted(HOOKS) == probed_hooks()


def header_hook(port, up):
    """(status, the dedupe key stamped, or None when not forwarded)."""
    tid = uuid.uuid4().hex
    status, _, _ = proxy.request(port, "POST", "/webhooks/hdr", [("x-github-delivery", tid)],
                                 body=b"{}", test_id=tid, timeout=10)
    return status, stamped(up, tid)


def body_hook(port, up):
    tid = uuid.uuid4().hex
    status, _, _ = proxy.request(port, "POST", "/webhooks/body", [], body=json.dumps({"id": tid}).encode(),
                                 test_id=tid, timeout=10)
    return status, stamped(up, tid)


def trailers_hook(port, up):
    tid = uuid.uuid4().hex
    status, _ = te.h2_request(port, "/webhooks/body", [("x-test-id", tid)], json.dumps({"id": tid}).encode(),
                              [("x-trailer", "t")])
    return int(status), stamped(up, tid)


def stamped(up, tid):
    rec = up.records.get(tid)
    return dict(rec["stamps"]).get("x-hookstamp-dedupe-key") if rec else None


def stalled_is_answered_408(port):
    """A body that never comes: the tick answers it 408 about max_hold_ms
    after its headers."""
    s = te.stall(port, te.event("evt_stalled", 1000), path="/webhooks/body")
    s.settimeout(HOLD_MS / 1000 + 3)
    t0 = time.time()
    try:
        reply = s.recv(4096)
    finally:
        s.close()
    assert reply.startswith(b"HTTP/1.1 408"), reply
    assert HOLD_MS / 1000 - 0.2 < time.time() - t0 < HOLD_MS / 1000 + 2


# What reaches each request-path hook, and the answer when it panics.
AFFECTED = {"filter_new": header_hook, "request_headers": header_hook, "request_body": body_hook,
            "request_trailers": trailers_hook}


def serves_normally(e, port, up):
    """Envoy is up, and hooks of both sources (and one with trailers) are
    stamped 2xx, each with its own key."""
    assert e.proc.poll() is None, e.log_text()[-3000:]
    for send in (header_hook, body_hook, trailers_hook, header_hook, body_hook):
        status, key = send(port, up)
        assert 200 <= status < 300 and key, (send.__name__, status, e.log_text()[-2000:])


def counted_and_logged(e, hook):
    """The panic counted once (by the next stream, for one outside a
    request) and both log lines in Envoy's log."""
    assert te.counter({"envoy": e}, "hookstamp_panics_total") == 1
    log = e.log_text()
    assert f"HOOKSTAMP_PANIC_PROBE: a panic in {hook}, on purpose" in log, log[-3000:]
    assert f"hookstamp: a panic in {hook} was caught" in log, log[-3000:]
    assert "panicked at" in log


@pytest.mark.parametrize("hook", [h for h in HOOKS if not h.startswith("config_")])
def test_a_panic_in_a_stream_hook_answers_its_request_and_envoy_goes_on(so, up, hook):
    port = proxy.free_port()
    e = so.start({"panic": (port, CONFIG)}, up.server_address[1], env={"HOOKSTAMP_PANIC_PROBE": hook})
    try:
        if hook in AFFECTED:
            assert AFFECTED[hook](port, up) == (500, None)
        else:
            # The tick's first run panicked, or the stream it answered
            # ended in a panic: later ticks still answer the late body.
            stalled_is_answered_408(port)
        stalled_is_answered_408(port)
        serves_normally(e, port, up)
        counted_and_logged(e, hook)
    finally:
        e.stop()


class KeptLoaded(test_reload.Lds):
    """test_reload's LDS, its listener `hooks` (a configuration new each
    push) loading the module with do_not_close: Envoy unloads a module
    that no configuration holds (after a refused one, say), and one loaded
    anew has none of the old one's state (its probe armed again, the
    panics it caught not counted)."""

    def __init__(self, so, port, upstream_port):
        super().__init__(so, port, upstream_port, lambda n: {"hooks": (port, dict(CONFIG, max_hold_ms=HOLD_MS + n))})

    def resources(self, n):
        listeners = super().resources(n)
        for listener in listeners:
            hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
            hcm["http_filters"][0]["typed_config"]["dynamic_module_config"]["do_not_close"] = True
        return listeners


def lds_envoy(so, up, hook):
    """An Envoy whose listener comes from a file-based LDS, the probe
    armed: (Envoy, the Lds, its port)."""
    port = proxy.free_port()
    lds = KeptLoaded(so, port, up.server_address[1])
    lds.push(0)
    e = so.envoy(lds.bootstrap("hookstamp-panic"), env={"HOOKSTAMP_PANIC_PROBE": hook}, args=test_reload.ENVOY_ARGS)
    assert e.proc.poll() is None, e.log_text()[-3000:]
    return e, lds, port


def pushed(e, lds, n):
    """Pushes configuration n; whether Envoy accepted it."""
    before = [test_reload.stat(e, f"listener_manager.lds.update_{r}") for r in ("success", "rejected")]
    lds.push(n)
    test_reload.wait_for(lambda: [test_reload.stat(e, f"listener_manager.lds.update_{r}")
                                  for r in ("success", "rejected")] != before, 10, f"push {n} taken")
    return test_reload.stat(e, "listener_manager.lds.update_rejected") == before[1]


def test_a_panic_creating_a_configuration_refuses_it_and_the_next_push_serves(so, up):
    """config_new panics: the pushed listener is refused (as a bad
    configuration is), Envoy stays up, and the next push serves."""
    e, lds, port = lds_envoy(so, up, "config_new")
    try:
        test_reload.wait_for(lambda: test_reload.stat(e, "listener_manager.lds.update_rejected") == 1, 10,
                             "the first push refused")
        assert test_reload.stat(e, "listener_manager.total_listeners_active") == 0
        assert pushed(e, lds, 1), e.log_text()[-3000:]
        stalled_is_answered_408(port)
        serves_normally(e, port, up)
        counted_and_logged(e, "config_new")
    finally:
        e.stop()


def test_a_panic_destroying_a_configuration_leaves_envoy_serving_the_next(so, up):
    """config_destroy panics when the push after it replaces the listener's
    filter chain and the old one has drained: Envoy serves the new one."""
    e, lds, port = lds_envoy(so, up, "config_destroy")
    try:
        serves_normally(e, port, up)
        assert pushed(e, lds, 1), e.log_text()[-3000:]
        test_reload.wait_for(lambda: "a panic in config_destroy was caught" in e.log_text(), 15,
                             "the replaced configuration destroyed")
        stalled_is_answered_408(port)
        serves_normally(e, port, up)
        counted_and_logged(e, "config_destroy")
    finally:
        e.stop()
