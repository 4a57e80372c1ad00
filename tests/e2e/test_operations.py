"""What operators deploy beside the filter: the alert rules (checked and
unit-tested by promtool), the Grafana dashboard, and the Istio stats patch
that labels the metrics; each checked against the metrics a real Envoy with
the filter shows."""

import json
import re
import shutil
import subprocess
import uuid

import pytest
import yaml

import proxy
import upstream
from cases import ROOT

PROM = ROOT / "envoy" / "prometheus"


def promtool():
    exe = shutil.which("promtool")
    if not exe:
        raise RuntimeError("promtool is not installed: run `make setup` (Debian's prometheus package)")
    return exe


def test_alert_rules_check_and_pass_their_unit_tests():
    r = subprocess.run([promtool(), "check", "rules", str(PROM / "hookstamp-rules.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([promtool(), "test", "rules", "hookstamp-rules.test.yaml"], cwd=PROM,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.fixture(scope="module")
def live_metrics(build):
    """/stats/prometheus of an Envoy whose filter has every kind of metric,
    labelled by the stats_tags the Istio patch adds; for the module ([so]),
    its names as the relabelling of docs/metrics.md makes them."""
    patch = yaml.safe_load((ROOT / "envoy" / "istio" / "stats.yaml").read_text())
    tags = patch["spec"]["configPatches"][0]["patch"]["value"]["stats_config"]["stats_tags"]
    up = upstream.start()
    port = proxy.free_port()
    config = {"affinity": True, "sources": [
        {"id": "stripe", "dedupe": "stripe", "verify": {"scheme": "stripe", "secrets": [{"value": "whsec_x"}]},
         "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
        {"id": "github", "dedupe": "github"}]}
    boot = build.bootstrap({"ops": (port, config)}, up.server_address[1])
    boot["stats_config"] = {"stats_tags": tags}
    e = build.envoy(boot)
    try:
        assert e.proc.poll() is None, e.log_text()[-3000:]
        proxy.request(port, "POST", "/webhooks/stripe", [], body=b"{}", test_id=uuid.uuid4().hex)
        yield e.stats(), tags, build
    finally:
        e.stop()
        up.shutdown()


def test_istio_stats_patch_labels_every_metric(live_metrics):
    text, tags, _ = live_metrics
    assert tags == proxy.STATS_TAGS
    boot = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
    assert boot["stats_config"]["stats_tags"] == tags
    names = re.findall(r"^(hookstamp_\w+)\{(.*)\}", text, re.M)
    assert names, text[:2000]
    # No label left in a metric name.
    assert not [n for n, _ in names if "source_" in n or "reason_" in n or "version_" in n]
    assert 'hookstamp_signature_failures_total{source="stripe",reason="missing"} 1' in text
    # GitHub never redelivers by itself: the gauge the paging rule joins on.
    assert re.search(r'^hookstamp_never_redelivered\{source="github"\} 1$', text, re.M), text[:3000]
    assert 'hookstamp_never_redelivered{source="stripe"}' not in text


def metric_names(text):
    return set(re.findall(r"\b(hookstamp_[a-z_]+|envoy_wasm_[a-z0-9_]+)", text))


def test_rules_and_dashboard_name_only_metrics_the_filter_has(live_metrics):
    text, _, build = live_metrics
    have = metric_names(text)
    # Envoy's own Wasm metrics (a VM reloaded) exist only where there is a
    # VM: for the module, the filter's own metrics alone are compared; the
    # count of caught panics only where a panic is caught: the module.
    module_only = {"hookstamp_panics_total"}
    wanted = ((lambda n: n not in module_only) if build.name == "wasm"
              else (lambda n: not n.startswith("envoy_wasm_")))
    rules = (PROM / "hookstamp-rules.yaml").read_text()
    dashboard = json.loads((PROM / "hookstamp-dashboard.json").read_text())
    exprs = " ".join(t["expr"] for p in dashboard["panels"] for t in p["targets"])
    for source, names in [("rules", metric_names(rules)), ("dashboard", metric_names(exprs))]:
        missing = {n for n in names if wanted(n)} - have
        assert not missing, f"{source} name metrics the filter does not have: {missing}"
    assert (module_only <= have) == (build.name == "so"), have


MANIFESTS = sorted((ROOT / "envoy" / "istio").glob("*.yaml")) + sorted((ROOT / "envoy" / "gateway").glob("*.yaml"))


def validate(*files):
    return subprocess.run(["node", "validate_manifests.mjs", *map(str, files)], cwd=ROOT / "tests" / "e2e",
                          capture_output=True, text=True)


def test_manifests_validate_against_the_real_crd_schemas(tmp_path):
    """Every shipped Istio and Envoy Gateway manifest against the CRD
    schemas of npm's @kubernetes-models/istio and /envoy-gateway; a broken
    copy is refused, so the check can fail."""
    r = validate(*MANIFESTS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok ") == len(MANIFESTS) and "invalid" not in r.stdout, r.stdout
    broken = tmp_path / "broken.yaml"
    broken.write_text((ROOT / "envoy" / "istio" / "wasmplugin.yaml").read_text().replace("mode: SERVER", "mode: SERVR"))
    r = validate(broken)
    assert r.returncode == 1 and "match/0/mode must be equal to one of the allowed values" in r.stdout


def test_the_wasmplugin_runs_on_inbound_traffic_only_and_the_envoyfilter_is_pinned():
    wp = yaml.safe_load((ROOT / "envoy" / "istio" / "wasmplugin.yaml").read_text())
    assert wp["spec"]["match"] == [{"mode": "SERVER"}]
    for f in ["istio/wasmplugin.yaml", "istio/wasmplugin-gateway.yaml", "gateway/envoyextensionpolicy.yaml"]:
        assert re.search(r"hookstamp@sha256:[0-9a-f]{64}\b", (ROOT / "envoy" / f).read_text()), f
    ef = yaml.safe_load((ROOT / "envoy" / "istio" / "envoyfilter.yaml").read_text())
    patches = ef["spec"]["configPatches"]
    assert all("proxyVersion" in p["match"]["proxy"] for p in patches)
    assert any(p["applyTo"] == "LISTENER" and p["patch"]["value"]["per_connection_buffer_limit_bytes"] >= 1048576
               for p in patches)
