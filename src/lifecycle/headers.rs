//! The headers callback: stamp names stripped, the route decided, then a
//! header-only source stamped at once, or the request held for its body
//! (or streamed: stamped now, its signature checked as the body passes).

use super::finish::{self, Kept, Stamping};
use super::held::{Check, Held, Sealing};
use super::{send, Failure, Holds, Plugin};
use crate::decide::{self, Body, Stream};
use crate::host::{Header, HeadersStatus, StreamHost};
use crate::metrics::bump;
use crate::pairs;
use crate::reply::{self, Reply};
use crate::route::{self, Route, Target};
use crate::strip::{self, strip};
use crate::verify::{self, OnFailure};
use std::borrow::Cow;
use std::sync::Arc;

/// The headers callback; an error is a host call that failed (answered
/// 500 by the caller).
pub(super) fn on_headers<K: Copy>(
    host: &mut impl StreamHost,
    plugin: &Arc<Plugin>,
    holds: &mut Holds<K>,
    serial: u64,
    key: K,
    end_of_stream: bool,
) -> Result<HeadersStatus, Failure> {
    let mut buf = Vec::new();
    let mut headers = host.request_headers(&mut buf)?;
    let at = At {
        serial,
        key,
        end_of_stream,
    };
    let status = on_header_list(host, plugin, holds, at, &mut headers);
    // Its list handed back: a host may keep the allocation for the next.
    host.headers_done(headers);
    status
}

/// A request at its headers: its number, its stream, whether a body comes.
#[derive(Clone, Copy)]
struct At<K> {
    serial: u64,
    key: K,
    end_of_stream: bool,
}

/// The headers callback on the request's header list.
fn on_header_list<K: Copy>(
    host: &mut impl StreamHost,
    plugin: &Arc<Plugin>,
    holds: &mut Holds<K>,
    at: At<K>,
    headers: &mut Vec<Header<'_>>,
) -> Result<HeadersStatus, Failure> {
    let At {
        serial,
        key,
        end_of_stream,
    } = at;
    // Strip first, on every request: a client never chooses its stamps.
    let spoofed = strip(host, headers, strip::Map::Headers)?;
    let headers: &[Header<'_>] = headers;
    let m = &plugin.metrics;
    // Bytes that are not UTF-8 stay visible (as U+FFFD): a path is never
    // read as empty, and so passed, for holding a byte such as 0xFF.
    let (method, path) = method_and_path(headers);
    let route = route::route(&plugin.config, &method, &path);
    let Route::Source(target) = route else {
        bump(host, m.spoofed_unrouted, spoofed);
        return Ok(answer_unrouted(host, plugin, &route));
    };
    // A sealed request's nonce reads its id; the client's own seal fields
    // give way to the filter's.
    let sealed = plugin.config.seal.is_some();
    let request = Arrived {
        headers,
        method: &method,
        path: &path,
        request_id: if sealed {
            crate::pairs::first_header(headers, decide::REQUEST_ID).unwrap_or_default()
        } else {
            &[]
        },
        seal_fields: if sealed {
            strip::seal_fields_sent(headers)
        } else {
            0
        },
        spoofed,
        end_of_stream,
    };
    let w = match start(host, plugin, &target, &request, key) {
        Started::Stamp(status) => return Ok(status),
        Started::Hold(w) => w,
    };
    Ok(hold_or_finish(host, holds, serial, w, &request))
}

/// What the route answers for a request that is not a source's: passed,
/// or the filter's own answer, counted.
fn answer_unrouted(
    host: &mut impl StreamHost,
    plugin: &Plugin,
    route: &Route<'_>,
) -> HeadersStatus {
    let Some(r) = route.answer() else {
        return HeadersStatus::Continue;
    };
    let m = &plugin.metrics;
    let counter = match route {
        Route::MethodNotAllowed => m.method_not_allowed,
        Route::Handshake(t, _) => m.source(t.index).and_then(|m| m.handshakes),
        _ => m.unknown_source,
    };
    bump(host, counter, 1);
    send(host, &r)
}

/// A routed request's headers, as the callback read them.
struct Arrived<'a, 'h> {
    headers: &'a [Header<'h>],
    method: &'a str,
    path: &'a str,
    request_id: &'a [u8],
    seal_fields: u8,
    spoofed: usize,
    end_of_stream: bool,
}

enum Started<K> {
    /// Stamped (or answered) at its headers: nothing is held.
    Stamp(HeadersStatus),
    /// To hold for its body (or to stream).
    Hold(Box<Held<K>>),
}

/// Takes a routed request's header keys and starts its signature check:
/// stamped now where nothing needs the body, else what to hold.
fn start<K: Copy>(
    host: &mut impl StreamHost,
    plugin: &Arc<Plugin>,
    target: &Target<'_>,
    r: &Arrived<'_, '_>,
    key: K,
) -> Started<K> {
    let src = target.source;
    let keys = decide::header_keys(src, r.headers);
    // The clock only where a body is waited for (a deadline) or a
    // signature checked: a header-only source makes no such host call.
    let now = if src.needs_body() || src.streams() {
        host.now_ms()
    } else {
        0
    };
    let check = match &src.verify {
        None => Check::Off,
        Some(v) => {
            // A tenant the source has no secrets for is never routed to it
            // (per-tenant secrets are its tenant list); as in `decide`, no
            // secret verifies.
            let secrets = v.secrets_for(target.tenant).unwrap_or_default();
            let header = |n: &str| crate::pairs::first_header(r.headers, n);
            let request = verify::Request {
                method: r.method,
                path: r.path,
            };
            match v.start(secrets, header, request, now / 1000) {
                Ok(p) => Check::Running(p),
                Err(f) => Check::Failed(f.reason),
            }
        }
    };
    if matches!(check, Check::Off) && !src.needs_body() {
        // Stamped now, from the headers as they are: nothing is held, so
        // nothing is copied into a `Held`.
        let now = Stamping {
            plugin,
            source: target.index,
            tenant: target.tenant,
            header_keys: &keys,
            stream: Stream::Held,
            method: r.method,
            path: r.path,
            request_id: r.request_id,
            seal_fields: r.seal_fields,
            spoofed: r.spoofed,
        };
        return Started::Stamp(finish::stamp_and_forward(
            host,
            &now,
            Body::Bytes(&[]),
            None,
            None,
        ));
    }
    Started::Hold(held(plugin, target, r, key, &keys, check, now))
}

/// What a request held for its body keeps: only what its stamps need.
fn held<K>(
    plugin: &Arc<Plugin>,
    target: &Target<'_>,
    r: &Arrived<'_, '_>,
    key: K,
    keys: &[Option<&[u8]>],
    check: Check,
    now: u64,
) -> Box<Held<K>> {
    let src = target.source;
    let sealed = plugin.config.seal.is_some();
    Box::new(Held {
        plugin: plugin.clone(),
        key,
        declared: None,
        source: target.index,
        // Twilio's form fields are signed sorted: its check needs the whole
        // body, kept and charged as body keys' is.
        keeps_body: src.keeps_body() || matches!(&check, Check::Running(p) if p.keeps_body()),
        path_tenant: (target.tenant != src.tenant).then(|| target.tenant.to_owned()),
        header_keys: keys.iter().map(|k| k.map(<[u8]>::to_vec)).collect(),
        check,
        sealing: sealed.then(|| {
            Box::new(Sealing {
                method: r.method.to_owned(),
                path: r.path.to_owned(),
                request_id: r.request_id.to_vec(),
                fields: r.seal_fields,
            })
        }),
        digest: ((sealed || src.hashes_body) && src.needs_body()).then(Box::default),
        spoofed: r.spoofed,
        body: Vec::new(),
        deadline_ms: now.saturating_add(plugin.config.max_hold_ms),
        started_ms: now,
        seen_body: false,
        seen_bytes: 0,
        charged: 0,
        // A request with no body to stream is verified whole, here.
        streaming: src.streams() && !r.end_of_stream,
        drops: false,
        tail: None,
    })
}

/// A request that needs its body: finished now where it has none (or its
/// signature refused it already), streamed, or held within the budget.
fn hold_or_finish<K>(
    host: &mut impl StreamHost,
    holds: &mut Holds<K>,
    serial: u64,
    mut w: Box<Held<K>>,
    r: &Arrived<'_, '_>,
) -> HeadersStatus {
    let plugin = w.plugin.clone();
    let cfg = &plugin.config;
    let needs_body = w.source().is_some_and(|s| s.needs_body());
    let refused_now = matches!(
        (
            &w.check,
            w.source()
                .and_then(|s| s.verify.as_ref())
                .map(|v| v.on_failure)
        ),
        (Check::Failed(_), Some(OnFailure::Reject))
    );
    if !(needs_body || w.streaming) || r.end_of_stream || refused_now {
        return finish::finish(host, *w, Kept::Whole);
    }
    let length = text(r.headers, "content-length");
    w.declared = length.parse::<usize>().ok();
    if w.streaming {
        // A length that does not parse still holds the last byte back: an
        // upstream that reads one could be completed by it.
        if w.declared.is_none() && !length.is_empty() {
            w.declared = Some(0);
        }
        return stream(host, holds, serial, w);
    }
    if w.declared.is_some_and(|n| n > cfg.max_json_bytes) {
        // Never wait for a body that will not be decoded or verified.
        return finish::finish(host, *w, Kept::OverLimit);
    }
    // Headers alone are charged the request's own state, nothing for the
    // length they declare: bytes are charged as they arrive.
    if !holds.fits(w.overhead(), cfg.max_held_bytes) {
        return busy(host, &w);
    }
    holds.hold(serial, w);
    HeadersStatus::StopIteration
}

/// A streamed request at its headers: stamped and let go at once, its
/// signature check (and a held-back byte, with a declared length) kept
/// until its body ends; charged to its plugin's budget like a held one.
fn stream<K>(
    host: &mut impl StreamHost,
    holds: &mut Holds<K>,
    serial: u64,
    mut w: Box<Held<K>>,
) -> HeadersStatus {
    let cfg = &w.plugin.config;
    if w.declared.is_some_and(|n| n as u64 > cfg.max_stream_bytes) {
        // Refused before anything goes upstream.
        return finish::stream_over_limit(host, &w);
    }
    // Each stream holds an upstream request open: at most max_streams a
    // worker, so that other sources keep their share of the upstream.
    if holds.streams() >= cfg.max_streams {
        return refuse_busy(host, &w, &reply::STREAMS_FULL);
    }
    if !holds.fits(w.overhead(), cfg.max_held_bytes) {
        return busy(host, &w);
    }
    w.deadline_ms = w.stream_deadline(w.started_ms);
    let status = finish::stream_start(host, &mut w);
    if status == HeadersStatus::Continue {
        holds.hold(serial, w);
    }
    status
}

/// 503: the budget is full.
pub(super) fn busy<K>(host: &mut impl StreamHost, w: &Held<K>) -> HeadersStatus {
    refuse_busy(host, w, &reply::BUSY)
}

/// A 503 (`r`: the budget full, or the streams), counted as busy.
fn refuse_busy<K>(host: &mut impl StreamHost, w: &Held<K>, r: &Reply) -> HeadersStatus {
    let m = w.plugin.metrics.source(w.source).map(|m| m.busy);
    bump(host, m.flatten(), 1);
    send(host, r)
}

/// The request's `:method` and `:path` (each the first of its name), in
/// one pass: Envoy hands the pseudo-headers first, so it ends there.
fn method_and_path<'h>(headers: &[Header<'h>]) -> (Cow<'h, str>, Cow<'h, str>) {
    let (mut method, mut path) = (None, None);
    for &(n, v) in headers {
        if method.is_none() && pairs::same(n, b":method") {
            method = Some(v);
        } else if path.is_none() && pairs::same(n, b":path") {
            path = Some(v);
        }
        if method.is_some() && path.is_some() {
            break;
        }
    }
    (
        lossy(method.unwrap_or_default()),
        lossy(path.unwrap_or_default()),
    )
}

fn lossy(value: &[u8]) -> Cow<'_, str> {
    // Nearly always text: checked once, borrowed; the lossy form otherwise.
    match pairs::ascii(value) {
        Some(s) => Cow::Borrowed(s),
        None => String::from_utf8_lossy(value),
    }
}

fn text<'h>(headers: &[Header<'h>], name: &str) -> &'h str {
    value(headers, name).and_then(pairs::text).unwrap_or("")
}

/// The value of the header named exactly `name` (a pseudo-header, or one
/// the proxy hands over lowercase), the first where it repeats.
fn value<'h>(headers: &[Header<'h>], name: &str) -> Option<&'h [u8]> {
    let (_, v) = headers
        .iter()
        .find(|(n, _)| pairs::same(n, name.as_bytes()))?;
    Some(v)
}
