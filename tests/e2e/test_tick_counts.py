"""Every 408 the tick sends is counted, in the configuration of the request
it answers, through both builds ([wasm], [so]). The module's tick runs on
one stream of each worker and answers the held requests of every
configuration there; each answer goes through the answered request's own
stream, so that Envoy counts it in that request's configuration (a
counter id is the configuration's own: one counted through another
configuration's stream lands on another metric, or on none).

Two listeners of two configurations (their sources at other places, so
that their counters' ids differ) on one worker, bodies stalled on both:
for each, the 408s its clients got (late, and slow under a full budget)
are what its own source's counters add up to, and likewise its 503s. And
a configuration pushed again and again through LDS (test_reload's) while
bodies stall on each: every 408 the clients got is counted, old
configurations' and new alike."""

import socket
import time

import proxy
import test_envoy as te
import test_reload
import upstream

LATE = ("hookstamp_body_timeout_total", "hookstamp_body_too_slow_total")

# Listener a: a budget five large stalled bodies fill past three quarters
# (the tick answers the stalest slow ones 408), a deadline of 900 ms.
A = {"max_json_bytes": 65536, "max_held_bytes": 800000, "max_hold_ms": 900, "slow_body_ms": 300,
     "sources": [{"id": "ta", "dedupe": "stripe"}]}
# Listener b: another deadline, its body source second.
B = {"max_hold_ms": 1200, "sources": [{"id": "tb_headers", "dedupe": "github"},
                                      {"id": "tb", "dedupe": "stripe"}]}


def stall_many(port, source, n, big=0):
    """`big` bodies of 64 KiB with 60 000 bytes sent, then `n` small ones
    with 100 bytes of 1 000: the open connections."""
    path = f"/webhooks/{source}"
    socks = [te.stall(port, te.event(f"evt_big{i}", 65536), sent=60000, path=path) for i in range(big)]
    return socks + [te.stall(port, te.event(f"evt_{i}", 1000), path=path) for i in range(n)]


def answers(socks, timeout):
    """The status each connection was answered, by status (None: no answer
    by `timeout`)."""
    got = {}
    deadline = time.time() + timeout
    for s in socks:
        s.settimeout(max(0.05, deadline - time.time()))
        try:
            line = s.recv(64).split(b"\r\n", 1)[0]
            status = int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else None
        except (socket.timeout, OSError):
            status = None
        finally:
            s.close()
        got[status] = got.get(status, 0) + 1
    return got


def counted(e, source, names):
    return sum(te.counter({"envoy": e}, n, source=source) for n in names)


def test_each_408_the_tick_sends_is_counted_in_its_own_configuration(build):
    up = upstream.start()
    ports = {"a": proxy.free_port(), "b": proxy.free_port()}
    e = build.start({"a": (ports["a"], A), "b": (ports["b"], B)}, up.server_address[1])
    try:
        socks = {"a": stall_many(ports["a"], "ta", 30, big=5), "b": stall_many(ports["b"], "tb", 30)}
        time.sleep(0.2)
        socks["b"] += stall_many(ports["b"], "tb", 20)
        socks["a"] += stall_many(ports["a"], "ta", 20)
        seen = {k: answers(v, 5) for k, v in socks.items()}
        figures = f"[{build.name}] answers seen {seen}; " + ", ".join(
            f"{s}: late {counted(e, s, LATE[:1])} slow {counted(e, s, LATE[1:])} busy "
            f"{counted(e, s, ['hookstamp_busy_total'])}" for s in ("ta", "tb"))
        print(figures)
        for listener, source in (("a", "ta"), ("b", "tb")):
            got = seen[listener]
            assert None not in got and set(got) <= {408, 503}, figures
            assert got.get(408, 0) >= 40 and counted(e, source, LATE) == got[408], figures
            assert counted(e, source, ["hookstamp_busy_total"]) == got.get(503, 0), figures
        # The slow ones were answered before their deadline, on a's budget.
        assert counted(e, "ta", LATE[1:]) >= 1 and counted(e, "tb", LATE[1:]) == 0, figures
        assert counted(e, "tb_headers", LATE + ("hookstamp_busy_total",)) == 0, figures
        assert e.proc.poll() is None and "panicked" not in e.log_text()
    finally:
        e.stop()
        up.shutdown()


PUSHES = 5
STALLS = 175


def pushed(n, port):
    """Push n's configuration: the stalled source `tr` after n % 3 others
    (its counters' ids move), and a deadline of its own."""
    others = [{"id": f"other{i}", "dedupe": "github"} for i in range(n % 3)]
    return {"hooks": (port, {"max_hold_ms": 700 + 40 * n, "sources": others + [{"id": "tr", "dedupe": "stripe"}]})}


def test_every_408_is_counted_across_pushes_of_the_configuration(build):
    up = upstream.start()
    port = proxy.free_port()
    lds = test_reload.Lds(build, port, up.server_address[1], lambda n: pushed(n, port))
    lds.push(0)
    # The replaced filter chains drain for longer than the test: their
    # requests are answered by the tick, not closed by the drain.
    e = build.envoy(lds.bootstrap("hookstamp-counts"), concurrency=2, args=("--drain-time-s", "60"))
    socks = []
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        for n in range(1, PUSHES + 1):
            socks += stall_many(port, "tr", STALLS)
            accepted = test_reload.stat(e, "listener_manager.lds.update_success")
            lds.push(n)
            test_reload.wait_for(lambda: test_reload.stat(e, "listener_manager.lds.update_success") > accepted,
                                 10, f"push {n} accepted")
        socks += stall_many(port, "tr", STALLS)
        # The configurations replaced hold their stalled bodies still.
        draining = test_reload.stat(e, "listener_manager.total_filter_chains_draining")
        seen = answers(socks, 8)
        figures = (f"[{build.name}] {PUSHES} pushes, {len(socks)} bodies stalled, {draining} replaced filter "
                   f"chains draining: answers seen {seen}; "
                   f"counted late {counted(e, 'tr', LATE[:1])}, slow {counted(e, 'tr', LATE[1:])}")
        print(figures)
        assert draining >= 1 and seen == {408: (PUSHES + 1) * STALLS}, figures
        assert counted(e, "tr", LATE) == seen[408], figures
        assert test_reload.stat(e, "listener_manager.lds.update_rejected") == 0
        assert e.proc.poll() is None and "panicked" not in e.log_text()
    finally:
        for s in socks:
            s.close()
        e.stop()
        up.shutdown()
