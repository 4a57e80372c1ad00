//! The filter's configuration: the checked types, and `load`, which parses
//! and checks a configuration once, at load (see `check`).

mod affinity;
pub mod bounds;
mod dedupe;
mod diag;
mod events;
mod fields;
mod handshake;
mod keys;
mod reads;
mod scheme;
mod seal;
mod secrets;
mod sink;
mod source;
pub mod structpb;
mod top;
mod verify;

pub use diag::{Code, Diag, Scope};

use crate::affinity::Affinity;
use crate::dedupe::Dedupe;
use crate::json::Path;
use crate::lanes::Lane;
pub use crate::names::{source_id_ok, tenant_ok};
use crate::verify::Verify;

/// How a request path names its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// `<prefix>/<source_id>`
    Path,
    /// `<prefix>/<tenant>/<source_id>`
    TenantPath,
    /// Both forms, told apart by their number of segments.
    Both,
}

impl Routing {
    pub fn path(self) -> bool {
        matches!(self, Routing::Path | Routing::Both)
    }

    pub fn tenant_path(self) -> bool {
        matches!(self, Routing::TenantPath | Routing::Both)
    }
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

/// A checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub routing: Routing,
    /// The prefix's path segments (empty for `/`), as a canonical path
    /// spells them.
    pub prefix: Vec<String>,
    /// The same, lowercase: what the normalised view of a path is compared
    /// with (see `path`).
    pub prefix_view: Vec<String>,
    pub max_json_bytes: usize,
    /// The bytes one VM (one Envoy worker) holds at once for requests
    /// waiting for their body (Envoy's buffers for them included), peaks
    /// included; at least `budget::PEAK_FACTOR` × max_json_bytes and some.
    pub max_held_bytes: usize,
    /// How long a request may take to send its body, from its headers.
    pub max_hold_ms: u64,
    /// A body still arriving this long after its headers is slow: while the
    /// budget is fuller than `budget::trim_to`, the tick answers the slow
    /// ones 408, the stalest first.
    pub slow_body_ms: u64,
    /// How long a streamed request (`"mode": "stream"`) may take in all,
    /// however steadily its body comes: its upstream request is held open
    /// meanwhile, which a forgery must not do for long.
    pub max_stream_ms: u64,
    /// How many streamed requests one worker keeps open upstream at once
    /// for this configuration: past it, 503; past three quarters of it, the
    /// tick answers the slowest (after slow_body_ms) 408.
    pub max_streams: usize,
    /// The slowest a streamed body may come on average, in bytes a second,
    /// once slow_body_ms has passed: slower, 408.
    pub min_stream_rate: u64,
    /// The longest body a streamed request may send: past it, 413 and the
    /// upstream request reset.
    pub max_stream_bytes: u64,
    /// The stamp seal, if the queue wants sealed stamps (see `seal`).
    pub seal: Option<Seal>,
    pub delivery: Delivery,
    pub sources: Vec<Source>,
    /// Each source's index, in the order of their ids (a binary search;
    /// no hashing, so no seed a worker must draw at load).
    by_id: Vec<usize>,
    /// Each path-form source's own path as a canonical path spells it
    /// (`/webhooks/github`), with its index, in `by_length` order: a POST
    /// to one, nearly every webhook, is routed by one comparison.
    own_paths: Vec<(String, usize)>,
}

/// Shorter first, then by bytes: an order in which most comparisons
/// are of two lengths, and a match is told by `same` (a slice's order
/// calls `memcmp`, in the .wasm a byte at a time behind a call).
pub(super) fn by_length(a: &str, b: &str) -> std::cmp::Ordering {
    match a.len().cmp(&b.len()) {
        std::cmp::Ordering::Equal if crate::pairs::same(a.as_bytes(), b.as_bytes()) => {
            std::cmp::Ordering::Equal
        }
        std::cmp::Ordering::Equal => a.cmp(b),
        unequal => unequal,
    }
}

/// The stamp seal (see `seal`): an HTTP message signature over the
/// request and its stamps.
#[derive(Debug, Clone)]
pub struct Seal {
    /// The keys, the first of which seals (the queue accepts any, for
    /// rotation).
    pub keys: Vec<crate::verify::Secret>,
    /// The signature's `keyid`: a name for the sealing key, never the key.
    pub key_id: String,
    /// How long a seal is good for: its `expires` is its `created` plus
    /// this many seconds.
    pub expires_s: u64,
}

/// One webhook source.
#[derive(Debug, Clone)]
pub struct Source {
    pub id: String,
    pub tenant: String,
    pub dedupe: Option<Dedupe>,
    /// What the idempotency key of a request for the source's own tenant
    /// begins with, `<tenant>:<id>:` encoded: made once, at load.
    pub idempotency_prefix: String,
    /// The ordered sinks, by sink index.
    pub lanes: Vec<Lane>,
    /// Every JSON path this source reads; one decode serves them all.
    pub paths: Vec<Path>,
    /// Every header (lowercase) a key of this source reads: resolved at the
    /// request headers, so nothing else of them is kept for the body.
    pub headers: Vec<String>,
    /// Every form field a key of this source reads (form-encoded bodies).
    pub forms: Vec<String>,
    /// The form field whose value holds the JSON the paths are read in,
    /// when the body is form-encoded (GitHub's form content type sends
    /// `payload=<JSON>`).
    pub form_json: Option<String>,
    /// The content-type header's place in `headers`, where the body's form
    /// is told from JSON.
    pub content_type: Option<usize>,
    /// Its signature verification, if any.
    pub verify: Option<Verify>,
    /// Whether a key is the body's SHA-256 (`{"sha256": "body"}`): computed
    /// as the chunks pass, the body not copied for it.
    pub hashes_body: bool,
    /// What the source's events are (stamped `x-hookstamp-event-type`), and
    /// the rule that drops some (see `events`).
    pub event_type: Option<crate::key::KeySource>,
    pub events: Option<crate::events::Events>,
    /// An endpoint handshake the filter answers (see `handshake`).
    pub handshake: Option<crate::handshake::Handshake>,
    /// On a `tenant_path` route, the only tenants it accepts (from
    /// `tenants`, or the tenants of per-tenant secrets); `None`: any.
    pub tenants: Option<Vec<String>>,
    /// What its affinity stamp carries; `None` when affinity is off.
    pub affinity: Option<Affinity>,
    /// The route forms it is reachable by (the top-level `routing`, unless
    /// the source has its own).
    pub routing: Routing,
}

impl Source {
    /// Whether the filter must see this source's body before it stamps: a
    /// key comes from it, or its signature covers it. A header-only source
    /// without verification is stamped at the headers.
    pub fn needs_body(&self) -> bool {
        self.keeps_body()
            || self.hashes_body
            || self
                .verify
                .as_ref()
                .is_some_and(|v| v.mode == crate::verify::Mode::Hold)
    }

    /// Whether the source's signature is checked as the body streams
    /// through (`"mode": "stream"`): its headers go at once.
    pub fn streams(&self) -> bool {
        self.verify
            .as_ref()
            .is_some_and(|v| v.mode == crate::verify::Mode::Stream)
    }

    /// Whether the source's provider never redelivers a failed delivery by
    /// itself (`providers`: GitHub): its scheme is that provider's, or a key
    /// reads the header of that provider's event id (GitHub's delivery id).
    /// Every answer but a 2xx loses such an event until someone redelivers
    /// it.
    pub fn never_redelivered(&self) -> bool {
        let scheme = match self.verify.as_ref().map(|v| &v.scheme) {
            Some(crate::verify::Scheme::Preset(p)) => Some(*p),
            _ => None,
        };
        crate::providers::PROVIDERS
            .iter()
            .filter(|p| p.never_redelivers())
            .any(|p| {
                (scheme.is_some() && p.scheme == scheme)
                    || p.event_id_headers()
                        .iter()
                        .any(|h| self.headers.iter().any(|r| r == h))
            })
    }

    /// Whether the body must be copied into the VM: only for keys read in
    /// it (a signature is computed as the chunks pass).
    pub fn keeps_body(&self) -> bool {
        !self.paths.is_empty()
            || !self.forms.is_empty()
            || self.handshake.as_ref().is_some_and(|h| !h.on_get())
    }

    /// Whether a tenant of the path may use this source.
    pub fn accepts(&self, tenant: &str) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|ts| ts.iter().any(|t| t == tenant))
    }
}

impl Config {
    /// Looks a source up by id: its index and itself.
    pub fn find(&self, id: &str) -> Option<(usize, &Source)> {
        // A few sources: comparing ids is cheaper than hashing one.
        if self.sources.len() <= 8 {
            let named = |s: &Source| crate::pairs::same(s.id.as_bytes(), id.as_bytes());
            return self.sources.iter().enumerate().find(|(_, s)| named(s));
        }
        let at = self
            .by_id
            .binary_search_by(|&i| self.id_at(i).cmp(id))
            .ok()?;
        let i = *self.by_id.get(at)?;
        Some((i, self.sources.get(i)?))
    }

    /// The source whose own path `path` is, as the configuration spells
    /// it (its query and fragment aside), for the source's own tenant.
    pub fn own_path(&self, path: &str) -> Option<(usize, &Source)> {
        let find = |path: &str| {
            let at = self
                .own_paths
                .binary_search_by(|(p, _)| by_length(p, path))
                .ok()?;
            let &(_, index) = self.own_paths.get(at)?;
            Some((index, self.sources.get(index)?))
        };
        // Nearly every webhook's path has no query: looked up whole first,
        // with no search for one.
        find(path).or_else(|| {
            let end = path.bytes().position(|b| matches!(b, b'?' | b'#'))?;
            find(path.get(..end)?)
        })
    }

    /// The id of the source at `i` (none past the end).
    fn id_at(&self, i: usize) -> &str {
        self.sources.get(i).map_or("", |s| s.id.as_str())
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

/// The words that mark the buffer-limit warning, which `check` drops for a
/// listener it can see holds max_json_bytes.
pub const BUFFER_LIMIT_WARNING: &str = "above Envoy's default per_connection_buffer_limit_bytes";

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
             body between the two waits for max_hold_ms and is answered 408"
        )
    })
}

/// GitHub's largest delivery: its payloads are capped at 25 MB (taken as
/// MiB, the larger reading).
pub const GITHUB_MAX_PAYLOAD: usize = 25 * 1024 * 1024;

/// A GitHub source (its scheme, or its dedupe key, GitHub's delivery id)
/// that holds the body under a max_json_bytes below GitHub's largest
/// delivery: GitHub never redelivers by itself, so a delivery answered 413
/// is lost.
fn github_limit_warnings(config: &Config) -> Vec<String> {
    let max = config.max_json_bytes;
    if max >= GITHUB_MAX_PAYLOAD {
        return Vec::new();
    }
    config
        .sources
        .iter()
        .filter(|s| s.needs_body() && s.never_redelivered())
        .map(|s| {
            format!(
                "source '{}' is GitHub's and holds the body, but max_json_bytes is {max}: GitHub sends deliveries \
                 of up to 25 MB and never redelivers one by itself, so a larger one is answered 413 and lost; \
                 set max_json_bytes to {GITHUB_MAX_PAYLOAD} (max_held_bytes at least four times that, and the \
                 listener's per_connection_buffer_limit_bytes to match)",
                s.id
            )
        })
        .collect()
}

/// Parses and checks a configuration, secrets read from the process's
/// (the Wasm VM's) environment; on failure returns every error, each naming
/// what it is about.
pub fn load(text: &str) -> Result<Loaded, Vec<String>> {
    load_with_env(text, &|name| std::env::var(name).ok())
}

/// `load`, with the environment given: `env(NAME)` is a variable's value.
pub fn load_with_env(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Loaded, Vec<String>> {
    let value: serde_json::Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Err(vec![format!("config: not valid JSON: {e}")]),
    };
    load_value(&value, env)
}

/// The plugin configuration as Envoy hands it over: JSON text (a
/// `google.protobuf.StringValue`), or a `google.protobuf.Struct` in its
/// protobuf wire form (a filter configured in YAML). Secrets from the
/// process's environment.
pub fn load_plugin_config(raw: &[u8]) -> Result<Loaded, Vec<String>> {
    let env = |name: &str| std::env::var(name).ok();
    let text = std::str::from_utf8(raw).ok();
    match text.map(str::trim_start) {
        Some(t) if t.starts_with('{') || t.starts_with('[') => load_with_env(t, &env),
        _ => match structpb::decode(raw) {
            Ok(value) => load_value(&value, &env),
            Err(e) => Err(vec![format!(
                "config: the plugin configuration is neither JSON text (a google.protobuf.StringValue) \
                 nor a google.protobuf.Struct, the two types that work: as a Struct, {} at byte {}",
                e.what, e.at
            )]),
        },
    }
}

/// Every error of a parsed configuration, structured (scope, code,
/// message), secrets read from the process's environment; empty when it
/// loads.
pub fn diagnose(value: &serde_json::Value) -> Vec<Diag> {
    top::check(value, &|name| std::env::var(name).ok()).1
}

/// `load_with_env`, and the warnings of a configuration that does not load
/// (one that loads has its own, in `Loaded`): the CLI says both.
pub fn load_reporting(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Result<Loaded, Vec<String>>, Vec<String>) {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => checked(&value, env),
        Err(e) => (
            Err(vec![format!("config: not valid JSON: {e}")]),
            Vec::new(),
        ),
    }
}

fn load_value(
    value: &serde_json::Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Loaded, Vec<String>> {
    checked(value, env).0
}

/// The loaded configuration or every error, and every warning: those of
/// what checked too where something else is in error (a source whose
/// dedupe is in error is not said to have none).
fn checked(
    value: &serde_json::Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Result<Loaded, Vec<String>>, Vec<String>) {
    let (config, diags, warned) = top::check(value, env);
    let mut warnings: Vec<String> = warned.iter().map(Diag::to_string).collect();
    if let Some(config) = &config {
        let bad_dedupe = |id: &str| {
            diags
                .iter()
                .any(|d| d.scope == Scope::Dedupe(id.to_owned()))
        };
        warnings.extend(config.undeduped().filter(|s| !bad_dedupe(&s.id)).map(|s| {
            format!(
                "source '{}' has no dedupe: a provider's retry of it is indistinguishable from a new event",
                s.id
            )
        }));
        warnings.extend(buffer_limit_warning(config));
        warnings.extend(github_limit_warnings(config));
    }
    match config {
        Some(config) if diags.is_empty() => {
            let loaded = Loaded {
                config,
                warnings: warnings.clone(),
            };
            (Ok(loaded), warnings)
        }
        _ => (Err(diags.iter().map(Diag::to_string).collect()), warnings),
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
        assert_eq!(l.config.max_hold_ms, 10_000);
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
