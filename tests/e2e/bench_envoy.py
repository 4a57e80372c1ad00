"""What the filter costs in Envoy: throughput, latency and instructions.

One Envoy (one worker, --concurrency 1) per configuration, the route
answering with direct_response so no upstream is the bottleneck:
  (a) no wasm filter
  (h8) Envoy's own header_mutation filter adding (c)'s eight stamp headers
      with fixed values: the floor any filter pays for those headers (a
      route's request_headers_to_add is applied by the router as it
      forwards, which a direct_response route never does: it cannot be
      measured here)
  (n) an empty proxy-wasm filter on the same SDK (benches/noop-filter), with
      hookstamp's exports: the floor of any such filter, whatever it does
  (n8) the same filter adding 8 request headers (one host call each), as
      many as hookstamp stamps in (c) and (d)
  (b) hookstamp with no sources (every request still has its stamp headers
      stripped)
  (c) github preset + header lane
  (d) Stripe-like 1 KiB JSON (json dedupe + json lane)   (e) the same, 64 KiB
  (a1k), (a64k) Envoy of (a) with the bodies of (d) and (e): what Envoy
      itself spends on a body, which (d) and (e) are compared with
  (n.so), (n8.so) the empty filter as an Envoy dynamic module
      (target/libnoop.so, the same crate built natively), without and with
      the 8 header adds: the floor of any module
  (r), (r.so) the empty filter, .wasm and module, making (c)'s host calls
      (its header list read, its eight stamps added, two counters, the
      access log's reason; the .wasm's counters at a 50 ms tick, as
      hookstamp's .wasm counts): (c) − (r) is hookstamp's own work between them
  (hc), (hc.so) the empty filter making (c)'s stamps by hand (the same
      values, hookstamp's SHA-256) and its other calls: the floor of any
      filter stamping what (c) stamps; (c) − (hc) is what hookstamp's
      configuration, checks and generality cost above it
  (b.so) ... (v.so) the same as (b) ... (v) with the Envoy dynamic module
      (target/libhookstamp.so) in place of the .wasm
Three views, each of every configuration in one run:
  1. throughput: wrk -c16 in interleaved rounds (wrk and Envoy pinned to a
     core each); requests/s, Envoy's CPU time per request, ratios (the
     median of each round's);
  2. latency: wrk -c1 (one request at a time, so no queueing);
  3. instructions: Envoy under callgrind, instructions per request; these
     do not move with the machine's load, so they show small differences
     the timings cannot.
Then the .wasm and .so sizes, Envoy's resident memory, and the VM's memory over a
long run. `make bench` runs it; the flags set the effort.
"""

import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import proxy
from cases import ROOT

NOOP = ROOT / "target" / "noop.wasm"
# The same empty filter as a dynamic module (benches/noop-filter built
# natively), beside hookstamp's module in Envoy's search path.
NOOP_SO = proxy.SO.parent / "libnoop.so"
GITHUB = {"prefix": "/webhooks", "sources": [{"id": "github", "dedupe": "github", "sinks": [
    {"type": "kafka", "ordered": True, "ordering_key": {"header": "x-github-hook-id"}}]}]}
STRIPE = {"prefix": "/webhooks", "sources": [{"id": "stripe", "dedupe": "stripe", "sinks": [
    {"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]}]}
# (b) routes nothing: its prefix is elsewhere, so every request passes,
# stripped of stamp headers, which is the floor of any request.
# (v): (d) with its Stripe signature verified (a bench runs for minutes, so
# the tolerance is an hour).
STRIPE_SECRET = "whsec_bench_stripe_secret"
VERIFIED = {"prefix": "/webhooks", "sources": [{"id": "stripe", "dedupe": "stripe", "verify": {
    "scheme": "stripe", "secrets": [{"env": "STRIPE_WHSEC"}], "tolerance_s": 3600}, "sinks": [
    {"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]}]}
# (ved): (d)'s body from a Standard Webhooks sender with an Ed25519 key
# (v1a, whpk_); (vs): the same body, header keys, its HMAC signature checked
# as the body streams ("mode": "stream").
ED_SEED = b"hookstamp bench ed25519 key seed"
SW_SECRET = "whsec_YmVuY2ggc3RhbmRhcmQgd2ViaG9va3Mga2V5"


def ed_public_key():
    import base64
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    pub = Ed25519PrivateKey.from_private_bytes(ED_SEED).public_key()
    return "whpk_" + base64.b64encode(pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)).decode()


ED25519 = {"prefix": "/webhooks", "sources": [{"id": "sw", "dedupe": "standard_webhooks", "verify": {
    "scheme": "standard_webhooks", "secrets": [{"env": "SW_PUBLIC_KEY"}], "tolerance_s": 3600}, "sinks": [
    {"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]}]}
STREAMED = {"prefix": "/webhooks", "sources": [{"id": "sw", "dedupe": "standard_webhooks", "verify": {
    "scheme": "standard_webhooks", "secrets": [{"env": "SW_SECRET"}], "tolerance_s": 3600, "mode": "stream"}}]}
# The eight stamps of (c), with fixed values: what Envoy's own filter adds
# for the same headers, in (h8).
STAMPS8 = [("x-hookstamp-source", "github"), ("x-hookstamp-tenant", "default"),
           ("x-hookstamp-dedupe-key", "d-1"), ("x-hookstamp-dedupe-ttl-ms", "259200000"),
           ("x-hookstamp-idempotency-key", "default:github:d-1"),
           ("x-hookstamp-lane-0", "5e0b1b36b0e4c3c2c0a1e8f7d6c5b4a3"), ("x-hookstamp-lane-0-key", "h-1"),
           ("x-hookstamp-lane-0-group", "h-1")]
HEADER_MUTATION = "header_mutation"  # (h8): Envoy's header_mutation filter adds STAMPS8
# (r), (r.so): the empty filter making (c)'s host calls, one each as hookstamp
# makes them (benches/noop-filter: its configuration's lines): the request's
# header list read, the eight stamps added, (c)'s two counters (stamped, and
# its event type missing) incremented, the access log's reason set. What the
# calls alone cost, apart from hookstamp's own work between them.
TWIN = ([f"{k}: {v}" for k, v in STAMPS8]
        + ["read", "count stamped", "count event_type_missing", "why event-type=absent"])
# (hc), (hc.so): the empty filter making (c)'s eight stamps by hand
# (benches/noop-filter's `hand`: the two keys found in the header list,
# the idempotency key joined, the lane id hashed with hookstamp's SHA-256)
# and (c)'s other calls: (c)'s work with nothing of hookstamp's
# configuration, checks or generality, the floor under (c) of any filter.
HAND = ["hand"] + TWIN[len(STAMPS8) + 1:]
# The .wasm's twins count as hookstamp's .wasm does: each counter's
# increments handed to Envoy at a tick, not one call a request
# (src/filter/counts.rs).
AT_TICK = ["counts at tick"]
# (xed), (xed.so): the empty filter verifying one Ed25519 signature over as
# many bytes as (ved) signs (its id, timestamp and 1 KiB body), with
# hookstamp's crate and features: what the check alone costs, the floor
# under (ved) − (d).
ED_SIGNED = len(b"msg_bench_1.1700000000.") + 1024
CHECK = [f"ed25519 {ED_SIGNED}"]
ENVOYS = {  # name: (wasm, or proxy.SO for the dynamic module, or None for no filter; plugin config)
    "a": (None, None),
    "h8": (HEADER_MUTATION, None),
    "n": (NOOP, []),
    "n8": (NOOP, ["8"]),
    "r": (NOOP, TWIN + AT_TICK),
    "hc": (NOOP, HAND + AT_TICK),
    "xed": (NOOP, CHECK),
    "b": (proxy.WASM, {"prefix": "/elsewhere", "sources": []}),
    "c": (proxy.WASM, GITHUB),
    "c+": (proxy.WASM, dict(GITHUB, affinity=True)),
    "d": (proxy.WASM, STRIPE),
    "v": (proxy.WASM, VERIFIED),
    "ved": (proxy.WASM, ED25519),
    "vs": (proxy.WASM, STREAMED),
}
# The same configurations with the dynamic module.
ENVOYS.update({f"{n}.so": (proxy.SO, ENVOYS[n][1]) for n in ["b", "c", "c+", "d", "v", "ved", "vs"]})
ENVOYS.update({"n.so": (NOOP_SO, []), "n8.so": (NOOP_SO, [f"{k}: {v}" for k, v in STAMPS8]),
               "r.so": (NOOP_SO, TWIN), "hc.so": (NOOP_SO, HAND), "xed.so": (NOOP_SO, CHECK)})


BENCH_ENV = {"STRIPE_WHSEC": STRIPE_SECRET, "SW_SECRET": SW_SECRET, "SW_PUBLIC_KEY": ed_public_key()}


def event(size):
    """A Stripe-like event of `size` bytes, keys after the padding."""
    tail = ',"data":{"object":{"object":"invoice","customer":"cus_9s6XKzkNRiz8i3"}},"id":"evt_1OabcdEFGhijkLMN"}'
    head = '{"object":"event","type":"invoice.paid","pad":"'
    return (head + "x" * (size - len(head) - len(tail) - 1) + '"' + tail).encode()


def stripe_signature(body):
    import hashlib
    import hmac
    import time
    t = int(time.time())
    mac = hmac.new(STRIPE_SECRET.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return [("stripe-signature", f"t={t},v1={mac}")]


def sw_signature(body, ed25519):
    """Standard Webhooks headers: v1a (Ed25519) or v1 (HMAC-SHA256)."""
    import base64
    import hashlib
    import hmac
    import time
    t, mid = str(int(time.time())), "msg_bench_1"
    signed = f"{mid}.{t}.".encode() + body
    if ed25519:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        sig = "v1a," + base64.b64encode(Ed25519PrivateKey.from_private_bytes(ED_SEED).sign(signed)).decode()
    else:
        key = base64.b64decode(SW_SECRET.removeprefix("whsec_"))
        sig = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return [("webhook-id", mid), ("webhook-timestamp", t), ("webhook-signature", sig)]


GH = [("x-github-delivery", "d-1"), ("x-github-hook-id", "h-1")]
JSON = [("content-type", "application/json")]
CASES = [  # label, description, envoy, path, headers, body
    ("a", "no wasm filter", "a", "/webhooks/github", GH, b"{}"),
    ("a1k", "no filter, (d)'s body", "a", "/webhooks/stripe", JSON, event(1024)),
    ("a64k", "no filter, (e)'s body", "a", "/webhooks/stripe", JSON, event(65536)),
    ("h8", "Envoy's header_mutation: 8 adds", "h8", "/webhooks/github", GH, b"{}"),
    ("n", "empty wasm filter", "n", "/webhooks/github", GH, b"{}"),
    ("n8", "empty + 8 header adds", "n8", "/webhooks/github", GH, b"{}"),
    ("r", "empty + (c)'s host calls", "r", "/webhooks/github", GH, b"{}"),
    ("hc", "empty + (c)'s work by hand", "hc", "/webhooks/github", GH, b"{}"),
    ("xed", "empty + one Ed25519 check", "xed", "/webhooks/github", GH, b"{}"),
    ("b", "hookstamp, no sources", "b", "/webhooks/github", GH, b"{}"),
    ("c", "github header source", "c", "/webhooks/github", GH, b"{}"),
    ("c+", "(c) + affinity stamp", "c+", "/webhooks/github", GH, b"{}"),
    ("d", "stripe 1 KiB json", "d", "/webhooks/stripe", JSON, event(1024)),
    ("e", "stripe 64 KiB json", "d", "/webhooks/stripe", JSON, event(65536)),
    ("v", "(d), signature verified", "v", "/webhooks/stripe", JSON + stripe_signature(event(1024)), event(1024)),
    ("ved", "(d), Ed25519 verified (v1a)", "ved", "/webhooks/sw", JSON + sw_signature(event(1024), True), event(1024)),
    ("vs", "(d)'s body, signature streamed", "vs", "/webhooks/sw", JSON + sw_signature(event(1024), False),
     event(1024)),
]
CASES += [("n.so", "empty module", "n.so", "/webhooks/github", GH, b"{}"),
          ("n8.so", "empty module + 8 header adds", "n8.so", "/webhooks/github", GH, b"{}"),
          ("r.so", "empty module + (c)'s calls", "r.so", "/webhooks/github", GH, b"{}"),
          ("hc.so", "empty module + (c) by hand", "hc.so", "/webhooks/github", GH, b"{}"),
          ("xed.so", "empty module + one Ed25519 check", "xed.so", "/webhooks/github", GH, b"{}")]
CASES += [(c[0] + ".so", "module: " + c[1].replace("hookstamp, ", ""), c[2] + ".so", *c[3:])
          for c in CASES if c[0] in ("b", "c", "c+", "d", "e", "v", "ved", "vs")]
# What each case is compared with as "(a)": Envoy without a filter, given
# the same request; a 64 KiB body costs Envoy itself more than "{}" does.
BASE = {"d": "a1k", "e": "a64k", "v": "a1k", "ved": "a1k", "vs": "a1k",
        "d.so": "a1k", "e.so": "a64k", "v.so": "a1k", "ved.so": "a1k", "vs.so": "a1k"}


def base(label):
    return BASE.get(label, "a")


def floor(label):
    """The build's own floor, "(b)": hookstamp routing nothing, .wasm or .so."""
    return "b.so" if label.endswith(".so") else "b"


# wrk on one core, Envoy on the other, where there are two.
PIN = (os.cpu_count() or 1) >= 2 and shutil.which("taskset") is not None


def header_mutation(boot):
    """Envoy's own header_mutation filter before the router, adding STAMPS8."""
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    hcm["http_filters"].insert(0, {"name": "envoy.filters.http.header_mutation", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation",
        "mutations": {"request_mutations": [
            {"append": {"header": {"key": k, "value": v}, "append_action": "APPEND_IF_EXISTS_OR_ADD"}}
            for k, v in STAMPS8]}}})


def noop(boot, lines, module):
    """The empty filter, .wasm or module, in the filter's place, configured
    with what it does per request, a line each (`name: value` adds that
    header; benches/noop-filter has the rest)."""
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    typed = hcm["http_filters"][0]["typed_config"]
    text = "".join(f"{line}\n" for line in lines)
    if module:
        typed["dynamic_module_config"]["name"] = NOOP_SO.stem.removeprefix("lib")
        typed["filter_config"]["value"] = text
    else:
        typed["config"]["configuration"]["value"] = text


def start(name, prefix=(), timeout=30):
    wasm, cfg = ENVOYS[name]
    port = proxy.free_port()
    native = wasm in (proxy.SO, NOOP_SO)
    envoys_own = wasm == HEADER_MUTATION
    boot = proxy.bootstrap({"bench": (port, cfg)}, 1, proxy.free_port(), direct=True,
                           wasm=None if native or envoys_own else wasm, env=BENCH_ENV,
                           build="dynmod" if native else "wasm")
    if envoys_own:
        header_mutation(boot)
    if wasm in (NOOP, NOOP_SO):
        noop(boot, cfg, module=wasm == NOOP_SO)
    # The module's secret is Envoy's own environment.
    e = proxy.Envoy(boot, timeout=timeout, prefix=prefix, env=BENCH_ENV)
    if e.proc.poll() is not None:
        raise RuntimeError(f"envoy ({name}) exited:\n{e.log_text()[-3000:]}")
    if PIN and not prefix:
        subprocess.run(["taskset", "-a", "-cp", "1", str(e.proc.pid)], capture_output=True, check=True)
    return e, port


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


def cpu_seconds(pid):
    """User + system CPU time of a process, all threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(envoy, port, path, script, seconds, conns):
    """One wrk run: (req/s, p50 us, p99 us, requests, non-2xx, Envoy CPU us
    per request)."""
    pin = ["taskset", "-c", "0"] if PIN else []
    before = cpu_seconds(envoy.proc.pid)
    out = subprocess.run(
        [*pin, "wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--latency", "-s", str(script),
         f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(envoy.proc.pid) - before
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = to_us(re.search(r"\s50%\s+(\S+)", out).group(1))
    p99 = to_us(re.search(r"\s99%\s+(\S+)", out).group(1))
    total = int(re.search(r"(\d+) requests in", out).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return rps, p50, p99, total, int(non2xx.group(1)) if non2xx else 0, cpu / max(total, 1) * 1e6


def rounds(envoys, scripts, args, conns, seconds, n):
    """`n` interleaved rounds over every case: the median of each column,
    the non-2xx total, the best (lowest) p99 of any round, and the median
    over rounds of the requests/s relative to (a) and to (b) in the same
    round (measured seconds apart, so that slow spells of the machine
    cancel)."""
    runs = {c[0]: [] for c in CASES}
    for _ in range(n):
        for label, _, env, path, *_ in CASES:
            e, port = envoys[env]
            runs[label].append(wrk(e, port, path, scripts[label], seconds, conns))

    def ratio(label, other):
        return statistics.median(r[0] / o[0] for r, o in zip(runs[label], runs[other]))

    return {k: [statistics.median(r[i] for r in v) for i in range(6)]
            + [sum(r[4] for r in v), min(r[2] for r in v), ratio(k, base(k)), ratio(k, floor(k))]
            for k, v in runs.items()}


BASE_NOTE = "vs (a): against Envoy without a filter given the same request: (a1k) for (d), (a64k) for (e)."


def row_name(label, desc):
    return f"({label}) {desc}"


def throughput_table(med, args):
    print(f"\n1. Throughput: Envoy {proxy_version()} --concurrency 1, direct_response, wrk -t1 "
          f"-c{args.conns}{', pinned' if PIN else ''}, {args.rounds} interleaved rounds of "
          f"{args.seconds}s, medians (of each round's ratios, for vs)\n")
    print(f"{'config':<40} {'req/s':>8} {'vs (a)':>7} {'vs (b)':>7} {'CPU us/req':>11} "
          f"{'+us vs (a)':>11} {'p99 us':>8} {'non-2xx':>8}")
    for label, desc, *_ in CASES:
        rps, _, p99, _, _, cpu, bad, _, vs_a, vs_b = med[label]
        a = med[base(label)]
        print(f"{row_name(label, desc):<40} {rps:>8.0f} {vs_a:>6.0%} {vs_b:>6.0%} "
              f"{cpu:>11.1f} {cpu - a[5]:>11.1f} {p99:>8.0f} {bad:>8}")
    print(f"\n{BASE_NOTE}\nCPU us/req: Envoy's user + system CPU time over the requests served. p99 at this "
          "load is mostly\nqueueing behind the other connections; table 2 has the latency of a lone request.")


def latency_table(med, args):
    print(f"\n2. Latency: wrk -t1 -c1 (one request at a time), {args.latency_rounds} interleaved "
          f"rounds of {args.latency_seconds}s; medians, and the best round's p99\n")
    print(f"{'config':<40} {'p50 us':>7} {'p99 us':>7} {'best p99':>9} {'p50 +us':>8} "
          f"{'p99 +us':>8} {'best p99 +us':>13}")
    for label, desc, *_ in CASES:
        _, p50, p99, _, _, _, _, best, _, _ = med[label]
        a = med[base(label)]
        print(f"{row_name(label, desc):<40} {p50:>7.0f} {p99:>7.0f} {best:>9.0f} {p50 - a[1]:>8.0f} "
              f"{p99 - a[2]:>8.0f} {best - a[7]:>13.0f}")
    print("\n+us: over (a), as in table 1. The p99 of a lone request moves with the machine (every configuration "
          "alike, (a) and\nthe empty filter included); the best round is the least disturbed window.")


class Client:
    """Keep-alive HTTP/1.1 requests on one connection, one at a time."""

    def __init__(self, port, path, headers, body):
        hs = "".join(f"{k}: {v}\r\n" for k, v in headers)
        self.msg = (f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-length: {len(body)}\r\n{hs}\r\n"
                    ).encode() + body
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.buf = b""

    def post(self):
        self.sock.sendall(self.msg)
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 200 " not in head.split(b"\r\n")[0]:
            raise RuntimeError(f"not 200: {head[:200]!r}")
        length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1))
        while len(self.buf) < length:
            self.buf += self.recv()
        self.buf = self.buf[length:]

    def recv(self):
        data = self.sock.recv(65536)
        if not data:
            raise RuntimeError("connection closed")
        return data


def instructions(case, args, tmp):
    """Envoy's instructions per request under callgrind: counted only over
    `args.requests` requests, after as many to warm the VM's compiler up."""
    label, _, env, path, headers, body = case
    out = Path(tmp) / f"callgrind.{label}"
    vlog = Path(tmp) / f"valgrind.{label}.log"
    prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--smc-check=all-non-file",
              f"--callgrind-out-file={out}", f"--log-file={vlog}"]
    # An Envoy that exits as valgrind starts it is started once more, with
    # valgrind's own words on why printed (a count is made only of an Envoy
    # that serves; one that fails twice ends the run).
    try:
        e, port = start(env, timeout=600, prefix=prefix)
    except RuntimeError as err:
        why = vlog.read_text(errors="replace")[-2000:] if vlog.exists() else ""
        print(f"({label}) under callgrind: {err}\nvalgrind: {why}\nstarting it again", file=sys.stderr)
        e, port = start(env, timeout=600, prefix=prefix)
    try:
        client = Client(port, path, headers, body)
        for _ in range(args.requests):
            client.post()
        subprocess.run(["callgrind_control", "-i", "on", str(e.proc.pid)], capture_output=True, check=True)
        for _ in range(args.requests):
            client.post()
        subprocess.run(["callgrind_control", "-i", "off", str(e.proc.pid)], capture_output=True, check=True)
    finally:
        e.stop()
    totals = [int(m.group(1)) for m in re.finditer(r"^(?:summary|totals): (\d+)", out.read_text(), re.M)]
    if not totals:
        raise RuntimeError(f"callgrind wrote no totals for ({label})")
    return max(totals) / args.requests


def instructions_table(counts, args):
    print(f"\n3. Instructions: Envoy under callgrind, {args.requests} requests on one connection "
          f"after {args.requests} to warm up\n")
    h8 = counts.get("h8")
    print(f"{'config':<40} {'instr/req':>10} {'+ vs (a)':>9} {'+ vs (b)':>9} {'+ vs (h8)':>10} {'(a)/this':>9}")
    for label, desc, *_ in CASES:
        n, a, b = counts[label], counts[base(label)], counts[floor(label)]
        # Over Envoy's own filter adding the same eight headers: what
        # hookstamp costs beyond what Envoy charges anyone for them.
        over_h8 = f"{n - h8 - (a - counts['a']):>10.0f}" if h8 is not None else f"{'':>10}"
        print(f"{row_name(label, desc):<40} {n:>10.0f} {n - a:>9.0f} {n - b:>9.0f} {over_h8} {a / n:>8.0%}")
    print(f"\n{BASE_NOTE}\n(a)/this: the share of (a)'s request rate left if time followed instructions. "
          "vs (b): each build's own (b),\n(b.so) for the module's rows. vs (h8): beyond Envoy's own "
          "header_mutation filter adding the same eight\nheaders, each row over its own (a).")
    # (c) apart: the host calls it makes (the empty filter making them) and
    # hookstamp's own work between them, in each build.
    for c, r, n in [("c", "r", "n8"), ("c.so", "r.so", "n8.so")]:
        if {c, r, n} <= counts.keys():
            print(f"({c}): its host calls beyond the adds, ({r}) − ({n}), {counts[r] - counts[n]:.0f}; "
                  f"hookstamp's own work, ({c}) − ({r}), {counts[c] - counts[r]:.0f}")
    # (c) beside its work by hand: the floor of any filter stamping what
    # (c) stamps, and what hookstamp costs above it.
    for c, hc, over in [("c", "hc", "n8"), ("c.so", "hc.so", "h8")]:
        if {c, hc, over} <= counts.keys():
            print(f"({c}) by hand: ({hc}) − ({over}) {counts[hc] - counts[over]:.0f}, beside ({c}) − ({over}) "
                  f"{counts[c] - counts[over]:.0f}; hookstamp above the hand, ({c}) − ({hc}), "
                  f"{counts[c] - counts[hc]:.0f}")
    # (ved) apart: one Ed25519 check alone (the empty filter making it), and
    # the rest of (ved) over (d).
    for v, x, n, d in [("ved", "xed", "n", "d"), ("ved.so", "xed.so", "n.so", "d.so")]:
        if {v, x, n, d} <= counts.keys():
            print(f"({v}) − ({d}), {counts[v] - counts[d]:.0f}: the check alone, ({x}) − ({n}), "
                  f"{counts[x] - counts[n]:.0f}; the rest {counts[v] - counts[d] - counts[x] + counts[n]:.0f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seconds", type=int, default=2, help="per throughput run")
    ap.add_argument("--latency-rounds", type=int, default=5)
    ap.add_argument("--latency-seconds", type=int, default=3, help="per latency run")
    ap.add_argument("--conns", type=int, default=16)
    ap.add_argument("--requests", type=int, default=1000, help="counted under callgrind (0: skip)")
    ap.add_argument("--long", type=int, default=1_000_000, help="requests for the VM memory check (0: skip)")
    ap.add_argument("--only", help="these configurations (comma-separated labels), with (a) and (b)")
    args = ap.parse_args()
    if args.only:
        keep = set(args.only.split(",")) | {"a", "b", "h8"}
        keep |= {base(label) for label in keep} | {floor(label) for label in keep}
        CASES[:] = [c for c in CASES if c[0] in keep]
        for name in [n for n in ENVOYS if n not in {c[2] for c in CASES}]:
            del ENVOYS[name]
    for tool in ["wrk"] + (["valgrind", "callgrind_control"] if args.requests else []):
        if not shutil.which(tool):
            sys.exit(f"{tool} is not installed: run `make bench`, which installs it")
    for wasm in (proxy.WASM, NOOP, proxy.SO, NOOP_SO):
        if not wasm.exists():
            sys.exit(f"{wasm} is missing: run `make bench`, which builds it")
    envoys = {}
    try:
        for name in ENVOYS:
            envoys[name] = start(name)
        with tempfile.TemporaryDirectory() as tmp:
            scripts = {c[0]: lua(tmp, c[0], c[4], c[5]) for c in CASES}
            for label, _, env, path, *_ in CASES:  # warm up each (and check it answers 2xx)
                e, port = envoys[env]
                assert wrk(e, port, path, scripts[label], 1, args.conns)[4] == 0, label
            if args.rounds:
                throughput_table(rounds(envoys, scripts, args, args.conns, args.seconds, args.rounds), args)
            if args.latency_rounds:
                latency_table(rounds(envoys, scripts, args, 1, args.latency_seconds, args.latency_rounds), args)
            if args.requests:
                instructions_table({c[0]: instructions(c, args, tmp) for c in CASES}, args)
            footer(envoys)
            if args.long and "d" in envoys:
                long_run(envoys["d"], scripts["d"], args)
    finally:
        for e, _ in envoys.values():
            e.stop()


def footer(envoys):
    for label, path in [(".wasm, hookstamp", proxy.WASM), (".wasm, empty filter", NOOP),
                        (".so, hookstamp", proxy.SO)]:
        size = path.stat().st_size
        print(f"\n{label}: {size} bytes ({size / 1024:.0f} KiB)", end="")
    print()
    for name, desc in [("a", "no filter"), ("n", "empty wasm filter"), ("b", "hookstamp, no sources"),
                       ("c", "github"), ("d", "stripe json"), ("d.so", "module, stripe json")]:
        if name not in envoys:
            continue
        e, _ = envoys[name]
        print(f"Envoy RSS after the run, {desc}: {e.rss_kib() / 1024:.1f} MiB")


def long_run(envoy_port, script, args):
    e, port = envoy_port
    before = e.rss_kib()
    done, samples = 0, []
    while done < args.long:
        done += wrk(e, port, "/webhooks/stripe", script, 10, args.conns)[3]
        samples.append(e.rss_kib())
    print(f"\nVM memory, (d) over {done} more requests: RSS {before / 1024:.1f} MiB before, "
          f"{samples[0] / 1024:.1f} MiB after the first 10 s, {samples[-1] / 1024:.1f} MiB at the end")


def proxy_version():
    out = subprocess.run([proxy.envoy_bin(), "--version"], capture_output=True, text=True).stdout
    m = re.search(r"version: \S+?/(\d+\.\d+\.\d+)/", out)
    return m.group(1) if m else "?"


if __name__ == "__main__":
    main()
