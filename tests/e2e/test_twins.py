"""The bench's twins, (r) and (r.so): the empty filter making (c)'s host
calls (benches/noop-filter). BENCHMARKS.md splits (c) into those calls and
hookstamp's own work between them, so each twin is checked to make every
call it stands for (and (hc), (hc.so), which make (c)'s stamps by hand,
to stamp what hookstamp stamps): the stamps added (read back by the access log), both
counters counted (the .wasm's at a tick, as hookstamp's .wasm counts), the
access log's reason set. The header list's read
shows in none of those, so a twin makes no other call where its read finds
no header: the others seen are the read seen.
"""

import json
import time
import urllib.request

import pytest

import bench_envoy
import proxy


def access_log(boot, path):
    """Each request's stamps as the access log sees them, and the reason."""
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    fields = {k: f"%REQ({k})%" for k, _ in bench_envoy.STAMPS8}
    fields["why"] = "%FILTER_STATE(wasm.hookstamp_why:PLAIN)%"
    hcm["access_log"] = [{"name": "envoy.access_loggers.file", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
        "path": str(path), "log_format": {"json_format": fields}}}]


def served(name, tmp_path, monkeypatch):
    """Three of (c)'s requests through bench configuration `name`: each
    one's access log line, and Envoy's counters."""
    log = tmp_path / f"{name}.log"
    real = proxy.bootstrap

    def with_log(*a, **kw):
        boot = real(*a, **kw)
        access_log(boot, log)
        return boot

    monkeypatch.setattr(proxy, "bootstrap", with_log)
    e, port = bench_envoy.start(name)
    try:
        for _ in range(3):
            status, _, _ = proxy.request(port, "POST", "/webhooks/github", bench_envoy.GH, b"{}")
            assert status == 200
        deadline = time.time() + 10
        while time.time() < deadline and len(log.read_text().splitlines() if log.exists() else []) < 3:
            time.sleep(0.1)
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        # The .wasm's counts reach Envoy at a tick (the twins' as hookstamp's).
        time.sleep(e.counts_lag_s)
        with urllib.request.urlopen(f"http://127.0.0.1:{e.admin}/stats?format=json", timeout=5) as r:
            stats = {s["name"]: s.get("value") for s in json.load(r)["stats"] if "name" in s}
    finally:
        e.stop()
        monkeypatch.setattr(proxy, "bootstrap", real)
    assert len(lines) == 3
    return lines, stats


def assert_counted(stats):
    for counter in ("stamped", "event_type_missing"):
        found = [v for n, v in stats.items() if n.endswith(counter)]
        assert found == [3], (counter, {n: v for n, v in stats.items() if counter in n})


@pytest.mark.parametrize("twin", ["r", "r.so"])
def test_a_twin_makes_the_calls_of_c(twin, tmp_path, monkeypatch):
    built = bench_envoy.NOOP_SO if twin.endswith(".so") else bench_envoy.NOOP
    assert built.exists(), f"{built} is missing: make test builds it (make noop)"
    assert "read" in bench_envoy.TWIN
    if not twin.endswith(".so"):
        assert bench_envoy.ENVOYS[twin][1] == bench_envoy.TWIN + bench_envoy.AT_TICK
    lines, stats = served(twin, tmp_path, monkeypatch)
    for line in lines:
        assert {k: line[k] for k, _ in bench_envoy.STAMPS8} == dict(bench_envoy.STAMPS8)
        assert line["why"] == "event-type=absent"
    assert_counted(stats)


@pytest.mark.parametrize("build", ["", ".so"])
def test_the_hand_twin_stamps_what_c_stamps(build, tmp_path, monkeypatch):
    """(hc), (hc.so): (c)'s stamps made by hand. Each of the eight is the
    very value hookstamp stamps for (c) (its lane id too), its two
    counters counted and its reason set: the floor does (c)'s work."""
    assert bench_envoy.HAND[0] == "hand" and bench_envoy.HAND[1:] == bench_envoy.TWIN[len(bench_envoy.STAMPS8) + 1:]
    stamps = [k for k, _ in bench_envoy.STAMPS8]
    hand, stats = served("hc" + build, tmp_path, monkeypatch)
    assert_counted(stats)
    real, _ = served("c" + build, tmp_path, monkeypatch)
    for h, r in zip(hand, real):
        assert {k: h[k] for k in stamps} == {k: r[k] for k in stamps}
        assert h["why"] == r["why"] == "event-type=absent"
    lane = hand[0]["x-hookstamp-lane-0"]
    assert len(lane) == 32 and lane != dict(bench_envoy.STAMPS8)["x-hookstamp-lane-0"]


@pytest.mark.parametrize("twin", ["xed", "xed.so"])
def test_the_check_twin_verifies_every_request(twin, monkeypatch):
    """(xed), (xed.so): the empty filter's one Ed25519 check a request,
    the floor under (ved) − (d). Each request is served after its check
    passes; given a signature that fails (`ed25519 N wrong`), the twin
    aborts on its first request, so the check is made."""
    assert bench_envoy.CHECK == [f"ed25519 {bench_envoy.ED_SIGNED}"]
    for lines, served in [(bench_envoy.CHECK, True), ([bench_envoy.CHECK[0] + " wrong"], False)]:
        monkeypatch.setitem(bench_envoy.ENVOYS, twin, (bench_envoy.ENVOYS[twin][0], lines))
        e, port = bench_envoy.start(twin)
        try:
            for _ in range(1 if not served else 3):
                try:
                    status = proxy.request(port, "POST", "/webhooks/github", bench_envoy.GH, b"{}")[0]
                except OSError:
                    status = None  # the module's abort takes Envoy down with it
                assert (status == 200) == served, (lines, status)
        finally:
            e.stop()
