//! Checks a source's `verify` object. A secret's value never appears in an
//! error or a warning: only the variable it came from, or its place.

use super::bounds::{within, MAX_SECRETS, MAX_TEMPLATE_BYTES, MAX_TENANTS};
use super::diag::{Diags, Issue, Scope};
use super::fields::{field, key_header, unknown_fields, Env};
use super::{tenant_ok, Routing};
use crate::verify::{
    self, Algorithm, Custom, Encoding, OnFailure, Scheme, Secret, Secrets, Verify,
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
        &["scheme", "secrets", "tolerance_s", "on_failure"],
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
    let whsec = scheme.as_ref().is_some_and(Scheme::decodes_whsec);
    let secrets = match field(obj, "secrets") {
        None => {
            d.push(
                scope,
                "missing_secrets",
                "secrets is required: a list of {\"env\": NAME} (or {\"value\": ...})",
            );
            None
        }
        Some(Value::Array(list)) => Some(Secrets::All(secret_list(
            list, "secrets", whsec, scope, env, d,
        ))),
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
                        secret_list(l, &format!("secrets.{t}"), whsec, scope, env, d),
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
        let bytes = if whsec {
            match decode_whsec(&raw) {
                Some(k) => k,
                None => {
                    d.push(
                        scope,
                        "not_whsec",
                        format!("{place}: {from} is not a whsec_ secret (whsec_ and base64)"),
                    );
                    continue;
                }
            }
        } else {
            raw.into_bytes()
        };
        out.push(Secret(bytes));
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
        Some(_) => {
            d.push(
                scope,
                "bad_scheme",
                "scheme algorithm must be \"sha256\", \"sha512\" or \"sha1\"",
            );
            None
        }
    };
    let signed = match field(c, "signed") {
        None => Some(Vec::new()),
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
        signed: signed?,
    })
}

/// Decodes a `whsec_` secret as Standard Webhooks' libraries do: the
/// prefix optional, the base64 padding too; `None` when it is not base64.
fn decode_whsec(value: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let b64 = value.strip_prefix("whsec_").unwrap_or(value);
    LENIENT.decode(b64).ok().filter(|k| !k.is_empty())
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

/// Parses a signed-content template: text with `{timestamp}` and
/// `{header:NAME}` placeholders, ending in `{body}`.
fn template(t: &str) -> Result<Vec<verify::Part>, Issue> {
    let Some(before) = t.strip_suffix("{body}") else {
        return Err(bad_template(format!(
            "signed template {t:?} must end with {{body}} (the body is signed last, as it streams)"
        )));
    };
    let mut parts = Vec::new();
    let mut rest = before;
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
            _ => match name.strip_prefix("header:") {
                Some(h) if !h.is_empty() => verify::Part::Header(h.to_ascii_lowercase()),
                _ => {
                    return Err(bad_template(format!(
                        "signed template {t:?}: unknown placeholder {{{name}}} (known: {{timestamp}}, {{header:NAME}}, {{body}} at the end)"
                    )))
                }
            },
        });
        rest = &rest[open + close + 1..];
    }
    if !rest.is_empty() {
        parts.push(verify::Part::Text(rest.to_owned()));
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
                Part::Text(":".into())
            ]
        );
        assert_eq!(
            template("{header:X-Id}.{body}").unwrap(),
            vec![Part::Header("x-id".into()), Part::Text(".".into())]
        );
        assert!(template("{body}.{timestamp}").is_err());
        assert!(template("{nope}{body}").is_err());
    }
}
