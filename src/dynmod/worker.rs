//! What one Envoy worker thread keeps: its instance of each configuration
//! (found by the configuration's `Arc`, kept between streams but keeping
//! no configuration alive), and the stream whose scheduler carries its
//! ticks.
//!
//! The ABI has no timer: a thread of the module's own posts an event every
//! tick period to one live stream of each worker that holds requests
//! (`envoy_dynamic_module_callback_http_filter_scheduler_commit`), and that
//! event runs every instance's tick on the worker's thread.

use super::abi::{self, FilterEnvoyPtr, SchedulerPtr};
use super::envoy::{log, Envoy};
use crate::host::{ConfigHost, HostError, HostResult, Level, MetricKind, Streams};
use crate::lifecycle::{Instance, Plugin};
use std::cell::RefCell;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex, MutexGuard, Once, PoisonError};
use std::time::Duration;

pub type Inst = Instance<FilterEnvoyPtr>;

#[derive(Default)]
struct Worker {
    /// Its instances, each alive while a stream of it is: a weak reference
    /// does not keep a configuration (or its secrets) past its last stream.
    instances: Vec<Weak<Inst>>,
    /// The instances of the configurations Envoy still has, kept between
    /// streams (one connection's requests one after another would
    /// otherwise make and drop one each). An instance keeps no
    /// configuration alive (`Instance::shared`): once Envoy destroyed one
    /// and its last request ended, the configuration is gone, its secrets
    /// zeroed, wherever its instances are; the empty instance goes at the
    /// worker's next stream.
    kept: Vec<Rc<Inst>>,
    /// The stream whose scheduler carries this thread's ticks.
    ticker: Option<(FilterEnvoyPtr, SchedulerPtr)>,
}

thread_local! {
    static WORKER: RefCell<Worker> = RefCell::default();
}

/// This worker's instance of `plugin`, made on its first stream here.
pub fn instance(plugin: &Arc<Plugin>) -> Rc<Inst> {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        if w.kept.iter().any(|i| i.is_gone()) {
            w.kept.retain(|i| !i.is_gone());
        }
        if let Some(i) = w.kept.iter().find(|i| i.serves(plugin)) {
            return i.clone();
        }
        w.instances.retain(|i| i.strong_count() > 0);
        let found = w
            .instances
            .iter()
            .filter_map(Weak::upgrade)
            .find(|i| i.serves(plugin));
        let i = found.unwrap_or_else(|| {
            let i = Instance::shared(plugin);
            w.instances.push(Rc::downgrade(&i));
            i
        });
        w.kept.push(i.clone());
        i
    })
}

/// After a callback: the first stream of a worker that holds a request
/// carries the worker's ticks.
pub fn keep_ticking(inst: &Inst, envoy: FilterEnvoyPtr) {
    if !inst.ticks() || inst.holding().is_none_or(|(n, _)| n == 0) {
        return;
    }
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        if w.ticker.is_none() {
            w.ticker = make_ticker(envoy);
        }
    });
}

/// A stream is over: when it carried the ticks, they move to a stream that
/// a request is still held for, if any.
pub fn stream_ended(envoy: FilterEnvoyPtr) {
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        if w.ticker.is_none_or(|(e, _)| e != envoy) {
            return;
        }
        if let Some((_, scheduler)) = w.ticker.take() {
            let mut t = ticks();
            t.schedulers.retain(|p| *p != scheduler as usize);
            // SAFETY: out of the list, under the lock: never posted to again.
            unsafe { abi::envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler) };
        }
        let next = w
            .instances
            .iter()
            .filter_map(Weak::upgrade)
            .find_map(|i| i.held_key());
        w.ticker = next.and_then(make_ticker);
    });
}

fn make_ticker(envoy: FilterEnvoyPtr) -> Option<(FilterEnvoyPtr, SchedulerPtr)> {
    // SAFETY: `envoy` is a live filter of this thread.
    let scheduler = unsafe { abi::envoy_dynamic_module_callback_http_filter_scheduler_new(envoy) };
    if scheduler.is_null() {
        return None;
    }
    ticks().schedulers.push(scheduler as usize);
    Some((envoy, scheduler))
}

/// The tick, on the worker's thread: every live instance's.
pub fn tick() {
    let live: Vec<Rc<Inst>> = WORKER.with(|w| {
        w.borrow()
            .instances
            .iter()
            .filter_map(Weak::upgrade)
            .collect()
    });
    for i in live {
        i.on_tick(&mut Ticker);
    }
}

/// The tick's host: each held request answered through its own stream
/// (its pointer, kept with it), so each is counted in its own
/// configuration's metrics.
struct Ticker;

impl ConfigHost for Ticker {
    fn define_metric(&mut self, _: MetricKind, _: &str) -> HostResult<u32> {
        Err(HostError {
            call: "define_metric",
            status: 1,
        })
    }
    fn record_metric(&mut self, _: u32, _: u64) -> HostResult<()> {
        Err(HostError {
            call: "record_metric",
            status: 1,
        })
    }
    fn set_tick_period_ms(&mut self, _: u32) -> HostResult<()> {
        Ok(())
    }
    fn now_ms(&mut self) -> u64 {
        super::envoy::now_ms()
    }
    fn log(&mut self, l: Level, message: &str) {
        log(l, message);
    }
}

impl Streams for Ticker {
    type Key = FilterEnvoyPtr;
    type Stream<'a> = Envoy;
    fn stream(&mut self, key: FilterEnvoyPtr) -> Option<Envoy> {
        // A held request's stream is live: its end releases it first.
        Some(Envoy(key))
    }
}

/// The schedulers the tick thread posts to: one per worker that holds.
struct Ticks {
    period_ms: u32,
    schedulers: Vec<usize>,
}

static TICKS: Mutex<Ticks> = Mutex::new(Ticks {
    period_ms: 0,
    schedulers: Vec::new(),
});
static TICK_THREAD: Once = Once::new();

fn ticks() -> MutexGuard<'static, Ticks> {
    TICKS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts the thread that posts the tick, once per process; the shortest
/// period any configuration asked for.
pub fn start_ticking(period_ms: u32) {
    {
        let mut t = ticks();
        if t.period_ms == 0 || period_ms < t.period_ms {
            t.period_ms = period_ms;
        }
    }
    TICK_THREAD.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("hookstamp-tick".into())
            .spawn(|| loop {
                let period = {
                    let t = ticks();
                    for s in &t.schedulers {
                        // SAFETY: a scheduler is deleted only under this
                        // lock, after leaving the list.
                        unsafe {
                            abi::envoy_dynamic_module_callback_http_filter_scheduler_commit(
                                *s as SchedulerPtr,
                                0,
                            );
                        }
                    }
                    t.period_ms.max(1)
                };
                std::thread::sleep(Duration::from_millis(u64::from(period)));
            });
        if let Err(e) = spawned {
            log(
                Level::Error,
                &format!("hookstamp: cannot start the tick: {e}"),
            );
        }
    });
}
