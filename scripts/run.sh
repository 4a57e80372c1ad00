#!/usr/bin/env bash
# Starts the demo upstream and Envoy with hookstamp until Ctrl-C (make run).
#
#   scripts/run.sh            generate the bootstrap, start the demo upstream
#                             (it answers with the x-hookstamp-* headers it
#                             received) and Envoy
#   scripts/run.sh --print    print the generated bootstrap and exit
#
# From the environment:
#   HOOKSTAMP_CONFIG=FILE      your configuration instead of the shipped one:
#                              a plugin configuration (JSON or YAML, as
#                              `hookstamp check` reads it), put into
#                              envoy/envoy.yaml in place of its own, or a whole
#                              Envoy bootstrap (envoy/examples/verified.yaml),
#                              used as it is but for the ports below. FILE is
#                              checked first with `hookstamp check` and
#                              refused with its errors.
#   secrets                    every variable a `verify` or `seal` names as
#                              {"env": NAME} (as `hookstamp vars` lists them)
#                              reaches the filter's VM through
#                              vm_config.environment_variables.host_env_keys:
#                              export it before make run. Envoy reads it from
#                              its own environment, so its value is never
#                              written in the bootstrap nor shown by
#                              /config_dump; a variable not set (or empty) is
#                              an error before anything starts, naming the
#                              variable and never showing a value.
#   HOOKSTAMP_ENV_KEYS=A,B     more variables for the VM's host_env_keys.
#   HOOKSTAMP_BIN=PATH         the native hookstamp that checks FILE and lists
#                              the variables (default: target/debug/hookstamp,
#                              built with cargo as needed).
#   HOOKSTAMP_BOOTSTRAP=PATH   where the generated bootstrap is written
#                              (default target/run/envoy.yaml); it is kept.
#   HOOKSTAMP_PORT (webhooks, default 10000), HOOKSTAMP_ADMIN_PORT (9901),
#   HOOKSTAMP_UPSTREAM_PORT (the demo upstream, 8080): the bootstrap's first
#                              listener, its admin and its first cluster's
#                              first endpoint are put on 127.0.0.1 at these
#                              ports. A port in use is an error before
#                              anything starts; this Envoy has a --base-id of
#                              its own, so it runs beside another Envoy.
set -euo pipefail
cd "$(dirname "$0")/.."
print=""
case "${1:-}" in
  "") ;;
  --print) print=1 ;;
  *) echo "usage: scripts/run.sh [--print]   (see the header of scripts/run.sh)" >&2; exit 2 ;;
esac
port=${HOOKSTAMP_PORT:-10000}
admin=${HOOKSTAMP_ADMIN_PORT:-9901}
up=${HOOKSTAMP_UPSTREAM_PORT:-8080}
config=${HOOKSTAMP_CONFIG:-}
boot=${HOOKSTAMP_BOOTSTRAP:-target/run/envoy.yaml}
for p in "$port" "$admin" "$up"; do
  case "$p" in '' | *[!0-9]*) echo "run: '$p' is not a port; set HOOKSTAMP_PORT, HOOKSTAMP_ADMIN_PORT or HOOKSTAMP_UPSTREAM_PORT" >&2; exit 1 ;; esac
done
if [ -z "$print" ]; then
  for p in "$port" "$admin" "$up"; do
    # SO_REUSEADDR as Envoy binds: a port a listener holds is in use, one
    # with closed connections in TIME_WAIT is not.
    if ! python3 -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()" "$p" 2>/dev/null; then
      echo "run: 127.0.0.1:$p is in use (or not a port); set HOOKSTAMP_PORT, HOOKSTAMP_ADMIN_PORT or HOOKSTAMP_UPSTREAM_PORT" >&2
      exit 1
    fi
  done
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The native hookstamp: it checks your configuration and names the
# variables each filter's VM reads.
bin=${HOOKSTAMP_BIN:-}
if [ -z "$bin" ]; then
  echo "run: building the native hookstamp (cargo build)" >&2
  cargo build -q --bin hookstamp
  bin=target/debug/hookstamp
fi

# 1. Your configuration, checked.
if [ -n "$config" ]; then
  [ -f "$config" ] || { echo "run: HOOKSTAMP_CONFIG=$config: no such file" >&2; exit 1; }
  if ! "$bin" check "$config" >"$work/check.out" 2>"$work/check.err"; then
    echo "run: $config is refused by hookstamp check; nothing was started:" >&2
    sed 's/^/  /' "$work/check.err" >&2
    if grep -q "is not set or is empty" "$work/check.err"; then
      echo "run: export each variable named above (the filter's VM reads it from Envoy's environment through host_env_keys)" >&2
    fi
    exit 1
  fi
  sed 's/^/run: hookstamp check: /' "$work/check.out" "$work/check.err" >&2
fi

# 2. The bootstrap: ports moved, the configuration put in, and in each
#    hookstamp filter's host_env_keys the variables `hookstamp vars` says
#    its VM reads (and HOOKSTAMP_ENV_KEYS).
python3 - "$config" "$port" "$admin" "$up" "$work/envoy.yaml" "$bin" <<'PY'
import json, os, subprocess, sys
import yaml

config, port, admin, up, out, hookstamp = sys.argv[1:]
STRUCT = "type.googleapis.com/google.protobuf.Struct"


def die(msg):
    print(f"run: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    text = open(path, encoding="utf-8").read()
    try:
        docs = [json.loads(text)]
    except ValueError:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        die(f"{path} must hold one plugin configuration or one Envoy bootstrap (make run does not take "
            "Kubernetes manifests; hookstamp check does)")
    return docs[0]


def wasm_filters(boot):
    """`hookstamp vars` of a bootstrap: each hookstamp Wasm filter's `config`
    (found by the JSON pointer it gives) and the host_env_keys its VM needs."""
    path = os.path.join(os.path.dirname(out), "vars.yaml")
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(boot, f, sort_keys=False)
    r = subprocess.run([hookstamp, "vars", path, "--add-from", "HOOKSTAMP_ENV_KEYS"], capture_output=True, text=True)
    if r.returncode != 0:
        msg = r.stderr.strip()
        die(msg[len("hookstamp: "):] if msg.startswith("hookstamp: ") else msg)
    found = []
    for v in map(json.loads, r.stdout.splitlines()):
        if v["wasm_config"] is not None:
            c = boot
            for step in v["wasm_config"].split("/")[1:]:
                step = step.replace("~1", "/").replace("~0", "~")
                c = c[int(step)] if isinstance(c, list) else c[step]
            found.append((c, v["host_env_keys"]))
    return found


if config:
    doc = load(config)
    if "static_resources" in doc:
        boot, origin = doc, config
    elif "sources" in doc:
        boot = yaml.safe_load(open("envoy/envoy.yaml", encoding="utf-8"))
        ((c, _),) = wasm_filters(boot)
        c["configuration"] = {"@type": STRUCT, "value": doc}
        origin = f"envoy/envoy.yaml with the plugin configuration of {config}"
        # The route to the queue under the configuration's prefix.
        prefix = doc.get("prefix", "/webhooks")
        if isinstance(prefix, str):
            hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
            for vh in hcm["route_config"]["virtual_hosts"]:
                for r in vh["routes"]:
                    if "path_separated_prefix" in r["match"]:
                        r["match"] = ({"prefix": "/"} if prefix.strip("/") == "" else
                                      {"path_separated_prefix": "/" + prefix.strip("/")})
    elif "kind" in doc:
        die(f"{config} is a Kubernetes manifest ({doc['kind']}): make run takes a plugin configuration or an "
            "Envoy bootstrap (hookstamp check reads manifests)")
    else:
        die(f"{config} is neither a plugin configuration (with sources) nor an Envoy bootstrap (with static_resources)")
else:
    boot, origin = yaml.safe_load(open("envoy/envoy.yaml", encoding="utf-8")), "envoy/envoy.yaml"

# The secrets: each filter's VM gets from Envoy's own environment the
# variables its configuration names (but those its key_values give) and
# HOOKSTAMP_ENV_KEYS.
found = wasm_filters(boot)
if not found:
    die(f"{origin} is an Envoy bootstrap with no hookstamp filter")
names = set()
for c, keys in found:
    env = c.setdefault("vm_config", {}).setdefault("environment_variables", {})
    env["host_env_keys"] = keys
    if not env["host_env_keys"]:
        del env["host_env_keys"]
    if not env:
        del c["vm_config"]["environment_variables"]
    names |= set(keys)
missing = sorted(n for n in names if not os.environ.get(n))
if missing:
    die("the filter reads " + ", ".join(missing) + " from Envoy's environment (host_env_keys), and "
        + ("it is" if len(missing) == 1 else "they are") + " not set or empty: export "
        + ("it" if len(missing) == 1 else "them") + " first")


# The ports, on 127.0.0.1.
def socket_at(what, *path):
    v = boot
    try:
        for p in path:
            v = v[p]
        sa = v["socket_address"]
    except (KeyError, IndexError, TypeError):
        die(f"{origin} has no {what} to put on 127.0.0.1 (make run needs an admin address, a listener and a "
            "cluster with an endpoint)")
    sa["address"] = "127.0.0.1"
    return sa


socket_at("admin address", "admin", "address")["port_value"] = int(admin)
socket_at("listener", "static_resources", "listeners", 0, "address")["port_value"] = int(port)
socket_at("cluster endpoint", "static_resources", "clusters", 0, "load_assignment", "endpoints", 0,
          "lb_endpoints", 0, "endpoint", "address")["port_value"] = int(up)

secrets = ("The filter's VM reads " + ", ".join(sorted(names)) + " from Envoy's own environment\n"
           "# (vm_config.environment_variables.host_env_keys): no value is written here.\n") if names else ""
header = (f"# Generated by scripts/run.sh (make run) from {origin}.\n"
          f"# On 127.0.0.1: webhooks :{port}, admin :{admin}, the demo upstream :{up}.\n"
          + (f"# {secrets}" if secrets else ""))
with open(out, "w", encoding="utf-8") as f:
    f.write(header)
    yaml.safe_dump(boot, f, sort_keys=False)
print(f"run: the bootstrap: {origin}" + (f"; secrets from Envoy's environment (host_env_keys): {', '.join(sorted(names))}"
                                          if names else ""), file=sys.stderr)
PY
if [ -n "$print" ]; then
  cat "$work/envoy.yaml"
  exit 0
fi
mkdir -p "$(dirname "$boot")"
cp "$work/envoy.yaml" "$boot"
echo "run: wrote $boot" >&2

python3 tests/e2e/upstream.py --port "$up" &
upstream=$!
trap 'kill $upstream 2>/dev/null || true; rm -rf "$work"' EXIT
if command -v func-e >/dev/null 2>&1; then
  runner=(func-e run)
else
  runner=(envoy)
fi
"${runner[@]}" -c "$boot" --concurrency 1 -l warning --base-id "$((RANDOM % 50000 + 10000))" &
envoy=$!
trap 'kill $upstream $envoy 2>/dev/null || true; rm -rf "$work"' EXIT
# The banner once Envoy answers.
for _ in $(seq 100); do
  if ! kill -0 "$envoy" 2>/dev/null; then
    echo "run: envoy exited; see its output above" >&2
    exit 1
  fi
  python3 -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:%s/ready' % sys.argv[1], timeout=1)" "$admin" 2>/dev/null && break
  sleep 0.2
done
if [ -n "$config" ]; then
  cat <<TXT

hookstamp is listening on 127.0.0.1:$port (admin 127.0.0.1:$admin, demo upstream 127.0.0.1:$up)
with the configuration of $config; the bootstrap is $boot.
The upstream answers with the x-hookstamp-* headers it received; a hook the
filter refuses gets the filter's own answer (401 invalid_signature, 404 unknown_source...).

  curl -s http://127.0.0.1:$admin/stats/prometheus | grep hookstamp_

Ctrl-C stops both.
TXT
else
  cat <<TXT

hookstamp is listening on 127.0.0.1:$port (admin 127.0.0.1:$admin, demo upstream 127.0.0.1:$up); the bootstrap is $boot. Try:

  curl -s http://127.0.0.1:$port/webhooks/stripe -H 'X-Entity-Id: ent_42' \\
    -d '{"id":"evt_1","type":"invoice.paid","data":{"object":{"customer":"cus_123"}}}'

  curl -s http://127.0.0.1:$port/webhooks/github -H 'X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958' \\
    -H 'X-GitHub-Hook-ID: 292430182' -H 'X-Hookstamp-Dedupe-Key: spoofed' -d '{"zen":"hi"}'

  curl -s http://127.0.0.1:$port/webhooks/paypal -d '{}'          # 404 unknown_source
  curl -s http://127.0.0.1:$admin/stats/prometheus | grep hookstamp_

The upstream answers with the x-hookstamp-* headers it received. Ctrl-C stops both.
TXT
fi
wait "$envoy"
