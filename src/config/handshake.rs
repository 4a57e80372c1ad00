//! A source's `handshake`: `"slack"`, `"discord"`, `"zoom"`,
//! `{"scheme": "meta", "verify_token": {"env": NAME}}` or
//! `{"scheme": "crc", "query": "crc_token"}`.

use super::diag::{Diags, Scope};
use super::fields::{did_you_mean, field, unknown_fields, Env};
use crate::handshake::Handshake;
use crate::verify::{Secret, Secrets, Verify};
use serde_json::{Map, Value};

/// The handshakes' names (`providers`).
fn names() -> Vec<&'static str> {
    crate::providers::listed(|p| p.handshake)
}

/// Checks a source's handshake against its verification: a POST handshake
/// is answered only once its signature verified, so it needs `verify`;
/// Zoom's and the CRC's answers are signed with the source's first secret.
pub(super) fn check(
    v: &Value,
    verify: Option<&Verify>,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Option<Handshake> {
    let h = match v {
        Value::String(s) => named(s, scope, d)?,
        Value::Object(o) => match field(o, "scheme").and_then(Value::as_str) {
            Some("meta") => meta(o, scope, env, d)?,
            Some("crc") => crc(o, scope, d)?,
            _ => {
                d.push(
                    scope,
                    "bad_handshake",
                    "a handshake object needs \"scheme\": \"meta\" or \"crc\"",
                );
                return None;
            }
        },
        _ => {
            d.push(
                scope,
                "bad_handshake",
                format!(
                    "handshake must be one of {} (meta and crc as objects)",
                    names().join(", ")
                ),
            );
            return None;
        }
    };
    if !h.on_get() && verify.is_none() {
        d.push(
            scope,
            "handshake_needs_verify",
            format!(
                "the {} handshake is answered only once its signature verified: give the source a verify",
                h.name()
            ),
        );
    }
    if h.signs() && verify.is_none() {
        d.push(
            scope,
            "handshake_needs_secret",
            format!(
                "the {} handshake signs its answer with the source's first secret: give the source a verify with secrets",
                h.name()
            ),
        );
    }
    if let Some(whose) = verify.filter(|_| h.signs()).and_then(public_first) {
        d.push(
            scope,
            "handshake_needs_hmac_secret",
            format!(
                "the {} handshake signs its answer with an HMAC under {whose}, which is an Ed25519 public key (anyone could make that answer): list an HMAC secret first",
                h.name()
            ),
        );
    }
    Some(h)
}

/// Which first secret (the list's, or a tenant's) is an Ed25519 public
/// key, which no handshake's HMAC may be keyed with; `None` where none is.
fn public_first(v: &Verify) -> Option<String> {
    let public = |s: &[Secret]| s.first().is_some_and(Secret::is_public_key);
    match &v.secrets {
        Secrets::All(s) => public(s).then(|| "the source's first secret".to_owned()),
        Secrets::PerTenant(m) => m
            .iter()
            .find(|(_, s)| public(s))
            .map(|(t, _)| format!("tenant {t:?}'s first secret")),
    }
}

/// A handshake by its name alone.
fn named(s: &str, scope: &Scope, d: &mut Diags) -> Option<Handshake> {
    match s {
        "slack" => Some(Handshake::Slack),
        "discord" => Some(Handshake::Discord),
        "zoom" => Some(Handshake::Zoom),
        "meta" | "crc" => {
            d.push(
                scope,
                "bad_handshake",
                format!(
                    "handshake {s:?} takes an object: {}",
                    if s == "meta" {
                        r#"{"scheme": "meta", "verify_token": {"env": NAME}}"#
                    } else {
                        r#"{"scheme": "crc", "query": "crc_token"}"#
                    }
                ),
            );
            None
        }
        other => {
            d.push(
                scope,
                "bad_handshake",
                format!(
                    "unknown handshake {other:?}{} (known: {})",
                    did_you_mean(other, &names()),
                    names().join(", ")
                ),
            );
            None
        }
    }
}

/// `{"scheme": "meta", "verify_token": {"env": NAME}}`.
fn meta(o: &Map<String, Value>, scope: &Scope, env: Env, d: &mut Diags) -> Option<Handshake> {
    unknown_fields(o, &["scheme", "verify_token"], scope, d);
    let Some(t) = field(o, "verify_token") else {
        d.push(
            scope,
            "bad_handshake",
            "a meta handshake needs verify_token: {\"env\": NAME}",
        );
        return None;
    };
    let mut tokens = super::secrets::secret_list(
        std::slice::from_ref(t),
        "handshake verify_token",
        false,
        scope,
        env,
        d,
    );
    if tokens.is_empty() {
        return None;
    }
    Some(Handshake::Meta {
        token: tokens.remove(0),
    })
}

/// `{"scheme": "crc", "query": "crc_token"}`.
fn crc(o: &Map<String, Value>, scope: &Scope, d: &mut Diags) -> Option<Handshake> {
    unknown_fields(o, &["scheme", "query"], scope, d);
    let query = match field(o, "query") {
        None => "crc_token".to_owned(),
        Some(Value::String(q))
            if !q.is_empty()
                && q.len() <= 64
                && q.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) =>
        {
            q.clone()
        }
        Some(other) => {
            d.push(
                scope,
                "bad_handshake",
                format!("handshake query must be a query parameter's name ([A-Za-z0-9._-]{{1,64}}), got {other}"),
            );
            return None;
        }
    };
    Some(Handshake::Crc { query })
}

#[cfg(test)]
mod tests {
    use super::super::diag::{Diags, Scope};
    use serde_json::{json, Value};

    /// Every handshake a provider's row names is one the checker takes (as
    /// its name, or for meta and crc as an object).
    #[test]
    fn every_providers_handshake_is_known() {
        let env = |_: &str| Some("token".to_owned());
        for name in super::names() {
            let mut d = Diags::default();
            let form = match name {
                "meta" => json!({"scheme": "meta", "verify_token": {"env": "T"}}),
                "crc" => json!({"scheme": "crc"}),
                n => Value::String(n.to_owned()),
            };
            let h = super::check(&form, None, &Scope::Config, &env, &mut d);
            assert_eq!(h.map(|h| h.name()), Some(name));
        }
    }
}
