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

/// How many rounds of percent-decoding the view applies: a server that
/// decodes twice turns `%2577` into `w`. Past this, a path that still has
/// escapes is treated as under any prefix (see `view`).
const DECODE_ROUNDS: usize = 4;

/// The normalised segments of `raw` (a `:path`, query and fragment
/// included): `None` when the path is too strange to read at all (escapes
/// left after every decoding round), which the caller treats as "could be
/// ours".
pub fn view(raw: &str) -> Option<Vec<String>> {
    let mut bytes = strip_authority(raw.as_bytes()).to_vec();
    // The query and fragment as sent; a decoded `?` is part of a segment.
    if let Some(q) = bytes.iter().position(|&b| b == b'?' || b == b'#') {
        bytes.truncate(q);
    }
    let mut rounds = 0;
    while let Some(decoded) = decode_once(&bytes) {
        rounds += 1;
        if rounds > DECODE_ROUNDS {
            return None;
        }
        bytes = decoded;
    }
    // A C string ends at the first NUL.
    if let Some(nul) = bytes.iter().position(|&b| b == 0) {
        bytes.truncate(nul);
    }
    let mut out: Vec<String> = Vec::new();
    for seg in bytes.split(|&b| b == b'/' || b == b'\\') {
        // Matrix parameters: `webhooks;a=b` is `webhooks` to Tomcat.
        let seg = seg.split(|&b| b == b';').next().unwrap_or_default();
        let seg = trim(seg);
        match seg {
            b"" | b"." => {}
            b".." => {
                out.pop();
            }
            _ => out.push(String::from_utf8_lossy(seg).to_ascii_lowercase()),
        }
    }
    Some(out)
}

/// Whether `raw` could mean a path under `prefix` (lowercase segments) to
/// some server.
pub fn under(raw: &str, prefix: &[String]) -> bool {
    match view(raw) {
        None => true,
        Some(segs) => segs.len() >= prefix.len() && segs.iter().zip(prefix).all(|(s, p)| s == p),
    }
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
    let after = &raw[scheme_end + 3..];
    match after.iter().position(|&b| b == b'/' || b == b'\\') {
        Some(slash) => &after[slash..],
        None => b"",
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One round of percent-decoding, with overlong two-byte UTF-8 forms of
/// ASCII (`%C0%AE` for `.`) read as the ASCII they spell; `None` when
/// nothing was decoded.
fn decode_once(b: &[u8]) -> Option<Vec<u8>> {
    if !b.contains(&b'%') && !has_overlong(b) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let mut changed = false;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if let (Some(h), Some(l)) = (hexval(b.get(i + 1)), hexval(b.get(i + 2))) {
                out.push(h << 4 | l);
                i += 3;
                changed = true;
                continue;
            }
        }
        if let (0xC0 | 0xC1, Some(&c)) = (b[i], b.get(i + 1)) {
            if c & 0xC0 == 0x80 {
                out.push(((b[i] & 0x1F) << 6) | (c & 0x3F));
                i += 2;
                changed = true;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    changed.then_some(out)
}

fn has_overlong(b: &[u8]) -> bool {
    b.iter().any(|&c| c == 0xC0 || c == 0xC1)
}

fn hexval(c: Option<&u8>) -> Option<u8> {
    let c = *c?;
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// A segment without the whitespace and control bytes around it.
fn trim(mut s: &[u8]) -> &[u8] {
    let blank = |b: &u8| b.is_ascii_whitespace() || b.is_ascii_control();
    while let [first, rest @ ..] = s {
        if !blank(first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !blank(last) {
            break;
        }
        s = rest;
    }
    s
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
            "/webhooks/../api",
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
