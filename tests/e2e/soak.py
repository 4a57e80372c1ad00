"""Load through the real filter, with nothing lost: N mixed requests (every
case kind of the tables, many sources, tenants and lanes, a third of them
with spoofed stamps) at C concurrent connections against Envoy and a
recording upstream. Checks: every request answered, none lost or duplicated
(count sent = count received), no 5xx, every recorded stamp equal to what
`hookstamp batch` computes for that request, Envoy's memory flat. A tenth
of the requests are signed ones (tests/e2e/signing.py, made now), half of
them forged: none of those reaches the upstream where the source rejects,
and none carries a dedupe key where it flags.
`make soak` (200 000 requests); make test runs a short form."""

import argparse
import http.client
import json
import random
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import proxy
import signing
import upstream
from cases import HARNESS, body_of, tables

SPOOF = [("x-hookstamp-lane-0", "forged"), ("X-Hookstamp-Dedupe-Key", "forged"),
         ("x_hookstamp_source", "forged")]


# Every table's secrets (a table may give its own), and the signers'.
SECRETS = {**{k: v for _, t in tables() for k, v in t.get("env", {}).items()}, **signing.SECRETS}


def templates():
    out = []
    for name, table in tables():
        if "now" in table:
            continue  # made at a fixed time: see signed()
        for case in table["cases"]:
            req = case["request"]
            body = body_of(req) or b""
            if len(body) <= 16384:
                out.append((name, req, body))
    return out


def variant(rng, tpl):
    """A request from a template with fresh ids, so lanes and keys vary."""
    table, req, body = tpl
    r = f"{rng.randrange(10**6):06d}"
    for k in (b"cus_123", b"evt_1", b"o-9", b"e-1", b"ent-1"):
        body = body.replace(k, k + r.encode())
    headers = [(k, v + r if v and k.lower() != "content-encoding" and len(v) < 200 else v)
               for k, v in req.get("headers", [])]
    if rng.random() < 0.33:
        headers += SPOOF
    return {"table": table, "method": req.get("method", "POST"), "path": req["path"],
            "headers": headers, "body": body, "id": uuid.uuid4().hex}


def signed(rng, n, now):
    """`n` signed requests (GitHub's aside: its signer is a node process a
    request), half of them forged, each with its own event."""
    # Made once, sent over minutes: a timestamp just inside or outside the
    # tolerance would cross it while the run goes on (those edges are the
    # case table's); an expired one stays expired.
    recipes = [r for r in signing.RECIPES if r[1] != "github" and r[2] not in ("future", "edge_past")]
    out = []
    for i in range(n):
        name, src, how = recipes[rng.randrange(len(recipes))]
        req, _ = signing.build(src, how, now, n=rng.randrange(10**9), margin=120)
        out.append({"table": "verify", "method": "POST", "path": req["path"], "headers": req["headers"],
                    "body": req["body"].encode(), "id": uuid.uuid4().hex,
                    "forged": how not in signing.ACCEPTED, "flag": src == "stripe_flag"})
    return out


def expected(configs, reqs, now):
    """`hookstamp batch` per table, in one process call each."""
    by_table = {}
    for i, r in enumerate(reqs):
        by_table.setdefault(r["table"], []).append(i)
    out = [None] * len(reqs)
    for table, idx in by_table.items():
        with tempfile.NamedTemporaryFile("w", suffix=".json") as cfg:
            cfg.write(json.dumps(configs[table][1]))
            cfg.flush()
            lines = "".join(json.dumps({"method": reqs[i]["method"], "path": reqs[i]["path"],
                                        "headers": reqs[i]["headers"],
                                        "body_hex": reqs[i]["body"].hex()}) + "\n" for i in idx)
            res = subprocess.run([str(HARNESS), "batch", cfg.name, "--now", str(now)], input=lines, text=True,
                                 capture_output=True, check=True,
                                 env={**__import__("os").environ, **SECRETS}).stdout.splitlines()
        for i, line in zip(idx, res):
            out[i] = json.loads(line)
    return out


def send_all(ports, reqs, conns, progress):
    results = [None] * len(reqs)
    lock = threading.Lock()
    cursor = [0]

    def worker():
        pool = {}
        while True:
            with lock:
                i = cursor[0]
                cursor[0] += 1
            if i >= len(reqs):
                break
            r = reqs[i]
            port = ports[r["table"]]
            for attempt in range(2):
                c = pool.get(port) or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                pool[port] = c
                try:
                    c.putrequest(r["method"], r["path"], skip_host=True, skip_accept_encoding=True)
                    c.putheader("host", "soak.test")
                    c.putheader("x-test-id", r["id"])
                    for k, v in r["headers"]:
                        c.putheader(k, v)
                    c.putheader("content-length", str(len(r["body"])))
                    c.endheaders(r["body"])
                    resp = c.getresponse()
                    results[i] = (resp.status, resp.read())
                    if resp.will_close:
                        c.close()
                        pool.pop(port, None)
                    break
                except (ConnectionError, http.client.HTTPException):
                    # A kept-alive connection closed by the server between
                    # requests: the request was never sent; send it again.
                    c.close()
                    pool.pop(port, None)
                    if attempt:
                        raise
            if i % 5000 == 0:
                progress(i)

    threads = [threading.Thread(target=worker) for _ in range(conns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=200_000)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    tpls = templates()
    up = upstream.start()
    configs = {name: (proxy.free_port(), t["config"]) for name, t in tables()}
    # The secrets: the .wasm's VMs get them from the bootstrap, the dynamic
    # module (HOOKSTAMP_BUILD=dynmod) from Envoy's own environment.
    envoy = proxy.Envoy(proxy.bootstrap(configs, up.server_address[1], proxy.free_port(), env=SECRETS),
                        env=SECRETS)
    try:
        now = int(time.time())
        n_signed = args.requests // 10
        reqs = [variant(rng, tpls[i % len(tpls)]) for i in range(args.requests - n_signed)]
        reqs += signed(rng, n_signed, now)
        rng.shuffle(reqs)
        want = expected(configs, reqs, now)
        ports = {n: p for n, (p, _) in configs.items()}
        rss = []
        started = time.time()

        def progress(i):
            if i >= args.requests // 10 and len(rss) < 1:
                rss.append(envoy.rss_kib())

        results = send_all(ports, reqs, args.conns, progress)
        took = time.time() - started
        rss.append(envoy.rss_kib())
        report(args, reqs, want, results, up, took, rss, envoy)
    finally:
        envoy.stop()


def report(args, reqs, want, results, up, took, rss, envoy):
    mismatches, five, rejects, unanswered = [], 0, 0, 0
    forged_through = forged_keyed = forged = 0
    for r, w, res in zip(reqs, want, results):
        rec = up.records.get(r["id"])
        if r.get("forged"):
            forged += 1
            if rec is not None and not r["flag"]:
                forged_through += 1
            if rec is not None and any(n == "x-hookstamp-dedupe-key" for n, _ in rec["stamps"]):
                forged_keyed += 1
        if res is None:
            unanswered += 1
            continue
        status, _ = res
        five += status >= 500
        rec = up.records.get(r["id"])
        if w["action"] == "reject":
            rejects += 1
            ok = status == w["status"] and rec is None
        elif w["action"] == "answer":
            # A handshake or a dropped event, answered by the filter.
            rejects += 1
            ok = status == w["status"] and rec is None and res[1] == w["body"].encode()
        elif w["action"] == "pass":
            ok = status == 200 and rec is not None and rec["stamps"] == []
        else:
            ok = status == 200 and rec is not None and rec["stamps"] == w["headers"] \
                and rec["body_bytes"] == len(r["body"])
        if not ok and len(mismatches) < 5:
            mismatches.append((r, w, res, rec))
        elif not ok:
            mismatches.append(None)
    forwarded = len(reqs) - rejects
    print(f"soak: {len(reqs)} requests, {args.conns} connections, {len(set(r['table'] for r in reqs))} "
          f"configurations, {took:.1f} s ({len(reqs) / took:.0f} req/s)")
    print(f"  sent to the upstream (stamped or passed): {forwarded}, received: {up.count}, "
          f"distinct: {len(up.records)}")
    print(f"  answered by the filter (401, 404, 405, 413; handshakes, drops): {rejects}; 5xx: {five}; "
          f"unanswered: {unanswered}")
    print(f"  stamps different from `hookstamp batch`: {len(mismatches)}")
    print(f"  forged signatures: {forged}; reached the upstream of a rejecting source: {forged_through}; "
          f"carried a dedupe key: {forged_keyed}")
    print(f"  Envoy RSS: {rss[0] / 1024:.1f} MiB after 10% of the run, {rss[-1] / 1024:.1f} MiB at the end")
    for m in mismatches[:5]:
        if m:
            print("  MISMATCH", json.dumps({"request": {**m[0], "body": m[0]["body"][:200].decode('latin-1')},
                                           "want": m[1], "status": m[2][0], "record": m[3]})[:2000])
    failed = (mismatches or five or unanswered or forged_through or forged_keyed or up.count != forwarded
              or len(up.records) != forwarded or rss[-1] > rss[0] * 1.10 + 4096)
    print("soak: FAILED" if failed else "soak: ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
