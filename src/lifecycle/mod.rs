//! The request lifecycle, host-free: route → stamp at the headers, or hold
//! the body → chunks → end, trailers, reset or deadline → over the limit or
//! over the budget → stamp or reply.
//!
//! Three objects, as Envoy's dynamic-module SDK has them:
//! - a `Plugin`: one configuration, parsed and checked once, shared by
//!   every worker (an `Arc`), dropped with the last worker's instance that
//!   uses it (its secrets zeroed as they go);
//! - an `Instance`: that plugin on one worker, with the requests it holds
//!   for their body, each charged to its pools (`budget::Pool`), and the
//!   tick that answers the late and the slow ones; it never keeps its
//!   plugin alive (the proxy's reference does, and each request's), so an
//!   adapter may keep it between streams;
//! - a `Request`: one stream, owned by the adapter (`filter`, `dynmod`),
//!   which calls its callbacks with that stream's `StreamHost`.
//!
//! Fail closed: a request under the prefix is stamped or answered by the
//! filter, never passed unstamped. A resource limit answers 503 or 408,
//! which a provider retries; a host call that fails answers 500.

use crate::budget::{Pool, FLUSH_MS, TICK_MS};
use crate::config::{self, Config};
use crate::host::{ConfigHost, DataStatus, HeadersStatus, HostError, Level, StreamHost};
use crate::metrics::{bump, Metrics};
use crate::reply::{self, Reply};
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

mod body;
mod finish;
mod headers;
mod held;
mod tick;

use held::Held;
pub use held::{ById, IdHasher};

/// The request property (Envoy's filter state `wasm.hookstamp_why`) that
/// says why a stamped request lacks a key or a verified signature.
pub const WHY_PROPERTY: &str = "hookstamp_why";

/// One configuration: checked once, its metrics defined, shared by every
/// worker that runs it.
pub struct Plugin {
    pub config: Config,
    pub metrics: Metrics,
    /// Whether the gauges were set at load (a host that sets a gauge only
    /// through a stream leaves them to each instance's first stream).
    gauges_set: bool,
    /// Whether the hint about allow_on_headers_stop_iteration was logged.
    hinted: AtomicBool,
    /// Whether a worker running it needs the tick (`ticks`), found at load.
    ticks: bool,
}

impl Plugin {
    /// Checks the configuration; `None` (the proxy refuses the filter) with
    /// every error logged, each naming its source and sink.
    pub fn load(host: &mut impl ConfigHost, raw: &[u8]) -> Option<Plugin> {
        if raw.is_empty() {
            return refuse(host, &["config: the plugin configuration is empty".into()]);
        }
        let loaded = match config::load_plugin_config(raw) {
            Ok(l) => l,
            Err(errs) => return refuse(host, &errs),
        };
        for w in &loaded.warnings {
            host.log(Level::Warn, w);
        }
        let config = loaded.config;
        // Deadlines are checked on the tick: a stalled body sends no chunk
        // that could notice it. A host that keeps its counts until a tick
        // (the .wasm's) needs a slower one whatever the sources.
        let ticks = config.sources.iter().any(|s| s.needs_body() || s.streams());
        let tick_ms = match (ticks, host.counts_on_tick()) {
            (true, _) => TICK_MS,
            (false, true) => FLUSH_MS,
            (false, false) => 0,
        };
        if tick_ms > 0 {
            if let Err(e) = host.set_tick_period_ms(tick_ms) {
                return refuse(host, &[format!("config: cannot set the tick period: {e}")]);
            }
        }
        let metrics = Metrics::define(host, &config);
        let gauges_set = metrics.set_gauges(|id, v| host.record_metric(id, v));
        host.log(
            Level::Info,
            &format!(
                "hookstamp {} {}",
                env!("CARGO_PKG_VERSION"),
                config.summary()
            ),
        );
        Some(Plugin {
            config,
            metrics,
            gauges_set,
            hinted: AtomicBool::new(false),
            ticks,
        })
    }

    /// Whether a worker running it needs the tick (a source that waits for
    /// a body, or streams one).
    pub fn ticks(&self) -> bool {
        self.ticks
    }
}

fn refuse<T>(host: &mut impl ConfigHost, errs: &[String]) -> Option<T> {
    for e in errs {
        host.log(Level::Error, e);
    }
    host.log(
        Level::Error,
        &format!("rejected the configuration ({} error(s))", errs.len()),
    );
    None
}

/// A plugin on one worker: the requests it holds, and its budget. `K` is
/// the adapter's handle for a stream, kept with each held request so that
/// the tick can answer it (`host::Streams`).
pub struct Instance<K> {
    /// Its plugin, which the instance never keeps alive: the proxy's
    /// reference does, and each request's, and each held request's. An
    /// adapter that keeps an instance between streams (the dynamic
    /// module's worker) so keeps no configuration, nor its secrets, past
    /// the proxy's letting it go.
    plugin: Weak<Plugin>,
    /// The plugin, where the instance is its owner (the Wasm filter's root
    /// context, a benchmark): `Instance::new`.
    _owned: Option<Arc<Plugin>>,
    /// Whether its plugin needs the tick (`Plugin::ticks`).
    ticks: bool,
    holds: RefCell<Holds<K>>,
    /// Each request's number on this instance: never reused, never wraps
    /// (2^64 requests).
    next: Cell<u64>,
    /// Requests that ended while a callback ran: never seen from Envoy,
    /// which defers its calls past the current one; released before the
    /// next callback.
    ended: RefCell<Vec<u64>>,
    /// Whether a stream set the gauges the load could not.
    gauges_set: Cell<bool>,
}

/// What an instance holds: each request held for its body, and its pools,
/// the held and the streamed apart (against one max_held_bytes): streamed
/// requests are never trimmed as slow, and their deadlines move with every
/// chunk, so they must not stand in the held ones' order.
struct Holds<K> {
    requests: ById<u64, Box<Held<K>>>,
    pool: Pool,
    streamed: Pool,
    /// The streamed requests by their rate credit (`Held::rate_deadline`),
    /// the slowest first: the order the tick trims them in.
    by_rate: BTreeSet<(u64, u64)>,
}

impl<K: Copy> Instance<K> {
    /// An instance that owns its plugin.
    pub fn new(plugin: Arc<Plugin>) -> Rc<Self> {
        Self::make(&plugin, Some(plugin.clone()))
    }

    /// An instance of a plugin the proxy owns: it lives while a reference
    /// to it does elsewhere (the proxy's, a request's).
    pub fn shared(plugin: &Arc<Plugin>) -> Rc<Self> {
        Self::make(plugin, None)
    }

    fn make(plugin: &Arc<Plugin>, owned: Option<Arc<Plugin>>) -> Rc<Self> {
        let gauges_set = plugin.gauges_set;
        Rc::new(Instance {
            plugin: Arc::downgrade(plugin),
            _owned: owned,
            ticks: plugin.ticks,
            holds: RefCell::new(Holds {
                requests: ById::default(),
                pool: Pool::default(),
                streamed: Pool::default(),
                by_rate: BTreeSet::new(),
            }),
            next: Cell::new(1),
            ended: RefCell::default(),
            gauges_set: Cell::new(gauges_set),
        })
    }

    /// Its plugin, while anything keeps it.
    pub fn plugin(&self) -> Option<Arc<Plugin>> {
        self.plugin.upgrade()
    }

    /// Whether it is `plugin`'s.
    pub fn serves(&self, plugin: &Arc<Plugin>) -> bool {
        std::ptr::eq(self.plugin.as_ptr(), Arc::as_ptr(plugin))
    }

    /// Whether its plugin is gone: nothing keeps it any longer.
    pub fn is_gone(&self) -> bool {
        self.plugin.strong_count() == 0
    }

    /// Whether its plugin needs the tick.
    pub fn ticks(&self) -> bool {
        self.ticks
    }

    /// How many requests it holds for their body, and their bytes; `None`
    /// while a callback runs.
    pub fn holding(&self) -> Option<(usize, usize)> {
        let h = self.holds.try_borrow().ok()?;
        Some((h.pool.len() + h.streamed.len(), h.held()))
    }

    /// The stream of one request it holds, if any: where the tick can go
    /// when the stream that carried it ends.
    pub fn held_key(&self) -> Option<K> {
        let h = self.holds.try_borrow().ok()?;
        h.requests.values().next().map(|w| w.key)
    }

    /// Runs `f` on what it holds, the requests that ended first released;
    /// `None` (logged) when a callback runs already: one inside another.
    fn with<H: StreamHost, T>(
        &self,
        host: &mut H,
        f: impl FnOnce(&mut Holds<K>, &mut H) -> T,
    ) -> Option<T> {
        let Ok(mut holds) = self.holds.try_borrow_mut() else {
            host.log(
                Level::Critical,
                "hookstamp: a callback arrived inside another",
            );
            return None;
        };
        for serial in std::mem::take(&mut *self.ended.borrow_mut()) {
            holds.release(serial);
        }
        Some(f(&mut holds, host))
    }
}

impl<K> Holds<K> {
    /// The bytes held now, held and streamed.
    fn held(&self) -> usize {
        self.pool.held().saturating_add(self.streamed.held())
    }

    /// How many streamed requests are open.
    fn streams(&self) -> usize {
        self.streamed.len()
    }

    /// Whether `need` more bytes fit in the budget now.
    fn fits(&self, need: usize, limit: usize) -> bool {
        self.held().saturating_add(need) <= limit
    }

    /// Holds a request (again), its bytes charged to its pool.
    fn hold(&mut self, serial: u64, mut w: Box<Held<K>>) {
        w.charged = w.charge();
        let pool = if w.streaming {
            self.by_rate.insert((w.rate_deadline(), serial));
            &mut self.streamed
        } else {
            &mut self.pool
        };
        pool.insert(serial, w.deadline_ms, w.charged);
        self.requests.insert(serial, w);
    }

    /// Lets a held request go, its bytes given back to the budget.
    fn release(&mut self, serial: u64) -> Option<Box<Held<K>>> {
        // Most requests were never held: no hash to compute.
        if self.requests.is_empty() {
            return None;
        }
        let w = self.requests.remove(&serial)?;
        let pool = if w.streaming {
            self.by_rate.remove(&(w.rate_deadline(), serial));
            &mut self.streamed
        } else {
            &mut self.pool
        };
        pool.remove(serial, w.deadline_ms, w.charged);
        Some(w)
    }
}

/// One request, as its adapter owns it.
pub struct Request<K: Copy> {
    /// Its plugin on this worker; `None` on a filter whose configuration
    /// was refused.
    instance: Option<Rc<Instance<K>>>,
    /// Its plugin, kept for as long as the request lasts.
    plugin: Option<Arc<Plugin>>,
    /// The adapter's handle for its stream, for the tick.
    key: K,
    serial: u64,
    phase: Phase,
}

/// Where a request stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not held: its headers are yet to come, or it was stamped or passed,
    /// or its body was let go.
    Open,
    /// Held for its body, in its instance (unless the tick answered it).
    Held,
    /// Answered by the filter (or stopped and never let go): whatever the
    /// proxy still hands over for it goes no further, so that it can never
    /// be forwarded without its stamps.
    Answered,
}

impl<K: Copy> Request<K> {
    pub fn new(instance: Option<Rc<Instance<K>>>, key: K) -> Self {
        // An instance whose plugin is gone serves nothing: answered 500.
        let plugin = instance.as_ref().and_then(|i| i.plugin());
        let instance = instance.filter(|_| plugin.is_some());
        let serial = instance.as_ref().map_or(0, |i| {
            let n = i.next.get();
            i.next.set(n.wrapping_add(1));
            n
        });
        Request {
            instance,
            plugin,
            key,
            serial,
            phase: Phase::Open,
        }
    }

    /// The adapter's handle for its stream.
    pub fn key(&self) -> K {
        self.key
    }

    /// Its plugin's instance on this worker; `None` on a filter whose
    /// configuration was refused.
    pub fn instance(&self) -> Option<&Rc<Instance<K>>> {
        self.instance.as_ref()
    }

    /// Its plugin; `None` on a filter whose configuration was refused.
    pub fn plugin(&self) -> Option<&Arc<Plugin>> {
        self.plugin.as_ref()
    }

    /// The headers callback. Fail closed: a request the filter cannot look
    /// at is held, not passed.
    pub fn on_headers(&mut self, host: &mut impl StreamHost, end_of_stream: bool) -> HeadersStatus {
        let (Some(inst), Some(plugin)) = (&self.instance, &self.plugin) else {
            // Never forward unstamped what an unconfigured filter let by.
            self.phase = Phase::Answered;
            return answer_internal(host, None, "a request on an unconfigured filter");
        };
        if !inst.gauges_set.replace(true) {
            plugin.metrics.set_gauges(|id, v| host.record_metric(id, v));
        }
        let (serial, key) = (self.serial, self.key);
        let outcome = inst.with(host, |holds, host| {
            let s = headers::on_headers(host, plugin, holds, serial, key, end_of_stream)
                .unwrap_or_else(|e| answer_internal(host, Some(plugin), &e.to_string()));
            (s, holds.requests.contains_key(&serial))
        });
        let (status, held) = outcome.unwrap_or((HeadersStatus::StopIteration, false));
        self.phase = match (status, held) {
            (_, true) => Phase::Held,
            (HeadersStatus::StopIteration, false) => Phase::Answered,
            (HeadersStatus::Continue, false) => Phase::Open,
        };
        status
    }

    /// Its instance, unless the request was answered (or never had one):
    /// what the proxy still hands over for it then goes no further.
    fn unanswered(&self) -> Option<Rc<Instance<K>>> {
        self.instance
            .clone()
            .filter(|_| self.phase != Phase::Answered)
    }

    /// Whether its body passes untouched: it is neither held (nor
    /// streamed before its verdict) nor answered. Most requests' bodies:
    /// an adapter need not even read their size.
    pub fn passes_body(&self) -> bool {
        self.phase == Phase::Open
    }

    /// A body callback: `size` new bytes.
    pub fn on_body(
        &mut self,
        host: &mut impl StreamHost,
        size: usize,
        end_of_stream: bool,
    ) -> DataStatus {
        if self.passes_body() {
            // Stamped at its headers, passed, or let go: nothing to do.
            return DataStatus::Continue;
        }
        let Some(inst) = self.unanswered() else {
            return DataStatus::StopNoBuffer;
        };
        let (serial, phase) = (self.serial, self.phase);
        let outcome = inst.with(host, |holds, host| match holds.release(serial) {
            // Held, and no longer: the tick answered it.
            None if phase == Phase::Held => (DataStatus::StopNoBuffer, false),
            // Not waiting for a body: stamped at the headers, or not routed.
            None => (DataStatus::Continue, false),
            Some(w) => {
                let s = body::on_body(host, holds, serial, w, size, end_of_stream);
                (s, holds.requests.contains_key(&serial))
            }
        });
        let (status, held) = outcome.unwrap_or((DataStatus::StopNoBuffer, false));
        self.phase = match (status, held) {
            (DataStatus::StopNoBuffer, _) => Phase::Answered,
            (_, true) => Phase::Held,
            (_, false) => Phase::Open,
        };
        status
    }

    /// The trailers callback: strips stamp names from the trailers of every
    /// request; a held body ends here.
    pub fn on_trailers(&mut self, host: &mut impl StreamHost) -> HeadersStatus {
        let (Some(inst), Some(plugin)) = (self.unanswered(), self.plugin.as_ref()) else {
            return HeadersStatus::StopIteration;
        };
        let (serial, phase) = (self.serial, self.phase);
        let outcome = inst.with(host, |holds, host| {
            if phase == Phase::Held && !holds.requests.contains_key(&serial) {
                // The tick answered it.
                return HeadersStatus::StopIteration;
            }
            let w = holds.release(serial);
            finish::on_trailers(host, plugin, w)
        });
        let status = outcome.unwrap_or(HeadersStatus::StopIteration);
        self.phase = match status {
            HeadersStatus::StopIteration => Phase::Answered,
            HeadersStatus::Continue => Phase::Open,
        };
        status
    }
}

impl<K: Copy> Request<K> {
    /// Answers 500 after the adapter caught a panic in one of its
    /// callbacks: the request is let go of and goes no further, whatever
    /// the proxy still hands over for it (the adapter's panic barrier).
    pub fn abort(&mut self, host: &mut impl StreamHost) {
        self.phase = Phase::Answered;
        let plugin = self.plugin.clone();
        if let Some(inst) = &self.instance {
            if let Ok(mut holds) = inst.holds.try_borrow_mut() {
                holds.release(self.serial);
            }
        }
        answer_internal(
            host,
            plugin.as_deref(),
            "hookstamp: a panic in a callback; the request is answered 500",
        );
    }
}

impl<K: Copy> Drop for Request<K> {
    /// The request is over (done or reset): whatever it held is given back.
    fn drop(&mut self) {
        let Some(inst) = &self.instance else {
            return;
        };
        match inst.holds.try_borrow_mut() {
            Ok(mut holds) => {
                holds.release(self.serial);
            }
            Err(_) => inst.ended.borrow_mut().push(self.serial),
        }
    }
}

/// Why a request could not be handled; answered 500.
#[derive(Debug)]
enum Failure {
    Host(HostError),
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
            Failure::NoSource => write!(f, "routed to a missing source"),
        }
    }
}

/// Sends a local reply; the request goes no further.
fn send(host: &mut impl StreamHost, r: &Reply) -> HeadersStatus {
    if let Err(e) = host.send_reply(r) {
        host.log(Level::Error, &format!("cannot send a local reply: {e}"));
    }
    HeadersStatus::StopIteration
}

fn answer_internal(
    host: &mut impl StreamHost,
    plugin: Option<&Plugin>,
    what: &str,
) -> HeadersStatus {
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

/// Whether the hint about a body that never came was logged; marks it.
fn hint_once(plugin: &Plugin) -> bool {
    plugin.hinted.swap(true, Ordering::Relaxed)
}
