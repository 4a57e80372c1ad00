//! Twilio's scheme: `x-twilio-signature`, the base64 HMAC-SHA1 of the URL
//! it called and, for a form body, the form's fields sorted; a JSON body is
//! signed through the `bodySHA256` its URL carries.

use super::failure::Failure;
use super::headers::Headers;
use super::pending::{BodyRule, Plan};
use super::{path_and_query, Algorithm, Request, Verify};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

pub(super) fn twilio(
    v: &Verify,
    h: &Headers<'_, '_>,
    request: Request<'_>,
) -> Result<Plan, Failure> {
    const H: &str = "x-twilio-signature";
    let sig = h.text(H)?;
    let sig = STANDARD
        .decode(sig.trim())
        .map_err(|_| Failure::form(H, "<base64>: not base64"))?;
    let (_, query) = path_and_query(request.path);
    // As Twilio's validator reads it: a `bodySHA256` parameter makes the
    // body JSON, hashed; otherwise its form fields are signed.
    let expected = query
        .split('&')
        .find_map(|p| p.strip_prefix("bodySHA256="))
        .map(|v| v.as_bytes().to_vec());
    let body = match expected {
        Some(expected) => BodyRule::Sha256 {
            hash: Box::default(),
            expected,
        },
        None => BodyRule::TwilioForm,
    };
    Ok(Plan {
        prefixes: v.urls(request.path),
        body,
        ..Plan::hmac(Algorithm::Sha1, Vec::new(), vec![sig])
    })
}

/// A Twilio form body as its RequestValidator signs it: every field name
/// once, sorted, each followed by its distinct values, sorted (bytes of
/// UTF-8 sort as Python's strings do).
pub(super) fn fields(body: &[u8]) -> Vec<u8> {
    let mut fields = crate::form::form_fields(body);
    fields.sort();
    fields.dedup();
    let mut out = Vec::with_capacity(body.len());
    for (k, v) in fields {
        out.extend_from_slice(&k);
        out.extend_from_slice(&v);
    }
    out
}
