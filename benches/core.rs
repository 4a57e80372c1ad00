//! The core's request resolution, natively, side by side with two
//! baselines: the obvious one (decode the whole body into
//! serde_json::Value, walk the paths) and the one a careful engineer would
//! write (serde_json driving a path walker that descends only into wanted
//! keys and skips everything else as `IgnoredAny`). All run interleaved in
//! one process, so the machine's noise cancels; the table prints the
//! ratios. `cargo bench --bench core`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hookstamp::config::{self, Config};
use hookstamp::decide;
use hookstamp::json;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::Value;
use std::fmt;
use std::hint::black_box;
use std::time::{Duration, Instant};

const STRIPE: &str = r#"{"sources":[{"id":"stripe","dedupe":"stripe","sinks":[
  {"type":"sqs","ordered":true,"ordering_key":{"json":"data.object.customer"}}]}],
  "max_json_bytes": 4194304}"#;
const GITHUB: &str = r#"{"sources":[{"id":"github","dedupe":"github","sinks":[
  {"type":"kafka","ordered":true,"ordering_key":{"header":"x-github-hook-id"}}]}]}"#;
/// The same, sealed (the stamp seal: an RFC 9421 signature over the
/// request and its stamps).
const GITHUB_SEALED: &str = r#"{"seal":{"keys":[{"value":"queue-key"}]},"sources":[{"id":"github","dedupe":"github","sinks":[
  {"type":"kafka","ordered":true,"ordering_key":{"header":"x-github-hook-id"}}]}]}"#;

/// A Stripe-like event of about `size` bytes whose `id` and
/// `data.object.customer` come after the padding (the worst case); each
/// line item's description ends in `words`.
fn event(size: usize, words: &str) -> Vec<u8> {
    let mut items = Vec::new();
    let mut len = 0;
    let mut i = 0;
    while len + 300 < size {
        let item = format!(
            r#"{{"id":"ii_{i:08}","object":"invoiceitem","amount":{},"currency":"usd","description":"Line \"item\" {i} {words}","metadata":{{"k":"v","n":null,"ok":true}},"period":{{"start":1700000000,"end":1700086400}}}}"#,
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

/// The careful baseline: one serde_json pass that follows only the wanted
/// paths. `Node` is a position in the document, with the paths that still
/// match there; keys are matched without an allocation where serde_json
/// can borrow them.
struct Node<'p, 'o> {
    paths: &'p [&'p [&'p str]],
    /// Bit i: path i matches down to here.
    live: u64,
    depth: usize,
    out: &'o mut [Option<String>],
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl Node<'_, '_> {
    /// Paths that end here get the scalar.
    fn leaf(self, text: String) {
        for (i, p) in self.paths.iter().enumerate() {
            if self.live & (1 << i) != 0 && p.len() == self.depth {
                self.out[i] = Some(text.clone());
            }
        }
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.leaf(v.to_owned());
        Ok(())
    }
    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.leaf(v.to_string());
        Ok(())
    }
    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.leaf(v.to_string());
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Node {
            paths,
            live,
            depth,
            out,
        } = self;
        while let Some(next) = map.next_key_seed(Key { paths, live, depth })? {
            if next == 0 {
                map.next_value::<IgnoredAny>()?;
            } else {
                let child = Node {
                    paths,
                    live: next,
                    depth: depth + 1,
                    out: &mut *out,
                };
                map.next_value_seed(child)?;
            }
        }
        Ok(())
    }
}

/// A key: which live paths it continues.
struct Key<'p> {
    paths: &'p [&'p [&'p str]],
    live: u64,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Key<'_> {
    type Value = u64;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<u64, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key<'_> {
    type Value = u64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }
    fn visit_str<E>(self, k: &str) -> Result<u64, E> {
        let mut next = 0;
        for (i, p) in self.paths.iter().enumerate() {
            if self.live & (1 << i) != 0 && p.get(self.depth) == Some(&k) {
                next |= 1 << i;
            }
        }
        Ok(next)
    }
}

fn walker(body: &[u8], paths: &[&[&str]]) -> Vec<Option<String>> {
    let mut out = vec![None; paths.len()];
    let mut de = serde_json::Deserializer::from_slice(body);
    let node = Node {
        paths,
        live: (1 << paths.len()) - 1,
        depth: 0,
        out: &mut out,
    };
    if node.deserialize(&mut de).and_then(|()| de.end()).is_err() {
        return vec![None; paths.len()];
    }
    out
}

const PATHS: &[&[&str]] = &[&["id"], &["data", "object", "customer"]];

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

/// A call a benchmark times.
type Run<'a> = dyn FnMut() + 'a;

/// Each of `runs` in interleaved rounds of `iters` calls, for at least
/// `secs` seconds and five rounds (the machine's slow spells fall on every
/// one alike): each one's median ns per call.
fn interleaved(secs: u64, iters: u32, runs: &mut [&mut Run]) -> Vec<f64> {
    let mut rounds = vec![Vec::new(); runs.len()];
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(secs) || rounds[0].len() < 5 {
        for (r, f) in rounds.iter_mut().zip(runs.iter_mut()) {
            time(r, iters, &mut **f);
        }
    }
    rounds.iter_mut().map(|r| median(r)).collect()
}

/// A body whose `pad` is the JSON value `pad`, its keys after it.
fn padded(pad: &[u8]) -> Vec<u8> {
    let mut body = br#"{"pad":"#.to_vec();
    body.extend_from_slice(pad);
    body.extend_from_slice(br#","data":{"object":{"customer":"cus_1"}},"id":"evt_1"}"#);
    body
}

/// `item` repeated to about 1 MiB, between `open` and `close`.
fn repeated(open: &str, item: &str, close: &str) -> Vec<u8> {
    let mut v = open.as_bytes().to_vec();
    while v.len() < 1 << 20 {
        v.extend_from_slice(item.as_bytes());
    }
    v.extend_from_slice(close.as_bytes());
    v
}

/// Bodies built to make the scan slow, beside serde_json's walker: what a
/// sender who wants the filter's CPU can make it spend a byte.
fn hostile(paths: &[json::Path]) {
    let mut not_utf8 = padded(&repeated("\"", "\u{e9}", "\""));
    let n = not_utf8.len();
    not_utf8[n - 60] = 0xFF;
    let bodies = [
        ("escapes", padded(&repeated("\"", "\\n", "\""))),
        (
            "letters beyond ASCII",
            padded(&repeated("\"", "\u{e9}", "\"")),
        ),
        (
            "ASCII and Latin by turns",
            padded(&repeated("\"", "a\u{e9}", "\"")),
        ),
        (
            "escapes between them",
            padded(&repeated("\"", "\\n\u{e9}", "\"")),
        ),
        (
            "one-letter strings",
            padded(&repeated("[", "\"\u{e9}\",", "\"\"]")),
        ),
        ("numbers", padded(&repeated("[", "12345,", "0]"))),
        (
            "nested arrays",
            padded(&[repeated("", "[", ""), repeated("", "]", "")].concat()),
        ),
        ("not UTF-8 at the end", not_utf8),
    ];
    println!("\nBodies built to be slow, about 1 MiB each (ns per scan):\n");
    println!(
        "{:<28} {:>9} {:>11} {:>8} {:>11} {:>9}",
        "body", "bytes", "scan ns", "MB/s", "walker ns", "vs walker"
    );
    for (name, body) in &bodies {
        let m = interleaved(
            2,
            4,
            &mut [
                &mut || {
                    black_box(json::extract(black_box(body), paths));
                },
                &mut || {
                    black_box(walker(black_box(body), PATHS));
                },
            ],
        );
        let (sc, w) = (m[0], m[1]);
        let mbs = body.len() as f64 / sc * 1e9 / 1e6;
        println!(
            "{name:<28} {:>9} {sc:>11.0} {mbs:>8.0} {w:>11.0} {:>8.2}x",
            body.len(),
            w / sc
        );
    }
}

/// SHA-256 as shipped natively (ring's, `hookstamp::sha256`) beside
/// RustCrypto's sha2 (the .wasm's) on this CPU: what the choice costs where
/// the CPU has SHA extensions, where both use them. (Without them, ring's
/// is the cheaper: callgrind's rows in BENCHMARKS.md.)
fn hashes() {
    use hmac::Mac as _;
    use sha2::Digest as _;
    let body = vec![b'x'; 1035];
    let parts: [&[u8]; 6] = [
        b"hookstamp/lane/v1",
        b"default",
        &[0, 0, 0, 0],
        b"github",
        &[1],
        b"h-1",
    ];
    let keyed = hookstamp::sha256::Hmac::new(b"whsec_bench_stripe_secret").unwrap();
    let rust = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"whsec_bench_stripe_secret").unwrap();
    let rows: [(&str, &mut Run, &mut Run); 2] = [
        (
            "a lane id (six pieces)",
            &mut || {
                let mut h = hookstamp::sha256::Sha256::new();
                parts.iter().for_each(|p| h.update(black_box(p)));
                black_box(h.finish());
            },
            &mut || {
                let mut h = sha2::Sha256::new();
                parts.iter().for_each(|p| h.update(black_box(p)));
                black_box(h.finalize());
            },
        ),
        (
            "HMAC of (v)'s signed 1 KiB",
            &mut || {
                let mut m = keyed.clone();
                m.update(black_box(&body));
                black_box(m.finish());
            },
            &mut || {
                let mut m = rust.clone();
                m.update(black_box(&body));
                black_box(m.finalize().into_bytes());
            },
        ),
    ];
    println!(
        "\nSHA-256 on this CPU (SHA extensions: {}), ns each:\n",
        sha_extensions()
    );
    println!(
        "{:<28} {:>8} {:>8} {:>9}",
        "digest", "ring", "sha2", "ring/sha2"
    );
    for (name, ours, theirs) in rows {
        let m = interleaved(1, 2000, &mut [ours, theirs]);
        println!(
            "{name:<28} {:>8.0} {:>8.0} {:>8.2}x",
            m[0],
            m[1],
            m[0] / m[1]
        );
    }
}

fn sha_extensions() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("sha") {
        return "yes";
    }
    "no"
}

fn stamp(cfg: &Config, path: &str, headers: &[(&str, &str)], body: &[u8]) {
    black_box(decide::decide(cfg, "POST", path, headers, black_box(body), 0).outcome);
}

fn main() {
    let stripe = config::load(STRIPE).unwrap().config;
    let github = config::load(GITHUB).unwrap().config;
    let sealed = config::load(GITHUB_SEALED).unwrap().config;
    let gh_headers = [
        ("x-github-delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"),
        ("x-github-hook-id", "292430182"),
        ("content-type", "application/json"),
        ("user-agent", "GitHub-Hookshot/044aadd"),
    ];
    println!("hookstamp core, native: median of interleaved rounds (ns per request)\n");
    println!(
        "{:<28} {:>8} {:>12} {:>8} {:>8} {:>11} {:>8} {:>9} {:>14} {:>8} {:>9}",
        "case",
        "bytes",
        "hookstamp ns",
        "MB/s",
        "scan ns",
        "walker ns",
        "MB/s",
        "vs walker",
        "full-decode ns",
        "MB/s",
        "vs decode"
    );
    // Header-only: no body is read, so there is no decode to compare with.
    for (name, cfg) in [
        ("github preset + header lane", &github),
        ("the same, sealed", &sealed),
    ] {
        let (mut ours, budget) = (Vec::new(), Duration::from_millis(600));
        let start = Instant::now();
        while start.elapsed() < budget {
            time(&mut ours, 2000, || {
                stamp(cfg, "/webhooks/github", &gh_headers, b"{}")
            });
        }
        println!(
            "{:<28} {:>8} {:>12.0} {:>8} {:>8} {:>11} {:>8} {:>9} {:>14} {:>8} {:>9}",
            name,
            0,
            median(&mut ours),
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-"
        );
    }
    // Text beyond ASCII: Latin with accents, CJK, an emoji, as a product's
    // description carries it (about 160 bytes of it an item).
    let text = "Caf\u{e9} cr\u{e8}me, na\u{ef}ve r\u{e9}sum\u{e9}. \u{65e5}\u{672c}\u{8a9e}\u{306e}\u{8aac}\u{660e}\u{3002} \u{1f600} ".repeat(3);
    for (name, size, words) in [
        ("stripe-like 1 KiB", 1024, "\\u00e9"),
        ("64 KiB, paths at the end", 64 * 1024, "\\u00e9"),
        ("64 KiB, text beyond ASCII", 64 * 1024, text.as_str()),
        ("1 MiB, paths at the end", 1024 * 1024, "\\u00e9"),
    ] {
        let body = event(size, words);
        // Same answers, or the comparison means nothing.
        let r = decide::decide(
            &stripe,
            "POST",
            "/webhooks/stripe",
            &[] as &[(&str, &str)],
            &body,
            0,
        )
        .outcome;
        let json = hookstamp::wire::outcome(&r).to_string();
        let (id, cus) = baseline(&body);
        let (id, cus) = (id.unwrap(), cus.unwrap());
        assert!(json.contains(&id) && json.contains(&cus));
        assert_eq!(walker(&body, PATHS), vec![Some(id), Some(cus)]);
        let iters = (4_000_000 / body.len()).max(1) as u32;
        let paths = &stripe.sources[0].paths;
        let m = interleaved(
            4,
            iters,
            &mut [
                &mut || stamp(&stripe, "/webhooks/stripe", &[], &body),
                &mut || {
                    black_box(json::extract(black_box(&body), paths));
                },
                &mut || {
                    black_box(walker(black_box(&body), PATHS));
                },
                &mut || {
                    black_box(baseline(black_box(&body)));
                },
            ],
        );
        let (a, sc, w, b) = (m[0], m[1], m[2], m[3]);
        let mbs = |ns: f64| body.len() as f64 / ns * 1e9 / 1e6;
        println!(
            "{:<28} {:>8} {:>12.0} {:>8.0} {:>8.0} {:>11.0} {:>8.0} {:>8.2}x {:>14.0} {:>8.0} {:>8.1}x",
            name,
            body.len(),
            a,
            mbs(a),
            sc,
            w,
            mbs(w),
            w / sc,
            b,
            mbs(b),
            b / a
        );
    }
    println!(
        "\nhookstamp ns: route + JSON scan + keys + lane ids + stamp encoding (decide::decide)."
    );
    println!("scan ns: the JSON scan alone (json::extract over the source's paths); `vs walker` is walker / scan.");
    hostile(&stripe.sources[0].paths);
    // What the walker does not do, that the scanner must (the contract).
    let surrogate = br#"{"x":"\ud800","id":"evt_1","data":{"object":{"customer":"c"}}}"#;
    let big = br#"{"id":123456789012345678901234567890,"data":{"object":{"customer":"c"}}}"#;
    let paths = &stripe.sources[0].paths;
    println!(
        "\nA lone surrogate escape in a skipped string: the scanner finds {}, the walker finds {:?}.",
        if json::extract(surrogate, paths).is_none() { "no key (the body is not valid)" } else { "keys" },
        walker(surrogate, PATHS)[0]
    );
    // Bytes that are not UTF-8 in a string the walker skips: it takes them.
    let bad = b"{\"x\":\"\xff\",\"id\":\"evt_1\",\"data\":{\"object\":{\"customer\":\"c\"}}}";
    println!(
        "A byte 0xFF in a skipped string: the scanner finds {}, the walker finds {:?}.",
        if json::extract(bad, paths).is_none() {
            "no key (the body is not valid)"
        } else {
            "keys"
        },
        walker(bad, PATHS)[0]
    );
    println!(
        "An id of 123456789012345678901234567890: the scanner finds {:?}, the walker finds {:?}.",
        json::extract(big, paths).and_then(|v| v.into_iter().next().flatten()),
        walker(big, PATHS)[0]
    );
    println!("walker ns: serde_json with a seed that follows the two paths and skips the rest (IgnoredAny).");
    println!("full-decode ns: serde_json::from_slice::<Value> + two path walks, nothing else.");
    hashes();
}
