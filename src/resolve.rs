//! From a routed request to its stamps: the whole per-request rule.

use crate::config::{Config, Source};
use crate::dedupe::MAX_DEDUPE_KEY;
use crate::json::{self, Scalar};
use crate::key::{self, KeySource};
use crate::lanes::{self, MAX_LANE_KEY};
use crate::route::{self, Route};
use crate::stamps;
use std::borrow::Cow;

/// The request body as the filter saw it.
#[derive(Debug, Clone, Copy)]
pub enum Body<'b> {
    /// The whole body (empty when the request had none).
    Bytes(&'b [u8]),
    /// Longer than max_json_bytes: never decoded, never buffered past it.
    TooLarge,
}

impl<'b> Body<'b> {
    /// Classifies a complete body against the configured limit.
    pub fn of(bytes: &'b [u8], max_json_bytes: usize) -> Self {
        if bytes.len() > max_json_bytes {
            Body::TooLarge
        } else {
            Body::Bytes(bytes)
        }
    }
}

/// The stamps for one request, and what the metrics need to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stamped {
    /// The stamp headers, in contract order.
    pub headers: Vec<(String, String)>,
    /// The source has dedupe but the request had no key.
    pub dedupe_key_missing: bool,
    /// Sink indices of keyed lanes whose key was missing (keyless instead).
    pub lane_keys_missing: Vec<u16>,
    /// The source reads the body, and it was over max_json_bytes.
    pub body_too_large: bool,
}

/// What happens to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Reject,
    Forward { source: usize, stamped: Stamped },
}

/// Routes and stamps a complete request, as the native harness sees it.
pub fn handle<N, V>(
    cfg: &Config,
    method: &str,
    path: &str,
    headers: &[(N, V)],
    body: &[u8],
) -> Outcome
where
    N: AsRef<str>,
    V: AsRef<[u8]>,
{
    match route::route(cfg, method, path) {
        Route::Pass => Outcome::Pass,
        Route::Reject => Outcome::Reject,
        Route::Source { source, tenant } => match cfg.sources.get(source) {
            Some(src) => Outcome::Forward {
                source,
                stamped: stamp(src, &tenant, headers, Body::of(body, cfg.max_json_bytes)),
            },
            None => Outcome::Reject,
        },
    }
}

/// Computes the stamps of a request routed to `src` for `tenant`.
pub fn stamp<N, V>(src: &Source, tenant: &str, headers: &[(N, V)], body: Body) -> Stamped
where
    N: AsRef<str>,
    V: AsRef<[u8]>,
{
    let mut out = Stamped::default();
    // One decode serves the dedupe key and every json ordering key.
    let found: Vec<Option<Scalar>> = match (src.needs_body(), body) {
        (false, _) => Vec::new(),
        (true, Body::TooLarge) => {
            out.body_too_large = true;
            Vec::new()
        }
        (true, Body::Bytes(b)) => json::extract(b, &src.paths).unwrap_or_default(),
    };
    // A JSON integer is a dedupe key (`ints`) but never an ordering key.
    let lookup = |k: &KeySource, ints: bool| -> Option<Cow<[u8]>> {
        let raw = match k {
            KeySource::Header(h) => key::first_header(headers, h)?,
            KeySource::Json(i) => match found.get(*i)? {
                Some(Scalar::Str(s)) => s.as_bytes(),
                Some(Scalar::Int(n)) if ints => n.as_bytes(),
                _ => return None,
            },
        };
        (!raw.is_empty()).then_some(Cow::Borrowed(raw))
    };
    let h = &mut out.headers;
    h.push((stamps::SOURCE.into(), stamps::encode(src.id.as_bytes())));
    h.push((stamps::TENANT.into(), stamps::encode(tenant.as_bytes())));
    if let Some(d) = &src.dedupe {
        match lookup(&d.key, true) {
            Some(raw) => {
                let k = key::cap(raw, MAX_DEDUPE_KEY);
                let mut idem = format!("{tenant}:{}:", src.id).into_bytes();
                idem.extend_from_slice(&k);
                h.push((stamps::DEDUPE_KEY.into(), stamps::encode(&k)));
                h.push((stamps::DEDUPE_TTL_MS.into(), d.ttl_ms.to_string()));
                h.push((stamps::IDEMPOTENCY_KEY.into(), stamps::encode(&idem)));
            }
            None => out.dedupe_key_missing = true,
        }
    }
    for lane in &src.lanes {
        let k = lane
            .key
            .as_ref()
            .and_then(|ks| lookup(ks, false))
            .map(|raw| key::cap(raw, MAX_LANE_KEY));
        if lane.key.is_some() && k.is_none() {
            out.lane_keys_missing.push(lane.sink);
        }
        let k = k.as_deref();
        let [id_name, key_name, group_name] = stamps::lane_names(lane.sink);
        h.push((id_name, hex::encode(lanes::lane_id(lane.sink, &src.id, k))));
        h.push((key_name, stamps::encode(k.unwrap_or_default())));
        h.push((
            group_name,
            stamps::encode(&lanes::group(k, tenant, &src.id)),
        ));
    }
    out
}

impl Outcome {
    /// The harness's JSON form: `{"action":"forward","headers":[[n,v],..]}`,
    /// `{"action":"reject","status":404}` or `{"action":"pass"}`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Outcome::Pass => json!({"action": "pass"}),
            Outcome::Reject => json!({"action": "reject", "status": route::REJECT_STATUS}),
            Outcome::Forward { stamped, .. } => {
                let headers: Vec<[&str; 2]> = stamped
                    .headers
                    .iter()
                    .map(|(n, v)| [n.as_str(), v.as_str()])
                    .collect();
                json!({"action": "forward", "headers": headers})
            }
        }
    }
}
