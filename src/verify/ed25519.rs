//! Discord's Ed25519 scheme, and an Ed25519 signature's bytes as every
//! scheme that takes one reads them.

use super::failure::Failure;
use super::headers::Headers;
use super::pending::Plan;

/// A 64-byte Ed25519 signature, or `None`.
pub(super) fn signature(bytes: &[u8]) -> Option<[u8; 64]> {
    bytes.try_into().ok()
}

/// `x-signature-ed25519: <hex>` over `<x-signature-timestamp><body>`.
pub(super) fn discord(h: &Headers<'_, '_>) -> Result<Plan, Failure> {
    const H: &str = "x-signature-ed25519";
    const T: &str = "x-signature-timestamp";
    let sig = h.text(H)?;
    let ts = h.text(T)?;
    let sig = super::unhex(sig.trim())
        .and_then(|b| signature(&b))
        .ok_or_else(|| Failure::form(H, "<hex>: 64 bytes of Ed25519 signature"))?;
    h.fresh(T, ts, false)?;
    Ok(Plan::ed25519(ts.as_bytes().to_vec(), Vec::new(), sig))
}
