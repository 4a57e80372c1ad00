//! A host emulator: the proxy as the lifecycle sees it, in memory, so that
//! every path of a request (including the ones a real proxy reaches only
//! with sleeps and stalled sockets) is tested natively.

use crate::host::{Host, HostError, HostResult, Level, MetricKind};
use crate::pairs;
use crate::reply::Reply;

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
    pub log: Vec<(Level, String)>,
    pub now_ms: u64,
    pub tick_ms: Option<u32>,
    /// The request the host takes as current.
    pub context: u32,
    /// The request current at each header added: a stamp is only ever
    /// added to the request it is for.
    pub added_for: Vec<u32>,
    /// A host call that fails, by its ABI name: what a failing proxy does.
    pub fail: Option<&'static str>,
}

impl MockHost {
    fn call(&self, name: &'static str) -> HostResult<()> {
        match self.fail {
            Some(f) if f == name => Err(HostError {
                call: name,
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
            .filter(|(n, _)| crate::stamps::is_stamp_header(n))
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

impl Host for MockHost {
    fn plugin_config(&mut self) -> HostResult<Vec<u8>> {
        self.call("proxy_get_buffer_bytes")?;
        Ok(self.config.clone())
    }

    fn request_headers(&mut self) -> HostResult<Vec<u8>> {
        self.call("proxy_get_header_map_pairs")?;
        Ok(wire(&self.headers))
    }

    fn request_trailers(&mut self) -> HostResult<Vec<u8>> {
        self.call("proxy_get_header_map_pairs")?;
        Ok(wire(&self.trailers))
    }

    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()> {
        self.call("proxy_add_header_map_value")?;
        self.added_for.push(self.context);
        self.headers
            .push((name.to_owned(), value.as_bytes().to_vec()));
        Ok(())
    }

    fn remove_request_header(&mut self, name: &str) -> HostResult<()> {
        self.call("proxy_remove_header_map_value")?;
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        Ok(())
    }

    fn remove_request_trailer(&mut self, name: &str) -> HostResult<()> {
        self.call("proxy_remove_header_map_value")?;
        self.trailers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        Ok(())
    }

    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>> {
        self.call("proxy_get_buffer_bytes")?;
        Ok(self.chunk.iter().copied().take(size).collect())
    }

    fn send_reply(&mut self, reply: &Reply) -> HostResult<()> {
        self.call("proxy_send_local_response")?;
        self.replies.push((self.context, *reply));
        Ok(())
    }

    fn set_effective_context(&mut self, context: u32) -> HostResult<()> {
        self.call("proxy_set_effective_context")?;
        self.context = context;
        Ok(())
    }

    fn set_tick_period_ms(&mut self, ms: u32) -> HostResult<()> {
        self.call("proxy_set_tick_period_milliseconds")?;
        self.tick_ms = Some(ms);
        Ok(())
    }

    fn define_metric(&mut self, _kind: MetricKind, name: &str) -> HostResult<u32> {
        self.call("proxy_define_metric")?;
        self.metrics.push((name.to_owned(), 0));
        Ok(u32::try_from(self.metrics.len() - 1).unwrap_or(u32::MAX))
    }

    fn increment_metric(&mut self, id: u32, by: i64) -> HostResult<()> {
        self.call("proxy_increment_metric")?;
        if let Some((_, v)) = self.metrics.get_mut(id as usize) {
            *v += by;
        }
        Ok(())
    }

    fn record_metric(&mut self, id: u32, value: u64) -> HostResult<()> {
        self.call("proxy_record_metric")?;
        if let Some((_, v)) = self.metrics.get_mut(id as usize) {
            *v = i64::try_from(value).unwrap_or(i64::MAX);
        }
        Ok(())
    }

    fn now_ms(&mut self) -> u64 {
        self.now_ms
    }

    fn log(&mut self, level: Level, message: &str) {
        self.log.push((level, message.to_owned()));
    }
}
