//! The Envoy dynamic-module ABI (`envoy.filters.http.dynamic_modules`), the
//! second host adapter beside `filter` (proxy-wasm): the callbacks Envoy
//! exports behind `Host` (`Native`), and each event hook a shim over
//! `dispatch`, which runs the same lifecycle as the `.wasm`. Built only with
//! the feature `dynamic-module` (`make dynamic-module`:
//! target/libhookstamp.so).
//!
//! How the two ABIs map:
//! - a filter configuration (`on_http_filter_config_new`, main thread) is a
//!   root context: its configuration is checked there (every error logged,
//!   the load refused) and its counters defined; each worker thread has its
//!   own `Dispatch` (as each has its own Wasm VM) and configures the root
//!   on its first stream;
//! - a stream (`on_http_filter_new`) is a request context;
//! - headers and body chunks are read as views into Envoy's memory, copied
//!   once into the form `Host` hands over (the header map's wire form, the
//!   chunk's bytes);
//! - the tick: the ABI has no timer, so a thread of the module's own posts
//!   an event every tick period to one live stream of each worker that
//!   holds requests (`envoy_dynamic_module_callback_http_filter_scheduler_commit`),
//!   and that event runs the tick on the worker's thread;
//! - `set_property(p)` sets the filter state `wasm.<p>` (the name the Wasm
//!   filter's property has), so that one access log format serves both.

mod abi;

use crate::dispatch::Dispatch;
use crate::host::{Host, HostError, HostResult, Level, MetricKind};
use crate::ids::ById;
use crate::reply::Reply;
use abi::{EnvoyBuffer, EnvoyHeader, FilterEnvoyPtr, ModuleBuffer, ModuleHeader, SchedulerPtr};
use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

/// The `filter_name` this module answers to.
const FILTER_NAME: &[u8] = b"hookstamp";

/// Context ids, shared by roots and streams (as proxy-wasm's are).
static NEXT_ID: AtomicU32 = AtomicU32::new(1);

fn next_id() -> u32 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed).max(1)
}

/// One filter configuration: what every worker configures its root from.
struct ModuleConfig {
    root: u32,
    raw: Vec<u8>,
    /// The metrics the configuration defined on the main thread, in the
    /// order it defined them: (name, kind, Envoy's id).
    metrics: Vec<(String, MetricKind, usize)>,
    /// The tick period it asked for, if any (0: none).
    tick_ms: u32,
}

/// One stream.
struct Stream {
    context: u32,
    envoy: FilterEnvoyPtr,
    config: Arc<ModuleConfig>,
}

/// What a worker thread keeps beside its `Dispatch`.
#[derive(Default)]
struct Worker {
    /// Its live streams: context → Envoy's filter.
    streams: ById<FilterEnvoyPtr>,
    /// The roots configured on this thread, and whether each was taken.
    roots: ById<bool>,
    /// The stream whose scheduler carries this thread's ticks.
    ticker: Option<(u32, SchedulerPtr)>,
}

thread_local! {
    static DISPATCH: Dispatch = Dispatch::default();
    static WORKER: RefCell<Worker> = RefCell::default();
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

fn ticks() -> std::sync::MutexGuard<'static, Ticks> {
    TICKS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Starts the thread that posts the tick, once per process.
fn start_ticking(period_ms: u32) {
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

fn log(level: Level, message: &str) {
    // SAFETY: Envoy reads the message within its length, during the call.
    unsafe {
        abi::envoy_dynamic_module_callback_log(level as u32, ModuleBuffer::of(message.as_bytes()))
    }
}

fn failed(call: &'static str) -> HostError {
    HostError { call, status: 1 }
}

/// Envoy, as the lifecycle's `Host`: the stream a callback is for (or the
/// one a tick made current), and its configuration.
struct Native<'c> {
    config: &'c ModuleConfig,
    current: FilterEnvoyPtr,
    /// While a worker configures its root: the configuration was checked
    /// and logged on the main thread already.
    quiet: bool,
}

impl Native<'_> {
    fn filter(&self, call: &'static str) -> HostResult<FilterEnvoyPtr> {
        if self.current.is_null() {
            Err(failed(call))
        } else {
            Ok(self.current)
        }
    }

    /// The current stream's header map (`kind`) in the wire form `pairs`
    /// reads: one copy of Envoy's views into one buffer.
    fn map(&self, kind: u32) -> HostResult<Vec<u8>> {
        let f = self.filter("envoy_dynamic_module_callback_http_get_headers")?;
        // SAFETY: `f` is the live filter of the current event hook.
        let n = unsafe { abi::envoy_dynamic_module_callback_http_get_headers_size(f, kind) };
        if n == 0 {
            return Ok(Vec::new());
        }
        // Envoy's views, on the stack for a usual request.
        let mut stack = [EnvoyHeader::EMPTY; 48];
        let mut heap = Vec::new();
        let views: &mut [EnvoyHeader] = if n <= stack.len() {
            &mut stack[..n]
        } else {
            heap.resize(n, EnvoyHeader::EMPTY);
            &mut heap
        };
        // SAFETY: `views` has room for the `n` headers Envoy reported.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_get_headers(f, kind, views.as_mut_ptr())
        };
        if !ok {
            return Err(failed("envoy_dynamic_module_callback_http_get_headers"));
        }
        let views: &[EnvoyHeader] = views;
        let bytes = |p: *const std::ffi::c_char, len: usize| -> &[u8] {
            // SAFETY: Envoy's views are valid until the hook returns.
            unsafe {
                EnvoyBuffer {
                    ptr: p,
                    length: len,
                }
                .bytes()
            }
        };
        let len = views
            .iter()
            .map(|h| h.key_length + h.value_length + 10)
            .sum::<usize>()
            + 4;
        let mut out = Vec::with_capacity(len);
        let count = u32::try_from(n)
            .map_err(|_| failed("envoy_dynamic_module_callback_http_get_headers"))?;
        out.extend_from_slice(&count.to_le_bytes());
        for h in views {
            let (k, v) = (u32::try_from(h.key_length), u32::try_from(h.value_length));
            let (Ok(k), Ok(v)) = (k, v) else {
                return Err(failed("envoy_dynamic_module_callback_http_get_headers"));
            };
            out.extend_from_slice(&k.to_le_bytes());
            out.extend_from_slice(&v.to_le_bytes());
        }
        for h in views {
            out.extend_from_slice(bytes(h.key_ptr, h.key_length));
            out.push(0);
            out.extend_from_slice(bytes(h.value_ptr, h.value_length));
            out.push(0);
        }
        Ok(out)
    }

    fn remove(&self, kind: u32, name: &str) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_set_header";
        let f = self.filter(call)?;
        // SAFETY: Envoy reads the name within its length; a null value
        // removes the header.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_set_header(
                f,
                kind,
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::NULL,
            )
        };
        ok.then_some(()).ok_or(failed(call))
    }

    fn metric(&self, id: u32) -> Option<&(String, MetricKind, usize)> {
        self.config.metrics.get(usize::try_from(id).ok()?)
    }
}

impl Host for Native<'_> {
    fn plugin_config(&mut self) -> HostResult<Vec<u8>> {
        Ok(self.config.raw.clone())
    }

    fn request_headers(&mut self) -> HostResult<Vec<u8>> {
        self.map(abi::REQUEST_HEADER)
    }

    fn request_trailers(&mut self) -> HostResult<Vec<u8>> {
        self.map(abi::REQUEST_TRAILER)
    }

    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_add_header";
        let f = self.filter(call)?;
        // SAFETY: Envoy copies both within their lengths.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_add_header(
                f,
                abi::REQUEST_HEADER,
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::of(value.as_bytes()),
            )
        };
        ok.then_some(()).ok_or(failed(call))
    }

    fn remove_request_header(&mut self, name: &str) -> HostResult<()> {
        self.remove(abi::REQUEST_HEADER, name)
    }

    fn remove_request_trailer(&mut self, name: &str) -> HostResult<()> {
        self.remove(abi::REQUEST_TRAILER, name)
    }

    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>> {
        let call = "envoy_dynamic_module_callback_http_get_body_chunks";
        let f = self.filter(call)?;
        let kind = abi::RECEIVED_REQUEST_BODY;
        // SAFETY: `f` is the live filter of the current body hook.
        let n = unsafe { abi::envoy_dynamic_module_callback_http_get_body_chunks_size(f, kind) };
        let mut out = Vec::with_capacity(size);
        if n == 0 {
            return Ok(out);
        }
        let mut chunks = vec![EnvoyBuffer::EMPTY; n];
        // SAFETY: `chunks` has room for the `n` slices Envoy reported.
        if !unsafe {
            abi::envoy_dynamic_module_callback_http_get_body_chunks(f, kind, chunks.as_mut_ptr())
        } {
            return Err(failed(call));
        }
        for c in chunks {
            // SAFETY: Envoy's slices are valid until the hook returns.
            out.extend_from_slice(unsafe { c.bytes() });
        }
        Ok(out)
    }

    fn set_request_body(&mut self, size: usize, data: &[u8]) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_drain_body";
        let f = self.filter(call)?;
        let kind = abi::RECEIVED_REQUEST_BODY;
        // SAFETY: `f` is the live filter of the current body hook; Envoy
        // copies `data` during the call.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_drain_body(f, kind, size)
                && (data.is_empty()
                    || abi::envoy_dynamic_module_callback_http_append_body(
                        f,
                        kind,
                        ModuleBuffer::of(data),
                    ))
        };
        if ok {
            Ok(())
        } else {
            Err(failed(call))
        }
    }

    fn send_reply(&mut self, reply: &Reply) -> HostResult<()> {
        let f = self.filter("envoy_dynamic_module_callback_http_send_response")?;
        let mut headers: Vec<ModuleHeader> = Vec::with_capacity(1 + reply.headers.len());
        headers.push(ModuleHeader::of(
            "content-type",
            reply.content_type.as_bytes(),
        ));
        for (n, v) in reply.headers {
            headers.push(ModuleHeader::of(n, v.as_bytes()));
        }
        // SAFETY: Envoy copies the headers, body and details during the call.
        unsafe {
            abi::envoy_dynamic_module_callback_http_send_response(
                f,
                reply.status,
                headers.as_mut_ptr(),
                headers.len(),
                ModuleBuffer::of(reply.body.as_bytes()),
                ModuleBuffer::of(reply.details.as_bytes()),
            );
        }
        Ok(())
    }

    fn set_effective_context(&mut self, context: u32) -> HostResult<()> {
        let found = WORKER.with(|w| {
            let w = w.borrow();
            if w.roots.contains_key(&context) {
                return Some(std::ptr::null_mut());
            }
            w.streams.get(&context).copied()
        });
        match found {
            Some(f) => {
                self.current = f;
                Ok(())
            }
            None => Err(HostError {
                call: "set_effective_context",
                status: 2,
            }),
        }
    }

    fn set_tick_period_ms(&mut self, _ms: u32) -> HostResult<()> {
        // Taken from the configuration when it was checked (`config_new`).
        Ok(())
    }

    fn define_metric(&mut self, kind: MetricKind, name: &str) -> HostResult<u32> {
        // Defined on the main thread when the configuration was checked, in
        // the same order: found by name.
        let i = self
            .config
            .metrics
            .iter()
            .position(|(n, k, _)| n == name && *k == kind)
            .ok_or(failed("define_metric"))?;
        u32::try_from(i).map_err(|_| failed("define_metric"))
    }

    fn increment_metric(&mut self, id: u32, by: i64) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_filter_increment_counter";
        let f = self.filter(call)?;
        let (_, _, envoy_id) = self.metric(id).ok_or(failed(call))?;
        let by = u64::try_from(by).unwrap_or(0);
        // SAFETY: no labels are passed.
        let r = unsafe {
            abi::envoy_dynamic_module_callback_http_filter_increment_counter(
                f,
                *envoy_id,
                std::ptr::null_mut(),
                0,
                by,
            )
        };
        (r == abi::METRICS_SUCCESS)
            .then_some(())
            .ok_or(HostError { call, status: r })
    }

    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_filter_set_gauge";
        let f = self.filter(call)?;
        let (_, _, envoy_id) = self.metric(id).ok_or(failed(call))?;
        // SAFETY: no labels are passed.
        let r = unsafe {
            abi::envoy_dynamic_module_callback_http_filter_set_gauge(
                f,
                *envoy_id,
                std::ptr::null_mut(),
                0,
                value,
            )
        };
        (r == abi::METRICS_SUCCESS)
            .then_some(())
            .ok_or(HostError { call, status: r })
    }

    fn set_property(&mut self, path: &str, value: &[u8]) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_set_filter_state_bytes";
        let f = self.filter(call)?;
        let key = format!("wasm.{path}");
        // SAFETY: Envoy copies both during the call.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_set_filter_state_bytes(
                f,
                ModuleBuffer::of(key.as_bytes()),
                ModuleBuffer::of(value),
            )
        };
        ok.then_some(()).ok_or(failed(call))
    }

    fn now_ms(&mut self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    fn log(&mut self, level: Level, message: &str) {
        if !self.quiet || level >= Level::Critical {
            log(level, message);
        }
    }
}

/// The host the configuration is checked with on the main thread: it
/// defines the metrics in Envoy and records the tick period.
struct Loader {
    envoy: abi::ConfigEnvoyPtr,
    raw: Vec<u8>,
    metrics: Vec<(String, MetricKind, usize)>,
    tick_ms: u32,
}

impl Host for Loader {
    fn plugin_config(&mut self) -> HostResult<Vec<u8>> {
        Ok(self.raw.clone())
    }
    fn request_headers(&mut self) -> HostResult<Vec<u8>> {
        Err(failed("request_headers"))
    }
    fn request_trailers(&mut self) -> HostResult<Vec<u8>> {
        Err(failed("request_trailers"))
    }
    fn add_request_header(&mut self, _: &str, _: &str) -> HostResult<()> {
        Err(failed("add_request_header"))
    }
    fn remove_request_header(&mut self, _: &str) -> HostResult<()> {
        Err(failed("remove_request_header"))
    }
    fn remove_request_trailer(&mut self, _: &str) -> HostResult<()> {
        Err(failed("remove_request_trailer"))
    }
    fn request_body(&mut self, _: usize) -> HostResult<Vec<u8>> {
        Err(failed("request_body"))
    }
    fn send_reply(&mut self, _: &Reply) -> HostResult<()> {
        Err(failed("send_reply"))
    }
    fn set_effective_context(&mut self, _: u32) -> HostResult<()> {
        Ok(())
    }
    fn set_tick_period_ms(&mut self, ms: u32) -> HostResult<()> {
        self.tick_ms = ms;
        Ok(())
    }
    fn define_metric(&mut self, kind: MetricKind, name: &str) -> HostResult<u32> {
        let (call, define): (_, unsafe extern "C" fn(_, _, _, _, _) -> u32) = match kind {
            MetricKind::Counter => (
                "envoy_dynamic_module_callback_http_filter_config_define_counter",
                abi::envoy_dynamic_module_callback_http_filter_config_define_counter,
            ),
            MetricKind::Gauge => (
                "envoy_dynamic_module_callback_http_filter_config_define_gauge",
                abi::envoy_dynamic_module_callback_http_filter_config_define_gauge,
            ),
        };
        let mut id = 0usize;
        // SAFETY: Envoy copies the name during the call and writes `id`.
        let r = unsafe {
            define(
                self.envoy,
                ModuleBuffer::of(name.as_bytes()),
                std::ptr::null_mut(),
                0,
                &mut id,
            )
        };
        if r != abi::METRICS_SUCCESS {
            return Err(HostError { call, status: r });
        }
        let i = u32::try_from(self.metrics.len()).map_err(|_| failed(call))?;
        self.metrics.push((name.to_owned(), kind, id));
        Ok(i)
    }
    fn increment_metric(&mut self, _: u32, _: i64) -> HostResult<()> {
        Ok(())
    }
    fn record_metric(&mut self, _: u32, _: u64) -> HostResult<()> {
        // A gauge is set by each worker as it configures (no stream here).
        Ok(())
    }
    fn set_property(&mut self, _: &str, _: &[u8]) -> HostResult<()> {
        Err(failed("set_property"))
    }
    fn now_ms(&mut self) -> u64 {
        0
    }
    fn log(&mut self, level: Level, message: &str) {
        log(level, message);
    }
}

// The event hooks: each a shim over `dispatch`.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const std::ffi::c_char {
    abi::ABI_VERSION.as_ptr().cast()
}

/// Checks the configuration (every error logged, and null: Envoy refuses
/// the filter) and defines its metrics.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    envoy: abi::ConfigEnvoyPtr,
    name: EnvoyBuffer,
    config: EnvoyBuffer,
) -> *const c_void {
    // SAFETY: Envoy's buffers are valid during the call.
    let (name, raw) = unsafe { (name.bytes(), config.bytes()) };
    if name != FILTER_NAME {
        log(
            Level::Error,
            &format!(
                "hookstamp: filter_name is {:?}; this module's filter is \"hookstamp\"",
                String::from_utf8_lossy(name)
            ),
        );
        return std::ptr::null();
    }
    let root = next_id();
    let mut loader = Loader {
        envoy,
        raw: raw.to_vec(),
        metrics: Vec::new(),
        tick_ms: 0,
    };
    let probe = Dispatch::default();
    probe.context_create(&mut loader, root, 0);
    if probe.configure(&mut loader, root) == 0 {
        return std::ptr::null();
    }
    if loader.tick_ms > 0 {
        start_ticking(loader.tick_ms);
    }
    let config = Arc::new(ModuleConfig {
        root,
        raw: loader.raw,
        metrics: loader.metrics,
        tick_ms: loader.tick_ms,
    });
    Arc::into_raw(config).cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    if config.is_null() {
        return;
    }
    // SAFETY: the pointer `config_new` returned, given back once. Streams
    // keep their own reference; a worker's root stays configured (a few
    // bytes) until the process ends.
    drop(unsafe { Arc::from_raw(config.cast::<ModuleConfig>()) });
}

/// A stream: configures the root on this worker first, if it is new here.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: *const c_void,
    envoy: FilterEnvoyPtr,
) -> *const c_void {
    if config.is_null() {
        return std::ptr::null();
    }
    // SAFETY: `config` is a live `Arc<ModuleConfig>` (Envoy destroys the
    // configuration only after its filters); this takes one more reference.
    let config = unsafe {
        Arc::increment_strong_count(config.cast::<ModuleConfig>());
        Arc::from_raw(config.cast::<ModuleConfig>())
    };
    let root = config.root;
    let context = next_id();
    let configured = WORKER.with(|w| w.borrow().roots.get(&root).copied());
    let mut host = Native {
        config: &config,
        current: envoy,
        quiet: true,
    };
    if configured.is_none() {
        let taken = DISPATCH.with(|d| {
            d.context_create(&mut host, root, 0);
            d.configure(&mut host, root) == 1
        });
        WORKER.with(|w| w.borrow_mut().roots.insert(root, taken));
    }
    DISPATCH.with(|d| d.context_create(&mut host, context, root));
    WORKER.with(|w| w.borrow_mut().streams.insert(context, envoy));
    Box::into_raw(Box::new(Stream {
        context,
        envoy,
        config,
    }))
    .cast()
}

/// The stream behind a module pointer.
///
/// # Safety
/// `stream` is a pointer `filter_new` returned, not yet destroyed.
unsafe fn stream<'a>(stream: *const c_void) -> &'a Stream {
    // SAFETY: the caller's contract.
    unsafe { &*stream.cast::<Stream>() }
}

fn host(s: &Stream) -> Native<'_> {
    Native {
        config: &s.config,
        current: s.envoy,
        quiet: false,
    }
}

/// After a callback: the first stream of a worker that holds a request
/// carries the worker's ticks.
fn keep_ticking(s: &Stream) {
    if s.config.tick_ms == 0 {
        return;
    }
    let holds = DISPATCH.with(|d| d.held().is_some_and(|(n, _)| n > 0));
    if holds {
        WORKER.with(|w| {
            let mut w = w.borrow_mut();
            if w.ticker.is_none() {
                w.ticker = make_ticker(s.context, s.envoy);
            }
        });
    }
}

fn make_ticker(context: u32, envoy: FilterEnvoyPtr) -> Option<(u32, SchedulerPtr)> {
    // SAFETY: `envoy` is a live filter of this thread.
    let scheduler = unsafe { abi::envoy_dynamic_module_callback_http_filter_scheduler_new(envoy) };
    if scheduler.is_null() {
        return None;
    }
    ticks().schedulers.push(scheduler as usize);
    Some((context, scheduler))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    _envoy: FilterEnvoyPtr,
    s: *const c_void,
    end_of_stream: bool,
) -> u32 {
    // SAFETY: Envoy passes the pointer `filter_new` returned.
    let s = unsafe { stream(s) };
    let status =
        DISPATCH.with(|d| d.request_headers(&mut host(s), s.context, u32::from(end_of_stream)));
    keep_ticking(s);
    status
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    envoy: FilterEnvoyPtr,
    s: *const c_void,
    end_of_stream: bool,
) -> u32 {
    // SAFETY: Envoy passes the pointer `filter_new` returned.
    let s = unsafe { stream(s) };
    // SAFETY: a body hook of a live filter.
    let size = unsafe { received(envoy) };
    let status =
        DISPATCH.with(|d| d.request_body(&mut host(s), s.context, size, u32::from(end_of_stream)));
    keep_ticking(s);
    status
}

/// The size of the chunk a body hook was handed.
///
/// # Safety
/// `envoy` is the filter of the current body hook.
unsafe fn received(envoy: FilterEnvoyPtr) -> usize {
    // SAFETY: the caller's contract.
    unsafe {
        abi::envoy_dynamic_module_callback_http_get_body_size(envoy, abi::RECEIVED_REQUEST_BODY)
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    _envoy: FilterEnvoyPtr,
    s: *const c_void,
) -> u32 {
    // SAFETY: Envoy passes the pointer `filter_new` returned.
    let s = unsafe { stream(s) };
    DISPATCH.with(|d| d.request_trailers(&mut host(s), s.context))
}

/// The tick, posted by the tick thread to this worker's ticking stream:
/// runs each root configured on this thread.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _envoy: FilterEnvoyPtr,
    s: *const c_void,
    _event: u64,
) {
    // SAFETY: Envoy passes the pointer `filter_new` returned.
    let s = unsafe { stream(s) };
    let roots: Vec<u32> = WORKER.with(|w| {
        w.borrow()
            .roots
            .iter()
            .filter(|(_, taken)| **taken)
            .map(|(r, _)| *r)
            .collect()
    });
    for root in roots {
        let mut h = host(s);
        h.current = std::ptr::null_mut();
        DISPATCH.with(|d| d.tick(&mut h, root));
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    0
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    0
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
) -> u32 {
    0
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
) {
}

/// The stream is over: whatever it held is given back; a worker's ticks
/// move to another of its streams while it still holds requests.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(s: *const c_void) {
    if s.is_null() {
        return;
    }
    // SAFETY: the pointer `filter_new` returned, given back once.
    let s = unsafe { Box::from_raw(s.cast_mut().cast::<Stream>()) };
    DISPATCH.with(|d| d.delete(s.context));
    let holds = DISPATCH.with(|d| d.held().is_some_and(|(n, _)| n > 0));
    WORKER.with(|w| {
        let mut w = w.borrow_mut();
        w.streams.remove(&s.context);
        if w.ticker.is_some_and(|(c, _)| c == s.context) {
            if let Some((_, scheduler)) = w.ticker.take() {
                let mut t = ticks();
                t.schedulers.retain(|p| *p != scheduler as usize);
                // SAFETY: out of the list, under the lock: never posted to again.
                unsafe {
                    abi::envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler)
                };
            }
            if holds {
                let next = w.streams.iter().next().map(|(c, e)| (*c, *e));
                w.ticker = next.and_then(|(c, e)| make_ticker(c, e));
            }
        }
    });
}

// Hooks the ABI requires a module to have, which hookstamp never uses: it
// makes no callouts and keeps no watermark state.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _callout: u64,
    _result: u32,
    _headers: *const EnvoyHeader,
    _headers_size: usize,
    _body: *const EnvoyBuffer,
    _body_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _stream: u64,
    _headers: *const EnvoyHeader,
    _headers_size: usize,
    _end_of_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _stream: u64,
    _data: *const EnvoyBuffer,
    _data_count: usize,
    _end_of_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _stream: u64,
    _trailers: *const EnvoyHeader,
    _trailers_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _stream: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _stream: u64,
    _reason: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
) {
}
