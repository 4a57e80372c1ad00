//! The empty dynamic module: Envoy's ABI (the version hookstamp's module is
//! built against), every hook a no-op that answers Continue. Its filter
//! configuration says what else it does per request, one ABI call each, as
//! hookstamp's module makes them, in the lines the .wasm reads (the
//! crate's doc): the header list's views read, headers added, counters
//! incremented, the access log's filter state set.

use std::ffi::{c_char, c_void};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buffer {
    ptr: *const c_char,
    length: usize,
}

/// `envoy_dynamic_module_type_envoy_http_header`: a header's views.
#[repr(C)]
#[derive(Clone, Copy)]
struct View {
    key: Buffer,
    value: Buffer,
}

extern "C" {
    fn envoy_dynamic_module_callback_http_add_header(
        filter: *mut c_void,
        header_type: u32,
        key: Buffer,
        value: Buffer,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_get_headers_size(
        filter: *mut c_void,
        header_type: u32,
    ) -> usize;
    fn envoy_dynamic_module_callback_http_get_headers(
        filter: *mut c_void,
        header_type: u32,
        result: *mut View,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: *mut c_void,
        name: Buffer,
        label_names: *mut Buffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: *mut c_void,
        id: usize,
        label_values: *mut Buffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: *mut c_void,
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

/// The configuration's plan, its counters defined.
struct Calls {
    plan: crate::Plan,
    counters: Vec<usize>,
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    envoy: *mut c_void,
    _name: Buffer,
    config: Buffer,
) -> *const c_void {
    let text = match config.ptr.is_null() {
        true => &[][..],
        // SAFETY: Envoy's buffer is valid during the call.
        false => unsafe { std::slice::from_raw_parts(config.ptr.cast::<u8>(), config.length) },
    };
    let plan = crate::plan(&String::from_utf8_lossy(text));
    let counters = plan
        .counters
        .iter()
        .filter_map(|name| {
            let mut id = 0;
            // SAFETY: Envoy's configuration pointer, during config_new; it
            // copies the name.
            let r = unsafe {
                envoy_dynamic_module_callback_http_filter_config_define_counter(
                    envoy,
                    buffer(name.as_bytes()),
                    std::ptr::null_mut(),
                    0,
                    &mut id,
                )
            };
            (r == 0).then_some(id)
        })
        .collect();
    Box::into_raw(Box::new(Calls { plan, counters })).cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void) {
    // SAFETY: the pointer `config_new` returned, given back once.
    drop(unsafe { Box::from_raw(config.cast_mut().cast::<Calls>()) });
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
    let calls = unsafe { &*filter.cast::<Calls>() };
    let plan = &calls.plan;
    // A read that finds no headers makes no other call: the bench's test
    // sees the others, so it sees the read taken.
    if plan.read && !read_headers(envoy) || plan.hand && !add_by_hand(envoy) {
        return 0;
    }
    if let Some(ed) = &plan.ed25519 {
        ed.verify();
    }
    for (name, value) in &plan.adds {
        // SAFETY: Envoy's filter pointer, during its hook.
        unsafe {
            envoy_dynamic_module_callback_http_add_header(
                envoy,
                0,
                buffer(name.as_bytes()),
                buffer(value.as_bytes()),
            )
        };
    }
    for id in &calls.counters {
        // SAFETY: as above; no labels.
        unsafe {
            envoy_dynamic_module_callback_http_filter_increment_counter(
                envoy,
                *id,
                std::ptr::null_mut(),
                0,
                1,
            )
        };
    }
    if let Some(why) = &plan.why {
        // SAFETY: as above; Envoy copies both.
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(
                envoy,
                buffer(b"wasm.hookstamp_why"),
                buffer(why.as_bytes()),
            )
        };
    }
    0
}

/// Reads the request's header list into `room` (its views); how many it
/// had, `None` where it had none or more than `room` holds.
fn headers(envoy: *mut c_void, room: &mut [View; 24]) -> Option<usize> {
    // SAFETY: Envoy's filter pointer, during its hook; the views are written
    // into room for as many as it reported.
    unsafe {
        let n = envoy_dynamic_module_callback_http_get_headers_size(envoy, 0);
        (n > 0
            && n <= room.len()
            && envoy_dynamic_module_callback_http_get_headers(envoy, 0, room.as_mut_ptr()))
        .then_some(n)
    }
}

/// Reads the request's header list (its views, left unread); whether it
/// had any.
fn read_headers(envoy: *mut c_void) -> bool {
    headers(envoy, &mut [VIEW; 24]).is_some()
}

/// A view of nothing, the room's views before Envoy writes them.
const VIEW: View = View {
    key: Buffer {
        ptr: std::ptr::null(),
        length: 0,
    },
    value: Buffer {
        ptr: std::ptr::null(),
        length: 0,
    },
};

/// A view's bytes.
fn bytes<'a>(b: Buffer) -> &'a [u8] {
    match b.ptr.is_null() {
        true => &[],
        // SAFETY: a view Envoy wrote, valid during the hook.
        false => unsafe { std::slice::from_raw_parts(b.ptr.cast::<u8>(), b.length) },
    }
}

/// `hand`: (c)'s two keys found in the header list's views (names compared
/// as hookstamp's module compares them), its stamps made by hand and
/// added; whether they were.
fn add_by_hand(envoy: *mut c_void) -> bool {
    let mut room = [VIEW; 24];
    let Some(n) = headers(envoy, &mut room) else {
        return false;
    };
    let header = |name: &str| {
        let at = room[..n]
            .iter()
            .find(|v| bytes(v.key).eq_ignore_ascii_case(name.as_bytes()))?;
        Some(bytes(at.value))
    };
    let (mut room, mut lane) = (crate::Room::default(), crate::stamps::Hex::of(&[0; 16]));
    let Some(stamps) = crate::hand(header, &mut room, &mut lane) else {
        return false;
    };
    for (name, value) in stamps {
        // SAFETY: Envoy's filter pointer, during its hook.
        unsafe {
            envoy_dynamic_module_callback_http_add_header(
                envoy,
                0,
                buffer(name.as_bytes()),
                buffer(value),
            )
        };
    }
    true
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
