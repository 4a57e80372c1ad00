"""The `hookstamp` command over the files users have: `check` cross-checks
the variables a configuration reads against what its deployment passes to
the VM (values mode and names mode), names the file in its messages and
suggests near misses; `stamp`, `explain` and `batch` read every form
`check` reads and choose among several with --config; `vars` names the
variables each configuration reads by the checker's rule, never a value."""

import json
import os
import re
import subprocess

from cases import ROOT

EXE = str(ROOT / "target" / "debug" / "hookstamp")
SHIPPED = ["envoy/hookstamp.json", "envoy/envoy.yaml", "envoy/fleet/envoy.yaml",
           "envoy/examples/verified.yaml", "envoy/istio/envoyfilter.yaml",
           "envoy/istio/envoyfilter-gateway.yaml", "envoy/istio/wasmplugin.yaml",
           "envoy/istio/wasmplugin-gateway.yaml", "envoy/gateway/envoyextensionpolicy.yaml"]


def run(args, stdin="", env=None):
    clean = {k: v for k, v in os.environ.items() if not k.endswith("_WEBHOOK_SECRET")}
    return subprocess.run([EXE, *args], input=stdin, capture_output=True, text=True, cwd=ROOT,
                          env={**clean, **(env or {})})


def test_every_shipped_file_passes_in_names_mode_and_says_so():
    for f in SHIPPED:
        r = run(["check", f, "--env", "names"])
        assert r.returncode == 0, (f, r.stderr)
        assert "(names checked: each secret's variable is passed to the VM; values not read)" in r.stdout, f
        assert f in r.stdout or f.endswith(".json"), (f, r.stdout)


def test_values_mode_reads_the_values_and_names_the_file():
    r = run(["check", "envoy/istio/envoyfilter.yaml"])
    assert r.returncode == 1
    assert r.stderr.startswith("envoy/istio/envoyfilter.yaml (EnvoyFilter hookstamp) at spec.configPatches[0]")
    assert "the environment variable STRIPE_WEBHOOK_SECRET is not set or is empty" in r.stderr
    r = run(["check", "envoy/istio/envoyfilter.yaml"], env={"STRIPE_WEBHOOK_SECRET": "whsec_c2VjcmV0"})
    assert r.returncode == 0, r.stderr
    assert "names checked" not in r.stdout and "c2VjcmV0" not in r.stdout + r.stderr


def test_a_variable_the_deployment_does_not_pass_is_an_error_in_both_modes(tmp_path):
    """The bootstrap reads GITHUB_WEBHOOK_SECRET but its host_env_keys leave
    it out: Envoy would refuse the configuration; check says so, even where
    the variable is set in check's own environment."""
    text = (ROOT / "envoy/examples/verified.yaml").read_text()
    assert "host_env_keys: [GITHUB_WEBHOOK_SECRET, STRIPE_WEBHOOK_SECRET]" in text
    f = tmp_path / "bootstrap.yaml"
    f.write_text(text.replace("host_env_keys: [GITHUB_WEBHOOK_SECRET, STRIPE_WEBHOOK_SECRET]",
                              "host_env_keys: [STRIPE_WEBHOOK_SECRET]"))
    secrets = {"GITHUB_WEBHOOK_SECRET": "gh-s3cret-value", "STRIPE_WEBHOOK_SECRET": "whsec_c2VjcmV0"}
    for mode, env in [("values", secrets), ("names", {})]:
        r = run(["check", str(f), "--env", mode], env=env)
        assert r.returncode == 1, (mode, r.stdout)
        assert ("the configuration reads the variable GITHUB_WEBHOOK_SECRET ({\"env\": \"GITHUB_WEBHOOK_SECRET\"}), "
                "which is not passed to the filter's VM: add it to vm_config.environment_variables.host_env_keys") in r.stderr
        assert "STRIPE_WEBHOOK_SECRET ({" not in r.stderr
        assert "gh-s3cret-value" not in r.stdout + r.stderr
    # A WasmPlugin passes them with vmConfig.env; Envoy Gateway with env.hostKeys.
    wp = tmp_path / "wp.yaml"
    wp.write_text("kind: WasmPlugin\nmetadata: {name: w}\nspec:\n  pluginConfig:\n"
                  "    sources: [{id: gh, dedupe: github, verify: {scheme: github, secrets: [{env: GH_SECRET}]}}]\n"
                  "  vmConfig:\n    env: [{name: OTHER, valueFrom: HOST}]\n")
    r = run(["check", str(wp), "--env", "names"])
    assert r.returncode == 1 and "GH_SECRET" in r.stderr and "add it to spec.vmConfig.env (valueFrom: HOST)" in r.stderr
    wp.write_text(wp.read_text().replace("OTHER", "GH_SECRET"))
    r = run(["check", str(wp), "--env", "names"])
    assert "GH_SECRET" not in r.stderr, r.stderr


def test_near_misses_get_a_suggestion():
    cfg = {"sources": [{"id": "a", "dedupe": "strpe", "sink": [],
                        "verify": {"scheme": "githb", "secrets": [{"value": "x"}]}},
                       {"id": "b", "dedupe": "github", "sinks": [{"type": "sqs", "orderd": True}]}]}
    r = run(["check", "-"], json.dumps(cfg))
    assert r.returncode == 1
    assert 'unknown preset "strpe": did you mean "stripe"?' in r.stderr
    assert 'unknown scheme "githb": did you mean "github"?' in r.stderr
    assert 'unknown field "sink": did you mean "sinks"?' in r.stderr
    assert 'unknown field "orderd": did you mean "ordered"?' in r.stderr


def test_stamp_explain_and_batch_read_every_form_check_reads(tmp_path):
    req = ["--path", "/webhooks/stripe", "-H", "X-Entity-Id: e1", "--body", "-"]
    body = '{"id":"evt_1","data":{"object":{"customer":"cus_123"}}}'
    want = run(["stamp", "envoy/hookstamp.json", *req], body)
    assert want.returncode == 0 and '"action":"forward"' in want.stdout, want.stderr
    for f in ["envoy/envoy.yaml", "envoy/fleet/envoy.yaml"]:
        got = run(["stamp", f, *req], body)
        assert got.returncode == 0, (f, got.stderr)
    assert run(["stamp", "envoy/envoy.yaml", *req], body).stdout == want.stdout
    e = run(["explain", "envoy/envoy.yaml", *req], body)
    assert e.returncode == 0 and "dedupe key: json id (integers too) → evt_1 (as is)" in e.stdout, e.stderr
    line = json.dumps({"path": "/webhooks/stripe", "headers": [["X-Entity-Id", "e1"]], "body": body})
    b = run(["batch", "envoy/envoy.yaml"], line + "\n")
    assert b.returncode == 0 and b.stdout == want.stdout, b.stderr
    # Several configurations: choose by index or by a part of the place.
    two = tmp_path / "two.yaml"
    two.write_text("kind: WasmPlugin\nmetadata: {name: one}\nspec:\n  pluginConfig:\n"
                   "    sources: [{id: stripe, dedupe: {header: x-one}}]\n---\n"
                   "kind: WasmPlugin\nmetadata: {name: two}\nspec:\n  pluginConfig:\n"
                   "    sources: [{id: stripe, dedupe: {header: x-two}}]\n")
    args = ["--path", "/webhooks/stripe", "-H", "x-one: 1", "-H", "x-two: 2"]
    r = run(["stamp", str(two), *args])
    assert r.returncode == 2 and "holds 2 configurations: choose one with --config" in r.stderr
    assert "1: " + str(two) + " document 1 (WasmPlugin one) spec.pluginConfig" in r.stderr
    assert '"x-hookstamp-dedupe-key","1"' in run(["stamp", str(two), *args, "--config", "1"]).stdout
    assert '"x-hookstamp-dedupe-key","2"' in run(["stamp", str(two), *args, "--config", "WasmPlugin two"]).stdout
    r = run(["stamp", str(two), *args, "--config", "three"])
    assert r.returncode == 2 and 'names none of the configurations' in r.stderr


def test_the_buffer_limit_warning_reads_the_listener_the_file_shows(tmp_path):
    """A bootstrap whose listener holds max_json_bytes is not warned of;
    one whose listener is smaller is, and --strict fails it."""
    r = run(["check", "--strict", "--env", "names", "envoy/examples/verified.yaml"])
    assert r.returncode == 0 and "per_connection_buffer_limit_bytes" not in r.stderr, r.stderr
    text = (ROOT / "envoy/examples/verified.yaml").read_text()
    assert text.count("per_connection_buffer_limit_bytes: 52494336") >= 1
    small = tmp_path / "small.yaml"
    small.write_text(text.replace("per_connection_buffer_limit_bytes: 52494336", "per_connection_buffer_limit_bytes: 1048576"))
    r = run(["check", "--strict", "--env", "names", str(small)])
    assert r.returncode == 1 and "above Envoy's default per_connection_buffer_limit_bytes" in r.stderr, r.stderr
    # Options before the file, as after it.
    assert run(["check", "--env", "names", "--strict", "envoy/examples/verified.yaml"]).returncode == 0


def test_a_streamed_signature_passes_where_headers_cannot_be_held(tmp_path):
    """A WasmPlugin cannot hold headers for a body: a held verify is refused
    there, a streamed one (header keys) is not."""
    wp = tmp_path / "wp.yaml"
    wp.write_text("kind: WasmPlugin\nmetadata: {name: w}\nspec:\n  pluginConfig:\n"
                  "    sources: [{id: sv, dedupe: svix, verify: {scheme: svix, secrets: [{env: SVIX_SECRET}], MODE}}]\n"
                  "  vmConfig:\n    env: [{name: SVIX_SECRET, valueFrom: HOST}]\n")
    text = wp.read_text()
    wp.write_text(text.replace("MODE", "mode: hold"))
    r = run(["check", str(wp), "--env", "names"])
    assert r.returncode == 1 and 'header keys with verify "mode": "stream"' in r.stderr, r.stderr
    wp.write_text(text.replace("MODE", "mode: stream"))
    r = run(["check", str(wp), "--env", "names"])
    assert r.returncode == 0, r.stderr


def test_vars_names_what_each_vm_reads_by_the_checkers_rule_and_never_a_value(tmp_path):
    """What make run writes into host_env_keys: per Wasm filter, its own list,
    then what it reads that key_values do not give, then --add-from's; a
    name the checker refuses (a secret pasted in its place) is neither
    listed nor shown."""
    text = (ROOT / "envoy/examples/verified.yaml").read_text()
    f = tmp_path / "bootstrap.yaml"
    f.write_text(text.replace("host_env_keys: [GITHUB_WEBHOOK_SECRET, STRIPE_WEBHOOK_SECRET]",
                              "host_env_keys: [STRIPE_WEBHOOK_SECRET, OTHER]")
                 .replace("{env: GITHUB_WEBHOOK_SECRET}", "{env: 9pasted-secret-a1}"))
    r = run(["vars", str(f), "--add-from", "HS_TEST_MORE"], env={"HS_TEST_MORE": "B_EXTRA, A_EXTRA,OTHER"})
    assert r.returncode == 0, r.stderr
    (line,) = [json.loads(l) for l in r.stdout.splitlines()]
    assert line["reads"] == ["STRIPE_WEBHOOK_SECRET"]
    assert line["host_env_keys"] == ["STRIPE_WEBHOOK_SECRET", "OTHER", "A_EXTRA", "B_EXTRA"]
    assert line["wasm_config"] == ("/static_resources/listeners/0/filter_chains/0/filters/0/typed_config"
                                   "/http_filters/0/typed_config/config")
    assert "pasted-secret" not in r.stdout + r.stderr
    r = run(["vars", str(f), "--add-from", "HS_TEST_MORE"], env={"HS_TEST_MORE": "A,whsec_pasted-secret-b2"})
    assert r.returncode == 2
    assert r.stderr == ("hookstamp: HS_TEST_MORE holds an entry that is not a variable name "
                        "([A-Za-z_][A-Za-z0-9_]*); not shown\n")
    # A plugin configuration or a manifest says nothing of a Wasm filter's VM.
    for shipped in ("envoy/hookstamp.json", "envoy/istio/wasmplugin.yaml"):
        r = run(["vars", shipped])
        assert r.returncode == 0, r.stderr
        assert all(json.loads(l)["wasm_config"] is None and json.loads(l)["host_env_keys"] is None
                   for l in r.stdout.splitlines()), r.stdout


def warnings(r):
    return [l for l in r.stderr.splitlines() if l.startswith("warning: ") or ": warning: " in l]


def test_a_configuration_in_error_keeps_every_warning_it_has_alone():
    """Each warning a configuration has alone (no dedupe, a max_json_bytes
    above Envoy's default buffer limit, a GitHub source held under 25 MB)
    is said when an error is beside it too, in another source or at the
    top; a source whose dedupe is in error is not said to have none."""
    gh = {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"value": "x"}]}}
    alone = {"max_json_bytes": 2 * 1048576, "max_held_bytes": 8 * 1048576,
             "sources": [{"id": "plain"}, gh]}
    r = run(["check", "-"], json.dumps(alone))
    want = warnings(r)
    assert r.returncode == 0 and len(want) == 5, r.stderr
    for needle in ("source 'plain' has no dedupe", "above Envoy's default per_connection_buffer_limit_bytes",
                   "source 'gh' is GitHub's and holds the body"):
        assert any(needle in w for w in want), (needle, want)
    broken = [dict(alone, sources=alone["sources"] + [{"id": "bad", "dedupe": "strpe"}]),
              dict(alone, bogus=1)]
    for cfg in broken:
        r = run(["check", "-"], json.dumps(cfg))
        assert r.returncode == 1 and warnings(r) == want, (cfg, r.stderr)
        assert "unknown preset" in r.stderr or 'unknown field "bogus"' in r.stderr
        assert "source 'bad' has no dedupe" not in r.stderr


def test_a_listener_that_holds_the_body_has_no_buffer_warning_beside_an_error_either(tmp_path):
    text = (ROOT / "envoy/examples/verified.yaml").read_text()
    assert text.count("dedupe: stripe") == 1
    for limit, warned in (("52494336", False), ("1048576", True)):
        f = tmp_path / f"bad-{limit}.yaml"
        f.write_text(text.replace("per_connection_buffer_limit_bytes: 52494336",
                                  f"per_connection_buffer_limit_bytes: {limit}")
                     .replace("dedupe: stripe", "dedupe: strpe"))
        r = run(["check", "--env", "names", str(f)])
        assert r.returncode == 1 and 'unknown preset "strpe"' in r.stderr, r.stderr
        assert ("above Envoy's default per_connection_buffer_limit_bytes" in r.stderr) == warned, r.stderr


def test_check_help_and_the_docs_name_every_option_of_check():
    """Each option of check's synopsis line (`hookstamp --help`), with its
    values, is in `hookstamp check --help` and in docs/cli.md's check
    section, each described on its own line."""
    synopsis = next(l for l in run(["--help"]).stdout.splitlines() if l.strip().startswith("hookstamp check "))
    options = re.findall(r"\[(--[a-z-]+(?: [a-z|]+)?)\]", synopsis)
    assert options == ["--deployment envoy|wasmplugin", "--env values|names", "--strict"], synopsis
    r = run(["check", "--help"])
    assert r.returncode == 0
    lines = [l.strip() for l in r.stdout.splitlines()]
    docs = (ROOT / "docs" / "cli.md").read_text().split("\n## check\n", 1)[1].split("\n## ", 1)[0]
    for o in options:
        assert any(l.startswith(o + " ") for l in lines), (o, r.stdout)
        assert f"- `{o}`: " in docs, o
