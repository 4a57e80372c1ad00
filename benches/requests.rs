//! The core's cost per request through the lifecycle, for callgrind:
//! `cargo bench --bench requests -- <b|c|d> <n>` runs `n` requests of
//! bench_envoy.py's row through `lifecycle::Vm` with a host that does
//! nothing but hand over the headers and the body in one chunk (their
//! copies, the host's side, are made once, outside the requests).
//! `scripts/core-cost.sh` runs it under callgrind for two counts and prints
//! the instructions per request. It prints counts, never times.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hookstamp::host::{Host, HostResult, Level, MetricKind};
use hookstamp::lifecycle::Vm;
use hookstamp::pairs;
use hookstamp::reply::Reply;
use std::hint::black_box;

const GITHUB: &str = r#"{"prefix": "/webhooks", "sources": [{"id": "github", "dedupe": "github", "sinks": [
    {"type": "kafka", "ordered": true, "ordering_key": {"header": "x-github-hook-id"}}]}]}"#;
const STRIPE: &str = r#"{"prefix": "/webhooks", "sources": [{"id": "stripe", "dedupe": "stripe", "sinks": [
    {"type": "sqs", "ordered": true, "ordering_key": {"json": "data.object.customer"}}]}]}"#;
const NONE: &str = r#"{"prefix": "/elsewhere", "sources": [{"id": "github", "dedupe": "github"}]}"#;

/// bench_envoy.py's `event(size)`.
fn event(size: usize) -> Vec<u8> {
    let tail = r#","data":{"object":{"object":"invoice","customer":"cus_9s6XKzkNRiz8i3"}},"id":"evt_1OabcdEFGhijkLMN"}"#;
    let head = r#"{"object":"event","type":"invoice.paid","pad":""#;
    let pad = "x".repeat(size - head.len() - tail.len() - 1);
    format!("{head}{pad}\"{tail}").into_bytes()
}

struct Lean {
    config: Vec<u8>,
    wire: Vec<u8>,
    body: Vec<u8>,
    added: usize,
}

impl Host for Lean {
    fn plugin_config(&mut self) -> HostResult<Vec<u8>> {
        Ok(self.config.clone())
    }
    fn request_headers(&mut self) -> HostResult<Vec<u8>> {
        Ok(self.wire.clone())
    }
    fn request_trailers(&mut self) -> HostResult<Vec<u8>> {
        Ok(pairs::serialise(&[]))
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
    fn send_reply(&mut self, _: &Reply) -> HostResult<()> {
        Ok(())
    }
    fn set_effective_context(&mut self, _: u32) -> HostResult<()> {
        Ok(())
    }
    fn set_tick_period_ms(&mut self, _: u32) -> HostResult<()> {
        Ok(())
    }
    fn define_metric(&mut self, _: MetricKind, _: &str) -> HostResult<u32> {
        Ok(0)
    }
    fn increment_metric(&mut self, _: u32, _: i64) -> HostResult<()> {
        Ok(())
    }
    fn record_metric(&mut self, _: u32, _: u64) -> HostResult<()> {
        Ok(())
    }
    fn set_property(&mut self, _: &str, _: &[u8]) -> HostResult<()> {
        Ok(())
    }
    fn now_ms(&mut self) -> u64 {
        1_700_000_000_000
    }
    fn log(&mut self, _: Level, m: &str) {
        eprintln!("{m}");
    }
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let row = args.first().map_or("c", String::as_str);
    let n: u32 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let (config, path, body) = match row {
        "b" => (NONE, "/webhooks/github", b"{}".to_vec()),
        "c" => (GITHUB, "/webhooks/github", b"{}".to_vec()),
        "d" => (STRIPE, "/webhooks/stripe", event(1024)),
        other => panic!("no row {other}: b, c or d"),
    };
    let len = body.len().to_string();
    let headers: Vec<(&str, &[u8])> = vec![
        (":method", b"POST"),
        (":path", path.as_bytes()),
        (":authority", b"127.0.0.1"),
        (":scheme", b"http"),
        ("user-agent", b"wrk"),
        ("content-type", b"application/json"),
        ("x-github-delivery", b"d-1"),
        ("x-github-hook-id", b"h-1"),
        ("content-length", len.as_bytes()),
    ];
    let mut host = Lean {
        config: config.as_bytes().to_vec(),
        wire: pairs::serialise(&headers),
        body,
        added: 0,
    };
    let mut vm = Vm::default();
    vm.on_context_create(1, 0);
    assert!(vm.on_configure(&mut host, 1));
    let size = host.body.len();
    for i in 0..n {
        let ctx = 2 + i;
        vm.on_context_create(ctx, 1);
        vm.on_request_headers(&mut host, ctx, false);
        vm.on_request_body(&mut host, ctx, size, true);
        vm.on_delete(ctx);
    }
    println!("{row}: {n} requests, {} stamp bytes", black_box(host.added));
}
