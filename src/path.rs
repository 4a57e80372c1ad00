//! The normalised view of a request path: what an upstream server could
//! take the path to mean once it has decoded and cleaned it.
//!
//! Servers disagree on what a path means: Flask and Go percent-decode
//! before they route, Express matches case-insensitively, Tomcat drops `;`
//! parameters and resolves `.` segments, others read `\` as `/` or stop at
//! a NUL. A request is the filter's whenever *any* such reading puts it
//! under the webhook prefix, so the view applies every one of them at once;
//! it only decides whether a path is ours, never which source it names (the
//! raw path must be canonical for that).

use crate::pairs::same;

/// How many rounds of percent-decoding the view applies: a server that
/// decodes twice turns `%2577` into `w`. Past this, a path that still has
/// escapes is treated as under any prefix (see `view`).
const DECODE_ROUNDS: usize = 4;

/// The normalised segments of `raw` (a `:path`, query and fragment
/// included), dot segments resolved: `None` when the path is too strange
/// to read at all (escapes left after every decoding round), which the
/// caller treats as "could be ours".
pub fn view(raw: &str) -> Option<Vec<String>> {
    let segs = decoded_segments(strip_authority(raw.as_bytes()), true)?;
    let mut out: Vec<String> = Vec::new();
    for seg in segs {
        resolve(&mut out, seg);
    }
    Some(out)
}

/// Whether `raw` could mean a path under `prefix` (lowercase segments) to
/// some server. Every reading counts, not only the fully normalised one: the
/// path as sent (servers that route on it undecoded), the decoded segments
/// before `.` and `..` are resolved (servers that decode but do not
/// resolve), every step of the resolution, and each of those with a leading
/// `//host` or `/\host` read as an authority (`new URL(path, base)`).
pub fn under(raw: &str, prefix: &[String]) -> bool {
    if let Some(path) = plain(raw.as_bytes()) {
        // Every reading is the path as sent: compared without a copy, its
        // segments (empty ones skipped) against the prefix's in turn.
        let mut rest = path;
        for p in prefix {
            while let [b'/', tail @ ..] = rest {
                rest = tail;
            }
            match rest.split_at_checked(p.len()) {
                Some((seg, after))
                    if same(seg, p.as_bytes()) && after.first().is_none_or(|&b| b == b'/') =>
                {
                    rest = after
                }
                _ => return false,
            }
        }
        return true;
    }
    let starts = |segs: &[String]| {
        segs.len() >= prefix.len() && segs.iter().zip(prefix).all(|(s, p)| s == p)
    };
    let as_sent: Vec<String> = cut_query(raw.as_bytes())
        .split(|&b| b == b'/')
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase())
        .collect();
    if starts(&as_sent) {
        return true;
    }
    let bytes = raw.as_bytes();
    let targets = [
        strip_authority(bytes),
        scheme_relative(bytes).unwrap_or(b""),
    ];
    // A C string ends at the first NUL; a server that reads bytes does not.
    let readings = targets
        .iter()
        .filter(|t| !t.is_empty())
        .flat_map(|t| [(t, true), (t, false)]);
    for (target, at_nul) in readings {
        let Some(segs) = decoded_segments(target, at_nul) else {
            return true;
        };
        let literal: Vec<String> = segs.iter().filter(|s| *s != ".").cloned().collect();
        if starts(&literal) {
            return true;
        }
        let mut stack = Vec::new();
        for seg in segs {
            resolve(&mut stack, seg);
            if starts(&stack) {
                return true;
            }
        }
    }
    starts(&[])
}

/// A path every server reads as sent: lowercase ASCII letters, digits,
/// `-`, `_`, `~`, `/` and dots inside segments (no `.` or `..` segment, no
/// segment ending in a dot), not starting with `//`, up to its query or
/// fragment, which it returns. Most requests' paths are plain; the others
/// take every reading.
fn plain(raw: &[u8]) -> Option<&[u8]> {
    if raw.first() != Some(&b'/') || raw.starts_with(b"//") {
        return None;
    }
    // One pass to the query or fragment: every byte allowed, and no
    // segment ends in a dot (a dot before a slash, or last).
    let mut after_dot = false;
    for (i, &c) in raw.iter().enumerate() {
        match CLASS[usize::from(c)] {
            Class::Plain => after_dot = false,
            Class::Dot => after_dot = true,
            Class::Slash if !after_dot => {}
            Class::End if !after_dot => return Some(&raw[..i]),
            _ => return None,
        }
    }
    (!after_dot).then_some(raw)
}

/// What a byte is to a plain path.
#[derive(Clone, Copy)]
enum Class {
    /// Lowercase ASCII letters, digits, `-`, `_` and `~`.
    Plain,
    Dot,
    Slash,
    /// `?` or `#`: where the path ends.
    End,
    /// Anything else: the path takes every reading.
    Other,
}

static CLASS: [Class; 256] = {
    let mut t = [Class::Other; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = match b {
            b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'~' => Class::Plain,
            b'.' => Class::Dot,
            b'/' => Class::Slash,
            b'?' | b'#' => Class::End,
            _ => Class::Other,
        };
        c += 1;
    }
    t
};

/// One step of dot-segment resolution.
fn resolve(stack: &mut Vec<String>, seg: String) {
    match seg.as_str() {
        "." => {}
        ".." => {
            stack.pop();
        }
        _ => stack.push(seg),
    }
}

/// The target without its query and fragment as sent (a decoded `?` is
/// part of a segment).
fn cut_query(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == b'?' || c == b'#') {
        Some(q) => &b[..q],
        None => b,
    }
}

/// The decoded, folded segments of a target, empty ones dropped, `.` and
/// `..` kept: percent-decoding repeated until nothing changes, everything
/// after a NUL dropped where `at_nul` (a C string's reading), `\` read as `/`, `;` parameters and what follows a
/// `:` (Windows' alternate data streams) dropped, blanks and trailing dots
/// trimmed, case folded.
fn decoded_segments(target: &[u8], at_nul: bool) -> Option<Vec<String>> {
    let mut bytes = cut_query(target).to_vec();
    let mut rounds = 0;
    while let Some(decoded) = decode_once(&bytes) {
        rounds += 1;
        if rounds > DECODE_ROUNDS {
            return None;
        }
        bytes = decoded;
    }
    if at_nul {
        if let Some(nul) = bytes.iter().position(|&b| b == 0) {
            bytes.truncate(nul);
        }
    }
    let mut out = Vec::new();
    for seg in bytes.split(|&b| b == b'/' || b == b'\\') {
        // Matrix parameters: `webhooks;a=b` is `webhooks` to Tomcat.
        let seg = seg
            .split(|&b| b == b';' || b == b':')
            .next()
            .unwrap_or_default();
        let seg = trim(seg);
        if seg.is_empty() {
            continue;
        }
        if seg == b"." || seg == b".." {
            out.push(String::from_utf8_lossy(seg).into_owned());
            continue;
        }
        // Windows reads `webhooks.` and `webhooks ` as `webhooks`.
        let mut end = seg.len();
        while end > 0 && (seg[end - 1] == b'.' || seg[end - 1] == b' ') {
            end -= 1;
        }
        if end > 0 {
            out.push(fold(&seg[..end]));
        }
    }
    Some(out)
}

/// Case folded as any server might: ASCII lowercase; the four characters
/// whose Unicode case mapping is ASCII (the Kelvin sign, the long s, the
/// dotless i and the dotted capital I) as that letter; a fullwidth form as
/// its ASCII letter. (A table of four, not Unicode's case tables: those
/// would add tens of KiB to the module.)
fn fold(seg: &[u8]) -> String {
    String::from_utf8_lossy(seg)
        .chars()
        .map(|c| match c {
            '\u{212A}' => 'k',
            '\u{017F}' => 's',
            '\u{0131}' | '\u{0130}' => 'i',
            '\u{FF01}'..='\u{FF5E}' => char::from_u32(u32::from(c) - 0xFEE0)
                .unwrap_or(c)
                .to_ascii_lowercase(),
            _ => c.to_ascii_lowercase(),
        })
        .collect()
}

/// An absolute-form target (`http://host/path`) is its path; anything else
/// that does not start with `/` is read as if it did.
fn strip_authority(raw: &[u8]) -> &[u8] {
    if raw.first() == Some(&b'/') {
        return raw;
    }
    let Some(scheme_end) = find(raw, b"://") else {
        return raw;
    };
    after_host(&raw[scheme_end + 3..])
}

/// `//host/path` or `/\host/path` read as a scheme-relative URL: the path.
fn scheme_relative(raw: &[u8]) -> Option<&[u8]> {
    match raw {
        [b'/', b'/' | b'\\', rest @ ..] => Some(after_host(rest)),
        _ => None,
    }
}

fn after_host(after: &[u8]) -> &[u8] {
    match after.iter().position(|&b| b == b'/' || b == b'\\') {
        Some(slash) => &after[slash..],
        None => b"",
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One round of decoding: `%XX`, `%uXXXX` (IIS), and overlong UTF-8 forms
/// of ASCII (`%C0%AE` for `.`, of two, three or four bytes) read as the
/// ASCII they spell; `None` when nothing was decoded.
fn decode_once(b: &[u8]) -> Option<Vec<u8>> {
    if !b.contains(&b'%') && !b.iter().any(|&c| matches!(c, 0xC0 | 0xC1 | 0xE0 | 0xF0)) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let mut changed = false;
    let mut i = 0;
    while i < b.len() {
        if let Some((decoded, used)) = escape(&b[i..]).or_else(|| overlong(&b[i..])) {
            out.extend_from_slice(&decoded);
            i += used;
            changed = true;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    changed.then_some(out)
}

/// `%XX` or `%uXXXX` at the start of `b`: the bytes it spells, and its length.
fn escape(b: &[u8]) -> Option<(Vec<u8>, usize)> {
    if b.first() != Some(&b'%') {
        return None;
    }
    if let (Some(h), Some(l)) = (hexval(b.get(1)), hexval(b.get(2))) {
        return Some((vec![h << 4 | l], 3));
    }
    if matches!(b.get(1), Some(b'u' | b'U')) {
        let mut v = 0u32;
        for k in 2..6 {
            v = v << 4 | u32::from(hexval(b.get(k))?);
        }
        let c = char::from_u32(v).unwrap_or('\u{FFFD}');
        return Some((c.to_string().into_bytes(), 6));
    }
    None
}

/// An overlong UTF-8 encoding of an ASCII byte at the start of `b`.
fn overlong(b: &[u8]) -> Option<(Vec<u8>, usize)> {
    let cont = |k: usize| {
        b.get(k)
            .filter(|&&c| c & 0xC0 == 0x80)
            .map(|&c| u32::from(c & 0x3F))
    };
    let (v, used) = match *b.first()? {
        c @ (0xC0 | 0xC1) => ((u32::from(c & 0x1F) << 6) | cont(1)?, 2),
        0xE0 => ((cont(1)? << 6) | cont(2)?, 3),
        0xF0 => ((cont(1)? << 12) | (cont(2)? << 6) | cont(3)?, 4),
        _ => return None,
    };
    (v < 0x80).then(|| (vec![v as u8], used))
}

fn hexval(c: Option<&u8>) -> Option<u8> {
    let c = *c?;
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// A segment without the blanks around it (ASCII or Unicode white space,
/// control characters): a server that strips them reads `..\u{a0}` as `..`.
fn trim(mut s: &[u8]) -> &[u8] {
    while let Some(n) = (1..=4).find(|&n| s.get(..n).is_some_and(blank)) {
        s = s.get(n..).unwrap_or_default();
    }
    while let Some(n) = (1..=4).find(|&n| s.len() >= n && blank(&s[s.len() - n..])) {
        s = &s[..s.len() - n];
    }
    s
}

/// Whether `c` is one blank character: an ASCII blank or control, or
/// Unicode white space (what Python's `str.strip` drops).
fn blank(c: &[u8]) -> bool {
    let mut chars = std::str::from_utf8(c).ok().map(str::chars);
    match chars.as_mut().map(|cs| (cs.next(), cs.next())) {
        Some((Some(ch), None)) => ch.is_whitespace() || ch.is_control(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(p: &str) -> Vec<String> {
        view(p).unwrap_or_else(|| vec!["<strange>".into()])
    }

    #[test]
    fn every_spelling_of_a_webhook_path_has_the_same_view() {
        let want = vec!["webhooks".to_owned(), "stripe".to_owned()];
        for p in [
            "/webhooks/stripe",
            "/%77ebhooks/stripe",
            "/%2577ebhooks/stripe",
            "/WEBHOOKS/stripe",
            "/WebHooks/STRIPE",
            "/webhooks;a=b/stripe",
            "/webhooks/stripe;jsessionid=1",
            "/./webhooks/stripe",
            "/%2e/webhooks/stripe",
            "/webhooks%2Fstripe",
            "/webhooks%2fstripe",
            "/x/../webhooks/stripe",
            "/x/%2E%2E/webhooks/stripe",
            "/x/..%2Fwebhooks/stripe",
            "/x/%c0%ae%c0%ae/webhooks/stripe",
            "/webhooks\\stripe",
            "/webhooks%5Cstripe",
            "//webhooks//stripe/",
            "/webhooks/stripe?x=1",
            "/webhooks/stripe#frag",
            "/webhooks/stripe%00.json",
            "/webhooks/stripe%20",
            "/webhooks/%09stripe",
            "http://example.com/webhooks/stripe",
            "https://example.com:8443/webhooks/stripe?a",
            "webhooks/stripe",
            "/../../webhooks/stripe",
        ] {
            assert_eq!(v(p), want, "{p}");
        }
    }

    #[test]
    fn paths_elsewhere_stay_elsewhere() {
        let prefix = vec!["webhooks".to_owned()];
        for p in [
            "/",
            "/health",
            "/webhooksx/stripe",
            "/api/webhooks/stripe",
            "/api/x/../y",
            "/webhooks%3Fx/stripe",
            "http://example.com/",
            "*",
        ] {
            assert!(!under(p, &prefix), "{p}");
        }
        for p in [
            "/webhooks",
            "/WEBHOOKS/",
            "/webhooks/a/b/c",
            "/%77ebhooks/nope",
            // Under the prefix to a reader that does not resolve dots.
            "/webhooks/..",
            "/webhooks/stripe/../..",
            "/webhooks/stripe%2F..%2F..",
            "/webhooks/stripe%3F/../..",
            "/webhooks/../api",
            // Scheme-relative: `new URL(path, base)` takes evil.com as a host.
            "//evil.com/webhooks/stripe",
            "/\\evil.com/webhooks/stripe",
            // Unicode case folding, IIS escapes, fullwidth forms, overlong
            // UTF-8, Windows' trailing dots and alternate data streams.
            "/webhoo%E2%84%AAs/stripe",
            "/webhook%C5%BF/stripe",
            "/%u0077ebhooks/stripe",
            "/%EF%BD%97ebhooks/stripe",
            "/%E0%81%B7ebhooks/stripe",
            "/webhooks./stripe",
            "/webhooks%20./stripe",
            "/webhooks::$DATA/stripe",
        ] {
            assert!(under(p, &prefix), "{p}");
        }
    }

    #[test]
    fn endless_escapes_count_as_ours() {
        let p = "/%2525252525252577ebhooks/stripe";
        assert_eq!(view(p), None);
        assert!(under(p, &["webhooks".to_owned()]));
    }
}
