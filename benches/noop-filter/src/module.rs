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

/// The names hookstamp's (c) stamps, with values as long as its own:
/// the same bytes through the same call.
const HEADERS: [(&str, &str); 8] = [
    ("x-hookstamp-source", "github"),
    ("x-hookstamp-tenant", "default"),
    ("x-hookstamp-dedupe-key", "d-1"),
    ("x-hookstamp-dedupe-ttl-ms", "259200000"),
    ("x-hookstamp-idempotency-key", "default:github:d-1"),
    ("x-hookstamp-lane-0", "5e0b1b36b0e4c3c2c0a1e8f7d6c5b4a3"),
    ("x-hookstamp-lane-0-key", "h-1"),
    ("x-hookstamp-lane-0-group", "h-1"),
];

fn buffer(s: &str) -> Buffer {
    Buffer {
        ptr: s.as_ptr().cast(),
        length: s.len(),
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    c"v0.2.0".as_ptr()
}

/// The configuration is the number of headers to add: its value is the
/// pointer Envoy hands back (never dereferenced), plus one, as null
/// would refuse the configuration.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    _envoy: *mut c_void,
    _name: Buffer,
    config: Buffer,
) -> *const c_void {
    // SAFETY: Envoy's buffer is valid during the call.
    let text = unsafe { std::slice::from_raw_parts(config.ptr.cast::<u8>(), config.length) };
    let digits = text
        .iter()
        .filter(|b| b.is_ascii_digit())
        .map(|b| (b - b'0') as usize);
    let n = digits.fold(0, |n, d| n * 10 + d).min(HEADERS.len());
    (n + 1) as *const c_void
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(_config: *const c_void) {}

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
    for (name, value) in &HEADERS[..filter as usize - 1] {
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
