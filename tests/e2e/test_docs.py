"""The docs are true: README.md and docs/*.md, checked against the code.

- Every ```console block is run. A line starting with `$ ` is a command (a
  line ending in `\\` continues it onto the next), run with bash from the
  repository's root: from a scratch directory holding a link to each of the
  root's entries, so that a file an example writes (`event.json`) lands in
  the scratch directory, never in the repository. The blocks of one page
  share their scratch directory, in order. The lines after a command, up to
  the next one, are its output (blank lines before the next command are
  spacing): its standard output must be exactly those lines; it must write
  nothing on standard error (a command that shows its errors redirects
  them, `2>&1`) and exit 0 (one that shows a failure ends in
  `; echo "exit $?"`). The only allowance for output that genuinely varies
  is a placeholder in an expected line, from PLACEHOLDERS and nothing else.
  A last line without its newline counts as a line.
- A block whose commands talk to the demo (127.0.0.1:10000, its admin
  127.0.0.1:9901) runs against a real `scripts/run.sh` started for its page
  alone, on free ports substituted for those two in every command.
- Every ```json block is a whole plugin configuration, which
  `target/debug/hookstamp check --strict` must accept (each variable it
  names given a stand-in secret); ```json partial marks a piece of one (it
  must parse, as a value or as an object's members), ```json invalid one
  that check must refuse. Any other word after json is an error.
- Every relative link names an existing file and, after `#`, one of its
  headings (as GitHub makes anchors); every docs page is linked from the
  README and from the index; the index's layout table names only paths
  that exist, none of src/ (ARCHITECTURE.md maps src/, and
  tests/architecture.rs checks that map).

Nothing is skipped: a missing binary, Envoy or tool fails the test.
"""

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

import proxy
from cases import ROOT

DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
INDEX = ROOT / "docs" / "README.md"

# Placeholders an expected output line may hold, and what each matches.
PLACEHOLDERS = {
    "{{unix-time}}": r"[0-9]{10}",
    "{{hex32}}": r"[0-9a-f]{32}",
    "{{base64-32}}": r"[A-Za-z0-9+/]{43}=",
}
PLACEHOLDER = re.compile(r"\{\{[^{}]*\}\}")

DEMO_PORT, DEMO_ADMIN = "127.0.0.1:10000", "127.0.0.1:9901"

# A stand-in for every secret a checked configuration names: a whsec_
# secret (base64 of "docs-check"), which every HMAC scheme takes; for a
# variable whose name ends as below, an Ed25519 public key in that form
# (RFC 8032's first test key): hex (Discord's), base64, whpk_.
STAND_IN_SECRET = "whsec_ZG9jcy1jaGVjaw=="
STAND_IN_PUBLIC_KEYS = {
    "_PUBLIC_KEY": "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
    "_PUBLIC_KEY_B64": "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
    "_WHPK": "whpk_11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=",
}


def stand_in(name):
    return next((v for k, v in STAND_IN_PUBLIC_KEYS.items() if name.endswith(k)), STAND_IN_SECRET)

# A fence: backticks, and an info string without any (CommonMark).
FENCE = re.compile(r"^( *)(`{3,})([^`]*)$")


def rel(path):
    return path.relative_to(ROOT)


def fences(path):
    """Every fenced block of a page: (info string, first line number,
    lines), each line without the fence's indentation."""
    lines = path.read_text().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, ticks, info = len(m.group(1)), m.group(2), m.group(3).strip()
        body, j = [], i + 1
        while j < len(lines) and not re.match(r"^ {0,%d}%s`*\s*$" % (indent + 3, ticks), lines[j]):
            line = lines[j]
            body.append(line[indent:] if line[:indent].strip() == "" else line)
            j += 1
        assert j < len(lines), f"{rel(path)}:{i + 1}: a fence that never closes"
        out.append((info, i + 2, body))
        i = j + 1
    return out


def prose(path):
    """A page's text outside its fenced blocks."""
    keep, inside = [], None
    for line in path.read_text().split("\n"):
        m = FENCE.match(line)
        if m and inside is None:
            inside = m.group(2)
        elif m and inside is not None and m.group(2).startswith(inside) and not m.group(3).strip():
            inside = None
        elif inside is None:
            keep.append(line)
    return "\n".join(keep)


# ---------------------------------------------------------------- console


def commands(path, first, lines):
    """A console block's commands: [(line number, command, expected lines)]."""
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            if not out:
                assert line.strip() == "", f"{rel(path)}:{first + i}: output before any `$ ` command: {line!r}"
                i += 1
                continue
            out[-1][2].append(line)
            i += 1
            continue
        start = first + i
        cmd = line[2:]
        while cmd.endswith("\\"):
            i += 1
            assert i < len(lines), f"{rel(path)}:{start}: a continued command at the end of its block"
            cmd += "\n" + lines[i]
        out.append((start, cmd, []))
        i += 1
    for _, _, expected in out:
        while expected and expected[-1].strip() == "":
            expected.pop()
    return out


def line_matches(want, got):
    """An expected line against an output line: exact, but for placeholders."""
    tokens = PLACEHOLDER.findall(want)
    if not tokens:
        return want == got
    pattern = "".join(re.escape(part) + (PLACEHOLDERS[tok] if tok else "")
                      for part, tok in zip(PLACEHOLDER.split(want), tokens + [""]))
    return re.fullmatch(pattern, got) is not None


def talks_to_demo(cmd):
    return DEMO_PORT in cmd or DEMO_ADMIN in cmd


class Demo:
    """`scripts/run.sh` as `make run` starts it, on free ports; its output
    in a file (a pipe nobody reads would stall Envoy's logging)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hookstamp-docs-demo-")
        self.port, self.admin, up = proxy.free_port(), proxy.free_port(), proxy.free_port()
        self.log = Path(self.dir) / "run.log"
        env = {**os.environ, "HOOKSTAMP_PORT": str(self.port), "HOOKSTAMP_ADMIN_PORT": str(self.admin),
               "HOOKSTAMP_UPSTREAM_PORT": str(up),
               "HOOKSTAMP_BOOTSTRAP": str(Path(self.dir) / "envoy.yaml")}
        env.pop("HOOKSTAMP_CONFIG", None)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([str(ROOT / "scripts" / "run.sh")], cwd=ROOT, env=env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.time() + 90
        while not self.ready(up):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                pytest.fail(f"scripts/run.sh did not start the demo:\n{self.text()[-4000:]}")
            time.sleep(0.2)

    def ready(self, up):
        """Envoy answers /ready and the demo upstream takes connections."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.admin}/ready", timeout=1) as r:
                if r.status != 200:
                    return False
            socket.create_connection(("127.0.0.1", up), timeout=1).close()
            return True
        except OSError:
            return False

    def text(self):
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def substitute(self, cmd):
        return cmd.replace(DEMO_PORT, f"127.0.0.1:{self.port}").replace(DEMO_ADMIN, f"127.0.0.1:{self.admin}")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def scratch_root():
    """A directory that reads as the repository's root (a link to each of
    its entries) but keeps what is written at its top level."""
    d = Path(tempfile.mkdtemp(prefix="hookstamp-docs-"))
    for entry in ROOT.iterdir():
        (d / entry.name).symlink_to(entry)
    return d


def run_command(cmd, cwd):
    # As a reader's shell runs it: not inside the make that runs the tests
    # (whose MAKELEVEL makes a nested make print the directories it enters).
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    p = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, timeout=120,
                       stdin=subprocess.DEVNULL, env=env)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def output_lines(text):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def mismatch(expected, got):
    """None when the output is what the doc shows, else a report."""
    if len(expected) == len(got) and all(line_matches(w, g) for w, g in zip(expected, got)):
        return None
    import difflib
    return "\n".join(difflib.unified_diff(expected, got, "the doc", "the output", lineterm="", n=2))


CONSOLE_PAGES = [p for p in DOCS if any(info == "console" for info, _, _ in fences(p))]


@pytest.mark.parametrize("page", CONSOLE_PAGES, ids=[str(rel(p)) for p in CONSOLE_PAGES])
def test_console_blocks_print_what_the_docs_show(page):
    for binary in ("target/release/hookstamp", "target/debug/hookstamp"):
        if binary in page.read_text():
            assert (ROOT / binary).exists(), f"{binary} is not built (make test-e2e builds it)"
    blocks = [(first, body) for info, first, body in fences(page) if info == "console"]
    demo = None
    cwd = scratch_root()
    failures = []
    try:
        for first, body in blocks:
            for line, cmd, expected in commands(page, first, body):
                for tok in PLACEHOLDER.findall("\n".join(expected)):
                    assert tok in PLACEHOLDERS, f"{rel(page)}:{line}: unknown placeholder {tok}"
                if talks_to_demo(cmd):
                    demo = demo or Demo()
                    cmd = demo.substitute(cmd)
                assert not re.search(r"(localhost|127\.0\.0\.1):(10000|9901|8080)\b", cmd), \
                    f"{rel(page)}:{line}: the demo is reached as {DEMO_PORT} or {DEMO_ADMIN} only"
                code, out, err = run_command(cmd, cwd)
                where = f"{rel(page)}:{line}: $ {cmd}"
                if code != 0:
                    failures.append(f"{where}\nexit {code} (a doc shows a failure with `; echo \"exit $?\"`)\n"
                                    f"stdout:\n{out}stderr:\n{err}")
                    continue
                if err:
                    failures.append(f"{where}\nwrote on stderr, which the doc does not show "
                                    f"(redirect with 2>&1 to show it):\n{err}")
                    continue
                diff = mismatch(expected, output_lines(out))
                if diff:
                    failures.append(f"{where}\n{diff}")
    finally:
        if demo:
            demo.stop()
        shutil.rmtree(cwd, ignore_errors=True)
    assert not failures, "\n\n".join(failures)


# ------------------------------------------------------------------- json


def env_names(v, out):
    if isinstance(v, dict):
        if len(v) == 1 and isinstance(v.get("env"), str):
            out.add(v["env"])
        for x in v.values():
            env_names(x, out)
    elif isinstance(v, list):
        for x in v:
            env_names(x, out)
    return out


JSON_BLOCKS = [(p, first, info, body) for p in DOCS for info, first, body in fences(p)
               if info.split()[:1] == ["json"]]


@pytest.mark.parametrize("page,first,info,body", JSON_BLOCKS,
                         ids=[f"{rel(p)}:{first}" for p, first, _, _ in JSON_BLOCKS])
def test_json_examples_are_what_they_say(page, first, info, body):
    text = "\n".join(body)
    kind = info.split()[1:]
    assert kind in ([], ["partial"], ["invalid"]), \
        f"{rel(page)}:{first}: ```{info}: only json, json partial or json invalid"
    if kind == ["partial"]:
        for candidate in (text, "{" + text + "}"):
            try:
                json.loads(candidate)
                return
            except ValueError:
                pass
        pytest.fail(f"{rel(page)}:{first}: a partial example that is not JSON, as a value or as members:\n{text}")
    value = json.loads(text)
    check = ROOT / "target" / "debug" / "hookstamp"
    assert check.exists(), "target/debug/hookstamp is not built (make test-e2e builds it)"
    env = {**os.environ, **{n: stand_in(n) for n in env_names(value, set())}}
    p = subprocess.run([str(check), "check", "-", "--strict"], input=text.encode(), capture_output=True,
                       env=env, timeout=60)
    if kind == ["invalid"]:
        assert p.returncode == 1 and p.stderr, f"{rel(page)}:{first}: check accepts an example marked invalid"
    else:
        assert p.returncode == 0 and not p.stderr, \
            f"{rel(page)}:{first}: check --strict refuses the example:\n{p.stderr.decode()}"


# ------------------------------------------------------------------ links


def slug(heading):
    """A heading's anchor, as GitHub makes it."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    text = text.lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    seen, out = {}, set()
    for line in prose(path).split("\n"):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        s = slug(m.group(1))
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


LINK = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)")


def links(path):
    text = re.sub(r"``[^`]*``|`[^`]*`", "", prose(path))
    return LINK.findall(text)


@pytest.mark.parametrize("page", DOCS, ids=[str(rel(p)) for p in DOCS])
def test_every_relative_link_resolves(page):
    bad = []
    for target in links(page):
        if re.match(r"^[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists() or ROOT.resolve() not in [dest, *dest.parents]:
            bad.append(f"{target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            bad.append(f"{target}: no heading #{anchor} in {dest.relative_to(ROOT.resolve())}")
    assert not bad, f"{rel(page)}:\n" + "\n".join(bad)


def test_every_docs_page_is_linked_from_the_readme_and_the_index():
    readme = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    index = {(INDEX.parent / t.partition("#")[0]).resolve() for t in links(INDEX)}
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert page.resolve() in readme, f"README.md does not link {rel(page)}"
        if page != INDEX:
            assert page.resolve() in index, f"docs/README.md does not link {rel(page)}"


def test_the_layout_table_names_only_what_exists_and_leaves_src_to_architecture_md():
    text = prose(INDEX)
    section = text.split("\n## Layout\n", 1)
    assert len(section) == 2, "docs/README.md has no ## Layout section"
    layout = section[1].split("\n## ")[0]
    assert "../ARCHITECTURE.md" in layout, "docs/README.md's layout does not link ARCHITECTURE.md"
    rows = [line for line in layout.split("\n") if line.startswith("| ")]
    for row in rows:
        first = row.split("|")[1]
        for path in re.findall(r"`([^`]+)`", first):
            assert glob.glob(str(ROOT / path.rstrip("/"))), f"the layout table names {path}, which does not exist"
            # One map of src/: ARCHITECTURE.md's, which tests/architecture.rs checks.
            assert not path.startswith("src/"), f"the layout table maps {path}: src/ is ARCHITECTURE.md's"