//! The request lifecycle on the host emulator: every path a request can
//! take through the filter, driven callback by callback as Envoy drives
//! them, including failing host calls, stalled bodies and a full budget.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hookstamp::filter::contexts::Contexts;
use hookstamp::host::Level;
use hookstamp::host::{DataStatus, HeadersStatus};
#[path = "common/mock.rs"]
mod mock;

use hookstamp::reply;
use mock::{Call, MockHost};

const ROOT: u32 = 1;

/// What the contexts hold for their body, as the tests read it.
trait Holding {
    fn held_requests(&self) -> usize;
    fn held_bytes(&self) -> usize;
}

impl Holding for Contexts {
    fn held_requests(&self) -> usize {
        self.holding().expect("no callback runs").0
    }
    fn held_bytes(&self) -> usize {
        self.holding().expect("no callback runs").1
    }
}

const CONFIG: &str = r#"{
  "max_json_bytes": 1000, "max_held_bytes": 6000, "max_hold_ms": 2000,
  "sources": [
    {"id": "stripe", "dedupe": "stripe",
     "sinks": [{"type": "sqs", "ordered": true, "ordering_key": {"json": "data.object.customer"}},
               {"type": "sqs", "ordered": true, "ordering_key": {"header": "x-entity-id"}}]},
    {"id": "github", "dedupe": "github"}
  ]}"#;

const EVENT: &[u8] = br#"{"id":"evt_1","data":{"object":{"customer":"cus_9"}}}"#;

/// A VM with one configured plugin, and its host.
fn boot(config: &str) -> (Contexts, MockHost) {
    let mut host = MockHost {
        config: config.as_bytes().to_vec(),
        now_ms: 1_000_000,
        ..MockHost::default()
    };
    let vm = Contexts::default();
    vm.on_context_create(ROOT, 0);
    assert!(vm.on_configure(&mut host, ROOT), "{:?}", host.log);
    (vm, host)
}

/// Starts request `ctx`: its headers become the host's current request.
fn start(
    vm: &mut Contexts,
    host: &mut MockHost,
    ctx: u32,
    headers: &[(&str, &str)],
    eos: bool,
) -> HeadersStatus {
    vm.on_context_create(ctx, ROOT);
    host.context = ctx;
    host.headers = headers
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
        .collect();
    vm.on_request_headers(host, ctx, eos)
}

fn post<'a>(path: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![(":method", "POST"), (":path", path), (":authority", "x")];
    h.extend_from_slice(extra);
    h
}

fn chunk(vm: &mut Contexts, host: &mut MockHost, ctx: u32, bytes: &[u8], eos: bool) -> DataStatus {
    host.chunk = bytes.to_vec();
    vm.on_request_body(host, ctx, bytes.len(), eos)
}

fn stamp(host: &MockHost, name: &str) -> Option<String> {
    host.stamps()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v)
}

fn replied(host: &MockHost) -> Vec<u32> {
    host.replies.iter().map(|(_, r)| r.status).collect()
}

#[test]
fn header_source_is_stamped_at_the_headers_and_spoofs_are_stripped() {
    let (mut vm, mut host) = boot(CONFIG);
    let h = post(
        "/webhooks/github",
        &[
            ("x-github-delivery", "d-1"),
            ("x-hookstamp-dedupe-key", "evil"),
            ("x_hookstamp_dedupe_key", "evil"),
            ("X_HookStamp-Source", "evil"),
        ],
    );
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, true),
        HeadersStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("d-1")
    );
    assert_eq!(
        host.header("x-hookstamp-source"),
        vec![b"github".as_slice()]
    );
    assert!(host.header("x_hookstamp_dedupe_key").is_empty());
    assert_eq!(
        host.metric("hookstamp_spoofed_headers_stripped_total.source=github;"),
        3
    );
    assert_eq!(
        host.metric("hookstamp_requests_stamped_total.source=github;"),
        1
    );
    assert_eq!(vm.held_requests(), 0);
}

#[test]
fn body_source_waits_for_its_body_in_chunks() {
    for split in [1, 7, EVENT.len()] {
        let (mut vm, mut host) = boot(CONFIG);
        let h = post("/webhooks/stripe", &[("x-entity-id", "e-7")]);
        assert_eq!(
            start(&mut vm, &mut host, 2, &h, false),
            HeadersStatus::StopIteration
        );
        // The headers are resolved now: nothing else of them is needed.
        host.headers.retain(|(n, _)| n != "x-entity-id");
        let parts: Vec<&[u8]> = EVENT.chunks(split).collect();
        for (i, p) in parts.iter().enumerate() {
            let last = i + 1 == parts.len();
            let want = if last {
                DataStatus::Continue
            } else {
                DataStatus::StopAndWatermark
            };
            assert_eq!(chunk(&mut vm, &mut host, 2, p, last), want, "split {split}");
        }
        assert_eq!(
            stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
            Some("evt_1")
        );
        assert_eq!(
            stamp(&host, "x-hookstamp-lane-0-key").as_deref(),
            Some("cus_9")
        );
        assert_eq!(
            stamp(&host, "x-hookstamp-lane-1-key").as_deref(),
            Some("e-7")
        );
        assert_eq!((vm.held_requests(), vm.held_bytes()), (0, 0));
        assert!(host.replies.is_empty());
    }
}

#[test]
fn trailers_end_a_body_and_lose_their_stamp_names() {
    let (mut vm, mut host) = boot(CONFIG);
    start(&mut vm, &mut host, 2, &post("/webhooks/stripe", &[]), false);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, EVENT, false),
        DataStatus::StopAndWatermark
    );
    host.trailers = vec![
        ("x-hookstamp-dedupe-key".into(), b"evil".to_vec()),
        ("X_HOOKSTAMP_LANE_0".into(), b"evil".to_vec()),
        ("x-checksum".into(), b"ok".to_vec()),
    ];
    assert_eq!(
        vm.on_request_trailers(&mut host, 2),
        HeadersStatus::Continue
    );
    assert_eq!(host.trailers.len(), 1);
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("evt_1")
    );
    assert_eq!(host.metric("hookstamp_spoofed_trailers_stripped_total"), 2);
}

#[test]
fn trailers_of_passed_requests_are_stripped_too() {
    let (mut vm, mut host) = boot(CONFIG);
    let h = [(":method", "POST"), (":path", "/health")];
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, false),
        HeadersStatus::Continue
    );
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"x", false),
        DataStatus::Continue
    );
    host.trailers = vec![("x-hookstamp-source".into(), b"evil".to_vec())];
    assert_eq!(
        vm.on_request_trailers(&mut host, 2),
        HeadersStatus::Continue
    );
    assert!(host.trailers.is_empty());
}

#[test]
fn routes_answered_by_the_filter() {
    let cases: &[(&str, &str, Option<u32>)] = &[
        ("POST", "/webhooks/paypal", Some(404)),
        ("POST", "/%77ebhooks/stripe", Some(404)),
        ("POST", "/WEBHOOKS/stripe", Some(404)),
        ("POST", "/webhooks;a=b/stripe", Some(404)),
        ("post", "/webhooks/stripe", Some(405)),
        ("PUT", "/webhooks/stripe", Some(405)),
        ("DELETE", "/x/../webhooks/stripe", Some(405)),
        ("GET", "/webhooks/stripe", None),
        ("HEAD", "/webhooks/stripe", None),
        ("PUT", "/health", None),
    ];
    for (method, path, want) in cases {
        let (mut vm, mut host) = boot(CONFIG);
        let h = [(":method", *method), (":path", *path)];
        let got = start(&mut vm, &mut host, 2, &h, true);
        let status = host.replies.first().map(|(_, r)| r.status);
        assert_eq!(status, *want, "{method} {path}");
        let want_action = if want.is_some() {
            HeadersStatus::StopIteration
        } else {
            HeadersStatus::Continue
        };
        assert_eq!(got, want_action, "{method} {path}");
        assert!(host.stamps().is_empty());
    }
    let (mut vm, mut host) = boot(CONFIG);
    start(
        &mut vm,
        &mut host,
        2,
        &[(":method", "PATCH"), (":path", "/webhooks/x")],
        true,
    );
    assert_eq!(host.replies[0].1, reply::METHOD_NOT_ALLOWED);
    assert_eq!(reply::METHOD_NOT_ALLOWED.headers, &[("allow", "POST")]);
    assert_eq!(host.metric("hookstamp_method_not_allowed_total"), 1);
}

#[test]
fn declared_body_over_the_limit_is_stamped_at_the_headers_without_json_keys() {
    let (mut vm, mut host) = boot(CONFIG);
    let h = post("/webhooks/stripe", &[("content-length", "1001")]);
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, false),
        HeadersStatus::Continue
    );
    assert_eq!(stamp(&host, "x-hookstamp-dedupe-key"), None);
    assert_eq!(
        host.metric("hookstamp_body_over_limit_total.source=stripe;"),
        1
    );
    assert_eq!(vm.held_requests(), 0);
}

#[test]
fn chunked_body_crossing_the_limit_goes_on_whole_without_json_keys() {
    let (mut vm, mut host) = boot(CONFIG);
    start(&mut vm, &mut host, 2, &post("/webhooks/stripe", &[]), false);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &[b' '; 600], false),
        DataStatus::StopAndWatermark
    );
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &[b' '; 600], false),
        DataStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-source").as_deref(),
        Some("stripe")
    );
    assert_eq!(stamp(&host, "x-hookstamp-dedupe-key"), None);
    assert_eq!(
        host.metric("hookstamp_body_over_limit_total.source=stripe;"),
        1
    );
    assert_eq!((vm.held_requests(), vm.held_bytes()), (0, 0));
    // Later chunks of that request pass untouched.
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"x", true),
        DataStatus::Continue
    );
}

#[test]
fn a_full_budget_answers_503_never_keyless() {
    let (mut vm, mut host) = boot(CONFIG);
    // Five declared 1000-byte bodies fill most of 6000 bytes with their
    // overhead; the next cannot be held.
    let h = post("/webhooks/stripe", &[("content-length", "1000")]);
    let mut ctx = 2;
    while start(&mut vm, &mut host, ctx, &h, false) == HeadersStatus::StopIteration
        && host.replies.is_empty()
    {
        ctx += 1;
    }
    assert_eq!(replied(&host), vec![503]);
    assert_eq!(host.replies[0].1, reply::BUSY);
    assert!(reply::BUSY.headers.iter().any(|(n, _)| *n == "retry-after"));
    assert!(
        host.stamps().is_empty(),
        "a busy request is never forwarded keyless"
    );
    assert_eq!(host.metric("hookstamp_busy_total.source=stripe;"), 1);
    assert!(vm.held_bytes() <= 6000);
    // A held request that ends gives its bytes back: the next one fits.
    vm.on_delete(&mut host, 2);
    host.replies.clear();
    assert_eq!(
        start(&mut vm, &mut host, 100, &h, false),
        HeadersStatus::StopIteration
    );
    assert!(host.replies.is_empty());
}

#[test]
fn growth_is_charged_with_its_peak() {
    let (mut vm, mut host) = boot(
        r#"{"max_json_bytes": 1000, "max_held_bytes": 4000,
        "sources": [{"id": "s", "dedupe": "stripe"}]}"#,
    );
    start(&mut vm, &mut host, 2, &post("/webhooks/s", &[]), false);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &[b' '; 400], false),
        DataStatus::StopAndWatermark
    );
    // Envoy's 400 bytes and the filter's copy of them.
    let after_one = vm.held_bytes();
    assert!(after_one >= 800, "{after_one}");
    // Another request holding 2 × 700 bytes leaves too little for the
    // first to regrow from 400 to 800 bytes while a 400-byte chunk is
    // copied and buffered by Envoy: 400 + 400 + 800 + 400 + 400 at the peak.
    start(&mut vm, &mut host, 3, &post("/webhooks/s", &[]), false);
    assert_eq!(
        chunk(&mut vm, &mut host, 3, &[b' '; 700], false),
        DataStatus::StopAndWatermark
    );
    assert!(host.replies.is_empty());
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &[b' '; 400], false),
        DataStatus::StopNoBuffer
    );
    assert_eq!(replied(&host), vec![503]);
    assert!(vm.held_bytes() <= 4000);
}

#[test]
fn a_late_body_is_answered_408_on_the_tick_and_its_bytes_return() {
    let (mut vm, mut host) = boot(CONFIG);
    assert_eq!(host.tick_ms, Some(hookstamp::budget::TICK_MS));
    start(
        &mut vm,
        &mut host,
        2,
        &post("/webhooks/stripe", &[("content-length", "900")]),
        false,
    );
    chunk(&mut vm, &mut host, 2, b"{", false);
    assert!(vm.held_bytes() > 0);
    host.now_ms += 2000;
    vm.on_tick(&mut host, ROOT);
    assert!(host.replies.is_empty(), "not late until past max_hold_ms");
    host.now_ms += 1;
    host.context = ROOT;
    vm.on_tick(&mut host, ROOT);
    assert_eq!(host.replies, vec![(2, reply::BODY_TIMEOUT)]);
    assert_eq!(
        host.context, ROOT,
        "the root is current again after the tick"
    );
    assert_eq!((vm.held_requests(), vm.held_bytes()), (0, 0));
    assert_eq!(
        host.metric("hookstamp_body_timeout_total.source=stripe;"),
        1
    );
    // Anything Envoy still hands over for it goes no further: it was
    // answered, and is never forwarded without its stamps.
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"}", true),
        DataStatus::StopNoBuffer
    );
    assert_eq!(
        vm.on_request_trailers(&mut host, 2),
        HeadersStatus::StopIteration
    );
}

#[test]
fn a_body_that_never_reaches_the_filter_names_the_envoy_flag_once() {
    // Without allow_on_headers_stop_iteration Envoy never calls the body
    // callback of a request whose headers the filter held.
    let (mut vm, mut host) = boot(CONFIG);
    for ctx in [2, 3] {
        start(
            &mut vm,
            &mut host,
            ctx,
            &post("/webhooks/stripe", &[("content-length", "55")]),
            false,
        );
    }
    host.now_ms += 2001;
    vm.on_tick(&mut host, ROOT);
    assert_eq!(replied(&host), vec![408, 408]);
    assert_eq!(
        host.metric("hookstamp_body_never_seen_total.source=stripe;"),
        2
    );
    let hints: Vec<_> = host
        .log
        .iter()
        .filter(|(l, m)| *l == Level::Error && m.contains("allow_on_headers_stop_iteration"))
        .collect();
    assert_eq!(hints.len(), 1, "{:?}", host.log);
    assert!(hints[0].1.starts_with("source 'stripe': "));
}

#[test]
fn a_chunk_after_the_deadline_is_answered_408() {
    let (mut vm, mut host) = boot(CONFIG);
    start(&mut vm, &mut host, 2, &post("/webhooks/stripe", &[]), false);
    host.now_ms += 2001;
    assert_eq!(
        chunk(&mut vm, &mut host, 2, EVENT, true),
        DataStatus::StopNoBuffer
    );
    assert_eq!(replied(&host), vec![408]);
    assert!(host.stamps().is_empty());
}

#[test]
fn a_stalled_upload_flood_cannot_take_a_legitimate_hooks_keys() {
    let (mut vm, mut host) = boot(CONFIG);
    // The flood: uploads that declare a body and then stall, as large as
    // allowed until the budget takes no more, then small ones.
    let mut ctx = 10;
    for size in ["1000", "10"] {
        loop {
            start(
                &mut vm,
                &mut host,
                ctx,
                &post("/webhooks/stripe", &[("content-length", size)]),
                false,
            );
            ctx += 1;
            if !host.replies.is_empty() {
                host.replies.clear();
                break;
            }
            chunk(&mut vm, &mut host, ctx - 1, b" ", false);
        }
    }
    // The legitimate hook is answered 503 (the provider retries), never
    // forwarded without keys.
    host.replies.clear();
    host.headers.clear();
    start(
        &mut vm,
        &mut host,
        1000,
        &post(
            "/webhooks/stripe",
            &[("content-length", &EVENT.len().to_string())],
        ),
        false,
    );
    if host.replies.is_empty() {
        assert_eq!(
            chunk(&mut vm, &mut host, 1000, EVENT, true),
            DataStatus::StopNoBuffer
        );
    }
    assert_eq!(replied(&host), vec![503]);
    assert!(host.stamps().is_empty());
    // Past max_hold_ms the flood is answered 408 and its bytes return; the
    // provider's retry is stamped.
    host.now_ms += 2001;
    vm.on_tick(&mut host, ROOT);
    assert_eq!(vm.held_bytes(), 0);
    assert!(host.replies.iter().filter(|(_, r)| r.status == 408).count() >= 5);
    host.replies.clear();
    start(
        &mut vm,
        &mut host,
        1001,
        &post("/webhooks/stripe", &[]),
        false,
    );
    assert_eq!(
        chunk(&mut vm, &mut host, 1001, EVENT, true),
        DataStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("evt_1")
    );
}

#[test]
fn a_reset_mid_body_gives_everything_back() {
    let (mut vm, mut host) = boot(CONFIG);
    start(&mut vm, &mut host, 2, &post("/webhooks/stripe", &[]), false);
    chunk(&mut vm, &mut host, 2, &EVENT[..10], false);
    assert!(vm.held_bytes() > 0);
    vm.on_delete(&mut host, 2);
    assert_eq!((vm.held_requests(), vm.held_bytes()), (0, 0));
}

#[test]
fn every_failing_host_call_is_a_500_never_a_panic_or_a_pass() {
    for call in [
        Call::RequestHeaders,
        Call::RemoveRequestHeader,
        Call::AddRequestHeader,
        Call::RequestBody,
    ] {
        for (path, body) in [("/webhooks/github", false), ("/webhooks/stripe", true)] {
            let (mut vm, mut host) = boot(CONFIG);
            host.fail = Some(call);
            let h = post(
                path,
                &[("x-github-delivery", "d"), ("x-hookstamp-source", "evil")],
            );
            let status = start(&mut vm, &mut host, 2, &h, !body);
            if body && status == HeadersStatus::StopIteration && host.replies.is_empty() {
                chunk(&mut vm, &mut host, 2, EVENT, true);
            }
            let stamped = host
                .stamps()
                .iter()
                .any(|(n, v)| n == "x-hookstamp-source" && v != "evil");
            assert!(
                replied(&host) == vec![500] || (stamped && call == Call::RequestBody && !body),
                "{call:?} {path}: {:?}",
                host.replies
            );
            if !replied(&host).is_empty() {
                assert!(host
                    .log
                    .iter()
                    .any(|(l, m)| *l == Level::Error && m.contains("failed with status 2")));
            }
        }
    }
}

#[test]
fn a_failing_local_reply_is_logged() {
    let (mut vm, mut host) = boot(CONFIG);
    host.fail = Some(Call::SendReply);
    start(&mut vm, &mut host, 2, &post("/webhooks/nope", &[]), true);
    assert!(host
        .log
        .iter()
        .any(|(_, m)| m.contains("cannot send a local reply")));
}

#[test]
fn an_unconfigured_filter_answers_500() {
    let mut host = MockHost {
        config: b"{".to_vec(),
        ..MockHost::default()
    };
    let vm = Contexts::default();
    vm.on_context_create(ROOT, 0);
    assert!(!vm.on_configure(&mut host, ROOT));
    assert!(host
        .log
        .iter()
        .any(|(_, m)| m.starts_with("config: not valid JSON")));
    vm.on_context_create(2, ROOT);
    host.headers = vec![
        (":method".into(), b"GET".to_vec()),
        (":path".into(), b"/".to_vec()),
    ];
    assert_eq!(
        vm.on_request_headers(&mut host, 2, true),
        HeadersStatus::StopIteration
    );
    assert_eq!(replied(&host), vec![500]);
}

#[test]
fn a_refused_config_names_the_source_and_sink() {
    let mut host = MockHost {
        config:
            br#"{"sources":[{"id":"s1","sinks":[{"type":"sqs","ordering_key":{"json":"a"}}]}]}"#
                .to_vec(),
        ..MockHost::default()
    };
    let vm = Contexts::default();
    vm.on_context_create(ROOT, 0);
    assert!(!vm.on_configure(&mut host, ROOT));
    assert!(host.log.iter().any(|(l, m)| *l == Level::Error
        && m == "source 's1' sink 0 (sqs): ordering_key needs \"ordered\": true"));
}

#[test]
fn two_plugins_in_one_vm_keep_their_own_configs() {
    let (mut vm, mut host) = boot(CONFIG);
    host.config = br#"{"prefix": "/other", "sources": [{"id": "github", "dedupe": {"header": "x-other-id"}}]}"#.to_vec();
    vm.on_context_create(50, 0);
    assert!(vm.on_configure(&mut host, 50));
    vm.on_context_create(51, 50);
    host.headers = post(
        "/other/github",
        &[("x-other-id", "o-1"), ("x-github-delivery", "d-1")],
    )
    .iter()
    .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
    .collect();
    assert_eq!(
        vm.on_request_headers(&mut host, 51, true),
        HeadersStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("o-1")
    );
    host.headers.clear();
    start(
        &mut vm,
        &mut host,
        2,
        &post("/webhooks/github", &[("x-github-delivery", "d-1")]),
        true,
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("d-1")
    );
}

const VERIFY: &str = r#"{
  "max_json_bytes": 1000, "max_held_bytes": 6000, "routing": "tenant_path", "prefix": "/webhooks",
  "sources": [
    {"id": "gh", "dedupe": "github", "verify": {"scheme": "github", "secrets": {"acme": [{"value": "s-acme"}], "globex": [{"value": "s-globex"}]}}},
    {"id": "st", "dedupe": "stripe", "verify": {"scheme": "github", "secrets": [{"value": "k"}], "on_failure": "flag"},
     "sinks": [{"type": "sqs", "ordered": true, "ordering_key": {"json": "data.object.customer"}}]}
  ]}"#;

fn github_sig(secret: &str, body: &[u8]) -> String {
    use hmac::Mac;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    m.update(body);
    format!("sha256={}", hex::encode(m.finalize().into_bytes()))
}

#[test]
fn a_signature_is_computed_as_the_chunks_pass_without_holding_the_body() {
    let body = br#"{"zen":"Keep it logically awesome."}"#;
    let sig = github_sig("s-acme", body);
    let (mut vm, mut host) = boot(VERIFY);
    let h = post(
        "/webhooks/acme/gh",
        &[("x-github-delivery", "d-1"), ("x-hub-signature-256", &sig)],
    );
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, false),
        HeadersStatus::StopIteration
    );
    let before = vm.held_bytes();
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &body[..5], false),
        DataStatus::StopAndWatermark
    );
    // The filter keeps only the check's state, not the body; the five
    // bytes Envoy buffers while the filter holds the request are counted.
    assert_eq!(vm.held_bytes(), before + 5);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &body[5..], true),
        DataStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-verified").as_deref(),
        Some("true")
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("d-1")
    );
    assert_eq!(
        host.metric("hookstamp_signatures_verified_total.source=gh;"),
        1
    );
    // Another tenant's secret does not verify it; a tenant without secrets is unknown.
    let (mut vm, mut host) = boot(VERIFY);
    let h = post(
        "/webhooks/globex/gh",
        &[("x-github-delivery", "d-1"), ("x-hub-signature-256", &sig)],
    );
    start(&mut vm, &mut host, 2, &h, false);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, body, true),
        DataStatus::StopNoBuffer
    );
    assert_eq!(
        host.replies[0].1,
        reply::invalid_signature(hookstamp::verify::Reason::Mismatch)
    );
    assert_eq!(
        host.metric("hookstamp_signature_failures_total.source=gh;.reason=mismatch;"),
        1
    );
    assert!(
        host.stamps().is_empty(),
        "a forged request never reaches the queue"
    );
    let (mut vm, mut host) = boot(VERIFY);
    let h = post("/webhooks/initech/gh", &[("x-hub-signature-256", &sig)]);
    start(&mut vm, &mut host, 2, &h, false);
    assert_eq!(replied(&host), vec![404]);
}

#[test]
fn a_missing_signature_is_refused_at_the_headers() {
    let (mut vm, mut host) = boot(VERIFY);
    let h = post(
        "/webhooks/acme/gh",
        &[("x-github-delivery", "d-1"), ("content-length", "10")],
    );
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, false),
        HeadersStatus::StopIteration
    );
    assert_eq!(replied(&host), vec![401]);
    assert_eq!(
        vm.held_requests(),
        0,
        "nothing is held for a request already refused"
    );
    assert_eq!(
        host.metric("hookstamp_signature_failures_total.source=gh;.reason=missing;"),
        1
    );
}

#[test]
fn flag_mode_forwards_a_forgery_without_its_dedupe_key() {
    let body = br#"{"id":"evt_forged","data":{"object":{"customer":"cus_1"}}}"#;
    let (mut vm, mut host) = boot(VERIFY);
    let forged = github_sig("wrong", body);
    let h = post("/webhooks/acme/st", &[("x-hub-signature-256", &forged)]);
    start(&mut vm, &mut host, 2, &h, false);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, body, true),
        DataStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-verified").as_deref(),
        Some("false")
    );
    assert_eq!(stamp(&host, "x-hookstamp-dedupe-key"), None);
    assert_eq!(stamp(&host, "x-hookstamp-idempotency-key"), None);
    // Nor its lane: a forgery never enters a customer's lane.
    assert_eq!(stamp(&host, "x-hookstamp-lane-0-key"), None);
    assert_eq!(
        host.metric("hookstamp_lane_key_missing_total.source=st;.sink=0;.reason=unverified;"),
        1
    );
    // The genuine one claims its key and its lane.
    let (mut vm, mut host) = boot(VERIFY);
    let genuine = github_sig("k", body);
    let h = post("/webhooks/acme/st", &[("x-hub-signature-256", &genuine)]);
    start(&mut vm, &mut host, 2, &h, false);
    chunk(&mut vm, &mut host, 2, body, true);
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("evt_forged")
    );
}

#[test]
fn a_body_too_large_to_verify_is_413_or_flagged() {
    let (mut vm, mut host) = boot(VERIFY);
    let h = post(
        "/webhooks/acme/gh",
        &[
            ("x-hub-signature-256", "sha256=00"),
            ("content-length", "1001"),
        ],
    );
    start(&mut vm, &mut host, 2, &h, false);
    assert_eq!(host.replies[0].1, reply::TOO_LARGE_TO_VERIFY);
    assert_eq!(
        host.metric("hookstamp_signature_failures_total.source=gh;.reason=too_large;"),
        1
    );
    let (mut vm, mut host) = boot(VERIFY);
    start(
        &mut vm,
        &mut host,
        2,
        &post("/webhooks/acme/gh", &[("x-hub-signature-256", "sha256=00")]),
        false,
    );
    chunk(&mut vm, &mut host, 2, &[b' '; 600], false);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &[b' '; 600], false),
        DataStatus::StopNoBuffer
    );
    assert_eq!(replied(&host), vec![413]);
    let (mut vm, mut host) = boot(VERIFY);
    let h = post(
        "/webhooks/acme/st",
        &[
            ("x-hub-signature-256", "sha256=00"),
            ("content-length", "5000"),
        ],
    );
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, false),
        HeadersStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-verified").as_deref(),
        Some("false")
    );
}

#[test]
fn a_path_that_is_not_utf8_is_never_read_as_empty() {
    for (path, want) in [
        (&b"/webhooks/stripe?x=\xff"[..], None),
        (&b"/webhooks/stripe\xff"[..], Some(404)),
        (&b"/webhooks/\xff/../stripe"[..], Some(404)),
    ] {
        let (vm, mut host) = boot(CONFIG);
        vm.on_context_create(2, ROOT);
        host.headers = vec![
            (":method".into(), b"POST".to_vec()),
            (":path".into(), path.to_vec()),
        ];
        vm.on_request_headers(&mut host, 2, true);
        let status = host.replies.first().map(|(_, r)| r.status);
        assert_eq!(status, want, "{}", String::from_utf8_lossy(path));
        if want.is_none() {
            assert_eq!(
                stamp(&host, "x-hookstamp-source").as_deref(),
                Some("stripe")
            );
        }
    }
    let (vm, mut host) = boot(CONFIG);
    vm.on_context_create(2, ROOT);
    host.headers = vec![
        (":method".into(), b"PO\xffST".to_vec()),
        (":path".into(), b"/webhooks/stripe".to_vec()),
    ];
    vm.on_request_headers(&mut host, 2, true);
    assert_eq!(replied(&host), vec![405]);
}

#[test]
fn headers_alone_cannot_claim_the_budget_and_plugins_keep_their_own() {
    let (mut vm, mut host) = boot(
        r#"{"max_json_bytes": 100000, "max_held_bytes": 400000,
        "sources": [{"id": "s", "dedupe": "stripe"}]}"#,
    );
    // Declaring 100 000 bytes and sending none reserves nothing for the
    // body: a thousand of them hold only their own state.
    for ctx in 2..1002 {
        start(
            &mut vm,
            &mut host,
            ctx,
            &post("/webhooks/s", &[("content-length", "100000")]),
            false,
        );
    }
    assert!(host.replies.is_empty(), "{:?}", host.replies);
    assert_eq!(vm.held_requests(), 1000);
    assert!(vm.held_bytes() < 1000 * 512, "{}", vm.held_bytes());
    // Another plugin in the same VM has its budget to itself.
    host.config = br#"{"max_json_bytes": 1000, "max_held_bytes": 4000, "sources": [{"id": "s", "dedupe": "stripe"}]}"#.to_vec();
    vm.on_context_create(5000, 0);
    assert!(vm.on_configure(&mut host, 5000));
    vm.on_context_create(5001, 5000);
    host.headers = post("/webhooks/s", &[("content-length", "1000")])
        .iter()
        .map(|(n, v)| ((*n).to_owned(), v.as_bytes().to_vec()))
        .collect();
    assert_eq!(
        vm.on_request_headers(&mut host, 5001, false),
        HeadersStatus::StopIteration
    );
    assert!(host.replies.is_empty());
}

#[test]
fn a_struct_configuration_loads_as_its_json_does() {
    let v: serde_json::Value = serde_json::from_str(CONFIG).unwrap();
    let mut host = MockHost {
        config: hookstamp::config::structpb::encode(&v),
        ..MockHost::default()
    };
    let vm = Contexts::default();
    vm.on_context_create(ROOT, 0);
    assert!(vm.on_configure(&mut host, ROOT), "{:?}", host.log);
    host.config = vec![0x12, 0x03, b'a', b'b'];
    vm.on_context_create(50, 0);
    assert!(!vm.on_configure(&mut host, 50));
    assert!(
        host.log
            .iter()
            .any(|(_, m)| m.contains("neither JSON text")),
        "{:?}",
        host.log
    );
}

#[test]
fn missing_keys_are_counted_by_reason() {
    let (mut vm, mut host) = boot(CONFIG);
    for (ctx, body) in [
        (2, &br#"{"id":"e","data":{"object":{}}}"#[..]),
        (3, b"not json"),
        (4, br#"{"id":"e","data":{"object":{"customer":1.5}}}"#),
    ] {
        start(
            &mut vm,
            &mut host,
            ctx,
            &post("/webhooks/stripe", &[]),
            false,
        );
        chunk(&mut vm, &mut host, ctx, body, true);
    }
    let m = |sink: u16, r: &str| {
        host.metric(&format!(
            "hookstamp_lane_key_missing_total.source=stripe;.sink={sink};.reason={r};"
        ))
    };
    assert_eq!(
        (m(0, "absent"), m(0, "not_json"), m(0, "wrong_type")),
        (1, 1, 1)
    );
    assert_eq!(m(1, "absent"), 3);
    assert_eq!(
        host.metric("hookstamp_dedupe_key_missing_total.source=stripe;.reason=not_json;"),
        1
    );
}

const SLOW: &str = r#"{
  "max_json_bytes": 1000, "max_held_bytes": 8000, "max_hold_ms": 2000, "slow_body_ms": 500,
  "sources": [{"id": "stripe", "dedupe": "stripe",
               "sinks": [{"type": "sqs", "ordered": true, "ordering_key": {"json": "data.object.customer"}}]}]}"#;

/// Holds trickling uploads (a first chunk of `sent` bytes each) until the
/// budget refuses one; returns the contexts held.
fn fill(vm: &mut Contexts, host: &mut MockHost, from: u32, sent: usize) -> Vec<u32> {
    let mut held = Vec::new();
    for ctx in from.. {
        start(
            vm,
            host,
            ctx,
            &post("/webhooks/stripe", &[("content-length", "1000")]),
            false,
        );
        if host.replies.is_empty()
            && chunk(vm, host, ctx, &vec![b' '; sent], false) == DataStatus::StopAndWatermark
        {
            held.push(ctx);
            continue;
        }
        assert_eq!(
            replied(host),
            vec![503],
            "the budget refuses the one that does not fit"
        );
        host.replies.clear();
        break;
    }
    held
}

/// Sends one delivery whole (headers, then its body in one chunk), as a
/// provider does.
fn deliver(vm: &mut Contexts, host: &mut MockHost, ctx: u32) -> DataStatus {
    deliver_body(vm, host, ctx, EVENT)
}

fn deliver_body(vm: &mut Contexts, host: &mut MockHost, ctx: u32, body: &[u8]) -> DataStatus {
    let len = body.len().to_string();
    let h = post("/webhooks/stripe", &[("content-length", &len)]);
    if start(vm, host, ctx, &h, false) != HeadersStatus::StopIteration
        || !host.replies.iter().all(|(c, _)| *c != ctx)
    {
        return DataStatus::StopNoBuffer;
    }
    host.context = ctx;
    chunk(vm, host, ctx, body, true)
}

#[test]
fn ten_thousand_deadlines_in_one_tick_are_answered_a_bounded_number_at_a_time() {
    let (mut vm, mut host) = boot(
        r#"{"max_json_bytes": 1000, "max_held_bytes": 64000000, "max_hold_ms": 2000,
        "sources": [{"id": "stripe", "dedupe": "stripe"}]}"#,
    );
    for ctx in 2..10_002 {
        start(
            &mut vm,
            &mut host,
            ctx,
            &post("/webhooks/stripe", &[("content-length", "100")]),
            false,
        );
    }
    assert!(host.replies.is_empty());
    assert_eq!(vm.held_requests(), 10_000);
    host.now_ms += 2001;
    let mut ticks = 0;
    while vm.held_requests() > 0 {
        let before = host.replies.len();
        vm.on_tick(&mut host, ROOT);
        let sent = host.replies.len() - before;
        assert!(
            sent <= hookstamp::budget::MAX_REPLIES_PER_CALL,
            "{sent} replies in one tick"
        );
        assert!(sent > 0, "a tick with late bodies answers some");
        assert_eq!(host.context, ROOT);
        ticks += 1;
    }
    assert_eq!(
        ticks,
        10_000usize.div_ceil(hookstamp::budget::MAX_REPLIES_PER_CALL)
    );
    assert_eq!(host.replies.len(), 10_000);
    assert!(host.replies.iter().all(|(_, r)| *r == reply::BODY_TIMEOUT));
    // The earliest deadline first, each request answered once.
    let order: Vec<u32> = host.replies.iter().map(|(c, _)| *c).collect();
    assert_eq!(order, (2..10_002).collect::<Vec<u32>>());
    assert_eq!(vm.held_bytes(), 0);
    assert_eq!(
        host.metric("hookstamp_body_timeout_total.source=stripe;"),
        10_000
    );
    // A tick with nothing late answers nothing and makes no host call but
    // the clock's.
    host.context = 77;
    vm.on_tick(&mut host, ROOT);
    assert_eq!((host.replies.len(), host.context), (10_000, 77));
}

#[test]
fn a_budget_full_of_slow_bodies_makes_room_for_a_delivery() {
    let (mut vm, mut host) = boot(SLOW);
    // Large trickles first, then smaller ones into what is left.
    let large = fill(&mut vm, &mut host, 10, 900);
    assert!(large.len() >= 2, "{large:?}");
    fill(&mut vm, &mut host, 100, 60);
    fill(&mut vm, &mut host, 200, 1);
    // While they are young, the budget is full of work: a delivery is
    // 503, and the tick answers none of them.
    assert_eq!(deliver(&mut vm, &mut host, 500), DataStatus::StopNoBuffer);
    assert_eq!(replied(&host), vec![503]);
    host.replies.clear();
    vm.on_tick(&mut host, ROOT);
    assert!(host.replies.is_empty());
    // Past slow_body_ms they are slow: the tick answers the largest 408
    // until the budget is down to three quarters, and a delivery is
    // stamped on its first try.
    host.now_ms += 500;
    vm.on_tick(&mut host, ROOT);
    let evicted: Vec<u32> = host.replies.iter().map(|(c, _)| *c).collect();
    assert!(!evicted.is_empty() && evicted.len() <= 2, "{evicted:?}");
    assert!(
        evicted.iter().all(|c| large.contains(c)),
        "the largest first"
    );
    assert!(host.replies.iter().all(|(_, r)| *r == reply::SLOW_BODY));
    assert!(vm.held_bytes() <= hookstamp::budget::trim_to(8000));
    assert_eq!(
        host.metric("hookstamp_body_too_slow_total.source=stripe;"),
        evicted.len() as i64
    );
    host.replies.clear();
    host.added_for.clear();
    assert_eq!(deliver(&mut vm, &mut host, 501), DataStatus::Continue);
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("evt_1")
    );
    assert!(
        host.added_for.iter().all(|c| *c == 501),
        "stamps go to the delivery: {:?}",
        host.added_for
    );
    assert!(
        host.replies.is_empty(),
        "a request callback answers only its own request"
    );
    // An evicted request's later chunks go no further: it was answered.
    assert_eq!(
        chunk(&mut vm, &mut host, evicted[0], b"x", false),
        DataStatus::StopNoBuffer
    );
}

#[test]
fn the_tick_answers_a_bounded_number_of_slow_bodies() {
    // Many slow requests of one byte each: the tick answers at most
    // MAX_REPLIES_PER_CALL of them a tick, until three quarters is reached.
    let (mut vm, mut host) = boot(&SLOW.replace(
        "\"max_json_bytes\": 1000, \"max_held_bytes\": 8000",
        "\"max_json_bytes\": 4000, \"max_held_bytes\": 64000",
    ));
    let small = fill(&mut vm, &mut host, 10, 1);
    assert!(small.len() > 100, "{}", small.len());
    host.now_ms += 600;
    let mut ticks = 0;
    while vm.held_bytes() > hookstamp::budget::trim_to(64000) {
        let before = host.replies.len();
        vm.on_tick(&mut host, ROOT);
        assert!(host.replies.len() - before <= hookstamp::budget::MAX_REPLIES_PER_CALL);
        ticks += 1;
        assert!(ticks < 100);
    }
    assert!(ticks > 1);
    let before = host.replies.len();
    vm.on_tick(&mut host, ROOT);
    assert_eq!(
        host.replies.len(),
        before,
        "below three quarters, slow bodies are left alone"
    );
}

#[test]
fn envoys_buffered_bytes_of_a_verified_body_are_counted() {
    // A verified source with header keys keeps no copy of the body, but
    // Envoy buffers every byte while the filter holds the request.
    let (mut vm, mut host) = boot(VERIFY);
    let h = post(
        "/webhooks/acme/gh",
        &[
            ("x-github-delivery", "d-1"),
            ("x-hub-signature-256", "sha256=00"),
        ],
    );
    start(&mut vm, &mut host, 2, &h, false);
    let before = vm.held_bytes();
    for _ in 0..10 {
        assert_eq!(
            chunk(&mut vm, &mut host, 2, &[b'a'; 100], false),
            DataStatus::StopAndWatermark
        );
    }
    assert_eq!(vm.held_bytes(), before + 1000);
}

#[test]
fn a_body_hash_key_is_computed_as_the_chunks_pass_without_copying_the_body() {
    use sha2::Digest;
    let (mut vm, mut host) = boot(
        r#"{"max_json_bytes": 1000, "max_held_bytes": 4000,
        "sources": [{"id": "h", "dedupe": {"sha256": "body"}}]}"#,
    );
    start(&mut vm, &mut host, 2, &post("/webhooks/h", &[]), false);
    let before = vm.held_bytes();
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"abc", false),
        DataStatus::StopAndWatermark
    );
    // Envoy's three bytes only: the filter keeps no copy.
    assert_eq!(vm.held_bytes(), before + 3);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"def", true),
        DataStatus::Continue
    );
    let want = hex::encode(sha2::Sha256::digest(b"abcdef"));
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some(want.as_str())
    );
}

/// A stream at one byte a second passes the rate rule: these tests are of
/// the other limits (`STREAMED` below tests the rate).
const STREAM: &str = r#"{"max_json_bytes": 100, "max_hold_ms": 1000, "min_stream_rate": 1,
  "sources": [{"id": "gh", "dedupe": "github",
    "verify": {"scheme": "github", "secrets": [{"value": "s"}], "mode": "stream"}}]}"#;

/// What the upstream receives of a streamed body: each chunk as the filter
/// let it through (its replacement where it made one), in order.
struct Upstream {
    got: Vec<u8>,
}

impl Upstream {
    fn pass(
        &mut self,
        vm: &mut Contexts,
        host: &mut MockHost,
        bytes: &[u8],
        eos: bool,
    ) -> DataStatus {
        let before = host.replaced.len();
        let status = chunk(vm, host, 2, bytes, eos);
        if status == DataStatus::Continue {
            match host.replaced.get(before) {
                Some((_, size, data)) => {
                    assert_eq!(*size, bytes.len());
                    self.got.extend_from_slice(data);
                }
                None => self.got.extend_from_slice(bytes),
            }
        }
        status
    }
}

/// Streamed verification: the headers go at once, stamped `stream`; the
/// body passes as it comes but for its last byte (with a declared length,
/// the byte that completes the upstream request), which only a valid
/// signature lets go; a forgery is answered 401 and the upstream request
/// never completes. Bodies of any size: max_json_bytes does not apply.
#[test]
fn a_streamed_signature_holds_back_the_last_byte_until_it_verifies() {
    let body = vec![b'x'; 1000];
    let sig = github_sig("s", &body);
    for (split, final_empty) in [(1000, true), (1000, false), (7, true), (333, false)] {
        let (mut vm, mut host) = boot(STREAM);
        let h = post(
            "/webhooks/gh",
            &[
                ("x-github-delivery", "d-1"),
                ("x-hub-signature-256", &sig),
                ("content-length", "1000"),
            ],
        );
        assert_eq!(
            start(&mut vm, &mut host, 2, &h, false),
            HeadersStatus::Continue
        );
        assert_eq!(
            stamp(&host, "x-hookstamp-verified").as_deref(),
            Some("stream")
        );
        assert_eq!(
            stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
            Some("d-1")
        );
        let mut up = Upstream { got: Vec::new() };
        let parts: Vec<&[u8]> = body.chunks(split).collect();
        for (i, part) in parts.iter().enumerate() {
            let last = i + 1 == parts.len() && !final_empty;
            assert_eq!(
                up.pass(&mut vm, &mut host, part, last),
                DataStatus::Continue
            );
            if !last {
                // Never the whole body before the verdict.
                assert!(up.got.len() < body.len(), "split {split}");
            }
        }
        if final_empty {
            assert_eq!(up.pass(&mut vm, &mut host, b"", true), DataStatus::Continue);
        }
        assert_eq!(up.got, body, "split {split}, final empty {final_empty}");
        assert!(host.replies.is_empty());
        assert_eq!(vm.held_requests(), 0);
        assert_eq!(
            host.metric("hookstamp_signatures_verified_total.source=gh;"),
            1
        );
    }
    // A forgery: the upstream has all but the last byte, then the reset.
    let (mut vm, mut host) = boot(STREAM);
    let forged = github_sig("not-s", &body);
    let h = post(
        "/webhooks/gh",
        &[
            ("x-github-delivery", "d-2"),
            ("x-hub-signature-256", &forged),
            ("content-length", "1000"),
        ],
    );
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, false),
        HeadersStatus::Continue
    );
    let mut up = Upstream { got: Vec::new() };
    assert_eq!(
        up.pass(&mut vm, &mut host, &body, false),
        DataStatus::Continue
    );
    assert_eq!(up.got.len(), 999);
    assert_eq!(
        up.pass(&mut vm, &mut host, b"", true),
        DataStatus::StopNoBuffer
    );
    assert_eq!(replied(&host), vec![401]);
    assert_eq!(up.got.len(), 999, "the upstream request never completes");
    assert_eq!(
        host.metric("hookstamp_signature_failures_total.source=gh;.reason=mismatch;"),
        1
    );
    // Without a declared length (chunked, HTTP/2) the end of the stream is
    // the completion: every byte passes, the last callback is the verdict.
    let (mut vm, mut host) = boot(STREAM);
    let h = post(
        "/webhooks/gh",
        &[
            ("x-github-delivery", "d-3"),
            ("x-hub-signature-256", &forged),
        ],
    );
    start(&mut vm, &mut host, 2, &h, false);
    let mut up = Upstream { got: Vec::new() };
    assert_eq!(
        up.pass(&mut vm, &mut host, &body[..500], false),
        DataStatus::Continue
    );
    assert_eq!(up.got.len(), 500);
    assert!(
        host.replaced.is_empty(),
        "nothing to hold back, nothing replaced"
    );
    assert_eq!(
        up.pass(&mut vm, &mut host, &body[500..], true),
        DataStatus::StopNoBuffer
    );
    assert_eq!(replied(&host), vec![401]);
}

#[test]
fn a_streamed_request_is_charged_its_state_times_out_idle_and_refuses_trailers() {
    let body = vec![b'y'; 50];
    let sig = github_sig("s", &body);
    let h_len = [
        ("x-github-delivery", "d-1"),
        ("x-hub-signature-256", sig.as_str()),
        ("content-length", "50"),
    ];
    let (mut vm, mut host) = boot(STREAM);
    start(&mut vm, &mut host, 2, &post("/webhooks/gh", &h_len), false);
    assert_eq!(vm.held_requests(), 1);
    assert!(
        vm.held_bytes() > 0 && vm.held_bytes() < 1024,
        "{}",
        vm.held_bytes()
    );
    // Each chunk moves the deadline: an idle timeout, not a total one.
    host.now_ms += 900;
    chunk(&mut vm, &mut host, 2, &body[..10], false);
    host.now_ms += 900;
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &body[10..20], false),
        DataStatus::Continue
    );
    // Idle past max_hold_ms: the tick answers 408 (and Envoy resets the
    // upstream request).
    host.now_ms += 1100;
    vm.on_tick(&mut host, ROOT);
    assert_eq!(replied(&host), vec![408]);
    assert_eq!(vm.held_requests(), 0);
    // Trailers after a held-back byte: refused, never completed short.
    let (mut vm, mut host) = boot(STREAM);
    start(&mut vm, &mut host, 2, &post("/webhooks/gh", &h_len), false);
    chunk(&mut vm, &mut host, 2, &body, false);
    host.trailers = vec![("x-t".into(), b"1".to_vec())];
    assert_eq!(
        vm.on_request_trailers(&mut host, 2),
        HeadersStatus::StopIteration
    );
    assert_eq!(replied(&host), vec![400]);
    // A full budget: 503 before anything goes upstream.
    let (mut vm, mut host) = boot(
        r#"{"max_json_bytes": 100, "max_held_bytes": 400,
        "sources": [{"id": "gh", "dedupe": "github",
        "verify": {"scheme": "github", "secrets": [{"value": "s"}], "mode": "stream"}}]}"#,
    );
    start(&mut vm, &mut host, 2, &post("/webhooks/gh", &h_len), false);
    assert_eq!(replied(&host), vec![503]);
    assert!(host.stamps().is_empty());
}

/// Twilio signs a form's fields sorted: the filter keeps the body whole
/// for the check, and that copy is charged like a body key's, never
/// uncounted.
#[test]
fn a_twilio_form_body_is_kept_for_its_check_and_charged() {
    use base64::Engine;
    use hmac::Mac;
    let (mut vm, mut host) = boot(
        r#"{"max_json_bytes": 1000, "max_held_bytes": 8000,
        "sources": [{"id": "tw", "dedupe": {"form": "CallSid"}, "verify": {"scheme": "twilio",
          "public_url": "https://hooks.example.com", "secrets": [{"value": "12345"}]}}]}"#,
    );
    let body = b"To=%2B18005551212&Digits=1234&CallSid=CA1";
    // The URL as called, then each field's name and value, sorted by name.
    let signed = b"https://hooks.example.com/webhooks/tw?a=1CallSidCA1Digits1234To+18005551212";
    let mut m = hmac::Hmac::<sha1::Sha1>::new_from_slice(b"12345").unwrap();
    m.update(signed);
    let sig = base64::engine::general_purpose::STANDARD.encode(m.finalize().into_bytes());
    let h = post(
        "/webhooks/tw?a=1",
        &[
            ("x-twilio-signature", &sig),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
    );
    assert_eq!(
        start(&mut vm, &mut host, 2, &h, false),
        HeadersStatus::StopIteration
    );
    let before = vm.held_bytes();
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &body[..10], false),
        DataStatus::StopAndWatermark
    );
    // Envoy's ten bytes and the filter's copy of them.
    assert!(
        vm.held_bytes() >= before + 20,
        "{} {}",
        before,
        vm.held_bytes()
    );
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &body[10..], true),
        DataStatus::Continue
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-verified").as_deref(),
        Some("true")
    );
    assert_eq!(
        stamp(&host, "x-hookstamp-dedupe-key").as_deref(),
        Some("CA1")
    );
    assert_eq!((vm.held_requests(), vm.held_bytes()), (0, 0));
}

/// A streamed request never stands in the way of trimming slow held ones,
/// is answered 408 at max_stream_ms however steadily it trickles, and its
/// events rule drops it only once its signature verified.
#[test]
fn streams_keep_their_own_order_a_total_limit_and_drop_only_when_verified() {
    let cfg = r#"{"max_json_bytes": 1000, "max_held_bytes": 6000, "max_hold_ms": 1000,
      "slow_body_ms": 100, "max_stream_ms": 2500,
      "sources": [
        {"id": "gh", "dedupe": "github", "events": {"drop": ["ping"]},
         "verify": {"scheme": "github", "secrets": [{"value": "s"}], "mode": "stream"}},
        {"id": "st", "dedupe": "stripe"}]}"#;
    let (mut vm, mut host) = boot(cfg);
    let body = vec![b'z'; 40];
    let sig = github_sig("s", &body);
    let gh = post(
        "/webhooks/gh",
        &[
            ("x-github-delivery", "d-1"),
            ("x-github-event", "push"),
            ("x-hub-signature-256", &sig),
            ("content-length", "40"),
        ],
    );
    start(&mut vm, &mut host, 2, &gh, false);
    // The stream's deadline comes before theirs: it would stand first in
    // one order.
    host.now_ms += 500;
    // Held uploads filling the budget past three quarters, slowly.
    for ctx in 3..10 {
        start(
            &mut vm,
            &mut host,
            ctx,
            &post("/webhooks/st", &[("content-length", "900")]),
            false,
        );
        chunk(&mut vm, &mut host, ctx, &[b'x'; 500], false);
    }
    host.now_ms += 200;
    vm.on_tick(&mut host, ROOT);
    assert!(
        replied(&host).contains(&408),
        "the slow held uploads are trimmed, the stream in the pool or not: {:?}",
        replied(&host)
    );
    // The stream trickles a byte every 900 ms, above a min_stream_rate of
    // one byte a second (after a second's grace): answered at max_stream_ms.
    let (mut vm, mut host) = boot(&cfg.replace(
        r#""slow_body_ms": 100,"#,
        r#""slow_body_ms": 1000, "min_stream_rate": 1,"#,
    ));
    start(&mut vm, &mut host, 2, &gh, false);
    for i in 0..3 {
        host.now_ms += 900;
        host.context = 2;
        chunk(&mut vm, &mut host, 2, &body[i..=i], false);
        vm.on_tick(&mut host, ROOT);
    }
    assert_eq!(
        replied(&host),
        vec![408],
        "idle never, but past 2500 ms in all"
    );
    // A dropped type: a forgery is refused 401, a verified one dropped.
    for (signature, want) in [(github_sig("not-s", &body), 401), (sig.clone(), 200)] {
        let (mut vm, mut host) = boot(cfg);
        let h = post(
            "/webhooks/gh",
            &[
                ("x-github-delivery", "d-2"),
                ("x-github-event", "ping"),
                ("x-hub-signature-256", &signature),
                ("content-length", "40"),
            ],
        );
        assert_eq!(
            start(&mut vm, &mut host, 2, &h, false),
            HeadersStatus::Continue
        );
        assert_eq!(
            chunk(&mut vm, &mut host, 2, &body, true),
            DataStatus::StopNoBuffer
        );
        assert_eq!(replied(&host), vec![want]);
    }
}

/// A request whose id is a live root's (a host whose ids wrapped) ends
/// without taking the plugin with it.
#[test]
fn a_request_with_a_roots_id_leaves_the_plugin_configured() {
    let (mut vm, mut host) = boot(CONFIG);
    start(
        &mut vm,
        &mut host,
        ROOT,
        &post("/webhooks/github", &[("x-github-delivery", "d")]),
        true,
    );
    vm.on_delete(&mut host, ROOT);
    start(
        &mut vm,
        &mut host,
        7,
        &post("/webhooks/github", &[("x-github-delivery", "d")]),
        true,
    );
    assert!(!replied(&host).contains(&500), "{:?}", replied(&host));
    assert_eq!(stamp(&host, "x-hookstamp-dedupe-key").as_deref(), Some("d"));
}

const STREAMED: &str = r#"{"max_json_bytes": 1000, "max_held_bytes": 60000, "max_hold_ms": 1000,
  "slow_body_ms": 500, "max_stream_ms": 60000, "max_streams": 8, "min_stream_rate": 100,
  "max_stream_bytes": 1000,
  "sources": [
    {"id": "gh", "dedupe": "github",
     "verify": {"scheme": "github", "secrets": [{"value": "s"}], "mode": "stream"}},
    {"id": "hdr", "dedupe": {"header": "x-id"}}]}"#;

/// A streamed GitHub request's headers, with a signature over `body`.
fn streamed<'a>(sig: &'a str, len: &'a str) -> Vec<(&'a str, &'a str)> {
    post(
        "/webhooks/gh",
        &[
            ("x-github-delivery", "d-1"),
            ("x-hub-signature-256", sig),
            ("content-length", len),
        ],
    )
}

/// A trickling forgery is answered 408 once its average rate falls below
/// min_stream_rate after slow_body_ms, on the tick or at its next chunk;
/// a delivery that comes at once verifies.
#[test]
fn a_stream_below_its_minimum_rate_is_answered_408() {
    let (mut vm, mut host) = boot(STREAMED);
    let sig = github_sig("s", b"{}");
    start(&mut vm, &mut host, 2, &streamed(&sig, "1000"), false);
    // 10 bytes earn 100 ms beyond the 500 ms grace: due at 600 ms.
    chunk(&mut vm, &mut host, 2, &[b'x'; 10], false);
    host.now_ms += 590;
    vm.on_tick(&mut host, ROOT);
    assert!(replied(&host).is_empty());
    host.now_ms += 20;
    vm.on_tick(&mut host, ROOT);
    assert_eq!(replied(&host), vec![408]);
    assert_eq!(host.replies[0].1, reply::SLOW_BODY);
    assert_eq!(vm.held_requests(), 0);
    // Its next chunk goes no further.
    host.context = 2;
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"x", false),
        DataStatus::StopNoBuffer
    );
    // Found at its own chunk when it comes before the tick.
    let (mut vm, mut host) = boot(STREAMED);
    start(&mut vm, &mut host, 2, &streamed(&sig, "1000"), false);
    host.now_ms += 700;
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"x", false),
        DataStatus::StopNoBuffer
    );
    assert_eq!(host.replies[0].1, reply::SLOW_BODY);
    // A delivery at once.
    let (mut vm, mut host) = boot(STREAMED);
    start(&mut vm, &mut host, 2, &streamed(&sig, "2"), false);
    host.now_ms += 5;
    assert_eq!(
        chunk(&mut vm, &mut host, 2, b"{}", true),
        DataStatus::Continue
    );
    assert!(replied(&host).is_empty());
    assert_eq!(
        stamp(&host, "x-hookstamp-verified").as_deref(),
        Some("stream")
    );
}

/// At most max_streams streams a worker: the next is answered 503 before
/// anything goes upstream, header sources are never refused for them, and
/// past three quarters of the bound the tick trims, down to three
/// quarters, the slowest first: the trickles (below min_stream_rate after a
/// tenth of slow_body_ms), and those past slow_body_ms slower than eight
/// times min_stream_rate; that makes room for a delivery.
#[test]
fn streams_are_bounded_and_the_slowest_trimmed_near_the_bound() {
    let sig = github_sig("s", b"{}");
    // Trickles: 20 to 90 bytes, below 100 B/s from 50 ms on (2 and 3 by
    // 350 ms). Slow: 200 to 900 bytes, below 800 B/s from 500 ms on (2 and
    // 3 by 875 ms, before any is idle at 1 000 ms).
    for (bytes_each, wait, trimmed_at) in [(10, 100, 400), (100, 700, 900)] {
        let (mut vm, mut host) = boot(STREAMED);
        for ctx in 2..10 {
            start(&mut vm, &mut host, ctx, &streamed(&sig, "1000"), false);
            // Each a little faster than the one before.
            let n = bytes_each * ctx as usize;
            chunk(&mut vm, &mut host, ctx, &vec![b'x'; n], false);
        }
        assert!(replied(&host).is_empty());
        assert_eq!(vm.held_requests(), 8);
        start(&mut vm, &mut host, 10, &streamed(&sig, "1000"), false);
        assert_eq!(replied(&host), vec![503]);
        assert_eq!(host.replies[0].1, reply::STREAMS_FULL);
        let hdr = post("/webhooks/hdr", &[("x-id", "e-1")]);
        assert_eq!(
            start(&mut vm, &mut host, 11, &hdr, true),
            HeadersStatus::Continue
        );
        host.now_ms += wait;
        vm.on_tick(&mut host, ROOT);
        assert_eq!(replied(&host), vec![503], "nothing due at {wait} ms");
        host.now_ms += trimmed_at - wait;
        vm.on_tick(&mut host, ROOT);
        // Six of eight is three quarters: the two slowest go.
        let trimmed: Vec<u32> = host.replies[1..].iter().map(|(c, _)| *c).collect();
        assert_eq!(trimmed, vec![2, 3], "at {trimmed_at} ms");
        assert_eq!(host.replies[1].1, reply::SLOW_BODY);
        assert_eq!(vm.held_requests(), 6);
        // A delivery now gets a slot, and verifies.
        start(&mut vm, &mut host, 12, &streamed(&sig, "2"), false);
        assert_eq!(
            chunk(&mut vm, &mut host, 12, b"{}", true),
            DataStatus::Continue
        );
        assert_eq!(host.replies.len(), 3);
    }
}

/// A streamed body longer than max_stream_bytes: 413, declared (before
/// anything goes upstream) or as it passes (its upstream request reset).
#[test]
fn a_stream_past_max_stream_bytes_is_413() {
    let (mut vm, mut host) = boot(STREAMED);
    let sig = github_sig("s", b"{}");
    start(&mut vm, &mut host, 2, &streamed(&sig, "1001"), false);
    assert_eq!(replied(&host), vec![413]);
    assert!(host.stamps().is_empty());
    let (mut vm, mut host) = boot(STREAMED);
    let chunked = post(
        "/webhooks/gh",
        &[("x-github-delivery", "d-1"), ("x-hub-signature-256", &sig)],
    );
    start(&mut vm, &mut host, 2, &chunked, false);
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &[b'x'; 600], false),
        DataStatus::Continue
    );
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &[b'x'; 600], false),
        DataStatus::StopNoBuffer
    );
    assert_eq!(replied(&host), vec![413]);
    assert_eq!(
        host.metric("hookstamp_signature_failures_total.source=gh;.reason=too_large;"),
        1
    );
}

#[test]
fn a_sealed_request_carries_the_decisions_seal_and_none_of_the_clients() {
    const SEALED: &str = r#"{"seal": {"keys": [{"value": "queue-key"}], "key_id": "q-1"},
      "sources": [{"id": "github", "dedupe": "github"}, {"id": "stripe", "dedupe": "stripe"}]}"#;
    let cfg = hookstamp::config::load(SEALED).unwrap().config;
    let client = [
        ("x-request-id", "req-1"),
        ("signature-input", "hookstamp=(\"@method\");created=1"),
        ("Signature", "hookstamp=:AAAA:"),
        ("content_digest", "sha-256=:AAAA:"),
        ("Signature_Input", "evil"),
    ];
    for (path, body) in [("/webhooks/github", &b""[..]), ("/webhooks/stripe", EVENT)] {
        let (mut vm, mut host) = boot(SEALED);
        let h = post(path, &client);
        start(&mut vm, &mut host, 2, &h, body.is_empty());
        if !body.is_empty() {
            chunk(&mut vm, &mut host, 2, body, true);
        }
        let added: Vec<(String, String)> = host
            .headers
            .iter()
            .filter(|(n, _)| n.starts_with("x-hookstamp-") || hookstamp::seal::client_field(n) != 0)
            .map(|(n, v)| (n.clone(), String::from_utf8_lossy(v).into_owned()))
            .collect();
        // The CLI's decision for the same request at the same second.
        let d = hookstamp::decide::decide(&cfg, "POST", path, &h, body, 1000);
        let hookstamp::decide::Outcome::Forward { stamped, .. } = d.outcome else {
            panic!("{path}: {:?}", d.outcome)
        };
        let want: Vec<(String, String)> = stamped
            .headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.to_string()))
            .collect();
        assert_eq!(added, want, "{path}");
        let names: Vec<&str> = want.iter().map(|(n, _)| n.as_str()).collect();
        let seal = &names[names.len() - if body.is_empty() { 2 } else { 3 }..];
        assert_eq!(
            seal,
            &["content-digest", "signature-input", "signature"][3 - seal.len()..],
            "{path}"
        );
        let input = &want[names.len() - 2].1;
        assert!(
            input.starts_with("hookstamp=(\"@method\" \"@path\" \"@query\" \"x-hookstamp-source\"")
        );
        assert!(
            input.contains(";created=1000;expires=1300;nonce=\""),
            "{input}"
        );
        assert!(input.ends_with(";alg=\"hmac-sha256\";keyid=\"q-1\";tag=\"hookstamp\""));
    }
}

/// A config of `max_streams` for the trim's cases: min_stream_rate 100 B/s,
/// slow_body_ms 500, streams of up to 100 000 bytes.
fn trim_config(max_streams: u32) -> String {
    STREAMED
        .replace(
            r#""max_streams": 8"#,
            &format!(r#""max_streams": {max_streams}"#),
        )
        .replace(
            r#""max_stream_bytes": 1000"#,
            r#""max_stream_bytes": 100000"#,
        )
}

/// The trim takes the slowest, never a fast delivery: a valid stream at 40
/// times min_stream_rate keeps its slot while forgeries that sent a little
/// ahead and then trickle are trimmed; young forgeries do not push out an
/// old delivery either.
#[test]
fn the_trim_never_takes_a_fast_delivery() {
    let body = vec![b'x'; 4000];
    let sig = github_sig("s", &body);
    let forged = github_sig("not-s", &body);
    let (mut vm, mut host) = boot(&trim_config(8));
    start(&mut vm, &mut host, 2, &streamed(&sig, "4000"), false);
    chunk(&mut vm, &mut host, 2, &body[..200], false);
    for ctx in 3..9 {
        start(&mut vm, &mut host, ctx, &streamed(&forged, "100000"), false);
        chunk(&mut vm, &mut host, ctx, &[b'x'; 120], false);
    }
    // The delivery: 200 bytes every 50 ms (4 000 B/s); the forgeries one
    // byte each at 595 ms, then nothing.
    for i in 1..18 {
        host.now_ms += 50;
        host.context = 2;
        chunk(&mut vm, &mut host, 2, &body[i * 200..(i + 1) * 200], false);
        if i == 12 {
            host.now_ms -= 5;
            for ctx in 3..9 {
                chunk(&mut vm, &mut host, ctx, b"x", false);
            }
            host.now_ms += 5;
        }
        vm.on_tick(&mut host, ROOT);
    }
    let answered: Vec<u32> = host.replies.iter().map(|(c, _)| *c).collect();
    assert!(
        !answered.contains(&2),
        "the delivery was trimmed: {answered:?}"
    );
    assert_eq!(answered.len(), 1, "one over three quarters: {answered:?}");
    host.context = 2;
    assert_eq!(
        chunk(&mut vm, &mut host, 2, &body[3600..], true),
        DataStatus::Continue
    );
    // Young forgeries and an old delivery.
    let (mut vm, mut host) = boot(&trim_config(8));
    start(&mut vm, &mut host, 2, &streamed(&sig, "4000"), false);
    for i in 0..12 {
        chunk(&mut vm, &mut host, 2, &body[i * 200..(i + 1) * 200], false);
        host.now_ms += 50;
    }
    for ctx in 3..9 {
        start(&mut vm, &mut host, ctx, &streamed(&forged, "100000"), false);
        chunk(&mut vm, &mut host, ctx, &[b'x'; 200], false);
    }
    host.now_ms += 5;
    vm.on_tick(&mut host, ROOT);
    assert!(host.replies.is_empty(), "{:?}", host.replies);
}

/// A bound below four keeps three quarters rounded up: a lone stream is
/// never over it.
#[test]
fn a_lone_stream_is_never_trimmed_whatever_the_bound() {
    let body = vec![b'x'; 2400];
    let sig = github_sig("s", &body);
    for max_streams in 1..4 {
        let (mut vm, mut host) = boot(&trim_config(max_streams));
        start(&mut vm, &mut host, 2, &streamed(&sig, "2400"), false);
        for i in 0..12 {
            host.context = 2;
            let eos = i == 11;
            let st = chunk(&mut vm, &mut host, 2, &body[i * 200..(i + 1) * 200], eos);
            assert_eq!(
                st,
                DataStatus::Continue,
                "max_streams {max_streams}, chunk {i}"
            );
            host.now_ms += 50;
            vm.on_tick(&mut host, ROOT);
        }
        assert!(
            host.replies.is_empty(),
            "max_streams {max_streams}: {:?}",
            host.replies
        );
    }
}
