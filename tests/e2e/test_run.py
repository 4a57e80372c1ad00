"""`make run`'s script as a user runs it: ports from the environment, a
clear error for a port in use, the README's first curl answered."""

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

import proxy
from cases import ROOT


def run(env):
    return subprocess.Popen(["scripts/run.sh"], cwd=ROOT, env={**os.environ, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)


def test_run_on_ports_from_the_environment():
    ports = {k: str(proxy.free_port()) for k in
             ("HOOKSTAMP_PORT", "HOOKSTAMP_ADMIN_PORT", "HOOKSTAMP_UPSTREAM_PORT")}
    p = run(ports)
    try:
        out = ""
        deadline = time.time() + 60
        while "hookstamp is listening" not in out and time.time() < deadline:
            line = p.stdout.readline()
            assert line, out
            out += line
        req = urllib.request.Request(
            f"http://127.0.0.1:{ports['HOOKSTAMP_PORT']}/webhooks/stripe",
            data=b'{"id":"evt_1","type":"invoice.paid","data":{"object":{"customer":"cus_123"}}}',
            headers={"X-Entity-Id": "ent_42"})
        with urllib.request.urlopen(req, timeout=10) as r:
            stamps = dict(json.loads(r.read())["stamps"])
        assert stamps["x-hookstamp-dedupe-key"] == "evt_1"
        assert stamps["x-hookstamp-lane-0"] == "934b1a67e16c9f5bbe58f8aec60bcfd8"
        assert stamps["x-hookstamp-lane-1-key"] == "ent_42"
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(20)


def test_a_port_in_use_is_a_clear_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = str(s.getsockname()[1])
        p = run({"HOOKSTAMP_PORT": busy, "HOOKSTAMP_ADMIN_PORT": str(proxy.free_port()),
                 "HOOKSTAMP_UPSTREAM_PORT": str(proxy.free_port())})
        out, _ = p.communicate(timeout=30)
    assert p.returncode == 1
    assert f"run: 127.0.0.1:{busy} is in use" in out and "Traceback" not in out
