//! The proxy-wasm glue: a root context that checks the configuration once,
//! and an HTTP context per request that hands headers and body to the core.
//!
//! Every host call goes through `hostcalls`, which returns a status instead
//! of panicking like the 0.2.x trait helpers do (a panic would abort the VM
//! and fail every request behind it), except the header map read: that one
//! calls the ABI import itself to read the map in place, and checks its
//! status the same way. The body callback is an export of hookstamp's own
//! (see `hookstamp_on_request_body`).

use crate::config::{self, Config};
use crate::pairs;
use crate::resolve::{self, Body, Stamped};
use crate::route::{self, Route, REJECT_BODY, REJECT_STATUS};
use crate::stamps;
use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType, MetricType, Status};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(Root { shared: None }) });
}}

/// What every request of a configured filter shares, immutable.
struct Shared {
    config: Config,
    metrics: Metrics,
}

/// Metric ids. Labels ride in the name as `.source=<id>;` and `.sink=<n>;`,
/// which the bootstrap's stats_tags turn into Prometheus labels; a key is
/// never part of a name.
struct Metrics {
    rejected: Option<u32>,
    spoofed_unrouted: Option<u32>,
    sources: Vec<SourceMetrics>,
}

struct SourceMetrics {
    stamped: Option<u32>,
    dedupe_key_missing: Option<u32>,
    body_over_limit: Option<u32>,
    body_not_held: Option<u32>,
    spoofed: Option<u32>,
    /// (sink index, counter) for each keyed lane.
    lane_key_missing: Vec<(u16, Option<u32>)>,
}

fn metric(kind: MetricType, name: &str) -> Option<u32> {
    match hostcalls::define_metric(kind, name) {
        Ok(id) => Some(id),
        Err(e) => {
            warn!("cannot define metric {name}: {e:?}");
            None
        }
    }
}

fn bump(id: Option<u32>, by: usize) {
    // Each increment is a host call: none for nothing.
    if let Some(id) = id.filter(|_| by > 0) {
        // A failed increment is not worth failing a request over.
        let _ = hostcalls::increment_metric(id, i64::try_from(by).unwrap_or(i64::MAX));
    }
}

impl Metrics {
    fn define(cfg: &Config) -> Self {
        let counter = |name: &str| metric(MetricType::Counter, name);
        let sources = cfg
            .sources
            .iter()
            .map(|s| {
                let tag = format!(".source={};", s.id);
                SourceMetrics {
                    stamped: counter(&format!("hookstamp_requests_stamped_total{tag}")),
                    dedupe_key_missing: counter(&format!(
                        "hookstamp_dedupe_key_missing_total{tag}"
                    )),
                    body_over_limit: counter(&format!("hookstamp_body_over_limit_total{tag}")),
                    body_not_held: counter(&format!("hookstamp_body_not_held_total{tag}")),
                    spoofed: counter(&format!("hookstamp_spoofed_headers_stripped_total{tag}")),
                    lane_key_missing: s
                        .lanes
                        .iter()
                        .filter(|l| l.key.is_some())
                        .map(|l| {
                            let name =
                                format!("hookstamp_lane_key_missing_total{tag}.sink={};", l.sink);
                            (l.sink, counter(&name))
                        })
                        .collect(),
                }
            })
            .collect();
        if let Some(g) = metric(MetricType::Gauge, "hookstamp_sources_without_dedupe") {
            let _ = hostcalls::record_metric(g, cfg.undeduped().count() as u64);
        }
        Metrics {
            rejected: counter("hookstamp_requests_rejected_total"),
            spoofed_unrouted: counter("hookstamp_spoofed_headers_stripped_unrouted_total"),
            sources,
        }
    }

    fn stamped(&self, r: &Routed, s: &Stamped) {
        let Some(m) = self.sources.get(r.source) else {
            return;
        };
        bump(m.stamped, 1);
        bump(m.spoofed, r.spoofed);
        if s.dedupe_key_missing {
            bump(m.dedupe_key_missing, 1);
        }
        if r.not_held {
            bump(m.body_not_held, 1);
        } else if s.body_too_large {
            bump(m.body_over_limit, 1);
        }
        for sink in &s.lane_keys_missing {
            if let Some((_, id)) = m.lane_key_missing.iter().find(|(k, _)| k == sink) {
                bump(*id, 1);
            }
        }
    }
}

struct Root {
    shared: Option<Rc<Shared>>,
}

impl Context for Root {}

impl RootContext for Root {
    fn on_configure(&mut self, _size: usize) -> bool {
        let raw = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(Some(raw)) => raw,
            _ => {
                error!("config: the plugin configuration is empty");
                return false;
            }
        };
        let Ok(text) = std::str::from_utf8(&raw) else {
            error!("config: the plugin configuration is not UTF-8");
            return false;
        };
        match config::load(text) {
            Ok(loaded) => {
                for w in &loaded.warnings {
                    warn!("{w}");
                }
                let metrics = Metrics::define(&loaded.config);
                info!("{}", loaded.config.summary());
                self.shared = Some(Rc::new(Shared {
                    config: loaded.config,
                    metrics,
                }));
                true
            }
            Err(errs) => {
                for e in &errs {
                    error!("{e}");
                }
                error!("rejected the configuration ({} error(s))", errs.len());
                false
            }
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        // The SDK panics on None, so an unconfigured filter still gets a
        // context; it answers 500 instead of forwarding unstamped hooks.
        Some(Box::new(Request {
            id: context_id,
            shared: self.shared.clone(),
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

/// A routed request whose stamps wait for the body.
struct Pending {
    shared: Rc<Shared>,
    source: usize,
    tenant: String,
    /// The request headers in the host's wire form (see `pairs`).
    headers: Vec<u8>,
    spoofed: usize,
    /// The body so far, copied chunk by chunk (see `hookstamp_on_request_body`).
    body: Held,
}

thread_local! {
    /// The requests waiting for their body, by context id. The body
    /// callback is hookstamp's own export, outside the SDK's dispatcher, so
    /// this state lives here rather than in `Request`.
    static PENDING: RefCell<HashMap<u32, Pending>> = RefCell::new(HashMap::new());
    /// The bytes all held bodies take (their capacity), against
    /// max_held_bytes.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// A body copied into the VM, its capacity counted in `HELD` while it
/// lives. The VM's memory is bounded and never shrinks; a VM out of memory
/// fails every request on its worker, so many slow uploads at once must
/// not add up past max_held_bytes.
#[derive(Default)]
struct Held(Vec<u8>);

impl Held {
    /// Appends a chunk, growing at most to `max` bytes; false, and nothing
    /// changed, when the growth would take `HELD` past `budget`.
    fn push(&mut self, chunk: Vec<u8>, max: usize, budget: usize) -> bool {
        let (len, cap) = (self.0.len(), self.0.capacity());
        let need = len.saturating_add(chunk.len());
        let new_cap = if len == 0 {
            // The first chunk becomes the body so far: no copy.
            chunk.capacity()
        } else if need > cap {
            // Doubling, so that many small chunks do not copy the body each.
            cap.saturating_mul(2).min(max).max(need)
        } else {
            cap
        };
        let others = HELD.get().saturating_sub(cap);
        if others.saturating_add(new_cap) > budget {
            return false;
        }
        if len == 0 {
            self.0 = chunk;
        } else {
            self.0.reserve_exact(new_cap - len);
            self.0.extend_from_slice(&chunk);
        }
        HELD.set(others.saturating_add(self.0.capacity()));
        true
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        HELD.set(HELD.get().saturating_sub(self.0.capacity()));
    }
}

/// What became of a body the filter waited for.
enum Kept {
    /// All of it is in (end of stream, or trailers).
    Whole,
    /// It went over max_json_bytes.
    OverLimit,
    /// Holding more would have passed max_held_bytes.
    NotHeld,
}

fn hold(id: u32, p: Pending) {
    PENDING.with(|m| m.borrow_mut().insert(id, p));
}

fn take(id: u32) -> Option<Pending> {
    PENDING.with(|m| m.borrow_mut().remove(&id))
}

struct Request {
    id: u32,
    shared: Option<Rc<Shared>>,
}

impl Drop for Request {
    fn drop(&mut self) {
        // A request reset before its body ended leaves nothing behind.
        take(self.id);
    }
}

impl Context for Request {}

/// Answers from the filter; the request goes no further.
fn reply(status: u32, body: &str) -> Action {
    let headers = vec![("content-type", "application/json")];
    if let Err(e) = hostcalls::send_http_response(status, headers, Some(body.as_bytes())) {
        error!("cannot send a local reply: {e:?}");
    }
    Action::Pause
}

fn internal_error(what: &str) -> Action {
    error!("{what}");
    reply(500, r#"{"error":"hookstamp_internal"}"#)
}

/// Adds the stamps to the request headers.
fn add_stamps(s: &Stamped) -> Result<(), String> {
    for (name, value) in &s.headers {
        hostcalls::add_map_value(MapType::HttpRequestHeaders, name, value)
            .map_err(|e| format!("cannot add {name}: {e:?}"))?;
    }
    Ok(())
}

mod abi {
    // Named as the host's import, so no toolchain treats it as undefined.
    #[link(wasm_import_module = "env")]
    extern "C" {
        /// The ABI's header map read. The SDK's `get_map_bytes` wraps it,
        /// but copies every name and value into an allocation of its own
        /// (and panics on an unexpected status); hookstamp reads the host's
        /// one buffer in place instead.
        pub fn proxy_get_header_map_pairs(map: u32, data: *mut *mut u8, size: *mut usize) -> u32;
    }
}

/// The request headers, in the host's wire form (see `pairs`).
fn request_headers() -> Result<Vec<u8>, String> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    let map = MapType::HttpRequestHeaders as u32;
    // SAFETY: the host only writes the two out-parameters.
    let status = unsafe { abi::proxy_get_header_map_pairs(map, &mut data, &mut size) };
    if status != Status::Ok as u32 {
        return Err(format!("cannot read request headers: status {status}"));
    }
    if data.is_null() {
        return Ok(Vec::new());
    }
    // SAFETY: the host allocated the buffer through the SDK's
    // proxy_on_memory_allocate, a boxed slice of exactly `size` bytes that
    // nothing else owns; this Vec takes it over and frees it.
    Ok(unsafe { Vec::from_raw_parts(data, size, size) })
}

/// Removes the named stamp-namespace headers from the request, each name
/// once: one removal takes every value of it.
fn strip(spoofed: &[&str]) -> Result<(), String> {
    for (i, n) in spoofed.iter().enumerate() {
        if !spoofed[..i].contains(n) {
            hostcalls::remove_map_value(MapType::HttpRequestHeaders, n)
                .map_err(|e| format!("cannot remove {n}: {e:?}"))?;
        }
    }
    Ok(())
}

fn header_text<'h>(headers: &[(&str, &'h [u8])], name: &str) -> &'h str {
    headers
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
        .unwrap_or("")
}

/// The request headers from their wire form, without the stamp namespace
/// (the core never sees a stamp header the client sent); and the names of
/// those stamp headers, one per value, as sent.
type Parsed<'r> = (Vec<(&'r str, &'r [u8])>, Vec<&'r str>);

fn parse(raw: &[u8]) -> Result<Parsed<'_>, String> {
    let mut headers =
        pairs::parse(raw).ok_or_else(|| "cannot parse the request headers".to_owned())?;
    let spoofed: Vec<&str> = headers
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| stamps::is_stamp_header(n))
        .collect();
    if !spoofed.is_empty() {
        headers.retain(|(n, _)| !stamps::is_stamp_header(n));
    }
    Ok((headers, spoofed))
}

/// A request routed to a source: which one, for which tenant, and how many
/// stamp headers the client had sent.
struct Routed<'a> {
    source: usize,
    tenant: &'a str,
    spoofed: usize,
    /// The body was let go unread: the VM held max_held_bytes already.
    not_held: bool,
}

/// Stamps a routed request and lets it go on.
fn finish(shared: &Shared, r: &Routed, headers: &[(&str, &[u8])], body: Body) -> Action {
    let Some(src) = shared.config.sources.get(r.source) else {
        return internal_error("routed to a missing source");
    };
    let stamped = resolve::stamp(src, r.tenant, headers, body);
    if let Err(e) = add_stamps(&stamped) {
        return internal_error(&e);
    }
    shared.metrics.stamped(r, &stamped);
    Action::Continue
}

impl Pending {
    /// Stamps the request from its body (or none, when it was not kept
    /// whole) and lets it go on.
    fn finish(self, kept: Kept) -> Action {
        // The wire form is from before the strip; parse drops those again.
        let (headers, _) = match parse(&self.headers) {
            Ok(h) => h,
            Err(e) => return internal_error(&e),
        };
        let routed = Routed {
            source: self.source,
            tenant: &self.tenant,
            spoofed: self.spoofed,
            not_held: matches!(kept, Kept::NotHeld),
        };
        let max = self.shared.config.max_json_bytes;
        let body = match kept {
            Kept::Whole => Body::of(&self.body.0, max),
            Kept::OverLimit | Kept::NotHeld => Body::TooLarge,
        };
        finish(&self.shared, &routed, &headers, body)
    }
}

impl HttpContext for Request {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let Some(shared) = self.shared.clone() else {
            return internal_error("request on an unconfigured filter");
        };
        let raw = match request_headers() {
            Ok(r) => r,
            Err(e) => return internal_error(&e),
        };
        let (headers, spoofed) = match parse(&raw) {
            Ok(h) => h,
            Err(e) => return internal_error(&e),
        };
        // Strip first, on every request: a client never chooses its stamps.
        if let Err(e) = strip(&spoofed) {
            return internal_error(&e);
        }
        let spoofed = spoofed.len();
        let cfg = &shared.config;
        let method = header_text(&headers, ":method");
        let path = header_text(&headers, ":path");
        let (source, tenant) = match route::route(cfg, method, path) {
            Route::Pass => {
                bump(shared.metrics.spoofed_unrouted, spoofed);
                return Action::Continue;
            }
            Route::Reject => {
                bump(shared.metrics.spoofed_unrouted, spoofed);
                bump(shared.metrics.rejected, 1);
                return reply(REJECT_STATUS, REJECT_BODY);
            }
            Route::Source { source, tenant } => (source, tenant),
        };
        let needs_body = cfg.sources.get(source).is_some_and(|s| s.needs_body());
        let routed = Routed {
            source,
            tenant,
            spoofed,
            not_held: false,
        };
        if !needs_body || end_of_stream {
            return finish(&shared, &routed, &headers, Body::Bytes(&[]));
        }
        let declared = header_text(&headers, "content-length").parse::<u64>().ok();
        if declared.is_some_and(|n| n > cfg.max_json_bytes as u64) {
            // Never wait for a body that will not be decoded.
            return finish(&shared, &routed, &headers, Body::TooLarge);
        }
        hold(
            self.id,
            Pending {
                shared: shared.clone(),
                source,
                tenant: tenant.to_owned(),
                headers: raw,
                spoofed,
                body: Held::default(),
            },
        );
        // Hold the headers until the body is in (allow_on_headers_stop_iteration).
        Action::Pause
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        // With trailers, end_of_stream never reaches the body callback.
        match take(self.id) {
            Some(p) => p.finish(Kept::Whole),
            None => Action::Continue,
        }
    }
}

/// The body callback's answers to the host (the ABI's FilterDataStatus).
mod data_status {
    pub const CONTINUE: u32 = 0;
    /// Envoy keeps the chunk and applies flow control past its buffer
    /// limit, instead of answering 413 as it does for StopIterationAndBuffer.
    pub const STOP_AND_WATERMARK: u32 = 2;
    pub const STOP_NO_BUFFER: u32 = 3;
}

/// proxy_on_request_body, hookstamp's own (the build renames it, dropping
/// the SDK's, whose `Action` cannot say StopIterationAndWatermark).
///
/// With StopIterationAndBuffer, Envoy adds each new chunk to its buffer
/// before the filter sees it, and answers 413 when that crosses the buffer
/// limit: a chunked body larger than max_json_bytes could get a 413 from
/// one large read, before the filter could let it through. With
/// StopIterationAndWatermark, Envoy holds the chunks under flow control and
/// hands the filter only the new one, which the filter copies; once the
/// copy would pass max_json_bytes the filter drops it and lets the request
/// go on whole, without JSON keys; the same when the VM already holds
/// max_held_bytes of bodies.
#[no_mangle]
pub extern "C" fn hookstamp_on_request_body(context_id: u32, size: usize, end: u32) -> u32 {
    let Some(mut p) = take(context_id) else {
        // Not waiting for a body: stamped at the headers, or not routed.
        return data_status::CONTINUE;
    };
    let (max, budget) = (
        p.shared.config.max_json_bytes,
        p.shared.config.max_held_bytes,
    );
    let action = if p.body.0.len().saturating_add(size) > max {
        p.finish(Kept::OverLimit)
    } else {
        match body_chunk(size).map(|chunk| p.body.push(chunk, max, budget)) {
            Err(e) => internal_error(&e),
            Ok(false) => p.finish(Kept::NotHeld),
            Ok(true) if end == 0 => {
                hold(context_id, p);
                return data_status::STOP_AND_WATERMARK;
            }
            Ok(true) => p.finish(Kept::Whole),
        }
    };
    match action {
        Action::Continue => data_status::CONTINUE,
        // A local reply was sent: nothing more to keep.
        _ => data_status::STOP_NO_BUFFER,
    }
}

/// The chunk Envoy just handed the body callback.
fn body_chunk(size: usize) -> Result<Vec<u8>, String> {
    if size == 0 {
        return Ok(Vec::new());
    }
    match hostcalls::get_buffer(BufferType::HttpRequestBody, 0, size) {
        Ok(b) => Ok(b.unwrap_or_default()),
        Err(e) => Err(format!("cannot read the body: {e:?}")),
    }
}
