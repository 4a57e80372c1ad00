#!/usr/bin/env bash
# Starts the demo upstream and Envoy with envoy/envoy.yaml until Ctrl-C.
# Ports from the environment: HOOKSTAMP_PORT (webhooks, default 10000),
# HOOKSTAMP_ADMIN_PORT (9901), HOOKSTAMP_UPSTREAM_PORT (8080). A port in use
# is an error before anything starts; this Envoy has a --base-id of its own,
# so it runs beside another Envoy.
set -euo pipefail
cd "$(dirname "$0")/.."
port=${HOOKSTAMP_PORT:-10000}
admin=${HOOKSTAMP_ADMIN_PORT:-9901}
up=${HOOKSTAMP_UPSTREAM_PORT:-8080}
for p in "$port" "$admin" "$up"; do
  if ! python3 -c "import socket,sys; s=socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1])))" "$p" 2>/dev/null; then
    echo "run: 127.0.0.1:$p is in use (or not a port); set HOOKSTAMP_PORT, HOOKSTAMP_ADMIN_PORT or HOOKSTAMP_UPSTREAM_PORT" >&2
    exit 1
  fi
done
work=$(mktemp -d)
# envoy/envoy.yaml with the ports moved.
python3 - "$port" "$admin" "$up" "$work/envoy.yaml" <<'PY'
import sys, yaml
port, admin, up, out = sys.argv[1:]
boot = yaml.safe_load(open("envoy/envoy.yaml"))
boot["admin"]["address"]["socket_address"]["port_value"] = int(admin)
boot["static_resources"]["listeners"][0]["address"]["socket_address"]["port_value"] = int(port)
ep = boot["static_resources"]["clusters"][0]["load_assignment"]["endpoints"][0]["lb_endpoints"][0]
ep["endpoint"]["address"]["socket_address"]["port_value"] = int(up)
yaml.safe_dump(boot, open(out, "w"), sort_keys=False)
PY
python3 tests/e2e/upstream.py --port "$up" &
upstream=$!
trap 'kill $upstream 2>/dev/null || true; rm -rf "$work"' EXIT
if command -v func-e >/dev/null 2>&1; then
  runner=(func-e run)
else
  runner=(envoy)
fi
"${runner[@]}" -c "$work/envoy.yaml" --concurrency 1 -l warning --base-id "$((RANDOM % 50000 + 10000))" &
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
cat <<TXT

hookstamp is listening on 127.0.0.1:$port (admin 127.0.0.1:$admin, demo upstream 127.0.0.1:$up). Try:

  curl -s http://127.0.0.1:$port/webhooks/stripe -H 'X-Entity-Id: ent_42' \\
    -d '{"id":"evt_1","type":"invoice.paid","data":{"object":{"customer":"cus_123"}}}'

  curl -s http://127.0.0.1:$port/webhooks/github -H 'X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958' \\
    -H 'X-GitHub-Hook-ID: 292430182' -H 'X-Hookstamp-Dedupe-Key: spoofed' -d '{"zen":"hi"}'

  curl -s http://127.0.0.1:$port/webhooks/paypal -d '{}'          # 404 unknown_source
  curl -s http://127.0.0.1:$admin/stats/prometheus | grep hookstamp_

The upstream answers with the x-hookstamp-* headers it received. Ctrl-C stops both.
TXT
wait "$envoy"
