"""What the filter costs in Envoy: throughput and latency side by side.

One Envoy (one worker, --concurrency 1) per configuration, the route
answering with direct_response so no upstream is the bottleneck, driven by
wrk on 127.0.0.1 in interleaved rounds:
  (a) no wasm filter            (b) hookstamp with no sources (strip only)
  (c) github preset + header lane
  (d) Stripe-like 1 KiB JSON (json dedupe + json lane)   (e) the same, 64 KiB
Prints a table with the ratios to (a) and (b), the .wasm size, Envoy's
resident memory after the run, and the VM's memory over a long run.
`make bench` runs it; --rounds/--seconds/--long set the effort.
"""

import argparse
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import proxy

GITHUB = {"prefix": "/webhooks", "sources": [{"id": "github", "dedupe": "github", "sinks": [
    {"type": "kafka", "ordered": True, "ordering_key": {"header": "x-github-hook-id"}}]}]}
STRIPE = {"prefix": "/webhooks", "sources": [{"id": "stripe", "dedupe": "stripe", "sinks": [
    {"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]}]}


def event(size):
    """A Stripe-like event of `size` bytes, keys after the padding."""
    tail = ',"data":{"object":{"object":"invoice","customer":"cus_9s6XKzkNRiz8i3"}},"id":"evt_1OabcdEFGhijkLMN"}'
    head = '{"object":"event","type":"invoice.paid","pad":"'
    return (head + "x" * (size - len(head) - len(tail) - 1) + '"' + tail).encode()


CASES = [  # label, envoy, path, headers, body
    ("a", "no wasm filter", "a", "/webhooks/github", [("x-github-delivery", "d-1"), ("x-github-hook-id", "h-1")], b"{}"),
    ("b", "wasm, no sources", "b", "/webhooks/github", [("x-github-delivery", "d-1"), ("x-github-hook-id", "h-1")], b"{}"),
    ("c", "github header source", "c", "/webhooks/github", [("x-github-delivery", "d-1"), ("x-github-hook-id", "h-1")], b"{}"),
    ("d", "stripe 1 KiB json", "d", "/webhooks/stripe", [("content-type", "application/json")], event(1024)),
    ("e", "stripe 64 KiB json", "d", "/webhooks/stripe", [("content-type", "application/json")], event(65536)),
]


def lua(tmp, label, headers, body):
    bodyf = Path(tmp) / f"{label}.body"
    bodyf.write_bytes(body)
    hs = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers)
    script = Path(tmp) / f"{label}.lua"
    script.write_text(f'''wrk.method = "POST"
local f = io.open("{bodyf}", "rb"); wrk.body = f:read("*a"); f:close()
{hs}
''')
    return script


def to_us(text):
    n, unit = re.match(r"([\d.]+)(us|ms|s)", text).groups()
    return float(n) * {"us": 1, "ms": 1000, "s": 1e6}[unit]


def wrk(port, path, script, seconds, conns):
    out = subprocess.run(
        ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", str(script),
         f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, check=True).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = to_us(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = to_us(re.search(r"\s99%\s+(\S+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p50, p99, total, int(non2xx.group(1)) if non2xx else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--long", type=int, default=1_000_000, help="requests for the VM memory check (0: skip)")
    args = ap.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: run `make bench` (apt-get install wrk)")
    # (b) routes nothing: its prefix is elsewhere, so every request passes,
    # stripped of stamp headers, which is the floor of any request.
    configs = {"a": None, "b": {"prefix": "/elsewhere", "sources": []}, "c": GITHUB, "d": STRIPE}
    envoys = {}
    try:
        for name, cfg in configs.items():
            port = proxy.free_port()
            boot = proxy.bootstrap({"bench": (port, cfg)}, 1, proxy.free_port(), direct=True)
            envoys[name] = (proxy.Envoy(boot), port)
        with tempfile.TemporaryDirectory() as tmp:
            scripts = {c[0]: lua(tmp, c[0], c[4], c[5]) for c in CASES}
            for c in CASES:  # warm up each (and check it answers 2xx)
                e, port = envoys[c[2]]
                assert wrk(port, c[3], scripts[c[0]], 1, args.conns)[4] == 0, c
            runs = {c[0]: [] for c in CASES}
            for _ in range(args.rounds):
                for c in CASES:
                    e, port = envoys[c[2]]
                    runs[c[0]].append(wrk(port, c[3], scripts[c[0]], args.seconds, args.conns))
            report(runs, envoys, args)
            if args.long:
                long_run(envoys["d"], scripts["d"], args)
    finally:
        for e, _ in envoys.values():
            e.stop()


def report(runs, envoys, args):
    med = {k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v),
               statistics.median(r[2] for r in v), sum(r[4] for r in v)) for k, v in runs.items()}
    a, b = med["a"], med["b"]
    print(f"\nEnvoy {proxy_version()} --concurrency 1, direct_response, wrk -t1 -c{args.conns}, "
          f"{args.rounds} interleaved rounds of {args.seconds}s, medians\n")
    print(f"{'config':<26} {'req/s':>9} {'p50 us':>8} {'p99 us':>8} {'vs (a)':>7} {'vs (b)':>7} "
          f"{'p99 +us vs (a)':>15} {'non-2xx':>8}")
    for label, desc, *_ in CASES:
        rps, p50, p99, bad = med[label]
        print(f"({label}) {desc:<22} {rps:>9.0f} {p50:>8.0f} {p99:>8.0f} {rps / a[0]:>6.0%} "
              f"{rps / b[0]:>6.0%} {p99 - a[2]:>15.0f} {bad:>8}")
    wasm = proxy.WASM.stat().st_size
    print(f"\n.wasm: {wasm} bytes ({wasm / 1024:.0f} KiB)")
    for name, desc in [("a", "no filter"), ("b", "wasm, no sources"), ("c", "github"), ("d", "stripe json")]:
        e, _ = envoys[name]
        print(f"Envoy RSS after the run, {desc}: {e.rss_kib() / 1024:.1f} MiB")


def long_run(envoy_port, script, args):
    e, port = envoy_port
    before = e.rss_kib()
    done, samples = 0, []
    while done < args.long:
        done += wrk(port, "/webhooks/stripe", script, 10, args.conns)[3]
        samples.append(e.rss_kib())
    print(f"\nVM memory, (d) over {done} more requests: RSS {before / 1024:.1f} MiB before, "
          f"{samples[0] / 1024:.1f} MiB after the first 10 s, {samples[-1] / 1024:.1f} MiB at the end")


def proxy_version():
    out = subprocess.run([proxy.envoy_bin(), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version: \S+?/(\d+\.\d+\.\d+)/", out)
    return m.group(1) if m else "?"


if __name__ == "__main__":
    main()
