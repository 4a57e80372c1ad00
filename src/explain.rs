//! Why a hook went where it did: the route decision, what became of the
//! body, the signature, and for the dedupe key and every lane where the key
//! was looked for, what was found, and what became of it. The native
//! harness's `hookstamp explain`: it renders the one decision
//! (`decide::decide`) in words, adding only descriptions (the form fields a
//! body has, what a JSON path stops at).

use crate::config::{Config, Source};
use crate::decide::{self, Body, Decision, Outcome};
use crate::dedupe::MAX_DEDUPE_KEY;
use crate::key::{self, BodyState, FormJson, KeySource, Missing};
use crate::lanes::MAX_LANE_KEY;
use crate::route::{Route, Target};
use crate::stamps;
use crate::verify::{Failure, Why};
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
        Route::Handshake(Target { source, tenant, .. }, r) => {
            let name = source.handshake.as_ref().map_or("", |h| h.name());
            out.push(format!(
                "route: {method} {path}: source '{}', tenant '{tenant}': the {name} handshake, answered {} {} ({})",
                source.id, r.status, r.body, r.details
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
    // What the keys were offered: the same reading the stamps made.
    let header_keys = decide::header_keys(src, headers);
    let hash = src.needs_body().then(|| crate::seal::body_hash(body));
    let limited = Body::for_source(body, src, cfg.max_json_bytes);
    let offered = decide::offered(src, &header_keys, limited, hash);
    let values = offered.values();
    if let Outcome::Reply(r) = &decision.outcome {
        if r.details == crate::reply::DROPPED.details {
            let t = src
                .event_type
                .as_ref()
                .and_then(|k| decide::event_type(k, &values))
                .map(|t| String::from_utf8_lossy(&t).into_owned())
                .unwrap_or_default();
            let what = format!("events: {t:?} is dropped by the source's events rule");
            return answered(out, src, &decision, r, what);
        }
        if r.details.starts_with("hookstamp.handshake") {
            let name = src.handshake.as_ref().map_or("", |h| h.name());
            let what = format!("handshake: the {name} handshake");
            return answered(out, src, &decision, r, what);
        }
        out.push(format!(
            "signature: {}: refused, answered {} {} ({})",
            signature_words(src, decision.signature.as_ref()),
            r.status,
            r.body,
            r.details
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
    match &decision.signature {
        None => {}
        Some(Ok(())) => out.push(format!(
            "signature: {}",
            signature_words(src, decision.signature.as_ref())
        )),
        Some(Err(_)) => out.push(format!(
            "signature: {} (flag mode): forwarded without its dedupe key, every lane keyless",
            signature_words(src, decision.signature.as_ref())
        )),
    }
    let json = json_read(src, offered.state, body);
    let detail = |k: &KeySource, why: Missing| {
        missing_detail(src, k, why, json.as_ref(), offered.state, &values)
    };
    if let Some(et) = &src.event_type {
        out.push(
            match (stamp(stamps::EVENT_TYPE), stamped.event_type_missing) {
                (Some(v), _) => format!(
                    "event type: {} → {}",
                    describe(src, et),
                    became(&v, false, 0)
                ),
                (None, Some(why)) => format!(
                    "event type: {} → none ({}): {}; kept",
                    describe(src, et),
                    why.as_str(),
                    detail(et, why)
                ),
                (None, None) => format!("event type: {} → none", describe(src, et)),
            },
        );
    }
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
                    "lane of sink {}: {} → {}{}",
                    lane.sink,
                    describe(src, k),
                    became(
                        &v,
                        stamped.lane_keys_hashed.contains(&lane.sink),
                        MAX_LANE_KEY
                    ),
                    group_note(lane, stamped)
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
        let of = match src.affinity.unwrap_or(crate::affinity::Affinity::Source) {
            crate::affinity::Affinity::Lane(i) => format!("the lane of sink {i}"),
            crate::affinity::Affinity::Dedupe => "the event (its dedupe key)".to_owned(),
            crate::affinity::Affinity::Source => "the source".to_owned(),
        };
        out.push(format!("affinity: {a} (of {of})"));
    }
    out
}

fn body_line(cfg: &Config, src: &Source, body: &[u8], decision: &Decision) -> String {
    if src.streams() {
        return format!(
            "body: {} bytes, streamed through, its signature checked as it passes (mode stream)",
            body.len()
        );
    }
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
        BodyState::Form(how) => {
            let names: Vec<String> = crate::form::form_fields(body)
                .iter()
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                .collect();
            let field = src.form_json.as_deref().unwrap_or_default();
            let json = match how {
                _ if src.paths.is_empty() => String::new(),
                FormJson::Body => "; the JSON paths read the body itself, valid JSON".to_owned(),
                FormJson::Field => format!("; the JSON paths read the field {field}"),
                FormJson::NoField => format!("; no field {field} for the JSON paths to read"),
                FormJson::NotJson if src.form_json.is_some() => {
                    format!("; the field {field} is not valid JSON")
                }
                FormJson::NotJson => {
                    "; the body is not valid JSON for the JSON paths (no form_json field is configured)"
                        .to_owned()
                }
            };
            format!(
                "body: {n} bytes, form-encoded (by its content-type), fields: {}{json}",
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

/// An answer of the filter's own that refuses nothing (a handshake, a
/// dropped event): the signature's line where it was checked, then what
/// was answered.
fn answered(
    mut out: Vec<String>,
    src: &Source,
    decision: &Decision,
    r: &crate::reply::Reply,
    what: String,
) -> Vec<String> {
    if decision.signature.is_some() {
        out.push(format!(
            "signature: {}",
            signature_words(src, decision.signature.as_ref())
        ));
    }
    out.push(format!(
        "{what}, answered {} {} ({}); nothing reaches the queue",
        r.status, r.body, r.details
    ));
    out
}

/// A signature's result, in words: the scheme, and for a failure which
/// header and which part failed.
fn signature_words(src: &Source, r: Option<&Result<(), Failure>>) -> String {
    let scheme = src.verify.as_ref().map(|v| &v.scheme);
    let name = scheme.map_or("none", |s| s.name());
    let header = scheme.map_or("", |s| s.signature_header());
    let Some(r) = r else {
        return "not checked".to_owned();
    };
    let Err(f) = r else {
        return format!("verified ({name}, {header})");
    };
    let story = match &f.why {
        Why::NoHeader(h) => format!("the header {h} is absent"),
        Why::NotText(h) => format!("the header {h} is not text (not UTF-8)"),
        Why::Form { header, expected } => {
            format!("the header {header} is malformed: expected {expected}")
        }
        Why::Unsupported { header, versions } => format!(
            "the header {header} carries only signature versions {name} does not check here: {}",
            versions.join(", ")
        ),
        Why::NotANumber(h) => format!("the timestamp in {h} is not a whole number of seconds"),
        Why::Skew {
            header,
            skew_s,
            tolerance_s,
        } => {
            let (n, way) = if *skew_s < 0 {
                (skew_s.unsigned_abs(), "old")
            } else {
                (skew_s.unsigned_abs(), "in the future")
            };
            format!(
                "the timestamp in {header} is {n} s {way}, over the tolerance of {tolerance_s} s"
            )
        }
        Why::Mismatch {
            signatures,
            secrets,
        } => {
            let sigs = match signatures {
                1 => format!("the signature in {header}"),
                n => format!("none of the {n} signatures in {header}"),
            };
            match (signatures, secrets) {
                (_, 0) => "no secret is configured for this tenant".to_owned(),
                (1, 1) => format!("{sigs} does not match the HMAC under the secret"),
                (1, m) => {
                    format!("{sigs} matches the HMAC under none of the {m} secrets, each tried")
                }
                (_, 1) => format!("{sigs} matches the HMAC under the secret"),
                (_, m) => {
                    format!("{sigs} matches the HMAC under any of the {m} secrets, each tried")
                }
            }
        }
        Why::NoMatch {
            hmac_signatures,
            secrets,
            ed25519_signatures,
            public_keys,
        } => {
            let kinds = [
                ("HMAC", *hmac_signatures, "secret", *secrets),
                ("Ed25519", *ed25519_signatures, "public key", *public_keys),
            ];
            let told: Vec<String> = kinds
                .iter()
                .filter(|(_, sigs, _, keys)| sigs + keys > 0)
                .map(|(kind, sigs, key, keys)| match (sigs, keys) {
                    (0, n) => format!("no {kind} signature in {header} for the {n} {key}(s)"),
                    (n, 0) => format!("{n} {kind} signature(s) in {header} but no {key}"),
                    (1, 1) => format!("the {kind} signature in {header} does not verify under the {key}"),
                    (n, m) => format!(
                        "{n} {kind} signature(s) in {header}, none valid under any of the {m} {key}s, each tried"
                    ),
                })
                .collect();
            if told.is_empty() {
                "no signature and no key to check it with".to_owned()
            } else {
                told.join("; ")
            }
        }
        Why::BodyHash => {
            "the URL's bodySHA256 is not the SHA-256 of the body (the body was changed)".to_owned()
        }
        Why::TokenBody => "the body could be a CRC token (at most 256 token characters), which this source's CRC handshake signs for anyone: never verified".to_owned(),
        Why::OverLimit => "the body is over max_json_bytes: never verified".to_owned(),
    };
    format!("did not verify ({name}): {story} [{}]", f.reason.as_str())
}

/// The JSON the source's paths read, decoded (the body itself, or its
/// `form_json` field), where it is valid.
fn json_read(src: &Source, state: BodyState, body: &[u8]) -> Option<Value> {
    match state {
        BodyState::Json | BodyState::Form(FormJson::Body) => serde_json::from_slice(body).ok(),
        BodyState::Form(FormJson::Field) => {
            let name = src.form_json.as_deref()?;
            let fields = crate::form::form_fields(body);
            let (_, v) = fields.iter().find(|(k, _)| k == name.as_bytes())?;
            serde_json::from_slice(v).ok()
        }
        _ => None,
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

/// Where a lane's group was hashed to fit its sink's broker.
fn group_note(lane: &crate::lanes::Lane, stamped: &decide::Stamped) -> String {
    match lane.group_max {
        Some(max) if stamped.lane_groups_hashed.contains(&lane.sink) => format!(
            "; its group hashed, as the stamped key is over the {max} characters the sink's broker takes"
        ),
        _ => String::new(),
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

/// Why a key is missing, in words: for a JSON path, where it stops; for
/// `first` and `concat`, every part's reason.
fn missing_detail(
    src: &Source,
    k: &KeySource,
    why: Missing,
    json: Option<&Value>,
    state: BodyState,
    values: &key::Values<'_, '_>,
) -> String {
    if let KeySource::First(_) | KeySource::Concat(..) = k {
        if why == Missing::Unverified {
            return leaf_detail(src, k, why, json, state);
        }
        let parts: Vec<String> = key::parts(k, values)
            .into_iter()
            .map(|(p, miss)| match miss {
                None => format!("{}: found", describe(src, p)),
                Some(w) => format!(
                    "{}: {} ({})",
                    describe(src, p),
                    w.as_str(),
                    missing_detail(src, p, w, json, state, values)
                ),
            })
            .collect();
        let how = if matches!(k, KeySource::First(_)) {
            "no alternative gave a key"
        } else {
            "a part is missing"
        };
        return format!("{how}: {}", parts.join("; "));
    }
    leaf_detail(src, k, why, json, state)
}

fn leaf_detail(
    src: &Source,
    k: &KeySource,
    why: Missing,
    json: Option<&Value>,
    state: BodyState,
) -> String {
    match (why, k) {
        (Missing::Absent, KeySource::Header(i)) => {
            format!(
                "no header {}",
                src.headers.get(*i).map_or("?", String::as_str)
            )
        }
        (Missing::Empty, KeySource::Header(_)) => "the header is empty".to_owned(),
        (Missing::Absent, KeySource::Json { .. })
            if state == BodyState::Form(FormJson::NoField) =>
        {
            format!(
                "the form has no field {} for the JSON paths",
                src.form_json.as_deref().unwrap_or_default()
            )
        }
        (
            Missing::Absent | Missing::WrongType | Missing::Empty,
            KeySource::Json { path, integer },
        ) => {
            let p = src.paths.get(*path).cloned().unwrap_or_default();
            match json {
                Some(v) => walk(v, &p, *integer),
                None => why.as_str().to_owned(),
            }
        }
        (Missing::NotJson, _) => {
            "the JSON the paths read is not valid (see the body line)".to_owned()
        }
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
        (Missing::Absent, KeySource::BodySha256) => "the body was not seen whole".to_owned(),
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
