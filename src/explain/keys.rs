//! The stamps of a forwarded request in words: for its event type, its
//! dedupe key and every lane where a key was looked for, what was found
//! and what became of it, or why it is missing (where a JSON path stops,
//! every alternative's and part's reason); and its affinity.

use crate::affinity::Affinity;
use crate::config::Source;
use crate::decide::{Decision, Stamped};
use crate::dedupe::MAX_DEDUPE_KEY;
use crate::key::{self, BodyState, FormJson, KeySource, Missing};
use crate::lanes::{GroupScope, Lane, MAX_LANE_KEY};
use crate::stamps;
use serde_json::Value;

/// What the key lines are read from: the source, the stamps, and what the
/// keys were offered (the same reading the stamps made, from the
/// decision's facts), decoded where a JSON path is to be followed.
struct Keys<'a, 'v> {
    src: &'a Source,
    stamped: &'a Stamped<'a>,
    values: &'v key::Values<'v, 'a>,
    json: Option<Value>,
}

impl Keys<'_, '_> {
    /// A stamp's value, as stamped.
    fn stamp(&self, name: &str) -> Option<String> {
        self.stamped
            .headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.to_string())
    }

    /// Why a key is missing, in words.
    fn detail(&self, k: &KeySource, why: Missing) -> String {
        let state = self.values.body;
        missing_detail(self.src, k, why, self.json.as_ref(), state, self.values)
    }
}

/// The lines of a forwarded request's keys: its event type, its dedupe
/// key, each lane, its affinity.
pub(super) fn lines(
    out: &mut Vec<String>,
    src: &Source,
    body: &[u8],
    decision: &Decision,
    stamped: &Stamped,
) {
    let Some(limited) = decision.body else {
        return;
    };
    let offered = crate::decide::offered(src, &decision.header_keys, limited, decision.body_hash);
    let values = offered.values();
    let k = Keys {
        src,
        stamped,
        values: &values,
        json: json_read(src, offered.state, body),
    };
    if let Some(et) = &src.event_type {
        out.push(event_type_line(&k, et));
    }
    out.push(dedupe_line(&k));
    for lane in &src.lanes {
        out.push(lane_line(&k, lane));
    }
    if let Some(a) = k.stamp(stamps::AFFINITY) {
        let of = match src.affinity.unwrap_or(Affinity::Source) {
            Affinity::Lane(i) => format!("the lane of sink {i}"),
            Affinity::Dedupe => "the event (its dedupe key)".to_owned(),
            Affinity::Source => "the source".to_owned(),
        };
        out.push(format!("affinity: {a} (of {of})"));
    }
}

fn event_type_line(k: &Keys, et: &KeySource) -> String {
    let src = k.src;
    match (k.stamp(stamps::EVENT_TYPE), k.stamped.event_type_missing) {
        (Some(v), _) => format!(
            "event type: {} → {}",
            describe(src, et),
            became(&v, false, 0)
        ),
        (None, Some(why)) => format!(
            "event type: {} → none ({}): {}; kept",
            describe(src, et),
            why.as_str(),
            k.detail(et, why)
        ),
        (None, None) => format!("event type: {} → none", describe(src, et)),
    }
}

fn dedupe_line(k: &Keys) -> String {
    let (src, stamped) = (k.src, k.stamped);
    let Some(d) = &src.dedupe else {
        return "dedupe: none configured (a provider's retry looks like a new event)".to_owned();
    };
    match (k.stamp(stamps::DEDUPE_KEY), stamped.dedupe_key_missing) {
        (Some(v), _) => format!(
            "dedupe key: {} → {}",
            describe(src, &d.key),
            became(&v, stamped.dedupe_key_hashed, MAX_DEDUPE_KEY)
        ),
        (None, Some(why)) => format!(
            "dedupe key: {} → none ({}): {}",
            describe(src, &d.key),
            why.as_str(),
            k.detail(&d.key, why)
        ),
        (None, None) => "dedupe key: not stamped (the signature did not verify)".to_owned(),
    }
}

fn lane_line(k: &Keys, lane: &Lane) -> String {
    let (src, stamped) = (k.src, k.stamped);
    let [_, key_name, _] = &lane.names;
    match (&lane.key, k.stamp(key_name)) {
        (None, _) => format!(
            "lane of sink {}: no ordering_key: the keyless lane",
            lane.sink
        ),
        (Some(key), Some(v)) if !v.is_empty() => format!(
            "lane of sink {}: {} → {}{}",
            lane.sink,
            describe(src, key),
            became(
                &v,
                stamped.lane_keys_hashed.contains(lane.sink),
                MAX_LANE_KEY
            ),
            group_note(lane, stamped)
        ),
        (Some(key), _) => {
            let why = stamped
                .lane_keys_missing
                .iter()
                .find(|(s, _)| *s == lane.sink)
                .map_or(Missing::Absent, |(_, w)| *w);
            format!(
                "lane of sink {}: {} → none ({}): {}; the keyless lane (counted)",
                lane.sink,
                describe(src, key),
                why.as_str(),
                k.detail(key, why)
            )
        }
    }
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
fn group_note(lane: &Lane, stamped: &Stamped) -> String {
    let group = match lane.group_scope {
        GroupScope::Key => "the stamped key",
        GroupScope::Tenant => "k:<tenant>/<stamped key> (group_scope tenant)",
    };
    match lane.group_max {
        Some(max) if stamped.lane_groups_hashed.contains(lane.sink) => format!(
            "; its group hashed, as {group} is over the {max} characters the sink's broker takes"
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
