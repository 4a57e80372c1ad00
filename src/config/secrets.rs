//! A list of secrets (a verify's, the seal's keys, a handshake's token):
//! each `{"env": NAME}` or `{"value": ...}`, decoded as its scheme writes
//! its keys. A secret's value never appears in an error or a warning: only
//! the variable it came from, or its place.

use super::bounds::{bounded, within, MAX_SECRETS, MAX_TENANTS};
use super::diag::{Diags, Issue, Scope};
use super::fields::{kind, Env};
use super::{tenant_ok, Routing};
use crate::names::{env_name_ok, ENV_NAME_FORM};
use crate::providers::SchemePreset;
use crate::verify::{Algorithm, Encoding, Key, Scheme, Secret, Secrets};
use serde_json::{Map, Value};

/// How a scheme's secrets are written.
#[derive(Debug, Clone, Copy)]
pub(super) enum KeyForm {
    /// The bytes of the string (an HMAC key).
    Raw,
    /// Standard Webhooks': `whsec_` + base64 (an HMAC key) or `whpk_` +
    /// base64 (an Ed25519 public key).
    Standard,
    /// Only `whsec_` (the seal's and handshakes' lists, through
    /// `secret_list`).
    Whsec,
    /// An Ed25519 public key in this encoding.
    Public(Encoding),
}

impl KeyForm {
    pub(super) fn of(s: &Scheme) -> KeyForm {
        match s {
            Scheme::Preset(SchemePreset::StandardWebhooks | SchemePreset::Svix) => {
                KeyForm::Standard
            }
            Scheme::Preset(SchemePreset::Discord) => KeyForm::Public(Encoding::Hex),
            Scheme::Custom(c) if c.algorithm == Algorithm::Ed25519 => KeyForm::Public(c.encoding),
            _ => KeyForm::Raw,
        }
    }
}

pub(super) fn secret_list(
    list: &[Value],
    at: &str,
    whsec: bool,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Vec<Secret> {
    let form = if whsec { KeyForm::Whsec } else { KeyForm::Raw };
    key_list(list, at, form, scope, env, d)
}

/// A list of secrets, each read (`read`) and decoded as `form` says.
pub(super) fn key_list(
    list: &[Value],
    at: &str,
    form: KeyForm,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Vec<Secret> {
    if list.is_empty() {
        d.push(
            scope,
            "no_secret",
            format!("{at} is empty: at least one secret"),
        );
    }
    let mut out = Vec::new();
    for (i, s) in bounded(list, at, MAX_SECRETS, scope, d).iter().enumerate() {
        let place = format!("{at}[{i}]");
        let Some((raw, from)) = read(s, &place, scope, env, d) else {
            continue;
        };
        match decode(raw, &from, form, &place) {
            Ok(s) => out.push(s),
            Err(e) => d.issue(scope, e),
        }
    }
    out
}

/// One secret's value, and where it came from as an error may name it
/// (never the value itself): `{"env": NAME}` or `{"value": ...}`.
fn read(
    s: &Value,
    place: &str,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Option<(String, String)> {
    match s
        .as_object()
        .map(|o| (o.len(), o.get("env"), o.get("value")))
    {
        // A secret written where the variable's name goes is neither
        // looked up nor shown.
        Some((1, Some(Value::String(name)), None)) if !env_name_ok(name) => {
            d.push(
                scope,
                "bad_env_name",
                format!(
                    "{place}: env must name an environment variable ({ENV_NAME_FORM}, not a whsec_ value); \
                     what is there is not shown, in case it is the secret itself"
                ),
            );
            None
        }
        Some((1, Some(Value::String(name)), None)) => match env(name) {
            Some(v) if !v.is_empty() => Some((v, format!("the environment variable {name}"))),
            _ => {
                d.push(
                    scope,
                    "env_not_set",
                    format!("{place}: the environment variable {name} is not set or is empty"),
                );
                None
            }
        },
        Some((1, None, Some(Value::String(v)))) if !v.is_empty() => {
            d.warn(
                scope, "inline_secret",
                format!("{place} is an inline secret, readable by anyone who can read the configuration: prefer {{\"env\": NAME}}"),
            );
            Some((v.clone(), "the inline value".to_owned()))
        }
        _ => {
            d.push(
                scope,
                "bad_secret",
                format!(
                    "{place} must be {{\"env\": NAME}} or {{\"value\": non-empty string}}, got {}",
                    kind(s)
                ),
            );
            None
        }
    }
}

/// A secret's value decoded as its scheme writes its keys.
fn decode(raw: String, from: &str, form: KeyForm, place: &str) -> Result<Secret, Issue> {
    match form {
        KeyForm::Raw => Ok(Secret::hmac(raw.into_bytes())),
        KeyForm::Whsec => decode_whsec(&raw).map(Secret::hmac).ok_or_else(|| {
            Issue::new(
                "not_whsec",
                format!("{place}: {from} is not a whsec_ secret (whsec_ and base64)"),
            )
        }),
        KeyForm::Standard => match raw.strip_prefix("whpk_") {
            Some(b64) => lenient_base64(b64)
                .ok_or_else(|| {
                    Issue::new(
                        "bad_public_key",
                        format!("{place}: {from} is not a whpk_ public key (whpk_ and base64)"),
                    )
                })
                .and_then(|k| public_key(k, place, from)),
            None => decode_whsec(&raw).map(Secret::hmac).ok_or_else(|| {
                Issue::new(
                    "not_whsec",
                    format!(
                        "{place}: {from} is not a whsec_ secret (whsec_ and base64) nor a whpk_ public key"
                    ),
                )
            }),
        },
        KeyForm::Public(enc) => decode_public(&raw, enc, place, from),
    }
}

/// A verify's `secrets`: a list, or an object of tenants to lists (then
/// the route must name the tenant).
pub(super) fn secrets(
    v: Option<&Value>,
    form: KeyForm,
    routing: Routing,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Option<Secrets> {
    match v {
        None => {
            d.push(
                scope,
                "missing_secrets",
                "secrets is required: a list of {\"env\": NAME} (or {\"value\": ...})",
            );
            None
        }
        Some(Value::Array(list)) => {
            Some(Secrets::All(key_list(list, "secrets", form, scope, env, d)))
        }
        Some(Value::Object(map)) => Some(per_tenant(map, form, routing, scope, env, d)),
        Some(other) => {
            d.push(
                scope,
                "bad_secrets",
                format!(
                    "secrets must be a list, or an object of tenants to lists, got {}",
                    kind(other)
                ),
            );
            None
        }
    }
}

/// Per-tenant secrets: `{"tenant": [secrets], ...}`.
fn per_tenant(
    map: &Map<String, Value>,
    form: KeyForm,
    routing: Routing,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Secrets {
    if !routing.tenant_path() {
        d.push(
            scope,
            "needs_tenant_path",
            "per-tenant secrets need \"routing\": \"tenant_path\"",
        );
    }
    if let Err(e) = within("secrets: tenants", MAX_TENANTS, map.len()) {
        d.issue(scope, e);
    }
    let mut per = Vec::new();
    for (t, list) in map.iter().take(MAX_TENANTS) {
        if !tenant_ok(t) {
            d.push(
                scope,
                "not_a_tenant",
                format!("secrets: {t:?} is not a tenant ([A-Za-z0-9_-]{{1,64}})"),
            );
        }
        match list.as_array() {
            Some(l) => per.push((
                t.clone(),
                key_list(l, &format!("secrets.{t}"), form, scope, env, d),
            )),
            None => d.push(scope, "not_a_list", format!("secrets.{t} must be a list")),
        }
    }
    if per.is_empty() {
        d.push(scope, "no_tenant", "secrets names no tenant");
    }
    Secrets::PerTenant(per)
}

/// Decodes a `whsec_` secret as Standard Webhooks' libraries do: the
/// prefix optional, the base64 padding too; `None` when it is not base64.
fn decode_whsec(value: &str) -> Option<Vec<u8>> {
    lenient_base64(value.strip_prefix("whsec_").unwrap_or(value))
}

/// Base64 with its padding optional; `None` when it is not base64 or empty.
fn lenient_base64(b64: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    LENIENT.decode(b64.trim()).ok().filter(|k| !k.is_empty())
}

/// An Ed25519 public key written in `enc` (Discord's: hex), with a word
/// for a key written in the other encoding.
fn decode_public(raw: &str, enc: Encoding, place: &str, from: &str) -> Result<Secret, Issue> {
    let raw = raw.trim();
    let as_hex = || hex::decode(raw).ok();
    let (bytes, other) = match enc {
        Encoding::Hex => (as_hex(), lenient_base64(raw).filter(|_| as_hex().is_none())),
        Encoding::Base64 => (
            lenient_base64(raw).filter(|_| raw.len() != 64 || as_hex().is_none()),
            as_hex(),
        ),
    };
    let (name, other_name) = match enc {
        Encoding::Hex => ("hex", "base64"),
        Encoding::Base64 => ("base64", "hex"),
    };
    match bytes {
        Some(k) => public_key(k, place, from),
        None if other.as_ref().is_some_and(|k| k.len() == 32) => Err(Issue::new(
            "key_encoding",
            format!("{place}: {from} is a {other_name} public key, but the scheme's keys are {name} (a custom scheme's key is in its encoding)"),
        )),
        None => Err(Issue::new(
            "bad_public_key",
            format!("{place}: {from} is not an Ed25519 public key in {name} (32 bytes)"),
        )),
    }
}

/// 32 bytes that are an Ed25519 public key, and not a weak (small-order)
/// one, which any signature would verify under.
fn public_key(bytes: Vec<u8>, place: &str, from: &str) -> Result<Secret, Issue> {
    let n = bytes.len();
    let Ok(arr) = <[u8; 32]>::try_from(bytes.as_slice()) else {
        return Err(Issue::new(
            "bad_public_key",
            format!("{place}: {from} is {n} bytes: an Ed25519 public key is 32"),
        ));
    };
    match ed25519_dalek::VerifyingKey::from_bytes(&arr) {
        Ok(k) if !k.is_weak() => Ok(Secret(bytes, Key::Ed25519(k))),
        Ok(_) => Err(Issue::new(
            "bad_public_key",
            format!(
                "{place}: {from} is a weak (small-order) Ed25519 key, which anyone can sign for"
            ),
        )),
        Err(_) => Err(Issue::new(
            "bad_public_key",
            format!("{place}: {from} is not an Ed25519 public key (not a point of the curve)"),
        )),
    }
}
