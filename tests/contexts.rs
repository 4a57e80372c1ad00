//! proxy-wasm's contexts (`hookstamp::filter::contexts`), natively: what
//! each callback answers for a whole request; a callback
//! that arrives inside another (answered fail-closed, logged); a delete
//! that arrives while the VM is busy (done before the next callback); the
//! clock a request of a ticking instance reads (its last tick's, within
//! its bound); the counts a host keeps until the tick (handed over a flush
//! period after the last time, and when a root goes).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/mock.rs"]
mod mock;

use hookstamp::filter::contexts::{Contexts, CALLBACKS_PER_TICK};
use hookstamp::host::{DataStatus, HeadersStatus, Level};
use mock::{Call, MockHost};
use std::cell::RefCell;
use std::rc::Rc;

const ROOT: u32 = 1;
const CONFIG: &str = r#"{"max_json_bytes": 1000, "max_held_bytes": 8000, "sources": [
  {"id": "github", "dedupe": "github"},
  {"id": "stripe", "dedupe": {"json": "id"}}]}"#;

fn boot() -> (Contexts, MockHost) {
    boot_on(CONFIG, false)
}

/// A VM configured with `config`, on a host that keeps its counts until a
/// tick where `counts_on_tick` (the .wasm's does).
fn boot_on(config: &str, counts_on_tick: bool) -> (Contexts, MockHost) {
    let d = Contexts::default();
    let mut host = MockHost {
        config: config.as_bytes().to_vec(),
        now_ms: 1_000_000,
        counts_on_tick,
        ..MockHost::default()
    };
    d.on_context_create(ROOT, 0);
    assert!(d.on_configure(&mut host, ROOT), "{:?}", host.log);
    (d, host)
}

fn request(host: &mut MockHost, ctx: u32, path: &str) {
    host.context = ctx;
    host.headers = vec![
        (":method".into(), b"POST".to_vec()),
        (":path".into(), path.as_bytes().to_vec()),
        ("x-github-delivery".into(), b"d-1".to_vec()),
    ];
}

#[test]
fn each_callback_answers_for_a_whole_request() {
    let (d, mut host) = boot();
    // A header source: stamped at the headers.
    d.on_context_create(2, ROOT);
    request(&mut host, 2, "/webhooks/github");
    assert_eq!(
        d.on_request_headers(&mut host, 2, true),
        HeadersStatus::Continue
    );
    assert_eq!(host.header("x-hookstamp-dedupe-key"), vec![b"d-1"]);
    d.on_delete(&mut host, 2);
    // A body source: held, its chunks kept under flow control, stamped at
    // the end of the body.
    d.on_context_create(3, ROOT);
    request(&mut host, 3, "/webhooks/stripe");
    assert_eq!(
        d.on_request_headers(&mut host, 3, false),
        HeadersStatus::StopIteration
    );
    host.chunk = br#"{"id":"#.to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 3, 6, false),
        DataStatus::StopAndWatermark
    );
    assert_eq!(d.holding().map(|(n, _)| n), Some(1));
    host.chunk = br#""evt_9"}"#.to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 3, 8, true),
        DataStatus::Continue
    );
    assert_eq!(host.header("x-hookstamp-dedupe-key"), vec![b"evt_9"]);
    assert_eq!(d.on_request_trailers(&mut host, 3), HeadersStatus::Continue);
    d.on_delete(&mut host, 3);
    assert_eq!(d.holding(), Some((0, 0)));
    // Unrouted: passed; a configuration that is refused: 0.
    d.on_context_create(4, ROOT);
    request(&mut host, 4, "/elsewhere");
    assert_eq!(
        d.on_request_headers(&mut host, 4, true),
        HeadersStatus::Continue
    );
    let mut bad = MockHost {
        config: br#"{"sources": [{"id": "x", "dedupe": "nope"}]}"#.to_vec(),
        ..MockHost::default()
    };
    d.on_context_create(50, 0);
    assert!(!d.on_configure(&mut bad, 50));
}

#[test]
fn a_request_on_a_plugin_that_is_not_configured_is_answered_500() {
    let d = Contexts::default();
    let mut host = MockHost::default();
    d.on_context_create(7, 0);
    d.on_context_create(8, 7);
    request(&mut host, 8, "/webhooks/github");
    assert_eq!(
        d.on_request_headers(&mut host, 8, true),
        HeadersStatus::StopIteration
    );
    assert_eq!(
        host.replies
            .iter()
            .map(|(_, r)| r.status)
            .collect::<Vec<_>>(),
        vec![500]
    );
    assert!(host.stamps().is_empty());
}

#[test]
fn a_callback_inside_another_fails_closed_and_a_delete_inside_one_waits() {
    let (d, mut host) = boot();
    let d = Rc::new(d);
    d.on_context_create(2, ROOT);
    d.on_context_create(3, ROOT);
    // Request 3 is held for its body.
    request(&mut host, 3, "/webhooks/stripe");
    assert_eq!(
        d.on_request_headers(&mut host, 3, false),
        HeadersStatus::StopIteration
    );
    assert_eq!(d.holding().map(|(n, _)| n), Some(1));
    // While request 2's headers are read, the host calls back into the
    // module: a headers callback for another request, and a delete of 3.
    let inner = Rc::new(RefCell::new(Vec::new()));
    let (d2, seen) = (d.clone(), inner.clone());
    let mut once = true;
    host.on_call = Some(Box::new(move |call| {
        if call == Call::RequestHeaders && std::mem::take(&mut once) {
            let mut other = MockHost::default();
            let status = d2.on_request_headers(&mut other, 9, true);
            d2.on_delete(&mut other, 3);
            seen.borrow_mut().push((status, other.log));
        }
    }));
    request(&mut host, 2, "/webhooks/github");
    assert_eq!(
        d.on_request_headers(&mut host, 2, true),
        HeadersStatus::Continue
    );
    host.on_call = None;
    let inner = inner.borrow();
    let (status, log) = &inner[0];
    assert_eq!(
        *status,
        HeadersStatus::StopIteration,
        "fail closed, never passed"
    );
    assert!(log
        .iter()
        .any(|(l, m)| *l == Level::Critical && m.contains("inside another")));
    // The request refused inside another never passes: its body stops.
    host.chunk = b"{}".to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 9, 2, true),
        DataStatus::StopNoBuffer
    );
    assert_eq!(
        d.on_request_trailers(&mut host, 9),
        HeadersStatus::StopIteration
    );
    // The delete waited: 3 is still held until the next callback runs.
    assert_eq!(d.holding().map(|(n, _)| n), Some(1));
    d.on_tick(&mut host, ROOT);
    assert_eq!(d.holding(), Some((0, 0)));
}

/// A request's headers in, on a new context `ctx` (`request`'s, to `path`).
fn arrive(d: &Contexts, host: &mut MockHost, ctx: u32, path: &str, end: bool) -> HeadersStatus {
    d.on_context_create(ctx, ROOT);
    request(host, ctx, path);
    d.on_request_headers(host, ctx, end)
}

/// A held request of a body source, its headers in (to the stripe source).
fn held(d: &Contexts, host: &mut MockHost, ctx: u32) {
    let status = arrive(d, host, ctx, "/webhooks/stripe", false);
    assert_eq!(status, HeadersStatus::StopIteration);
}

#[test]
fn a_ticking_instances_requests_read_the_last_ticks_clock() {
    let (d, mut host) = boot();
    // Before any tick: the proxy's clock.
    held(&d, &mut host, 2);
    assert_eq!(host.clock_reads, 1, "the deadline, from the proxy's clock");
    d.on_tick(&mut host, ROOT);
    assert_eq!(host.clock_reads, 2, "a tick reads the proxy's clock once");
    // After it: headers and body read none; the request is stamped.
    held(&d, &mut host, 3);
    host.chunk = br#"{"id":"evt_1"}"#.to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 3, 14, true),
        DataStatus::Continue
    );
    assert_eq!(host.clock_reads, 2);
    assert_eq!(host.header("x-hookstamp-dedupe-key"), vec![b"evt_1"]);
    // A body that comes past its deadline before the next tick is read at
    // the tick's clock: the deadline holds within a tick, as the tick's
    // own answers do (`budget::TICK_MS`).
    held(&d, &mut host, 4);
    host.now_ms += 10_001;
    host.chunk = br#"{"id":"evt_2"}"#.to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 4, 14, true),
        DataStatus::Continue,
        "not late by the tick's clock"
    );
    // The next tick reads the proxy's clock: a request held before it is
    // late by it, and answered 408.
    held(&d, &mut host, 5);
    d.on_tick(&mut host, ROOT);
    assert!(
        host.replies.iter().any(|(c, r)| *c == 5 && r.status == 408),
        "{:?}",
        host.replies
    );
    assert_eq!(host.clock_reads, 3, "one read a tick, none a callback");
    // A body that ends at its trailers: they read the tick's clock too.
    d.on_tick(&mut host, ROOT);
    held(&d, &mut host, 6);
    host.chunk = br#"{"id":"evt_3"}"#.to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 6, 14, false),
        DataStatus::StopAndWatermark
    );
    host.now_ms += 10_001;
    assert_eq!(d.on_request_trailers(&mut host, 6), HeadersStatus::Continue);
    assert_eq!(host.clock_reads, 4);
}

#[test]
fn a_clock_the_ticks_stopped_serves_a_bounded_number_of_callbacks() {
    let (d, mut host) = boot();
    let reads = host.clock_reads;
    d.on_tick(&mut host, ROOT);
    assert_eq!(
        host.clock_reads, reads,
        "a tick that holds nothing reads no clock"
    );
    // The ticks stop (a tick that never comes): the first request's
    // headers read the proxy's clock once, and every request's headers and
    // body read that stale clock, up to the bound.
    let per_request = 2;
    let n = CALLBACKS_PER_TICK / per_request;
    for ctx in 10..10 + n {
        held(&d, &mut host, ctx);
        host.chunk = br#"{"id":"evt_1"}"#.to_vec();
        assert_eq!(
            d.on_request_body(&mut host, ctx, 14, true),
            DataStatus::Continue
        );
        d.on_delete(&mut host, ctx);
    }
    assert_eq!(host.clock_reads, reads + 1, "one read served them all");
    // Past the bound, the proxy's clock: a request whose body comes after
    // its deadline is answered 408 at its body, though no tick came.
    let late = 10 + n;
    held(&d, &mut host, late);
    assert_eq!(host.clock_reads, reads + 2);
    host.now_ms += 10_001;
    host.chunk = br#"{"id":"evt_1"}"#.to_vec();
    assert_eq!(
        d.on_request_body(&mut host, late, 14, true),
        DataStatus::StopNoBuffer
    );
    assert!(host
        .replies
        .iter()
        .any(|(c, r)| *c == late && r.status == 408));
    // The next tick begins the count anew: its first callback reads the
    // proxy's clock, and the others it serves read that.
    d.on_tick(&mut host, ROOT);
    let reads = host.clock_reads;
    held(&d, &mut host, late + 1);
    assert_eq!(host.clock_reads, reads + 1, "read once after the tick");
    held(&d, &mut host, late + 2);
    assert_eq!(host.clock_reads, reads + 1, "and kept until the next");
}

#[test]
fn an_instance_that_does_not_tick_reads_the_proxys_clock() {
    // Header sources only, sealed: the seal's `created` is the clock's.
    const SEALED: &str = r#"{"seal": {"keys": [{"value": "queue-key"}], "key_id": "q-1"},
      "sources": [{"id": "github", "dedupe": "github"}]}"#;
    let (d, mut host) = boot();
    let other = 20;
    d.on_context_create(other, 0);
    let mut config = MockHost {
        config: SEALED.as_bytes().to_vec(),
        ..MockHost::default()
    };
    assert!(d.on_configure(&mut config, other), "{:?}", config.log);
    assert_eq!(config.tick_ms, None, "no tick");
    // The first root's tick, then an hour with no tick at all.
    d.on_tick(&mut host, ROOT);
    host.now_ms += 3_600_000;
    let reads = host.clock_reads;
    d.on_context_create(21, other);
    request(&mut host, 21, "/webhooks/github");
    assert_eq!(
        d.on_request_headers(&mut host, 21, true),
        HeadersStatus::Continue
    );
    assert_eq!(host.clock_reads, reads + 1);
    let input = host.header("signature-input");
    let created = format!("created={}", host.now_ms / 1000);
    assert!(
        String::from_utf8_lossy(input[0]).contains(&created),
        "{:?}",
        String::from_utf8_lossy(input[0])
    );
}

const SIGNED: &str = r#"{"sources": [{"id": "stripe", "dedupe": "stripe",
  "verify": {"scheme": "stripe", "secrets": [{"value": "whsec_k"}]}}]}"#;
const EVENT: &[u8] = br#"{"id":"evt_1"}"#;

/// A Stripe delivery of EVENT signed at `t_s`, to root `root`'s stripe
/// source, whole: its answer, or `Continue` where it was stamped.
fn signed(d: &Contexts, host: &mut MockHost, root: u32, ctx: u32, t_s: u64) -> DataStatus {
    use hmac::Mac as _;
    let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"whsec_k").unwrap();
    m.update(format!("{t_s}.").as_bytes());
    m.update(EVENT);
    let sig = format!("t={t_s},v1={}", hex::encode(m.finalize().into_bytes()));
    d.on_context_create(ctx, root);
    host.context = ctx;
    host.headers = vec![
        (":method".into(), b"POST".to_vec()),
        (":path".into(), b"/webhooks/stripe".to_vec()),
        ("stripe-signature".into(), sig.into_bytes()),
    ];
    assert_eq!(
        d.on_request_headers(host, ctx, false),
        HeadersStatus::StopIteration
    );
    host.chunk = EVENT.to_vec();
    d.on_request_body(host, ctx, EVENT.len(), true)
}

fn configure(d: &Contexts, root: u32, config: &str) {
    d.on_context_create(root, 0);
    let mut h = MockHost {
        config: config.as_bytes().to_vec(),
        ..MockHost::default()
    };
    assert!(d.on_configure(&mut h, root), "{:?}", h.log);
}

#[test]
fn a_clock_kept_from_ticks_that_stopped_serves_no_later_configuration() {
    // Root 1 ticks; a push replaces it with a configuration that does not
    // (root 2) and root 1 goes: the VM's ticks stop. An hour later a push
    // brings a ticking one back (root 3): before its first tick, its
    // requests read the proxy's clock, not root 1's last tick.
    let d = Contexts::default();
    let mut host = MockHost {
        now_ms: 1_700_000_000_000,
        ..MockHost::default()
    };
    configure(&d, 1, SIGNED);
    d.on_tick(&mut host, 1);
    let then = host.now_ms / 1000;
    configure(
        &d,
        2,
        r#"{"sources": [{"id": "github", "dedupe": "github"}]}"#,
    );
    d.on_delete(&mut host, 1);
    host.now_ms += 3_600_000;
    configure(&d, 3, SIGNED);
    let now = host.now_ms / 1000;
    assert_eq!(signed(&d, &mut host, 3, 10, now), DataStatus::Continue);
    assert_eq!(host.header("x-hookstamp-verified"), vec![b"true"]);
    // A delivery captured an hour ago, replayed: refused.
    assert_eq!(signed(&d, &mut host, 3, 11, then), DataStatus::StopNoBuffer);
    assert!(host
        .replies
        .iter()
        .any(|(c, r)| *c == 11 && r.status == 401));
    // A configuration pushed to a VM that ticks drops the clock too, until
    // the next tick.
    d.on_tick(&mut host, 3);
    let reads = host.clock_reads;
    configure(&d, 4, SIGNED);
    signed(&d, &mut host, 3, 12, now);
    assert!(host.clock_reads > reads);
}

#[test]
fn a_deleted_roots_live_request_reads_the_proxys_clock() {
    // The ABI lets a root go while a request of it lives (Envoy keeps the
    // root until its streams end): with no tick to come, the request's body
    // is late by the proxy's clock at its first chunk past the deadline.
    let (d, mut host) = boot();
    d.on_tick(&mut host, ROOT);
    held(&d, &mut host, 2);
    d.on_delete(&mut host, ROOT);
    host.now_ms += 10_001;
    host.chunk = b"{".to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 2, 1, false),
        DataStatus::StopNoBuffer
    );
    assert!(host.replies.iter().any(|(c, r)| *c == 2 && r.status == 408));
}

#[test]
fn a_root_that_ticks_for_its_counts_alone_keeps_no_clock_for_the_streams() {
    // Its ticks come every 50 ms, ten times a deadline's tick: a clock kept
    // from one could be that late. After the body source's root goes, a
    // header-only root's tick leaves its live request on the proxy's clock.
    let (d, mut host) = boot_on(CONFIG, true);
    d.on_tick(&mut host, ROOT);
    held(&d, &mut host, 2);
    d.on_delete(&mut host, ROOT);
    configure(&d, 7, GITHUB);
    d.on_tick(&mut host, 7);
    host.chunk = b"{".to_vec();
    d.on_request_body(&mut host, 2, 1, false);
    assert!(host.replies.is_empty(), "{:?}", host.replies);
    host.now_ms += 10_001;
    d.on_request_body(&mut host, 2, 1, false);
    assert!(host.replies.iter().any(|(c, r)| *c == 2 && r.status == 408));
}

#[test]
fn a_tick_without_a_clock_leaves_the_streams_the_proxys() {
    // The proxy's clock failed at the tick (read as 0, for the request it
    // holds): the streams read the proxy's own, and are late by it.
    let (d, mut host) = boot();
    held(&d, &mut host, 2);
    let now = host.now_ms;
    host.now_ms = 0;
    let reads = host.clock_reads;
    d.on_tick(&mut host, ROOT);
    assert_eq!(host.clock_reads, reads + 1, "the tick read the clock");
    host.now_ms = now;
    let reads = host.clock_reads;
    host.now_ms += 10_001;
    host.chunk = b"{".to_vec();
    assert_eq!(
        d.on_request_body(&mut host, 2, 1, false),
        DataStatus::StopNoBuffer
    );
    assert_eq!(host.clock_reads, reads + 1);
}

/// A GitHub request stamped at its headers, on context `ctx`, and over.
fn stamped(d: &Contexts, host: &mut MockHost, ctx: u32) {
    let status = arrive(d, host, ctx, "/webhooks/github", true);
    assert_eq!(status, HeadersStatus::Continue);
    d.on_delete(host, ctx);
}

const GITHUB: &str = r#"{"sources": [{"id": "github", "dedupe": "github"}]}"#;
const STAMPED: &str = "hookstamp_requests_stamped_total.source=github;";

#[test]
fn kept_counts_reach_the_proxy_at_the_first_tick_a_flush_period_after_the_last() {
    // Header sources only: the plugin ticks for its counts alone, at the
    // flush period, and each tick hands them over.
    let (d, mut host) = boot_on(GITHUB, true);
    assert_eq!(host.tick_ms, Some(hookstamp::budget::FLUSH_MS));
    stamped(&d, &mut host, 2);
    stamped(&d, &mut host, 3);
    assert_eq!(host.metric(STAMPED), 0, "kept until the tick");
    d.on_tick(&mut host, ROOT);
    assert_eq!(host.metric(STAMPED), 2);
    d.on_tick(&mut host, ROOT);
    assert_eq!(host.metric(STAMPED), 2, "each increment handed over once");
    // A body source ticks faster, for its deadlines: the counts go at the
    // tick that completes a flush period, not at each.
    let (d, mut host) = boot_on(CONFIG, true);
    let tick = hookstamp::budget::TICK_MS;
    assert_eq!(host.tick_ms, Some(tick));
    stamped(&d, &mut host, 2);
    for _ in 1..hookstamp::budget::FLUSH_MS / tick {
        d.on_tick(&mut host, ROOT);
    }
    assert_eq!(host.metric(STAMPED), 0);
    d.on_tick(&mut host, ROOT);
    assert_eq!(host.metric(STAMPED), 1);
    // A tick that answers a held request hands the counts over at once:
    // its answers' with the rest.
    stamped(&d, &mut host, 3);
    held(&d, &mut host, 4);
    d.on_tick(&mut host, ROOT);
    host.now_ms += 60_000;
    d.on_tick(&mut host, ROOT);
    assert_eq!(host.replies.len(), 1, "{:?}", host.replies);
    assert_eq!(
        host.metric("hookstamp_body_timeout_total.source=stripe;"),
        1
    );
    assert_eq!(host.metric(STAMPED), 2);
}

#[test]
fn kept_counts_reach_the_proxy_when_a_root_goes() {
    let (d, mut host) = boot_on(CONFIG, true);
    stamped(&d, &mut host, 2);
    d.on_tick(&mut host, ROOT);
    assert_eq!(host.metric(STAMPED), 0);
    // Its VM may go with the root, before another tick.
    d.on_delete(&mut host, ROOT);
    assert_eq!(host.metric(STAMPED), 1);
    // A host that does not keep them hands each over at once, and a
    // header-only plugin on it sets no tick.
    let (d, mut host) = boot_on(GITHUB, false);
    assert_eq!(host.tick_ms, None);
    stamped(&d, &mut host, 2);
    assert_eq!(host.metric(STAMPED), 1);
}
