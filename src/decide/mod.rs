//! The per-request decision, in one place: a request's route, then for a
//! routed one the one sequence its outcome follows (`conclude`): the
//! signature's verdict, a POST handshake, the stamps, the events rule, the
//! seal. The filter routes at the headers (`route::route`) and concludes
//! once what the stamps need is in (at the headers for a header-only or
//! streamed source, at the end of a held body); the CLI and `explain` take
//! the whole `Decision` for a complete request (`decide`).

use crate::config::{Config, Source};
use crate::reply::{self, Reply};
use crate::route::{self, Route, Target};
use crate::verify::{Failure, OnFailure, Reason, Request};
use std::borrow::Cow;

mod offered;
mod stamp;

pub use offered::{offered, Offered};
pub use stamp::{stamp, Stamp, Stamped, Value, MAX_EVENT_TYPE};

/// The header whose value makes each request's seal nonce its own (Envoy
/// gives every request one).
pub const REQUEST_ID: &str = "x-request-id";

/// The request body as the filter saw it.
#[derive(Debug, Clone, Copy)]
pub enum Body<'b> {
    /// The whole body (empty when the request had none).
    Bytes(&'b [u8]),
    /// Longer than max_json_bytes: never decoded, never buffered past it.
    OverLimit,
}

impl<'b> Body<'b> {
    /// A complete body as `src` sees it: against the configured limit,
    /// which a streamed signature (holding nothing) does not have.
    pub fn for_source(bytes: &'b [u8], src: &Source, max_json_bytes: usize) -> Self {
        if src.streams() {
            Body::Bytes(bytes)
        } else {
            Body::of(bytes, max_json_bytes)
        }
    }

    /// Classifies a complete body against the configured limit.
    pub fn of(bytes: &'b [u8], max_json_bytes: usize) -> Self {
        if bytes.len() > max_json_bytes {
            Body::OverLimit
        } else {
            Body::Bytes(bytes)
        }
    }
}

/// What happens to a request, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<'a> {
    /// Not a webhook of ours, or an endpoint check (GET or HEAD under the
    /// prefix): passed untouched but for the stamps stripped.
    Pass,
    /// Under the prefix but routed to no source: the route's own answer,
    /// 404 (no source by that path) or 405 (the method).
    Unrouted(Reply),
    /// A handshake answered at the edge: a GET one's (Meta's, the CRC) by
    /// its route, a POST one's (Slack's, Discord's, Zoom's) once its
    /// signature verified.
    Handshake(Reply),
    /// Its signature did not verify and the source rejects (on_failure
    /// reject): answered 401, or 413 for a body over max_json_bytes.
    Refused(Reason),
    /// The source's events rule drops this (stamped) event type: answered
    /// 200, never forwarded.
    Dropped { event_type: Cow<'a, [u8]> },
    /// Forwarded with its stamps.
    Forward { source: usize, stamped: Stamped<'a> },
}

impl Outcome<'_> {
    /// The filter's answer, for an outcome it answers.
    pub fn reply(&self) -> Option<Cow<'_, Reply>> {
        match self {
            Outcome::Unrouted(r) | Outcome::Handshake(r) => Some(Cow::Borrowed(r)),
            Outcome::Refused(reason) => Some(Cow::Owned(reply::invalid_signature(*reason))),
            Outcome::Dropped { .. } => Some(Cow::Borrowed(&reply::DROPPED)),
            Outcome::Pass | Outcome::Forward { .. } => None,
        }
    }
}

/// How a request's body passes the filter, as far as its outcome goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Held whole, or there was none: its signature's result is final.
    Held,
    /// Streamed through and ended (a complete request's, as the CLI has
    /// it): its `verified` stamp says `stream`, and its result is final.
    Ended,
    /// Streamed from its headers, stamped now as verified (`stream`): its
    /// result comes when its body ends, and its drop waits for it (a
    /// forgery is refused, never answered as a dropped event).
    Started,
}

/// What a routed request's outcome follows from: its target, its body, its
/// signature's result, its key headers' values (see `header_keys`), its
/// held body's hash, how its body passed, and what the seal covers.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a, 'k> {
    pub target: Target<'a>,
    pub body: Body<'a>,
    /// A verified source's signature: verified, or why not (`None`: the
    /// source does not verify).
    pub signature: Option<Result<(), Reason>>,
    pub header_keys: &'k [Option<&'a [u8]>],
    /// The whole body's hash, where the filter held all of it: a key
    /// (`sha256`) and the seal's.
    pub body_hash: Option<[u8; 32]>,
    pub stream: Stream,
    /// The method and the path as sent, which the seal covers, and the
    /// request's `x-request-id` (empty if none), which its nonce reads.
    pub method: &'k str,
    pub path: &'k str,
    pub request_id: &'k [u8],
}

/// The outcome of a routed request, in the one order every caller
/// follows: the signature's verdict (refused), a POST handshake, the
/// stamps (a streamed request's `verified` one `stream`), the events rule
/// (dropped), the seal. `now_s` is the clock in Unix seconds, read only
/// where a seal is made.
pub fn conclude<'a>(cfg: &Config, f: &Facts<'a, '_>, now_s: impl FnOnce() -> u64) -> Outcome<'a> {
    let Target {
        index,
        source: src,
        tenant,
    } = f.target;
    let verified = match verdict(src, f.signature) {
        Ok(v) => v,
        Err(reason) => return Outcome::Refused(reason),
    };
    if let Some(r) = post_handshake(&f.target, f.body, verified) {
        return Outcome::Handshake(r);
    }
    let mut stamped = stamp(src, tenant, f.header_keys, f.body, f.body_hash, verified);
    if f.stream != Stream::Held {
        stamped.streamed();
    }
    // A streamed request's drop waits for its verdict: the lifecycle keeps
    // it (`stamped.dropped`) for the end of its body.
    if f.stream != Stream::Started {
        if let Some(event_type) = stamped.dropped.take() {
            return Outcome::Dropped { event_type };
        }
    }
    add_seal(cfg, now_s, f, &mut stamped);
    Outcome::Forward {
        source: index,
        stamped,
    }
}

/// The signature's verdict under the source's on_failure: the `verified`
/// stamp (`None`: the source does not verify), or why it is refused.
fn verdict(src: &Source, signature: Option<Result<(), Reason>>) -> Result<Option<bool>, Reason> {
    let (Some(v), Some(result)) = (&src.verify, signature) else {
        return Ok(None);
    };
    match (result, v.on_failure) {
        (Ok(()), _) => Ok(Some(true)),
        (Err(_), OnFailure::Flag) => Ok(Some(false)),
        (Err(reason), OnFailure::Reject) => Err(reason),
    }
}

/// A complete request's decision, and what it was made from.
#[derive(Debug, Clone)]
pub struct Decision<'a> {
    pub route: Route<'a>,
    /// The body as the decision saw it (a routed request's).
    pub body: Option<Body<'a>>,
    /// A verified source's signature: verified, or exactly why not.
    pub signature: Option<Result<(), Failure>>,
    /// A routed request's key headers' values (see `header_keys`).
    pub header_keys: Vec<Option<&'a [u8]>>,
    /// The held body's hash (see `Facts::body_hash`).
    pub body_hash: Option<[u8; 32]>,
    pub outcome: Outcome<'a>,
}

/// The system clock in Unix seconds, the time the native harness checks
/// signatures and seals at (the filter takes the proxy's clock).
pub fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The decision for a complete request at `now_s` (Unix seconds): its
/// route, and for a routed one its facts, concluded.
pub fn decide<'a, N, V>(
    cfg: &'a Config,
    method: &str,
    path: &'a str,
    headers: &'a [(N, V)],
    body: &'a [u8],
    now_s: u64,
) -> Decision<'a>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let route = route::route(cfg, method, path);
    let Route::Source(target) = route else {
        return Decision {
            outcome: unrouted(&route),
            route,
            body: None,
            signature: None,
            header_keys: Vec::new(),
            body_hash: None,
        };
    };
    let src = target.source;
    // A streamed signature holds nothing: any size verifies.
    let streamed = src.streams() && !body.is_empty();
    let body = Body::for_source(body, src, cfg.max_json_bytes);
    let signature = src.verify.as_ref().map(|v| {
        let secrets = v.secrets_for(target.tenant).unwrap_or_default();
        let header = |n: &str| crate::pairs::first_header(headers, n);
        match body {
            Body::OverLimit => Err(Failure::over_limit()),
            Body::Bytes(b) => v.check(secrets, header, Request { method, path }, b, now_s),
        }
    });
    let header_keys = header_keys(src, headers);
    // The filter holds the whole body of a source that reads it.
    let body_hash = match body {
        Body::Bytes(b) if src.needs_body() => Some(crate::seal::body_hash(b)),
        _ => None,
    };
    let facts = Facts {
        target,
        body,
        signature: signature
            .as_ref()
            .map(|r| r.as_ref().map(|_| ()).map_err(|f| f.reason)),
        header_keys: &header_keys,
        body_hash,
        stream: if streamed {
            Stream::Ended
        } else {
            Stream::Held
        },
        method,
        path,
        request_id: crate::pairs::first_header(headers, REQUEST_ID).unwrap_or_default(),
    };
    let outcome = conclude(cfg, &facts, || now_s);
    Decision {
        route,
        body: Some(body),
        signature,
        header_keys: header_keys.to_vec(),
        body_hash,
        outcome,
    }
}

/// The outcome of a request the route sends to no source: passed, or the
/// route's own answer.
fn unrouted<'a>(route: &Route<'_>) -> Outcome<'a> {
    match route {
        Route::Handshake(_, r) => Outcome::Handshake(r.clone()),
        other => other.answer().map_or(Outcome::Pass, Outcome::Unrouted),
    }
}

/// A POST handshake's answer (Slack's, Discord's, Zoom's), where the body
/// is one and its signature verified; `None`: an ordinary hook.
fn post_handshake(target: &Target<'_>, body: Body<'_>, verified: Option<bool>) -> Option<Reply> {
    let h = target.source.handshake.as_ref().filter(|h| !h.on_get())?;
    match (body, verified) {
        (Body::Bytes(b), Some(true)) => h.answer_post(b, target.first_secret()),
        _ => None,
    }
}

/// Adds the seal, last, where the config has one: its `content-digest`
/// (a held body's), `signature-input` and `signature`, over the method, the
/// path as sent, every stamp and the held body's hash (see `seal`).
fn add_seal(
    cfg: &Config,
    now_s: impl FnOnce() -> u64,
    f: &Facts<'_, '_>,
    stamped: &mut Stamped<'_>,
) {
    let Some((seal, secret)) = cfg.seal.as_ref().and_then(|s| Some((s, s.keys.first()?))) else {
        return;
    };
    let created = now_s();
    let key = crate::seal::Key {
        secret,
        id: &seal.key_id,
        created,
        expires: created.saturating_add(seal.expires_s),
    };
    let request = Request {
        method: f.method,
        path: f.path,
    };
    let fields = crate::seal::seal(
        &key,
        &request,
        f.request_id,
        &stamped.headers,
        f.body_hash.as_ref(),
    );
    let h = &mut stamped.headers;
    if let Some(digest) = fields.content_digest {
        h.push((crate::seal::CONTENT_DIGEST, digest.into()));
    }
    h.push((crate::seal::SIGNATURE_INPUT, fields.input.into()));
    h.push((crate::seal::SIGNATURE, fields.signature.into()));
}

/// The values of the headers `src`'s keys read (its header table), each
/// the first value of that header in arrival order.
pub fn header_keys<'h, N, V>(src: &Source, headers: &'h [(N, V)]) -> HeaderKeys<'h>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    HeaderKeys::collect(
        src.headers
            .iter()
            .map(|h| crate::pairs::first_header(headers, h)),
    )
}

/// A request's header keys, one per header its source reads, in the
/// source's order: on the stack for a source that reads a few (as every
/// provider's does), so that reading them costs no allocation.
pub struct HeaderKeys<'h> {
    room: [Option<&'h [u8]>; 8],
    len: usize,
    /// All of them, where there are more than `room` holds.
    spill: Vec<Option<&'h [u8]>>,
}

impl<'h> HeaderKeys<'h> {
    pub fn collect(keys: impl Iterator<Item = Option<&'h [u8]>>) -> Self {
        let mut out = HeaderKeys {
            room: [None; 8],
            len: 0,
            spill: Vec::new(),
        };
        for k in keys {
            match out.room.get_mut(out.len) {
                Some(slot) => {
                    *slot = k;
                    out.len += 1;
                }
                None => out.spill_push(k),
            }
        }
        out
    }

    /// A key past the room: all of them kept in `spill` from then on.
    #[cold]
    #[inline(never)]
    fn spill_push(&mut self, key: Option<&'h [u8]>) {
        if self.spill.is_empty() {
            self.spill.extend_from_slice(&self.room);
        }
        self.spill.push(key);
        self.len += 1;
    }
}

impl<'h> std::ops::Deref for HeaderKeys<'h> {
    type Target = [Option<&'h [u8]>];

    fn deref(&self) -> &Self::Target {
        if self.spill.is_empty() {
            self.room.get(..self.len).unwrap_or_default()
        } else {
            &self.spill
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HeaderKeys;

    #[test]
    fn header_keys_past_the_room_are_all_kept_in_order() {
        for n in [0usize, 3, 8, 9, 40] {
            let values: Vec<Vec<u8>> = (0..n).map(|i| i.to_string().into_bytes()).collect();
            let keys = HeaderKeys::collect(
                values
                    .iter()
                    .enumerate()
                    .map(|(i, v)| (i % 3 != 1).then_some(&v[..])),
            );
            assert_eq!(keys.len(), n);
            for (i, k) in keys.iter().enumerate() {
                assert_eq!(*k, (i % 3 != 1).then_some(values[i].as_slice()));
            }
        }
    }
}
