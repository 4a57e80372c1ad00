//! Provider signatures, verified at the edge before any key is stamped: a
//! forged request never claims a key.
//!
//! A check starts at the request headers (`Verify::start`: the signature
//! header parsed, the timestamp checked, one HMAC per secret keyed and fed
//! the signed prefix), takes the body chunk by chunk (`Pending::update`), so
//! no copy of the body is needed for it, and ends with the comparison
//! (`Pending::finish`), in constant time against every signature the header
//! carries and every secret of a rotation list.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use hmac::{Hmac, Mac as _};
use std::fmt;

/// A secret's bytes. Never printed: its `Debug` is redacted, and no error
/// message quotes it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub Vec<u8>);

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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Hex,
    Base64,
}

/// One piece of the signed content before the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    /// The timestamp header's value.
    Timestamp,
    /// A header's value (lowercase name).
    Header(String),
}

/// A generic HMAC scheme: `header` carries `prefix` + the encoded HMAC of
/// `signed` followed by the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Custom {
    pub header: String,
    pub prefix: String,
    pub encoding: Encoding,
    pub algorithm: Algorithm,
    pub timestamp_header: Option<String>,
    pub signed: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheme {
    Stripe,
    Github,
    Shopify,
    Slack,
    StandardWebhooks,
    Svix,
    Custom(Custom),
}

pub const PRESETS: &[&str] = &[
    "stripe",
    "github",
    "shopify",
    "slack",
    "standard_webhooks",
    "svix",
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
            Scheme::Custom(c) => &c.header,
        }
    }

    /// Standard Webhooks' secrets are `whsec_` + base64 of the key bytes.
    pub fn decodes_whsec(&self) -> bool {
        matches!(self, Scheme::StandardWebhooks | Scheme::Svix)
    }
}

impl Verify {
    /// The headers (lowercase) whose values the signature covers, besides
    /// the signature header itself. A key read from any other header is
    /// the sender's to choose, even on a verified request.
    pub fn signed_headers(&self) -> Vec<String> {
        let names: &[&str] = match &self.scheme {
            Scheme::Stripe | Scheme::Github | Scheme::Shopify => &[],
            Scheme::Slack => &["x-slack-request-timestamp"],
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

/// A check under way: one HMAC per secret, and the signatures the request
/// carries.
pub struct Pending {
    macs: Vec<Mac>,
    signatures: Vec<Vec<u8>>,
}

impl fmt::Debug for Pending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pending({} secret(s))", self.macs.len())
    }
}

impl Pending {
    pub fn update(&mut self, chunk: &[u8]) {
        for m in &mut self.macs {
            m.update(chunk);
        }
    }

    /// Whether any secret's HMAC equals any of the signatures; every pair
    /// is compared, each in constant time.
    pub fn finish(self) -> Result<(), Failure> {
        let mut ok = false;
        let (signatures, secrets) = (self.signatures.len(), self.macs.len());
        for m in self.macs {
            let tag = m.tag();
            for s in &self.signatures {
                ok |= ct_eq(&tag, s);
            }
        }
        if ok {
            Ok(())
        } else {
            Err(Failure::new(
                Reason::Mismatch,
                Why::Mismatch {
                    signatures,
                    secrets,
                },
            ))
        }
    }

    /// Bytes this check keeps, for the held-bytes budget.
    pub fn size(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.macs.len() * std::mem::size_of::<Mac>()
            + self.signatures.iter().map(Vec::len).sum::<usize>()
    }
}

/// A signature list with no version the scheme checks: unsupported when it
/// names others (e.g. only `v1a`), else malformed as `otherwise` says.
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
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    bool::from(subtle::ConstantTimeEq::ct_eq(a, b))
}

impl Verify {
    /// The secrets for a tenant; `None` when the source does not accept it.
    pub fn secrets_for(&self, tenant: &str) -> Option<&[Secret]> {
        match &self.secrets {
            Secrets::All(s) => Some(s),
            Secrets::PerTenant(m) => m.iter().find(|(t, _)| t == tenant).map(|(_, s)| &s[..]),
        }
    }

    /// Starts the check of a request: its signature header parsed, its
    /// timestamp within tolerance of `now_s`, one HMAC per secret fed the
    /// signed content before the body. `header` gives a header's first
    /// value by lowercase name.
    pub fn start<'h>(
        &self,
        secrets: &[Secret],
        header: impl Fn(&str) -> Option<&'h [u8]>,
        now_s: u64,
    ) -> Result<Pending, Failure> {
        let text = |name: &str| -> Result<&'h str, Failure> {
            let v = header(name).ok_or_else(|| Failure::missing(name))?;
            std::str::from_utf8(v)
                .map_err(|_| Failure::new(Reason::Malformed, Why::NotText(name.to_owned())))
        };
        let fresh = |name: &str, ts: &str| -> Result<(), Failure> {
            let t: u64 = ts
                .trim()
                .parse()
                .map_err(|_| Failure::new(Reason::Malformed, Why::NotANumber(name.to_owned())))?;
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
        let (alg, prefix, signatures): (Algorithm, Vec<u8>, Vec<Vec<u8>>) = match &self.scheme {
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
                fresh(H, t)?;
                (Algorithm::Sha256, format!("{t}.").into_bytes(), sigs)
            }
            Scheme::Github => {
                const H: &str = "x-hub-signature-256";
                let h = text(H)?;
                let sig = h
                    .strip_prefix("sha256=")
                    .ok_or_else(|| Failure::form(H, "sha256=<hex>: no sha256= prefix"))?;
                let sig =
                    hex::decode(sig).map_err(|_| Failure::form(H, "sha256=<hex>: not hex"))?;
                (Algorithm::Sha256, Vec::new(), vec![sig])
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
                (Algorithm::Sha256, Vec::new(), vec![sig])
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
                fresh(T, ts)?;
                (
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
                let sigs: Vec<Vec<u8>> = sig
                    .split(' ')
                    .filter_map(|e| e.strip_prefix("v1,"))
                    .filter_map(|b| STANDARD.decode(b).ok())
                    .collect();
                if sigs.is_empty() {
                    return Err(unsupported_or(
                        &sig_name,
                        versions(sig.split(' '), ','),
                        || Failure::form(&sig_name, "v1,<base64> entries: none with base64"),
                    ));
                }
                fresh(&ts_name, ts)?;
                (Algorithm::Sha256, format!("{id}.{ts}.").into_bytes(), sigs)
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
                        fresh(t, ts)?;
                        Some(ts)
                    }
                    None => None,
                };
                let mut prefix = Vec::new();
                for p in &c.signed {
                    match p {
                        Part::Text(t) => prefix.extend_from_slice(t.as_bytes()),
                        Part::Timestamp => prefix.extend_from_slice(ts.unwrap_or("").as_bytes()),
                        Part::Header(n) => {
                            prefix.extend_from_slice(header(n).ok_or_else(|| Failure::missing(n))?)
                        }
                    }
                }
                (c.algorithm, prefix, vec![sig])
            }
        };
        let mut macs = Vec::with_capacity(secrets.len());
        for s in secrets {
            // Any key length is valid for HMAC: this never fails.
            let Some(mut m) = Mac::new(alg, &s.0) else {
                continue;
            };
            m.update(&prefix);
            macs.push(m);
        }
        Ok(Pending { macs, signatures })
    }

    /// A whole request at once: the native harness's path.
    pub fn check<'h>(
        &self,
        secrets: &[Secret],
        header: impl Fn(&str) -> Option<&'h [u8]>,
        body: &[u8],
        now_s: u64,
    ) -> Result<(), Failure> {
        let mut p = self.start(secrets, header, now_s)?;
        p.update(body);
        p.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        };
        let body = b"{\"zen\":\"hi\"}";
        let sig = format!("sha256={}", hex::encode(hmac256(b"new", body)));
        let hdr = |n: &str| (n == "x-hub-signature-256").then_some(sig.as_bytes());
        let secrets = [Secret(b"old".to_vec()), Secret(b"new".to_vec())];
        let mut p = v.start(&secrets, hdr, 0).unwrap();
        p.update(&body[..3]);
        p.update(&body[3..]);
        assert_eq!(p.finish(), Ok(()));
        let reason = |r: Result<(), Failure>| r.map_err(|f| f.reason);
        assert_eq!(
            v.check(&secrets[..1], hdr, body, 0),
            Err(Failure::new(
                Reason::Mismatch,
                Why::Mismatch {
                    signatures: 1,
                    secrets: 1
                }
            ))
        );
        assert_eq!(
            reason(v.check(&secrets, hdr, b"{\"zen\":\"hI\"}", 0)),
            Err(Reason::Mismatch)
        );
        assert_eq!(
            v.check(&secrets, |_| None, body, 0),
            Err(Failure::missing("x-hub-signature-256"))
        );
        let bad = |n: &str| (n == "x-hub-signature-256").then_some(b"sha1=00".as_slice());
        assert_eq!(
            reason(v.check(&secrets, bad, body, 0)),
            Err(Reason::Malformed)
        );
    }

    #[test]
    fn secrets_never_print() {
        let s = Secret(b"whsec_topsecret".to_vec());
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
    }
}
