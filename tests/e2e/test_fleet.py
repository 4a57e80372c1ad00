"""A fleet, through both builds ([wasm]; [so]: the module with the same
configuration): two Envoys (two workers each) run envoy/fleet/envoy.yaml, ports
moved, in front of three recording queue nodes. Every hook of a lane reaches
one node, the same from both Envoys, in the order sent; a provider's
retries reach the node of the first delivery; a node that leaves gives its
lanes to the others and moves few of theirs, counted and printed."""

import json
import threading
import time
import urllib.request
import uuid

import pytest
import yaml

import proxy
import upstream
from cases import ROOT

LANES = 300
HOOKS = 4  # per lane, alternating between the Envoys


def fleet_bootstrap(build, port, admin, nodes):
    boot = yaml.safe_load((ROOT / "envoy" / "fleet" / "envoy.yaml").read_text())
    boot["admin"]["address"]["socket_address"]["port_value"] = admin
    lst = boot["static_resources"]["listeners"][0]
    lst["address"]["socket_address"]["port_value"] = port
    hcm = lst["filter_chains"][0]["filters"][0]["typed_config"]
    # The shipped filter, or the module with the same configuration ([so]).
    hcm["http_filters"][0] = build.swap(hcm["http_filters"][0])
    cluster = boot["static_resources"]["clusters"][0]
    for ep, node in zip(cluster["load_assignment"]["endpoints"][0]["lb_endpoints"], nodes):
        ep["endpoint"]["address"]["socket_address"]["port_value"] = node.server_address[1]
    # Quicker health checks than a production fleet's, so a test waits less.
    cluster["health_checks"][0].update(interval="0.2s", no_traffic_interval="0.2s",
                                       unhealthy_threshold=1, healthy_threshold=1)
    return boot


@pytest.fixture(scope="module")
def fleet(build):
    nodes = [upstream.start() for _ in range(3)]
    envoys = []
    for _ in range(2):
        port, admin = proxy.free_port(), proxy.free_port()
        e = build.envoy(fleet_bootstrap(build, port, admin, nodes), concurrency=2)
        assert e.proc.poll() is None, e.log_text()[-3000:]
        envoys.append((e, port))
    for e, _ in envoys:
        wait_health(e, nodes, [True, True, True])
    yield envoys, nodes
    for e, _ in envoys:
        e.stop()
    for n in nodes:
        n.shutdown()


def wait_health(envoy, nodes, want, timeout=15):
    """Until the Envoy's queue cluster shows each node healthy or not."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{envoy.admin}/clusters?format=json", timeout=5) as r:
            hosts = next(c for c in json.load(r)["cluster_statuses"] if c["name"] == "queue")["host_statuses"]
        healthy = {h["address"]["socket_address"]["port_value"]:
                   not h.get("health_status", {}).get("failed_active_health_check", False) for h in hosts}
        if [healthy.get(n.server_address[1]) for n in nodes] == want:
            # The admin answers from the main thread, which has the new
            # health before each worker's load balancer has been rebuilt
            # with it: a lane sent at once could still split.
            time.sleep(0.5)
            return
        time.sleep(0.1)
    raise AssertionError(f"health never became {want}")


def event(lane, n):
    return json.dumps({"id": f"evt_{lane}_{n}", "data": {"object": {"customer": f"cus_{lane}"}}}).encode()


def send_lanes(envoys, nodes, round_, lanes=LANES, hooks=HOOKS):
    """Sends `hooks` hooks of each lane, one after another within a lane,
    alternating Envoys; lanes in parallel. Returns {lane: [(node, seq)]}."""
    where = {}
    lock = threading.Lock()

    def lane_worker(lanes_of_worker):
        for lane in lanes_of_worker:
            got = []
            for n in range(hooks):
                e, port = envoys[n % 2]
                tid = uuid.uuid4().hex
                status, _, reply = proxy.request(port, "POST", "/webhooks/stripe", [], body=event(lane, f"{round_}{n}"),
                                                 test_id=tid)
                assert status == 200, reply
                node = next(i for i, nd in enumerate(nodes) if tid in nd.records)
                got.append((node, nodes[node].records[tid]["seq"]))
            with lock:
                where[lane] = got

    workers = [threading.Thread(target=lane_worker, args=(list(range(i, lanes, 8)),)) for i in range(8)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return where


def node_of(where):
    """Each lane's one node; fails if a lane was split."""
    out = {}
    for lane, got in where.items():
        assert len({n for n, _ in got}) == 1, f"lane {lane} split over nodes {got}"
        seqs = [s for _, s in got]
        assert seqs == sorted(seqs), f"lane {lane} out of order: {got}"
        out[lane] = got[0][0]
    return out


def test_every_lane_on_one_node_from_both_envoys(fleet):
    envoys, nodes = fleet
    placed = node_of(send_lanes(envoys, nodes, "a"))
    counts = [list(placed.values()).count(i) for i in range(3)]
    print(f"\nfleet: {LANES} lanes of {HOOKS} hooks, two Envoys: lanes per node {counts}")
    assert all(c > LANES // 6 for c in counts), counts


@pytest.mark.parametrize("source,headers,body", [
    ("github", [("x-github-delivery", "d-{i}")], b"{}"),
    ("stripe", [], b'{"id":"evt_retry_{i}","data":{"object":{}}}'),
])
def test_retries_of_one_event_reach_one_node(fleet, source, headers, body):
    envoys, nodes = fleet
    for i in range(60):
        seen = set()
        for attempt in range(4):
            e, port = envoys[attempt % 2]
            tid = uuid.uuid4().hex
            h = [(k, v.replace("{i}", str(i))) for k, v in headers]
            status, _, _ = proxy.request(port, "POST", f"/webhooks/{source}", h,
                                         body=body.replace(b"{i}", str(i).encode()), test_id=tid)
            assert status == 200
            seen.add(next(k for k, nd in enumerate(nodes) if tid in nd.records))
        assert len(seen) == 1, (source, i, seen)


def test_a_node_leaves_and_returns(fleet):
    envoys, nodes = fleet
    before = node_of(send_lanes(envoys, nodes, "b"))
    nodes[1].healthy = False
    for e, _ in envoys:
        wait_health(e, nodes, [True, False, True])
    during = node_of(send_lanes(envoys, nodes, "c"))
    assert 1 not in during.values(), "nothing reaches the node that left"
    lost = [l for l, n in before.items() if n == 1]
    moved = [l for l, n in before.items() if n != 1 and during[l] != n]
    nodes[1].healthy = True
    for e, _ in envoys:
        wait_health(e, nodes, [True, True, True])
    after = node_of(send_lanes(envoys, nodes, "d"))
    back = [l for l in lanes_diff(during, after)]
    print(f"\nfleet: a node leaves: its {len(lost)} lanes move to the others, and {len(moved)} of the "
          f"other {LANES - len(lost)} lanes move too; it returns: {len(back)} lanes move "
          f"({sum(1 for l in back if after[l] == 1)} of them back to it); "
          f"{sum(1 for l in before if after[l] != before[l])} lanes end on another node than before")
    assert after == before, "a returning node takes back exactly its lanes"
    assert len(moved) < (LANES - len(lost)) // 4, moved


def lanes_diff(a, b):
    return [l for l in a if a[l] != b[l]]


def test_istio_destinationrule_hashes_on_the_affinity_stamp():
    doc = yaml.safe_load((ROOT / "envoy" / "istio" / "destinationrule.yaml").read_text())
    lb = doc["spec"]["trafficPolicy"]["loadBalancer"]["consistentHash"]
    assert lb["httpHeaderName"] == "x-hookstamp-affinity"
    assert "maglev" in lb
    boot = yaml.safe_load((ROOT / "envoy" / "fleet" / "envoy.yaml").read_text())
    route = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"][
        "route_config"]["virtual_hosts"][0]["routes"][0]["route"]
    assert route["hash_policy"] == [{"header": {"header_name": "x-hookstamp-affinity"}}]


def test_fleet_bootstrap_validates():
    import subprocess
    r = subprocess.run([proxy.envoy_bin(), "--mode", "validate", "-c", "envoy/fleet/envoy.yaml"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


def gateway_bootstrap(build, port, admin, nodes):
    """The Istio fleet's topology, emulated: an ingress gateway Envoy runs
    the filter as envoy/istio/envoyfilter-gateway.yaml configures it (the
    module a local file), and routes to the queue pods with the consistent
    hash of envoy/istio/destinationrule.yaml (endpoints by address, as
    Istio places them)."""
    ef = yaml.safe_load((ROOT / "envoy" / "istio" / "envoyfilter-gateway.yaml").read_text())
    wasm = next(p for p in ef["spec"]["configPatches"] if p["applyTo"] == "EXTENSION_CONFIG")["patch"]["value"]
    # The patch's filter, or the module with the same configuration ([so]).
    wasm = build.swap(wasm)
    dr = yaml.safe_load((ROOT / "envoy" / "istio" / "destinationrule.yaml").read_text())
    ch = dr["spec"]["trafficPolicy"]["loadBalancer"]["consistentHash"]
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin}}},
        "static_resources": {
            "listeners": [{
                "name": "gateway",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
                "filter_chains": [{"filters": [{
                    "name": "envoy.filters.network.http_connection_manager",
                    "typed_config": {
                        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                        "stat_prefix": "gateway",
                        "route_config": {"virtual_hosts": [{"name": "queue", "domains": ["*"], "routes": [{
                            "match": {"prefix": "/"},
                            "route": {"cluster": "queue", "hash_policy": [{"header": {"header_name": ch["httpHeaderName"]}}]}}]}]},
                        "http_filters": [{"name": wasm["name"], "typed_config": wasm["typed_config"]},
                                         {"name": "envoy.filters.http.router", "typed_config": {
                                             "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
                    }}]}],
            }],
            "clusters": [{
                "name": "queue", "type": "STATIC", "connect_timeout": "1s", "lb_policy": "MAGLEV",
                "maglev_lb_config": {"table_size": ch["maglev"]["tableSize"]},
                "load_assignment": {"cluster_name": "queue", "endpoints": [{"lb_endpoints": [
                    {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": n.server_address[1]}}}}
                    for n in nodes]}]},
            }],
        },
    }


def test_the_istio_gateway_topology_keeps_lanes_on_one_pod_and_ignores_client_affinity(build):
    nodes = [upstream.start() for _ in range(3)]
    port = proxy.free_port()
    e = build.envoy(gateway_bootstrap(build, port, proxy.free_port(), nodes), concurrency=2)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]

        def send(lane, n, affinity):
            tid = uuid.uuid4().hex
            status, _, reply = proxy.request(port, "POST", "/webhooks/stripe", [("x-hookstamp-affinity", affinity)],
                                             body=event(lane, n), test_id=tid)
            assert status == 200, reply
            node = next(i for i, nd in enumerate(nodes) if tid in nd.records)
            stamps = dict(nodes[node].records[tid]["stamps"])
            assert stamps["x-hookstamp-affinity"] != affinity, "the client's affinity is stripped"
            return node

        # Every hook of a lane on one pod, whatever affinity the client sends.
        where = {lane: {send(lane, n, uuid.uuid4().hex) for n in range(4)} for lane in range(30)}
        split = {lane: nodes_ for lane, nodes_ in where.items() if len(nodes_) != 1}
        assert not split, split
        # One affinity a client chose, on 30 lanes: they spread as their own
        # lanes do; the client picks no pod.
        chosen = {send(100 + lane, 0, "f" * 32) for lane in range(30)}
        assert len(chosen) > 1, chosen
        print(f"gateway: 30 lanes of 4 hooks, each on one pod; a client's fixed affinity on 30 lanes reached "
              f"{len(chosen)} pods")
    finally:
        e.stop()
        for n in nodes:
            n.shutdown()
