//! The proxy-wasm ABI (0.2.1), and nothing else: the imports hookstamp
//! calls, wrapped so that every status is a `HostResult` (`Wasm`, the host
//! traits of a real proxy), and the exports Envoy calls, each a shim over
//! `contexts`, which the tests run natively. The lifecycle's statuses and
//! levels are mapped here onto the ABI's numbers.
//!
//! hookstamp implements the ABI itself rather than through the proxy-wasm
//! SDK: the SDK's helpers end in `panic!` on an unexpected status (a panic
//! aborts the VM and fails every request behind it), and its dispatcher
//! exports every callback, its body callback one that cannot answer
//! StopIterationAndWatermark. This module exports exactly the callbacks
//! hookstamp implements, so the module cargo builds is the module Envoy
//! runs: no export is renamed or removed after the link.

use super::contexts::{Clock, Contexts, Proxy};
use super::counts::Pending;
use crate::host::{
    self, ConfigHost, DataStatus, Header, HeadersStatus, HostError, HostResult, Level, MetricKind,
    StreamHost, Streams,
};
use crate::pairs;
use crate::reply::Reply;
use std::cell::RefCell;
use std::collections::BTreeMap;

mod imports {
    #[link(wasm_import_module = "env")]
    extern "C" {
        pub fn proxy_log(level: u32, data: *const u8, size: usize) -> u32;
        pub fn proxy_get_buffer_bytes(
            kind: u32,
            start: usize,
            max: usize,
            data: *mut *mut u8,
            size: *mut usize,
        ) -> u32;
        pub fn proxy_get_header_map_pairs(map: u32, data: *mut *mut u8, size: *mut usize) -> u32;
        pub fn proxy_add_header_map_value(
            map: u32,
            key: *const u8,
            key_size: usize,
            value: *const u8,
            value_size: usize,
        ) -> u32;
        pub fn proxy_remove_header_map_value(map: u32, key: *const u8, key_size: usize) -> u32;
        #[allow(clippy::too_many_arguments)]
        pub fn proxy_send_local_response(
            status: u32,
            details: *const u8,
            details_size: usize,
            body: *const u8,
            body_size: usize,
            headers: *const u8,
            headers_size: usize,
            grpc_status: i32,
        ) -> u32;
        pub fn proxy_set_effective_context(context: u32) -> u32;
        pub fn proxy_set_tick_period_milliseconds(period: u32) -> u32;
        pub fn proxy_define_metric(kind: u32, name: *const u8, size: usize, id: *mut u32) -> u32;
        pub fn proxy_increment_metric(id: u32, by: i64) -> u32;
        pub fn proxy_record_metric(id: u32, value: u64) -> u32;
        pub fn proxy_get_current_time_nanoseconds(time: *mut u64) -> u32;
        pub fn proxy_set_buffer_bytes(
            buffer: u32,
            start: usize,
            size: usize,
            data: *const u8,
            data_size: usize,
        ) -> u32;
        pub fn proxy_set_property(
            path: *const u8,
            path_size: usize,
            value: *const u8,
            value_size: usize,
        ) -> u32;
    }
}

/// The ABI's statuses that matter here.
const OK: u32 = 0;
const NOT_FOUND: u32 = 1;
const EMPTY: u32 = 7;

const BUFFER_REQUEST_BODY: u32 = 0;
const BUFFER_PLUGIN_CONFIGURATION: u32 = 7;
const MAP_REQUEST_HEADERS: u32 = 0;
const MAP_REQUEST_TRAILERS: u32 = 1;

fn status(call: &'static str, s: u32) -> HostResult<()> {
    if s == OK {
        Ok(())
    } else {
        Err(HostError { call, status: s })
    }
}

/// Takes over a buffer the host allocated through
/// `proxy_on_memory_allocate` (a boxed slice of exactly `size` bytes).
fn owned(data: *mut u8, size: usize) -> Vec<u8> {
    if data.is_null() || size == 0 {
        return Vec::new();
    }
    // SAFETY: see `proxy_on_memory_allocate`; nothing else owns the buffer.
    unsafe { Vec::from_raw_parts(data, size, size) }
}

/// A buffer read: NotFound and Empty are an empty buffer.
fn buffer(
    call: &'static str,
    read: impl FnOnce(*mut *mut u8, *mut usize) -> u32,
) -> HostResult<Vec<u8>> {
    let mut data: *mut u8 = std::ptr::null_mut();
    let mut size: usize = 0;
    match read(&mut data, &mut size) {
        OK => Ok(owned(data, size)),
        NOT_FOUND | EMPTY => Ok(Vec::new()),
        s => Err(HostError { call, status: s }),
    }
}

/// A header map: its wire form read into `buf`, and views into it.
fn map_pairs(map: u32, buf: &mut Vec<u8>) -> HostResult<Vec<Header<'_>>> {
    let call = "proxy_get_header_map_pairs";
    // SAFETY: the host only writes the two out-parameters.
    *buf = buffer(call, |d, s| unsafe {
        imports::proxy_get_header_map_pairs(map, d, s)
    })?;
    // A map the host wrote wrong is a failed call, answered 500.
    pairs::parse_into(buf, host::spare_list()).ok_or(HostError { call, status: 0 })
}

/// The ABI's FilterHeadersStatus.
fn headers_status(s: HeadersStatus) -> u32 {
    match s {
        HeadersStatus::Continue => 0,
        HeadersStatus::StopIteration => 1,
    }
}

/// The ABI's FilterDataStatus.
fn data_status(s: DataStatus) -> u32 {
    match s {
        DataStatus::Continue => 0,
        DataStatus::StopAndWatermark => 2,
        DataStatus::StopNoBuffer => 3,
    }
}

/// The ABI's LogLevel.
fn level(l: Level) -> u32 {
    match l {
        Level::Info => 2,
        Level::Warn => 3,
        Level::Error => 4,
        Level::Critical => 5,
    }
}

/// The ABI's MetricType.
fn metric_kind(k: MetricKind) -> u32 {
    match k {
        MetricKind::Counter => 0,
        MetricKind::Gauge => 1,
    }
}

fn remove(map: u32, name: &str) -> HostResult<()> {
    // SAFETY: the host reads `name` within its length.
    let s = unsafe { imports::proxy_remove_header_map_value(map, name.as_ptr(), name.len()) };
    status("proxy_remove_header_map_value", s)
}

/// The proxy: its current context's stream, and the VM's configuration
/// calls; made for each callback, reading the clock it is given
/// (`Proxy::set_clock`): the proxy's, or the one read since the last tick.
#[derive(Default)]
struct Wasm {
    clock: Clock,
    /// The proxy's clock as a `Clock::Once` read it.
    read: Option<u64>,
}

impl Wasm {
    /// The clock the callback reads (`Proxy::set_clock`).
    fn clock_ms(&mut self) -> u64 {
        match self.clock {
            Clock::At(ms) => ms,
            Clock::Proxy => now_ms(),
            Clock::Once => {
                let ms = now_ms();
                self.clock = Clock::At(ms);
                self.read = Some(ms);
                ms
            }
        }
    }
}

impl StreamHost for Wasm {
    fn request_headers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        map_pairs(MAP_REQUEST_HEADERS, buf)
    }

    fn request_trailers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        map_pairs(MAP_REQUEST_TRAILERS, buf)
    }

    fn headers_done(&mut self, headers: Vec<Header<'_>>) {
        host::keep_spare(headers);
    }

    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()> {
        // SAFETY: the host reads both within their lengths.
        let s = unsafe {
            imports::proxy_add_header_map_value(
                MAP_REQUEST_HEADERS,
                name.as_ptr(),
                name.len(),
                value.as_ptr(),
                value.len(),
            )
        };
        status("proxy_add_header_map_value", s)
    }

    fn remove_request_header(&mut self, name: &str) -> HostResult<()> {
        remove(MAP_REQUEST_HEADERS, name)
    }

    fn set_request_body(&mut self, size: usize, data: &[u8]) -> HostResult<()> {
        // Envoy drains the first `size` bytes (the chunk) and prepends
        // `data`. SAFETY: the host reads `data` within its length.
        let s = unsafe {
            imports::proxy_set_buffer_bytes(BUFFER_REQUEST_BODY, 0, size, data.as_ptr(), data.len())
        };
        status("proxy_set_buffer_bytes", s)
    }

    fn set_property(&mut self, path: &str, value: &[u8]) -> HostResult<()> {
        // SAFETY: the host reads both within their lengths.
        let s = unsafe {
            imports::proxy_set_property(path.as_ptr(), path.len(), value.as_ptr(), value.len())
        };
        status("proxy_set_property", s)
    }

    fn remove_request_trailer(&mut self, name: &str) -> HostResult<()> {
        remove(MAP_REQUEST_TRAILERS, name)
    }

    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>> {
        if size == 0 {
            return Ok(Vec::new());
        }
        // SAFETY: as in `map_pairs`.
        buffer("proxy_get_buffer_bytes", |d, s| unsafe {
            imports::proxy_get_buffer_bytes(BUFFER_REQUEST_BODY, 0, size, d, s)
        })
    }

    fn send_reply(&mut self, reply: &Reply) -> HostResult<()> {
        let mut headers: Vec<(&str, &[u8])> = vec![("content-type", reply.content_type.as_bytes())];
        headers.extend(reply.headers.iter().map(|(n, v)| (*n, v.as_bytes())));
        let headers = pairs::serialise(&headers);
        let details = reply.details;
        // SAFETY: the host reads each buffer within its length.
        let s = unsafe {
            imports::proxy_send_local_response(
                reply.status,
                details.as_ptr(),
                details.len(),
                reply.body.as_ptr(),
                reply.body.len(),
                headers.as_ptr(),
                headers.len(),
                -1,
            )
        };
        status("proxy_send_local_response", s)
    }

    fn increment_metric(&mut self, id: u32, by: u64) -> HostResult<()> {
        // Handed to Envoy at a tick (`flush_counts`).
        PENDING.with(|p| p.borrow_mut().add(id, by));
        Ok(())
    }

    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        record_metric(id, value)
    }

    fn now_ms(&mut self) -> u64 {
        self.clock_ms()
    }

    fn log(&mut self, level: Level, message: &str) {
        log(level, message);
    }
}

impl ConfigHost for Wasm {
    fn define_metric(&mut self, kind: MetricKind, name: &str) -> HostResult<u32> {
        // Envoy gives every definition a new id and keeps it for the VM's
        // life, though the stat behind it is the same: defining a pushed
        // configuration's metrics anew would grow Envoy by an entry per
        // metric per push. An id is looked up by kind and name first.
        let key = (metric_kind(kind), name.to_owned());
        if let Some(id) = METRIC_IDS.with(|ids| ids.borrow().get(&key).copied()) {
            return Ok(id);
        }
        let id = define(kind, name)?;
        METRIC_IDS.with(|ids| ids.borrow_mut().insert(key, id));
        Ok(id)
    }

    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        record_metric(id, value)
    }

    fn set_tick_period_ms(&mut self, ms: u32) -> HostResult<()> {
        // SAFETY: no memory is passed.
        let s = unsafe { imports::proxy_set_tick_period_milliseconds(ms) };
        status("proxy_set_tick_period_milliseconds", s)
    }

    fn now_ms(&mut self) -> u64 {
        StreamHost::now_ms(self)
    }

    fn log(&mut self, level: Level, message: &str) {
        log(level, message);
    }

    fn counts_on_tick(&self) -> bool {
        true
    }
}

impl Streams for Wasm {
    type Key = u32;
    type Stream<'a> = &'a mut Wasm;

    fn stream(&mut self, context: u32) -> Option<&mut Wasm> {
        match self.set_effective_context(context) {
            Ok(()) => Some(self),
            Err(e) => {
                log(Level::Warn, &format!("a held request is gone: {e}"));
                None
            }
        }
    }
}

impl Proxy for Wasm {
    fn plugin_config(&mut self) -> HostResult<Vec<u8>> {
        // SAFETY: the host only writes the two out-parameters.
        buffer("proxy_get_buffer_bytes", |d, s| unsafe {
            imports::proxy_get_buffer_bytes(BUFFER_PLUGIN_CONFIGURATION, 0, usize::MAX, d, s)
        })
    }

    fn set_effective_context(&mut self, context: u32) -> HostResult<()> {
        // SAFETY: no memory is passed.
        let s = unsafe { imports::proxy_set_effective_context(context) };
        status("proxy_set_effective_context", s)
    }

    fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
        self.read = None;
    }

    fn clock_read(&self) -> Option<u64> {
        self.read
    }

    fn flush_counts(&mut self) {
        PENDING.with(|p| {
            p.borrow_mut().drain(|id, by| {
                let by = i64::try_from(by).unwrap_or(i64::MAX);
                // SAFETY: no memory is passed. A refused increment is
                // dropped, as an increment made at once would be.
                let _ = unsafe { imports::proxy_increment_metric(id, by) };
            });
        });
    }
}

thread_local! {
    /// The VM's counter increments until a tick hands them over (`counts`).
    static PENDING: RefCell<Pending> = RefCell::new(Pending::default());
}

fn record_metric(id: u32, value: u64) -> HostResult<()> {
    // SAFETY: no memory is passed.
    let s = unsafe { imports::proxy_record_metric(id, value) };
    status("proxy_record_metric", s)
}

fn now_ms() -> u64 {
    let mut ns = 0u64;
    // SAFETY: the host writes `ns`.
    let s = unsafe { imports::proxy_get_current_time_nanoseconds(&mut ns) };
    if s == OK {
        ns / 1_000_000
    } else {
        // No clock: never late, rather than always.
        0
    }
}

/// The ABI's `proxy_define_metric`: a new id for the metric.
fn define(kind: MetricKind, name: &str) -> HostResult<u32> {
    let mut id = 0u32;
    // SAFETY: the host reads `name` within its length and writes `id`.
    let s = unsafe {
        imports::proxy_define_metric(metric_kind(kind), name.as_ptr(), name.len(), &mut id)
    };
    status("proxy_define_metric", s).map(|()| id)
}

fn log(l: Level, message: &str) {
    // SAFETY: the host reads `message` within its length.
    let _ = unsafe { imports::proxy_log(level(l), message.as_ptr(), message.len()) };
}

thread_local! {
    static CONTEXTS: Contexts = Contexts::default();
    /// The metric ids this VM has had from Envoy, by kind and name.
    static METRIC_IDS: RefCell<BTreeMap<(u32, String), u32>> = const { RefCell::new(BTreeMap::new()) };
}

// The exports: the ABI's callbacks hookstamp implements, and nothing else.

#[cfg(target_os = "wasi")]
extern "C" {
    fn __wasm_call_ctors();
}

/// The reactor's start: runs the constructors, then makes a panic log
/// through the proxy before the VM aborts, so that its reason is in
/// Envoy's log (none is expected: every host status is handled).
#[no_mangle]
pub extern "C" fn _initialize() {
    #[cfg(target_os = "wasi")]
    // SAFETY: called once, by the host, before any other export.
    unsafe {
        __wasm_call_ctors();
    }
    std::panic::set_hook(Box::new(|info| {
        log(Level::Critical, &format!("hookstamp panicked: {info}"));
    }));
}

#[no_mangle]
pub extern "C" fn proxy_abi_version_0_2_1() {}

/// The host's allocations: a boxed slice of exactly `size` bytes, which
/// `owned` takes back. Not zeroed: the host writes every byte of it.
#[no_mangle]
pub extern "C" fn proxy_on_memory_allocate(size: usize) -> *mut u8 {
    // The host fills all of it before `owned` reads any of it.
    let buf: Box<[std::mem::MaybeUninit<u8>]> = Box::new_uninit_slice(size);
    Box::into_raw(buf).cast::<u8>()
}

#[no_mangle]
pub extern "C" fn proxy_on_vm_start(_root: u32, _size: usize) -> u32 {
    1
}

#[no_mangle]
pub extern "C" fn proxy_on_context_create(context: u32, parent: u32) {
    CONTEXTS.with(|c| c.on_context_create(context, parent));
}

#[no_mangle]
pub extern "C" fn proxy_on_configure(root: u32, _size: usize) -> u32 {
    CONTEXTS.with(|c| u32::from(c.on_configure(&mut Wasm::default(), root)))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_headers(context: u32, _headers: usize, end: u32) -> u32 {
    headers_status(CONTEXTS.with(|c| c.on_request_headers(&mut Wasm::default(), context, end != 0)))
}

/// With StopIterationAndBuffer, Envoy adds each new chunk to its buffer
/// before the filter sees it, and answers 413 when that crosses the buffer
/// limit; with StopIterationAndWatermark it holds the chunks under flow
/// control and hands the filter only the new one (see `lifecycle`).
#[no_mangle]
pub extern "C" fn proxy_on_request_body(context: u32, size: usize, end: u32) -> u32 {
    data_status(CONTEXTS.with(|c| c.on_request_body(&mut Wasm::default(), context, size, end != 0)))
}

#[no_mangle]
pub extern "C" fn proxy_on_request_trailers(context: u32, _trailers: usize) -> u32 {
    headers_status(CONTEXTS.with(|c| c.on_request_trailers(&mut Wasm::default(), context)))
}

#[no_mangle]
pub extern "C" fn proxy_on_tick(root: u32) {
    CONTEXTS.with(|c| c.on_tick(&mut Wasm::default(), root));
}

#[no_mangle]
pub extern "C" fn proxy_on_delete(context: u32) {
    CONTEXTS.with(|c| c.on_delete(&mut Wasm::default(), context));
}
