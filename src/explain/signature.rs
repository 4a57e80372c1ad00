//! A signature's result in words: the scheme, and for a failure which
//! header and which part failed (`verify::Why`).

use crate::config::Source;
use crate::verify::{Failure, Why};

/// A signature's result, in words: the scheme, and for a failure which
/// header and which part failed.
pub(super) fn words(src: &Source, r: Option<&Result<(), Failure>>) -> String {
    let scheme = src.verify.as_ref().map(|v| &v.scheme);
    let name = scheme.map_or("none", |s| s.name());
    let header = scheme.map_or("", |s| s.signature_header());
    let Some(r) = r else {
        return "not checked".to_owned();
    };
    let Err(f) = r else {
        return format!("verified ({name}, {header})");
    };
    format!(
        "did not verify ({name}): {} [{}]",
        story(&f.why, name, header),
        f.reason.as_str()
    )
}

/// What exactly failed, under the scheme `name` whose signature header is
/// `header`.
fn story(why: &Why, name: &str, header: &str) -> String {
    match why {
        Why::NoHeader(h) => format!("the header {h} is absent"),
        Why::NotText(h) => format!("the header {h} is not text (not UTF-8)"),
        Why::Form { header, expected } => {
            format!("the header {header} is malformed: expected {expected}")
        }
        Why::Unsupported { header, versions } => format!(
            "the header {header} carries only signature versions {name} does not check here: {}",
            versions.join(", ")
        ),
        Why::NotANumber(h) => format!("the timestamp in {h} is not a whole number of seconds"),
        Why::Skew {
            header,
            skew_s,
            tolerance_s,
        } => {
            let (n, way) = if *skew_s < 0 {
                (skew_s.unsigned_abs(), "old")
            } else {
                (skew_s.unsigned_abs(), "in the future")
            };
            format!(
                "the timestamp in {header} is {n} s {way}, over the tolerance of {tolerance_s} s"
            )
        }
        Why::Mismatch {
            signatures,
            secrets,
        } => mismatch(header, *signatures, *secrets),
        Why::NoMatch {
            hmac_signatures,
            secrets,
            ed25519_signatures,
            public_keys,
        } => no_match(
            header,
            [
                ("HMAC", *hmac_signatures, "secret", *secrets),
                ("Ed25519", *ed25519_signatures, "public key", *public_keys),
            ],
        ),
        Why::BodyHash => {
            "the URL's bodySHA256 is not the SHA-256 of the body (the body was changed)".to_owned()
        }
        Why::TokenBody => "the body could be a CRC token (at most 256 token characters), which this source's CRC handshake signs for anyone: never verified".to_owned(),
        Why::OverLimit => "the body is over max_json_bytes: never verified".to_owned(),
    }
}

/// An HMAC scheme's signatures, none matching under the tenant's secrets.
fn mismatch(header: &str, signatures: usize, secrets: usize) -> String {
    let sigs = match signatures {
        1 => format!("the signature in {header}"),
        n => format!("none of the {n} signatures in {header}"),
    };
    match (signatures, secrets) {
        (_, 0) => "no secret is configured for this tenant".to_owned(),
        (1, 1) => format!("{sigs} does not match the HMAC under the secret"),
        (1, m) => format!("{sigs} matches the HMAC under none of the {m} secrets, each tried"),
        (_, 1) => format!("{sigs} matches the HMAC under the secret"),
        (_, m) => format!("{sigs} matches the HMAC under any of the {m} secrets, each tried"),
    }
}

/// A scheme of HMAC and Ed25519 signatures (Standard Webhooks'): for each
/// kind, its signatures and keys, none valid. Each row: the kind, its
/// signatures, what its key is called, its keys.
fn no_match(header: &str, kinds: [(&str, usize, &str, usize); 2]) -> String {
    let told: Vec<String> = kinds
        .iter()
        .filter(|(_, sigs, _, keys)| sigs + keys > 0)
        .map(|(kind, sigs, key, keys)| match (sigs, keys) {
            (0, n) => format!("no {kind} signature in {header} for the {n} {key}(s)"),
            (n, 0) => format!("{n} {kind} signature(s) in {header} but no {key}"),
            (1, 1) => format!("the {kind} signature in {header} does not verify under the {key}"),
            (n, m) => format!(
                "{n} {kind} signature(s) in {header}, none valid under any of the {m} {key}s, each tried"
            ),
        })
        .collect();
    if told.is_empty() {
        "no signature and no key to check it with".to_owned()
    } else {
        told.join("; ")
    }
}
