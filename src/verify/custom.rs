//! Custom schemes: a header carrying a prefix and the encoded HMAC (or
//! Ed25519 signature) of a signed-content template.

use super::ed25519::signature;
use super::failure::Failure;
use super::headers::Headers;
use super::pending::Plan;
use super::{path_and_query, Algorithm, Encoding, Request, Verify};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// One piece of the signed content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// The timestamp header's value.
    Timestamp,
    /// A header's value (lowercase name).
    Header(String),
    /// The request's method.
    Method,
    /// The URL the provider called: `public_url` and the path as sent,
    /// with its query.
    Url,
    /// The path as sent, without its query.
    Path,
    /// The raw query, without `?` (empty when there is none).
    Query,
    /// The body, exactly once; what follows it is signed after it.
    Body,
}

/// A generic scheme: `header` carries `prefix` + the encoded HMAC (or
/// Ed25519 signature) of `signed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Custom {
    pub header: String,
    pub prefix: String,
    pub encoding: Encoding,
    pub algorithm: Algorithm,
    pub timestamp_header: Option<String>,
    /// Whether the timestamp header counts milliseconds (HubSpot's).
    pub timestamp_ms: bool,
    pub signed: Vec<Part>,
}

impl Custom {
    pub fn signs_url(&self) -> bool {
        self.signed.contains(&Part::Url)
    }

    /// The signature the header carries, decoded.
    fn signature(&self, h: &Headers<'_, '_>) -> Result<Vec<u8>, Failure> {
        let value = h.text(&self.header)?;
        let enc = value
            .strip_prefix(self.prefix.as_str())
            .ok_or_else(|| Failure::form(&self.header, "the configured prefix is missing"))?;
        match self.encoding {
            Encoding::Hex => super::unhex(enc.trim())
                .ok_or_else(|| Failure::form(&self.header, "not hex after the prefix")),
            Encoding::Base64 => STANDARD
                .decode(enc.trim())
                .map_err(|_| Failure::form(&self.header, "not base64 after the prefix")),
        }
    }
}

pub(super) fn custom(
    v: &Verify,
    c: &Custom,
    h: &Headers<'_, '_>,
    request: Request<'_>,
) -> Result<Plan, Failure> {
    let sig = c.signature(h)?;
    let ts = match &c.timestamp_header {
        Some(t) => {
            let ts = h.text(t)?;
            h.fresh(t, ts, c.timestamp_ms)?;
            Some(ts)
        }
        None => None,
    };
    let (path, query) = path_and_query(request.path);
    let url = v.urls(request.path).swap_remove(0);
    let (mut before, mut after) = (Vec::new(), Vec::new());
    let mut past_body = false;
    for p in &c.signed {
        let out = if past_body { &mut after } else { &mut before };
        match p {
            Part::Text(t) => out.extend_from_slice(t.as_bytes()),
            Part::Timestamp => out.extend_from_slice(ts.unwrap_or("").as_bytes()),
            Part::Header(n) => {
                out.extend_from_slice((h.get)(n).ok_or_else(|| Failure::missing(n))?)
            }
            Part::Method => out.extend_from_slice(request.method.as_bytes()),
            Part::Url => out.extend_from_slice(&url),
            Part::Path => out.extend_from_slice(path.as_bytes()),
            Part::Query => out.extend_from_slice(query.as_bytes()),
            Part::Body => past_body = true,
        }
    }
    if c.algorithm == Algorithm::Ed25519 {
        let sig = signature(&sig).ok_or_else(|| {
            Failure::form(&c.header, "64 bytes of Ed25519 signature after the prefix")
        })?;
        return Ok(Plan::ed25519(before, after, sig));
    }
    Ok(Plan {
        after,
        ..Plan::hmac(c.algorithm, before, vec![sig])
    })
}
