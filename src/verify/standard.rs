//! Standard Webhooks and Svix: `webhook-signature` (Svix's own names
//! first, for Svix) lists `v1,<base64>` HMACs and `v1a,<base64>` Ed25519
//! signatures over `<id>.<timestamp>.<body>`.

use super::ed25519::signature;
use super::failure::{unsupported_or, versions, Failure, Reason};
use super::headers::Headers;
use super::pending::Plan;
use super::{Algorithm, Secret, MAX_SIGNATURE_ENTRIES};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// At most this many Ed25519 signatures of one request are checked: each
/// hashes the whole body once per public key, so a header listing many
/// would multiply the work (Standard Webhooks sends one per active key).
pub const MAX_ED25519_SIGNATURES: usize = 4;

/// At most this many Ed25519 checks (signatures times public keys) for one
/// request: each hashes the whole body, and no cheap check tells which key
/// made which signature, so a forgery listing 4 signatures under 8 keys
/// would cost 32 (a sender signs once per active key: 2 under 2 keys while
/// it rotates).
pub const MAX_ED25519_CHECKS: usize = 8;

/// The header `webhook-<n>`; for Svix, `svix-<n>` first, as Svix's library
/// takes its own names first, then the unbranded ones. Its name and value.
fn named<'h>(h: &Headers<'_, 'h>, svix: bool, n: &str) -> Result<(String, &'h str), Failure> {
    if svix {
        let own = format!("svix-{n}");
        match h.text(&own) {
            Err(Failure {
                reason: Reason::Missing,
                ..
            }) => {}
            other => return other.map(|v| (own, v)),
        }
    }
    let plain = format!("webhook-{n}");
    h.text(&plain).map(|v| (plain, v))
}

pub(super) fn standard(
    h: &Headers<'_, '_>,
    svix: bool,
    secrets: &[Secret],
) -> Result<Plan, Failure> {
    let (_, id) = named(h, svix, "id")?;
    let (ts_name, ts) = named(h, svix, "timestamp")?;
    let (sig_name, sig) = named(h, svix, "signature")?;
    let entries = || sig.split(' ');
    if entries().count() > MAX_SIGNATURE_ENTRIES {
        return Err(Failure::form(
            &sig_name,
            "v1,<base64> and v1a,<base64> entries: at most 8",
        ));
    }
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
        .filter_map(|b| signature(&b))
        .collect();
    let keys = secrets.iter().filter(|s| s.is_public_key()).count();
    if eds.len().saturating_mul(keys) > MAX_ED25519_CHECKS {
        return Err(Failure::form(
            &sig_name,
            "v1a,<base64> entries: at most 8 checks (entries times public keys)",
        ));
    }
    if sigs.is_empty() && eds.is_empty() {
        // v1 and v1a entries here had no base64 signature: malformed, not
        // unsupported.
        let others = entries().filter(|e| !e.starts_with("v1,") && !e.starts_with("v1a,"));
        return Err(unsupported_or(&sig_name, versions(others, ','), || {
            Failure::form(
                &sig_name,
                "v1,<base64> or v1a,<base64> entries: none with base64",
            )
        }));
    }
    h.fresh(&ts_name, ts, false)?;
    Ok(Plan {
        ed25519: secrets.iter().any(Secret::is_public_key) || !eds.is_empty(),
        ed_signatures: eds,
        ..Plan::hmac(Algorithm::Sha256, format!("{id}.{ts}.").into_bytes(), sigs)
    })
}
