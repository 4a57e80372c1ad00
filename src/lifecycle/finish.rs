//! The end of a held request: its signature's verdict, then its stamps
//! (or the answer that refuses it, a handshake's or a drop's), the metrics
//! counted and why it lacks a key recorded; and the trailers, where a held
//! body can end.

use super::held::{Check, Held};
use super::tick::body_timeout;
use super::{answer_internal, send, Failure, Plugin, WHY_PROPERTY};
use crate::decide::{self, Body, Verdict};
use crate::host::{HeadersStatus, StreamHost};
use crate::metrics::{bump, SourceMetrics};
use crate::reply::{self, Reply};
use crate::route::Target;
use crate::strip::{self, strip};
use crate::verify::Reason;

/// The trailers callback: stamp names stripped from every request's
/// trailers; a held body (`w`, released for it) ends here.
pub(super) fn on_trailers<K>(
    host: &mut impl StreamHost,
    plugin: &Plugin,
    w: Option<Box<Held<K>>>,
) -> HeadersStatus {
    let mut buf = Vec::new();
    let stripped = host
        .request_trailers(&mut buf)
        .and_then(|mut trailers| strip(host, &mut trailers, strip::Map::Trailers));
    match stripped {
        Ok(n) => bump(host, plugin.metrics.spoofed_trailers, n),
        Err(e) => return answer_internal(host, Some(plugin), &e.to_string()),
    }
    match w {
        None => HeadersStatus::Continue,
        Some(w) if host.now_ms() > w.deadline_ms => body_timeout(host, &w),
        Some(mut w) if w.streaming => match stream_verdict(host, &mut w) {
            // The held-back byte cannot follow the trailers.
            Ok(Some(_)) => send(host, &reply::STREAM_TRAILERS),
            Ok(_) => HeadersStatus::Continue,
            Err(r) => send(host, &r),
        },
        Some(w) => finish(host, *w, Kept::Whole),
    }
}

/// What became of a request's body.
pub(super) enum Kept {
    /// All of it passed (and is in `Held::body` when JSON keys need it);
    /// empty when the request had none.
    Whole,
    /// It was over max_json_bytes: never decoded or verified.
    OverLimit,
}

/// Stamps a request, or answers it when its signature refuses it; the
/// metrics counted.
pub(super) fn finish<K>(host: &mut impl StreamHost, mut w: Held<K>, kept: Kept) -> HeadersStatus {
    let check = std::mem::replace(&mut w.check, Check::Off);
    let digest = w.digest.take();
    let plugin = &w.plugin;
    let Some(src) = w.source() else {
        return answer_internal(host, Some(plugin), &Failure::NoSource.to_string());
    };
    let kept_whole = matches!(kept, Kept::Whole);
    let body = match kept {
        Kept::Whole => Body::Bytes(&w.body),
        Kept::OverLimit => Body::OverLimit,
    };
    let result = match (check, body) {
        (Check::Off, _) => None,
        (_, Body::OverLimit) => Some(Err(Reason::OverLimit)),
        (Check::Failed(r), _) => Some(Err(r)),
        (Check::Running(p), _) => Some(p.finish(&w.body).map_err(|f| f.reason)),
    };
    let m = plugin.metrics.source(w.source);
    let unverified = result.and_then(Result::err);
    let verified = match (result, &src.verify) {
        (Some(r), Some(v)) => {
            count_signature(host, m, r);
            match decide::verdict(v.on_failure, r) {
                Verdict::Refuse(reply) => return send(host, &reply),
                Verdict::Stamp(ok) => Some(ok),
            }
        }
        _ => None,
    };
    let target = Target {
        index: w.source,
        source: src,
        tenant: &w.tenant,
    };
    if let Some(r) = decide::post_handshake(&target, body, verified) {
        bump(host, m.and_then(|m| m.handshakes), 1);
        return send(host, &r);
    }
    // The whole body's hash where the filter held all of it: a key
    // (`sha256`) and the seal's.
    let body_hash: Option<[u8; 32]> = match (kept_whole, digest) {
        (true, Some(h)) => Some(sha2::Digest::finalize(*h).into()),
        _ => None,
    };
    forward(host, &w, body, body_hash, verified, unverified)
}

/// Whether a verified streamed request's events rule drops it (its type
/// comes from its headers: a streamed source reads nothing else).
fn dropped_at_verdict<K>(w: &Held<K>) -> bool {
    let Some(src) = w.source() else {
        return false;
    };
    let (Some(et), Some(_)) = (&src.event_type, &src.events) else {
        return false;
    };
    let keys: Vec<Option<&[u8]>> = w.header_keys.iter().map(|k| k.as_deref()).collect();
    let offered = decide::offered(src, &keys, Body::Bytes(&[]), None);
    decide::event_type(et, &offered.values()).is_some_and(|t| decide::drops(src, &t))
}

/// A streamed request's verdict at the end of its body: its held-back
/// bytes to let go, or the answer that refuses it (and so resets its
/// upstream request). Counted as any signature is.
pub(super) fn stream_verdict<K>(
    host: &mut impl StreamHost,
    w: &mut Held<K>,
) -> Result<Option<u8>, Reply> {
    let m = w.plugin.metrics.source(w.source);
    let result = match std::mem::replace(&mut w.check, Check::Off) {
        // A streamed scheme never needs the body kept (the configuration
        // refuses one that does).
        Check::Running(p) => p.finish(&[]).map_err(|f| f.reason),
        Check::Failed(r) => Err(r),
        Check::Off => Ok(()),
    };
    count_signature(host, m, result);
    match result {
        Err(reason) => Err(reply::invalid_signature(reason)),
        Ok(()) if dropped_at_verdict(w) => {
            bump(host, m.and_then(|m| m.events_dropped), 1);
            // Its upstream request is reset, never completed.
            Err(reply::DROPPED)
        }
        Ok(()) => Ok(w.tail.take()),
    }
}

/// Counts a signature's result in its source's metrics.
fn count_signature(host: &mut impl StreamHost, m: Option<&SourceMetrics>, r: Result<(), Reason>) {
    match r {
        Ok(()) => bump(host, m.and_then(|m| m.verified), 1),
        Err(reason) => bump(host, m.and_then(|m| m.verify_failed(reason)), 1),
    }
}

/// Stamps a request (a streamed one's `x-hookstamp-verified` says
/// `stream`), or answers it where its events rule drops it; records why it
/// lacks a key.
pub(super) fn forward<K>(
    host: &mut impl StreamHost,
    w: &Held<K>,
    body: Body<'_>,
    body_hash: Option<[u8; 32]>,
    verified: Option<bool>,
    unverified: Option<Reason>,
) -> HeadersStatus {
    let keys: Vec<Option<&[u8]>> = w.header_keys.iter().map(|k| k.as_deref()).collect();
    let view = Stamping {
        plugin: &w.plugin,
        source: w.source,
        tenant: &w.tenant,
        header_keys: &keys,
        streaming: w.streaming,
        method: &w.method,
        path: &w.path,
        spoofed: w.spoofed,
    };
    stamp_and_forward(host, &view, body, body_hash, verified, unverified)
}

/// What the stamps of a request need, borrowed: from a held request, or
/// from the headers of one stamped at once (which is then never copied
/// into a `Held`).
pub(super) struct Stamping<'a> {
    pub(super) plugin: &'a Plugin,
    pub(super) source: usize,
    pub(super) tenant: &'a str,
    pub(super) header_keys: &'a [Option<&'a [u8]>],
    pub(super) streaming: bool,
    pub(super) method: &'a str,
    pub(super) path: &'a str,
    pub(super) spoofed: usize,
}

pub(super) fn stamp_and_forward(
    host: &mut impl StreamHost,
    w: &Stamping<'_>,
    body: Body<'_>,
    body_hash: Option<[u8; 32]>,
    verified: Option<bool>,
    unverified: Option<Reason>,
) -> HeadersStatus {
    let plugin = w.plugin;
    let Some(src) = plugin.config.sources.get(w.source) else {
        return answer_internal(host, Some(plugin), &Failure::NoSource.to_string());
    };
    let m = plugin.metrics.source(w.source);
    let mut stamped = decide::stamp(src, w.tenant, w.header_keys, body, body_hash, verified);
    if w.streaming {
        stamped.streamed();
    }
    if plugin.config.seal.is_some() {
        let now_s = host.now_ms() / 1000;
        decide::add_seal(
            &plugin.config,
            now_s,
            w.method,
            w.path,
            &mut stamped,
            body_hash.as_ref(),
        );
    }
    // A streamed request's drop waits for its verdict (`stream_verdict`):
    // a forgery is never answered as a dropped event.
    if stamped.dropped && !w.streaming {
        bump(host, m.and_then(|m| m.events_dropped), 1);
        return send(host, &reply::DROPPED);
    }
    for (name, value) in &stamped.headers {
        if let Err(e) = host.add_request_header(name, value) {
            return answer_internal(host, Some(plugin), &e.to_string());
        }
    }
    plugin.metrics.stamped(host, w.source, w.spoofed, &stamped);
    // Why the request lacks a key, where the access log can print it. The
    // stamps and metrics already carry the decision: a host that keeps no
    // property leaves the log's field empty ("-"), and is not logged per
    // request, which a flood would turn into a flood of log lines.
    let why = stamped.why(unverified);
    if !why.is_empty() {
        let _ = host.set_property(WHY_PROPERTY, why.as_bytes());
    }
    HeadersStatus::Continue
}
