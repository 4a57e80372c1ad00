"""Slow streamed forgeries against real deliveries, through a real Envoy
with both builds. A stream-mode GitHub source and a header-keyed source
share one upstream cluster; an attacker keeps 100 HTTP/1 connections
open, each a forged `x-hub-signature-256` with `content-length: 100000`
and one byte every 2 s, and opens a new one whenever one is answered.
Envoy's circuit breaker on the cluster is scaled down to 48 requests (its
default is 1 024, for all workers): without a bound on streams the
forgeries fill it and every other request to the cluster fails. With
`max_streams` 16, the minimum rate and the trim near the bound, every
header-keyed delivery is stamped and answered 200 throughout, a streamed
delivery gets through as a provider retrying 503s does, and no forgery
completes at the upstream."""

import hashlib
import hmac
import socket
import time
import uuid

import attack
import proxy

SECRET = "flood-secret"
CONFIG = {"max_streams": 16, "sources": [
    {"id": "gh", "dedupe": "github",
     "verify": {"scheme": "github", "secrets": [{"value": SECRET}], "mode": "stream"}},
    {"id": "hdr", "dedupe": {"header": "x-id"}}]}
FORGERS = 100


def sign(body, secret=SECRET):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Forgers:
    """HTTP/1 connections, each one forged streamed request that trickles a
    byte every 2 s; an answered or closed one is replaced at once."""

    def __init__(self, port, n):
        self.port = port
        self.socks = [self.open() for _ in range(n)]
        self.answers = {}
        self.last = time.time()

    def open(self):
        s = socket.create_connection(("127.0.0.1", self.port))
        extra = [("x-github-delivery", uuid.uuid4().hex), ("x-hub-signature-256", sign(b"x", "forged"))]
        s.sendall(attack.head("/webhooks/gh", 100_000, extra=extra) + b"{")
        s.setblocking(False)
        return s

    def step(self):
        """Reads the answers that came (each replaced by a new forgery) and,
        every 2 s, sends each open one a byte."""
        trickle = time.time() - self.last >= 2
        for i, s in enumerate(self.socks):
            try:
                data = s.recv(4096)
            except BlockingIOError:
                data = None
            except OSError:
                data = b""
            if data is not None:
                status = data[9:12].decode() if data.startswith(b"HTTP/1.1 ") else "closed"
                self.answers[status] = self.answers.get(status, 0) + 1
                s.close()
                self.socks[i] = self.open()
            elif trickle:
                try:
                    s.send(b" ")
                except OSError:
                    pass
        if trickle:
            self.last = time.time()

    def close(self):
        for s in self.socks:
            s.close()


def test_slow_streamed_forgeries_leave_real_deliveries_their_room(build, up):
    attack.raise_fd_limit()
    port = proxy.free_port()
    boot = build.bootstrap({"edge": (port, CONFIG)}, up.server_address[1])
    boot["static_resources"]["clusters"][0]["circuit_breakers"] = {
        "thresholds": [{"max_requests": 48, "max_pending_requests": 48}]}
    e = build.envoy(boot)
    forgers = None
    try:
        assert e.proc.poll() is None, e.log_text()[-4000:]
        before = up.count
        forgers = Forgers(port, FORGERS)
        header_ok = streamed_ok = refused = 0
        t0 = time.time()
        while time.time() - t0 < 10:
            forgers.step()
            # A header-keyed delivery: stamped and 200, every time.
            tid = uuid.uuid4().hex
            status, _, reply = proxy.request(port, "POST", "/webhooks/hdr", [("x-id", tid)],
                                             body=b"{}", test_id=tid, timeout=10)
            assert status == 200, (status, reply, forgers.answers)
            assert dict(up.records[tid]["stamps"])["x-hookstamp-dedupe-key"] == tid
            header_ok += 1
            # A streamed delivery meanwhile: stamped and 200, or 503
            # streams_full while the forgeries hold every slot (a provider
            # retries it), never a stall or a 504.
            body = b'{"zen":"' + tid.encode() + b'"}'
            status, headers, reply = proxy.request(
                port, "POST", "/webhooks/gh",
                [("x-github-delivery", tid), ("x-hub-signature-256", sign(body))],
                body=body, test_id=tid, timeout=10)
            assert status in (200, 503), (status, reply, forgers.answers)
            if status == 200:
                assert dict(up.records[tid]["stamps"])["x-hookstamp-verified"] == "stream"
                streamed_ok += 1
            else:
                assert reply == b'{"error":"busy"}' and ("retry-after", "1") in headers, (headers, reply)
                refused += 1
            time.sleep(0.1)
        print(f"{header_ok} header-keyed deliveries stamped; streamed ones {streamed_ok} stamped, "
              f"{refused} answered 503; forgeries answered {forgers.answers}")
        forgers.close()
        forgers = None
        # Once the flood stops, a streamed delivery gets its slot at once.
        tid = uuid.uuid4().hex
        body = b'{"zen":"after"}'
        status, _, reply = proxy.request(port, "POST", "/webhooks/gh",
                                         [("x-github-delivery", tid), ("x-hub-signature-256", sign(body))],
                                         body=body, test_id=tid, timeout=10)
        assert status == 200, reply
        streamed_ok += 1
        # The forgeries were answered (408 too slow, 503 with no slot), none
        # of them completed upstream (only the deliveries' ids are there).
        stats = e.stats()
        assert 'hookstamp_body_too_slow_total{source="gh"}' in stats, stats[-2000:]
        assert not build.failures(e), build.failures(e)
        # Every request the upstream completed is a delivery's.
        assert up.count - before == header_ok + streamed_ok, (up.count - before, header_ok, streamed_ok)
    finally:
        if forgers:
            forgers.close()
        e.stop()
