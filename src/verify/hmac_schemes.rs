//! The HMAC schemes whose signature is one header: Stripe's, GitHub's,
//! Shopify's and Slack's.

use super::failure::{unsupported_or, versions, Failure};
use super::headers::Headers;
use super::pending::Plan;
use super::{Algorithm, MAX_SIGNATURE_ENTRIES};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// `stripe-signature: t=<timestamp>,v1=<hex>[,v1=<hex>...]` over
/// `<timestamp>.<body>`.
pub(super) fn stripe(h: &Headers<'_, '_>) -> Result<Plan, Failure> {
    const H: &str = "stripe-signature";
    let value = h.text(H)?;
    let mut t = None;
    let mut sigs = Vec::new();
    for (n, item) in value.split(',').enumerate() {
        if n > MAX_SIGNATURE_ENTRIES {
            return Err(Failure::form(H, "t=<timestamp>,v1=<hex>: at most 8 v1="));
        }
        match item.trim().split_once('=') {
            Some(("t", v)) if t.is_none() => t = Some(v),
            Some(("v1", v)) => sigs.extend(super::unhex(v)),
            _ => {}
        }
    }
    let t = t.ok_or_else(|| Failure::form(H, "t=<timestamp>,v1=<hex>: no t="))?;
    if sigs.is_empty() {
        let signed = value.split(',').filter(|i| !i.trim().starts_with("t="));
        return Err(unsupported_or(H, versions(signed, '='), || {
            Failure::form(H, "t=<timestamp>,v1=<hex>: no v1= with hex")
        }));
    }
    h.fresh(H, t, false)?;
    Ok(Plan::hmac(
        Algorithm::Sha256,
        [t.as_bytes(), b"."].concat(),
        sigs,
    ))
}

/// `x-hub-signature-256: sha256=<hex>` over the body.
pub(super) fn github(h: &Headers<'_, '_>) -> Result<Plan, Failure> {
    const H: &str = "x-hub-signature-256";
    let sig = h
        .text(H)?
        .strip_prefix("sha256=")
        .ok_or_else(|| Failure::form(H, "sha256=<hex>: no sha256= prefix"))?;
    let sig = super::unhex(sig).ok_or_else(|| Failure::form(H, "sha256=<hex>: not hex"))?;
    Ok(Plan::hmac(Algorithm::Sha256, Vec::new(), vec![sig]))
}

/// `x-shopify-hmac-sha256: <base64>` over the body.
pub(super) fn shopify(h: &Headers<'_, '_>) -> Result<Plan, Failure> {
    let (name, value) = match h.text("x-shopify-hmac-sha256") {
        Ok(v) => ("x-shopify-hmac-sha256", v),
        // The unprefixed name some of Shopify's senders use.
        Err(first) => (
            "shopify-hmac-sha256",
            h.text("shopify-hmac-sha256").map_err(|_| first)?,
        ),
    };
    let sig = STANDARD
        .decode(value.trim())
        .map_err(|_| Failure::form(name, "<base64>: not base64"))?;
    Ok(Plan::hmac(Algorithm::Sha256, Vec::new(), vec![sig]))
}

/// `x-slack-signature: v0=<hex>` over `v0:<timestamp>:<body>`.
pub(super) fn slack(h: &Headers<'_, '_>) -> Result<Plan, Failure> {
    const H: &str = "x-slack-signature";
    const T: &str = "x-slack-request-timestamp";
    let sig = h.text(H)?;
    let ts = h.text(T)?;
    let sig = sig.strip_prefix("v0=").ok_or_else(|| {
        unsupported_or(H, versions(std::iter::once(sig), '='), || {
            Failure::form(H, "v0=<hex>: no v0= prefix")
        })
    })?;
    let sig = super::unhex(sig).ok_or_else(|| Failure::form(H, "v0=<hex>: not hex"))?;
    h.fresh(T, ts, false)?;
    Ok(Plan::hmac(
        Algorithm::Sha256,
        format!("v0:{ts}:").into_bytes(),
        vec![sig],
    ))
}
