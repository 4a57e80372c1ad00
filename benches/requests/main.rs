//! The core's cost per request through the lifecycle, for callgrind:
//! `cargo bench --bench requests -- <b|c|d|v|e|t> <n>` runs `n` requests
//! of bench_envoy.py's row through the lifecycle's `Request` (as the
//! dynamic module drives it) with a host that does nothing but hand over
//! the headers as views and the body in one chunk; (t) is (e) with its pad
//! of text beyond ASCII.
//! `scripts/core-cost.sh` runs it under callgrind for two counts and prints
//! the instructions per request. It prints counts, never times.
//!
//! `cargo bench --bench requests -- flood [n]` (make bench-flood) is the
//! other question: how many forged requests one worker's core refuses a
//! second, per scheme and at each scheme's worst (every secret, the most
//! entries a header may list), beside valid ones; times, printed as rates
//! and ratios, never asserted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hookstamp::host::{ConfigHost, Header, HostResult, Level, MetricKind, StreamHost};
use hookstamp::lifecycle::{Instance, Plugin, Request};
use hookstamp::reply::Reply;
use std::hint::black_box;
use std::sync::Arc;

const GITHUB: &str = r#"{"prefix": "/webhooks", "sources": [{"id": "github", "dedupe": "github", "sinks": [
    {"type": "kafka", "ordered": true, "ordering_key": {"header": "x-github-hook-id"}}]}]}"#;
const STRIPE: &str = r#"{"prefix": "/webhooks", "sources": [{"id": "stripe", "dedupe": "stripe", "sinks": [
    {"type": "sqs", "ordered": true, "ordering_key": {"json": "data.object.customer"}}]}]}"#;
const VERIFIED: &str = r#"{"prefix": "/webhooks", "sources": [{"id": "stripe", "dedupe": "stripe",
    "verify": {"scheme": "stripe", "secrets": [{"value": "whsec_bench_stripe_secret"}], "tolerance_s": 3600},
    "sinks": [{"type": "sqs", "ordered": true, "ordering_key": {"json": "data.object.customer"}}]}]}"#;
const NONE: &str = r#"{"prefix": "/elsewhere", "sources": [{"id": "github", "dedupe": "github"}]}"#;

/// bench_envoy.py's `event(size)`: its pad is `fill` repeated (bench_envoy's
/// is "x"), cut to `size` bytes at a character's end.
fn event(size: usize, fill: &str) -> Vec<u8> {
    let tail = r#","data":{"object":{"object":"invoice","customer":"cus_9s6XKzkNRiz8i3"}},"id":"evt_1OabcdEFGhijkLMN"}"#;
    let head = r#"{"object":"event","type":"invoice.paid","pad":""#;
    let room = size - head.len() - tail.len() - 1;
    let mut pad = String::with_capacity(room);
    for c in fill.chars().cycle() {
        if pad.len() + c.len_utf8() > room {
            break;
        }
        pad.push(c);
    }
    format!("{head}{pad}\"{tail}").into_bytes()
}

/// Text beyond ASCII, as a product description or a chat message carries
/// it: Latin with accents, CJK, an emoji.
const TEXT: &str = "Caf\u{e9} cr\u{e8}me, na\u{ef}ve r\u{e9}sum\u{e9}. \u{65e5}\u{672c}\u{8a9e}\u{306e}\u{8aac}\u{660e}\u{3002} \u{1f600} ";

/// The host: the request's headers as views (as the dynamic module reads
/// Envoy's), the body in one chunk.
struct Lean {
    headers: Vec<Header<'static>>,
    body: Vec<u8>,
    added: usize,
    /// Local replies sent (the forgeries' 401s).
    replies: usize,
}

impl ConfigHost for Lean {
    fn define_metric(&mut self, _: MetricKind, _: &str) -> HostResult<u32> {
        Ok(0)
    }
    fn record_metric(&mut self, _: u32, _: u64) -> HostResult<()> {
        Ok(())
    }
    fn set_tick_period_ms(&mut self, _: u32) -> HostResult<()> {
        Ok(())
    }
    fn now_ms(&mut self) -> u64 {
        1_700_000_000_000
    }
    fn log(&mut self, level: Level, m: &str) {
        // The load's warnings (inline secrets in the flood's schemes) are
        // not the benchmark's output.
        if matches!(level, Level::Error | Level::Critical) {
            eprintln!("{m}");
        }
    }
}

impl StreamHost for Lean {
    fn request_headers<'b>(&mut self, _: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        Ok(self.headers.clone())
    }
    fn request_trailers<'b>(&mut self, _: &'b mut Vec<u8>) -> HostResult<Vec<Header<'b>>> {
        Ok(Vec::new())
    }
    fn add_request_header(&mut self, name: &str, value: &str) -> HostResult<()> {
        self.added += name.len() + value.len();
        Ok(())
    }
    fn remove_request_header(&mut self, _: &str) -> HostResult<()> {
        Ok(())
    }
    fn remove_request_trailer(&mut self, _: &str) -> HostResult<()> {
        Ok(())
    }
    fn request_body(&mut self, size: usize) -> HostResult<Vec<u8>> {
        Ok(self.body[..size].to_vec())
    }
    fn set_request_body(&mut self, _: usize, _: &[u8]) -> HostResult<()> {
        Ok(())
    }
    fn send_reply(&mut self, _: &Reply) -> HostResult<()> {
        self.replies += 1;
        Ok(())
    }
    fn increment_metric(&mut self, _: u32, _: u64) -> HostResult<()> {
        Ok(())
    }
    fn record_metric(&mut self, _: u32, _: u64) -> HostResult<()> {
        Ok(())
    }
    fn set_property(&mut self, _: &str, _: &[u8]) -> HostResult<()> {
        Ok(())
    }
    fn now_ms(&mut self) -> u64 {
        ConfigHost::now_ms(self)
    }
    fn log(&mut self, level: Level, m: &str) {
        ConfigHost::log(self, level, m);
    }
}

mod flood;

/// bench_envoy.py's `stripe_signature`: the Lean host's clock, (v)'s secret.
fn stripe_signature(body: &[u8]) -> &'static str {
    use hmac::Mac;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"whsec_bench_stripe_secret")
        .expect("any key length");
    m.update(b"1700000000.");
    m.update(body);
    let hex = hex::encode(m.finalize().into_bytes());
    Box::leak(format!("t=1700000000,v1={hex}").into_boxed_str())
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let row = args.first().map_or("c", String::as_str);
    let n: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    if row == "flood" {
        return flood::run(n);
    }
    let (config, path, body) = match row {
        "b" => (NONE, "/webhooks/github", b"{}".to_vec()),
        "c" => (GITHUB, "/webhooks/github", b"{}".to_vec()),
        "d" | "v" => (
            if row == "d" { STRIPE } else { VERIFIED },
            "/webhooks/stripe",
            event(1024, "x"),
        ),
        // (e) natively, and the same size of text beyond ASCII.
        "e" => (STRIPE, "/webhooks/stripe", event(64 * 1024, "x")),
        "t" => (STRIPE, "/webhooks/stripe", event(64 * 1024, TEXT)),
        other => panic!("no row {other}: b, c, d, v, e or t"),
    };
    let signature = stripe_signature(&body);
    let len: &'static str = Box::leak(body.len().to_string().into_boxed_str());
    let path: &'static str = path;
    let headers: Vec<Header<'static>> = vec![
        (":method".as_bytes(), b"POST"),
        (":path".as_bytes(), path.as_bytes()),
        (":authority".as_bytes(), b"127.0.0.1"),
        (":scheme".as_bytes(), b"http"),
        ("user-agent".as_bytes(), b"wrk"),
        ("content-type".as_bytes(), b"application/json"),
        ("x-github-delivery".as_bytes(), b"d-1"),
        ("x-github-hook-id".as_bytes(), b"h-1"),
        ("content-length".as_bytes(), len.as_bytes()),
        ("stripe-signature".as_bytes(), signature.as_bytes()),
    ];
    let mut host = Lean {
        headers,
        body,
        added: 0,
        replies: 0,
    };
    let plugin = Plugin::load(&mut host, config.as_bytes()).expect("the configuration loads");
    let instance = Instance::new(Arc::new(plugin));
    let size = host.body.len();
    for i in 0..n {
        let mut r = Request::new(Some(instance.clone()), i);
        r.on_headers(&mut host, false);
        r.on_body(&mut host, size, true);
    }
    println!("{row}: {n} requests, {} stamp bytes", black_box(host.added));
}
