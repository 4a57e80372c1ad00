#!/usr/bin/env python3
"""Lists or trims the exports of a .wasm module.

    wasm-exports.py list MODULE
    wasm-exports.py trim IN OUT
    wasm-exports.py trim-sdk IN OUT

The proxy-wasm SDK exports every callback of the ABI. Envoy calls each
exported callback on every request, and each call into the V8 VM costs
about a microsecond, even when the callback does nothing; a callback the
module does not export is skipped (the ABI makes every callback optional).
`trim` keeps only the exports hookstamp uses: the request side, the context
lifecycle and the allocator the host writes into; and it exports
hookstamp's own body callback (`hookstamp_on_request_body`, see
src/filter.rs) as proxy_on_request_body, in place of the SDK's.
`trim-sdk` keeps the SDK's callbacks (the benchmark's empty filter).
Nothing else changes.
"""

import sys

# What Envoy needs of hookstamp. proxy_on_delete stays: the SDK frees a
# request's context there. proxy_on_done, proxy_on_log and the response
# callbacks go: hookstamp never acts on them, and the SDK's defaults are
# what the host assumes when they are absent (done, continue).
KEEP = (
    "memory",
    "_initialize",
    "proxy_abi_version_0_2_1",
    "proxy_on_memory_allocate",
    "proxy_on_vm_start",
    "proxy_on_configure",
    "proxy_on_context_create",
    "proxy_on_request_headers",
    "proxy_on_request_body",
    "proxy_on_request_trailers",
    "proxy_on_delete",
)

# Own callbacks that replace the SDK's: {own export: ABI name}.
OWN = {"hookstamp_on_request_body": "proxy_on_request_body"}

EXPORT_SECTION = 7
MAGIC = b"\0asm\x01\0\0\0"


def leb(b, i):
    """Reads an unsigned LEB128 at i: (value, next index)."""
    value = shift = 0
    while True:
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def uleb(n):
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def sections(b):
    """(id, start, payload start, end) of every section."""
    if b[:8] != MAGIC:
        raise SystemExit("not a wasm module (version 1)")
    i = 8
    while i < len(b):
        size, j = leb(b, i + 1)
        yield b[i], i, j, j + size
        i = j + size


def entries(b, j):
    """(name, raw bytes) of each entry of the export section at payload j."""
    count, i = leb(b, j)
    for _ in range(count):
        start = i
        n, i = leb(b, i)
        name = b[i:i + n].decode()
        _, i = leb(b, i + n + 1)  # the kind byte, then the index
        yield name, b[start:i]


def exports(b):
    for sid, _, j, _ in sections(b):
        if sid == EXPORT_SECTION:
            return [name for name, _ in entries(b, j)]
    return []


def renamed(raw, name):
    """An export entry's raw bytes under another name."""
    n, i = leb(raw, 0)
    return uleb(len(name)) + name.encode() + raw[i + n:]


def trim(b, keep=KEEP, own=OWN):
    names = set(exports(b))
    missing = (set(keep) | set(own)) - names
    if missing:
        raise SystemExit(f"the module lacks exports it needs: {sorted(missing)}")
    replace = set(own.values())
    out = bytearray(b[:8])
    for sid, start, j, end in sections(b):
        if sid != EXPORT_SECTION:
            out += b[start:end]
            continue
        kept = []
        for name, raw in entries(b, j):
            if name in own:
                kept.append(renamed(raw, own[name]))
            elif name in keep and name not in replace:
                kept.append(raw)
        payload = uleb(len(kept)) + b"".join(kept)
        out += bytes([EXPORT_SECTION]) + uleb(len(payload)) + payload
    return bytes(out)


def main(argv):
    if len(argv) == 3 and argv[1] == "list":
        print("\n".join(exports(open(argv[2], "rb").read())))
    elif len(argv) == 4 and argv[1] in ("trim", "trim-sdk"):
        own = OWN if argv[1] == "trim" else {}
        data = trim(open(argv[2], "rb").read(), own=own)
        open(argv[3], "wb").write(data)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
