//! The request lifecycle, host-free: route → stamp at the headers, or hold
//! the body → chunks → end, trailers, reset or deadline → over the limit or
//! over the budget → stamp or reply. `filter` maps the proxy-wasm exports
//! onto `Vm`'s methods one for one; the tests drive them with a mock host.
//!
//! Fail closed: a request under the prefix is stamped or answered by the
//! filter, never passed unstamped. A resource limit answers 503 or 408,
//! which a provider retries; a host call that fails answers 500.

use crate::budget::{self, Pool, MAX_REPLIES_PER_CALL, TICK_MS};
use crate::config::{self, Config};
use crate::decide::{self, Body, Verdict};
use crate::host::{DataStatus, HeadersStatus, Host, HostError, Level};
use crate::ids::ById;
use crate::metrics::{bump, Metrics, SourceMetrics};
use crate::pairs;
use crate::reply::{self, Reply};
use crate::route::{self, Route, Target};
use crate::strip::{self, strip};
use crate::verify::{OnFailure, Reason};

/// The request property (Envoy's filter state `wasm.hookstamp_why`) that
/// says why a stamped request lacks a key or a verified signature.
pub const WHY_PROPERTY: &str = "hookstamp_why";
use std::cell::Cell;
use std::rc::Rc;

mod held;

use held::{Check, Held};

/// A configured plugin (one root context): its config and metric ids.
pub struct Plugin {
    pub config: Config,
    pub metrics: Metrics,
    /// Whether the hint about allow_on_headers_stop_iteration was logged.
    hinted: Cell<bool>,
}

/// Everything one Wasm VM (one Envoy worker) keeps: its plugins, its
/// requests (each with its plugin and where it stands), and each plugin's
/// pool of held requests (each against its own max_held_bytes, so that one
/// listener's uploads cannot fill another's budget).
#[derive(Default)]
pub struct Vm {
    plugins: ById<Option<Rc<Plugin>>>,
    streams: ById<Stream>,
    pools: ById<Pool>,
    /// Each plugin's streamed requests (`"mode": "stream"`), apart: charged
    /// to the same budget, but never trimmed as slow, and their deadlines
    /// move with every chunk, so they must not stand in the held ones'
    /// order.
    streamed: ById<Pool>,
}

/// A request context: its plugin's root context, and where it stands.
struct Stream {
    root: u32,
    state: State,
}

/// Where a request stands.
enum State {
    /// Not held: its headers are yet to come, or it was stamped or passed,
    /// or its body was let go.
    Open,
    /// Held for its body, its bytes charged to its plugin's pool.
    Held(Box<Held>),
    /// Answered by the filter (or stopped and never let go): whatever Envoy
    /// still hands over for it goes no further, so that it can never be
    /// forwarded without its stamps.
    Answered,
}

impl Vm {
    /// The bytes held now by requests waiting for their body.
    pub fn held_bytes(&self) -> usize {
        self.pools
            .values()
            .chain(self.streamed.values())
            .map(Pool::held)
            .sum()
    }

    /// How many requests are held for their body.
    pub fn held_requests(&self) -> usize {
        self.pools
            .values()
            .chain(self.streamed.values())
            .map(Pool::len)
            .sum()
    }

    /// proxy_on_context_create: a root context (parent 0) or a request.
    pub fn on_context_create(&mut self, context: u32, parent: u32) {
        if parent == 0 {
            self.plugins.insert(context, None);
        } else {
            self.streams.insert(
                context,
                Stream {
                    root: parent,
                    state: State::Open,
                },
            );
        }
    }

    /// proxy_on_configure: checks the configuration; false (Envoy refuses
    /// the filter) with every error logged, each naming its source and sink.
    pub fn on_configure(&mut self, host: &mut impl Host, root: u32) -> bool {
        let raw = match host.plugin_config() {
            Ok(raw) if !raw.is_empty() => raw,
            Ok(_) => return refuse(host, &["config: the plugin configuration is empty".into()]),
            Err(e) => return refuse(host, &[format!("config: cannot read it: {e}")]),
        };
        let loaded = match config::load_plugin_config(&raw) {
            Ok(l) => l,
            Err(errs) => return refuse(host, &errs),
        };
        for w in &loaded.warnings {
            host.log(Level::Warn, w);
        }
        let config = loaded.config;
        if config.sources.iter().any(|s| s.needs_body() || s.streams()) {
            // Deadlines are checked on the tick too: a stalled body sends
            // no chunk that could notice it.
            if let Err(e) = host.set_tick_period_ms(TICK_MS) {
                return refuse(host, &[format!("config: cannot set the tick period: {e}")]);
            }
        }
        let metrics = Metrics::define(host, &config);
        host.log(
            Level::Info,
            &format!(
                "hookstamp {} {}",
                env!("CARGO_PKG_VERSION"),
                config.summary()
            ),
        );
        self.plugins.insert(
            root,
            Some(Rc::new(Plugin {
                config,
                metrics,
                hinted: Cell::new(false),
            })),
        );
        true
    }

    fn plugin_of(&self, context: u32) -> Option<Rc<Plugin>> {
        let root = self.streams.get(&context)?.root;
        self.plugins.get(&root)?.clone()
    }

    /// proxy_on_request_headers.
    pub fn on_request_headers(
        &mut self,
        host: &mut impl Host,
        context: u32,
        end_of_stream: bool,
    ) -> HeadersStatus {
        let Some(plugin) = self.plugin_of(context) else {
            // Never forward unstamped what an unconfigured filter let by.
            return answer_internal(host, None, "a request on an unconfigured filter");
        };
        let status = match self.headers(host, context, &plugin, end_of_stream) {
            Ok(status) => status,
            Err(e) => answer_internal(host, Some(&plugin), &e.to_string()),
        };
        if status == HeadersStatus::StopIteration && self.held_request(context).is_none() {
            self.mark_answered(context);
        }
        status
    }

    fn headers(
        &mut self,
        host: &mut impl Host,
        context: u32,
        plugin: &Rc<Plugin>,
        end_of_stream: bool,
    ) -> Result<HeadersStatus, Failure> {
        let raw = host.request_headers()?;
        let mut headers = pairs::parse(&raw).ok_or(Failure::Headers)?;
        // Strip first, on every request: a client never chooses its stamps.
        let spoofed = strip(host, &mut headers, strip::Map::Headers)?;
        let cfg = &plugin.config;
        let m = &plugin.metrics;
        // Bytes that are not UTF-8 stay visible (as U+FFFD): a path is never
        // read as empty, and so passed, for holding a byte such as 0xFF.
        let method = lossy(&headers, ":method");
        let path = lossy(&headers, ":path");
        let route = route::route(cfg, &method, &path);
        let Route::Source(Target {
            index: source,
            source: src,
            tenant,
        }) = route
        else {
            bump(host, m.spoofed_unrouted, spoofed);
            return Ok(match route.answer() {
                None => HeadersStatus::Continue,
                Some(r) => {
                    let counter = match &route {
                        Route::MethodNotAllowed => m.method_not_allowed,
                        Route::Handshake(t, _) => m.source(t.index).and_then(|m| m.handshakes),
                        _ => m.unknown_source,
                    };
                    bump(host, counter, 1);
                    send(host, &r)
                }
            });
        };
        let keys = decide::header_keys(src, &headers);
        let sealed = cfg.seal.is_some();
        // The clock only where a body is waited for (a deadline) or a
        // signature checked: a header-only source makes no such host call.
        let now = if src.needs_body() || src.streams() {
            host.now_ms()
        } else {
            0
        };
        let check = match &src.verify {
            None => Check::Off,
            Some(v) => {
                // A tenant the source has no secrets for is never routed to
                // it (per-tenant secrets are its tenant list); as in
                // `decide`, no secret verifies.
                let secrets = v.secrets_for(tenant).unwrap_or_default();
                let header = |n: &str| crate::pairs::first_header(&headers, n);
                let request = crate::verify::Request {
                    method: &method,
                    path: &path,
                };
                match v.start(secrets, header, request, now / 1000) {
                    Ok(p) => Check::Running(p),
                    Err(f) => Check::Failed(f.reason),
                }
            }
        };
        if matches!(check, Check::Off) && !src.needs_body() {
            // Stamped now, from the headers as they are: nothing is held,
            // so nothing is copied into a `Held`.
            let now = Stamping {
                plugin,
                source,
                tenant,
                header_keys: &keys,
                streaming: false,
                method: &method,
                path: &path,
                spoofed,
            };
            return Ok(stamp_and_forward(
                host,
                &now,
                Body::Bytes(&[]),
                None,
                None,
                None,
            ));
        }
        let root = self.streams.get(&context).map_or(0, |s| s.root);
        let mut w = Held {
            plugin: plugin.clone(),
            root,
            declared: None,
            source,
            // Twilio's form fields are signed sorted: its check needs the
            // whole body, kept and charged as body keys' is.
            keeps_body: src.keeps_body() || matches!(&check, Check::Running(p) if p.keeps_body()),
            tenant: tenant.to_owned(),
            header_keys: keys.iter().map(|k| k.map(<[u8]>::to_vec)).collect(),
            check,
            // What the seal covers; nothing is kept without one.
            method: if sealed {
                method.to_string()
            } else {
                String::new()
            },
            path: if sealed {
                path.to_string()
            } else {
                String::new()
            },
            digest: ((sealed || src.hashes_body) && src.needs_body())
                .then(|| Box::new(<sha2::Sha256 as sha2::Digest>::new())),
            spoofed,
            body: Vec::new(),
            deadline_ms: now.saturating_add(cfg.max_hold_ms),
            started_ms: now,
            seen_body: false,
            seen_bytes: 0,
            charged: 0,
            // A request with no body to stream is verified whole, here.
            streaming: src.streams() && !end_of_stream,
            tail: None,
        };
        let refused_now = matches!(
            (&w.check, src.verify.as_ref().map(|v| v.on_failure)),
            (Check::Failed(_), Some(OnFailure::Reject))
        );
        if !(src.needs_body() || w.streaming) || end_of_stream || refused_now {
            return Ok(finish(host, w, Kept::Whole));
        }
        let declared = text(&headers, "content-length").parse::<usize>().ok();
        if w.streaming {
            return Ok(self.stream(host, context, w, declared));
        }
        if declared.is_some_and(|n| n > cfg.max_json_bytes) {
            // Never wait for a body that will not be decoded or verified.
            return Ok(finish(host, w, Kept::OverLimit));
        }
        // Headers alone are charged the request's own state, nothing for
        // the length they declare: bytes are charged as they arrive.
        w.declared = declared;
        if !self.fits(root, w.overhead(), cfg.max_held_bytes) {
            return Ok(self.busy(host, &w));
        }
        self.hold(context, w);
        Ok(HeadersStatus::StopIteration)
    }

    /// A streamed request at its headers: stamped and let go at once, its
    /// signature check (and a held-back byte, with a declared length) kept
    /// until its body ends; charged to its plugin's pool like a held one.
    fn stream(
        &mut self,
        host: &mut impl Host,
        context: u32,
        mut w: Held,
        declared: Option<usize>,
    ) -> HeadersStatus {
        let max_held = w.plugin.config.max_held_bytes;
        w.declared = declared;
        if !self.fits(w.root, w.overhead(), max_held) {
            return self.busy(host, &w);
        }
        let status = forward(host, &w, Body::Bytes(&[]), None, Some(true), None);
        if status == HeadersStatus::Continue {
            self.hold(context, w);
        }
        status
    }

    /// A streamed request's body chunk: fed to its signature check and let
    /// through, but for its last byte where the request declared a length
    /// (which would complete the upstream request before the verdict); at
    /// the end, the verdict: the held byte let go, or 401 and the upstream
    /// request reset. Every chunk moves its deadline (an idle timeout).
    fn stream_body(
        &mut self,
        host: &mut impl Host,
        context: u32,
        mut w: Held,
        size: usize,
        end_of_stream: bool,
    ) -> DataStatus {
        let now = host.now_ms();
        if now > w.deadline_ms {
            return data(self.body_timeout(host, &w));
        }
        let plugin = w.plugin.clone();
        let chunk = match host.request_body(size) {
            Ok(c) => c,
            Err(e) => return data(answer_internal(host, Some(&plugin), &e.to_string())),
        };
        if let Check::Running(p) = &mut w.check {
            p.update(&chunk);
        }
        w.seen_bytes = w.seen_bytes.saturating_add(chunk.len());
        // What this callback lets through: the byte held back before, then
        // the chunk (the chunk itself, not a copy, where nothing was held).
        let mut out = chunk;
        let held_before = match w.tail.take() {
            Some(b) => {
                out.insert(0, b);
                true
            }
            None => false,
        };
        if end_of_stream {
            return match stream_verdict(host, w) {
                Ok(_) if !held_before => DataStatus::Continue,
                Ok(_) => match host.set_request_body(size, &out) {
                    Ok(()) => DataStatus::Continue,
                    Err(e) => data(answer_internal(host, Some(&plugin), &e.to_string())),
                },
                Err(r) => data(send(host, &r)),
            };
        }
        if w.declared.is_some() {
            w.tail = out.pop();
        }
        if held_before || w.tail.is_some() {
            if let Err(e) = host.set_request_body(size, &out) {
                return data(answer_internal(host, Some(&plugin), &e.to_string()));
            }
        }
        // Idle for max_hold_ms, or max_stream_ms in all: a stream keeps an
        // upstream request open, which a forgery must not do for long.
        let cfg = &plugin.config;
        w.deadline_ms = now
            .saturating_add(cfg.max_hold_ms)
            .min(w.started_ms.saturating_add(cfg.max_stream_ms));
        self.hold(context, w);
        DataStatus::Continue
    }

    /// proxy_on_request_body: copies the new chunk of a waiting request;
    /// stamps it at the end of the body, or answers it.
    pub fn on_request_body(
        &mut self,
        host: &mut impl Host,
        context: u32,
        size: usize,
        end_of_stream: bool,
    ) -> DataStatus {
        if self.answered(context) {
            return DataStatus::StopNoBuffer;
        }
        let status = self.body(host, context, size, end_of_stream);
        if status == DataStatus::StopNoBuffer {
            self.mark_answered(context);
        }
        status
    }

    fn body(
        &mut self,
        host: &mut impl Host,
        context: u32,
        size: usize,
        end_of_stream: bool,
    ) -> DataStatus {
        let Some(mut w) = self.release(context) else {
            // Not waiting for a body: stamped at the headers, or not routed.
            return DataStatus::Continue;
        };
        w.seen_body = true;
        if w.streaming {
            return self.stream_body(host, context, w, size, end_of_stream);
        }
        let plugin = w.plugin.clone();
        let cfg = &plugin.config;
        let now = host.now_ms();
        if now > w.deadline_ms {
            return data(self.body_timeout(host, &w));
        }
        let seen = w.seen_bytes;
        if seen.saturating_add(size) > cfg.max_json_bytes {
            return data(finish(host, w, Kept::OverLimit));
        }
        let keeps = w.keeps_body;
        let cap = w
            .declared
            .map_or(cfg.max_json_bytes, |d| d.min(cfg.max_json_bytes));
        let (len, capacity) = (w.body.len(), w.body.capacity());
        let growth = budget::growth(keeps, len, capacity, size, cap);
        // `w` is released: its charge is out of the pool, its bytes are not.
        let need = w.charged.saturating_add(growth.extra);
        if !self.fits(w.root, need, cfg.max_held_bytes) {
            return data(self.busy(host, &w));
        }
        // A body that arrives whole in one chunk is kept as the host handed
        // it over, not copied again.
        let whole = keeps && end_of_stream && len == 0;
        if !whole {
            w.body.reserve_exact(growth.capacity - len);
        }
        match host.request_body(size) {
            Ok(chunk) => {
                if let Check::Running(p) = &mut w.check {
                    p.update(&chunk);
                }
                if let Some(h) = &mut w.digest {
                    sha2::Digest::update(h.as_mut(), &chunk);
                }
                w.seen_bytes = seen + chunk.len();
                if whole {
                    w.body = chunk;
                } else if keeps {
                    w.body.extend_from_slice(&chunk);
                }
            }
            Err(e) => return data(answer_internal(host, Some(&plugin), &e.to_string())),
        }
        if end_of_stream {
            return data(finish(host, w, Kept::Whole));
        }
        self.hold(context, w);
        DataStatus::StopAndWatermark
    }

    /// proxy_on_request_trailers: strips stamp names from the trailers of
    /// every request; a waiting body ends here.
    pub fn on_request_trailers(&mut self, host: &mut impl Host, context: u32) -> HeadersStatus {
        if self.answered(context) {
            return HeadersStatus::StopIteration;
        }
        let status = self.trailers(host, context);
        if status == HeadersStatus::StopIteration {
            self.mark_answered(context);
        }
        status
    }

    fn trailers(&mut self, host: &mut impl Host, context: u32) -> HeadersStatus {
        let plugin = self.plugin_of(context);
        let w = self.release(context);
        let stripped = host
            .request_trailers()
            .map_err(Failure::Host)
            .and_then(|raw| {
                let mut trailers = pairs::parse(&raw).ok_or(Failure::Headers)?;
                Ok(strip(host, &mut trailers, strip::Map::Trailers)?)
            });
        match stripped {
            Ok(n) => {
                if let Some(p) = &plugin {
                    bump(host, p.metrics.spoofed_trailers, n);
                }
            }
            Err(e) => return answer_internal(host, plugin.as_deref(), &e.to_string()),
        }
        match w {
            None => HeadersStatus::Continue,
            Some(w) if host.now_ms() > w.deadline_ms => self.body_timeout(host, &w),
            Some(w) if w.streaming => match stream_verdict(host, w) {
                // The held-back byte cannot follow the trailers.
                Ok(Some(_)) => send(host, &reply::STREAM_TRAILERS),
                Ok(_) => HeadersStatus::Continue,
                Err(r) => send(host, &r),
            },
            Some(w) => finish(host, w, Kept::Whole),
        }
    }

    /// proxy_on_tick of a root context: answers 408, the stalest first, to
    /// its requests whose body is late, and, while its budget is fuller than
    /// `budget::trim_to`, to those held longer than slow_body_ms; at most
    /// MAX_REPLIES_PER_CALL in all (the rest on the next ticks). Only the
    /// tick answers a request other than the one a callback is for: a local
    /// reply sets Envoy's "stop" for the whole VM call, which would change
    /// the current request's own answer.
    pub fn on_tick(&mut self, host: &mut impl Host, root: u32) {
        let now = host.now_ms();
        let Some(plugin) = self.plugins.get(&root).cloned().flatten() else {
            return;
        };
        let mut answers = match self.pools.get(&root) {
            Some(pool) => self.due(pool, now, &plugin.config, self.held_by(root)),
            None => Vec::new(),
        };
        // Streamed requests are only ever late (idle, or past
        // max_stream_ms): their own order, the stalest first.
        if let Some(streamed) = self.streamed.get(&root) {
            for (deadline, c) in streamed.stalest() {
                if answers.len() >= MAX_REPLIES_PER_CALL || deadline >= now {
                    break;
                }
                answers.push((c, true));
            }
        }
        if answers.is_empty() {
            return;
        }
        for (context, late) in answers {
            let Some(w) = self.release(context) else {
                continue;
            };
            self.mark_answered(context);
            if !on_behalf_of(host, context) {
                continue;
            }
            if late {
                self.body_timeout(host, &w);
            } else {
                let m = w.plugin.metrics.source(w.source).and_then(|m| m.evicted);
                bump(host, m, 1);
                send(host, &reply::SLOW_BODY);
            }
        }
        let _ = host.set_effective_context(root);
    }

    /// What the tick answers, the stalest first, each marked late (past its
    /// deadline) or slow (held past slow_body_ms while the pool is over
    /// `budget::trim_to`, until it is not): at most MAX_REPLIES_PER_CALL.
    /// A pool's requests share max_hold_ms, so the stalest is also the one
    /// held longest: the pass stops at the first request that is neither.
    fn due(&self, pool: &Pool, now: u64, cfg: &Config, held: usize) -> Vec<(u32, bool)> {
        let mut over = held.saturating_sub(budget::trim_to(cfg.max_held_bytes));
        let mut out = Vec::new();
        for (deadline, c) in pool.stalest() {
            if out.len() >= MAX_REPLIES_PER_CALL {
                break;
            }
            let Some(w) = self.held_request(c) else {
                continue;
            };
            if deadline < now {
                over = over.saturating_sub(w.charged);
                out.push((c, true));
            } else if over > 0 && now.saturating_sub(w.started_ms) >= cfg.slow_body_ms {
                over = over.saturating_sub(w.charged);
                out.push((c, false));
            } else {
                break;
            }
        }
        out
    }

    /// proxy_on_delete: the request is over (done or reset); whatever it
    /// held is given back.
    pub fn on_delete(&mut self, context: u32) {
        self.release(context);
        // A request's id is never taken for a root's: where a host's ids
        // wrap (the dynamic module's, after 2^32 streams), a request that
        // ends must not take a live plugin with it.
        if self.streams.remove(&context).is_none() {
            self.plugins.remove(&context);
        }
    }

    /// Whether the filter answered `context` (or stopped it for good).
    fn answered(&self, context: u32) -> bool {
        matches!(
            self.streams.get(&context).map(|s| &s.state),
            Some(State::Answered)
        )
    }

    fn mark_answered(&mut self, context: u32) {
        if let Some(s) = self.streams.get_mut(&context) {
            s.state = State::Answered;
        }
    }

    /// The request `context` if it is held.
    fn held_request(&self, context: u32) -> Option<&Held> {
        match &self.streams.get(&context)?.state {
            State::Held(w) => Some(w),
            State::Open | State::Answered => None,
        }
    }

    /// Holds a request (again), its bytes charged to its plugin's pool.
    fn hold(&mut self, context: u32, mut w: Held) {
        w.charged = w.charge();
        let pools = if w.streaming {
            &mut self.streamed
        } else {
            &mut self.pools
        };
        pools
            .entry(w.root)
            .or_default()
            .insert(context, w.deadline_ms, w.charged);
        let root = w.root;
        self.streams
            .entry(context)
            .or_insert(Stream {
                root,
                state: State::Open,
            })
            .state = State::Held(Box::new(w));
    }

    /// Lets a held request go, its bytes given back to the budget.
    fn release(&mut self, context: u32) -> Option<Held> {
        let stream = self.streams.get_mut(&context)?;
        if !matches!(stream.state, State::Held(_)) {
            return None;
        }
        let State::Held(w) = std::mem::replace(&mut stream.state, State::Open) else {
            return None;
        };
        let pools = if w.streaming {
            &mut self.streamed
        } else {
            &mut self.pools
        };
        if let Some(pool) = pools.get_mut(&w.root) {
            pool.remove(context, w.deadline_ms, w.charged);
        }
        Some(*w)
    }

    /// Whether `need` more bytes fit in `root`'s budget now.
    fn fits(&self, root: u32, need: usize, limit: usize) -> bool {
        self.held_by(root).saturating_add(need) <= limit
    }

    /// What `root`'s requests hold now, held and streamed.
    fn held_by(&self, root: u32) -> usize {
        [&self.pools, &self.streamed]
            .iter()
            .filter_map(|p| p.get(&root))
            .map(Pool::held)
            .sum()
    }

    fn busy(&mut self, host: &mut impl Host, w: &Held) -> HeadersStatus {
        let m = w.plugin.metrics.source(w.source).map(|m| m.busy);
        bump(host, m.flatten(), 1);
        send(host, &reply::BUSY)
    }

    fn body_timeout(&mut self, host: &mut impl Host, w: &Held) -> HeadersStatus {
        let m = w.plugin.metrics.source(w.source);
        bump(host, m.and_then(|m| m.body_timeout), 1);
        if !w.seen_body {
            bump(host, m.and_then(|m| m.body_never_seen), 1);
            if !w.plugin.hinted.replace(true) {
                host.log(Level::Error, &never_seen(w));
            }
        }
        send(host, &reply::BODY_TIMEOUT)
    }
}

/// Why a request could not be handled; answered 500.
#[derive(Debug)]
enum Failure {
    Host(HostError),
    Headers,
    NoSource,
}

impl From<HostError> for Failure {
    fn from(e: HostError) -> Self {
        Failure::Host(e)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Host(e) => write!(f, "{e}"),
            Failure::Headers => write!(f, "the header map from the host is malformed"),
            Failure::NoSource => write!(f, "routed to a missing source"),
        }
    }
}

/// Why a held request may never see its body: said once per plugin.
fn never_seen(w: &Held) -> String {
    let id = w.source().map_or("?", |s| s.id.as_str());
    format!(
        "source '{id}': a request held for its body got none within max_hold_ms ({} ms) and was \
         answered 408; if every body-keyed request ends this way, the filter runs without \
         allow_on_headers_stop_iteration: true (Envoy then never hands it the body; Istio's \
         WasmPlugin cannot set it): use the EnvoyFilter form, or header-keyed sources only \
         (hookstamp_body_never_seen_total counts these)",
        w.plugin.config.max_hold_ms
    )
}

fn refuse(host: &mut impl Host, errs: &[String]) -> bool {
    for e in errs {
        host.log(Level::Error, e);
    }
    host.log(
        Level::Error,
        &format!("rejected the configuration ({} error(s))", errs.len()),
    );
    false
}

/// Makes another request current, to answer it from the tick; false
/// (logged) when it is gone.
fn on_behalf_of(host: &mut impl Host, context: u32) -> bool {
    match host.set_effective_context(context) {
        Ok(()) => true,
        Err(e) => {
            host.log(Level::Warn, &format!("a held request is gone: {e}"));
            false
        }
    }
}

/// Sends a local reply; the request goes no further.
fn send(host: &mut impl Host, r: &Reply) -> HeadersStatus {
    if let Err(e) = host.send_reply(r) {
        host.log(Level::Error, &format!("cannot send a local reply: {e}"));
    }
    HeadersStatus::StopIteration
}

fn answer_internal(host: &mut impl Host, plugin: Option<&Plugin>, what: &str) -> HeadersStatus {
    host.log(Level::Error, what);
    if let Some(p) = plugin {
        bump(host, p.metrics.internal_errors, 1);
    }
    send(host, &reply::INTERNAL)
}

/// The body callback's answer for what the headers callback would answer.
fn data(s: HeadersStatus) -> DataStatus {
    match s {
        HeadersStatus::Continue => DataStatus::Continue,
        HeadersStatus::StopIteration => DataStatus::StopNoBuffer,
    }
}

fn lossy<'h>(headers: &[(&str, &'h [u8])], name: &str) -> std::borrow::Cow<'h, str> {
    let value = headers
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(&[][..], |(_, v)| v);
    // Nearly always text: checked once, borrowed; the lossy form otherwise.
    match std::str::from_utf8(value) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(value),
    }
}

fn text<'h>(headers: &[(&str, &'h [u8])], name: &str) -> &'h str {
    headers
        .iter()
        .find(|(n, _)| *n == name)
        .and_then(|(_, v)| std::str::from_utf8(v).ok())
        .unwrap_or("")
}

/// What became of a request's body.
enum Kept {
    /// All of it passed (and is in `Held::body` when JSON keys need it);
    /// empty when the request had none.
    Whole,
    /// It was over max_json_bytes: never decoded or verified.
    OverLimit,
}

/// Stamps a request, or answers it when its signature refuses it; the
/// metrics counted.
fn finish(host: &mut impl Host, mut w: Held, kept: Kept) -> HeadersStatus {
    let check = std::mem::replace(&mut w.check, Check::Off);
    let digest = w.digest.take();
    let plugin = &w.plugin;
    let Some(src) = w.source() else {
        return answer_internal(host, Some(plugin), &Failure::NoSource.to_string());
    };
    let kept_whole = matches!(kept, Kept::Whole);
    let body = match kept {
        Kept::Whole => Body::Bytes(&w.body),
        Kept::OverLimit => Body::OverLimit,
    };
    let result = match (check, body) {
        (Check::Off, _) => None,
        (_, Body::OverLimit) => Some(Err(Reason::OverLimit)),
        (Check::Failed(r), _) => Some(Err(r)),
        (Check::Running(p), _) => Some(p.finish(&w.body).map_err(|f| f.reason)),
    };
    let m = plugin.metrics.source(w.source);
    let unverified = result.and_then(Result::err);
    let verified = match (result, &src.verify) {
        (Some(r), Some(v)) => {
            count_signature(host, m, r);
            match decide::verdict(v.on_failure, r) {
                Verdict::Refuse(reply) => return send(host, &reply),
                Verdict::Stamp(ok) => Some(ok),
            }
        }
        _ => None,
    };
    let target = Target {
        index: w.source,
        source: src,
        tenant: &w.tenant,
    };
    if let Some(r) = decide::post_handshake(&target, body, verified) {
        bump(host, m.and_then(|m| m.handshakes), 1);
        return send(host, &r);
    }
    // The whole body's hash where the filter held all of it: a key
    // (`sha256`) and the seal's.
    let held: Option<[u8; 32]> = match (kept_whole, digest) {
        (true, Some(h)) => Some(sha2::Digest::finalize(*h).into()),
        _ => None,
    };
    forward(host, &w, body, held, verified, unverified)
}

/// Whether a verified streamed request's events rule drops it (its type
/// comes from its headers: a streamed source reads nothing else).
fn dropped_at_verdict(w: &Held) -> bool {
    let Some(src) = w.source() else {
        return false;
    };
    let (Some(et), Some(_)) = (&src.event_type, &src.events) else {
        return false;
    };
    let keys: Vec<Option<&[u8]>> = w.header_keys.iter().map(|k| k.as_deref()).collect();
    let offered = decide::offered(src, &keys, Body::Bytes(&[]), None);
    decide::event_type(et, &offered.values()).is_some_and(|t| decide::drops(src, &t))
}

/// A streamed request's verdict at the end of its body: its held-back
/// bytes to let go, or the answer that refuses it (and so resets its
/// upstream request). Counted as any signature is.
fn stream_verdict(host: &mut impl Host, mut w: Held) -> Result<Option<u8>, Reply> {
    let m = w.plugin.metrics.source(w.source);
    let result = match std::mem::replace(&mut w.check, Check::Off) {
        // A streamed scheme never needs the body kept (the configuration
        // refuses one that does).
        Check::Running(p) => p.finish(&[]).map_err(|f| f.reason),
        Check::Failed(r) => Err(r),
        Check::Off => Ok(()),
    };
    count_signature(host, m, result);
    match result {
        Err(reason) => Err(reply::invalid_signature(reason)),
        Ok(()) if dropped_at_verdict(&w) => {
            bump(host, m.and_then(|m| m.events_dropped), 1);
            // Its upstream request is reset, never completed.
            Err(reply::DROPPED)
        }
        Ok(()) => Ok(w.tail.take()),
    }
}

/// Counts a signature's result in its source's metrics.
fn count_signature(host: &mut impl Host, m: Option<&SourceMetrics>, r: Result<(), Reason>) {
    match r {
        Ok(()) => bump(host, m.and_then(|m| m.verified), 1),
        Err(reason) => bump(host, m.and_then(|m| m.verify_failed(reason)), 1),
    }
}

/// Stamps a request (a streamed one's `x-hookstamp-verified` says
/// `stream`), or answers it where its events rule drops it; records why it
/// lacks a key.
fn forward(
    host: &mut impl Host,
    w: &Held,
    body: Body<'_>,
    held: Option<[u8; 32]>,
    verified: Option<bool>,
    unverified: Option<Reason>,
) -> HeadersStatus {
    let keys: Vec<Option<&[u8]>> = w.header_keys.iter().map(|k| k.as_deref()).collect();
    let view = Stamping {
        plugin: &w.plugin,
        source: w.source,
        tenant: &w.tenant,
        header_keys: &keys,
        streaming: w.streaming,
        method: &w.method,
        path: &w.path,
        spoofed: w.spoofed,
    };
    stamp_and_forward(host, &view, body, held, verified, unverified)
}

/// What the stamps of a request need, borrowed: from a held request, or
/// from the headers of one stamped at once (which is then never copied
/// into a `Held`).
struct Stamping<'a> {
    plugin: &'a Plugin,
    source: usize,
    tenant: &'a str,
    header_keys: &'a [Option<&'a [u8]>],
    streaming: bool,
    method: &'a str,
    path: &'a str,
    spoofed: usize,
}

fn stamp_and_forward(
    host: &mut impl Host,
    w: &Stamping<'_>,
    body: Body<'_>,
    held: Option<[u8; 32]>,
    verified: Option<bool>,
    unverified: Option<Reason>,
) -> HeadersStatus {
    let plugin = w.plugin;
    let Some(src) = plugin.config.sources.get(w.source) else {
        return answer_internal(host, Some(plugin), &Failure::NoSource.to_string());
    };
    let m = plugin.metrics.source(w.source);
    let mut stamped = decide::stamp(src, w.tenant, w.header_keys, body, held, verified);
    if w.streaming {
        stamped.streamed();
    }
    if plugin.config.seal.is_some() {
        let now_s = host.now_ms() / 1000;
        decide::add_seal(
            &plugin.config,
            now_s,
            w.method,
            w.path,
            &mut stamped,
            held.as_ref(),
        );
    }
    // A streamed request's drop waits for its verdict (`stream_verdict`):
    // a forgery is never answered as a dropped event.
    if stamped.dropped && !w.streaming {
        bump(host, m.and_then(|m| m.events_dropped), 1);
        return send(host, &reply::DROPPED);
    }
    for (name, value) in &stamped.headers {
        if let Err(e) = host.add_request_header(name, value) {
            return answer_internal(host, Some(plugin), &e.to_string());
        }
    }
    plugin.metrics.stamped(host, w.source, w.spoofed, &stamped);
    // Why the request lacks a key, where the access log can print it. The
    // stamps and metrics already carry the decision: a host that keeps no
    // property leaves the log's field empty ("-"), and is not logged per
    // request, which a flood would turn into a flood of log lines.
    let why = stamped.why(unverified);
    if !why.is_empty() {
        let _ = host.set_property(WHY_PROPERTY, why.as_bytes());
    }
    HeadersStatus::Continue
}
