//! What the filter asks of the proxy, as two traits in the shape of
//! Envoy's own dynamic-module SDK: a `ConfigHost` for load time (log,
//! define metrics, the tick) and a `StreamHost` for one request (its
//! headers as views, its body chunks, stamps, a reply, properties), with
//! the statuses the lifecycle's callbacks answer. Two adapters implement
//! them, each mapping these types onto its own ABI's numbers: `filter`
//! (proxy-wasm) and `dynmod` (Envoy's dynamic modules); the tests' mock
//! host (tests/common/mock.rs) implements them natively, so the whole
//! request lifecycle is tested without a proxy. Nothing here touches an
//! ABI.

use crate::reply::Reply;
use std::cell::Cell;
use std::fmt;

/// A host call that did not succeed: which call, and the ABI's status.
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

/// A metric's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    Counter,
    Gauge,
}

/// A log line's level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Info,
    Warn,
    Error,
    Critical,
}

/// What the headers (and trailers) callback answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadersStatus {
    Continue,
    /// Hold the headers (allow_on_headers_stop_iteration), or a local reply
    /// was sent.
    StopIteration,
}

/// What the body callback answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataStatus {
    Continue,
    /// The proxy keeps the chunk and applies flow control past its buffer
    /// limit (Envoy's StopIterationAndWatermark), instead of answering 413
    /// as it does for StopIterationAndBuffer.
    StopAndWatermark,
    /// A local reply was sent: nothing more to keep.
    StopNoBuffer,
}

/// A header as the proxy holds it: its name and its value, as bytes,
/// borrowed for the callback (nothing reads a name but to compare it with
/// one of hookstamp's, so none is checked as text).
pub type Header<'h> = (&'h [u8], &'h [u8]);

thread_local! {
    /// The worker's header list, empty, between its requests: one
    /// allocation a worker, not one a request.
    static SPARE_LIST: Cell<Option<Vec<Header<'static>>>> = const { Cell::new(None) };
}

/// An empty header list for a request's headers: the worker's spare one
/// (`keep_spare`), or a new one. For an adapter's `request_headers`.
pub fn spare_list<'b>() -> Vec<Header<'b>> {
    SPARE_LIST
        .with(Cell::take)
        .map_or_else(Vec::new, crate::pairs::relabel)
}

/// Keeps a request's header list, emptied, as the worker's spare: for an
/// adapter's `headers_done`.
pub fn keep_spare(list: Vec<Header<'_>>) {
    let kept = crate::pairs::relabel(list);
    SPARE_LIST.with(|l| l.set(Some(kept)));
}

/// The proxy at load time, and on the tick: what a configuration needs
/// beyond any one request. Every call that can fail returns a
/// `HostResult`; none panics.
pub trait ConfigHost {
    fn define_metric(&mut self, kind: MetricKind, name: &str) -> HostResult<u32>;
    /// Sets a gauge at load; a host that can set one only through a stream
    /// refuses, and the first stream of each worker sets it instead.
    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()>;
    fn set_tick_period_ms(&mut self, ms: u32) -> HostResult<()>;
    /// Wall-clock milliseconds.
    fn now_ms(&mut self) -> u64;
    fn log(&mut self, level: Level, message: &str);
    /// Whether the host keeps counter increments until the tick (the
    /// .wasm's, `filter::counts`): then every configuration ticks.
    fn counts_on_tick(&self) -> bool {
        false
    }
}

/// The proxy as one request sees it: the request's own stream.
pub trait StreamHost {
    /// The request headers, as views. A host whose header map is a buffer
    /// of its own (proxy-wasm's wire form) reads it into `buf` and hands
    /// out views into it; one that has views of its own (Envoy's dynamic
    /// modules) leaves `buf` empty. The views are valid for the callback
    /// only: `buf` lives in the callback's frame.
    fn request_headers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>>;
    /// The request trailers, the same way.
    fn request_trailers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>>;
    /// Takes back a header list it handed over, the callback done with it:
    /// a host may keep its allocation for the next one.
    fn headers_done(&mut self, headers: Vec<Header<'_>>) {
        drop(headers);
    }
    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()>;
    /// Removes every value of a request header.
    fn remove_request_header(&mut self, name: &str) -> HostResult<()>;
    fn remove_request_trailer(&mut self, name: &str) -> HostResult<()>;
    /// The body chunk the body callback was just handed, `size` bytes.
    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>>;
    /// Replaces that chunk (`size` bytes) with `data`: what the callback
    /// lets through. A host that cannot refuses, and the request is
    /// answered 500 rather than let through whole.
    fn set_request_body(&mut self, size: usize, data: &[u8]) -> HostResult<()>;
    /// Answers the request from the filter.
    fn send_reply(&mut self, reply: &Reply) -> HostResult<()>;
    fn increment_metric(&mut self, id: u32, by: u64) -> HostResult<()>;
    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()>;
    /// Sets a property of the request (Envoy's filter state `wasm.<path>`,
    /// which an access log prints with `%FILTER_STATE(wasm.<path>:PLAIN)%`).
    fn set_property(&mut self, path: &str, value: &[u8]) -> HostResult<()>;
    /// Wall-clock milliseconds.
    fn now_ms(&mut self) -> u64;
    fn log(&mut self, level: Level, message: &str);
}

/// How the tick reaches a request it holds, to answer it: each adapter's
/// own handle for a stream (proxy-wasm's context id, Envoy's per-stream
/// pointer), kept with the held request and given back to the adapter.
pub trait Streams: ConfigHost {
    type Key: Copy;
    type Stream<'a>: StreamHost
    where
        Self: 'a;
    /// The stream of a held request, or `None` (logged) when it is gone.
    fn stream(&mut self, key: Self::Key) -> Option<Self::Stream<'_>>;
}

/// A stream host borrowed is a stream host: the tick answers through the
/// one `Streams::stream` lends it.
impl<T: StreamHost + ?Sized> StreamHost for &mut T {
    fn request_headers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        (**self).request_headers(buf)
    }
    fn request_trailers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        (**self).request_trailers(buf)
    }
    fn headers_done(&mut self, headers: Vec<Header<'_>>) {
        (**self).headers_done(headers);
    }
    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()> {
        (**self).add_request_header(name, value)
    }
    fn remove_request_header(&mut self, name: &str) -> HostResult<()> {
        (**self).remove_request_header(name)
    }
    fn remove_request_trailer(&mut self, name: &str) -> HostResult<()> {
        (**self).remove_request_trailer(name)
    }
    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>> {
        (**self).request_body(size)
    }
    fn set_request_body(&mut self, size: usize, data: &[u8]) -> HostResult<()> {
        (**self).set_request_body(size, data)
    }
    fn send_reply(&mut self, reply: &Reply) -> HostResult<()> {
        (**self).send_reply(reply)
    }
    fn increment_metric(&mut self, id: u32, by: u64) -> HostResult<()> {
        (**self).increment_metric(id, by)
    }
    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        (**self).record_metric(id, value)
    }
    fn set_property(&mut self, path: &str, value: &[u8]) -> HostResult<()> {
        (**self).set_property(path, value)
    }
    fn now_ms(&mut self) -> u64 {
        (**self).now_ms()
    }
    fn log(&mut self, level: Level, message: &str) {
        (**self).log(level, message)
    }
}
