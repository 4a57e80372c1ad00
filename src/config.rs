//! The filter's configuration: parsed and checked once, at load.
//!
//! Checking walks the JSON by hand rather than through serde derive so that
//! every error is reported (not just the first) and each one names the
//! source and sink it is about.

use crate::dedupe::{self, Dedupe, PresetKey, DEFAULT_TTL_MS};
use crate::json::{self, Path};
use crate::key::KeySource;
use crate::lanes::Lane;
use crate::stamps;
use serde_json::{Map, Value};
use std::collections::HashMap;

/// How a request path names its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// `<prefix>/<source_id>`
    Path,
    /// `<prefix>/<tenant>/<source_id>`
    TenantPath,
}

/// How the upstream delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Through a store-backed queue: lanes are possible.
    Queued,
    /// Inside the request: no store, so no lanes.
    Direct,
}

/// The default tenant; a source with it answers every tenant on a
/// `tenant_path` route.
pub const DEFAULT_TENANT: &str = "default";

/// Headers that `store_headers: "all"` never stores.
const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

const MAX_ID: usize = 64;
const MAX_SINKS: usize = 65535;
const DEFAULT_MAX_JSON_BYTES: u64 = 1_048_576;
const DEFAULT_MAX_HELD_BYTES: u64 = 64 * 1_048_576;

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub routing: Routing,
    /// The prefix's path segments (empty for `/`).
    pub prefix: Vec<String>,
    pub max_json_bytes: usize,
    /// The body bytes one VM (one Envoy worker) holds at once, across its
    /// requests; at least max_json_bytes.
    pub max_held_bytes: usize,
    pub delivery: Delivery,
    pub sources: Vec<Source>,
    by_id: HashMap<String, usize>,
}

/// One webhook source.
#[derive(Debug, Clone)]
pub struct Source {
    pub id: String,
    pub tenant: String,
    pub dedupe: Option<Dedupe>,
    /// The ordered sinks, by sink index.
    pub lanes: Vec<Lane>,
    /// Every JSON path this source reads; one decode serves them all.
    pub paths: Vec<Path>,
}

impl Source {
    /// Whether a key of this source comes from the body, so the filter must
    /// buffer it; a header-only source is stamped at the headers.
    pub fn needs_body(&self) -> bool {
        !self.paths.is_empty()
    }
}

impl Config {
    /// Looks a source up by id: its index and itself.
    pub fn find(&self, id: &str) -> Option<(usize, &Source)> {
        let i = *self.by_id.get(id)?;
        Some((i, self.sources.get(i)?))
    }

    /// Sources without dedupe: their provider retries look like new events.
    pub fn undeduped(&self) -> impl Iterator<Item = &Source> {
        self.sources.iter().filter(|s| s.dedupe.is_none())
    }

    /// A one-line summary, as `hookstamp check` prints it.
    pub fn summary(&self) -> String {
        let lanes: usize = self.sources.iter().map(|s| s.lanes.len()).sum();
        let undeduped: Vec<&str> = self.undeduped().map(|s| s.id.as_str()).collect();
        let mut line = format!(
            "ok: {} source(s), {} ordered sink(s)",
            self.sources.len(),
            lanes
        );
        if !undeduped.is_empty() {
            line.push_str(&format!(", without dedupe: {}", undeduped.join(", ")));
        }
        line
    }
}

/// A configuration that passed its checks, with its load-time warnings.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<String>,
}

/// Envoy's default per_connection_buffer_limit_bytes.
pub const ENVOY_DEFAULT_BUFFER_LIMIT: usize = 1_048_576;

/// The filter holds a body under Envoy's flow control up to max_json_bytes;
/// Envoy stops reading at the listener's buffer limit. A limit below
/// max_json_bytes cannot be seen from the filter, so say it at load.
fn buffer_limit_warning(config: &Config) -> Option<String> {
    let max = config.max_json_bytes;
    let waits = config.sources.iter().any(Source::needs_body);
    (waits && max > ENVOY_DEFAULT_BUFFER_LIMIT).then(|| {
        format!(
            "max_json_bytes is {max}, above Envoy's default per_connection_buffer_limit_bytes \
             ({ENVOY_DEFAULT_BUFFER_LIMIT}): set the listener's limit to at least {max}, or a \
             body between the two hangs until Envoy's stream idle timeout"
        )
    })
}

/// Parses and checks a configuration; on failure returns every error.
pub fn load(text: &str) -> Result<Loaded, Vec<String>> {
    let value: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Err(vec![format!("config: not valid JSON: {e}")]),
    };
    let mut errs = Vec::new();
    let config = check(&value, &mut errs);
    match config {
        Some(config) if errs.is_empty() => {
            let mut warnings: Vec<String> = config
                .undeduped()
                .map(|s| {
                    format!(
                        "source '{}' has no dedupe: a provider's retry of it is indistinguishable from a new event",
                        s.id
                    )
                })
                .collect();
            warnings.extend(buffer_limit_warning(&config));
            Ok(Loaded { config, warnings })
        }
        _ => Err(errs),
    }
}

/// Reports fields of `obj` that are not in `known`.
fn unknown_fields(obj: &Map<String, Value>, known: &[&str], ctx: &str, errs: &mut Vec<String>) {
    for k in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        errs.push(format!(
            "{ctx}: unknown field {k:?} (known: {})",
            known.join(", ")
        ));
    }
}

/// A field that may be absent; `null` counts as absent.
fn field<'v>(obj: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    obj.get(name).filter(|v| !v.is_null())
}

fn id_ok(s: &str, extra: &[u8]) -> bool {
    (1..=MAX_ID).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || extra.contains(&b))
}

/// A tenant: `[A-Za-z0-9_-]{1,64}`.
pub fn tenant_ok(s: &str) -> bool {
    id_ok(s, b"")
}

/// A source id: `[A-Za-z0-9._-]{1,64}`.
pub fn source_id_ok(s: &str) -> bool {
    id_ok(s, b".")
}

/// A top-level field that takes one of a few strings; the first is the
/// default.
fn choice<T: Copy>(
    obj: &Map<String, Value>,
    name: &str,
    options: &[(&str, T)],
    errs: &mut Vec<String>,
) -> T {
    let default = options[0].1;
    let Some(v) = field(obj, name) else {
        return default;
    };
    if let Some(&(_, t)) = options.iter().find(|(o, _)| v.as_str() == Some(*o)) {
        return t;
    }
    let names: Vec<String> = options.iter().map(|(o, _)| format!("{o:?}")).collect();
    errs.push(format!("config: {name} must be {}", names.join(" or ")));
    default
}

/// A positive byte count of at most u32::MAX (the wasm32 address space).
fn byte_count(obj: &Map<String, Value>, name: &str, default: u64, errs: &mut Vec<String>) -> u64 {
    let Some(v) = field(obj, name) else {
        return default;
    };
    match v.as_u64() {
        Some(n) if n > 0 && n <= u64::from(u32::MAX) => n,
        _ => {
            errs.push(format!(
                "config: {name} must be a positive integer of at most {}, got {v}",
                u32::MAX
            ));
            default
        }
    }
}

fn check(v: &Value, errs: &mut Vec<String>) -> Option<Config> {
    let Some(obj) = v.as_object() else {
        errs.push("config: must be a JSON object".into());
        return None;
    };
    unknown_fields(
        obj,
        &[
            "routing",
            "prefix",
            "max_json_bytes",
            "max_held_bytes",
            "delivery",
            "sources",
        ],
        "config",
        errs,
    );
    let routing = choice(
        obj,
        "routing",
        &[
            ("path", Routing::Path),
            ("tenant_path", Routing::TenantPath),
        ],
        errs,
    );
    let prefix = match field(obj, "prefix").map(Value::as_str) {
        None => vec!["webhooks".to_owned()],
        Some(Some(p)) if prefix_ok(p) => segments(p),
        Some(_) => {
            errs.push(
                "config: prefix must be a path starting with \"/\", of visible ASCII without \"?\" or \"#\""
                    .into(),
            );
            Vec::new()
        }
    };
    let max_json_bytes = byte_count(obj, "max_json_bytes", DEFAULT_MAX_JSON_BYTES, errs);
    let max_held_bytes = byte_count(obj, "max_held_bytes", DEFAULT_MAX_HELD_BYTES, errs);
    if max_held_bytes < max_json_bytes {
        errs.push(format!(
            "config: max_held_bytes ({max_held_bytes}) must be at least max_json_bytes ({max_json_bytes})"
        ));
    }
    let delivery = choice(
        obj,
        "delivery",
        &[("queued", Delivery::Queued), ("direct", Delivery::Direct)],
        errs,
    );
    let mut sources = Vec::new();
    match obj.get("sources").map(Value::as_array) {
        None => errs.push("config: sources is required".into()),
        Some(None) => errs.push("config: sources must be a list".into()),
        Some(Some(list)) => {
            for (i, s) in list.iter().enumerate() {
                if let Some(src) = check_source(i, s, delivery, errs) {
                    sources.push(src);
                }
            }
        }
    }
    let mut by_id = HashMap::new();
    for (i, s) in sources.iter().enumerate() {
        if by_id.insert(s.id.clone(), i).is_some() {
            errs.push(format!("source: source '{}': id is not unique", s.id));
        }
    }
    Some(Config {
        routing,
        prefix,
        max_json_bytes: usize::try_from(max_json_bytes).unwrap_or(usize::MAX),
        max_held_bytes: usize::try_from(max_held_bytes).unwrap_or(usize::MAX),
        delivery,
        sources,
        by_id,
    })
}

/// A prefix a request path can match: the query and fragment are cut off a
/// path before routing, and paths arrive as visible ASCII.
fn prefix_ok(p: &str) -> bool {
    p.starts_with('/')
        && p.bytes()
            .all(|b| b.is_ascii_graphic() && b != b'?' && b != b'#')
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

fn check_source(i: usize, v: &Value, delivery: Delivery, errs: &mut Vec<String>) -> Option<Source> {
    let Some(obj) = v.as_object() else {
        errs.push(format!("source: source #{i}: must be an object"));
        return None;
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            errs.push(format!(
                "source: source #{i}: id is required and must be a string"
            ));
            format!("#{i}")
        }
    };
    let name = format!("source '{id}'");
    if obj.get("id").is_some_and(Value::is_string) && !source_id_ok(&id) {
        errs.push(format!(
            "source: {name}: id must match [A-Za-z0-9._-]{{1,64}}"
        ));
    }
    unknown_fields(
        obj,
        &["id", "tenant", "dedupe", "store_headers", "sinks"],
        &format!("source: {name}"),
        errs,
    );
    let tenant = match field(obj, "tenant") {
        None => DEFAULT_TENANT.to_owned(),
        Some(Value::String(t)) if tenant_ok(t) => t.clone(),
        Some(t) => {
            errs.push(format!(
                "source: {name}: tenant must match [A-Za-z0-9_-]{{1,64}}, got {t}"
            ));
            DEFAULT_TENANT.to_owned()
        }
    };
    let mut paths: Vec<Path> = Vec::new();
    let dedupe = field(obj, "dedupe").and_then(|d| check_dedupe(d, &name, &mut paths, errs));
    let store = check_store_headers(field(obj, "store_headers"), &name, errs);
    let mut lanes = Vec::new();
    match field(obj, "sinks") {
        None => {}
        Some(Value::Array(sinks)) => {
            if sinks.len() > MAX_SINKS {
                errs.push(format!(
                    "sink: {name}: at most {MAX_SINKS} sinks, got {}",
                    sinks.len()
                ));
            }
            for (idx, s) in sinks.iter().enumerate().take(MAX_SINKS) {
                let ctx = SinkCtx {
                    id: &id,
                    name: &name,
                    index: idx,
                    delivery,
                    store: &store,
                };
                if let Some(lane) = check_sink(&ctx, s, &mut paths, errs) {
                    lanes.push(lane);
                }
            }
        }
        Some(_) => errs.push(format!("sink: {name}: sinks must be a list")),
    }
    Some(Source {
        id,
        tenant,
        dedupe,
        lanes,
        paths,
    })
}

fn check_store_headers(v: Option<&Value>, name: &str, errs: &mut Vec<String>) -> StoreHeaders {
    match v {
        None => StoreHeaders::All,
        Some(Value::String(s)) if s == "all" => StoreHeaders::All,
        Some(Value::String(s)) if s == "none" => StoreHeaders::None,
        Some(Value::Array(list)) => {
            let mut names = Vec::new();
            for h in list {
                match h.as_str() {
                    Some(s) if !s.is_empty() => names.push(s.to_ascii_lowercase()),
                    _ => errs.push(format!(
                        "source: {name}: store_headers entries must be non-empty header names, got {h}"
                    )),
                }
            }
            StoreHeaders::Only(names)
        }
        Some(other) => {
            errs.push(format!(
                "source: {name}: store_headers must be \"all\", \"none\" or a list of header names, got {other}"
            ));
            StoreHeaders::All
        }
    }
}

/// Adds a path to the source's table (once) and returns its index.
fn intern(paths: &mut Vec<Path>, path: Path) -> usize {
    if let Some(i) = paths.iter().position(|p| *p == path) {
        return i;
    }
    paths.push(path);
    paths.len() - 1
}

/// Checks a header name used as a key source; returns it lowercased.
fn key_header(h: &str) -> Result<String, String> {
    if h.is_empty() {
        return Err("header name is empty".into());
    }
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

fn key_path(p: &str) -> Result<Path, String> {
    json::parse_path(p).ok_or_else(|| format!("json path {p:?} has an empty segment"))
}

fn check_dedupe(
    v: &Value,
    name: &str,
    paths: &mut Vec<Path>,
    errs: &mut Vec<String>,
) -> Option<Dedupe> {
    let ctx = format!("dedupe: {name}");
    let (obj, preset) = match v {
        Value::String(p) => (None, Some(p.as_str())),
        Value::Object(o) => (Some(o), None),
        _ => {
            errs.push(format!("{ctx}: must be a preset name or an object"));
            return None;
        }
    };
    let mut ttl_ms = DEFAULT_TTL_MS;
    let mut forms: Vec<(&str, &Value)> = Vec::new();
    if let Some(o) = obj {
        unknown_fields(o, &["preset", "header", "json", "ttl_ms"], &ctx, errs);
        forms = ["preset", "header", "json"]
            .iter()
            .filter_map(|f| field(o, f).map(|v| (*f, v)))
            .collect();
        if let Some(t) = field(o, "ttl_ms") {
            match t.as_u64() {
                Some(n) if n > 0 => ttl_ms = n,
                _ => errs.push(format!("{ctx}: ttl_ms must be a positive integer, got {t}")),
            }
        }
    }
    let form = match (preset, forms.as_slice()) {
        (Some(p), _) => ("preset", p),
        (None, [(f, Value::String(s))]) => (*f, s.as_str()),
        (None, [(f, other)]) => {
            errs.push(format!("{ctx}: {f} must be a string, got {other}"));
            return None;
        }
        (None, []) => {
            errs.push(format!("{ctx}: needs one of preset, header or json"));
            return None;
        }
        (None, _) => {
            errs.push(format!(
                "{ctx}: takes exactly one of preset, header or json"
            ));
            return None;
        }
    };
    let key = match form {
        ("preset", p) => match dedupe::preset(p) {
            Some(PresetKey::Header(h)) => KeySource::Header((*h).to_owned()),
            Some(PresetKey::Json(j)) => {
                KeySource::Json(intern(paths, j.split('.').map(str::to_owned).collect()))
            }
            None => {
                errs.push(format!(
                    "{ctx}: unknown preset {p:?} (known: {})",
                    dedupe::preset_names()
                ));
                return None;
            }
        },
        ("header", h) => match key_header(h) {
            Ok(h) => KeySource::Header(h),
            Err(e) => {
                errs.push(format!("{ctx}: {e}"));
                return None;
            }
        },
        (_, j) => match key_path(j) {
            Ok(p) => KeySource::Json(intern(paths, p)),
            Err(e) => {
                errs.push(format!("{ctx}: {e}"));
                return None;
            }
        },
    };
    Some(Dedupe::new(key, ttl_ms))
}

struct SinkCtx<'a> {
    id: &'a str,
    name: &'a str,
    index: usize,
    delivery: Delivery,
    store: &'a StoreHeaders,
}

/// Checks one sink; returns its lane when it is ordered.
fn check_sink(
    ctx: &SinkCtx,
    v: &Value,
    paths: &mut Vec<Path>,
    errs: &mut Vec<String>,
) -> Option<Lane> {
    let before = errs.len();
    let Some(obj) = v.as_object() else {
        errs.push(format!(
            "sink: {} sink {}: must be an object",
            ctx.name, ctx.index
        ));
        return None;
    };
    let kind = match field(obj, "type") {
        None => None,
        Some(Value::String(t)) if !t.is_empty() => Some(t.as_str()),
        Some(t) => {
            errs.push(format!(
                "sink: {} sink {}: type must be a non-empty string, got {t}",
                ctx.name, ctx.index
            ));
            None
        }
    };
    let here = match kind {
        Some(t) => format!("sink: {} sink {} ({t})", ctx.name, ctx.index),
        None => format!("sink: {} sink {}", ctx.name, ctx.index),
    };
    unknown_fields(obj, &["type", "ordered", "ordering_key"], &here, errs);
    let ordered = match field(obj, "ordered") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(o) => {
            errs.push(format!("{here}: ordered must be true or false, got {o}"));
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
            errs.push(format!(
                "{here}: a string ordering_key is the legacy static Pub/Sub key; an ordered sink takes {{\"header\": name}} or {{\"json\": path}}"
            ));
            return None;
        }
        Some(k) => match ordering_key(k, ctx.store) {
            Ok(src) => Some(src),
            Err(e) => {
                errs.push(format!("{here}: {e}"));
                return None;
            }
        },
    };
    if key.is_some() && !ordered {
        errs.push(format!("{here}: ordering_key needs \"ordered\": true"));
    }
    if ordered && ctx.delivery == Delivery::Direct {
        errs.push(format!(
            "{here}: an ordered sink needs \"delivery\": \"queued\" (lanes need the store-backed queue)"
        ));
    }
    if !ordered || errs.len() > before {
        return None;
    }
    let sink = u16::try_from(ctx.index).ok()?;
    let key = key.map(|k| match k {
        OrderingKey::Header(h) => KeySource::Header(h),
        OrderingKey::Json(p) => KeySource::Json(intern(paths, p)),
    });
    Some(Lane::new(sink, key, ctx.id))
}

enum OrderingKey {
    Header(String),
    Json(Path),
}

fn ordering_key(v: &Value, store: &StoreHeaders) -> Result<OrderingKey, String> {
    const FORM: &str = "ordering_key must be {\"header\": name} or {\"json\": path}";
    let Some(obj) = v.as_object() else {
        return Err(format!("{FORM}, got {v}"));
    };
    match (obj.len(), obj.get("header"), obj.get("json")) {
        (1, Some(Value::String(h)), None) => {
            let h = key_header(h)?;
            if !store.keeps(&h) {
                let why = if CREDENTIAL_HEADERS.contains(&h.as_str()) {
                    " (a credential header is never stored)"
                } else {
                    ""
                };
                return Err(format!(
                    "ordering_key header {h:?} is not kept by the source's store_headers{why}, so a replay could not resolve the lane again"
                ));
            }
            Ok(OrderingKey::Header(h))
        }
        (1, None, Some(Value::String(j))) => key_path(j).map(OrderingKey::Json),
        _ => Err(format!("{FORM}, got {v}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let l = load(r#"{"sources":[{"id":"gh","dedupe":"github"}]}"#).unwrap();
        assert_eq!(l.config.prefix, vec!["webhooks"]);
        assert_eq!(l.config.max_json_bytes, 1_048_576);
        assert_eq!(l.config.max_held_bytes, 64 * 1_048_576);
        assert_eq!(l.config.sources[0].tenant, "default");
        assert!(l.warnings.is_empty());
    }

    #[test]
    fn every_error_is_reported() {
        let errs = load(
            r#"{"sources":[{"id":"a","dedupe":"nope","sinks":[{"ordering_key":{"json":"x"}}]},
                           {"id":"a b"}]}"#,
        )
        .unwrap_err();
        assert_eq!(errs.len(), 3, "{errs:#?}");
    }
}
