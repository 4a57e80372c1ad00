//! Why a hook went where it did: the route decision, what became of the
//! body, the signature, and for the dedupe key and every lane where the key
//! was looked for, what was found, and what became of it. The native
//! harness's `hookstamp explain`: it renders the one decision
//! (`decide::decide`) in words, adding only descriptions (the form fields a
//! body has, what a JSON path stops at).

use crate::config::{Config, Source};
use crate::decide::{self, Body, Decision, Outcome};
use crate::dedupe::MAX_DEDUPE_KEY;
use crate::key::{BodyState, KeySource, Missing};
use crate::lanes::MAX_LANE_KEY;
use crate::route::{Route, Target};
use crate::stamps;
use crate::verify::Reason;
use serde_json::Value;

/// The explanation of one request, a line each.
pub fn explain<N, V>(
    cfg: &Config,
    method: &str,
    path: &str,
    headers: &[(N, V)],
    body: &[u8],
    now_s: u64,
) -> Vec<String>
where
    N: AsRef<str>,
    V: AsRef<[u8]>,
{
    let mut out = Vec::new();
    let decision = decide::decide(cfg, method, path, headers, body, now_s);
    let (src, tenant) = match &decision.route {
        Route::Pass => {
            out.push(format!(
                "route: {method} {path} passes untouched: {}",
                if crate::path::under(path, &cfg.prefix_view) {
                    "GET and HEAD under the prefix are endpoint checks"
                } else {
                    "no reading of the path is under the prefix"
                }
            ));
            return out;
        }
        Route::MethodNotAllowed => {
            out.push(format!("route: {method} under the prefix: answered 405 (only POST is stamped; GET and HEAD pass)"));
            return out;
        }
        Route::UnknownSource => {
            out.push(format!(
                "route: {path} is under the prefix but is not a canonical path to a source: answered 404"
            ));
            return out;
        }
        Route::Source(Target { source, tenant, .. }) => (*source, *tenant),
    };
    out.push(format!(
        "route: {method} {path}: source '{}', tenant '{tenant}'",
        src.id
    ));
    out.push(body_line(cfg, src, body, &decision));
    if let Outcome::Reply(r) = &decision.outcome {
        out.push(format!(
            "signature: {}: refused, answered {} {}",
            signature_words(decision.signature),
            r.status,
            r.body
        ));
        return out;
    }
    let Outcome::Forward { stamped, .. } = &decision.outcome else {
        return out;
    };
    let stamp = |name: &str| {
        stamped
            .headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    };
    match decision.signature {
        None => {}
        Some(Ok(())) => out.push("signature: verified".to_owned()),
        Some(r @ Err(_)) => out.push(format!(
            "signature: {} (flag mode): forwarded without its dedupe key",
            signature_words(Some(r))
        )),
    }
    let json = serde_json::from_slice::<Value>(body).ok();
    let detail = |k: &KeySource, why: Missing| missing_detail(src, k, why, json.as_ref());
    match &src.dedupe {
        None => out
            .push("dedupe: none configured (a provider's retry looks like a new event)".to_owned()),
        Some(d) => out.push(
            match (stamp(stamps::DEDUPE_KEY), stamped.dedupe_key_missing) {
                (Some(v), _) => format!(
                    "dedupe key: {} → {}",
                    describe(src, &d.key),
                    became(&v, stamped.dedupe_key_hashed, MAX_DEDUPE_KEY)
                ),
                (None, Some(why)) => {
                    format!(
                        "dedupe key: {} → none ({}): {}",
                        describe(src, &d.key),
                        why.as_str(),
                        detail(&d.key, why)
                    )
                }
                (None, None) => "dedupe key: not stamped (the signature did not verify)".to_owned(),
            },
        ),
    }
    for lane in &src.lanes {
        let [_, key_name, _] = &lane.names;
        let line = match (&lane.key, stamp(key_name)) {
            (None, _) => format!(
                "lane of sink {}: no ordering_key: the keyless lane",
                lane.sink
            ),
            (Some(k), Some(v)) if !v.is_empty() => {
                format!(
                    "lane of sink {}: {} → {}",
                    lane.sink,
                    describe(src, k),
                    became(
                        &v,
                        stamped.lane_keys_hashed.contains(&lane.sink),
                        MAX_LANE_KEY
                    )
                )
            }
            (Some(k), _) => {
                let why = stamped
                    .lane_keys_missing
                    .iter()
                    .find(|(s, _)| *s == lane.sink)
                    .map_or(Missing::Absent, |(_, w)| *w);
                format!(
                    "lane of sink {}: {} → none ({}): {}; the keyless lane (counted)",
                    lane.sink,
                    describe(src, k),
                    why.as_str(),
                    detail(k, why)
                )
            }
        };
        out.push(line);
    }
    if let Some(a) = stamp(stamps::AFFINITY) {
        out.push(format!(
            "affinity: {a} ({:?})",
            src.affinity.unwrap_or(crate::affinity::Affinity::Source)
        ));
    }
    out
}

fn body_line(cfg: &Config, src: &Source, body: &[u8], decision: &Decision) -> String {
    if !src.needs_body() {
        return "body: not read (the source's keys come from headers)".to_owned();
    }
    let n = body.len();
    if matches!(decision.body, Some(Body::OverLimit)) {
        return format!(
            "body: {n} bytes, over max_json_bytes ({}): never read, JSON keys missing",
            cfg.max_json_bytes
        );
    }
    let Outcome::Forward { stamped, .. } = &decision.outcome else {
        return format!("body: {n} bytes");
    };
    match stamped.body {
        BodyState::Unread => format!("body: {n} bytes, read for its signature only"),
        BodyState::OverLimit => format!("body: {n} bytes, over max_json_bytes"),
        BodyState::Form => {
            let names: Vec<String> = crate::form::form_fields(body)
                .iter()
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                .collect();
            format!(
                "body: {n} bytes, form-encoded, fields: {}",
                names.join(", ")
            )
        }
        BodyState::Json => format!("body: {n} bytes, JSON"),
        // Where the scanner that read it stopped.
        BodyState::NotJson => match crate::json::scan(body, &[]) {
            Err(e) if e.offset < n => {
                format!(
                    "body: {n} bytes, not valid JSON: the scan stops at byte {}",
                    e.offset
                )
            }
            _ => format!("body: {n} bytes, not valid JSON: it ends before its value does"),
        },
    }
}

/// A signature's result, in words.
fn signature_words(r: Option<Result<(), Reason>>) -> String {
    match r {
        None => "not checked".to_owned(),
        Some(Ok(())) => "verified".to_owned(),
        Some(Err(reason)) => format!("did not verify ({})", reason.as_str()),
    }
}

/// A key expression, as the configuration writes it.
fn describe(src: &Source, k: &KeySource) -> String {
    match k {
        KeySource::Header(i) => {
            format!("header {}", src.headers.get(*i).map_or("?", String::as_str))
        }
        KeySource::Json { path, integer } => {
            let p = src
                .paths
                .get(*path)
                .map(|p| path_text(p))
                .unwrap_or_default();
            format!("json {p}{}", if *integer { " (integers too)" } else { "" })
        }
        KeySource::Form(i) => format!(
            "form field {}",
            src.forms.get(*i).map_or("?", String::as_str)
        ),
        KeySource::BodySha256 => "the body's SHA-256".to_owned(),
        KeySource::First(ks) => {
            format!(
                "the first of ({})",
                ks.iter()
                    .map(|k| describe(src, k))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        KeySource::Concat(ks, sep) => format!(
            "({}) joined by {sep:?}",
            ks.iter()
                .map(|k| describe(src, k))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn path_text(p: &[String]) -> String {
    if p.iter().any(|s| s.contains('.')) {
        format!("{p:?}")
    } else {
        p.join(".")
    }
}

/// What became of a found key, from its stamped form.
fn became(stamped: &str, hashed: bool, max: usize) -> String {
    if hashed {
        return format!("hashed, as it was over {max} bytes: {stamped}");
    }
    if stamped.contains('%') {
        return format!("{stamped} (percent-encoded)");
    }
    format!("{stamped} (as is)")
}

/// Why a key is missing, in words: for a JSON path, where it stops.
fn missing_detail(src: &Source, k: &KeySource, why: Missing, json: Option<&Value>) -> String {
    let leaf = match k {
        KeySource::First(ks) | KeySource::Concat(ks, _) => match ks.first() {
            Some(first) => {
                return format!(
                    "{} (the first part's reason)",
                    missing_detail(src, first, why, json)
                )
            }
            None => return "nothing to look for".to_owned(),
        },
        other => other,
    };
    match (why, leaf) {
        (Missing::Absent, KeySource::Header(i)) => {
            format!(
                "no header {}",
                src.headers.get(*i).map_or("?", String::as_str)
            )
        }
        (Missing::Empty, KeySource::Header(_)) => "the header is empty".to_owned(),
        (
            Missing::Absent | Missing::WrongType | Missing::Empty,
            KeySource::Json { path, integer },
        ) => {
            let p = src.paths.get(*path).cloned().unwrap_or_default();
            match json {
                Some(v) => walk(v, &p, *integer),
                None => "the JSON was read from a form field".to_owned(),
            }
        }
        (Missing::NotJson, _) => "the body is not valid JSON (see the body line)".to_owned(),
        (Missing::OverLimit, _) => "the body was over max_json_bytes".to_owned(),
        (Missing::Unverified, _) => {
            "the signature did not verify: no key of the request is trusted".to_owned()
        }
        (Missing::NotForm, _) => "the body is not form-encoded (by its content-type)".to_owned(),
        (Missing::Absent, KeySource::Form(i)) => {
            format!(
                "no form field {}",
                src.forms.get(*i).map_or("?", String::as_str)
            )
        }
        (Missing::Empty, _) => "empty".to_owned(),
        _ => why.as_str().to_owned(),
    }
}

/// Follows a path through a decoded body: where it stops, or what is there.
fn walk(v: &Value, path: &[String], integer: bool) -> String {
    let mut cur = v;
    for (n, seg) in path.iter().enumerate() {
        let at = if n == 0 {
            "the body".to_owned()
        } else {
            path_text(&path[..n])
        };
        match cur {
            Value::Object(o) => match o.get(seg) {
                Some(next) => cur = next,
                None => return format!("{at} has no key {seg:?}"),
            },
            other => return format!("{at} is {} (paths go through objects only)", kind(other)),
        }
    }
    match cur {
        Value::String(s) if s.is_empty() => "the value is an empty string".to_owned(),
        Value::Number(n) if n.is_i64() || n.is_u64() => {
            if integer {
                "the value is an integer".to_owned()
            } else {
                "the value is an integer, which this key takes only with \"integer\": true"
                    .to_owned()
            }
        }
        other => format!("the value is {}", kind(other)),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a float",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
