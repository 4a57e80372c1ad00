//! One sink's check: its type, ordering and ordering key.

use super::diag::{Diags, Issue, Issues, Scope};
use super::fields::{did_you_mean, field, unknown_fields};
use super::keys::KeyCtx;
use super::reads::{stored, Reads, StoreHeaders};
use super::Delivery;
use crate::lanes::Lane;
use serde_json::Value;

pub(super) struct SinkCtx<'a> {
    pub(super) id: &'a str,
    pub(super) index: usize,
    pub(super) delivery: Delivery,
    pub(super) store: &'a StoreHeaders,
}

/// Checks one sink; returns its lane when it is ordered.
pub(super) fn check_sink(
    ctx: &SinkCtx,
    v: &Value,
    reads: &mut Reads,
    d: &mut Diags,
) -> Option<Lane> {
    let before = d.len();
    let mut scope = Scope::Sink {
        source: ctx.id.to_owned(),
        index: ctx.index,
        kind: None,
    };
    let Some(obj) = v.as_object() else {
        d.push(&scope, "not_an_object", "must be an object");
        return None;
    };
    let kind = match field(obj, "type") {
        None => None,
        Some(Value::String(t)) if !t.is_empty() => Some(t.as_str()),
        Some(t) => {
            d.push(
                &scope,
                "bad_sink_type",
                format!("type must be a non-empty string, got {t}"),
            );
            None
        }
    };
    if let Scope::Sink { kind: k, .. } = &mut scope {
        *k = kind.map(str::to_owned);
    }
    if let Some(Err(e)) = kind.map(sink_type) {
        d.issue(&scope, e);
    }
    unknown_fields(obj, &["type", "ordered", "ordering_key"], &scope, d);
    let ordered = match field(obj, "ordered") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(o) => {
            d.push(
                &scope,
                "not_a_bool",
                format!("ordered must be true or false, got {o}"),
            );
            false
        }
    };
    let key = match field(obj, "ordering_key") {
        None => None,
        Some(Value::String(s)) if kind == Some("google_pubsub") && !s.is_empty() && !ordered => {
            // The legacy static Pub/Sub ordering key: the sink applies it
            // itself, so there is nothing to stamp.
            return None;
        }
        Some(Value::String(_)) if kind == Some("google_pubsub") && ordered => {
            d.push(
                &scope, "legacy_pubsub_key",
                "a string ordering_key is the legacy static Pub/Sub key; an ordered sink takes {\"header\": name} or {\"json\": path}",
            );
            return None;
        }
        Some(Value::Object(o)) => {
            // Every error of the sink is reported: a bad key does not hide
            // the checks after it.
            let mut warned = Vec::new();
            let store = ctx.store;
            let header_ok = |h: &str| stored(store, h);
            let kctx = KeyCtx {
                integers: false,
                header_ok: &header_ok,
            };
            let k = super::keys::expr(o, &[], &kctx, reads, &mut warned);
            for w in warned {
                d.warn(&scope, "never_matches", w);
            }
            match k {
                Ok(k) => Some(k),
                Err(Issues(problems)) => {
                    for e in problems {
                        d.issue(&scope, e.within("ordering_key"));
                    }
                    None
                }
            }
        }
        Some(other) => {
            d.push(
                &scope,
                "bad_key",
                format!("ordering_key must be {}, got {other}", super::keys::FORMS),
            );
            None
        }
    };
    // A key that failed its own check still needs an ordered sink.
    if field(obj, "ordering_key").is_some() && !ordered {
        d.push(
            &scope,
            "key_without_ordered",
            "ordering_key needs \"ordered\": true",
        );
    }
    if ordered && ctx.delivery == Delivery::Direct {
        d.push(
            &scope,
            "ordered_needs_queue",
            "an ordered sink needs \"delivery\": \"queued\" (lanes need the store-backed queue)",
        );
    }
    if !ordered || d.len() > before {
        return None;
    }
    let sink = u16::try_from(ctx.index).ok()?;
    let mut lane = Lane::new(sink, key, ctx.id);
    lane.group_max = kind.and_then(crate::lanes::group_max);
    Some(lane)
}

/// The sink types the queue knows; another is named `custom:<name>`.
pub const SINK_TYPES: &[&str] = &[
    "http",
    "sqs",
    "sns",
    "kafka",
    "google_pubsub",
    "eventbridge",
    "kinesis",
    "rabbitmq",
    "nats",
    "redis",
    "log",
];

/// A sink type from the list, or `custom:<name>`; a near miss gets a
/// suggestion.
pub(super) fn sink_type(t: &str) -> Result<(), Issue> {
    if SINK_TYPES.contains(&t) || t.strip_prefix("custom:").is_some_and(|n| !n.is_empty()) {
        return Ok(());
    }
    let hint = did_you_mean(t, SINK_TYPES);
    Err(Issue::new(
        "unknown_sink_type",
        format!(
            "unknown sink type {t:?}{hint} (known: {}; name another as \"custom:<name>\")",
            SINK_TYPES.join(", ")
        ),
    ))
}
