//! A configuration's life in the dynamic module, through its exports as
//! Envoy calls them (stubs stand in for Envoy's callbacks): parsed once,
//! kept by Envoy and by each request that uses it, and gone, its secrets
//! zeroed, once Envoy destroyed it and its last request ended, whether or
//! not its worker ever gets another stream. `make test-native` runs it with
//! the feature `dynamic-module`.
#![cfg(feature = "dynamic-module")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The stubs take what Envoy passes; the module calls them as Envoy would.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use hookstamp::lifecycle::Plugin;
use std::ffi::c_void;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buf {
    ptr: *const u8,
    len: usize,
}

impl Buf {
    fn of(b: &[u8]) -> Buf {
        Buf {
            ptr: b.as_ptr(),
            len: b.len(),
        }
    }
}

#[repr(C)]
pub struct Hdr {
    kp: *const u8,
    kl: usize,
    vp: *const u8,
    vl: usize,
}

static NEXT_ID: AtomicUsize = AtomicUsize::new(0);

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_log(_l: u32, _m: Buf) {}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_config_define_counter(
    _c: *mut c_void,
    _n: Buf,
    _l: *mut Buf,
    _ln: usize,
    id: *mut usize,
) -> u32 {
    unsafe { *id = NEXT_ID.fetch_add(1, Ordering::Relaxed) };
    0
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_config_define_gauge(
    c: *mut c_void,
    n: Buf,
    l: *mut Buf,
    ln: usize,
    id: *mut usize,
) -> u32 {
    envoy_dynamic_module_callback_http_filter_config_define_counter(c, n, l, ln, id)
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_increment_counter(
    _f: *mut c_void,
    _id: usize,
    _l: *mut Buf,
    _ln: usize,
    _v: u64,
) -> u32 {
    0
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_set_gauge(
    f: *mut c_void,
    id: usize,
    l: *mut Buf,
    ln: usize,
    v: u64,
) -> u32 {
    envoy_dynamic_module_callback_http_filter_increment_counter(f, id, l, ln, v)
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_headers_size(
    _f: *mut c_void,
    _t: u32,
) -> usize {
    0
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_headers(
    _f: *mut c_void,
    _t: u32,
    _r: *mut Hdr,
) -> bool {
    true
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_add_header(
    _f: *mut c_void,
    _t: u32,
    _k: Buf,
    _v: Buf,
) -> bool {
    true
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_set_header(
    f: *mut c_void,
    t: u32,
    k: Buf,
    v: Buf,
) -> bool {
    envoy_dynamic_module_callback_http_add_header(f, t, k, v)
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_body_size(
    _f: *mut c_void,
    _t: u32,
) -> usize {
    0
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_body_chunks_size(
    _f: *mut c_void,
    _t: u32,
) -> usize {
    0
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_get_body_chunks(
    _f: *mut c_void,
    _t: u32,
    _r: *mut Buf,
) -> bool {
    true
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_drain_body(
    _f: *mut c_void,
    _t: u32,
    _n: usize,
) -> bool {
    true
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_append_body(
    _f: *mut c_void,
    _t: u32,
    _d: Buf,
) -> bool {
    true
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_send_response(
    _f: *mut c_void,
    _s: u32,
    _h: *mut Hdr,
    _hn: usize,
    _b: Buf,
    _d: Buf,
) {
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
    _f: *mut c_void,
    _k: Buf,
    _v: Buf,
) -> bool {
    true
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_scheduler_new(
    _f: *mut c_void,
) -> *mut c_void {
    std::ptr::null_mut()
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
    _s: *mut c_void,
    _e: u64,
) {
}
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_callback_http_filter_scheduler_delete(_s: *mut c_void) {}

extern "C" {
    fn envoy_dynamic_module_on_http_filter_config_new(
        envoy: *mut c_void,
        name: Buf,
        config: Buf,
    ) -> *const c_void;
    fn envoy_dynamic_module_on_http_filter_config_destroy(config: *const c_void);
    fn envoy_dynamic_module_on_http_filter_new(
        config: *const c_void,
        envoy: *mut c_void,
    ) -> *const c_void;
    fn envoy_dynamic_module_on_http_filter_destroy(s: *const c_void);
}

const SEALED: &[u8] = br#"{"seal": {"keys": [{"value": "queue-key-0123456789"}]},
  "sources": [{"id": "github", "dedupe": "github"}]}"#;

/// config_new as Envoy calls it, and a weak view of the `Plugin` it made.
fn load(config: &[u8]) -> (*const c_void, Weak<Plugin>) {
    let c = unsafe {
        envoy_dynamic_module_on_http_filter_config_new(
            std::ptr::null_mut(),
            Buf::of(b"hookstamp"),
            Buf::of(config),
        )
    };
    assert!(!c.is_null());
    let weak = unsafe {
        let p = c.cast::<Plugin>();
        Arc::increment_strong_count(p);
        Arc::downgrade(&Arc::from_raw(p))
    };
    (c, weak)
}

/// One stream of `config` on this thread (this worker), from filter_new to
/// filter_destroy.
fn one_stream(config: *const c_void, envoy: usize) {
    unsafe {
        let f = envoy_dynamic_module_on_http_filter_new(config, envoy as *mut c_void);
        envoy_dynamic_module_on_http_filter_destroy(f);
    }
}

/// Envoy destroyed the configuration after its last stream, and the
/// worker gets no further stream (it is idle, or the listener is gone):
/// the configuration, its sealing key with it, is gone at once.
#[test]
fn a_destroyed_configuration_goes_without_a_next_stream() {
    let (c, weak) = load(SEALED);
    one_stream(c, 0x1000);
    unsafe { envoy_dynamic_module_on_http_filter_config_destroy(c) };
    assert!(
        weak.upgrade().is_none(),
        "the destroyed configuration is still held ({} strong)",
        weak.strong_count()
    );
}

/// A request that outlives Envoy's reference keeps the configuration until
/// it ends; a worker's next stream finds a fresh instance of a new one.
#[test]
fn a_request_keeps_its_configuration_until_it_ends() {
    let (c, weak) = load(SEALED);
    let f = unsafe { envoy_dynamic_module_on_http_filter_new(c, 0x3000 as *mut c_void) };
    unsafe { envoy_dynamic_module_on_http_filter_config_destroy(c) };
    assert!(weak.upgrade().is_some(), "its request still uses it");
    unsafe { envoy_dynamic_module_on_http_filter_destroy(f) };
    assert!(weak.upgrade().is_none());
    let (other, other_weak) = load(br#"{"sources": [{"id": "github", "dedupe": "github"}]}"#);
    one_stream(other, 0x2000);
    assert!(other_weak.upgrade().is_some(), "Envoy keeps it");
    unsafe { envoy_dynamic_module_on_http_filter_config_destroy(other) };
    assert!(other_weak.upgrade().is_none());
}

/// A worker's ended stream leaves its allocation to the worker's next
/// (`filter_new` makes none then), never to a stream still live; what the
/// ended stream held is gone with it, not kept in the spare room.
#[test]
fn a_worker_reuses_an_ended_streams_room_and_nothing_it_held() {
    let (c, weak) = load(SEALED);
    let first = unsafe { envoy_dynamic_module_on_http_filter_new(c, 0x4000 as *mut c_void) };
    let live = unsafe { envoy_dynamic_module_on_http_filter_new(c, 0x4001 as *mut c_void) };
    assert_ne!(first, live);
    unsafe { envoy_dynamic_module_on_http_filter_destroy(first) };
    // Blocks of every size up to 1 KiB taken meanwhile: a room freed to
    // the allocator would be one of them.
    let taken: Vec<Vec<u8>> = (1..=1024).map(Vec::with_capacity).collect();
    let next = unsafe { envoy_dynamic_module_on_http_filter_new(c, 0x4002 as *mut c_void) };
    assert!(taken.iter().all(|b| b.as_ptr().cast::<c_void>() != first));
    assert_eq!(next, first, "the ended stream's room, reused");
    assert_ne!(next, live);
    unsafe {
        envoy_dynamic_module_on_http_filter_destroy(next);
        envoy_dynamic_module_on_http_filter_destroy(live);
        envoy_dynamic_module_on_http_filter_config_destroy(c);
    }
    assert!(
        weak.upgrade().is_none(),
        "an ended stream's room holds no configuration"
    );
}
