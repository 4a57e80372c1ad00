//! The checker: walks the JSON by hand rather than through serde derive so
//! that every error is reported (not just the first), each with its scope
//! (the source, the sink) in a `Diags` collector.

use super::bounds::{
    within, MAX_NAME_BYTES, MAX_PREFIX_SEGMENTS, MAX_SINKS, MAX_SOURCES, MAX_TENANTS,
};
use super::diag::{Diag, Diags, Scope};
use super::keys::KeyCtx;
use super::{source_id_ok, tenant_ok, Config, Delivery, Routing, Source, DEFAULT_TENANT};
use crate::budget::PEAK_FACTOR;
use crate::dedupe::{self, Dedupe, PresetKey, DEFAULT_TTL_MS};
use crate::json::Path;
use crate::key::KeySource;
use crate::lanes::Lane;
use crate::{path, stamps};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// Headers that `store_headers: "all"` never stores.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

const DEFAULT_MAX_JSON_BYTES: u64 = 1_048_576;
const DEFAULT_MAX_HELD_BYTES: u64 = 64 * 1_048_576;
const DEFAULT_MAX_HOLD_MS: u64 = 10_000;
const DEFAULT_SLOW_BODY_MS: u64 = 1_000;

const TOP_LEVEL: &[&str] = &[
    "routing",
    "prefix",
    "max_json_bytes",
    "max_held_bytes",
    "max_hold_ms",
    "slow_body_ms",
    "delivery",
    "affinity",
    "sources",
];

/// The environment secrets are read from.
pub type Env<'e> = &'e dyn Fn(&str) -> Option<String>;

/// Checks a parsed configuration: the config when it could be built, every
/// error found (the config is good only when there are none), and the
/// warnings.
pub fn check(v: &Value, env: Env) -> (Option<Config>, Vec<Diag>, Vec<Diag>) {
    let mut d = Diags::default();
    let config = check_top(v, env, &mut d);
    let (errors, warnings) = d.into_parts();
    (config, errors, warnings)
}

/// Reports fields of `obj` that are not in `known`.
pub(super) fn unknown_fields(
    obj: &Map<String, Value>,
    known: &[&str],
    scope: &Scope,
    d: &mut Diags,
) {
    for k in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        d.push(
            scope,
            format!("unknown field {k:?} (known: {})", known.join(", ")),
        );
    }
}

/// A field that may be absent; `null` counts as absent.
pub(super) fn field<'v>(obj: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    obj.get(name).filter(|v| !v.is_null())
}

/// A top-level field that takes one of a few strings; the first is the
/// default.
fn choice<T: Copy>(
    obj: &Map<String, Value>,
    name: &str,
    options: &[(&str, T)],
    d: &mut Diags,
) -> T {
    let default = options[0].1;
    let Some(v) = field(obj, name) else {
        return default;
    };
    if let Some(&(_, t)) = options.iter().find(|(o, _)| v.as_str() == Some(*o)) {
        return t;
    }
    let names: Vec<String> = options.iter().map(|(o, _)| format!("{o:?}")).collect();
    d.push(
        &Scope::Config,
        format!("{name} must be {}", names.join(" or ")),
    );
    default
}

/// A positive integer of at most u32::MAX (the wasm32 address space).
fn count(obj: &Map<String, Value>, name: &str, default: u64, d: &mut Diags) -> u64 {
    let Some(v) = field(obj, name) else {
        return default;
    };
    match v.as_u64() {
        Some(n) if n > 0 && n <= u64::from(u32::MAX) => n,
        _ => {
            d.push(
                &Scope::Config,
                format!(
                    "{name} must be a positive integer of at most {}, got {v}",
                    u32::MAX
                ),
            );
            default
        }
    }
}

fn check_top(v: &Value, env: Env, d: &mut Diags) -> Option<Config> {
    let Some(obj) = v.as_object() else {
        d.push(&Scope::Config, "must be a JSON object");
        return None;
    };
    unknown_fields(obj, TOP_LEVEL, &Scope::Config, d);
    let routing = routing_of(field(obj, "routing"), &Scope::Config, d).unwrap_or(Routing::Path);
    let prefix = match field(obj, "prefix").map(Value::as_str) {
        None => vec!["webhooks".to_owned()],
        Some(Some(p)) if prefix_ok(p) => {
            let segs = segments(p);
            match within("segments of the prefix", MAX_PREFIX_SEGMENTS, segs.len()) {
                Ok(()) => segs,
                Err(e) => {
                    d.push(&Scope::Config, e);
                    Vec::new()
                }
            }
        }
        Some(_) => {
            d.push(
                &Scope::Config,
                "prefix must be \"/\" or \"/\"-separated segments of [A-Za-z0-9._~-], none of them \".\" or \"..\"",
            );
            Vec::new()
        }
    };
    let prefix_view = prefix.iter().map(|s| s.to_ascii_lowercase()).collect();
    let max_json_bytes = count(obj, "max_json_bytes", DEFAULT_MAX_JSON_BYTES, d);
    let max_held_bytes = count(obj, "max_held_bytes", DEFAULT_MAX_HELD_BYTES, d);
    if max_held_bytes < PEAK_FACTOR * max_json_bytes {
        d.push(
            &Scope::Config,
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
            format!("slow_body_ms ({slow_body_ms}) must be at most max_hold_ms ({max_hold_ms})"),
        );
    }
    let delivery = choice(
        obj,
        "delivery",
        &[("queued", Delivery::Queued), ("direct", Delivery::Direct)],
        d,
    );
    let affinity = match field(obj, "affinity") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            d.push(
                &Scope::Config,
                format!("affinity must be true or false, got {other}"),
            );
            false
        }
    };
    let mut sources = Vec::new();
    // Each checked source's place in the list, for errors that name two.
    let mut places = Vec::new();
    match obj.get("sources").map(Value::as_array) {
        None => d.push(&Scope::Config, "sources is required"),
        Some(None) => d.push(&Scope::Config, "sources must be a list"),
        Some(Some(list)) => {
            if let Err(e) = within("sources", MAX_SOURCES, list.len()) {
                d.push(&Scope::Config, e);
            }
            for (i, s) in list.iter().enumerate().take(MAX_SOURCES) {
                let ctx = SourceCtx {
                    index: i,
                    delivery,
                    routing,
                    affinity,
                    env,
                };
                if let Some(src) = check_source(&ctx, s, d) {
                    sources.push(src);
                    places.push(i);
                }
            }
        }
    }
    let mut by_id = HashMap::new();
    for (i, s) in sources.iter().enumerate() {
        if let Some(first) = by_id.insert(s.id.clone(), i) {
            let (a, b) = (
                places.get(first).copied().unwrap_or(first),
                places.get(i).copied().unwrap_or(i),
            );
            d.push(
                &Scope::Source(s.id.clone()),
                format!("id is not unique: sources #{a} and #{b} both have it"),
            );
            by_id.insert(s.id.clone(), first);
        }
    }
    Some(Config {
        routing,
        prefix,
        prefix_view,
        max_json_bytes: usize::try_from(max_json_bytes).unwrap_or(usize::MAX),
        max_held_bytes: usize::try_from(max_held_bytes).unwrap_or(usize::MAX),
        max_hold_ms,
        slow_body_ms,
        delivery,
        sources,
        by_id,
    })
}

/// A prefix whose canonical spelling is its normalised view, lowercase
/// aside: one a server cannot read as anything else.
fn prefix_ok(p: &str) -> bool {
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

/// Which headers a source's stored hook keeps (a replay re-reads lanes).
enum StoreHeaders {
    All,
    None,
    Only(Vec<String>),
}

impl StoreHeaders {
    fn keeps(&self, name: &str) -> bool {
        match self {
            StoreHeaders::All => !CREDENTIAL_HEADERS.contains(&name),
            StoreHeaders::None => false,
            StoreHeaders::Only(list) => list.iter().any(|n| n == name),
        }
    }
}

/// The paths, headers and form fields a source's keys read, each
/// interned once.
#[derive(Default)]
pub(super) struct Reads {
    paths: Vec<Path>,
    headers: Vec<String>,
    forms: Vec<String>,
}

impl Reads {
    pub(super) fn path(&mut self, p: Path, integer: bool) -> KeySource {
        KeySource::Json {
            path: intern(&mut self.paths, p),
            integer,
        }
    }

    pub(super) fn header(&mut self, h: String) -> KeySource {
        KeySource::Header(intern(&mut self.headers, h))
    }

    pub(super) fn form(&mut self, f: String) -> KeySource {
        KeySource::Form(intern(&mut self.forms, f))
    }
}

/// Adds an item to a table (once) and returns its index.
fn intern<T: PartialEq>(table: &mut Vec<T>, item: T) -> usize {
    if let Some(i) = table.iter().position(|p| *p == item) {
        return i;
    }
    table.push(item);
    table.len() - 1
}

/// What a source's check needs from the top level.
struct SourceCtx<'e> {
    index: usize,
    delivery: Delivery,
    routing: Routing,
    /// The top-level `affinity` switch.
    affinity: bool,
    env: Env<'e>,
}

fn check_source(ctx: &SourceCtx, v: &Value, d: &mut Diags) -> Option<Source> {
    let (i, delivery) = (ctx.index, ctx.delivery);
    let Some(obj) = v.as_object() else {
        d.push(&Scope::SourceAt(i), "must be an object");
        return None;
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            d.push(&Scope::SourceAt(i), "id is required and must be a string");
            format!("#{i}")
        }
    };
    let scope = Scope::Source(id.clone());
    if obj.get("id").is_some_and(Value::is_string) && !source_id_ok(&id) {
        d.push(
            &scope,
            "id must match [A-Za-z0-9._-]{1,64} and not be \".\" or \"..\"",
        );
    }
    unknown_fields(
        obj,
        &[
            "id",
            "tenant",
            "tenants",
            "dedupe",
            "verify",
            "store_headers",
            "sinks",
            "affinity",
            "form_json",
            "routing",
        ],
        &scope,
        d,
    );
    let tenant = match field(obj, "tenant") {
        None => DEFAULT_TENANT.to_owned(),
        Some(Value::String(t)) if tenant_ok(t) => t.clone(),
        Some(t) => {
            d.push(
                &scope,
                format!("tenant must match [A-Za-z0-9_-]{{1,64}}, got {t}"),
            );
            DEFAULT_TENANT.to_owned()
        }
    };
    let mut reads = Reads::default();
    let dedupe = field(obj, "dedupe")
        .and_then(|v| check_dedupe(v, &Scope::Dedupe(id.clone()), &mut reads, d));
    let store = check_store_headers(field(obj, "store_headers"), &scope, d);
    let mut lanes = Vec::new();
    match field(obj, "sinks") {
        None => {}
        Some(Value::Array(sinks)) => {
            if let Err(e) = within("sinks", MAX_SINKS, sinks.len()) {
                d.push(&scope, e);
            }
            for (index, s) in sinks.iter().enumerate().take(MAX_SINKS) {
                let ctx = SinkCtx {
                    id: &id,
                    index,
                    delivery,
                    store: &store,
                };
                if let Some(lane) = check_sink(&ctx, s, &mut reads, d) {
                    lanes.push(lane);
                }
            }
        }
        Some(_) => d.push(&scope, "sinks must be a list"),
    }
    let routing = routing_of(field(obj, "routing"), &scope, d).unwrap_or(ctx.routing);
    let verify = field(obj, "verify")
        .and_then(|v| super::verify::check(v, &Scope::Verify(id.clone()), routing, ctx.env, d));
    let mut tenants = field(obj, "tenants").and_then(|v| check_tenants(v, &scope, routing, d));
    if let Some(crate::verify::Verify {
        secrets: crate::verify::Secrets::PerTenant(map),
        ..
    }) = &verify
    {
        let keyed: Vec<String> = map.iter().map(|(t, _)| t.clone()).collect();
        if tenants.as_ref().is_some_and(|t| *t != keyed) {
            d.push(
                &scope,
                "tenants and per-tenant verify secrets name different tenants: give one of them",
            );
        }
        tenants = Some(keyed);
    }
    let form_json = match field(obj, "form_json") {
        None => None,
        Some(Value::String(f)) if !f.is_empty() => Some(f.clone()),
        Some(other) => {
            d.push(
                &scope,
                format!("form_json must be a form field name, got {other}"),
            );
            None
        }
    };
    // A form-encoded body is told from JSON by its content-type.
    let content_type = (!reads.forms.is_empty() || form_json.is_some())
        .then(|| match reads.header("content-type".to_owned()) {
            KeySource::Header(i) => Some(i),
            _ => None,
        })
        .flatten();
    let ordered = Ordered::of(field(obj, "sinks"));
    let affinity = super::affinity::check(
        field(obj, "affinity"),
        ctx.affinity,
        &lanes,
        &ordered,
        dedupe.is_some(),
        &scope,
        d,
    );
    Some(Source {
        id,
        tenant,
        dedupe,
        lanes,
        paths: reads.paths,
        headers: reads.headers,
        forms: reads.forms,
        form_json,
        content_type,
        verify,
        tenants,
        affinity,
        routing,
    })
}

/// How many sinks a source has, and which are ordered (even those whose
/// lane an error dropped), for the affinity check's errors.
pub(super) struct Ordered {
    pub count: usize,
    pub ordered: Vec<usize>,
}

impl Ordered {
    fn of(sinks: Option<&Value>) -> Self {
        let list = sinks.and_then(Value::as_array).map_or(&[][..], |l| &l[..]);
        Ordered {
            count: list.len(),
            ordered: list
                .iter()
                .enumerate()
                .filter(|(_, s)| s.get("ordered") == Some(&Value::Bool(true)))
                .map(|(i, _)| i)
                .collect(),
        }
    }
}

/// `"path"`, `"tenant_path"`, or a list of both.
fn routing_of(v: Option<&Value>, scope: &Scope, d: &mut Diags) -> Option<Routing> {
    let v = v?;
    let one = |s: &str| match s {
        "path" => Some(Routing::Path),
        "tenant_path" => Some(Routing::TenantPath),
        _ => None,
    };
    let r = match v {
        Value::String(s) => one(s),
        Value::Array(list) => {
            let forms: Option<Vec<Routing>> =
                list.iter().map(|x| x.as_str().and_then(one)).collect();
            match forms.as_deref() {
                Some([r]) => Some(*r),
                Some(rs) if rs.contains(&Routing::Path) && rs.contains(&Routing::TenantPath) => {
                    Some(Routing::Both)
                }
                _ => None,
            }
        }
        _ => None,
    };
    if r.is_none() {
        d.push(
            scope,
            "routing must be \"path\", \"tenant_path\" or [\"path\", \"tenant_path\"]",
        );
    }
    r
}

/// A tenant allow-list: only on a `tenant_path` route.
fn check_tenants(v: &Value, scope: &Scope, routing: Routing, d: &mut Diags) -> Option<Vec<String>> {
    if !routing.tenant_path() {
        d.push(scope, "tenants needs \"routing\": \"tenant_path\"");
        return None;
    }
    let list = match v.as_array() {
        Some(l) if !l.is_empty() => l,
        _ => {
            d.push(
                scope,
                format!("tenants must be a non-empty list of tenants, got {v}"),
            );
            return None;
        }
    };
    if let Err(e) = within("tenants", MAX_TENANTS, list.len()) {
        d.push(scope, e);
        return None;
    }
    let mut out = Vec::new();
    for t in list {
        match t.as_str() {
            Some(t) if tenant_ok(t) => out.push(t.to_owned()),
            _ => d.push(
                scope,
                format!("tenants: {t} is not a tenant ([A-Za-z0-9_-]{{1,64}})"),
            ),
        }
    }
    Some(out)
}

fn check_store_headers(v: Option<&Value>, scope: &Scope, d: &mut Diags) -> StoreHeaders {
    match v {
        None => StoreHeaders::All,
        Some(Value::String(s)) if s == "all" => StoreHeaders::All,
        Some(Value::String(s)) if s == "none" => StoreHeaders::None,
        Some(Value::Array(list)) => {
            let mut names = Vec::new();
            for h in list {
                match h.as_str() {
                    Some(s) if !s.is_empty() => names.push(s.to_ascii_lowercase()),
                    _ => d.push(
                        scope,
                        format!("store_headers entries must be non-empty header names, got {h}"),
                    ),
                }
            }
            StoreHeaders::Only(names)
        }
        Some(other) => {
            d.push(
                scope,
                format!(
                    "store_headers must be \"all\", \"none\" or a list of header names, got {other}"
                ),
            );
            StoreHeaders::All
        }
    }
}

/// Checks a header name used as a key source; returns it lowercased.
pub(super) fn key_header(h: &str) -> Result<String, String> {
    if h.is_empty() {
        return Err("header name is empty".into());
    }
    within("bytes of a header name", MAX_NAME_BYTES, h.len())?;
    if !h.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return Err(format!("header name {h:?} is not a valid header name"));
    }
    if stamps::is_stamp_header(h) {
        return Err(format!(
            "header {h:?} is in the stamp namespace, which the filter strips from every request"
        ));
    }
    Ok(h.to_ascii_lowercase())
}

fn check_dedupe(v: &Value, scope: &Scope, reads: &mut Reads, d: &mut Diags) -> Option<Dedupe> {
    let ctx = KeyCtx {
        integers: true,
        header_ok: &|_| Ok(()),
    };
    let (key, ttl_ms) = match v {
        Value::String(p) => (preset(p, reads), DEFAULT_TTL_MS),
        Value::Object(o) => {
            let mut ttl_ms = DEFAULT_TTL_MS;
            if let Some(t) = field(o, "ttl_ms") {
                match t.as_u64() {
                    Some(n) if n > 0 => ttl_ms = n,
                    _ => d.push(scope, format!("ttl_ms must be a positive integer, got {t}")),
                }
            }
            let kinds = ["header", "json", "form", "first", "concat"];
            let key = match field(o, "preset") {
                Some(Value::String(_)) if o.keys().any(|k| kinds.contains(&k.as_str())) => {
                    Err("takes a preset or a key, not both".to_owned())
                }
                Some(Value::String(p)) => {
                    unknown_fields(o, &["preset", "ttl_ms"], scope, d);
                    preset(p, reads)
                }
                Some(other) => Err(format!("preset must be a string, got {other}")),
                None if o.keys().all(|k| k == "ttl_ms") => {
                    Err(format!("needs a preset or a key: {}", super::keys::FORMS))
                }
                None => {
                    let mut warned = Vec::new();
                    let k = super::keys::expr(o, &["ttl_ms"], &ctx, reads, &mut warned);
                    for w in warned {
                        d.warn(scope, w);
                    }
                    k
                }
            };
            (key, ttl_ms)
        }
        _ => (
            Err("must be a preset name or an object".to_owned()),
            DEFAULT_TTL_MS,
        ),
    };
    match key {
        Ok(k) => Some(Dedupe::new(k, ttl_ms)),
        Err(e) => {
            d.push(scope, e);
            None
        }
    }
}

/// A dedupe preset's key.
fn preset(p: &str, reads: &mut Reads) -> Result<KeySource, String> {
    match dedupe::preset(p) {
        Some(PresetKey::Headers(hs)) => {
            let mut alts: Vec<KeySource> =
                hs.iter().map(|h| reads.header((*h).to_owned())).collect();
            Ok(if alts.len() == 1 {
                alts.remove(0)
            } else {
                KeySource::First(alts)
            })
        }
        Some(PresetKey::Json(j)) => Ok(reads.path(j.split('.').map(str::to_owned).collect(), true)),
        None => Err(format!(
            "unknown preset {p:?} (known: {})",
            dedupe::preset_names()
        )),
    }
}

struct SinkCtx<'a> {
    id: &'a str,
    index: usize,
    delivery: Delivery,
    store: &'a StoreHeaders,
}

/// Checks one sink; returns its lane when it is ordered.
fn check_sink(ctx: &SinkCtx, v: &Value, reads: &mut Reads, d: &mut Diags) -> Option<Lane> {
    let before = d.len();
    let mut scope = Scope::Sink {
        source: ctx.id.to_owned(),
        index: ctx.index,
        kind: None,
    };
    let Some(obj) = v.as_object() else {
        d.push(&scope, "must be an object");
        return None;
    };
    let kind = match field(obj, "type") {
        None => None,
        Some(Value::String(t)) if !t.is_empty() => Some(t.as_str()),
        Some(t) => {
            d.push(&scope, format!("type must be a non-empty string, got {t}"));
            None
        }
    };
    if let Scope::Sink { kind: k, .. } = &mut scope {
        *k = kind.map(str::to_owned);
    }
    if let Some(Err(e)) = kind.map(sink_type) {
        d.push(&scope, e);
    }
    unknown_fields(obj, &["type", "ordered", "ordering_key"], &scope, d);
    let ordered = match field(obj, "ordered") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(o) => {
            d.push(&scope, format!("ordered must be true or false, got {o}"));
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
                &scope,
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
                d.warn(&scope, w);
            }
            match k {
                Ok(k) => Some(k),
                Err(e) => {
                    d.push(&scope, format!("ordering_key: {e}"));
                    None
                }
            }
        }
        Some(other) => {
            d.push(
                &scope,
                format!("ordering_key must be {}, got {other}", super::keys::FORMS),
            );
            None
        }
    };
    // A key that failed its own check still needs an ordered sink.
    if field(obj, "ordering_key").is_some() && !ordered {
        d.push(&scope, "ordering_key needs \"ordered\": true");
    }
    if ordered && ctx.delivery == Delivery::Direct {
        d.push(
            &scope,
            "an ordered sink needs \"delivery\": \"queued\" (lanes need the store-backed queue)",
        );
    }
    if !ordered || d.len() > before {
        return None;
    }
    let sink = u16::try_from(ctx.index).ok()?;
    Some(Lane::new(sink, key, ctx.id))
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
fn sink_type(t: &str) -> Result<(), String> {
    if SINK_TYPES.contains(&t) || t.strip_prefix("custom:").is_some_and(|n| !n.is_empty()) {
        return Ok(());
    }
    let near = SINK_TYPES
        .iter()
        .map(|k| (distance(t, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min();
    let hint = near.map_or(String::new(), |(_, k)| format!(": did you mean {k:?}?"));
    Err(format!(
        "unknown sink type {t:?}{hint} (known: {}; name another as \"custom:<name>\")",
        SINK_TYPES.join(", ")
    ))
}

/// Levenshtein distance, for the suggestion.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// An ordering key's header must be stored with the hook: a replay
/// resolves the lane again from the stored hook.
fn stored(store: &StoreHeaders, h: &str) -> Result<(), String> {
    if store.keeps(h) {
        return Ok(());
    }
    let why = if CREDENTIAL_HEADERS.contains(&h) {
        " (a credential header is never stored)"
    } else {
        ""
    };
    Err(format!(
        "header {h:?} is not kept by the source's store_headers{why}, so a replay could not resolve the lane again"
    ))
}
