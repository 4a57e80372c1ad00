//! The empty dynamic module: Envoy's ABI (the version hookstamp's module is
//! built against), every hook a no-op that answers Continue.

use std::ffi::{c_char, c_void};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buffer {
    ptr: *const c_char,
    length: usize,
}

extern "C" {
    fn envoy_dynamic_module_callback_http_add_header(
        filter: *mut c_void,
        header_type: u32,
        key: Buffer,
        value: Buffer,
    ) -> bool;
}

fn buffer(s: &[u8]) -> Buffer {
    Buffer {
        ptr: s.as_ptr().cast(),
        length: s.len(),
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    c"v0.2.0".as_ptr()
}

/// The headers to add, one `name: value` a line: the benchmark gives it
/// the same eight stamps (h8) adds with Envoy's own filter, or none.
type Headers = Vec<(Vec<u8>, Vec<u8>)>;

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    _envoy: *mut c_void,
    _name: Buffer,
    config: Buffer,
) -> *const c_void {
    let text = match config.ptr.is_null() {
        true => &[][..],
        // SAFETY: Envoy's buffer is valid during the call.
        false => unsafe { std::slice::from_raw_parts(config.ptr.cast::<u8>(), config.length) },
    };
    let headers: Headers = String::from_utf8_lossy(text)
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
        .collect();
    Box::into_raw(Box::new(headers)).cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    // SAFETY: the pointer `config_new` returned, given back once.
    drop(unsafe { Box::from_raw(config.cast_mut().cast::<Headers>()) });
}

/// A stream's filter is its configuration, borrowed: Envoy destroys a
/// configuration only after its filters.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    config: *const c_void,
    _envoy: *mut c_void,
) -> *const c_void {
    config
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    envoy: *mut c_void,
    filter: *const c_void,
    _end_of_stream: bool,
) -> u32 {
    // SAFETY: the configuration `filter_new` handed back, alive (above).
    let headers = unsafe { &*filter.cast::<Headers>() };
    for (name, value) in headers {
        // SAFETY: Envoy's filter pointer, during its hook.
        unsafe {
            envoy_dynamic_module_callback_http_add_header(envoy, 0, buffer(name), buffer(value))
        };
    }
    0
}

macro_rules! continue_hooks {
    ($($hook:ident ( $($arg:ty),* );)*) => {$(
        #[no_mangle]
        pub extern "C" fn $hook(_: *mut c_void, _: *const c_void $(, _: $arg)*) -> u32 {
            0
        }
    )*};
}

continue_hooks! {
    envoy_dynamic_module_on_http_filter_request_body(bool);
    envoy_dynamic_module_on_http_filter_request_trailers();
    envoy_dynamic_module_on_http_filter_response_headers(bool);
    envoy_dynamic_module_on_http_filter_response_body(bool);
    envoy_dynamic_module_on_http_filter_response_trailers();
}

macro_rules! empty_hooks {
    ($($hook:ident ( $($arg:ty),* );)*) => {$(
        #[no_mangle]
        pub extern "C" fn $hook(_: *mut c_void, _: *const c_void $(, _: $arg)*) {}
    )*};
}

empty_hooks! {
    envoy_dynamic_module_on_http_filter_stream_complete();
    envoy_dynamic_module_on_http_filter_scheduled(u64);
    envoy_dynamic_module_on_http_filter_http_callout_done(u64, u32, *const c_void, usize, *const c_void, usize);
    envoy_dynamic_module_on_http_filter_http_stream_headers(u64, *const c_void, usize, bool);
    envoy_dynamic_module_on_http_filter_http_stream_data(u64, *const c_void, usize, bool);
    envoy_dynamic_module_on_http_filter_http_stream_trailers(u64, *const c_void, usize);
    envoy_dynamic_module_on_http_filter_http_stream_complete(u64);
    envoy_dynamic_module_on_http_filter_http_stream_reset(u64, u32);
    envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark();
    envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark();
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(_filter: *const c_void) {}
