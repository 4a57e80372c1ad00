//! The per-request decision, in one place: a request's route, what became
//! of its body, its signature's result, and its outcome (passed, answered,
//! or forwarded with its stamps). The filter decides with these pieces as
//! the request arrives (`route::route` at the headers, `verdict` and
//! `stamp` once the body is in); the CLI and `explain` take the whole
//! `Decision` for a complete request.

use crate::affinity::{self, Affinity};
use crate::config::{Config, Source};
use crate::dedupe::MAX_DEDUPE_KEY;
use crate::json::{self, Scalar};
use crate::key::{self, BodyState, FormJson, Found, KeySource, Missing};
use crate::lanes::{self, MAX_LANE_KEY};
use crate::reply::{self, Reply};
use crate::route::{self, Route, Target};
use crate::stamps;
use crate::verify::{Failure, OnFailure, Reason, Request};
use std::borrow::Cow;

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

/// An event type longer than this is stamped as its hash (as a lane key).
pub const MAX_EVENT_TYPE: usize = 128;

/// A request's event type, as it is stamped (after the 128-byte rule).
pub fn event_type<'a>(et: &KeySource, values: &key::Values<'_, 'a>) -> Option<Cow<'a, [u8]>> {
    key::eval(et, values).map(|t| key::cap(t, MAX_EVENT_TYPE))
}

/// Whether `src`'s events rule drops an event of this (stamped) type.
pub fn drops(src: &Source, event_type: &[u8]) -> bool {
    src.events.as_ref().is_some_and(|e| e.drops(event_type))
}

/// The stamps for one request, and what the metrics need to know. Names
/// and values borrow from the config and the request where they can: a
/// stamp is copied only when it is built (the idempotency key, a lane id)
/// or percent-encoded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamped<'a> {
    /// The stamp headers, in contract order.
    pub headers: Vec<(&'a str, Cow<'a, str>)>,
    /// The source has dedupe but the request had no key: why.
    pub dedupe_key_missing: Option<Missing>,
    /// Keyed lanes whose key was missing (keyless instead): sink index, why.
    pub lane_keys_missing: Vec<(u16, Missing)>,
    /// The source reads the body, and it was over max_json_bytes.
    pub body_over_limit: bool,
    /// What the keys found the body to be.
    pub body: BodyState,
    /// The dedupe key was over its limit and is stamped as its hash.
    pub dedupe_key_hashed: bool,
    /// The sinks whose lane key was over its limit and is stamped as its
    /// hash.
    pub lane_keys_hashed: Vec<u16>,
    /// The sinks whose group was longer than their broker takes and is
    /// stamped as its hash (`lanes::group`).
    pub lane_groups_hashed: Vec<u16>,
    /// The source has an event type but the request had none: why.
    pub event_type_missing: Option<Missing>,
    /// The source's `events` rule drops the event: answered 200 by the
    /// filter, never forwarded.
    pub dropped: bool,
}

impl Stamped<'_> {
    /// Marks a streamed request's verified stamp `stream`: its signature is
    /// checked as its body passes, and its completion is the verdict.
    pub fn streamed(&mut self) {
        if let Some((_, v)) = self
            .headers
            .iter_mut()
            .find(|(n, _)| *n == stamps::VERIFIED)
        {
            *v = Cow::Borrowed("stream");
        }
    }

    /// Why a stamped request lacks something, for the access log: the
    /// signature's failure in flag mode, the dedupe key's and each keyless
    /// lane's reason, each hashed group; `dedupe=absent lane-1=not_json`.
    /// Empty where nothing is missing. Names and bounded reasons only,
    /// never a key or a body byte.
    pub fn why(&self, unverified: Option<Reason>) -> String {
        let mut out = String::new();
        if unverified.is_some()
            || self.event_type_missing.is_some()
            || self.dedupe_key_missing.is_some()
            || !self.lane_keys_missing.is_empty()
            || !self.lane_groups_hashed.is_empty()
        {
            out.reserve(64);
        }
        let mut item = |parts: &[&str]| {
            if !out.is_empty() {
                out.push(' ');
            }
            for p in parts {
                out.push_str(p);
            }
        };
        if let Some(r) = unverified {
            item(&["signature=", r.as_str()]);
        }
        if let Some(m) = self.event_type_missing {
            item(&["event-type=", m.as_str()]);
        }
        if let Some(m) = self.dedupe_key_missing {
            item(&["dedupe=", m.as_str()]);
        }
        for (sink, m) in &self.lane_keys_missing {
            item(&["lane-", &sink.to_string(), "=", m.as_str()]);
        }
        for sink in &self.lane_groups_hashed {
            item(&["lane-", &sink.to_string(), "-group=hashed"]);
        }
        out
    }
}

/// What happens to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<'a> {
    Pass,
    /// Answered by the filter.
    Reply(Reply),
    Forward {
        source: usize,
        stamped: Stamped<'a>,
    },
}

/// A complete request's decision, and why.
#[derive(Debug, Clone)]
pub struct Decision<'a> {
    pub route: Route<'a>,
    /// The body as the decision saw it (a routed request's).
    pub body: Option<Body<'a>>,
    /// A verified source's signature: verified, or why not.
    pub signature: Option<Result<(), Failure>>,
    pub outcome: Outcome<'a>,
}

/// The system clock in Unix seconds, the time the native harness checks
/// signatures and seals at (the filter takes the proxy's clock).
pub fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The decision for a complete request at `now_s` (Unix seconds).
pub fn decide<'a, N, V>(
    cfg: &'a Config,
    method: &str,
    path: &'a str,
    headers: &'a [(N, V)],
    body: &'a [u8],
    now_s: u64,
) -> Decision<'a>
where
    N: AsRef<str>,
    V: AsRef<[u8]>,
{
    let route = route::route(cfg, method, path);
    let target = match &route {
        Route::Source(t) => *t,
        other => {
            let outcome = other.answer().map_or(Outcome::Pass, Outcome::Reply);
            return Decision {
                route,
                body: None,
                signature: None,
                outcome,
            };
        }
    };
    let Target {
        index,
        source: src,
        tenant,
    } = target;
    // A streamed signature holds nothing: any size verifies.
    let streamed = src.streams() && !body.is_empty();
    let body = Body::for_source(body, src, cfg.max_json_bytes);
    let signature = src.verify.as_ref().map(|v| {
        let secrets = v.secrets_for(tenant).unwrap_or_default();
        let header = |n: &str| crate::pairs::first_header(headers, n);
        match body {
            Body::OverLimit => Err(Failure::over_limit()),
            Body::Bytes(b) => v.check(secrets, header, Request { method, path }, b, now_s),
        }
    });
    let verified = match (&src.verify, &signature) {
        (Some(v), Some(result)) => match verdict(v.on_failure, reason_of(result)) {
            Verdict::Refuse(r) => {
                return Decision {
                    route,
                    body: Some(body),
                    signature,
                    outcome: Outcome::Reply(r),
                }
            }
            Verdict::Stamp(ok) => Some(ok),
        },
        _ => None,
    };
    if let Some(r) = post_handshake(&target, body, verified) {
        return Decision {
            route,
            body: Some(body),
            signature,
            outcome: Outcome::Reply(r),
        };
    }
    // The filter holds the whole body of a source that reads it: its hash
    // is a key (`sha256`) and the seal's.
    let held = match body {
        Body::Bytes(b) if src.needs_body() => Some(crate::seal::body_hash(b)),
        _ => None,
    };
    let keys = header_keys(src, headers);
    let mut stamped = stamp(src, tenant, &keys, body, held, verified);
    if streamed {
        stamped.streamed();
    }
    add_seal(cfg, now_s, method, path, &mut stamped, held.as_ref());
    let outcome = if stamped.dropped {
        Outcome::Reply(reply::DROPPED)
    } else {
        Outcome::Forward {
            source: index,
            stamped,
        }
    };
    Decision {
        route,
        body: Some(body),
        signature,
        outcome,
    }
}

/// A POST handshake's answer (Slack's, Discord's, Zoom's), where the body
/// is one and its signature verified; `None`: an ordinary hook.
pub fn post_handshake(
    target: &Target<'_>,
    body: Body<'_>,
    verified: Option<bool>,
) -> Option<Reply> {
    let h = target.source.handshake.as_ref().filter(|h| !h.on_get())?;
    match (body, verified) {
        (Body::Bytes(b), Some(true)) => h.answer_post(b, target.first_secret()),
        _ => None,
    }
}

/// Adds the seal, last, where the config has a seal key: over the method,
/// the path as sent, every stamp and the held body's hash (see `seal`).
pub fn add_seal(
    cfg: &Config,
    now_s: u64,
    method: &str,
    path: &str,
    stamped: &mut Stamped<'_>,
    body: Option<&[u8; 32]>,
) {
    let Some(key) = cfg.seal.as_ref().and_then(|k| k.first()) else {
        return;
    };
    let stamps = stamped.headers.iter().map(|(n, v)| (*n, v.as_ref()));
    let value = crate::seal::seal(&key.0, now_s, method, path, stamps, body);
    stamped.headers.push((stamps::SEAL, Cow::Owned(value)));
}

/// A check's result as its reason.
fn reason_of(r: &Result<(), Failure>) -> Result<(), Reason> {
    r.as_ref().map(|_| ()).map_err(|f| f.reason)
}

/// What becomes of a verified source's request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Stamped, with `x-hookstamp-verified: <bool>`.
    Stamp(bool),
    /// Answered by the filter.
    Refuse(Reply),
}

/// A check's result under the source's on_failure.
pub fn verdict(on_failure: OnFailure, result: Result<(), Reason>) -> Verdict {
    match (result, on_failure) {
        (Ok(()), _) => Verdict::Stamp(true),
        (Err(_), OnFailure::Flag) => Verdict::Stamp(false),
        (Err(reason), OnFailure::Reject) => Verdict::Refuse(reply::invalid_signature(reason)),
    }
}

/// The values of the headers `src`'s keys read (its header table), each
/// the first value of that header in arrival order.
pub fn header_keys<'h, N, V>(src: &Source, headers: &'h [(N, V)]) -> Vec<Option<&'h [u8]>>
where
    N: AsRef<str>,
    V: AsRef<[u8]>,
{
    src.headers
        .iter()
        .map(|h| crate::pairs::first_header(headers, h))
        .collect()
}

/// Computes the stamps of a request routed to `src` for `tenant`, from the
/// values of its key headers (see `header_keys`), its body, and for a
/// source with `verify` whether its signature verified: an unverified
/// request (flag mode) never claims a dedupe key.
pub fn stamp<'a>(
    src: &'a Source,
    tenant: &'a str,
    header_keys: &[Option<&'a [u8]>],
    body: Body<'a>,
    body_hash: Option<[u8; 32]>,
    verified: Option<bool>,
) -> Stamped<'a> {
    let mut out = Stamped {
        headers: Vec::with_capacity(5 + 3 * src.lanes.len()),
        ..Stamped::default()
    };
    let offered = offered(src, header_keys, body, body_hash);
    out.body = offered.state;
    out.body_over_limit = offered.state == BodyState::OverLimit;
    let values = offered.values();
    let lookup = |k: &KeySource| key::eval(k, &values);
    let h = &mut out.headers;
    h.push((stamps::SOURCE, stamps::encode_str(&src.id)));
    h.push((stamps::TENANT, stamps::encode_str(tenant)));
    if let Some(v) = verified {
        h.push((
            stamps::VERIFIED,
            Cow::Borrowed(if v { "true" } else { "false" }),
        ));
    }
    // What the event is; a forged one's (flag mode) is not trusted.
    if let Some(et) = &src.event_type {
        match event_type(et, &values).filter(|_| verified != Some(false)) {
            Some(t) => {
                out.dropped = drops(src, &t);
                h.push((stamps::EVENT_TYPE, stamps::encode_key(&t)));
            }
            None if verified == Some(false) => out.event_type_missing = Some(Missing::Unverified),
            None => out.event_type_missing = Some(key::why(et, &values)),
        }
    }
    // The stamped dedupe key, which a dedupe affinity hashes.
    let mut dedupe_key: Option<Cow<'a, [u8]>> = None;
    if let Some(d) = src.dedupe.as_ref().filter(|_| verified != Some(false)) {
        match lookup(&d.key) {
            Some(raw) => {
                out.dedupe_key_hashed = raw.len() > MAX_DEDUPE_KEY;
                let k = key::cap(raw, MAX_DEDUPE_KEY);
                let idem = idempotency_key(tenant, &src.id, &k);
                h.push((stamps::DEDUPE_KEY, stamps::encode_key(&k)));
                h.push((stamps::DEDUPE_TTL_MS, Cow::Borrowed(&d.ttl_ms)));
                h.push((stamps::IDEMPOTENCY_KEY, idem));
                dedupe_key = Some(k);
            }
            None => out.dedupe_key_missing = Some(key::why(&d.key, &values)),
        }
    }
    // A forged hook (flag mode) claims no dedupe key: counted as unverified.
    if src.dedupe.is_some() && verified == Some(false) {
        out.dedupe_key_missing = Some(Missing::Unverified);
    }
    let mut affinity: Option<Cow<'a, str>> = None;
    // A forged hook (flag mode) never enters a customer's lane: every lane
    // of an unverified request is keyless.
    let unverified = verified == Some(false);
    for lane in &src.lanes {
        let key = lane.key.as_ref().filter(|_| !unverified);
        let k = key.and_then(lookup).map(|raw| {
            if raw.len() > MAX_LANE_KEY {
                out.lane_keys_hashed.push(lane.sink);
            }
            key::cap(raw, MAX_LANE_KEY)
        });
        let [id_name, key_name, group_name] = &lane.names;
        let node_local = src.affinity == Some(Affinity::Lane(lane.sink));
        match k {
            Some(k) => {
                let raw_id = lanes::lane_id(lane.sink, &src.id, Some(&k));
                let id = lanes::hex(&raw_id);
                let encoded = stamps::encode_key(&k);
                if node_local {
                    affinity = Some(Cow::Owned(affinity::lane_hex(tenant, &raw_id)));
                }
                // A keyed lane's group is its stamped key, where the sink's
                // broker takes it.
                let (group, hashed) = lanes::group(encoded.clone(), Some(&k), lane.group_max);
                if hashed {
                    out.lane_groups_hashed.push(lane.sink);
                }
                h.push((id_name, Cow::Owned(id)));
                h.push((key_name, encoded));
                h.push((group_name, group));
            }
            None => {
                if let Some(ks) = &lane.key {
                    let why = if unverified {
                        Missing::Unverified
                    } else {
                        key::why(ks, &values)
                    };
                    out.lane_keys_missing.push((lane.sink, why));
                }
                let group = lanes::keyless_group(tenant, &src.id);
                if node_local {
                    let raw_id = lanes::lane_id(lane.sink, &src.id, None);
                    affinity = Some(Cow::Owned(affinity::lane_hex(tenant, &raw_id)));
                }
                let encoded = Cow::Owned(stamps::encode_string(group));
                let (group, hashed) = lanes::group(encoded, None, lane.group_max);
                if hashed {
                    out.lane_groups_hashed.push(lane.sink);
                }
                // No key stamp: the group says keyless, and an empty value
                // is one an Envoy dynamic module cannot set (docs/keys.md).
                h.push((id_name, Cow::Borrowed(&lane.keyless_id)));
                h.push((group_name, group));
            }
        }
    }
    if let Some(a) = src.affinity {
        let value = match (a, affinity) {
            (Affinity::Lane(_), Some(id)) => id,
            (Affinity::Dedupe, _) => {
                Cow::Owned(affinity::hex(tenant, &src.id, dedupe_key.as_deref()))
            }
            _ => Cow::Owned(affinity::hex(tenant, &src.id, None)),
        };
        h.push((stamps::AFFINITY, value));
    }
    out
}

/// What a request offers a source's keys: the values of its key headers
/// (see `header_keys`), what its body gave (the value at each JSON path,
/// one scan serving them all; each form field the source reads), what the
/// body was found to be, and its hash. The stamps and `explain` read the
/// same offer.
pub struct Offered<'a, 'h> {
    pub headers: &'h [Option<&'a [u8]>],
    pub json: Vec<Option<Found<'a>>>,
    pub form: Vec<Option<Vec<u8>>>,
    pub state: BodyState,
    pub body_sha256: Option<[u8; 32]>,
}

impl<'a> Offered<'a, '_> {
    pub fn values(&self) -> key::Values<'_, 'a> {
        key::Values {
            headers: self.headers,
            json: &self.json,
            form: &self.form,
            body: self.state,
            body_sha256: self.body_sha256,
        }
    }
}

/// Reads the body for `src`'s keys (see `key::BodyState` for the rule of
/// which keys read it as what). A body over the limit matters to a source
/// that reads it or hashes it; a source that does neither leaves it unread.
pub fn offered<'a, 'h>(
    src: &Source,
    header_keys: &'h [Option<&'a [u8]>],
    body: Body<'a>,
    body_hash: Option<[u8; 32]>,
) -> Offered<'a, 'h> {
    let (json, form, state) = match body {
        Body::OverLimit if src.keeps_body() || src.hashes_body => {
            (Vec::new(), Vec::new(), BodyState::OverLimit)
        }
        Body::Bytes(b) if src.keeps_body() => read_body(src, header_keys, b),
        _ => (Vec::new(), Vec::new(), BodyState::Unread),
    };
    Offered {
        headers: header_keys,
        json,
        form,
        state,
        body_sha256: body_hash.filter(|_| !matches!(body, Body::OverLimit)),
    }
}

type Read<'a> = (Vec<Option<Found<'a>>>, Vec<Option<Vec<u8>>>, BodyState);

/// The body as JSON, at every path the source reads; `None` if it is not
/// valid JSON.
fn scan<'a>(src: &Source, json: &'a [u8]) -> Option<Vec<Option<Found<'a>>>> {
    json::extract(json, &src.paths).map(|v| v.into_iter().map(|s| s.map(found)).collect())
}

fn read_body<'a>(src: &Source, header_keys: &[Option<&'a [u8]>], body: &'a [u8]) -> Read<'a> {
    let content_type = src.content_type.and_then(|i| *header_keys.get(i)?);
    if !crate::form::is_form(content_type) {
        return match scan(src, body) {
            Some(json) => (json, Vec::new(), BodyState::Json),
            None => (Vec::new(), Vec::new(), BodyState::NotJson),
        };
    }
    let fields = crate::form::form_fields(body);
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name.as_bytes())
            .map(|(_, v)| v.clone())
    };
    let form = src.forms.iter().map(|f| field(f)).collect();
    let none = || vec![None; src.paths.len()];
    let (json, how) = match src.form_json.as_deref().map(field) {
        // No form_json: the paths read the body itself.
        None => match scan(src, body) {
            Some(json) => (json, FormJson::Body),
            None => (none(), FormJson::NotJson),
        },
        Some(None) => (none(), FormJson::NoField),
        // Decoded from the form: owned, not borrowed from the body.
        Some(Some(text)) => match json::extract(&text, &src.paths) {
            Some(json) => (
                json.into_iter()
                    .map(|s| s.map(|s| owned(found(s))))
                    .collect(),
                FormJson::Field,
            ),
            None => (none(), FormJson::NotJson),
        },
    };
    (json, form, BodyState::Form(how))
}

/// A scanned scalar as a key's bytes.
fn found(s: Scalar<'_>) -> Found<'_> {
    match s {
        Scalar::Str(Cow::Borrowed(b)) => Found::Str(Cow::Borrowed(b.as_bytes())),
        Scalar::Str(Cow::Owned(o)) => Found::Str(Cow::Owned(o.into_bytes())),
        Scalar::Int(n) => Found::Int(Cow::Borrowed(n.as_bytes())),
        Scalar::Other => Found::Other,
    }
}

fn owned<'a>(f: Found<'_>) -> Found<'a> {
    match f {
        Found::Str(s) => Found::Str(Cow::Owned(s.into_owned())),
        Found::Int(n) => Found::Int(Cow::Owned(n.into_owned())),
        Found::Other => Found::Other,
    }
}

/// `<tenant>:<source_id>:<key>`, percent-encoded.
fn idempotency_key<'a>(tenant: &str, source_id: &str, key: &[u8]) -> Cow<'a, str> {
    // The encoding is byte by byte: each part encoded in turn is the
    // encoding of the joined key, with no joined copy to validate.
    let mut out = Vec::with_capacity(tenant.len() + source_id.len() + key.len() + 8);
    stamps::encode_into(&mut out, tenant.as_bytes());
    out.push(b':');
    stamps::encode_into(&mut out, source_id.as_bytes());
    out.push(b':');
    stamps::encode_into(&mut out, key);
    Cow::Owned(stamps::ascii(out))
}
