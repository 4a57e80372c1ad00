//! A verify's `scheme`: a preset's name, or a custom scheme object and its
//! signed-content template.

use super::bounds::{within, MAX_TEMPLATE_BYTES};
use super::diag::{Diags, Issue, Scope};
use super::fields::{field, key_header, kind, shown, unknown_fields};
use crate::verify::{self, Algorithm, Custom, Encoding, Scheme};
use serde_json::{Map, Value};

/// The `scheme` field: a preset's name or a custom scheme object.
pub(super) fn scheme(v: Option<&Value>, scope: &Scope, d: &mut Diags) -> Option<Scheme> {
    match v {
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
                super::fields::did_you_mean(p, &Scheme::presets())
            };
            d.push(
                scope,
                "unknown_scheme",
                format!(
                    "unknown scheme {}{hint} (presets: {}; or a custom scheme object)",
                    shown(&v),
                    Scheme::presets().join(", ")
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
    }
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
    let sig_header = header(c, "header", scope, d);
    if field(c, "header").is_none() {
        d.push(scope, "bad_scheme", "a custom scheme needs header");
    }
    let timestamp_header = header(c, "timestamp_header", scope, d);
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
    let (encoding, algorithm, timestamp_ms) = forms(c, scope, d);
    let signed = signed(c, timestamp_header.is_some(), scope, d);
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

/// A custom scheme's header name (`header`, `timestamp_header`).
fn header(c: &Map<String, Value>, name: &str, scope: &Scope, d: &mut Diags) -> Option<String> {
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
}

/// A custom scheme's `encoding`, `algorithm` and `timestamp_unit` (whether
/// milliseconds).
fn forms(
    c: &Map<String, Value>,
    scope: &Scope,
    d: &mut Diags,
) -> (Option<Encoding>, Option<Algorithm>, bool) {
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
    (encoding, algorithm, timestamp_ms)
}

/// A custom scheme's `signed` template (the body alone by default), and
/// its timestamp against `timestamp_header`.
fn signed(
    c: &Map<String, Value>,
    has_timestamp_header: bool,
    scope: &Scope,
    d: &mut Diags,
) -> Option<Vec<verify::Part>> {
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
        if uses_ts && !has_timestamp_header {
            d.push(
                scope,
                "timestamp_without_header",
                "the signed template uses {timestamp}: set timestamp_header",
            );
        }
        // A timestamp no signature covers: a day-old signature would pass
        // with a fresh header.
        if has_timestamp_header && !uses_ts {
            d.push(
                scope,
                "unsigned_timestamp",
                "timestamp_header is set but the signed template has no {timestamp}: the signature would not cover the timestamp checked against tolerance_s",
            );
        }
    }
    signed
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
}
