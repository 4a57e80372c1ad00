//! The core's request resolution, natively, side by side with the obvious
//! baseline (decode the whole body into serde_json::Value, walk the paths).
//! Both run interleaved in one process, so the machine's noise cancels;
//! the table prints the ratio. `cargo bench --bench core`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hookstamp::config::{self, Config};
use hookstamp::resolve;
use serde_json::Value;
use std::hint::black_box;
use std::time::{Duration, Instant};

const STRIPE: &str = r#"{"sources":[{"id":"stripe","dedupe":"stripe","sinks":[
  {"type":"sqs","ordered":true,"ordering_key":{"json":"data.object.customer"}}]}],
  "max_json_bytes": 4194304}"#;
const GITHUB: &str = r#"{"sources":[{"id":"github","dedupe":"github","sinks":[
  {"type":"kafka","ordered":true,"ordering_key":{"header":"x-github-hook-id"}}]}]}"#;

/// A Stripe-like event of about `size` bytes whose `id` and
/// `data.object.customer` come after the padding (the worst case).
fn event(size: usize) -> Vec<u8> {
    let mut items = Vec::new();
    let mut len = 0;
    let mut i = 0;
    while len + 300 < size {
        let item = format!(
            r#"{{"id":"ii_{i:08}","object":"invoiceitem","amount":{},"currency":"usd","description":"Line \"item\" {i} \u00e9","metadata":{{"k":"v","n":null,"ok":true}},"period":{{"start":1700000000,"end":1700086400}}}}"#,
            i * 37
        );
        len += item.len() + 1;
        items.push(item);
        i += 1;
    }
    format!(
        r#"{{"object":"event","api_version":"2024-06-20","created":1700000000,"lines":[{}],"livemode":false,"type":"invoice.paid","data":{{"object":{{"object":"invoice","customer":"cus_9s6XKzkNRiz8i3","total":1999}}}},"id":"evt_1OabcdEFGhijkLMN"}}"#,
        items.join(",")
    )
    .into_bytes()
}

fn baseline(body: &[u8]) -> (Option<String>, Option<String>) {
    let v: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return (None, None),
    };
    let id = v.get("id").and_then(Value::as_str).map(str::to_owned);
    let cus = v
        .pointer("/data/object/customer")
        .and_then(Value::as_str)
        .map(str::to_owned);
    (id, cus)
}

/// Median ns per call over `rounds` rounds of `iters` calls.
fn time(rounds: &mut Vec<f64>, iters: u32, mut f: impl FnMut()) {
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    rounds.push(t.elapsed().as_nanos() as f64 / f64::from(iters));
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn stamp(cfg: &Config, path: &str, headers: &[(&str, &str)], body: &[u8]) {
    black_box(resolve::handle(cfg, "POST", path, headers, black_box(body)));
}

fn main() {
    let stripe = config::load(STRIPE).unwrap().config;
    let github = config::load(GITHUB).unwrap().config;
    let gh_headers = [
        ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("x-github-hook-id", "292430182"),
        ("content-type", "application/json"),
        ("user-agent", "GitHub-Hookshot/044aadd"),
    ];
    println!("hookstamp core, native: median of interleaved rounds (ns per request)\n");
    println!(
        "{:<34} {:>9} {:>13} {:>10} {:>13} {:>10} {:>8}",
        "case", "bytes", "hookstamp ns", "MB/s", "full-decode ns", "MB/s", "speedup"
    );
    // Header-only: no body is read, so there is no decode to compare with.
    let (mut ours, budget) = (Vec::new(), Duration::from_millis(600));
    let start = Instant::now();
    while start.elapsed() < budget {
        time(&mut ours, 2000, || {
            stamp(&github, "/webhooks/github", &gh_headers, b"{}")
        });
    }
    println!(
        "{:<34} {:>9} {:>13.0} {:>10} {:>13} {:>10} {:>8}",
        "github preset + header lane",
        0,
        median(&mut ours),
        "-",
        "-",
        "-",
        "-"
    );
    for (name, size) in [
        ("stripe-like 1 KiB", 1024),
        ("64 KiB, paths at the end", 64 * 1024),
        ("1 MiB, paths at the end", 1024 * 1024),
    ] {
        let body = event(size);
        // Same answers, or the comparison means nothing.
        let r = resolve::handle(
            &stripe,
            "POST",
            "/webhooks/stripe",
            &[] as &[(&str, &str)],
            &body,
        );
        let json = r.to_json().to_string();
        let (id, cus) = baseline(&body);
        assert!(json.contains(&id.unwrap()) && json.contains(&cus.unwrap()));
        let iters = (4_000_000 / body.len()).max(1) as u32;
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(3) || a.len() < 5 {
            time(&mut a, iters, || {
                stamp(&stripe, "/webhooks/stripe", &[], &body)
            });
            time(&mut b, iters, || {
                black_box(baseline(black_box(&body)));
            });
        }
        let (a, b) = (median(&mut a), median(&mut b));
        let mbs = |ns: f64| body.len() as f64 / ns * 1e9 / 1e6;
        println!(
            "{:<34} {:>9} {:>13.0} {:>10.0} {:>13.0} {:>10.0} {:>7.1}x",
            name,
            body.len(),
            a,
            mbs(a),
            b,
            mbs(b),
            b / a
        );
    }
    println!(
        "\nhookstamp ns: route + JSON scan + keys + lane ids + stamp encoding (resolve::handle)."
    );
    println!("full-decode ns: serde_json::from_slice::<Value> + two path walks, nothing else.");
}
