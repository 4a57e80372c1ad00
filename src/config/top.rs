//! The checker's top level: walks the JSON by hand rather than through
//! serde derive so that every error is reported (not just the first), each
//! with its scope (the source, the sink) in a `Diags` collector; then each
//! source (`source`), its sinks (`sink`), keys (`keys`), signature
//! (`verify`) and affinity (`affinity`).

use super::bounds::{bounded, within, MAX_PREFIX_SEGMENTS, MAX_SOURCES};
use super::diag::{Diag, Diags, Scope};
use super::fields::{choice, count, field, flag, routing_of, unknown_fields, Env};
use super::source::{check_source, SourceCtx};
use super::{Config, Delivery, Routing, Source};
use crate::budget::PEAK_FACTOR;
use crate::path;
use serde_json::{Map, Value};

pub(super) const DEFAULT_MAX_JSON_BYTES: u64 = 1_048_576;

pub(super) const DEFAULT_MAX_HELD_BYTES: u64 = 64 * 1_048_576;

pub(super) const DEFAULT_MAX_HOLD_MS: u64 = 10_000;

pub(super) const DEFAULT_SLOW_BODY_MS: u64 = 1_000;
/// How long a streamed request may take in all (`"mode": "stream"`).
pub(super) const DEFAULT_MAX_STREAM_MS: u64 = 60_000;
/// Streamed requests one worker keeps open upstream at once: with Envoy's
/// default circuit breaker (1 024 requests to a cluster, all workers
/// together), two workers leave three quarters of it to other requests.
pub(super) const DEFAULT_MAX_STREAMS: u64 = 128;
/// A streamed body's slowest average rate, bytes a second: a provider
/// sends from a data centre, far faster; a trickle that holds an upstream
/// request open costs its sender at least this much for every slot.
pub(super) const DEFAULT_MIN_STREAM_RATE: u64 = 1024;
/// The longest streamed body: GitHub's cap on a delivery (25 MB), the
/// largest any provider hookstamp knows documents.
pub(super) const DEFAULT_MAX_STREAM_BYTES: u64 = 25 * 1024 * 1024;

pub(super) const TOP_LEVEL: &[&str] = &[
    "routing",
    "prefix",
    "max_json_bytes",
    "max_held_bytes",
    "max_hold_ms",
    "slow_body_ms",
    "max_stream_ms",
    "max_streams",
    "min_stream_rate",
    "max_stream_bytes",
    "delivery",
    "affinity",
    "seal",
    "sources",
];

/// Checks a parsed configuration: the config when it could be built, every
/// error found (the config is good only when there are none), and the
/// warnings.
pub fn check(v: &Value, env: Env) -> (Option<Config>, Vec<Diag>, Vec<Diag>) {
    let mut d = Diags::default();
    let config = check_top(v, env, &mut d);
    let (errors, warnings) = d.into_parts();
    (config, errors, warnings)
}

/// The limits every request is held to, as the top level sets them.
struct Limits {
    max_json_bytes: u64,
    max_held_bytes: u64,
    max_hold_ms: u64,
    slow_body_ms: u64,
    max_stream_ms: u64,
    max_streams: u64,
    min_stream_rate: u64,
    max_stream_bytes: u64,
}

pub(super) fn check_top(v: &Value, env: Env, d: &mut Diags) -> Option<Config> {
    let Some(obj) = v.as_object() else {
        d.push(&Scope::Config, "not_an_object", "must be a JSON object");
        return None;
    };
    unknown_fields(obj, TOP_LEVEL, &Scope::Config, d);
    let routing = routing_of(field(obj, "routing"), &Scope::Config, d).unwrap_or(Routing::Path);
    let prefix = top_prefix(obj, d);
    let prefix_view = prefix.iter().map(|s| s.to_ascii_lowercase()).collect();
    let limits = top_limits(obj, d);
    let delivery = choice(
        obj,
        "delivery",
        &[("queued", Delivery::Queued), ("direct", Delivery::Direct)],
        d,
    );
    let affinity = flag(obj, "affinity", &Scope::Config, d);
    let seal = field(obj, "seal").and_then(|v| super::seal::check_seal(v, env, d));
    let ctx = SourceCtx {
        delivery,
        routing,
        affinity,
        env,
    };
    let (sources, places) = top_sources(obj, &ctx, d);
    let by_id = top_ids(&sources, &places, d);
    let own_paths = own_paths(&prefix, &sources);
    if seal.is_some() {
        super::seal::check_reads(&sources, d);
    }
    Some(Config {
        routing,
        prefix,
        prefix_view,
        max_json_bytes: usize::try_from(limits.max_json_bytes).unwrap_or(usize::MAX),
        max_held_bytes: usize::try_from(limits.max_held_bytes).unwrap_or(usize::MAX),
        max_hold_ms: limits.max_hold_ms,
        slow_body_ms: limits.slow_body_ms,
        max_stream_ms: limits.max_stream_ms,
        max_streams: usize::try_from(limits.max_streams).unwrap_or(usize::MAX),
        min_stream_rate: limits.min_stream_rate,
        max_stream_bytes: limits.max_stream_bytes,
        seal,
        delivery,
        sources,
        by_id,
        own_paths,
    })
}

/// Each source's own path, where its own tenant is routed by the path
/// form: the prefix's segments and its id, as `route` reads them.
fn own_paths(prefix: &[String], sources: &[Source]) -> Vec<(String, usize)> {
    let mut paths: Vec<(String, usize)> = Vec::new();
    for (i, s) in sources.iter().enumerate() {
        if !(s.routing.path() && s.accepts(&s.tenant)) {
            continue;
        }
        let mut path = String::new();
        for seg in prefix.iter().chain([&s.id]) {
            path.push('/');
            path.push_str(seg);
        }
        if let Err(at) = paths.binary_search_by(|(p, _)| super::by_length(p, &path)) {
            paths.insert(at, (path, i));
        }
    }
    paths
}

/// The route prefix's segments: `/webhooks` unless it names another.
fn top_prefix(obj: &Map<String, Value>, d: &mut Diags) -> Vec<String> {
    match field(obj, "prefix").map(Value::as_str) {
        None => vec!["webhooks".to_owned()],
        Some(Some(p)) if prefix_ok(p) => {
            let segs = segments(p);
            match within("segments of the prefix", MAX_PREFIX_SEGMENTS, segs.len()) {
                Ok(()) => segs,
                Err(e) => {
                    d.issue(&Scope::Config, e);
                    Vec::new()
                }
            }
        }
        Some(_) => {
            d.push(
                &Scope::Config, "bad_prefix",
                "prefix must be \"/\" or \"/\"-separated segments of [A-Za-z0-9._~-], none of them \".\" or \"..\"",
            );
            Vec::new()
        }
    }
}

/// The body and time limits, each checked against those it depends on
/// as it is read (a default follows the limit it may not pass).
fn top_limits(obj: &Map<String, Value>, d: &mut Diags) -> Limits {
    let max_json_bytes = count(obj, "max_json_bytes", DEFAULT_MAX_JSON_BYTES, d);
    let max_held_bytes = count(obj, "max_held_bytes", DEFAULT_MAX_HELD_BYTES, d);
    if max_held_bytes < PEAK_FACTOR * max_json_bytes {
        d.push(
            &Scope::Config, "held_below_peak",
            format!(
                "max_held_bytes ({max_held_bytes}) must be at least {PEAK_FACTOR} × max_json_bytes ({max_json_bytes}): one body's peak while it grows (Envoy's buffer, the filter's old and new buffer, the chunk being copied)"
            ),
        );
    }
    let max_hold_ms = count(obj, "max_hold_ms", DEFAULT_MAX_HOLD_MS, d);
    let slow_body_ms = count(
        obj,
        "slow_body_ms",
        DEFAULT_SLOW_BODY_MS.min(max_hold_ms),
        d,
    );
    if slow_body_ms > max_hold_ms {
        d.push(
            &Scope::Config,
            "slow_above_hold",
            format!("slow_body_ms ({slow_body_ms}) must be at most max_hold_ms ({max_hold_ms})"),
        );
    }
    let max_stream_ms = count(
        obj,
        "max_stream_ms",
        DEFAULT_MAX_STREAM_MS.max(max_hold_ms),
        d,
    );
    if max_stream_ms < max_hold_ms {
        d.push(
            &Scope::Config,
            "stream_below_hold",
            format!("max_stream_ms ({max_stream_ms}) must be at least max_hold_ms ({max_hold_ms})"),
        );
    }
    Limits {
        max_json_bytes,
        max_held_bytes,
        max_hold_ms,
        slow_body_ms,
        max_stream_ms,
        max_streams: count(obj, "max_streams", DEFAULT_MAX_STREAMS, d),
        min_stream_rate: count(obj, "min_stream_rate", DEFAULT_MIN_STREAM_RATE, d),
        max_stream_bytes: count(obj, "max_stream_bytes", DEFAULT_MAX_STREAM_BYTES, d),
    }
}

/// The sources that could be checked, and each one's place in the list
/// (for errors that name two).
fn top_sources(
    obj: &Map<String, Value>,
    ctx: &SourceCtx,
    d: &mut Diags,
) -> (Vec<Source>, Vec<usize>) {
    let mut sources = Vec::new();
    let mut places = Vec::new();
    let list = match obj.get("sources").map(Value::as_array) {
        None => {
            d.push(&Scope::Config, "missing_sources", "sources is required");
            return (sources, places);
        }
        Some(None) => {
            d.push(&Scope::Config, "not_a_list", "sources must be a list");
            return (sources, places);
        }
        Some(Some(list)) => list,
    };
    for (i, s) in bounded(list, "sources", MAX_SOURCES, &Scope::Config, d)
        .iter()
        .enumerate()
    {
        if let Some(src) = check_source(ctx, i, s, d) {
            sources.push(src);
            places.push(i);
        }
    }
    (sources, places)
}

/// Each source's index in the order of their ids; a second source of an
/// id is an error that names both places.
fn top_ids(sources: &[Source], places: &[usize], d: &mut Diags) -> Vec<usize> {
    let id = |i: usize| sources.get(i).map_or("", |s| s.id.as_str());
    let mut by_id: Vec<usize> = Vec::with_capacity(sources.len());
    for (i, s) in sources.iter().enumerate() {
        match by_id.binary_search_by(|&j| id(j).cmp(&s.id)) {
            Err(at) => by_id.insert(at, i),
            Ok(at) => {
                let first = by_id.get(at).copied().unwrap_or(i);
                let (a, b) = (
                    places.get(first).copied().unwrap_or(first),
                    places.get(i).copied().unwrap_or(i),
                );
                d.push(
                    &Scope::Source(s.id.clone()),
                    "duplicate_id",
                    format!("id is not unique: sources #{a} and #{b} both have it"),
                );
            }
        }
    }
    by_id
}

/// A prefix whose canonical spelling is its normalised view, lowercase
/// aside: one a server cannot read as anything else.
pub(super) fn prefix_ok(p: &str) -> bool {
    let segs = segments(p);
    p.starts_with('/')
        && p.bytes()
            .all(|b| b == b'/' || b.is_ascii_alphanumeric() || b"._~-".contains(&b))
        && segs.iter().all(|s| s != "." && s != "..")
        && path::view(p).is_some_and(|v| v.len() == segs.len())
}

/// Splits a path on "/" and drops empty segments.
pub fn segments(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}
