//! Checks a source's `verify` object. A secret's value never appears in an
//! error or a warning: only the variable it came from, or its place.

use super::bounds::{within, MAX_PUBLIC_URL_BYTES, MAX_SECRETS, MAX_TEMPLATE_BYTES, MAX_TENANTS};
use super::diag::{Diags, Issue, Scope};
use super::fields::{field, key_header, unknown_fields, Env};
use super::{tenant_ok, Routing};
use crate::verify::{
    self, Algorithm, Custom, Encoding, Key, Mode, OnFailure, PublicUrl, Scheme, Secret, Secrets,
    Verify,
};
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
    let scheme = match field(obj, "scheme") {
        None => {
            d.push(scope, "missing_scheme", "scheme is required");
            None
        }
        Some(Value::String(p)) => Scheme::preset(p).or_else(|| {
            let v = Value::String(p.clone());
            // A suggestion only for a name that is shown.
            let hint = if shown(&v) == kind(&v) {
                String::new()
            } else {
                super::fields::did_you_mean(p, verify::PRESETS)
            };
            d.push(
                scope,
                "unknown_scheme",
                format!(
                    "unknown scheme {}{hint} (presets: {}; or a custom scheme object)",
                    shown(&v),
                    verify::PRESETS.join(", ")
                ),
            );
            None
        }),
        Some(Value::Object(c)) => custom(c, scope, d).map(Scheme::Custom),
        Some(other) => {
            d.push(
                scope,
                "bad_scheme",
                format!(
                    "scheme must be a preset name or an object, got {}",
                    kind(other)
                ),
            );
            None
        }
    };
    let tolerance_s = match field(obj, "tolerance_s") {
        None => DEFAULT_TOLERANCE_S,
        Some(t) => match t.as_u64() {
            Some(n) if n > 0 => n,
            _ => {
                d.push(
                    scope,
                    "bad_tolerance",
                    format!("tolerance_s must be a positive integer, got {}", shown(t)),
                );
                DEFAULT_TOLERANCE_S
            }
        },
    };
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
    if mode == Mode::Stream && scheme == Some(Scheme::Twilio) {
        d.push(
            scope,
            "stream_needs_body",
            "scheme twilio signs a form body's fields sorted, which needs the whole body: use mode \"hold\"",
        );
    }
    let public_url = match field(obj, "public_url") {
        None => None,
        Some(u) => parse_public_url(u).map_err(|e| d.issue(scope, e)).ok(),
    };
    match &scheme {
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
    let form = scheme.as_ref().map_or(KeyForm::Raw, KeyForm::of);
    let secrets = match field(obj, "secrets") {
        None => {
            d.push(
                scope,
                "missing_secrets",
                "secrets is required: a list of {\"env\": NAME} (or {\"value\": ...})",
            );
            None
        }
        Some(Value::Array(list)) => {
            Some(Secrets::All(key_list(list, "secrets", form, scope, env, d)))
        }
        Some(Value::Object(map)) => {
            if !routing.tenant_path() {
                d.push(
                    scope,
                    "needs_tenant_path",
                    "per-tenant secrets need \"routing\": \"tenant_path\"",
                );
            }
            if let Err(e) = within("secrets: tenants", MAX_TENANTS, map.len()) {
                d.issue(scope, e);
            }
            let mut per = Vec::new();
            for (t, list) in map.iter().take(MAX_TENANTS) {
                if !tenant_ok(t) {
                    d.push(
                        scope,
                        "not_a_tenant",
                        format!("secrets: {t:?} is not a tenant ([A-Za-z0-9_-]{{1,64}})"),
                    );
                }
                match list.as_array() {
                    Some(l) => per.push((
                        t.clone(),
                        key_list(l, &format!("secrets.{t}"), form, scope, env, d),
                    )),
                    None => d.push(scope, "not_a_list", format!("secrets.{t} must be a list")),
                }
            }
            if per.is_empty() {
                d.push(scope, "no_tenant", "secrets names no tenant");
            }
            Some(Secrets::PerTenant(per))
        }
        Some(other) => {
            d.push(
                scope,
                "bad_secrets",
                format!(
                    "secrets must be a list, or an object of tenants to lists, got {}",
                    kind(other)
                ),
            );
            None
        }
    };
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

/// How a scheme's secrets are written.
#[derive(Debug, Clone, Copy)]
enum KeyForm {
    /// The bytes of the string (an HMAC key).
    Raw,
    /// Standard Webhooks': `whsec_` + base64 (an HMAC key) or `whpk_` +
    /// base64 (an Ed25519 public key).
    Standard,
    /// Only `whsec_` (the seal's and handshakes' lists, through
    /// `secret_list`).
    Whsec,
    /// An Ed25519 public key in this encoding.
    Public(Encoding),
}

impl KeyForm {
    fn of(s: &Scheme) -> KeyForm {
        match s {
            Scheme::StandardWebhooks | Scheme::Svix => KeyForm::Standard,
            Scheme::Discord => KeyForm::Public(Encoding::Hex),
            Scheme::Custom(c) if c.algorithm == Algorithm::Ed25519 => KeyForm::Public(c.encoding),
            _ => KeyForm::Raw,
        }
    }
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

/// A value under `verify`, as an error may show it: a number, or a short
/// name-like string (a scheme's name); anything else only by its kind, in
/// case it is a secret written in the wrong place.
fn shown(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        // A preset-like name (lowercase letters and `_`): a secret rarely is.
        Value::String(s)
            if s.len() <= 24 && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
        {
            format!("{s:?}")
        }
        other => kind(other).to_owned(),
    }
}

/// A JSON value's kind, for errors about a field that may hold a secret.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

pub(super) fn secret_list(
    list: &[Value],
    at: &str,
    whsec: bool,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Vec<Secret> {
    let form = if whsec { KeyForm::Whsec } else { KeyForm::Raw };
    key_list(list, at, form, scope, env, d)
}

fn key_list(
    list: &[Value],
    at: &str,
    form: KeyForm,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Vec<Secret> {
    if list.is_empty() {
        d.push(
            scope,
            "no_secret",
            format!("{at} is empty: at least one secret"),
        );
    }
    if let Err(e) = within(at, MAX_SECRETS, list.len()) {
        d.issue(scope, e);
    }
    let mut out = Vec::new();
    for (i, s) in list.iter().enumerate().take(MAX_SECRETS) {
        let place = format!("{at}[{i}]");
        let (raw, from) = match s
            .as_object()
            .map(|o| (o.len(), o.get("env"), o.get("value")))
        {
            // A secret written where the variable's name goes is neither
            // looked up nor shown.
            Some((1, Some(Value::String(name)), None)) if !env_name_ok(name) => {
                d.push(
                    scope,
                    "bad_env_name",
                    format!(
                        "{place}: env must name an environment variable ([A-Za-z_][A-Za-z0-9_]*, not a whsec_ value); \
                         what is there is not shown, in case it is the secret itself"
                    ),
                );
                continue;
            }
            Some((1, Some(Value::String(name)), None)) => match env(name) {
                Some(v) if !v.is_empty() => (v, format!("the environment variable {name}")),
                _ => {
                    d.push(
                        scope,
                        "env_not_set",
                        format!("{place}: the environment variable {name} is not set or is empty"),
                    );
                    continue;
                }
            },
            Some((1, None, Some(Value::String(v)))) if !v.is_empty() => {
                d.warn(
                    scope, "inline_secret",
                    format!("{place} is an inline secret, readable by anyone who can read the configuration: prefer {{\"env\": NAME}}"),
                );
                (v.clone(), "the inline value".to_owned())
            }
            _ => {
                d.push(
                    scope, "bad_secret",
                    format!("{place} must be {{\"env\": NAME}} or {{\"value\": non-empty string}}, got {}", kind(s)),
                );
                continue;
            }
        };
        let secret = match form {
            KeyForm::Raw => Ok(Secret::hmac(raw.into_bytes())),
            KeyForm::Whsec => decode_whsec(&raw).map(Secret::hmac).ok_or_else(|| {
                Issue::new(
                    "not_whsec",
                    format!("{place}: {from} is not a whsec_ secret (whsec_ and base64)"),
                )
            }),
            KeyForm::Standard => match raw.strip_prefix("whpk_") {
                Some(b64) => lenient_base64(b64)
                    .ok_or_else(|| {
                        Issue::new(
                            "bad_public_key",
                            format!("{place}: {from} is not a whpk_ public key (whpk_ and base64)"),
                        )
                    })
                    .and_then(|k| public_key(k, &place, &from)),
                None => decode_whsec(&raw).map(Secret::hmac).ok_or_else(|| {
                    Issue::new(
                        "not_whsec",
                        format!(
                            "{place}: {from} is not a whsec_ secret (whsec_ and base64) nor a whpk_ public key"
                        ),
                    )
                }),
            },
            KeyForm::Public(enc) => decode_public(&raw, enc, &place, &from),
        };
        match secret {
            Ok(s) => out.push(s),
            Err(e) => d.issue(scope, e),
        }
    }
    out
}

fn custom(c: &Map<String, Value>, scope: &Scope, d: &mut Diags) -> Option<Custom> {
    unknown_fields(
        c,
        &[
            "header",
            "prefix",
            "encoding",
            "algorithm",
            "timestamp_header",
            "timestamp_unit",
            "signed",
        ],
        scope,
        d,
    );
    let header = |name: &str, d: &mut Diags| -> Option<String> {
        match field(c, name) {
            Some(Value::String(h)) => key_header(h)
                .map_err(|e| d.issue(scope, e.within(&format!("scheme {name}"))))
                .ok(),
            None => None,
            Some(other) => {
                d.push(
                    scope,
                    "bad_scheme",
                    format!("scheme {name} must be a header name, got {}", kind(other)),
                );
                None
            }
        }
    };
    let sig_header = header("header", d);
    if field(c, "header").is_none() {
        d.push(scope, "bad_scheme", "a custom scheme needs header");
    }
    let timestamp_header = header("timestamp_header", d);
    let prefix = match field(c, "prefix") {
        None => String::new(),
        Some(Value::String(p)) => p.clone(),
        Some(other) => {
            d.push(
                scope,
                "bad_scheme",
                format!("scheme prefix must be a string, got {}", kind(other)),
            );
            String::new()
        }
    };
    let encoding = match field(c, "encoding").map(Value::as_str) {
        Some(Some("hex")) => Some(Encoding::Hex),
        Some(Some("base64")) => Some(Encoding::Base64),
        _ => {
            d.push(
                scope,
                "bad_scheme",
                "scheme encoding must be \"hex\" or \"base64\"",
            );
            None
        }
    };
    let algorithm = match field(c, "algorithm").map(Value::as_str) {
        None | Some(Some("sha256")) => Some(Algorithm::Sha256),
        Some(Some("sha512")) => Some(Algorithm::Sha512),
        Some(Some("sha1")) => Some(Algorithm::Sha1),
        Some(Some("ed25519")) => Some(Algorithm::Ed25519),
        Some(_) => {
            d.push(
                scope,
                "bad_scheme",
                "scheme algorithm must be \"sha256\", \"sha512\", \"sha1\" or \"ed25519\"",
            );
            None
        }
    };
    let timestamp_ms = match field(c, "timestamp_unit").map(Value::as_str) {
        None | Some(Some("s")) => false,
        Some(Some("ms")) => true,
        Some(_) => {
            d.push(
                scope,
                "bad_scheme",
                "scheme timestamp_unit must be \"s\" (the default) or \"ms\"",
            );
            false
        }
    };
    let signed = match field(c, "signed") {
        None => Some(vec![verify::Part::Body]),
        Some(Value::String(t)) => {
            within("bytes of the signed template", MAX_TEMPLATE_BYTES, t.len())
                .and_then(|()| template(t))
                .map_err(|e| d.issue(scope, e))
                .ok()
        }
        Some(other) => {
            d.push(
                scope,
                "bad_scheme",
                format!(
                    "scheme signed must be a template string, got {}",
                    kind(other)
                ),
            );
            None
        }
    };
    if let Some(parts) = &signed {
        let uses_ts = parts.contains(&verify::Part::Timestamp);
        if uses_ts && timestamp_header.is_none() {
            d.push(
                scope,
                "timestamp_without_header",
                "the signed template uses {timestamp}: set timestamp_header",
            );
        }
        // A timestamp no signature covers: a day-old signature would pass
        // with a fresh header.
        if timestamp_header.is_some() && !uses_ts {
            d.push(
                scope,
                "unsigned_timestamp",
                "timestamp_header is set but the signed template has no {timestamp}: the signature would not cover the timestamp checked against tolerance_s",
            );
        }
    }
    Some(Custom {
        header: sig_header?,
        prefix,
        encoding: encoding?,
        algorithm: algorithm?,
        timestamp_header,
        timestamp_ms,
        signed: signed?,
    })
}

/// Decodes a `whsec_` secret as Standard Webhooks' libraries do: the
/// prefix optional, the base64 padding too; `None` when it is not base64.
fn decode_whsec(value: &str) -> Option<Vec<u8>> {
    lenient_base64(value.strip_prefix("whsec_").unwrap_or(value))
}

/// Base64 with its padding optional; `None` when it is not base64 or empty.
fn lenient_base64(b64: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(b64.trim()).ok().filter(|k| !k.is_empty())
}

/// An Ed25519 public key written in `enc` (Discord's: hex), with a word
/// for a key written in the other encoding.
fn decode_public(raw: &str, enc: Encoding, place: &str, from: &str) -> Result<Secret, Issue> {
    let raw = raw.trim();
    let as_hex = || hex::decode(raw).ok();
    let (bytes, other) = match enc {
        Encoding::Hex => (as_hex(), lenient_base64(raw).filter(|_| as_hex().is_none())),
        Encoding::Base64 => (
            lenient_base64(raw).filter(|_| raw.len() != 64 || as_hex().is_none()),
            as_hex(),
        ),
    };
    let (name, other_name) = match enc {
        Encoding::Hex => ("hex", "base64"),
        Encoding::Base64 => ("base64", "hex"),
    };
    match bytes {
        Some(k) => public_key(k, place, from),
        None if other.as_ref().is_some_and(|k| k.len() == 32) => Err(Issue::new(
            "key_encoding",
            format!("{place}: {from} is a {other_name} public key, but the scheme's keys are {name} (a custom scheme's key is in its encoding)"),
        )),
        None => Err(Issue::new(
            "bad_public_key",
            format!("{place}: {from} is not an Ed25519 public key in {name} (32 bytes)"),
        )),
    }
}

/// 32 bytes that are an Ed25519 public key, and not a weak (small-order)
/// one, which any signature would verify under.
fn public_key(bytes: Vec<u8>, place: &str, from: &str) -> Result<Secret, Issue> {
    let n = bytes.len();
    let Ok(arr) = <[u8; 32]>::try_from(bytes.as_slice()) else {
        return Err(Issue::new(
            "bad_public_key",
            format!("{place}: {from} is {n} bytes: an Ed25519 public key is 32"),
        ));
    };
    match ed25519_dalek::VerifyingKey::from_bytes(&arr) {
        Ok(k) if !k.is_weak() => Ok(Secret(bytes, Key::Ed25519(k))),
        Ok(_) => Err(Issue::new(
            "bad_public_key",
            format!(
                "{place}: {from} is a weak (small-order) Ed25519 key, which anyone can sign for"
            ),
        )),
        Err(_) => Err(Issue::new(
            "bad_public_key",
            format!("{place}: {from} is not an Ed25519 public key (not a point of the curve)"),
        )),
    }
}

/// An environment variable's name, and not a secret's value in its place.
fn env_name_ok(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.starts_with("whsec_")
        && name.len() <= 128
}

fn bad_template(message: String) -> Issue {
    Issue::new("bad_template", message)
}

/// Parses a signed-content template: text with `{timestamp}`,
/// `{header:NAME}`, `{method}`, `{url}`, `{path}` and `{query}`
/// placeholders, and `{body}` once, anywhere.
fn template(t: &str) -> Result<Vec<verify::Part>, Issue> {
    let mut parts = Vec::new();
    let mut rest = t;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            parts.push(verify::Part::Text(rest[..open].to_owned()));
        }
        let close = rest[open..]
            .find('}')
            .ok_or_else(|| bad_template(format!("signed template {t:?} has an unclosed {{")))?;
        let name = &rest[open + 1..open + close];
        parts.push(match name {
            "timestamp" => verify::Part::Timestamp,
            "method" => verify::Part::Method,
            "url" => verify::Part::Url,
            "path" => verify::Part::Path,
            "query" => verify::Part::Query,
            "body" => verify::Part::Body,
            _ => match name.strip_prefix("header:") {
                Some(h) if !h.is_empty() => verify::Part::Header(h.to_ascii_lowercase()),
                _ => {
                    return Err(bad_template(format!(
                        "signed template {t:?}: unknown placeholder {{{name}}} (known: {{timestamp}}, {{header:NAME}}, {{method}}, {{url}}, {{path}}, {{query}}, {{body}})"
                    )))
                }
            },
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(verify::Part::Text(rest.to_owned()));
    }
    if parts.iter().filter(|p| **p == verify::Part::Body).count() != 1 {
        return Err(bad_template(format!(
            "signed template {t:?} must have {{body}} exactly once (a signature that does not cover the body would pass any body)"
        )));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Part;

    #[test]
    fn templates() {
        assert_eq!(
            template("v0:{timestamp}:{body}").unwrap(),
            vec![
                Part::Text("v0:".into()),
                Part::Timestamp,
                Part::Text(":".into()),
                Part::Body
            ]
        );
        assert_eq!(
            template("{header:X-Id}.{body}").unwrap(),
            vec![
                Part::Header("x-id".into()),
                Part::Text(".".into()),
                Part::Body
            ]
        );
        assert_eq!(
            template("{method}{url}{body}{timestamp}").unwrap(),
            vec![Part::Method, Part::Url, Part::Body, Part::Timestamp]
        );
        assert!(template("{path}?{query}").is_err());
        assert!(template("{body}{body}").is_err());
        assert!(template("{nope}{body}").is_err());
    }

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
