"""Streamed verification (`"verify": {"mode": "stream"}`) through a real
Envoy whose filter cannot hold headers (no allow_on_headers_stop_iteration,
as under Istio's WasmPlugin or Envoy Gateway): the headers go upstream at
once, stamped `x-hookstamp-verified: stream`; a valid hook arrives complete;
a forged one is answered 401 by the filter and never completes at the
upstream. Each over an HTTP/1 and an HTTP/2 upstream that record what
arrives byte by byte (not a server that waits for whole requests), with a
body in one piece (a declared length) and in many (chunked, sent apart)."""

import hashlib
import hmac
import socket
import threading
import time
import uuid

import pytest

import proxy

SECRET = "stream-secret"
CONFIG = {"max_json_bytes": 1024, "sources": [
    {"id": "gh", "dedupe": "github",
     "verify": {"scheme": "github", "secrets": [{"value": SECRET}], "mode": "stream"}}]}


def sign(body, secret=SECRET):
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


class Records:
    """What an upstream saw of each request, by its x-test-id."""

    def __init__(self):
        self.lock = threading.Lock()
        self.by_id = {}

    def new(self, headers):
        rec = {"stamps": {k: v for k, v in headers.items() if k.startswith("x-hookstamp-")},
               "bytes": 0, "complete": False, "reset": False}
        with self.lock:
            self.by_id[headers.get("x-test-id", "")] = rec
        return rec


def listen(serve):
    """A socket on 127.0.0.1 whose connections `serve` takes, a thread each."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)

    def accept():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return srv


def h1_upstream(records):
    """An HTTP/1.1 upstream that counts body bytes as they come and marks a
    request complete only when its length (or its last chunk) is in."""
    def serve(conn):
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")[1:]
                headers = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines)}
                rec = records.new(headers)
                chunked = "chunked" in headers.get("transfer-encoding", "")
                need = int(headers.get("content-length", "0") or 0)
                while True:
                    if chunked:
                        # Consume whole chunks from buf.
                        done = False
                        while b"\r\n" in buf:
                            size_line, rest = buf.split(b"\r\n", 1)
                            size = int(size_line.split(b";")[0], 16)
                            if size == 0:
                                if rest.startswith(b"\r\n"):
                                    buf = rest[2:]
                                    done = True
                                break
                            if len(rest) < size + 2:
                                break
                            rec["bytes"] += size
                            buf = rest[size + 2:]
                        if done:
                            break
                    else:
                        take = min(need - rec["bytes"], len(buf))
                        rec["bytes"] += take
                        buf = buf[take:]
                        if rec["bytes"] >= need:
                            break
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                rec["complete"] = True
                conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")

    return listen(serve)


def h2_upstream(records):
    """An HTTP/2 upstream (h2's state machine) that records each stream's
    body bytes, its end and its reset."""
    import h2.config
    import h2.connection
    import h2.events
    def serve(sock):
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        conn.initiate_connection()
        sock.sendall(conn.data_to_send())
        streams = {}
        with sock:
            while True:
                try:
                    data = sock.recv(65536)
                except OSError:
                    return
                if not data:
                    for rec in streams.values():
                        rec["reset"] = rec["reset"] or not rec["complete"]
                    return
                for ev in conn.receive_data(data):
                    if isinstance(ev, h2.events.RequestReceived):
                        streams[ev.stream_id] = records.new(dict(ev.headers))
                    elif isinstance(ev, h2.events.DataReceived):
                        streams[ev.stream_id]["bytes"] += len(ev.data)
                        conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                    elif isinstance(ev, h2.events.StreamEnded):
                        streams[ev.stream_id]["complete"] = True
                        conn.send_headers(ev.stream_id, [(":status", "200"), ("content-length", "2")])
                        conn.send_data(ev.stream_id, b"ok", end_stream=True)
                    elif isinstance(ev, h2.events.StreamReset):
                        streams[ev.stream_id]["reset"] = True
                sock.sendall(conn.data_to_send())

    return listen(serve)


@pytest.fixture(scope="module")
def stream_env(build):
    """An Envoy with the .wasm (whose filter cannot hold headers) or the
    .so, each listener before one of the two upstreams."""
    records = Records()
    up1, up2 = h1_upstream(records), h2_upstream(records)
    ports = {"h1": proxy.free_port(), "h2": proxy.free_port()}
    boot = build.bootstrap({n: (p, CONFIG) for n, p in ports.items()}, up1.getsockname()[1])
    for lst in boot["static_resources"]["listeners"]:
        hcm = lst["filter_chains"][0]["filters"][0]["typed_config"]
        if build.name == "wasm":
            # The deployments that cannot hold headers for a body.
            hcm["http_filters"][0]["typed_config"]["config"]["allow_on_headers_stop_iteration"] = False
        if lst["name"] == "h2":
            hcm["route_config"]["virtual_hosts"][0]["routes"][0]["route"] = {"cluster": "upstream2", "timeout": "30s"}
    h2c = {"name": "upstream2", "type": "STATIC", "connect_timeout": "1s",
           "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
               "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
               "explicit_http_config": {"http2_protocol_options": {}}}},
           "load_assignment": {"cluster_name": "upstream2", "endpoints": [{"lb_endpoints": [{
               "endpoint": {"address": {"socket_address": {"address": "127.0.0.1",
                                                           "port_value": up2.getsockname()[1]}}}}]}]}}
    boot["static_resources"]["clusters"].append(h2c)
    e = build.envoy(boot)
    assert e.proc.poll() is None, e.log_text()[-4000:]
    try:
        yield {"ports": ports, "records": records, "envoy": e}
    finally:
        e.stop()
        up1.close()
        up2.close()


def settle(records, tid, timeout=5):
    """The upstream's record of a request once it has finished or gone."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        rec = records.by_id.get(tid)
        if rec and (rec["complete"] or rec["reset"]):
            return rec
        time.sleep(0.05)
    return records.by_id.get(tid)


BODY = b'{"action":"opened","pad":"' + b"x" * 200_000 + b'"}'


@pytest.mark.parametrize("upstream", ["h1", "h2"])
@pytest.mark.parametrize("pieces", ["one", "many"])
def test_a_valid_hook_arrives_complete_and_stamped(stream_env, upstream, pieces):
    tid = uuid.uuid4().hex
    headers = [("x-github-delivery", tid), ("x-hub-signature-256", sign(BODY))]
    kw = {"body": BODY} if pieces == "one" else {
        "chunks": [BODY[i:i + 7000] for i in range(0, len(BODY), 7000)], "between": lambda: time.sleep(0.2)}
    status, _, reply = proxy.request(stream_env["ports"][upstream], "POST", "/webhooks/gh", headers,
                                     test_id=tid, **kw)
    assert status == 200, reply
    rec = settle(stream_env["records"], tid)
    assert rec["complete"] and rec["bytes"] == len(BODY), rec
    assert rec["stamps"]["x-hookstamp-verified"] == "stream"
    assert rec["stamps"]["x-hookstamp-dedupe-key"] == tid


@pytest.mark.parametrize("upstream", ["h1", "h2"])
@pytest.mark.parametrize("pieces", ["one", "many"])
def test_a_forged_hook_never_completes_at_the_upstream(stream_env, upstream, pieces):
    tid = uuid.uuid4().hex
    headers = [("x-github-delivery", tid), ("x-hub-signature-256", sign(BODY, "not-the-secret"))]
    kw = {"body": BODY} if pieces == "one" else {
        "chunks": [BODY[i:i + 7000] for i in range(0, len(BODY), 7000)], "between": lambda: time.sleep(0.2)}
    status, _, reply = proxy.request(stream_env["ports"][upstream], "POST", "/webhooks/gh", headers,
                                     test_id=tid, **kw)
    assert status == 401, reply
    time.sleep(0.5)
    rec = stream_env["records"].by_id.get(tid)
    # Its headers went upstream (that is the point of streaming); its body
    # never completed there: with a declared length its last byte never
    # came, without one its end (the last chunk, END_STREAM) never did.
    assert rec is not None and not rec["complete"], rec
    if pieces == "one":
        assert rec["bytes"] < len(BODY), rec


def test_a_small_body_in_one_callback_and_a_missing_signature(stream_env):
    small = b'{"zen":"hi"}'
    tid = uuid.uuid4().hex
    status, _, _ = proxy.request(stream_env["ports"]["h1"], "POST", "/webhooks/gh",
                                 [("x-github-delivery", tid), ("x-hub-signature-256", sign(small))],
                                 body=small, test_id=tid)
    assert status == 200
    rec = settle(stream_env["records"], tid)
    assert rec["complete"] and rec["bytes"] == len(small)
    # No signature header: refused at the headers, nothing upstream at all.
    tid = uuid.uuid4().hex
    status, _, _ = proxy.request(stream_env["ports"]["h1"], "POST", "/webhooks/gh",
                                 [("x-github-delivery", tid)], body=small, test_id=tid)
    assert status == 401
    assert tid not in stream_env["records"].by_id
    stats = stream_env["envoy"].stats()
    assert 'hookstamp_signatures_verified_total{source="gh"}' in stats
