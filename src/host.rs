//! What the filter asks of the proxy, behind a trait, and what its
//! callbacks answer. Each adapter implements the trait over its ABI, and
//! they are the only code that touches one: `filter` over the proxy-wasm
//! ABI, `dynmod` over Envoy's dynamic-module ABI. The tests' mock host
//! (tests/common/mock.rs) implements it natively, so the whole request
//! lifecycle (`lifecycle`) and the exports' dispatch (`dispatch`) are
//! tested without a proxy.

use crate::reply::Reply;
use std::fmt;

/// A host call that did not succeed: which call, and the ABI status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostError {
    pub call: &'static str,
    pub status: u32,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed with status {}", self.call, self.status)
    }
}

pub type HostResult<T> = Result<T, HostError>;

/// A metric's kind, as the ABI numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter = 0,
    Gauge = 1,
}

/// A log line's level, as the ABI numbers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Info = 2,
    Warn = 3,
    Error = 4,
    Critical = 5,
}

/// What the headers callback answers (the ABI's FilterHeadersStatus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadersStatus {
    Continue = 0,
    /// Hold the headers (allow_on_headers_stop_iteration), or a local reply
    /// was sent.
    StopIteration = 1,
}

/// What the body callback answers (the ABI's FilterDataStatus).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataStatus {
    Continue = 0,
    /// Envoy keeps the chunk and applies flow control past its buffer
    /// limit, instead of answering 413 as it does for StopIterationAndBuffer.
    StopAndWatermark = 2,
    /// A local reply was sent: nothing more to keep.
    StopNoBuffer = 3,
}

/// The proxy, as the filter uses it. Every call that can fail returns a
/// `HostResult`; none panics.
pub trait Host {
    /// The plugin configuration, as the proxy hands it over.
    fn plugin_config(&mut self) -> HostResult<Vec<u8>>;
    /// The request headers in the host's wire form (see `pairs`).
    fn request_headers(&mut self) -> HostResult<Vec<u8>>;
    /// The request trailers in the same form.
    fn request_trailers(&mut self) -> HostResult<Vec<u8>>;
    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()>;
    /// Removes every value of a request header.
    fn remove_request_header(&mut self, name: &str) -> HostResult<()>;
    fn remove_request_trailer(&mut self, name: &str) -> HostResult<()>;
    /// The body chunk the body callback was just handed, `size` bytes.
    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>>;
    /// Replaces that chunk (`size` bytes) with `data`: what the callback
    /// lets through. A host that cannot refuses, and the request is
    /// answered 500 rather than let through whole.
    fn set_request_body(&mut self, size: usize, data: &[u8]) -> HostResult<()> {
        let _ = (size, data);
        Err(HostError {
            call: "set_request_body",
            status: 12,
        })
    }
    /// Answers the current request from the filter.
    fn send_reply(&mut self, reply: &Reply) -> HostResult<()>;
    /// Makes a request current outside its own callbacks (from a tick).
    fn set_effective_context(&mut self, context: u32) -> HostResult<()>;
    fn set_tick_period_ms(&mut self, ms: u32) -> HostResult<()>;
    fn define_metric(&mut self, kind: MetricKind, name: &str) -> HostResult<u32>;
    fn increment_metric(&mut self, id: u32, by: i64) -> HostResult<()>;
    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()>;
    /// Sets a property of the current request (Envoy keeps it as filter
    /// state `wasm.<path>`, which an access log prints with
    /// `%FILTER_STATE(wasm.<path>:PLAIN)%`).
    fn set_property(&mut self, path: &str, value: &[u8]) -> HostResult<()>;
    /// Wall-clock milliseconds.
    fn now_ms(&mut self) -> u64;
    fn log(&mut self, level: Level, message: &str);
}
