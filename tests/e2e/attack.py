"""An attacker's tools against the edge, on 127.0.0.1 only: stalled and
trickling HTTP/1 uploads, HTTP/2 header floods and resets. Shared by
test_attack.py and soak_attack.py."""

import resource
import selectors
import socket
import time

import h2.config
import h2.connection
import h2.events


def raise_fd_limit():
    """As many descriptors as this process may have: thousands of sockets."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


def head(path, declared=None, chunked=False, extra=()):
    lines = [f"POST {path} HTTP/1.1", "host: hookstamp.test", "content-type: application/json"]
    if declared is not None:
        lines.append(f"content-length: {declared}")
    if chunked:
        lines.append("transfer-encoding: chunked")
    lines += [f"{k}: {v}" for k, v in extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


class Http1:
    """Many HTTP/1.1 connections, each one request that sends its headers
    (and `sent` bytes of its body) and then stalls or trickles."""

    def __init__(self, port, n, path, declared=1000, sent=0, extra=()):
        self.socks = []
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(head(path, declared, extra=extra) + b" " * sent)
            s.setblocking(False)
            self.socks.append(s)
        self.replies = {}

    def trickle(self, nbytes=1):
        """One more byte (or a few) on every connection still open."""
        for s in self.socks:
            if s.fileno() >= 0 and s not in self.replies:
                try:
                    s.send(b" " * nbytes)
                except OSError:
                    pass

    def poll(self):
        """Reads what has arrived; returns {status: count} of the replies."""
        for s in self.socks:
            if s in self.replies or s.fileno() < 0:
                continue
            try:
                data = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            self.replies[s] = data[9:12].decode() if data.startswith(b"HTTP/1.1 ") else "closed"
        return self.count()

    def count(self):
        return tally(self.replies.values())

    def close(self):
        for s in self.socks:
            s.close()


class Http2:
    """HTTP/2 connections, each with many streams that send their headers
    (a content-length and no END_STREAM) and then stall, or are reset."""

    def __init__(self, port, conns, streams, path, declared=1000):
        self.conns = []
        self.status = {}
        for _ in range(conns):
            s = socket.create_connection(("127.0.0.1", port))
            c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
            c.initiate_connection()
            # Room for many streams' replies without window updates.
            c.increment_flow_control_window(1 << 30)
            s.sendall(c.data_to_send())
            self.conns.append((s, c))
        self.open_streams(streams, path, declared)

    def open_streams(self, streams, path, declared):
        for s, c in self.conns:
            self._read(s, c, block=True)
            for _ in range(streams):
                sid = c.get_next_available_stream_id()
                c.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "http"),
                                     (":authority", "hookstamp.test"), ("content-type", "application/json"),
                                     ("content-length", str(declared))])
                self.status[(id(c), sid)] = None
            s.sendall(c.data_to_send())
            s.setblocking(False)

    def reset_half(self):
        """Resets every other open stream (a client's RST_STREAM flood)."""
        n = 0
        for s, c in self.conns:
            for (cid, sid), st in list(self.status.items()):
                if cid == id(c) and st is None and sid % 4 == 1:
                    c.reset_stream(sid)
                    self.status[(cid, sid)] = "reset"
                    n += 1
            try:
                s.sendall(c.data_to_send())
            except OSError:
                pass
        return n

    def _read(self, s, c, block=False):
        if block:
            s.settimeout(5)
        try:
            data = s.recv(1 << 20)
        except (BlockingIOError, socket.timeout):
            return
        except OSError:
            data = b""
        finally:
            if block:
                s.settimeout(None)
        if not data:
            for key, st in self.status.items():
                if key[0] == id(c) and st is None:
                    self.status[key] = "closed"
            return
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived):
                self.status[(id(c), ev.stream_id)] = dict(ev.headers).get(":status")
            elif isinstance(ev, h2.events.StreamReset) and self.status.get((id(c), ev.stream_id)) is None:
                self.status[(id(c), ev.stream_id)] = "reset"
        try:
            s.sendall(c.data_to_send())
        except OSError:
            pass

    def poll(self):
        for s, c in self.conns:
            for _ in range(50):
                before = sum(1 for v in self.status.values() if v is not None)
                self._read(s, c)
                if sum(1 for v in self.status.values() if v is not None) == before:
                    break
        return self.count()

    def count(self):
        return tally(self.status.values())

    def close(self):
        for s, _ in self.conns:
            s.close()


def tally(values):
    """{value: how many times it occurs}."""
    out = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def wait_for(cond, timeout, step=0.2):
    """Polls `cond()` until it is true or `timeout` seconds pass; its last value."""
    end = time.time() + timeout
    while True:
        v = cond()
        if v or time.time() > end:
            return v
        time.sleep(step)
