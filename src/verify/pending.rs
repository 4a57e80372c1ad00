//! A check under way: what a scheme read from the headers (`Plan`), the
//! HMACs and Ed25519 verifiers it seeds, fed the body chunk by chunk
//! (`Pending::update`) and compared at its end (`Pending::finish`).

use super::failure::{Failure, Reason, Why};
use super::mac::Mac;
use super::{Algorithm, Key, Secret};
use std::fmt;

/// What the body is to a check besides signed bytes.
pub(super) enum BodyRule {
    /// Signed as it streams.
    Streamed,
    /// Twilio's form body: its fields, sorted, are signed after the URL,
    /// so the whole body is needed at `finish`.
    TwilioForm,
    /// Twilio's JSON body: the URL's `bodySHA256` (lowercase hex) must be
    /// its SHA-256.
    Sha256 {
        hash: Box<crate::sha256::Sha256>,
        expected: Vec<u8>,
    },
}

/// What `start` sets up once the scheme has read the headers.
pub(super) struct Plan {
    /// The HMAC, where the scheme uses one.
    pub hmac: Option<Algorithm>,
    /// Whether the scheme takes Ed25519 signatures (and public keys).
    pub ed25519: bool,
    /// The signed content before the body, one per URL form the scheme
    /// accepts (one but for Twilio's).
    pub prefixes: Vec<Vec<u8>>,
    pub after: Vec<u8>,
    pub signatures: Vec<Vec<u8>>,
    pub ed_signatures: Vec<[u8; 64]>,
    pub body: BodyRule,
}

impl Plan {
    pub(super) fn hmac(alg: Algorithm, prefix: Vec<u8>, signatures: Vec<Vec<u8>>) -> Plan {
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

    /// An Ed25519 check of one signature over `before`, the body and
    /// `after`.
    pub(super) fn ed25519(before: Vec<u8>, after: Vec<u8>, signature: [u8; 64]) -> Plan {
        Plan {
            hmac: None,
            ed25519: true,
            prefixes: vec![before],
            after,
            signatures: Vec::new(),
            ed_signatures: vec![signature],
            body: BodyRule::Streamed,
        }
    }

    /// The check seeded: one HMAC per secret and prefix, one Ed25519
    /// verifier per public key and signature, each fed the signed content
    /// before the body.
    pub(super) fn pending(self, secrets: &[Secret], refuses_tokens: bool) -> Pending {
        let mut macs = Vec::with_capacity(secrets.len() * self.prefixes.len());
        let mut eds = Vec::new();
        let (mut hmac_secrets, mut public_keys) = (0, 0);
        for s in secrets {
            match (&s.1, self.hmac) {
                (Key::Hmac(_), Some(alg)) => {
                    hmac_secrets += 1;
                    for prefix in &self.prefixes {
                        let Some(mut m) = s.mac(alg) else {
                            continue;
                        };
                        m.update(prefix);
                        macs.push(m);
                    }
                }
                (Key::Ed25519(key), _) if self.ed25519 => {
                    public_keys += 1;
                    for sig in &self.ed_signatures {
                        let sig = ed25519_dalek::Signature::from_bytes(sig);
                        // A signature whose scalar is not canonical never
                        // verifies.
                        let Ok(mut v) = key.verify_stream(&sig) else {
                            continue;
                        };
                        for prefix in self.prefixes.iter().take(1) {
                            v.update(prefix);
                        }
                        eds.push(v);
                    }
                }
                _ => {}
            }
        }
        Pending {
            macs,
            rest: Box::new(Rest {
                signatures: self.signatures,
                eds,
                secrets: hmac_secrets,
                ed_signatures: self.ed_signatures.len(),
                public_keys,
                ed25519: self.ed25519,
                after: self.after,
                body: self.body,
                token_body: refuses_tokens.then_some(0),
            }),
        }
    }
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
            hash.update(chunk);
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
            let signed = super::twilio::fields(body);
            for m in &mut macs {
                m.update(&signed);
            }
        }
        let mut ok = false;
        for mut m in macs {
            m.update(&after);
            let tag = m.tag();
            for s in &signatures {
                ok |= ct_eq(tag.as_ref(), s);
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
            let got = hex::encode(hash.finish());
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
                std::mem::size_of::<crate::sha256::Sha256>() + expected.len()
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

/// Equal bytes, in time that depends only on the lengths (RustCrypto's
/// `subtle`, already in the tree through `digest`): eight bytes a word,
/// the tail a byte at a time. subtle hides each comparison from the
/// optimiser, so a word at a time is an eighth of the hidden steps of a
/// byte at a time; a forged request's tags are compared under every
/// secret.
pub(crate) fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::{Choice, ConstantTimeEq};
    if a.len() != b.len() {
        return false;
    }
    let ((aw, at), (bw, bt)) = (a.as_chunks::<8>(), b.as_chunks::<8>());
    let words = aw.iter().zip(bw).fold(Choice::from(1), |same, (x, y)| {
        same & u64::from_le_bytes(*x).ct_eq(&u64::from_le_bytes(*y))
    });
    bool::from(words & at.ct_eq(bt))
}
