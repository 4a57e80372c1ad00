//! The Envoy dynamic-module ABI (`envoy.filters.http.dynamic_modules`), the
//! second host adapter beside `filter` (proxy-wasm). Built only with the
//! feature `dynamic-module` (`make dynamic-module`: target/libhookstamp.so).
//!
//! The ABI's own objects are the lifecycle's, with no ids of the module's:
//! - a filter configuration (`config_new`, main thread) is a `Plugin`:
//!   checked once there (every error logged, and null: Envoy refuses the
//!   filter), its counters and gauges defined in Envoy, and shared by every
//!   worker as an `Arc`, the pointer Envoy keeps;
//! - each worker has its `Instance` of it (`worker`), made by its first
//!   stream of the configuration and kept between streams, but keeping no
//!   configuration alive: a configuration Envoy destroyed (its secrets
//!   with it) goes with the last request that used it;
//! - a stream (`filter_new`) is a `Filter`, which owns its `Request` and is
//!   the pointer Envoy keeps for it; Envoy's per-stream pointer is the
//!   request's key, by which the tick answers it (`envoy::Envoy`);
//! - headers are read in place, as views into Envoy's map.
//!
//! Every export is a thin shim behind `barrier`, which catches a panic:
//! on a request's path the stream is answered 500, every panic is counted
//! (`hookstamp_panics_total`), and Envoy goes on (the module is built to
//! unwind: `profile.dynmod`).

mod abi;
mod envoy;
mod probe;
mod worker;

use crate::host::{DataStatus, HeadersStatus, Level};
use crate::lifecycle::{Plugin, Request};
use crate::metrics::bump;
use abi::{EnvoyBuffer, EnvoyHeader, FilterEnvoyPtr};
use envoy::{data_status, headers_status, log, Envoy, Loader};
use std::cell::Cell;
use std::ffi::c_void;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// The `filter_name` this module answers to.
const FILTER_NAME: &[u8] = b"hookstamp";

/// One stream: its request.
struct Filter {
    request: Request<FilterEnvoyPtr>,
}

/// Panics caught and not counted yet. A counter is incremented through a
/// stream, so a panic is counted by the next callback of a configured
/// stream (at once for one in a request's callback); every configuration
/// defines the same `hookstamp_panics_total`, one counter in Envoy.
static UNCOUNTED: AtomicUsize = AtomicUsize::new(0);

/// Runs an export's body; a panic is caught, logged (the panic hook
/// logged its message) and left to be counted, and `None` returned.
fn barrier<T>(hook: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(_) => {
            UNCOUNTED.fetch_add(1, Ordering::Relaxed);
            log(
                Level::Critical,
                &format!("hookstamp: a panic in {hook} was caught"),
            );
            None
        }
    }
}

/// A request-path export: `f` on the stream's filter; a panic answers the
/// stream 500, and it goes no further (`stopped`).
///
/// # Safety
/// `s` is a pointer `filter_new` returned, not yet destroyed.
unsafe fn on_stream<T>(
    hook: &str,
    envoy: FilterEnvoyPtr,
    s: *const c_void,
    stopped: T,
    f: impl FnOnce(&mut Filter, &mut Envoy) -> T,
) -> T {
    // SAFETY: the caller's contract; Envoy calls a stream's hooks one at a
    // time, on its worker's thread.
    let filter = unsafe { &mut *s.cast_mut().cast::<Filter>() };
    let mut host = Envoy(envoy);
    let done = barrier(hook, || {
        probe::fire(hook);
        f(filter, &mut host)
    });
    if done.is_none() {
        barrier("the answer to a panic", || filter.request.abort(&mut host));
    }
    count_panics(filter, &mut host);
    done.unwrap_or(stopped)
}

/// Counts the panics caught so far in the stream's configuration (none
/// for a filter without one: a later stream counts them).
fn count_panics(filter: &Filter, host: &mut Envoy) {
    if UNCOUNTED.load(Ordering::Relaxed) == 0 {
        return;
    }
    let Some(id) = filter.request.plugin().and_then(|p| p.metrics.panics) else {
        return;
    };
    bump(host, Some(id), UNCOUNTED.swap(0, Ordering::Relaxed));
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const std::ffi::c_char {
    probe::log_panics();
    abi::ABI_VERSION.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    envoy: abi::ConfigEnvoyPtr,
    name: EnvoyBuffer,
    config: EnvoyBuffer,
) -> *const c_void {
    // SAFETY: Envoy's buffers are valid during the call.
    let (name, raw) = unsafe { (name.bytes(), config.bytes()) };
    barrier("config_new", || {
        probe::fire("config_new");
        config_new(envoy, name, raw)
    })
    .unwrap_or(std::ptr::null())
}

/// Checks a filter configuration once, for every worker.
fn config_new(envoy: abi::ConfigEnvoyPtr, name: &[u8], raw: &[u8]) -> *const c_void {
    if name != FILTER_NAME {
        let name = String::from_utf8_lossy(name);
        log(
            Level::Error,
            &format!("hookstamp: filter_name is {name:?}; this module's filter is \"hookstamp\""),
        );
        return std::ptr::null();
    }
    let mut loader = Loader { envoy, tick_ms: 0 };
    let Some(mut plugin) = Plugin::load(&mut loader, raw) else {
        return std::ptr::null();
    };
    plugin.metrics.define_panics(&mut loader);
    if loader.tick_ms > 0 {
        worker::start_ticking(loader.tick_ms);
    }
    Arc::into_raw(Arc::new(plugin)).cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    if config.is_null() {
        return;
    }
    // SAFETY: the pointer `config_new` returned, given back once. Each
    // worker's instance keeps its own reference while a stream uses it.
    let config = unsafe { Arc::from_raw(config.cast::<Plugin>()) };
    barrier("config_destroy", || {
        probe::fire("config_destroy");
        // The configuration goes now, or with its last request: a
        // worker's instance does not keep it.
        drop(config);
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: *const c_void,
    envoy: FilterEnvoyPtr,
) -> *const c_void {
    if config.is_null() {
        return std::ptr::null();
    }
    // SAFETY: `config` is a live `Arc<Plugin>` (Envoy destroys the
    // configuration only after its filters), borrowed here: its count is
    // left as it is (an instance made for it takes its own reference).
    let plugin = ManuallyDrop::new(unsafe { Arc::from_raw(config.cast::<Plugin>()) });
    // Outside the barrier: `try_with`, which cannot panic (at a thread's
    // end the spare may be gone, and a new room is made).
    let (room, last) = SPARE_FILTER
        .try_with(Cell::take)
        .ok()
        .flatten()
        .map_or((None, None), |(room, last)| (Some(room), last));
    let request = barrier("filter_new", || {
        probe::fire("filter_new");
        // The last stream's instance where it is this plugin's (a worker
        // serves one configuration nearly always): no look through the
        // worker's instances.
        let inst = match last {
            Some(i) if i.serves(&plugin) => i,
            _ => worker::instance(&plugin),
        };
        Request::new(Some(inst), envoy)
    });
    // After a panic: a filter with no configuration, which answers 500.
    let request = request.unwrap_or_else(|| Request::new(None, envoy));
    let mut room = room.unwrap_or_else(Box::new_uninit);
    room.write(Filter { request });
    Box::into_raw(room).cast()
}

/// A worker's spare stream room, and its last stream's instance.
type Spare = (Box<MaybeUninit<Filter>>, Option<Rc<worker::Inst>>);

thread_local! {
    /// The allocation of the worker's last stream, empty, for its next:
    /// one allocation a worker, not one a stream (Envoy's allocator costs
    /// some 200 instructions a stream for it).
    /// With it, that stream's instance (which keeps no configuration
    /// alive: `Instance::shared`).
    static SPARE_FILTER: Cell<Option<Spare>> = const { Cell::new(None) };
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    envoy: FilterEnvoyPtr,
    s: *const c_void,
    end_of_stream: bool,
) -> u32 {
    // SAFETY: Envoy passes the pointer `filter_new` returned.
    unsafe {
        on_stream(
            "request_headers",
            envoy,
            s,
            headers_status(HeadersStatus::StopIteration),
            |f, host| {
                let status = f.request.on_headers(host, end_of_stream);
                ticks_after(f, envoy);
                headers_status(status)
            },
        )
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    envoy: FilterEnvoyPtr,
    s: *const c_void,
    end_of_stream: bool,
) -> u32 {
    // A body that passes (its request stamped at its headers, or not
    // routed) goes on with nothing done: read before any barrier, as a
    // field of the stream's filter cannot panic, and apart from the
    // barrier's frame.
    // SAFETY: Envoy passes the pointer `filter_new` returned, live; its
    // hooks come one at a time.
    if !s.is_null() && unsafe { &*s.cast::<Filter>() }.request.passes_body() {
        return data_status(DataStatus::Continue);
    }
    // SAFETY: as above.
    unsafe { body_hook(envoy, s, end_of_stream) }
}

/// The body hook of a request that is held or streamed.
///
/// # Safety
/// `s` is a pointer `filter_new` returned, not yet destroyed.
#[inline(never)]
unsafe fn body_hook(envoy: FilterEnvoyPtr, s: *const c_void, end_of_stream: bool) -> u32 {
    let stopped = data_status(DataStatus::StopNoBuffer);
    // SAFETY: the caller's contract.
    unsafe {
        on_stream("request_body", envoy, s, stopped, |f, host| {
            request_body(f, host, envoy, end_of_stream)
        })
    }
}

/// A body chunk: a body that passes is not even sized.
fn request_body(f: &mut Filter, host: &mut Envoy, envoy: FilterEnvoyPtr, eos: bool) -> u32 {
    if f.request.passes_body() {
        return data_status(DataStatus::Continue);
    }
    let status = f.request.on_body(host, received_body_size(envoy), eos);
    ticks_after(f, envoy);
    data_status(status)
}

/// The size of the request body Envoy has buffered for a body hook.
fn received_body_size(envoy: FilterEnvoyPtr) -> usize {
    // SAFETY: called only inside a body hook of a live filter.
    unsafe {
        abi::envoy_dynamic_module_callback_http_get_body_size(envoy, abi::RECEIVED_REQUEST_BODY)
    }
}

/// After a callback: a worker that holds a request has its ticks.
fn ticks_after(f: &Filter, envoy: FilterEnvoyPtr) {
    if let Some(inst) = f.request.instance() {
        worker::keep_ticking(inst, envoy);
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    envoy: FilterEnvoyPtr,
    s: *const c_void,
) -> u32 {
    // SAFETY: Envoy passes the pointer `filter_new` returned.
    unsafe {
        on_stream(
            "request_trailers",
            envoy,
            s,
            headers_status(HeadersStatus::StopIteration),
            |f, host| headers_status(f.request.on_trailers(host)),
        )
    }
}

/// The tick, posted by the tick thread to this worker's ticking stream:
/// runs each of the worker's instances.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _envoy: FilterEnvoyPtr,
    _s: *const c_void,
    _event: u64,
) {
    barrier("scheduled", || {
        probe::fire("scheduled");
        worker::tick();
    });
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

/// The stream is over: whatever it held is given back (its `Request`
/// dropped), and the worker's ticks move to another of its streams.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(s: *const c_void) {
    if s.is_null() {
        return;
    }
    // SAFETY: the pointer `filter_new` returned, given back once, holding
    // the filter it wrote: taken out, and the emptied room kept for the
    // next stream.
    let room = unsafe { Box::from_raw(s.cast_mut().cast::<MaybeUninit<Filter>>()) };
    // SAFETY: as above.
    let filter = unsafe { room.assume_init_read() };
    // Where the spare is gone (at a thread's end), the room is freed.
    let last = filter.request.instance().cloned();
    // Only a stream of a plugin that ticks can carry the worker's ticks.
    let ticks = last.as_ref().is_some_and(|i| i.ticks());
    let _ = SPARE_FILTER.try_with(|spare| spare.set(Some((room, last))));
    let envoy = filter.request.key();
    barrier("filter_destroy", || {
        probe::fire("filter_destroy");
        drop(filter);
    });
    // Apart: after a panic above too, the ticks leave a stream that is gone.
    if ticks {
        barrier("filter_destroy", || worker::stream_ended(envoy));
    }
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
