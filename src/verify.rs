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

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac as _};
use std::fmt;

/// A secret's bytes, and what they key. Never printed: its `Debug` is
/// redacted, and no error message quotes it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub Vec<u8>, pub Key);

/// What a secret is to a signature check.
#[derive(Clone, PartialEq, Eq)]
pub enum Key {
    /// An HMAC key (the bytes themselves).
    Hmac,
    /// An Ed25519 public key (the bytes are its 32-byte encoding), checked
    /// at load.
    Ed25519(ed25519_dalek::VerifyingKey),
}

impl Secret {
    /// An HMAC key.
    pub fn hmac(bytes: Vec<u8>) -> Secret {
        Secret(bytes, Key::Hmac)
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
    Stripe,
    Github,
    Shopify,
    Slack,
    StandardWebhooks,
    Svix,
    Discord,
    Twilio,
    Custom(Custom),
}

pub const PRESETS: &[&str] = &[
    "stripe",
    "github",
    "shopify",
    "slack",
    "standard_webhooks",
    "svix",
    "discord",
    "twilio",
];

impl Scheme {
    pub fn preset(name: &str) -> Option<Scheme> {
        Some(match name {
            "stripe" => Scheme::Stripe,
            "github" => Scheme::Github,
            "shopify" => Scheme::Shopify,
            "slack" => Scheme::Slack,
            "standard_webhooks" => Scheme::StandardWebhooks,
            "svix" => Scheme::Svix,
            "discord" => Scheme::Discord,
            "twilio" => Scheme::Twilio,
            _ => return None,
        })
    }

    /// The scheme's name as the configuration writes it.
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::Stripe => "stripe",
            Scheme::Github => "github",
            Scheme::Shopify => "shopify",
            Scheme::Slack => "slack",
            Scheme::StandardWebhooks => "standard_webhooks",
            Scheme::Svix => "svix",
            Scheme::Discord => "discord",
            Scheme::Twilio => "twilio",
            Scheme::Custom(_) => "custom",
        }
    }

    /// The header the signature is read from, as `explain` names it.
    pub fn signature_header(&self) -> &str {
        match self {
            Scheme::Stripe => "stripe-signature",
            Scheme::Github => "x-hub-signature-256",
            Scheme::Shopify => "x-shopify-hmac-sha256",
            Scheme::Slack => "x-slack-signature",
            Scheme::StandardWebhooks => "webhook-signature",
            Scheme::Svix => "svix-signature (or webhook-signature)",
            Scheme::Discord => "x-signature-ed25519",
            Scheme::Twilio => "x-twilio-signature",
            Scheme::Custom(c) => &c.header,
        }
    }

    /// Whether the signature covers the URL the provider called, whose
    /// scheme and host only `public_url` gives.
    pub fn signs_url(&self) -> bool {
        match self {
            Scheme::Twilio => true,
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
        let names: &[&str] = match &self.scheme {
            Scheme::Stripe | Scheme::Github | Scheme::Shopify | Scheme::Twilio => &[],
            Scheme::Slack => &["x-slack-request-timestamp"],
            Scheme::Discord => &["x-signature-timestamp"],
            Scheme::StandardWebhooks => &["webhook-id", "webhook-timestamp"],
            Scheme::Svix => &[
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

/// Why a signature did not verify; the `reason` label of the metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Missing,
    Malformed,
    Mismatch,
    Expired,
    OverLimit,
}

impl Reason {
    pub const ALL: [Reason; 5] = [
        Reason::Missing,
        Reason::Malformed,
        Reason::Mismatch,
        Reason::Expired,
        Reason::OverLimit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Missing => "missing",
            Reason::Malformed => "malformed",
            Reason::Mismatch => "mismatch",
            Reason::Expired => "expired",
            Reason::OverLimit => "too_large",
        }
    }
}

/// Why a signature did not verify, in full: the reason (the metric's label
/// and the reply's details) and what exactly failed, for `explain` and the
/// debug log. It names headers and counts, never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: Reason,
    pub why: Why,
}

/// What exactly failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why {
    /// A header the scheme signs or needs is absent.
    NoHeader(String),
    /// A header is not text (not UTF-8).
    NotText(String),
    /// A header's value is not in the scheme's form: what it should be.
    Form {
        header: String,
        expected: &'static str,
    },
    /// The header carries only signature versions the scheme does not
    /// check (e.g. Standard Webhooks' asymmetric `v1a`), named.
    Unsupported {
        header: String,
        versions: Vec<String>,
    },
    /// The timestamp is not a whole number of seconds.
    NotANumber(String),
    /// The timestamp is `skew_s` seconds from the clock (negative: in the
    /// past), more than the tolerance.
    Skew {
        header: String,
        skew_s: i64,
        tolerance_s: u64,
    },
    /// No signature in the header matched the HMAC of any secret.
    Mismatch { signatures: usize, secrets: usize },
    /// The body could be a CRC token, which this source's CRC handshake
    /// signs for anyone: never verified.
    TokenBody,
    /// Where Ed25519 is in play: no HMAC signature matched any HMAC secret
    /// and no Ed25519 signature verified under any public key (each
    /// counted).
    NoMatch {
        hmac_signatures: usize,
        secrets: usize,
        ed25519_signatures: usize,
        public_keys: usize,
    },
    /// Twilio: the URL's `bodySHA256` is not the body's SHA-256.
    BodyHash,
    /// The body is over max_json_bytes: never verified.
    OverLimit,
}

impl Failure {
    fn new(reason: Reason, why: Why) -> Self {
        Failure { reason, why }
    }

    pub fn over_limit() -> Self {
        Failure::new(Reason::OverLimit, Why::OverLimit)
    }

    fn missing(header: &str) -> Self {
        Failure::new(Reason::Missing, Why::NoHeader(header.to_owned()))
    }

    fn form(header: &str, expected: &'static str) -> Self {
        Failure::new(
            Reason::Malformed,
            Why::Form {
                header: header.to_owned(),
                expected,
            },
        )
    }
}

/// The versions named in a signature list that has none the scheme checks:
/// the short alphanumeric tokens before a separator (at most four, each at
/// most 8 characters, so a hostile header cannot make this long).
fn versions<'v>(items: impl Iterator<Item = &'v str>, sep: char) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let Some((v, _)) = item.trim().split_once(sep) else {
            continue;
        };
        let token = !v.is_empty() && v.len() <= 8 && v.bytes().all(|b| b.is_ascii_alphanumeric());
        if token && !out.iter().any(|o| o == v) && out.len() < 4 {
            out.push(v.to_owned());
        }
    }
    out
}

enum Mac {
    Sha1(Hmac<sha1::Sha1>),
    Sha256(Hmac<sha2::Sha256>),
    Sha512(Hmac<sha2::Sha512>),
}

impl Mac {
    fn new(alg: Algorithm, key: &[u8]) -> Option<Mac> {
        Some(match alg {
            Algorithm::Sha1 => Mac::Sha1(Hmac::new_from_slice(key).ok()?),
            Algorithm::Sha256 => Mac::Sha256(Hmac::new_from_slice(key).ok()?),
            Algorithm::Sha512 => Mac::Sha512(Hmac::new_from_slice(key).ok()?),
            Algorithm::Ed25519 => return None,
        })
    }

    fn update(&mut self, b: &[u8]) {
        match self {
            Mac::Sha1(m) => m.update(b),
            Mac::Sha256(m) => m.update(b),
            Mac::Sha512(m) => m.update(b),
        }
    }

    fn tag(self) -> Vec<u8> {
        match self {
            Mac::Sha1(m) => m.finalize().into_bytes().to_vec(),
            Mac::Sha256(m) => m.finalize().into_bytes().to_vec(),
            Mac::Sha512(m) => m.finalize().into_bytes().to_vec(),
        }
    }
}

/// At most this many Ed25519 signatures of one request are checked: each
/// hashes the whole body once per public key, so a header listing many
/// would multiply the work (Standard Webhooks sends one per active key).
pub const MAX_ED25519_SIGNATURES: usize = 4;

/// What the body is to a check besides signed bytes.
enum BodyRule {
    /// Signed as it streams.
    Streamed,
    /// Twilio's form body: its fields, sorted, are signed after the URL,
    /// so the whole body is needed at `finish`.
    TwilioForm,
    /// Twilio's JSON body: the URL's `bodySHA256` (lowercase hex) must be
    /// its SHA-256.
    Sha256 {
        hash: Box<sha2::Sha256>,
        expected: Vec<u8>,
    },
}

/// A check under way: one HMAC per secret (per URL form, for Twilio), one
/// Ed25519 verifier per public key and signature, and the signatures the
/// request carries. Small where it is held (a held request's state is
/// charged by its size), the rest boxed.
pub struct Pending {
    macs: Vec<Mac>,
    rest: Box<Rest>,
}

struct Rest {
    signatures: Vec<Vec<u8>>,
    eds: Vec<ed25519_dalek::StreamVerifier>,
    /// Counts for the failure's story: HMAC secrets, Ed25519 signatures
    /// and public keys; whether Ed25519 is in play at all.
    secrets: usize,
    ed_signatures: usize,
    public_keys: usize,
    ed25519: bool,
    /// The signed content after the body.
    after: Vec<u8>,
    body: BodyRule,
    /// With `refuses_tokens`: the body's length while every byte of it is a
    /// token's (`None` once one is not, or it outgrows a token).
    token_body: Option<usize>,
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Pending({} secret(s), {} public key(s))",
            self.rest.secrets, self.rest.public_keys
        )
    }
}

impl Pending {
    pub fn update(&mut self, chunk: &[u8]) {
        // Twilio signs a form's sorted fields (at `finish`), and a JSON
        // body only through its hash in the URL.
        let rest = self.rest.as_mut();
        if matches!(rest.body, BodyRule::Streamed) {
            for m in &mut self.macs {
                m.update(chunk);
            }
        }
        for v in &mut rest.eds {
            v.update(chunk);
        }
        rest.token_body = rest.token_body.map(|n| n + chunk.len()).filter(|&n| {
            n <= crate::names::MAX_TOKEN && chunk.iter().all(|&b| crate::names::token_byte(b))
        });
        if let BodyRule::Sha256 { hash, .. } = &mut rest.body {
            sha2::Digest::update(hash.as_mut(), chunk);
        }
    }

    /// Whether `finish` needs the whole body (the caller keeps it, counted
    /// as any body it keeps); otherwise `finish` ignores it.
    pub fn keeps_body(&self) -> bool {
        matches!(self.rest.body, BodyRule::TwilioForm)
    }

    /// Whether any secret's HMAC equals any of the signatures, or any
    /// Ed25519 signature verifies under any public key; every HMAC pair is
    /// compared, each in constant time. `body`: the whole body where
    /// `keeps_body` says so.
    pub fn finish(self, body: &[u8]) -> Result<(), Failure> {
        let Pending { mut macs, rest } = self;
        let Rest {
            signatures,
            eds,
            secrets,
            ed_signatures,
            public_keys,
            ed25519,
            after,
            body: rule,
            token_body,
        } = *rest;
        if token_body.is_some() {
            return Err(Failure::new(Reason::Mismatch, Why::TokenBody));
        }
        if let BodyRule::TwilioForm = rule {
            let signed = twilio_fields(body);
            for m in &mut macs {
                m.update(&signed);
            }
        }
        let mut ok = false;
        for mut m in macs {
            m.update(&after);
            let tag = m.tag();
            for s in &signatures {
                ok |= ct_eq(&tag, s);
            }
        }
        for mut v in eds {
            v.update(&after);
            ok |= v.finalize_and_verify().is_ok();
        }
        if !ok {
            let why = if ed25519 {
                Why::NoMatch {
                    hmac_signatures: signatures.len(),
                    secrets,
                    ed25519_signatures: ed_signatures,
                    public_keys,
                }
            } else {
                Why::Mismatch {
                    signatures: signatures.len(),
                    secrets,
                }
            };
            return Err(Failure::new(Reason::Mismatch, why));
        }
        if let BodyRule::Sha256 { hash, expected } = rule {
            let got = hex::encode(sha2::Digest::finalize(*hash));
            if !ct_eq(got.as_bytes(), &expected) {
                return Err(Failure::new(Reason::Mismatch, Why::BodyHash));
            }
        }
        Ok(())
    }

    /// Bytes this check keeps, for the held-bytes budget.
    pub fn size(&self) -> usize {
        let rest = self.rest.as_ref();
        let hash = match &rest.body {
            BodyRule::Sha256 { expected, .. } => {
                std::mem::size_of::<sha2::Sha256>() + expected.len()
            }
            _ => 0,
        };
        std::mem::size_of::<Self>()
            + std::mem::size_of::<Rest>()
            + self.macs.len() * std::mem::size_of::<Mac>()
            + rest.eds.len() * std::mem::size_of::<ed25519_dalek::StreamVerifier>()
            + rest.signatures.iter().map(Vec::len).sum::<usize>()
            + rest.after.capacity()
            + hash
    }
}

/// A Twilio form body as its RequestValidator signs it: every field name
/// once, sorted, each followed by its distinct values, sorted (bytes of
/// UTF-8 sort as Python's strings do).
fn twilio_fields(body: &[u8]) -> Vec<u8> {
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

/// A signature list with no version the scheme checks: unsupported when it
/// names others (e.g. only `v2`), else malformed as `otherwise` says.
fn unsupported_or(
    header: &str,
    versions: Vec<String>,
    otherwise: impl FnOnce() -> Failure,
) -> Failure {
    if versions.is_empty() {
        return otherwise();
    }
    Failure::new(
        Reason::Malformed,
        Why::Unsupported {
            header: header.to_owned(),
            versions,
        },
    )
}

/// Equal bytes, in time that depends only on the lengths (RustCrypto's
/// `subtle`, already in the tree through `digest`).
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(a, b))
}

/// A 64-byte Ed25519 signature, or `None`.
fn ed_signature(bytes: &[u8]) -> Option<[u8; 64]> {
    bytes.try_into().ok()
}

/// The path as sent, split at its query.
fn path_and_query(path: &str) -> (&str, &str) {
    path.split_once('?').unwrap_or((path, ""))
}

/// What `start` sets up once the scheme has read the headers.
struct Plan {
    /// The HMAC, where the scheme uses one.
    hmac: Option<Algorithm>,
    /// Whether the scheme takes Ed25519 signatures (and public keys).
    ed25519: bool,
    /// The signed content before the body, one per URL form the scheme
    /// accepts (one but for Twilio's).
    prefixes: Vec<Vec<u8>>,
    after: Vec<u8>,
    signatures: Vec<Vec<u8>>,
    ed_signatures: Vec<[u8; 64]>,
    body: BodyRule,
}

impl Plan {
    fn hmac(alg: Algorithm, prefix: Vec<u8>, signatures: Vec<Vec<u8>>) -> Plan {
        Plan {
            hmac: Some(alg),
            ed25519: false,
            prefixes: vec![prefix],
            after: Vec::new(),
            signatures,
            ed_signatures: Vec::new(),
            body: BodyRule::Streamed,
        }
    }
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
        let text = |name: &str| -> Result<&'h str, Failure> {
            let v = header(name).ok_or_else(|| Failure::missing(name))?;
            std::str::from_utf8(v)
                .map_err(|_| Failure::new(Reason::Malformed, Why::NotText(name.to_owned())))
        };
        let fresh = |name: &str, ts: &str, ms: bool| -> Result<(), Failure> {
            let t: u64 = ts
                .trim()
                .parse()
                .map_err(|_| Failure::new(Reason::Malformed, Why::NotANumber(name.to_owned())))?;
            let t = if ms { t / 1000 } else { t };
            if t.abs_diff(now_s) > self.tolerance_s {
                // Both are below 2^64; the difference is clamped, never wraps.
                let skew = i128::from(t) - i128::from(now_s);
                let skew_s =
                    i64::try_from(skew).unwrap_or(if skew < 0 { i64::MIN } else { i64::MAX });
                return Err(Failure::new(
                    Reason::Expired,
                    Why::Skew {
                        header: name.to_owned(),
                        skew_s,
                        tolerance_s: self.tolerance_s,
                    },
                ));
            }
            Ok(())
        };
        let plan: Plan = match &self.scheme {
            Scheme::Stripe => {
                const H: &str = "stripe-signature";
                let h = text(H)?;
                let mut t = None;
                let mut sigs = Vec::new();
                for item in h.split(',') {
                    match item.trim().split_once('=') {
                        Some(("t", v)) if t.is_none() => t = Some(v),
                        Some(("v1", v)) => sigs.extend(hex::decode(v).ok()),
                        _ => {}
                    }
                }
                let t = t.ok_or_else(|| Failure::form(H, "t=<timestamp>,v1=<hex>: no t="))?;
                if sigs.is_empty() {
                    let signed = h.split(',').filter(|i| !i.trim().starts_with("t="));
                    return Err(unsupported_or(H, versions(signed, '='), || {
                        Failure::form(H, "t=<timestamp>,v1=<hex>: no v1= with hex")
                    }));
                }
                fresh(H, t, false)?;
                Plan::hmac(Algorithm::Sha256, format!("{t}.").into_bytes(), sigs)
            }
            Scheme::Github => {
                const H: &str = "x-hub-signature-256";
                let h = text(H)?;
                let sig = h
                    .strip_prefix("sha256=")
                    .ok_or_else(|| Failure::form(H, "sha256=<hex>: no sha256= prefix"))?;
                let sig =
                    hex::decode(sig).map_err(|_| Failure::form(H, "sha256=<hex>: not hex"))?;
                Plan::hmac(Algorithm::Sha256, Vec::new(), vec![sig])
            }
            Scheme::Shopify => {
                let (name, h) = match text("x-shopify-hmac-sha256") {
                    Ok(h) => ("x-shopify-hmac-sha256", h),
                    // The unprefixed name some of Shopify's senders use.
                    Err(first) => (
                        "shopify-hmac-sha256",
                        text("shopify-hmac-sha256").map_err(|_| first)?,
                    ),
                };
                let sig = STANDARD
                    .decode(h.trim())
                    .map_err(|_| Failure::form(name, "<base64>: not base64"))?;
                Plan::hmac(Algorithm::Sha256, Vec::new(), vec![sig])
            }
            Scheme::Slack => {
                const H: &str = "x-slack-signature";
                const T: &str = "x-slack-request-timestamp";
                let sig = text(H)?;
                let ts = text(T)?;
                let sig = sig.strip_prefix("v0=").ok_or_else(|| {
                    unsupported_or(H, versions(std::iter::once(sig), '='), || {
                        Failure::form(H, "v0=<hex>: no v0= prefix")
                    })
                })?;
                let sig = hex::decode(sig).map_err(|_| Failure::form(H, "v0=<hex>: not hex"))?;
                fresh(T, ts, false)?;
                Plan::hmac(
                    Algorithm::Sha256,
                    format!("v0:{ts}:").into_bytes(),
                    vec![sig],
                )
            }
            Scheme::StandardWebhooks | Scheme::Svix => {
                let svix = matches!(self.scheme, Scheme::Svix);
                // Svix's library takes its own names first, then the
                // unbranded ones.
                let named = |n: &str| -> Result<(String, &'h str), Failure> {
                    if svix {
                        let own = format!("svix-{n}");
                        match text(&own) {
                            Err(Failure {
                                reason: Reason::Missing,
                                ..
                            }) => {}
                            other => return other.map(|v| (own, v)),
                        }
                    }
                    let plain = format!("webhook-{n}");
                    text(&plain).map(|v| (plain, v))
                };
                let (_, id) = named("id")?;
                let (ts_name, ts) = named("timestamp")?;
                let (sig_name, sig) = named("signature")?;
                let entries = || sig.split(' ');
                let sigs: Vec<Vec<u8>> = entries()
                    .filter_map(|e| e.strip_prefix("v1,"))
                    .filter_map(|b| STANDARD.decode(b).ok())
                    .collect();
                let v1a = entries().filter(|e| e.starts_with("v1a,")).count();
                if v1a > MAX_ED25519_SIGNATURES {
                    return Err(Failure::form(
                        &sig_name,
                        "v1,<base64> and v1a,<base64> entries: at most 4 v1a",
                    ));
                }
                let eds: Vec<[u8; 64]> = entries()
                    .filter_map(|e| e.strip_prefix("v1a,"))
                    .filter_map(|b| STANDARD.decode(b).ok())
                    .filter_map(|b| ed_signature(&b))
                    .collect();
                if sigs.is_empty() && eds.is_empty() {
                    // v1 and v1a entries here had no base64 signature:
                    // malformed, not unsupported.
                    let others =
                        entries().filter(|e| !e.starts_with("v1,") && !e.starts_with("v1a,"));
                    return Err(unsupported_or(&sig_name, versions(others, ','), || {
                        Failure::form(
                            &sig_name,
                            "v1,<base64> or v1a,<base64> entries: none with base64",
                        )
                    }));
                }
                fresh(&ts_name, ts, false)?;
                Plan {
                    ed25519: secrets.iter().any(|s| s.1 != Key::Hmac) || !eds.is_empty(),
                    ed_signatures: eds,
                    ..Plan::hmac(Algorithm::Sha256, format!("{id}.{ts}.").into_bytes(), sigs)
                }
            }
            Scheme::Discord => {
                const H: &str = "x-signature-ed25519";
                const T: &str = "x-signature-timestamp";
                let sig = text(H)?;
                let ts = text(T)?;
                let sig = hex::decode(sig.trim())
                    .ok()
                    .and_then(|b| ed_signature(&b))
                    .ok_or_else(|| Failure::form(H, "<hex>: 64 bytes of Ed25519 signature"))?;
                fresh(T, ts, false)?;
                Plan {
                    hmac: None,
                    ed25519: true,
                    prefixes: vec![ts.as_bytes().to_vec()],
                    after: Vec::new(),
                    signatures: Vec::new(),
                    ed_signatures: vec![sig],
                    body: BodyRule::Streamed,
                }
            }
            Scheme::Twilio => {
                const H: &str = "x-twilio-signature";
                let sig = text(H)?;
                let sig = STANDARD
                    .decode(sig.trim())
                    .map_err(|_| Failure::form(H, "<base64>: not base64"))?;
                let (_, query) = path_and_query(request.path);
                // As Twilio's validator reads it: a `bodySHA256` parameter
                // makes the body JSON, hashed; otherwise its form fields
                // are signed.
                let expected = query
                    .split('&')
                    .find_map(|p| p.strip_prefix("bodySHA256="))
                    .map(|v| v.as_bytes().to_vec());
                let body = match expected {
                    Some(expected) => BodyRule::Sha256 {
                        hash: Box::new(<sha2::Sha256 as sha2::Digest>::new()),
                        expected,
                    },
                    None => BodyRule::TwilioForm,
                };
                Plan {
                    prefixes: self.urls(request.path),
                    body,
                    ..Plan::hmac(Algorithm::Sha1, Vec::new(), vec![sig])
                }
            }
            Scheme::Custom(c) => {
                let h = text(&c.header)?;
                let enc = h
                    .strip_prefix(c.prefix.as_str())
                    .ok_or_else(|| Failure::form(&c.header, "the configured prefix is missing"))?;
                let sig = match c.encoding {
                    Encoding::Hex => hex::decode(enc.trim())
                        .map_err(|_| Failure::form(&c.header, "not hex after the prefix"))?,
                    Encoding::Base64 => STANDARD
                        .decode(enc.trim())
                        .map_err(|_| Failure::form(&c.header, "not base64 after the prefix"))?,
                };
                let ts = match &c.timestamp_header {
                    Some(t) => {
                        let ts = text(t)?;
                        fresh(t, ts, c.timestamp_ms)?;
                        Some(ts)
                    }
                    None => None,
                };
                let (path, query) = path_and_query(request.path);
                let url = self.urls(request.path).swap_remove(0);
                let (mut before, mut after) = (Vec::new(), Vec::new());
                let mut past_body = false;
                for p in &c.signed {
                    let out = if past_body { &mut after } else { &mut before };
                    match p {
                        Part::Text(t) => out.extend_from_slice(t.as_bytes()),
                        Part::Timestamp => out.extend_from_slice(ts.unwrap_or("").as_bytes()),
                        Part::Header(n) => {
                            out.extend_from_slice(header(n).ok_or_else(|| Failure::missing(n))?)
                        }
                        Part::Method => out.extend_from_slice(request.method.as_bytes()),
                        Part::Url => out.extend_from_slice(&url),
                        Part::Path => out.extend_from_slice(path.as_bytes()),
                        Part::Query => out.extend_from_slice(query.as_bytes()),
                        Part::Body => past_body = true,
                    }
                }
                if c.algorithm == Algorithm::Ed25519 {
                    let sig = ed_signature(&sig).ok_or_else(|| {
                        Failure::form(&c.header, "64 bytes of Ed25519 signature after the prefix")
                    })?;
                    Plan {
                        hmac: None,
                        ed25519: true,
                        prefixes: vec![before],
                        after,
                        signatures: Vec::new(),
                        ed_signatures: vec![sig],
                        body: BodyRule::Streamed,
                    }
                } else {
                    Plan {
                        after,
                        ..Plan::hmac(c.algorithm, before, vec![sig])
                    }
                }
            }
        };
        let mut macs = Vec::with_capacity(secrets.len() * plan.prefixes.len());
        let mut eds = Vec::new();
        let (mut hmac_secrets, mut public_keys) = (0, 0);
        for s in secrets {
            match (&s.1, plan.hmac) {
                (Key::Hmac, Some(alg)) => {
                    hmac_secrets += 1;
                    for prefix in &plan.prefixes {
                        // Any key length is valid for HMAC: this never fails.
                        let Some(mut m) = Mac::new(alg, &s.0) else {
                            continue;
                        };
                        m.update(prefix);
                        macs.push(m);
                    }
                }
                (Key::Ed25519(key), _) if plan.ed25519 => {
                    public_keys += 1;
                    for sig in &plan.ed_signatures {
                        let sig = ed25519_dalek::Signature::from_bytes(sig);
                        // A signature whose scalar is not canonical never
                        // verifies.
                        let Ok(mut v) = key.verify_stream(&sig) else {
                            continue;
                        };
                        for prefix in plan.prefixes.iter().take(1) {
                            v.update(prefix);
                        }
                        eds.push(v);
                    }
                }
                _ => {}
            }
        }
        Ok(Pending {
            macs,
            rest: Box::new(Rest {
                signatures: plan.signatures,
                eds,
                secrets: hmac_secrets,
                ed_signatures: plan.ed_signatures.len(),
                public_keys,
                ed25519: plan.ed25519,
                after: plan.after,
                body: plan.body,
                token_body: self.refuses_tokens.then_some(0),
            }),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    const REQ: Request<'static> = Request {
        method: "POST",
        path: "/",
    };

    fn hmac256(key: &[u8], msg: &[u8]) -> Vec<u8> {
        let mut m = Mac::new(Algorithm::Sha256, key).unwrap();
        m.update(msg);
        m.tag()
    }

    #[test]
    fn github_over_chunks_and_rotation() {
        let v = Verify {
            scheme: Scheme::Github,
            secrets: Secrets::All(vec![]),
            tolerance_s: 300,
            on_failure: OnFailure::Reject,
            public_url: None,
            mode: Mode::Hold,
            refuses_tokens: false,
        };
        let body = b"{\"zen\":\"hi\"}";
        let sig = format!("sha256={}", hex::encode(hmac256(b"new", body)));
        let hdr = |n: &str| (n == "x-hub-signature-256").then_some(sig.as_bytes());
        let secrets = [Secret::hmac(b"old".to_vec()), Secret::hmac(b"new".to_vec())];
        let mut p = v.start(&secrets, hdr, REQ, 0).unwrap();
        p.update(&body[..3]);
        p.update(&body[3..]);
        assert_eq!(p.finish(b""), Ok(()));
        let reason = |r: Result<(), Failure>| r.map_err(|f| f.reason);
        assert_eq!(
            v.check(&secrets[..1], hdr, REQ, body, 0),
            Err(Failure::new(
                Reason::Mismatch,
                Why::Mismatch {
                    signatures: 1,
                    secrets: 1
                }
            ))
        );
        assert_eq!(
            reason(v.check(&secrets, hdr, REQ, b"{\"zen\":\"hI\"}", 0)),
            Err(Reason::Mismatch)
        );
        assert_eq!(
            v.check(&secrets, |_| None, REQ, body, 0),
            Err(Failure::missing("x-hub-signature-256"))
        );
        let bad = |n: &str| (n == "x-hub-signature-256").then_some(b"sha1=00".as_slice());
        assert_eq!(
            reason(v.check(&secrets, bad, REQ, body, 0)),
            Err(Reason::Malformed)
        );
    }

    fn verify(scheme: Scheme, public_url: Option<PublicUrl>) -> Verify {
        Verify {
            scheme,
            secrets: Secrets::All(vec![]),
            tolerance_s: 300,
            on_failure: OnFailure::Reject,
            public_url,
            mode: Mode::Hold,
            refuses_tokens: false,
        }
    }

    fn pairs<'h>(h: &'h [(&str, String)]) -> impl Fn(&str) -> Option<&'h [u8]> {
        |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_bytes())
    }

    /// Twilio's own example (its RequestValidator's documentation and
    /// tests): the URL, then the form's fields sorted by name.
    #[test]
    fn twilio_signs_the_url_and_the_sorted_form() {
        let url = PublicUrl {
            origin: "https://mycompany.com".into(),
            bare: "https://mycompany.com".into(),
            with_port: "https://mycompany.com:443".into(),
        };
        let v = verify(Scheme::Twilio, Some(url));
        let h = [(
            "x-twilio-signature",
            "RSOYDt4T1cUTdK1PDd93/VVr8B8=".to_owned(),
        )];
        let req = Request {
            method: "POST",
            path: "/myapp.php?foo=1&bar=2",
        };
        // The fields in another order than signed, as a client may send them.
        let body = b"To=%2B18005551212&Digits=1234&CallSid=CA1234567890ABCDE&From=%2B14158675309&Caller=%2B14158675309";
        let token = [Secret::hmac(b"12345".to_vec())];
        let mut p = v.start(&token, pairs(&h), req, 0).unwrap();
        assert!(p.keeps_body());
        for chunk in body.chunks(7) {
            p.update(chunk);
        }
        assert_eq!(p.finish(body), Ok(()));
        let changed = b"To=%2B18005551212&Digits=1235&CallSid=CA1234567890ABCDE&From=%2B14158675309&Caller=%2B14158675309";
        assert!(v.check(&token, pairs(&h), req, changed, 0).is_err());
        let other = Request {
            method: "POST",
            path: "/myapp.php?foo=1&bar=3",
        };
        assert!(v.check(&token, pairs(&h), other, body, 0).is_err());
    }

    /// Ed25519 verified as the body streams, under any key of a rotation
    /// list; the content after `{body}` fed at the end.
    #[test]
    fn ed25519_over_chunks_with_content_after_the_body() {
        use ed25519_dalek::{Signer, SigningKey};
        let sk = SigningKey::from_bytes(&[7u8; 32]);
        let other = SigningKey::from_bytes(&[8u8; 32]);
        let key = |k: &SigningKey| {
            Secret(
                k.verifying_key().to_bytes().to_vec(),
                Key::Ed25519(k.verifying_key()),
            )
        };
        let v = verify(
            Scheme::Custom(Custom {
                header: "x-sig".into(),
                prefix: String::new(),
                encoding: Encoding::Hex,
                algorithm: Algorithm::Ed25519,
                timestamp_header: Some("x-ts".into()),
                timestamp_ms: false,
                signed: vec![Part::Method, Part::Path, Part::Body, Part::Timestamp],
            }),
            None,
        );
        let body = b"{\"id\":\"evt_1\",\"pad\":\"xxxxxxxxxxxxxxxxxxxx\"}";
        let mut msg = b"PUT/hooks".to_vec();
        msg.extend_from_slice(body);
        msg.extend_from_slice(b"1700000000");
        let h = [
            ("x-sig", hex::encode(sk.sign(&msg).to_bytes())),
            ("x-ts", "1700000000".to_owned()),
        ];
        let req = Request {
            method: "PUT",
            path: "/hooks?x=1",
        };
        let keys = [key(&other), key(&sk)];
        let mut p = v.start(&keys, pairs(&h), req, 1_700_000_000).unwrap();
        assert!(!p.keeps_body());
        for chunk in body.chunks(5) {
            p.update(chunk);
        }
        assert_eq!(p.finish(b""), Ok(()));
        let post = Request {
            method: "POST",
            path: "/hooks",
        };
        assert_eq!(
            v.check(&keys, pairs(&h), post, body, 1_700_000_000)
                .map_err(|f| f.why),
            Err(Why::NoMatch {
                hmac_signatures: 0,
                secrets: 0,
                ed25519_signatures: 1,
                public_keys: 2
            })
        );
        assert!(v
            .check(&keys[..1], pairs(&h), req, body, 1_700_000_000)
            .is_err());
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret::hmac(b"whsec_topsecret".to_vec());
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
    }
}
