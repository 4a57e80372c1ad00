//! proxy-wasm's context ids, kept here and nowhere else: a root context is
//! a plugin's instance on this VM, a request context a `Request`. Generic
//! over the proxy (`Proxy`), so the tests run it natively with the mock
//! host; `abi` runs it with the real one.

use crate::budget::{FLUSH_MS, TICK_MS};
use crate::host::{DataStatus, HeadersStatus, HostResult, Level, StreamHost, Streams};
use crate::lifecycle::{ById, Instance, Plugin, Request};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

/// The proxy as proxy-wasm has it: one current context, which the stream
/// calls act on and which the tick moves (`Streams::stream` makes a held
/// request's context current).
pub trait Proxy: Streams<Key = u32> + StreamHost {
    /// The plugin configuration, as the proxy hands it over.
    fn plugin_config(&mut self) -> HostResult<Vec<u8>>;
    /// Makes a context current outside its own callbacks.
    fn set_effective_context(&mut self, context: u32) -> HostResult<()>;
    /// The clock the next calls read (`now_ms`).
    fn set_clock(&mut self, clock: Clock);
    /// The proxy's clock as a `Clock::Once` read it, if it was read.
    fn clock_read(&self) -> Option<u64>;
    /// Hands the proxy the counter increments kept since the last flush
    /// (`counts`): at a tick whose time has come (`flush_after`), and when
    /// a root goes.
    fn flush_counts(&mut self);
}

/// The clock a callback reads (`Proxy::set_clock`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Clock {
    /// The proxy's, at each read.
    #[default]
    Proxy,
    /// This one: the clock read since the last tick.
    At(u64),
    /// The proxy's, read at the callback's first read and kept for its
    /// others (`Proxy::clock_read` says what it was).
    Once,
}

/// The most stream callbacks that read the clock read since the last tick
/// before one reads the proxy's again: a tick comes every `budget::TICK_MS`
/// while an instance ticks, and a worker makes far fewer callbacks in one;
/// if the ticks stop, the stale clock serves no more than these.
pub const CALLBACKS_PER_TICK: u32 = 1024;

/// The VM's clock since its last tick (0: not read yet), the stream
/// callbacks since, and whether a tick came (since the ticks last stopped).
#[derive(Clone, Copy, Default)]
struct Ticked {
    at_ms: u64,
    callbacks: u32,
    ticking: bool,
}

/// One VM's contexts (one VM per thread: one per Envoy worker).
#[derive(Default)]
pub struct Contexts {
    map: RefCell<Map>,
    /// How long since the counts were last handed over, as the ticks since
    /// tell it (`counts`), in milliseconds.
    since_flush_ms: Cell<u32>,
    /// Deletes that arrived while a callback ran: never seen from Envoy,
    /// which defers its calls past the current one; kept for any host that
    /// calls back into the module from inside a host call.
    deferred: RefCell<Vec<u32>>,
    /// Requests whose headers came inside another callback and were held
    /// (fail closed) without being looked at: their body and trailers go
    /// no further either, never forwarded without stamps.
    stopped: RefCell<Vec<u32>>,
    /// The clock a request of a ticking instance reads: the one read since
    /// the last tick, by the tick (where it holds a request) or by the
    /// first callback that needed it. In Envoy's V8 a clock read is a host
    /// call of some 1 900 instructions, and a held request made two
    /// (BENCHMARKS.md); its deadline is checked by the tick anyway, within
    /// a tick.
    ticked: Cell<Ticked>,
}

#[derive(Default)]
struct Map {
    /// Each root context's instance; `None` until it is configured, or when
    /// its configuration was refused.
    roots: ById<u32, Option<Rc<Instance<u32>>>>,
    requests: ById<u32, Request<u32>>,
}

impl Contexts {
    /// Runs `f` on the map, the deferred deletes done first; `or` (logged)
    /// when a callback runs already: one inside another.
    fn with<P: Proxy, T>(&self, host: &mut P, or: T, f: impl FnOnce(&mut Map, &mut P) -> T) -> T {
        let Ok(mut map) = self.map.try_borrow_mut() else {
            StreamHost::log(
                host,
                Level::Critical,
                "hookstamp: a callback arrived inside another",
            );
            return or;
        };
        for c in std::mem::take(&mut *self.deferred.borrow_mut()) {
            if self.delete(&mut map, c) {
                host.flush_counts();
            }
        }
        f(&mut map, host)
    }

    /// Deletes a request or a root; a root's ticks stop with it. Whether
    /// it was a root.
    fn delete(&self, map: &mut Map, context: u32) -> bool {
        let root = map.requests.remove(&context).is_none() && map.roots.remove(&context).is_some();
        if root {
            self.forget_tick();
        }
        root
    }

    /// A root deleted or configured: the ticks that kept the clock may have
    /// stopped, and a configuration that ticks may begin where none did.
    /// The streams read the proxy's clock until the next tick.
    fn forget_tick(&self) {
        self.ticked.set(Ticked::default());
    }

    /// The clock `request`'s callback reads, where its instance ticks
    /// (every `budget::TICK_MS`) and the clock since the last tick has
    /// served fewer than CALLBACKS_PER_TICK callbacks: that clock, or the
    /// proxy's read once and kept for the rest of the tick. Else the
    /// proxy's.
    fn clock_for(&self, request: &Request<u32>) -> Clock {
        let t = self.ticked.get();
        let ticks = request.instance().is_some_and(|i| i.ticks());
        if !ticks || !t.ticking || t.callbacks >= CALLBACKS_PER_TICK {
            return Clock::Proxy;
        }
        self.ticked.set(Ticked {
            callbacks: t.callbacks + 1,
            ..t
        });
        match t.at_ms {
            0 => Clock::Once,
            ms => Clock::At(ms),
        }
    }

    /// Keeps the proxy's clock a `Clock::Once` read, for the callbacks
    /// until the next tick (a failed read, 0, for none).
    fn keep_read(&self, host: &impl Proxy) {
        let t = self.ticked.get();
        match host.clock_read() {
            Some(ms) if ms != 0 && t.ticking && t.at_ms == 0 => {
                self.ticked.set(Ticked { at_ms: ms, ..t });
            }
            _ => {}
        }
    }

    /// Runs a callback of `request` with the clock it reads (`clock_for`),
    /// the proxy's again once it returns.
    fn clocked<P: Proxy, T>(
        &self,
        host: &mut P,
        request: &mut Request<u32>,
        f: impl FnOnce(&mut Request<u32>, &mut P) -> T,
    ) -> T {
        let clock = self.clock_for(request);
        host.set_clock(clock);
        let out = f(request, host);
        if clock == Clock::Once {
            self.keep_read(host);
        }
        host.set_clock(Clock::Proxy);
        out
    }

    /// proxy_on_context_create: a root context (parent 0) or a request. A
    /// create inside another callback (no proxy does it) makes nothing, and
    /// that request's headers are then held, never passed (fail closed).
    pub fn on_context_create(&self, context: u32, parent: u32) {
        let Ok(mut map) = self.map.try_borrow_mut() else {
            return;
        };
        if parent == 0 {
            map.roots.insert(context, None);
        } else {
            let instance = map.roots.get(&parent).cloned().flatten();
            map.requests
                .insert(context, Request::new(instance, context));
        }
    }

    /// proxy_on_configure: false (the proxy refuses the filter) with every
    /// error logged.
    pub fn on_configure(&self, host: &mut impl Proxy, root: u32) -> bool {
        self.forget_tick();
        let raw = match host.plugin_config() {
            Ok(raw) => raw,
            Err(e) => {
                let e = format!("config: cannot read it: {e}");
                StreamHost::log(host, Level::Error, &e);
                return false;
            }
        };
        let Some(plugin) = Plugin::load(host, &raw) else {
            return false;
        };
        let instance = Instance::new(Arc::new(plugin));
        self.with(host, false, |map, _| {
            map.roots.insert(root, Some(instance));
            true
        })
    }

    /// proxy_on_request_headers. Fail closed: a request the filter cannot
    /// look at is held, not passed.
    pub fn on_request_headers(
        &self,
        host: &mut impl Proxy,
        context: u32,
        end: bool,
    ) -> HeadersStatus {
        let status = self.with(host, None, |map, host| {
            let r = map.requests.get_mut(&context)?;
            Some(self.clocked(host, r, |r, host| r.on_headers(host, end)))
        });
        status.unwrap_or_else(|| {
            self.stopped.borrow_mut().push(context);
            HeadersStatus::StopIteration
        })
    }

    fn was_stopped(&self, context: u32) -> bool {
        self.stopped.borrow().contains(&context)
    }

    /// proxy_on_request_body.
    pub fn on_request_body(
        &self,
        host: &mut impl Proxy,
        context: u32,
        size: usize,
        end: bool,
    ) -> DataStatus {
        self.later(host, context, DataStatus::StopNoBuffer, |r, host| {
            r.on_body(host, size, end)
        })
    }

    /// proxy_on_request_trailers.
    pub fn on_request_trailers(&self, host: &mut impl Proxy, context: u32) -> HeadersStatus {
        self.later(host, context, HeadersStatus::StopIteration, |r, host| {
            r.on_trailers(host)
        })
    }

    /// A request's callback after its headers, with its clock: `stop` where
    /// its headers were held unread, where it is gone, or where a callback
    /// runs already.
    fn later<P: Proxy, T: Copy>(
        &self,
        host: &mut P,
        context: u32,
        stop: T,
        f: impl FnOnce(&mut Request<u32>, &mut P) -> T,
    ) -> T {
        if self.was_stopped(context) {
            return stop;
        }
        self.with(host, stop, |map, host| {
            map.requests
                .get_mut(&context)
                .map_or(stop, |r| self.clocked(host, r, f))
        })
    }

    /// proxy_on_tick of a root context: a new tick for the streams'
    /// clock (`clock_for`); its instance's tick, each answer made with its
    /// request's context current, the root's again after; the counts kept,
    /// handed over when their time has come (`flush_after`). The proxy's
    /// clock is read once a tick: by the tick where its instance holds a
    /// request (its deadlines), else by the first callback that needs it.
    pub fn on_tick(&self, host: &mut impl Proxy, root: u32) {
        let instance = self.with(host, None, |map, _| map.roots.get(&root).cloned().flatten());
        let Some(instance) = instance.filter(|i| i.ticks()) else {
            // A root that ticks for its counts alone (every FLUSH_MS; or
            // one without a configuration) holds nothing, and keeps no
            // clock for the streams: theirs stays within a 5 ms tick.
            self.flush_after(host, FLUSH_MS, false);
            return;
        };
        self.ticked.set(Ticked {
            at_ms: 0,
            callbacks: 0,
            ticking: true,
        });
        host.set_clock(Clock::Once);
        let answered = instance.on_tick(host);
        if answered {
            let _ = host.set_effective_context(root);
        }
        self.flush_after(host, TICK_MS, answered);
        self.keep_read(host);
        host.set_clock(Clock::Proxy);
    }

    /// Hands the counts over where the tick answered a held request (its
    /// answers are counted as they reach their clients), or where a flush
    /// period has passed since the last time, as the ticks tell it (each
    /// root's ticks its own period): no clock is read for it.
    fn flush_after(&self, host: &mut impl Proxy, period_ms: u32, answered: bool) {
        let since = self.since_flush_ms.get().saturating_add(period_ms);
        if answered || since >= FLUSH_MS {
            host.flush_counts();
            self.since_flush_ms.set(0);
        } else {
            self.since_flush_ms.set(since);
        }
    }

    /// proxy_on_delete: done now, or before the next callback when one
    /// runs. A root's instance lives on with the requests that use it; the
    /// counts kept go to the proxy with a root (its VM may go with it,
    /// before another tick).
    pub fn on_delete(&self, host: &mut impl Proxy, context: u32) {
        self.stopped.borrow_mut().retain(|c| *c != context);
        match self.map.try_borrow_mut() {
            Ok(mut map) => {
                if self.delete(&mut map, context) {
                    host.flush_counts();
                }
            }
            Err(_) => self.deferred.borrow_mut().push(context),
        }
    }

    /// How many requests this VM's configured roots hold for their body,
    /// and their bytes; `None` while a callback runs.
    pub fn holding(&self) -> Option<(usize, usize)> {
        let map = self.map.try_borrow().ok()?;
        let mut sum = (0, 0);
        for i in map.roots.values().flatten() {
            let (n, bytes) = i.holding()?;
            sum = (sum.0 + n, sum.1 + bytes);
        }
        Some(sum)
    }
}
