//! One sink's check: its type, ordering, ordering key and group scope.

use super::diag::{Diags, Issue, Scope};
use super::fields::{did_you_mean, field, flag, nonempty_string, unknown_fields};
use super::keys::KeyCtx;
use super::reads::{stored, Reads, StoreHeaders};
use super::Delivery;
use crate::key::KeySource;
use crate::lanes::{GroupScope, Lane, GROUP_SCOPES};
use serde_json::{Map, Value};

/// What a sink's check needs from its source.
pub(super) struct SinkCtx<'a> {
    pub(super) id: &'a str,
    pub(super) delivery: Delivery,
    pub(super) store: &'a StoreHeaders,
}

/// A sink's `ordering_key`, as far as its lane goes.
enum OrderingKey {
    /// The lane's key, if it has one: none given, or one whose errors are
    /// reported; the lane's other checks go on.
    Lane(Option<KeySource>),
    /// A string: the legacy static Pub/Sub key (or its misuse on an
    /// ordered sink, reported). The sink stamps no lane, and nothing more
    /// of it is checked.
    Static,
}

/// Checks sink `index` of a source; returns its lane when it is ordered.
pub(super) fn check_sink(
    ctx: &SinkCtx,
    index: usize,
    v: &Value,
    reads: &mut Reads,
    d: &mut Diags,
) -> Option<Lane> {
    let before = d.len();
    let mut scope = Scope::Sink {
        source: ctx.id.to_owned(),
        index,
        kind: None,
    };
    let Some(obj) = v.as_object() else {
        d.push(&scope, "not_an_object", "must be an object");
        return None;
    };
    let kind = nonempty_string(
        obj,
        "type",
        "bad_sink_type",
        "a non-empty string",
        &scope,
        d,
    );
    // Every error after this names the sink's type too.
    if let Scope::Sink { kind: k, .. } = &mut scope {
        *k = kind.map(str::to_owned);
    }
    if let Some(Err(e)) = kind.map(sink_type) {
        d.issue(&scope, e);
    }
    unknown_fields(obj, SINK_FIELDS, &scope, d);
    let ordered = flag(obj, "ordered", &scope, d);
    let group_scope = group_scope(obj, ordered, &scope, d);
    let OrderingKey::Lane(key) = ordering_key(ctx, obj, kind, ordered, reads, &scope, d) else {
        return None;
    };
    lane_needs(obj, ordered, ctx.delivery, &scope, d);
    // A sink with any error has no lane.
    if !ordered || d.len() > before {
        return None;
    }
    let sink = u16::try_from(index).ok()?;
    let mut lane = Lane::new(sink, key, ctx.id);
    lane.group_max = kind.and_then(crate::lanes::group_max);
    lane.group_scope = group_scope;
    Some(lane)
}

/// The fields a sink takes.
const SINK_FIELDS: &[&str] = &["type", "ordered", "ordering_key", "group_scope"];

/// The sink's `group_scope`: `"key"` (the default) or `"tenant"`, which
/// only an ordered sink has.
fn group_scope(
    obj: &Map<String, Value>,
    ordered: bool,
    scope: &Scope,
    d: &mut Diags,
) -> GroupScope {
    let Some(v) = field(obj, "group_scope") else {
        return GroupScope::Key;
    };
    if !ordered {
        d.push(
            scope,
            "scope_without_ordered",
            "group_scope needs \"ordered\": true (only an ordered sink's lanes have groups)",
        );
    }
    if let Some(&(_, g)) = GROUP_SCOPES.iter().find(|(n, _)| v.as_str() == Some(*n)) {
        return g;
    }
    let names: Vec<&str> = GROUP_SCOPES.iter().map(|(n, _)| *n).collect();
    let hint = v
        .as_str()
        .map_or(String::new(), |t| did_you_mean(t, &names));
    d.push(
        scope,
        "bad_group_scope",
        format!("group_scope must be \"key\" or \"tenant\", got {v}{hint}"),
    );
    GroupScope::Key
}

/// The sink's `ordering_key`: an expression (`keys`) whose headers its
/// hooks store, or the legacy static Pub/Sub string.
fn ordering_key(
    ctx: &SinkCtx,
    obj: &Map<String, Value>,
    kind: Option<&str>,
    ordered: bool,
    reads: &mut Reads,
    scope: &Scope,
    d: &mut Diags,
) -> OrderingKey {
    let pubsub = kind == Some("google_pubsub");
    match field(obj, "ordering_key") {
        None => OrderingKey::Lane(None),
        // The legacy static Pub/Sub ordering key: the sink applies it
        // itself, so there is nothing to stamp.
        Some(Value::String(s)) if pubsub && !s.is_empty() && !ordered => OrderingKey::Static,
        Some(Value::String(_)) if pubsub && ordered => {
            d.push(
                scope, "legacy_pubsub_key",
                "a string ordering_key is the legacy static Pub/Sub key; an ordered sink takes {\"header\": name} or {\"json\": path}",
            );
            OrderingKey::Static
        }
        Some(Value::Object(o)) => {
            // Every error of the sink is reported: a bad key does not hide
            // the checks after it.
            let store = ctx.store;
            let header_ok = |h: &str| stored(store, h);
            let kctx = KeyCtx {
                integers: false,
                header_ok: &header_ok,
            };
            OrderingKey::Lane(super::keys::expr_in(
                "ordering_key",
                o,
                &kctx,
                reads,
                scope,
                d,
            ))
        }
        Some(other) => {
            d.push(
                scope,
                "bad_key",
                format!("ordering_key must be {}, got {other}", super::keys::FORMS),
            );
            OrderingKey::Lane(None)
        }
    }
}

/// What a lane needs: an ordered sink for its key, and the queue.
fn lane_needs(
    obj: &Map<String, Value>,
    ordered: bool,
    delivery: Delivery,
    scope: &Scope,
    d: &mut Diags,
) {
    // A key that failed its own check still needs an ordered sink.
    if field(obj, "ordering_key").is_some() && !ordered {
        d.push(
            scope,
            "key_without_ordered",
            "ordering_key needs \"ordered\": true",
        );
    }
    if ordered && delivery == Delivery::Direct {
        d.push(
            scope,
            "ordered_needs_queue",
            "an ordered sink needs \"delivery\": \"queued\" (lanes need the store-backed queue)",
        );
    }
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
