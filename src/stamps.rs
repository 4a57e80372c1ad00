//! The stamp headers: the contract with the upstream queue.

use std::borrow::Cow;

/// Every request header with this prefix is removed before anything else.
pub const PREFIX: &str = "x-hookstamp-";

pub const SOURCE: &str = "x-hookstamp-source";
pub const TENANT: &str = "x-hookstamp-tenant";
/// On sources with `verify` only: `true`, or `false` (flag mode).
pub const VERIFIED: &str = "x-hookstamp-verified";
/// Sources with an event type (their own, or their preset's): what the
/// event is, after the tenant and verified stamps.
pub const EVENT_TYPE: &str = "x-hookstamp-event-type";
pub const DEDUPE_KEY: &str = "x-hookstamp-dedupe-key";
pub const DEDUPE_TTL_MS: &str = "x-hookstamp-dedupe-ttl-ms";
pub const IDEMPOTENCY_KEY: &str = "x-hookstamp-idempotency-key";
/// With `"affinity": true`: the key a consistent-hash load balancer maps
/// to one queue node (see `affinity`).
pub const AFFINITY: &str = "x-hookstamp-affinity";

/// Whether a header name is in the stamp namespace: any casing, and `_`
/// read as `-` (gunicorn and others fold `x_hookstamp_dedupe_key` into
/// `X-Hookstamp-Dedupe-Key` for the application).
#[inline(always)]
pub fn is_stamp_header(name: &str) -> bool {
    let n = name.as_bytes();
    // Nearly every name fails at its length or its first three bytes
    // (`x-h`), here, in the caller's loop.
    n.len() >= PREFIX.len() && n[0] | 0x20 == b'x' && n[2] | 0x20 == b'h' && in_namespace(n)
}

fn in_namespace(n: &[u8]) -> bool {
    n.iter().zip(PREFIX.as_bytes()).all(|(&a, &b)| {
        let a = if a == b'_' { b'-' } else { a };
        a.eq_ignore_ascii_case(&b)
    })
}

/// The three header names of ordered sink `i`: id, key, group.
pub fn lane_names(i: u16) -> [String; 3] {
    [
        format!("x-hookstamp-lane-{i}"),
        format!("x-hookstamp-lane-{i}-key"),
        format!("x-hookstamp-lane-{i}-group"),
    ]
}

fn safe(b: u8) -> bool {
    (0x21..=0x7E).contains(&b) && b != b'%'
}

/// Percent-encodes a value so any key bytes fit in a header: bytes
/// 0x21..=0x7E other than `%` stay, every other byte becomes `%XX`.
/// Most keys need nothing encoded, and are borrowed, not copied.
pub fn encode(raw: &[u8]) -> Cow<'_, str> {
    if raw.iter().all(|&b| safe(b)) {
        // SAFETY: every safe byte is ASCII (0x21..=0x7E), so `raw` is UTF-8;
        // checking it again would cost as much as the loop above, on every
        // stamp of every request.
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) });
    }
    let mut out = Vec::with_capacity(raw.len() + 8);
    encode_into(&mut out, raw);
    Cow::Owned(ascii(out))
}

/// `encode` of a string: one pass, no re-validation of what is already
/// text where nothing needs encoding.
pub fn encode_str(s: &str) -> Cow<'_, str> {
    if s.bytes().all(safe) {
        Cow::Borrowed(s)
    } else {
        encode(s.as_bytes())
    }
}

/// Appends `encode(raw)` to `out`: the encoding is byte by byte, so the
/// encoding of a concatenation is the concatenation of the encodings.
pub fn encode_into(out: &mut Vec<u8>, raw: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in raw {
        if safe(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xF)]]);
        }
    }
}

/// Bytes written by `encode_into` (or hex digits) as a String: always
/// ASCII, so the lossy conversion never replaces anything and borrows.
pub fn ascii(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// `encode` of an owned string, which is kept when nothing needs encoding.
pub fn encode_string(s: String) -> String {
    if s.bytes().all(safe) {
        return s;
    }
    encode(s.as_bytes()).into_owned()
}

/// `encode`, keeping the lifetime of a borrowed key.
pub fn encode_key<'a>(key: &Cow<'a, [u8]>) -> Cow<'a, str> {
    match key {
        Cow::Borrowed(b) => encode(b),
        Cow::Owned(v) => Cow::Owned(encode(v).into_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_outside_visible_ascii_and_percent() {
        assert_eq!(encode(b"a b%\n\x00\xff~!"), "a%20b%25%0A%00%FF~!");
        assert!(matches!(encode(b"evt_1~!"), Cow::Borrowed("evt_1~!")));
        assert_eq!(encode(b""), "");
        assert_eq!(encode_str("a b%é"), "a%20b%25%C3%A9");
        assert!(matches!(encode_str("evt_1"), Cow::Borrowed("evt_1")));
        assert_eq!(encode_string("x y".to_owned()), "x%20y");
        let mut v = Vec::new();
        encode_into(&mut v, b"t:");
        encode_into(&mut v, b"a b");
        assert_eq!(ascii(v), encode(b"t:a b"));
    }

    #[test]
    fn stamp_namespace_any_case() {
        assert!(is_stamp_header("X-HookStamp-Lane-0"));
        assert!(is_stamp_header("x-hookstamp-"));
        assert!(!is_stamp_header("x-hookstamp"));
        assert!(!is_stamp_header("x-hookstampz"));
        assert!(is_stamp_header("x_hookstamp_dedupe_key"));
        assert!(is_stamp_header("X_HookStamp-Lane_0"));
        assert!(!is_stamp_header("x_hookstamp"));
    }
}
