//! Envoy as the lifecycle's hosts: `Loader` (a filter configuration on the
//! main thread: `ConfigHost`) and `Envoy` (one stream, by Envoy's pointer
//! to it: `StreamHost`), each call a thin wrapper over one of the ABI's
//! callbacks, and the ABI's numbers for the lifecycle's statuses and
//! levels.

use super::abi::{
    self, ConfigEnvoyPtr, EnvoyBuffer, EnvoyHeader, FilterEnvoyPtr, ModuleBuffer, ModuleHeader,
};
use crate::host::{
    self, ConfigHost, DataStatus, Header, HeadersStatus, HostError, HostResult, Level, MetricKind,
    StreamHost,
};
use crate::reply::Reply;
use std::mem::MaybeUninit;

/// `envoy_dynamic_module_type_on_http_filter_request_headers_status` (and
/// the trailers' status, which numbers its two alike).
pub fn headers_status(s: HeadersStatus) -> u32 {
    match s {
        HeadersStatus::Continue => 0,
        HeadersStatus::StopIteration => 1,
    }
}

/// `envoy_dynamic_module_type_on_http_filter_request_body_status`.
pub fn data_status(s: DataStatus) -> u32 {
    match s {
        DataStatus::Continue => 0,
        DataStatus::StopAndWatermark => 2,
        DataStatus::StopNoBuffer => 3,
    }
}

/// `envoy_dynamic_module_type_log_level`.
fn level(l: Level) -> u32 {
    match l {
        Level::Info => 2,
        Level::Warn => 3,
        Level::Error => 4,
        Level::Critical => 5,
    }
}

pub fn log(l: Level, message: &str) {
    // SAFETY: Envoy reads the message within its length, during the call.
    unsafe {
        abi::envoy_dynamic_module_callback_log(level(l), ModuleBuffer::of(message.as_bytes()))
    }
}

fn failed(call: &'static str) -> HostError {
    HostError { call, status: 1 }
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A filter configuration as Envoy creates it (`config_new`, main thread):
/// its metrics are defined in Envoy, and Envoy's ids are the lifecycle's.
pub struct Loader {
    pub envoy: ConfigEnvoyPtr,
    /// The tick period the configuration asked for (0: none).
    pub tick_ms: u32,
}

impl ConfigHost for Loader {
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
        u32::try_from(id).map_err(|_| failed(call))
    }

    fn record_metric(&mut self, _: u32, _: u64) -> HostResult<()> {
        // The ABI sets a gauge only through a stream: each worker's first
        // stream of the configuration sets them.
        Err(failed(
            "envoy_dynamic_module_callback_http_filter_set_gauge",
        ))
    }

    fn set_tick_period_ms(&mut self, ms: u32) -> HostResult<()> {
        self.tick_ms = ms;
        Ok(())
    }

    fn now_ms(&mut self) -> u64 {
        now_ms()
    }

    fn log(&mut self, l: Level, message: &str) {
        log(l, message);
    }
}

/// One stream, by Envoy's pointer to it: valid from `filter_new` to
/// `filter_destroy`, and used only on its worker's thread.
#[derive(Clone, Copy)]
pub struct Envoy(pub FilterEnvoyPtr);

impl Envoy {
    /// A header map's entries (`kind`), as views into Envoy's memory.
    fn map<'b>(&self, kind: u32) -> HostResult<Vec<Header<'b>>> {
        let call = "envoy_dynamic_module_callback_http_get_headers";
        // SAFETY: a live filter of this thread.
        let n = unsafe { abi::envoy_dynamic_module_callback_http_get_headers_size(self.0, kind) };
        if n == 0 {
            return Ok(Vec::new());
        }
        // Envoy's views, on the stack for a usual request, left unwritten
        // for Envoy to fill (zeroing them cost more than reading them).
        let mut stack = [MaybeUninit::<EnvoyHeader>::uninit(); 24];
        let mut heap = Vec::new();
        let room: &mut [MaybeUninit<EnvoyHeader>] = if n <= stack.len() {
            &mut stack[..n]
        } else {
            heap.resize(n, MaybeUninit::uninit());
            &mut heap
        };
        // SAFETY: `room` has space for the `n` headers Envoy reported.
        if !unsafe {
            abi::envoy_dynamic_module_callback_http_get_headers(
                self.0,
                kind,
                room.as_mut_ptr().cast::<EnvoyHeader>(),
            )
        } {
            return Err(failed(call));
        }
        // SAFETY: Envoy wrote all `n` (the size it reported, on this
        // thread, with nothing between the two calls).
        let views = unsafe { &*(std::ptr::from_ref(room) as *const [EnvoyHeader]) };
        // Collected into the worker's list of the last request (its
        // allocation kept, `headers_done`), or one of its final size.
        let mut out = host::spare_list();
        // One extend of a known length: room made once, no check a header.
        out.extend(views.iter().map(|h| {
            // SAFETY: Envoy's views stay valid until the event hook returns
            // or the header is removed (`strip` drops a view before it
            // removes its header); the lifetime the caller gets is the
            // callback's.
            unsafe {
                (
                    EnvoyBuffer {
                        ptr: h.key_ptr,
                        length: h.key_length,
                    }
                    .bytes(),
                    EnvoyBuffer {
                        ptr: h.value_ptr,
                        length: h.value_length,
                    }
                    .bytes(),
                )
            }
        }));
        Ok(out)
    }

    fn remove(&self, kind: u32, name: &str) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_set_header";
        // SAFETY: Envoy reads the name within its length; a null value
        // removes the header.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_set_header(
                self.0,
                kind,
                ModuleBuffer::of(name.as_bytes()),
                ModuleBuffer::NULL,
            )
        };
        ok.then_some(()).ok_or(failed(call))
    }
}

impl Envoy {
    /// A counter's increment or a gauge's value (`call` is `f`'s name).
    fn metric(
        &self,
        call: &'static str,
        f: unsafe extern "C" fn(FilterEnvoyPtr, usize, *mut ModuleBuffer, usize, u64) -> u32,
        id: u32,
        value: u64,
    ) -> HostResult<()> {
        let id = usize::try_from(id).map_err(|_| failed(call))?;
        // SAFETY: a live filter of this thread; no labels are passed.
        let r = unsafe { f(self.0, id, std::ptr::null_mut(), 0, value) };
        (r == abi::METRICS_SUCCESS)
            .then_some(())
            .ok_or(HostError { call, status: r })
    }
}

impl StreamHost for Envoy {
    fn request_headers<'b>(&mut self, _buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        self.map(abi::REQUEST_HEADER)
    }

    fn request_trailers<'b>(&mut self, _buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        self.map(abi::REQUEST_TRAILER)
    }

    fn headers_done(&mut self, headers: Vec<Header<'_>>) {
        host::keep_spare(headers);
    }

    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_add_header";
        // SAFETY: Envoy copies both within their lengths.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_add_header(
                self.0,
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
        let kind = abi::RECEIVED_REQUEST_BODY;
        // SAFETY: a live filter, in its body hook.
        let n =
            unsafe { abi::envoy_dynamic_module_callback_http_get_body_chunks_size(self.0, kind) };
        let mut out = Vec::with_capacity(size);
        if n == 0 {
            return Ok(out);
        }
        let mut chunks = vec![EnvoyBuffer::EMPTY; n];
        // SAFETY: `chunks` has room for the `n` slices Envoy reported.
        if !unsafe {
            abi::envoy_dynamic_module_callback_http_get_body_chunks(
                self.0,
                kind,
                chunks.as_mut_ptr(),
            )
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
        let kind = abi::RECEIVED_REQUEST_BODY;
        // SAFETY: a live filter, in its body hook; Envoy copies `data`
        // during the call.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_drain_body(self.0, kind, size)
                && (data.is_empty()
                    || abi::envoy_dynamic_module_callback_http_append_body(
                        self.0,
                        kind,
                        ModuleBuffer::of(data),
                    ))
        };
        ok.then_some(()).ok_or(failed(call))
    }

    fn send_reply(&mut self, reply: &Reply) -> HostResult<()> {
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
                self.0,
                reply.status,
                headers.as_mut_ptr(),
                headers.len(),
                ModuleBuffer::of(reply.body.as_bytes()),
                ModuleBuffer::of(reply.details.as_bytes()),
            );
        }
        Ok(())
    }

    fn increment_metric(&mut self, id: u32, by: u64) -> HostResult<()> {
        self.metric(
            "envoy_dynamic_module_callback_http_filter_increment_counter",
            abi::envoy_dynamic_module_callback_http_filter_increment_counter,
            id,
            by,
        )
    }

    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        self.metric(
            "envoy_dynamic_module_callback_http_filter_set_gauge",
            abi::envoy_dynamic_module_callback_http_filter_set_gauge,
            id,
            value,
        )
    }

    fn set_property(&mut self, path: &str, value: &[u8]) -> HostResult<()> {
        let call = "envoy_dynamic_module_callback_http_set_filter_state_bytes";
        // The name the Wasm filter's property has, so that one access log
        // format serves both builds; made on the stack (a property's name
        // is short), as the access log's field is set per request.
        let mut buf = [0u8; 64];
        let owned;
        let key = match buf.get_mut(..5 + path.len()) {
            Some(k) => {
                let (prefix, name) = k.split_at_mut(5);
                prefix.copy_from_slice(b"wasm.");
                name.copy_from_slice(path.as_bytes());
                &*k
            }
            None => {
                owned = [b"wasm.", path.as_bytes()].concat();
                &owned[..]
            }
        };
        // SAFETY: Envoy copies both during the call.
        let ok = unsafe {
            abi::envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.0,
                ModuleBuffer::of(key),
                ModuleBuffer::of(value),
            )
        };
        ok.then_some(()).ok_or(failed(call))
    }

    fn now_ms(&mut self) -> u64 {
        now_ms()
    }

    fn log(&mut self, l: Level, message: &str) {
        log(l, message);
    }
}
