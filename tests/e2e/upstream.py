"""A small upstream that records what it received and answers with it.

The reply body is JSON: the x-hookstamp-* headers in arrival order, the body
length and its SHA-256 (and the stamp seal's fields, where there are any),
so a curl through Envoy shows the stamps. Run alone
(`python3 tests/e2e/upstream.py --port 8080`) it is the demo upstream of
`make run`; the Envoy tests start it in-process and read `records`.
"""

import argparse
import hashlib
import http.client
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# http.server parses headers with http.client, which refuses more than 100.
http.client._MAXHEADERS = 4096


class Recorder(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def __init__(self, addr):
        super().__init__(addr, Handler)
        self.lock = threading.Lock()
        self.records = {}  # x-test-id -> record
        self.count = 0
        # A queue node's health, as its /healthz answers it.
        self.healthy = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The reply's head and body are two writes: without TCP_NODELAY the
    # body waits for Envoy's delayed ACK of the head (about 40 ms a request).
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def read_body(self):
        """(body, trailer names): the body, chunked or not, and the names
        of the trailers that came after a chunked one."""
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    trailers = []
                    while (line := self.rfile.readline()) not in (b"\r\n", b"\n", b""):
                        trailers.append(line.split(b":")[0].decode("latin-1").lower())
                    return bytes(out), trailers
                out += self.rfile.read(size)
                self.rfile.readline()
        want = int(self.headers.get("content-length", 0) or 0)
        body = self.rfile.read(want)
        if len(body) < want:
            # The connection ended short: an incomplete request, which a
            # queue never commits (a streamed forgery's, reset).
            raise ConnectionError("request body ended short")
        return body, []

    def handle_any(self):
        if self.path == "/healthz":
            self.send_response(200 if self.server.healthy else 503)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        try:
            body, trailers = self.read_body()
        except (ConnectionError, ValueError):
            self.close_connection = True
            return
        delay = self.headers.get("x-test-delay-ms")
        if delay:
            time.sleep(int(delay) / 1000)
        # Any spelling an application server could read as a stamp.
        stamps = [[k.lower(), v] for k, v in self.headers.items() if is_stamp(k)]
        record = {
            "method": self.command,
            "path": self.path,
            "stamps": stamps,
            # The stamp seal's fields (RFC 9421, RFC 9530).
            "seal": [[k.lower(), v] for k, v in self.headers.items() if k.lower() in SEAL_FIELDS],
            "trailers": trailers,
            "body_bytes": len(body),
            "body_sha256": hashlib.sha256(body).hexdigest(),
        }
        if record["seal"]:
            # Every header as it came, for the queue's side of a sealed one.
            record["headers"] = [[k, v] for k, v in self.headers.items()]
        with self.server.lock:
            self.server.count += 1
            record["seq"] = self.server.count
            tid = self.headers.get("x-test-id")
            if tid:
                self.server.records[tid] = record
        reply = render(record).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)

    do_POST = do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = handle_any


SEAL_FIELDS = ("signature-input", "signature", "content-digest")


def is_stamp(name):
    """A stamp name as gunicorn and others read it: `_` as `-`, any case."""
    return name.lower().replace("_", "-").startswith("x-hookstamp-")


def render(record):
    """The record as JSON, one stamp a line, for people reading curl output;
    the seal's fields after them, where there are any."""
    head = {k: v for k, v in record.items() if k not in ("stamps", "trailers", "seq", "seal", "headers")}
    out = json.dumps(head)[:-1] + ',\n "stamps": [\n' + rows(record["stamps"]) + "\n ]"
    if record["seal"]:
        out += ',\n "seal": [\n' + rows(record["seal"]) + "\n ]"
    return out + "}\n"


def rows(pairs):
    return ",\n".join(f"  {json.dumps(p)}" for p in pairs)


def start(port=0):
    """Starts a recorder on 127.0.0.1 in a thread; returns it."""
    srv = Recorder(("127.0.0.1", port))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=8080)
    args = ap.parse_args()
    srv = Recorder(("127.0.0.1", args.port))
    print(f"upstream: listening on 127.0.0.1:{args.port}", flush=True)
    srv.serve_forever()
