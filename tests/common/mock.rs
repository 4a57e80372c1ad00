//! A host emulator: the proxy as the lifecycle sees it, in memory, so that
//! every path of a request (including the ones a real proxy reaches only
//! with sleeps and stalled sockets) is tested natively. Test code only:
//! included by the tests that need it (`#[path]`), never in the library.
#![allow(dead_code)]

use hookstamp::filter::contexts::{Clock, Proxy};
use hookstamp::host::{
    ConfigHost, Header, HostError, HostResult, Level, MetricKind, StreamHost, Streams,
};
use hookstamp::pairs;
use hookstamp::reply::Reply;

/// A `Host` method, as a test names the one that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    PluginConfig,
    RequestHeaders,
    RequestTrailers,
    AddRequestHeader,
    RemoveRequestHeader,
    RemoveRequestTrailer,
    RequestBody,
    SendReply,
    SetEffectiveContext,
    SetTickPeriod,
    DefineMetric,
    IncrementMetric,
    RecordMetric,
    SetProperty,
    SetRequestBody,
}

impl Call {
    /// The name a failure is reported by.
    fn name(self) -> &'static str {
        match self {
            Call::PluginConfig => "plugin_config",
            Call::RequestHeaders => "request_headers",
            Call::RequestTrailers => "request_trailers",
            Call::AddRequestHeader => "add_request_header",
            Call::RemoveRequestHeader => "remove_request_header",
            Call::RemoveRequestTrailer => "remove_request_trailer",
            Call::RequestBody => "request_body",
            Call::SendReply => "send_reply",
            Call::SetEffectiveContext => "set_effective_context",
            Call::SetTickPeriod => "set_tick_period_ms",
            Call::DefineMetric => "define_metric",
            Call::IncrementMetric => "increment_metric",
            Call::RecordMetric => "record_metric",
            Call::SetProperty => "set_property",
            Call::SetRequestBody => "set_request_body",
        }
    }
}

/// One emulated proxy: a plugin configuration, the current request, the
/// metrics and the log.
#[derive(Default)]
pub struct MockHost {
    pub config: Vec<u8>,
    pub headers: Vec<(String, Vec<u8>)>,
    pub trailers: Vec<(String, Vec<u8>)>,
    /// The chunk the next body callback is handed.
    pub chunk: Vec<u8>,
    /// Local replies sent, with the context they were sent for.
    pub replies: Vec<(u32, Reply)>,
    pub metrics: Vec<(String, i64)>,
    /// What each body callback let through where the filter replaced its
    /// chunk: (context, the chunk's size, what replaced it).
    pub replaced: Vec<(u32, usize, Vec<u8>)>,
    /// Properties set, with the context they were set for.
    pub properties: Vec<(u32, String, Vec<u8>)>,
    pub log: Vec<(Level, String)>,
    pub now_ms: u64,
    /// The clock a callback was given (`Proxy::set_clock`), read in place
    /// of `now_ms` (`Clock::Proxy`: `now_ms`).
    pub clock: Clock,
    /// `now_ms` as a `Clock::Once` read it.
    pub clock_read: Option<u64>,
    /// How many times the proxy's own clock (`now_ms`) was read.
    pub clock_reads: usize,
    pub tick_ms: Option<u32>,
    /// The request the host takes as current.
    pub context: u32,
    /// The request current at each header added: a stamp is only ever
    /// added to the request it is for.
    pub added_for: Vec<u32>,
    /// The host call that fails: what a failing proxy does.
    pub fail: Option<Call>,
    /// Runs before every host call, as a host that calls back into the
    /// module from inside a host call would (the dispatch tests).
    pub on_call: Option<Box<dyn FnMut(Call)>>,
    /// Keeps counter increments until the tick, as the .wasm's host does
    /// (`filter::counts`): `metrics` then has them only once flushed.
    pub counts_on_tick: bool,
    pub pending: hookstamp::filter::counts::Pending,
}

impl MockHost {
    fn call(&mut self, call: Call) -> HostResult<()> {
        if let Some(f) = self.on_call.as_mut() {
            f(call);
        }
        match self.fail {
            Some(f) if f == call => Err(HostError {
                call: call.name(),
                status: 2,
            }),
            _ => Ok(()),
        }
    }

    /// A counter's or gauge's value by its full name.
    pub fn metric(&self, name: &str) -> i64 {
        self.metrics
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, v)| *v)
    }

    /// The values of a request header (any casing), in order.
    pub fn header(&self, name: &str) -> Vec<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
            .collect()
    }

    /// The stamp headers the request carries now.
    pub fn stamps(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter(|(n, _)| hookstamp::stamps::is_stamp_header(n))
            .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
            .collect()
    }
}

fn wire(map: &[(String, Vec<u8>)]) -> Vec<u8> {
    let pairs: Vec<(&str, &[u8])> = map
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    pairs::serialise(&pairs)
}

impl StreamHost for MockHost {
    fn request_headers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        self.call(Call::RequestHeaders)?;
        *buf = wire(&self.headers);
        Ok(pairs::parse(buf).unwrap_or_default())
    }

    fn request_trailers<'b>(&mut self, buf: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        self.call(Call::RequestTrailers)?;
        *buf = wire(&self.trailers);
        Ok(pairs::parse(buf).unwrap_or_default())
    }

    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()> {
        self.call(Call::AddRequestHeader)?;
        self.added_for.push(self.context);
        self.headers
            .push((name.to_owned(), value.as_bytes().to_vec()));
        Ok(())
    }

    fn remove_request_header(&mut self, name: &str) -> HostResult<()> {
        self.call(Call::RemoveRequestHeader)?;
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        Ok(())
    }

    fn remove_request_trailer(&mut self, name: &str) -> HostResult<()> {
        self.call(Call::RemoveRequestTrailer)?;
        self.trailers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        Ok(())
    }

    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>> {
        self.call(Call::RequestBody)?;
        Ok(self.chunk.iter().copied().take(size).collect())
    }

    fn send_reply(&mut self, reply: &Reply) -> HostResult<()> {
        self.call(Call::SendReply)?;
        self.replies.push((self.context, reply.clone()));
        Ok(())
    }

    fn increment_metric(&mut self, id: u32, by: u64) -> HostResult<()> {
        self.call(Call::IncrementMetric)?;
        if self.counts_on_tick {
            self.pending.add(id, by);
        } else {
            count(&mut self.metrics, id, by);
        }
        Ok(())
    }

    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        self.call(Call::RecordMetric)?;
        if let Some((_, v)) = self.metrics.get_mut(id as usize) {
            *v = i64::try_from(value).unwrap_or(i64::MAX);
        }
        Ok(())
    }

    fn set_request_body(&mut self, size: usize, data: &[u8]) -> HostResult<()> {
        self.call(Call::SetRequestBody)?;
        self.replaced.push((self.context, size, data.to_vec()));
        Ok(())
    }

    fn set_property(&mut self, path: &str, value: &[u8]) -> HostResult<()> {
        self.call(Call::SetProperty)?;
        self.properties
            .push((self.context, path.to_owned(), value.to_vec()));
        Ok(())
    }

    fn now_ms(&mut self) -> u64 {
        match self.clock {
            Clock::At(ms) => return ms,
            Clock::Once => {
                self.clock = Clock::At(self.now_ms);
                self.clock_read = Some(self.now_ms);
            }
            Clock::Proxy => {}
        }
        self.clock_reads += 1;
        self.now_ms
    }

    fn log(&mut self, level: Level, message: &str) {
        self.log.push((level, message.to_owned()));
    }
}

impl ConfigHost for MockHost {
    fn define_metric(&mut self, _kind: MetricKind, name: &str) -> HostResult<u32> {
        self.call(Call::DefineMetric)?;
        self.metrics.push((name.to_owned(), 0));
        Ok(u32::try_from(self.metrics.len() - 1).unwrap_or(u32::MAX))
    }

    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        self.call(Call::RecordMetric)?;
        if let Some((_, v)) = self.metrics.get_mut(id as usize) {
            *v = i64::try_from(value).unwrap_or(i64::MAX);
        }
        Ok(())
    }

    fn set_tick_period_ms(&mut self, ms: u32) -> HostResult<()> {
        self.call(Call::SetTickPeriod)?;
        self.tick_ms = Some(ms);
        Ok(())
    }

    fn now_ms(&mut self) -> u64 {
        StreamHost::now_ms(self)
    }

    fn log(&mut self, level: Level, message: &str) {
        self.log.push((level, message.to_owned()));
    }

    fn counts_on_tick(&self) -> bool {
        self.counts_on_tick
    }
}

/// The tick reaches a held request by making its context current, as
/// proxy-wasm's `set_effective_context` does.
impl Streams for MockHost {
    type Key = u32;
    type Stream<'a> = &'a mut MockHost;
    fn stream(&mut self, key: u32) -> Option<&mut MockHost> {
        if let Err(e) = self.call(Call::SetEffectiveContext) {
            StreamHost::log(
                self,
                Level::Error,
                &format!("cannot reach a held request: {e}"),
            );
            return None;
        }
        self.context = key;
        Some(self)
    }
}

impl Proxy for MockHost {
    fn plugin_config(&mut self) -> HostResult<Vec<u8>> {
        self.call(Call::PluginConfig)?;
        Ok(self.config.clone())
    }

    fn set_effective_context(&mut self, context: u32) -> HostResult<()> {
        self.call(Call::SetEffectiveContext)?;
        self.context = context;
        Ok(())
    }

    fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
        self.clock_read = None;
    }

    fn clock_read(&self) -> Option<u64> {
        self.clock_read
    }

    fn flush_counts(&mut self) {
        let metrics = &mut self.metrics;
        self.pending.drain(|id, by| count(metrics, id, by));
    }
}

/// A counter's increment, into the host's metrics.
fn count(metrics: &mut [(String, i64)], id: u32, by: u64) {
    if let Some((_, v)) = metrics.get_mut(id as usize) {
        *v += i64::try_from(by).unwrap_or(i64::MAX);
    }
}
