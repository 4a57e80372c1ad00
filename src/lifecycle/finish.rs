//! A routed request concluded (`decide::conclude`) and its outcome acted
//! on: its stamps added, or the answer that refuses it (a handshake's, a
//! drop's) sent, the metrics counted and why it lacks a key recorded. At
//! the end of a held body, at the headers of a request stamped at once or
//! streamed, and at a streamed body's verdict; and the trailers, where a
//! held body can end.

use super::held::{Check, Held};
use super::tick::body_timeout;
use super::{answer_internal, send, Failure, Plugin, WHY_PROPERTY};
use crate::decide::{self, Body, Facts, HeaderKeys, Outcome, Stamp, Stream};
use crate::host::{HeadersStatus, HostResult, StreamHost};
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

/// Concludes a held request at the end of its body (or at its headers,
/// where it has none or its signature refused it already): its signature's
/// result counted, then stamped or answered.
pub(super) fn finish<K>(host: &mut impl StreamHost, mut w: Held<K>, kept: Kept) -> HeadersStatus {
    let check = std::mem::replace(&mut w.check, Check::Off);
    let digest = w.digest.take();
    if w.source().is_none() {
        return answer_internal(host, Some(&w.plugin), &Failure::NoSource.to_string());
    }
    let kept_whole = matches!(kept, Kept::Whole);
    let body = match kept {
        Kept::Whole => Body::Bytes(&w.body),
        Kept::OverLimit => Body::OverLimit,
    };
    let signature = match (check, body) {
        (Check::Off, _) => None,
        (_, Body::OverLimit) => Some(Err(Reason::OverLimit)),
        (Check::Failed(r), _) => Some(Err(r)),
        (Check::Running(p), _) => Some(p.finish(&w.body).map_err(|f| f.reason)),
    };
    if let Some(r) = signature {
        count_signature(host, w.plugin.metrics.source(w.source), r);
    }
    // The whole body's hash where the filter held all of it.
    let body_hash: Option<[u8; 32]> = match (kept_whole, digest) {
        (true, Some(h)) => Some(h.finish()),
        _ => None,
    };
    let keys = header_keys(&w);
    stamp_and_forward(host, &stamping(&w, &keys), body, body_hash, signature)
}

/// A streamed request at its headers: stamped and let go now, as verified
/// (`stream`) until its verdict; whether its events rule drops it is kept
/// for that verdict (`stream_verdict`).
pub(super) fn stream_start<K>(host: &mut impl StreamHost, w: &mut Held<K>) -> HeadersStatus {
    let (status, drops) = {
        let keys = header_keys(w);
        let view = stamping(w, &keys);
        match conclude(host, &view, Body::Bytes(&[]), None, Some(Ok(()))) {
            Ok(outcome) => {
                let drops = matches!(&outcome, Outcome::Forward { stamped, .. } if stamped.dropped.is_some());
                (act(host, &view, &outcome, None), drops)
            }
            Err(status) => (status, false),
        }
    };
    w.drops = drops;
    status
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
    // A streamed check only refuses (the configuration holds it to
    // on_failure reject); its drop was found with its stamps, and waited
    // for this: a forgery is never answered as a dropped event.
    match result {
        Err(reason) => Err(reply::invalid_signature(reason)),
        Ok(()) if w.drops => {
            bump(host, m.and_then(|m| m.events_dropped), 1);
            // Its upstream request is reset, never completed.
            Err(reply::DROPPED)
        }
        Ok(()) => Ok(w.tail.take()),
    }
}

/// 413: a streamed body longer than max_stream_bytes (declared, or as it
/// passes: its upstream request is then reset), counted as a signature
/// over the limit.
pub(super) fn stream_over_limit<K>(host: &mut impl StreamHost, w: &Held<K>) -> HeadersStatus {
    let m = w.plugin.metrics.source(w.source);
    count_signature(host, m, Err(Reason::OverLimit));
    send(host, &reply::TOO_LARGE_TO_VERIFY)
}

/// Counts a signature's result in its source's metrics.
fn count_signature(host: &mut impl StreamHost, m: Option<&SourceMetrics>, r: Result<(), Reason>) {
    match r {
        Ok(()) => bump(host, m.and_then(|m| m.verified), 1),
        Err(reason) => bump(host, m.and_then(|m| m.verify_failed(reason)), 1),
    }
}

/// A held request's key headers' values, as the stamps take them.
fn header_keys<K>(w: &Held<K>) -> HeaderKeys<'_> {
    HeaderKeys::collect(w.header_keys.iter().map(|k| k.as_deref()))
}

/// What the stamps of a held request need, borrowed from it.
fn stamping<'a, K>(w: &'a Held<K>, header_keys: &'a [Option<&'a [u8]>]) -> Stamping<'a> {
    let sealing = w.sealing.as_deref();
    Stamping {
        plugin: &w.plugin,
        source: w.source,
        tenant: w.tenant(),
        header_keys,
        stream: if w.streaming {
            Stream::Started
        } else {
            Stream::Held
        },
        method: sealing.map_or("", |s| &s.method),
        path: sealing.map_or("", |s| &s.path),
        request_id: sealing.map_or(&[], |s| &s.request_id),
        seal_fields: sealing.map_or(0, |s| s.fields),
        spoofed: w.spoofed,
    }
}

/// What the stamps of a request need, borrowed: from a held request, or
/// from the headers of one stamped at once (which is then never copied
/// into a `Held`).
pub(super) struct Stamping<'a> {
    pub(super) plugin: &'a Plugin,
    pub(super) source: usize,
    pub(super) tenant: &'a str,
    pub(super) header_keys: &'a [Option<&'a [u8]>],
    pub(super) stream: Stream,
    pub(super) method: &'a str,
    pub(super) path: &'a str,
    pub(super) request_id: &'a [u8],
    /// Which of the seal's fields the client sent (see
    /// `strip::seal_fields_sent`).
    pub(super) seal_fields: u8,
    pub(super) spoofed: usize,
}

/// Concludes a request (`decide::conclude`) and acts on its outcome:
/// stamped, or answered (refused, a handshake's, a drop's).
pub(super) fn stamp_and_forward(
    host: &mut impl StreamHost,
    w: &Stamping<'_>,
    body: Body<'_>,
    body_hash: Option<[u8; 32]>,
    signature: Option<Result<(), Reason>>,
) -> HeadersStatus {
    match conclude(host, w, body, body_hash, signature) {
        Ok(outcome) => {
            let status = act(host, w, &outcome, signature.and_then(Result::err));
            // Its stamp list and text kept for the worker's next request.
            if let Outcome::Forward { stamped, .. } = outcome {
                crate::stamps::recycle(stamped.headers, stamped.text);
            }
            status
        }
        Err(status) => status,
    }
}

/// A request's outcome, from what the lifecycle knows of it; the clock is
/// read only for a seal. `Err`: the answer where its source is gone.
fn conclude<'a>(
    host: &mut impl StreamHost,
    w: &Stamping<'a>,
    body: Body<'a>,
    body_hash: Option<[u8; 32]>,
    signature: Option<Result<(), Reason>>,
) -> Result<Outcome<'a>, HeadersStatus> {
    let cfg = &w.plugin.config;
    let Some(source) = cfg.sources.get(w.source) else {
        return Err(answer_internal(
            host,
            Some(w.plugin),
            &Failure::NoSource.to_string(),
        ));
    };
    let facts = Facts {
        target: Target {
            index: w.source,
            source,
            tenant: w.tenant,
        },
        body,
        signature,
        header_keys: w.header_keys,
        body_hash,
        stream: w.stream,
        method: w.method,
        path: w.path,
        request_id: w.request_id,
    };
    Ok(decide::conclude(cfg, &facts, || host.now_ms() / 1000))
}

/// Acts on an outcome: a forwarded request's stamps added, counted, and
/// why it lacks a key recorded; any other answered, counted.
fn act(
    host: &mut impl StreamHost,
    w: &Stamping<'_>,
    outcome: &Outcome<'_>,
    unverified: Option<Reason>,
) -> HeadersStatus {
    let plugin = w.plugin;
    let Outcome::Forward { stamped, .. } = outcome else {
        let m = plugin.metrics.source(w.source);
        let counter = match outcome {
            Outcome::Handshake(_) => m.and_then(|m| m.handshakes),
            Outcome::Dropped { .. } => m.and_then(|m| m.events_dropped),
            _ => None,
        };
        bump(host, counter, 1);
        return outcome
            .reply()
            .map_or(HeadersStatus::Continue, |r| send(host, &r));
    };
    // The client's seal fields go once the stamps are in (no stamp reads
    // them: a configuration whose keys would is refused), and the seal's
    // own are added in their place.
    let (stamps, seal) = match plugin.config.seal {
        None => (&stamped.headers[..], &[][..]),
        Some(_) => stamped.split_seal(),
    };
    let added = add(host, stamps).and_then(|()| match seal {
        [] => Ok(()),
        _ => strip::seal_fields(host, w.seal_fields).and_then(|()| add(host, seal)),
    });
    if let Err(e) = added {
        return answer_internal(host, Some(plugin), &e.to_string());
    }
    plugin.metrics.stamped(host, w.source, w.spoofed, stamped);
    // Why the request lacks a key, where the access log can print it. The
    // stamps and metrics already carry the decision: a host that keeps no
    // property leaves the log's field empty ("-"), and is not logged per
    // request, which a flood would turn into a flood of log lines.
    let why = stamped.why(unverified);
    if !why.is_empty() {
        let _ = host.set_property(WHY_PROPERTY, why.as_str().as_bytes());
    }
    HeadersStatus::Continue
}

/// Adds headers to the request.
fn add(host: &mut impl StreamHost, headers: &[Stamp<'_>]) -> HostResult<()> {
    for (name, value) in headers {
        host.add_request_header(name, value)?;
    }
    Ok(())
}
