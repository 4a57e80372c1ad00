//! The part of Envoy's dynamic-module C ABI (`source/extensions/dynamic_modules/abi/abi.h`,
//! version v0.2.0 in Envoy 1.40) that hookstamp uses, declared by hand: the
//! callbacks Envoy exports and the types they take. Every callback named
//! here is exported by Envoy 1.38, 1.39 and 1.40 (the e2e suite loads the
//! module in each).

use std::ffi::{c_char, c_void};

/// The ABI version this module is built against: what
/// `envoy_dynamic_module_on_program_init` returns (NUL-terminated).
pub const ABI_VERSION: &[u8] = b"v0.2.0\0";

/// `envoy_dynamic_module_type_envoy_buffer`: bytes Envoy owns.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyBuffer {
    pub ptr: *const c_char,
    pub length: usize,
}

impl EnvoyBuffer {
    pub const EMPTY: EnvoyBuffer = EnvoyBuffer {
        ptr: std::ptr::null(),
        length: 0,
    };

    /// The bytes, valid until the end of the current event hook.
    ///
    /// # Safety
    /// `ptr` points to `length` readable bytes for the lifetime chosen.
    pub unsafe fn bytes<'a>(self) -> &'a [u8] {
        if self.ptr.is_null() || self.length == 0 {
            return &[];
        }
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts(self.ptr.cast::<u8>(), self.length) }
    }
}

/// `envoy_dynamic_module_type_module_buffer`: bytes the module owns.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ModuleBuffer {
    pub ptr: *const c_char,
    pub length: usize,
}

impl ModuleBuffer {
    pub fn of(b: &[u8]) -> ModuleBuffer {
        ModuleBuffer {
            ptr: b.as_ptr().cast::<c_char>(),
            length: b.len(),
        }
    }

    pub const NULL: ModuleBuffer = ModuleBuffer {
        ptr: std::ptr::null(),
        length: 0,
    };
}

/// `envoy_dynamic_module_type_envoy_http_header`: a header in Envoy's map.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct EnvoyHeader {
    pub key_ptr: *const c_char,
    pub key_length: usize,
    pub value_ptr: *const c_char,
    pub value_length: usize,
}

/// `envoy_dynamic_module_type_module_http_header`: a header the module owns.
#[repr(C)]
pub struct ModuleHeader {
    pub key_ptr: *const c_char,
    pub key_length: usize,
    pub value_ptr: *const c_char,
    pub value_length: usize,
}

impl ModuleHeader {
    pub fn of(name: &str, value: &[u8]) -> ModuleHeader {
        ModuleHeader {
            key_ptr: name.as_ptr().cast::<c_char>(),
            key_length: name.len(),
            value_ptr: value.as_ptr().cast::<c_char>(),
            value_length: value.len(),
        }
    }
}

pub type ConfigEnvoyPtr = *mut c_void;
pub type FilterEnvoyPtr = *mut c_void;
pub type SchedulerPtr = *mut c_void;

/// `envoy_dynamic_module_type_http_header_type`.
pub const REQUEST_HEADER: u32 = 0;
pub const REQUEST_TRAILER: u32 = 1;
/// `envoy_dynamic_module_type_http_body_type`.
pub const RECEIVED_REQUEST_BODY: u32 = 0;
/// `envoy_dynamic_module_type_metrics_result`.
pub const METRICS_SUCCESS: u32 = 0;

/// The metric calls come in pairs of one signature, a counter's and a
/// gauge's: each pair declared once.
macro_rules! metric_calls {
    ($define:ident, $record:ident) => {
        extern "C" {
            pub fn $define(
                config: ConfigEnvoyPtr,
                name: ModuleBuffer,
                label_names: *mut ModuleBuffer,
                label_names_length: usize,
                id: *mut usize,
            ) -> u32;
            pub fn $record(
                filter: FilterEnvoyPtr,
                id: usize,
                label_values: *mut ModuleBuffer,
                label_values_length: usize,
                value: u64,
            ) -> u32;
        }
    };
}

metric_calls!(
    envoy_dynamic_module_callback_http_filter_config_define_counter,
    envoy_dynamic_module_callback_http_filter_increment_counter
);
metric_calls!(
    envoy_dynamic_module_callback_http_filter_config_define_gauge,
    envoy_dynamic_module_callback_http_filter_set_gauge
);

extern "C" {
    pub fn envoy_dynamic_module_callback_log(level: u32, message: ModuleBuffer);

    pub fn envoy_dynamic_module_callback_http_get_headers_size(
        filter: FilterEnvoyPtr,
        header_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_headers(
        filter: FilterEnvoyPtr,
        header_type: u32,
        result: *mut EnvoyHeader,
    ) -> bool;
    pub fn envoy_dynamic_module_callback_http_add_header(
        filter: FilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;
    /// With a null value: removes every value of the header.
    pub fn envoy_dynamic_module_callback_http_set_header(
        filter: FilterEnvoyPtr,
        header_type: u32,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_get_body_size(
        filter: FilterEnvoyPtr,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks_size(
        filter: FilterEnvoyPtr,
        body_type: u32,
    ) -> usize;
    pub fn envoy_dynamic_module_callback_http_get_body_chunks(
        filter: FilterEnvoyPtr,
        body_type: u32,
        result: *mut EnvoyBuffer,
    ) -> bool;

    /// Drains up to `n` bytes from the front of the body the hook was handed.
    pub fn envoy_dynamic_module_callback_http_drain_body(
        filter: FilterEnvoyPtr,
        body_type: u32,
        n: usize,
    ) -> bool;
    /// Appends to the body the hook was handed.
    pub fn envoy_dynamic_module_callback_http_append_body(
        filter: FilterEnvoyPtr,
        body_type: u32,
        data: ModuleBuffer,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_send_response(
        filter: FilterEnvoyPtr,
        status: u32,
        headers: *mut ModuleHeader,
        headers_size: usize,
        body: ModuleBuffer,
        details: ModuleBuffer,
    );

    pub fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: FilterEnvoyPtr,
        key: ModuleBuffer,
        value: ModuleBuffer,
    ) -> bool;

    pub fn envoy_dynamic_module_callback_http_filter_scheduler_new(
        filter: FilterEnvoyPtr,
    ) -> SchedulerPtr;
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_commit(
        scheduler: SchedulerPtr,
        event_id: u64,
    );
    pub fn envoy_dynamic_module_callback_http_filter_scheduler_delete(scheduler: SchedulerPtr);
}
