//! The proxy-wasm wire form of a header map, read in place.
//!
//! The host hands a map as `u32le count`, then `count` pairs of `u32le`
//! name and value lengths, then each name and each value followed by a NUL.
//! Borrowing names and values from that one buffer, instead of copying each
//! into its own allocation, is most of what reading the headers costs in the
//! VM.

/// Reads a serialised map; `None` when the bytes do not have that shape
/// (never a panic). An empty buffer is an empty map.
pub fn parse(raw: &[u8]) -> Option<Vec<(&[u8], &[u8])>> {
    parse_into(raw, Vec::new())
}

/// `parse`, into `map`'s allocation (emptied first): a host keeps one list
/// for all its requests (`host::spare_list`).
pub fn parse_into<'a>(
    raw: &'a [u8],
    mut map: Vec<(&'a [u8], &'a [u8])>,
) -> Option<Vec<(&'a [u8], &'a [u8])>> {
    map.clear();
    if raw.is_empty() {
        return Some(map);
    }
    let count = usize::try_from(u32le(raw, 0)?).ok()?;
    let mut next = count.checked_mul(8)?.checked_add(4)?;
    // Each pair takes at least 10 bytes: this bounds the allocation.
    if count > raw.len() / 10 {
        return None;
    }
    map.reserve(count);
    // Names stay bytes, as values do: nothing reads a name but to compare
    // it with one of ours, so none is checked as text.
    for i in 0..count {
        let name_len = usize::try_from(u32le(raw, 4 + 8 * i)?).ok()?;
        let value_len = usize::try_from(u32le(raw, 8 + 8 * i)?).ok()?;
        let (name, after) = field(raw, next, name_len)?;
        let (value, after) = field(raw, after, value_len)?;
        next = after;
        map.push((name, value));
    }
    Some(map)
}

fn u32le(raw: &[u8], at: usize) -> Option<u32> {
    let b = raw.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// `len` bytes at `at`, which must be followed by a NUL; and where the
/// next field starts.
fn field(raw: &[u8], at: usize, len: usize) -> Option<(&[u8], usize)> {
    let end = at.checked_add(len)?;
    let bytes = raw.get(at..end)?;
    (raw.get(end) == Some(&0)).then_some((bytes, end + 1))
}

/// The wire form of `map`, as the host writes it (for tests and fuzzing).
pub fn serialise(map: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(map.len() as u32).to_le_bytes());
    for (n, v) in map {
        out.extend_from_slice(&(n.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (n, v) in map {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
        out.extend_from_slice(v);
        out.push(0);
    }
    out
}

/// The first value of header `name` (lowercase) in arrival order, if any.
/// Names are compared case-insensitively. (A key header is never in the
/// stamp namespace: the config refuses it, and the filter strips those.)
pub fn first_header<'h, N, V>(headers: &'h [(N, V)], name: &str) -> Option<&'h [u8]>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    // The proxies hand names over lowercase: the exact comparison settles
    // nearly every one, and a length apart settles the rest but a few.
    let name = name.as_bytes();
    let named = |n: &[u8]| n.len() == name.len() && (same(n, name) || n.eq_ignore_ascii_case(name));
    headers
        .iter()
        .find(|(n, _)| named(n.as_ref()))
        .map(|(_, v)| v.as_ref())
}

/// Whether two header names (or any short byte strings) are equal,
/// compared in place eight bytes at a time. A slice's `==` calls `memcmp`,
/// which in the .wasm is wasi-libc's, a byte at a time, behind a call:
/// some 130 instructions in V8 for a name found, on every lookup.
#[inline]
pub fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    // Indexes, not iterator adapters, and no slice `==`: at the .wasm's
    // opt-level each of those is a call too.
    let word = |c: &[u8], at: usize| {
        c.get(at..at + 8)
            .map(|w| u64::from_ne_bytes(w.try_into().unwrap_or_default()))
    };
    let mut at = 0;
    while at + 8 <= a.len() {
        if word(a, at) != word(b, at) {
            return false;
        }
        at += 8;
    }
    while at < a.len() {
        if a.get(at) != b.get(at) {
            return false;
        }
        at += 1;
    }
    true
}

/// `b` as text where it is ASCII (a header map nearly always is): UTF-8's
/// own check of a header map costs some 700 instructions in V8 a request.
#[inline]
pub fn ascii(b: &[u8]) -> Option<&str> {
    // Natively the standard check (by vector words); in the .wasm sixteen
    // bytes at a time, where the standard one, at the .wasm's opt-level,
    // loops over four-byte words: some 600 instructions on (d) in Envoy.
    #[cfg(not(target_arch = "wasm32"))]
    let is = b.is_ascii();
    #[cfg(target_arch = "wasm32")]
    let is = ascii_by_16(b);
    // SAFETY: ASCII is UTF-8.
    is.then(|| unsafe { std::str::from_utf8_unchecked(b) })
}

/// `b` as text where it is UTF-8: ASCII's check first, UTF-8's only where
/// a byte is not ASCII.
#[inline]
pub fn text(b: &[u8]) -> Option<&str> {
    ascii(b).or_else(|| std::str::from_utf8(b).ok())
}

/// Whether `b` is ASCII, sixteen bytes at a time as two words.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn ascii_by_16(b: &[u8]) -> bool {
    let word = |c: &[u8]| u64::from_ne_bytes(c.try_into().unwrap_or_default());
    let mut chunks = b.chunks_exact(16);
    let mut high = 0;
    for c in chunks.by_ref() {
        high |= word(&c[..8]) | word(&c[8..]);
    }
    for &c in chunks.remainder() {
        high |= u64::from(c);
    }
    high & 0x8080_8080_8080_8080 == 0
}

/// Request headers Envoy keeps once, joining a repeat onto the first value
/// with `,` (its inline headers, and the custom inline ones its extensions
/// register): the filter sees `a,b` for a header sent twice. Checked
/// against a live Envoy in tests/cases/repeats.json.
const JOINED: &[&str] = &[
    "accept",
    "accept-encoding",
    "access-control-request-headers",
    "access-control-request-method",
    "authorization",
    "cache-control",
    "connection",
    "content-type",
    "expect",
    "grpc-accept-encoding",
    "grpc-timeout",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "keep-alive",
    "origin",
    "pragma",
    "proxy-connection",
    "proxy-status",
    "referer",
    "te",
    "transfer-encoding",
    "upgrade",
    "user-agent",
    "via",
    "x-client-trace-id",
    "x-envoy-original-path",
    "x-forwarded-client-cert",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-port",
    "x-forwarded-proto",
    "x-request-id",
];

/// A value without its leading and trailing spaces and tabs.
fn trim_blanks(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t'))
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !matches!(b, b' ' | b'\t'))
        .map_or(start, |i| i + 1);
    &v[start..end]
}

/// A header list as Envoy hands it to the filter: names lowercase, and a
/// repeat of a header Envoy keeps once (see `JOINED`) joined onto its first
/// value with `,`, values without their surrounding blanks, `host` read as
/// `:authority`. The CLI and the native tables give `decide` this list,
/// so that they answer as the filter does for any list a client sends.
pub fn as_envoy_gives<N, V>(headers: &[(N, V)]) -> Vec<(String, Vec<u8>)>
where
    N: AsRef<str>,
    V: AsRef<[u8]>,
{
    let mut out: Vec<(String, Vec<u8>)> = Vec::with_capacity(headers.len());
    for (n, v) in headers {
        let mut name = n.as_ref().to_ascii_lowercase();
        // HTTP/1's Host is HTTP/2's :authority, the name the filter sees.
        if name == "host" {
            name = ":authority".to_owned();
        }
        // A value's surrounding blanks are not part of it (Envoy's codecs
        // drop them).
        let v = trim_blanks(v.as_ref());
        let joined = JOINED.contains(&name.as_str());
        match out.iter_mut().find(|(o, _)| joined && *o == name) {
            Some((_, first)) => {
                first.push(b',');
                first.extend_from_slice(v);
            }
            None => out.push((name, v.to_vec())),
        }
    }
    out
}

/// An empty list of `U` in the allocation of `list`, emptied: for a list
/// kept between requests, whose items are one type but for their
/// lifetimes (an in-place collect keeps the buffer of two types of one
/// layout).
pub fn relabel<T, U>(mut list: Vec<T>) -> Vec<U> {
    list.clear();
    // Not a filter: the item type changes, which the in-place collect
    // needs.
    #[allow(clippy::unnecessary_filter_map)]
    list.into_iter().filter_map(|_| None).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_is_utf8_of_ascii_only() {
        // Every length about a chunk's, with a high byte at each place.
        for len in 0..40 {
            let plain = vec![b'a'; len];
            assert_eq!(ascii(&plain), std::str::from_utf8(&plain).ok());
            assert!(ascii_by_16(&plain));
            for at in 0..len {
                for high in [0x80, 0xC3, 0xFF] {
                    let mut b = plain.clone();
                    b[at] = high;
                    assert_eq!(ascii(&b), None, "{len} {at} {high}");
                    assert!(!ascii_by_16(&b), "{len} {at} {high}");
                }
            }
        }
        assert_eq!(ascii("é".as_bytes()), None);
        assert_eq!(ascii(b"\x7f\0 ~"), Some("\x7f\0 ~"));
    }

    #[test]
    fn same_is_equality() {
        let names = [
            "",
            "a",
            "x-github-delivery",
            "x-github-deliverz",
            "x-forwarded-proto",
            "12345678",
        ];
        for a in names {
            for b in names {
                assert_eq!(same(a.as_bytes(), b.as_bytes()), a == b, "{a} {b}");
            }
            assert!(!same(a.as_bytes(), format!("{a}!").as_bytes()));
        }
        // A difference in each position, within a word and in the tail.
        let base = b"abcdefghijklmnopq".to_vec();
        for i in 0..base.len() {
            let mut other = base.clone();
            other[i] ^= 1;
            assert!(!same(&base, &other), "{i}");
        }
    }

    #[test]
    fn round_trip() {
        let map: Vec<(&str, &[u8])> = vec![
            (":method", b"POST"),
            (":path", b"/webhooks/github"),
            ("x-empty", b""),
            ("x-bin", b"a\0b\xff"),
        ];
        let bytes: Vec<(&[u8], &[u8])> = map.iter().map(|(n, v)| (n.as_bytes(), *v)).collect();
        assert_eq!(parse(&serialise(&map)), Some(bytes));
        assert_eq!(parse(&[]), Some(vec![]));
        assert_eq!(parse(&serialise(&[])), Some(vec![]));
    }

    #[test]
    fn repeats_join_as_envoy_joins_them() {
        let h = [
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("X-Id", "a"),
            ("content-type", "application/json"),
            ("x-id", "b"),
        ];
        let got = as_envoy_gives(&h);
        assert_eq!(
            first_header(&got, "content-type"),
            Some(&b"application/x-www-form-urlencoded,application/json"[..])
        );
        assert_eq!(first_header(&got, "x-id"), Some(&b"a"[..]));
        assert_eq!(got.len(), 3);
    }

    #[test]
    fn malformed_is_none() {
        let good = serialise(&[("a", b"1"), ("bb", b"22")]);
        // Every truncation, and a missing NUL, is refused.
        for cut in 1..good.len() {
            assert_eq!(parse(&good[..cut]), None, "cut at {cut}");
        }
        let mut no_nul = good.clone();
        let last = no_nul.len() - 1;
        no_nul[last] = b'x';
        assert_eq!(parse(&no_nul), None);
        // A count far beyond the buffer, and lengths that overflow.
        assert_eq!(parse(&[0xff, 0xff, 0xff, 0xff]), None);
        let mut huge = serialise(&[("a", b"1")]);
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(parse(&huge), None);
        // A name that is not UTF-8 is not malformed: read as bytes, as a
        // value is (nothing reads a name as text).
        assert_eq!(
            parse(
                &serialise(&[("a", b"1")])
                    .iter()
                    .map(|&b| if b == b'a' { 0xff } else { b })
                    .collect::<Vec<_>>()
            ),
            Some(vec![(&[0xff][..], &b"1"[..])])
        );
    }
}
