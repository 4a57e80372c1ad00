#!/usr/bin/env bash
# Starts the demo upstream (127.0.0.1:8080) and Envoy with envoy/envoy.yaml
# (webhooks on 127.0.0.1:10000, admin on 127.0.0.1:9901) until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 tests/e2e/upstream.py --port 8080 &
up=$!
trap 'kill $up 2>/dev/null || true' EXIT
if command -v func-e >/dev/null 2>&1; then
  runner=(func-e run)
else
  runner=(envoy)
fi
cat <<'TXT'

hookstamp is listening on 127.0.0.1:10000 (admin 127.0.0.1:9901). Try:

  curl -s http://127.0.0.1:10000/webhooks/stripe -H 'X-Entity-Id: ent_42' \
    -d '{"id":"evt_1","type":"invoice.paid","data":{"object":{"customer":"cus_123"}}}'

  curl -s http://127.0.0.1:10000/webhooks/github -H 'X-GitHub-Delivery: 72d3162e-cc78-11e3-81ab-4c9367dc0958' \
    -H 'X-GitHub-Hook-ID: 292430182' -H 'X-Hookstamp-Dedupe-Key: spoofed' -d '{"zen":"hi"}'

  curl -s http://127.0.0.1:10000/webhooks/paypal -d '{}'          # 404 unknown_source
  curl -s http://127.0.0.1:9901/stats/prometheus | grep hookstamp_

The upstream answers with the x-hookstamp-* headers it received.
TXT
"${runner[@]}" -c envoy/envoy.yaml --concurrency 1 -l warning
