//! Checks a source's `verify` object: its scheme (`scheme`), its secrets
//! (`secrets`), and here what ties them to the request: the tolerance, the
//! failure rule, the mode and the public URL. A secret's value never
//! appears in an error or a warning: only the variable it came from, or its
//! place.

use super::bounds::{within, MAX_PUBLIC_URL_BYTES};
use super::diag::{Diags, Issue, Scope};
use super::fields::{field, kind, shown, unknown_fields, Env};
use super::secrets::KeyForm;
use super::Routing;
use crate::providers::SchemePreset;
use crate::verify::{Mode, OnFailure, PublicUrl, Scheme, Verify};
use serde_json::{Map, Value};

const DEFAULT_TOLERANCE_S: u64 = 300;

pub fn check(
    v: &Value,
    scope: &Scope,
    routing: Routing,
    env: Env,
    d: &mut Diags,
) -> Option<Verify> {
    let before = d.len();
    let Some(obj) = v.as_object() else {
        // Never the value: a secret written in the wrong place is not shown.
        d.push(
            scope,
            "not_an_object",
            format!("must be an object, got {}", kind(v)),
        );
        return None;
    };
    unknown_fields(
        obj,
        &[
            "scheme",
            "secrets",
            "tolerance_s",
            "on_failure",
            "public_url",
            "mode",
        ],
        scope,
        d,
    );
    let scheme = super::scheme::scheme(field(obj, "scheme"), scope, d);
    let tolerance_s = tolerance(obj, scope, d);
    let (on_failure, mode) = failure_and_mode(obj, scheme.as_ref(), scope, d);
    let public_url = public_url(obj, scheme.as_ref(), scope, d);
    let form = scheme.as_ref().map_or(KeyForm::Raw, KeyForm::of);
    let secrets = super::secrets::secrets(field(obj, "secrets"), form, routing, scope, env, d);
    if d.len() > before {
        return None;
    }
    Some(Verify {
        scheme: scheme?,
        secrets: secrets?,
        tolerance_s,
        on_failure,
        mode,
        refuses_tokens: false,
        public_url,
    })
}

/// `tolerance_s`: a positive number of seconds, 300 by default.
fn tolerance(obj: &Map<String, Value>, scope: &Scope, d: &mut Diags) -> u64 {
    let Some(t) = field(obj, "tolerance_s") else {
        return DEFAULT_TOLERANCE_S;
    };
    t.as_u64().filter(|&n| n > 0).unwrap_or_else(|| {
        let got = shown(t);
        d.push(
            scope,
            "bad_tolerance",
            format!("tolerance_s must be a positive integer, got {got}"),
        );
        DEFAULT_TOLERANCE_S
    })
}

/// `on_failure` and `mode`, and what a streamed check cannot do.
fn failure_and_mode(
    obj: &Map<String, Value>,
    scheme: Option<&Scheme>,
    scope: &Scope,
    d: &mut Diags,
) -> (OnFailure, Mode) {
    let on_failure = match field(obj, "on_failure").map(Value::as_str) {
        None | Some(Some("reject")) => OnFailure::Reject,
        Some(Some("flag")) => OnFailure::Flag,
        Some(_) => {
            d.push(
                scope,
                "bad_on_failure",
                "on_failure must be \"reject\" or \"flag\"",
            );
            OnFailure::Reject
        }
    };
    let mode = match field(obj, "mode").map(Value::as_str) {
        None | Some(Some("hold")) => Mode::Hold,
        Some(Some("stream")) => Mode::Stream,
        Some(_) => {
            d.push(scope, "bad_mode", "mode must be \"hold\" or \"stream\"");
            Mode::Hold
        }
    };
    if mode == Mode::Stream && on_failure == OnFailure::Flag {
        d.push(
            scope,
            "stream_needs_reject",
            "mode \"stream\" sends the headers before the signature is checked: a forgery can only be refused (on_failure \"reject\"), never flagged",
        );
    }
    // Twilio signs a form body's fields sorted: its check needs the whole
    // body, which a streamed source never holds.
    if mode == Mode::Stream && scheme == Some(&Scheme::Preset(SchemePreset::Twilio)) {
        d.push(
            scope,
            "stream_needs_body",
            "scheme twilio signs a form body's fields sorted, which needs the whole body: use mode \"hold\"",
        );
    }
    (on_failure, mode)
}

/// `public_url`: required where the scheme signs the URL, a warning where
/// it does not.
fn public_url(
    obj: &Map<String, Value>,
    scheme: Option<&Scheme>,
    scope: &Scope,
    d: &mut Diags,
) -> Option<PublicUrl> {
    let public_url = match field(obj, "public_url") {
        None => None,
        Some(u) => parse_public_url(u).map_err(|e| d.issue(scope, e)).ok(),
    };
    match scheme {
        Some(s) if s.signs_url() && field(obj, "public_url").is_none() => {
            let what = match s {
                Scheme::Custom(_) => "the signed template uses {url}".to_owned(),
                other => format!("scheme {} signs the URL the provider called", other.name()),
            };
            d.push(
                scope,
                "needs_public_url",
                format!(
                    "{what}: set public_url to the scheme and host the provider calls (e.g. \"https://hooks.example.com\"); behind a proxy the request's own are not the provider's"
                ),
            );
        }
        Some(s) if !s.signs_url() && public_url.is_some() => d.warn(
            scope,
            "unused_public_url",
            format!(
                "public_url is set but scheme {} does not sign the URL",
                s.name()
            ),
        ),
        _ => {}
    }
    public_url
}

/// `https?://host[:port]`, nothing after it: the scheme and host the
/// provider calls (its path and query are the request's).
fn parse_public_url(v: &Value) -> Result<PublicUrl, Issue> {
    let Value::String(u) = v else {
        return Err(Issue::new(
            "bad_public_url",
            format!(
                "public_url must be a string \"https://host[:port]\", got {}",
                kind(v)
            ),
        ));
    };
    within("bytes of public_url", MAX_PUBLIC_URL_BYTES, u.len())?;
    let bad = |why: &str| {
        Issue::new(
            "bad_public_url",
            format!("public_url {u:?} {why}: it must be https://host[:port] (or http://) with no path, query or userinfo"),
        )
    };
    let (scheme, rest) = if let Some(r) = u.strip_prefix("https://") {
        ("https", r)
    } else if let Some(r) = u.strip_prefix("http://") {
        ("http", r)
    } else {
        return Err(bad("is not http:// or https://"));
    };
    if rest.contains('@') {
        return Err(bad("has userinfo"));
    }
    if rest.contains(['/', '?', '#']) {
        return Err(bad("has a path, a query or a fragment"));
    }
    let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
        // An IPv6 literal.
        let Some((addr, tail)) = inner.split_once(']') else {
            return Err(bad("has no valid host"));
        };
        let host = &rest[..addr.len() + 2];
        match tail {
            "" => (host, None),
            t => match t.strip_prefix(':') {
                Some(p) => (host, Some(p)),
                None => return Err(bad("has a bad port")),
            },
        }
    } else {
        match rest.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        }
    };
    let host_ok = !host.is_empty()
        && (host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
            || (host.starts_with('[')
                && host.ends_with(']')
                && host.len() > 2
                && host[1..host.len() - 1]
                    .bytes()
                    .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')));
    if !host_ok {
        return Err(bad("has no valid host"));
    }
    let port = match port {
        None => None,
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => return Err(bad("has a bad port")),
        },
    };
    let default = if scheme == "https" { 443 } else { 80 };
    Ok(PublicUrl {
        origin: u.clone(),
        bare: format!("{scheme}://{host}"),
        with_port: format!("{scheme}://{host}:{}", port.unwrap_or(default)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_urls() {
        let ok = |u: &str| parse_public_url(&Value::String(u.into()));
        let u = ok("https://hooks.example.com").unwrap();
        assert_eq!(u.bare, "https://hooks.example.com");
        assert_eq!(u.with_port, "https://hooks.example.com:443");
        let u = ok("http://[::1]:8080").unwrap();
        assert_eq!(u.bare, "http://[::1]");
        assert_eq!(u.with_port, "http://[::1]:8080");
        for bad in [
            "hooks.example.com",
            "https://hooks.example.com/",
            "https://hooks.example.com/twilio",
            "https://hooks.example.com?a=1",
            "https://user@hooks.example.com",
            "https://hooks.example.com:0",
            "https://hooks.example.com:99999",
            "https://",
            "ftp://hooks.example.com",
        ] {
            assert!(ok(bad).is_err(), "{bad}");
        }
    }
}
