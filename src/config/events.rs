//! A source's `event_type` (a key expression, or inherited from its
//! preset) and `events` (`{"accept": [...]}` or `{"drop": [...]}`).

use super::bounds::within;
use super::diag::{Diags, Scope};
use super::fields::{field, unknown_fields};
use super::keys::KeyCtx;
use super::reads::Reads;
use crate::events::{Events, Pattern};
use crate::key::KeySource;
use crate::providers::{self, EventType};
use serde_json::Value;

/// The most patterns one rule lists, and the longest pattern.
pub const MAX_PATTERNS: usize = 64;
pub const MAX_PATTERN_BYTES: usize = 128;

/// The source's event type: its own `event_type`, else its preset's where
/// reading it costs no hold (a header, or the body of a source that holds
/// it anyway); `"event_type": "none"` turns the preset's off.
pub(super) fn event_type(
    obj: &serde_json::Map<String, Value>,
    preset: Option<&str>,
    holds_body: bool,
    reads: &mut Reads,
    scope: &Scope,
    d: &mut Diags,
) -> Option<KeySource> {
    match field(obj, "event_type") {
        Some(Value::String(s)) if s == "none" => None,
        Some(Value::Object(o)) => {
            let ctx = KeyCtx {
                integers: false,
                header_ok: &|_| Ok(()),
            };
            super::keys::expr_in("event_type", o, &ctx, reads, scope, d)
        }
        Some(other) => {
            d.push(
                scope,
                "bad_event_type",
                format!(
                    "event_type must be a key ({}) or \"none\", got {other}",
                    super::keys::FORMS
                ),
            );
            None
        }
        None => match providers::find(preset?)?.event_type.as_ref()? {
            EventType::Header(h) => Some(reads.header((*h).to_owned())),
            EventType::Json(paths) if holds_body => {
                let mut alts: Vec<KeySource> = paths
                    .iter()
                    .map(|p| reads.path(p.iter().map(|s| (*s).to_owned()).collect(), false))
                    .collect();
                Some(if alts.len() == 1 {
                    alts.remove(0)
                } else {
                    KeySource::First(alts)
                })
            }
            EventType::Json(_) => None,
        },
    }
}

/// The source's `events` rule; it needs an event type.
pub(super) fn events(v: &Value, has_type: bool, scope: &Scope, d: &mut Diags) -> Option<Events> {
    let Value::Object(o) = v else {
        d.push(
            scope,
            "bad_events",
            "events must be {\"accept\": [pattern, ...]} or {\"drop\": [pattern, ...]}",
        );
        return None;
    };
    unknown_fields(o, &["accept", "drop"], scope, d);
    let (accept, list) = match (field(o, "accept"), field(o, "drop")) {
        (Some(l), None) => (true, l),
        (None, Some(l)) => (false, l),
        _ => {
            d.push(
                scope,
                "bad_events",
                "events takes one of accept or drop, a list of event types (a trailing * matches a prefix)",
            );
            return None;
        }
    };
    let Some(items) = list.as_array() else {
        d.push(scope, "bad_events", "events: a list of event types");
        return None;
    };
    if let Err(e) = within("patterns of an events rule", MAX_PATTERNS, items.len()) {
        d.issue(scope, e);
        return None;
    }
    let mut patterns = Vec::new();
    for (i, p) in items.iter().enumerate() {
        match p.as_str() {
            Some(t)
                if !t.is_empty()
                    && t.len() <= MAX_PATTERN_BYTES
                    && !t[..t.len() - 1].contains('*') =>
            {
                patterns.push(Pattern::new(t))
            }
            _ => d.push(
                scope,
                "bad_events",
                format!(
                    "events[{i}] must be an event type of 1 to {MAX_PATTERN_BYTES} bytes, with * only at its end, got {p}"
                ),
            ),
        }
    }
    if !has_type {
        d.push(
            scope,
            "events_need_type",
            "events needs an event type: give the source an event_type (a key); a preset's is inherited only where it is in a header, or the source holds the body anyway (verify, body keys)",
        );
    }
    Some(if accept {
        Events::Accept(patterns)
    } else {
        Events::Drop(patterns)
    })
}
