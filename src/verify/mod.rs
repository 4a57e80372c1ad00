//! Provider signatures, verified at the edge before any key is stamped: a
//! forged request never claims a key.
//!
//! A check starts at the request headers (`Verify::start`: the signature
//! header parsed, the timestamp checked, one HMAC per secret keyed and fed
//! the signed prefix, one Ed25519 verifier per public key and signature
//! seeded), takes the body chunk by chunk (`Pending::update`), so no copy of
//! the body is needed for it (but for Twilio's form bodies, whose fields are
//! signed sorted: `Pending::keeps_body`), and ends with the comparison
//! (`Pending::finish`), in constant time against every signature the header
//! carries and every secret of a rotation list.

mod custom;
mod ed25519;
mod failure;
mod headers;
mod hmac_schemes;
mod mac;
mod pending;
mod standard;
mod twilio;

pub use custom::{Custom, Part};
pub use failure::{Failure, Reason, Why};
pub(crate) use mac::Mac;
pub use mac::Pads;
pub(crate) use pending::ct_eq;
pub use pending::Pending;
pub use standard::{MAX_ED25519_CHECKS, MAX_ED25519_SIGNATURES};

/// At most this many entries in a signature header that lists several
/// (Stripe's `v1=`, Standard Webhooks' and Svix's `v1,` and `v1a,`): a
/// sender lists one per active secret, and each entry costs a decoding and
/// a comparison per secret. More is malformed.
pub const MAX_SIGNATURE_ENTRIES: usize = 8;

/// A signature's hex, decoded (either case): what `hex::decode` gives, by
/// a table of each byte's value, a third of `hex::decode_to_slice`'s cost
/// on every signed request's path (BENCHMARKS.md); `None` for an odd
/// length or a byte that is not a hex digit.
pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return None;
    }
    // Written in place, not pushed: no check of room a byte.
    let mut out = vec![0u8; b.len() / 2];
    let mut bad = 0;
    for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
        let hi = HEX_VALUE[usize::from(pair[0])];
        let lo = HEX_VALUE[usize::from(pair[1])];
        bad |= hi | lo;
        *o = hi << 4 | lo;
    }
    (bad <= 0x0F).then_some(out)
}

/// Each byte's value as a hex digit; 0xFF where it is none.
static HEX_VALUE: [u8; 256] = {
    let mut t = [0xFF; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

use crate::providers::{self, SchemePreset};
use headers::Headers;
use std::fmt;

/// A secret's bytes, and what they key. Never printed: its `Debug` is
/// redacted, and no error message quotes it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub Vec<u8>, pub Key);

/// What a secret is to a signature check.
#[derive(Clone, PartialEq, Eq)]
pub enum Key {
    /// An HMAC key (the bytes themselves), and its keyed states.
    Hmac(Pads),
    /// An Ed25519 public key (the bytes are its 32-byte encoding), checked
    /// at load.
    Ed25519(ed25519_dalek::VerifyingKey),
}

impl Secret {
    /// An HMAC key.
    pub fn hmac(bytes: Vec<u8>) -> Secret {
        Secret(bytes, Key::Hmac(Pads::default()))
    }

    /// Whether this is an Ed25519 public key (not an HMAC key).
    pub fn is_public_key(&self) -> bool {
        matches!(self.1, Key::Ed25519(_))
    }

    /// An HMAC under this secret, keyed once for all requests; `None` for
    /// a public key.
    pub(crate) fn mac(&self, alg: Algorithm) -> Option<Mac> {
        match &self.1 {
            Key::Hmac(pads) => pads.mac(alg, &self.0),
            Key::Ed25519(_) => None,
        }
    }

    /// Overwrites the bytes with zeros, as a write the compiler keeps: a
    /// configuration that goes (replaced by a push, or with its last
    /// request) leaves no secret behind in the freed memory.
    pub fn wipe(&mut self) {
        for b in self.0.iter_mut() {
            // SAFETY: `b` is a valid, aligned, exclusive reference.
            unsafe { std::ptr::write_volatile(b, 0) };
        }
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        // The states keyed from the old bytes go too (zeroed as they drop):
        // nothing keeps verifying under a key that is gone.
        if let Key::Hmac(pads) = &mut self.1 {
            *pads = Pads::default();
        }
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.wipe();
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    Sha1,
    Sha256,
    Sha512,
    /// An Ed25519 signature, under the source's public keys.
    Ed25519,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

/// The scheme and host (and port) the provider calls, as configured:
/// behind a proxy the request's own are not the provider's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `https?://host[:port]` as written.
    pub origin: String,
    /// Without the port.
    pub bare: String,
    /// With the port (the scheme's default where none is written).
    pub with_port: String,
}

/// What of the request a signature may cover besides its headers and body.
#[derive(Debug, Clone, Copy)]
pub struct Request<'r> {
    pub method: &'r str,
    /// The path as sent, with its query.
    pub path: &'r str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheme {
    /// A provider's own (its row in `providers`).
    Preset(SchemePreset),
    Custom(Custom),
}

impl Scheme {
    /// A preset by name.
    pub fn preset(name: &str) -> Option<Scheme> {
        providers::find(name)?.scheme.map(Scheme::Preset)
    }

    /// The presets' names, for error messages.
    pub fn presets() -> Vec<&'static str> {
        providers::listed(|p| p.scheme.map(|_| p.name))
    }

    /// The scheme's name as the configuration writes it.
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::Preset(p) => p.name(),
            Scheme::Custom(_) => "custom",
        }
    }

    /// The header the signature is read from, as `explain` names it.
    pub fn signature_header(&self) -> &str {
        use SchemePreset as P;
        match self {
            Scheme::Preset(P::Stripe) => "stripe-signature",
            Scheme::Preset(P::Github) => "x-hub-signature-256",
            Scheme::Preset(P::Shopify) => "x-shopify-hmac-sha256",
            Scheme::Preset(P::Slack) => "x-slack-signature",
            Scheme::Preset(P::StandardWebhooks) => "webhook-signature",
            Scheme::Preset(P::Svix) => "svix-signature (or webhook-signature)",
            Scheme::Preset(P::Discord) => "x-signature-ed25519",
            Scheme::Preset(P::Twilio) => "x-twilio-signature",
            Scheme::Custom(c) => &c.header,
        }
    }

    /// Whether the signature covers the URL the provider called, whose
    /// scheme and host only `public_url` gives.
    pub fn signs_url(&self) -> bool {
        match self {
            Scheme::Preset(SchemePreset::Twilio) => true,
            Scheme::Custom(c) => c.signs_url(),
            _ => false,
        }
    }
}

impl Verify {
    /// The headers (lowercase) whose values the signature covers, besides
    /// the signature header itself. A key read from any other header is
    /// the sender's to choose, even on a verified request.
    pub fn signed_headers(&self) -> Vec<String> {
        use SchemePreset as P;
        let names: &[&str] = match &self.scheme {
            Scheme::Preset(P::Stripe | P::Github | P::Shopify | P::Twilio) => &[],
            Scheme::Preset(P::Slack) => &["x-slack-request-timestamp"],
            Scheme::Preset(P::Discord) => &["x-signature-timestamp"],
            Scheme::Preset(P::StandardWebhooks) => &["webhook-id", "webhook-timestamp"],
            Scheme::Preset(P::Svix) => &[
                "svix-id",
                "svix-timestamp",
                "webhook-id",
                "webhook-timestamp",
            ],
            Scheme::Custom(c) => {
                let mut out: Vec<String> = c
                    .signed
                    .iter()
                    .filter_map(|p| match p {
                        Part::Header(h) => Some(h.clone()),
                        _ => None,
                    })
                    .collect();
                out.extend(c.timestamp_header.clone());
                return out;
            }
        };
        names.iter().map(|n| (*n).to_owned()).collect()
    }
}

/// What to do with a request whose signature does not verify.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// 401 (413 for a body too large to verify) from the filter.
    Reject,
    /// Forwarded with `x-hookstamp-verified: false` and no dedupe stamps.
    Flag,
}

/// The secrets a source accepts: the same for every tenant, or per tenant
/// (then only those tenants are accepted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Secrets {
    All(Vec<Secret>),
    PerTenant(Vec<(String, Vec<Secret>)>),
}

/// A source's verification rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verify {
    pub scheme: Scheme,
    pub secrets: Secrets,
    pub tolerance_s: u64,
    pub on_failure: OnFailure,
    /// Where the provider calls, for schemes that sign the URL.
    pub public_url: Option<PublicUrl>,
    /// When the signature is checked against the body (see `Mode`).
    pub mode: Mode,
    /// The source answers the X/Twitter CRC, which signs any token a client
    /// sends with the source's first secret: a body that could be such a
    /// token (at most 256 bytes, all token characters) never verifies, so
    /// the CRC's answer is never a hook's signature.
    pub refuses_tokens: bool,
}

/// When a source's signature is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The request is held until its body is in and verified; only then
    /// does anything reach the upstream.
    Hold,
    /// The headers go upstream at once, stamped `x-hookstamp-verified:
    /// stream`; the body streams through, its last byte held back until the
    /// signature is checked, and a forged one's upstream request is reset,
    /// never completed. No held headers, no body buffered.
    Stream,
}

impl Verify {
    /// The secrets for a tenant; `None` when the source does not accept it.
    pub fn secrets_for(&self, tenant: &str) -> Option<&[Secret]> {
        match &self.secrets {
            Secrets::All(s) => Some(s),
            Secrets::PerTenant(m) => m.iter().find(|(t, _)| t == tenant).map(|(_, s)| &s[..]),
        }
    }

    /// The URL the provider called, in the forms Twilio's validator
    /// accepts: without the port and with it.
    fn urls(&self, path: &str) -> Vec<Vec<u8>> {
        let Some(u) = &self.public_url else {
            return vec![path.as_bytes().to_vec()];
        };
        let mut out = vec![format!("{}{path}", u.bare).into_bytes()];
        let with = format!("{}{path}", u.with_port).into_bytes();
        if !out.contains(&with) {
            out.push(with);
        }
        out
    }

    /// Starts the check of a request: its signature header parsed, its
    /// timestamp within tolerance of `now_s`, one HMAC per secret and one
    /// Ed25519 verifier per public key and signature fed the signed content
    /// before the body. `header` gives a header's first value by lowercase
    /// name; `request` its method and path.
    pub fn start<'h>(
        &self,
        secrets: &[Secret],
        header: impl Fn(&str) -> Option<&'h [u8]>,
        request: Request<'_>,
        now_s: u64,
    ) -> Result<Pending, Failure> {
        let h = Headers {
            get: &header,
            now_s,
            tolerance_s: self.tolerance_s,
        };
        use SchemePreset as P;
        let plan = match &self.scheme {
            Scheme::Preset(P::Stripe) => hmac_schemes::stripe(&h),
            Scheme::Preset(P::Github) => hmac_schemes::github(&h),
            Scheme::Preset(P::Shopify) => hmac_schemes::shopify(&h),
            Scheme::Preset(P::Slack) => hmac_schemes::slack(&h),
            Scheme::Preset(P::StandardWebhooks) => standard::standard(&h, false, secrets),
            Scheme::Preset(P::Svix) => standard::standard(&h, true, secrets),
            Scheme::Preset(P::Discord) => ed25519::discord(&h),
            Scheme::Preset(P::Twilio) => twilio::twilio(self, &h, request),
            Scheme::Custom(c) => custom::custom(self, c, &h, request),
        }?;
        Ok(plan.pending(secrets, self.refuses_tokens))
    }

    /// A whole request at once: the native harness's path.
    pub fn check<'h>(
        &self,
        secrets: &[Secret],
        header: impl Fn(&str) -> Option<&'h [u8]>,
        request: Request<'_>,
        body: &[u8],
        now_s: u64,
    ) -> Result<(), Failure> {
        let mut p = self.start(secrets, header, request, now_s)?;
        p.update(body);
        p.finish(body)
    }
}

/// The path as sent, split at its query.
fn path_and_query(path: &str) -> (&str, &str) {
    path.split_once('?').unwrap_or((path, ""))
}

#[cfg(test)]
mod tests;
