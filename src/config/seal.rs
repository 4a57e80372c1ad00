//! The stamp seal's configuration: `{"keys": [{"env": NAME}, ...],
//! "key_id": NAME, "expires_s": N}`, the first key the one that seals (the
//! queue accepts any, for rotation); and what a sealed configuration's
//! sources may not read.

use super::diag::{Diags, Scope};
use super::fields::{field, unknown_fields, Env};
use super::{Seal, Source};
use crate::seal;
use serde_json::Value;

/// The longest a seal may be good for: a day.
pub(super) const MAX_EXPIRES_S: u64 = 86_400;

/// The longest key id.
const MAX_KEY_ID: usize = 64;

pub(super) fn check_seal(v: &Value, env: Env, d: &mut Diags) -> Option<Seal> {
    let Some(obj) = v.as_object() else {
        d.push(
            &Scope::Seal,
            "not_an_object",
            "must be an object: {\"keys\": [{\"env\": NAME}, ...]}",
        );
        return None;
    };
    unknown_fields(obj, &["keys", "key_id", "expires_s"], &Scope::Seal, d);
    let key_id = key_id(field(obj, "key_id"), d);
    let expires_s = expires_s(field(obj, "expires_s"), d);
    let Some(Value::Array(list)) = field(obj, "keys") else {
        d.push(
            &Scope::Seal,
            "missing_secrets",
            "keys is required: a list of {\"env\": NAME}",
        );
        return None;
    };
    let keys = super::secrets::secret_list(list, "keys", false, &Scope::Seal, env, d);
    if let Some(i) = keys.iter().position(|k| k.0 == key_id.as_bytes()) {
        d.push(
            &Scope::Seal,
            "key_id_is_a_key",
            format!(
                "key_id is the value of keys[{i}]: the key id is sent with every \
                 request, so it must name the key, never be it"
            ),
        );
    }
    (!keys.is_empty()).then_some(Seal {
        keys,
        key_id,
        expires_s,
    })
}

/// `key_id`: what the signature's `keyid` says, `hookstamp` by default.
fn key_id(v: Option<&Value>, d: &mut Diags) -> String {
    let Some(v) = v else {
        return seal::DEFAULT_KEY_ID.to_owned();
    };
    match v.as_str() {
        Some(s) if key_id_ok(s) => s.to_owned(),
        _ => {
            // Never shown: it might be the key, pasted in the wrong place.
            d.push(
                &Scope::Seal,
                "bad_key_id",
                format!(
                    "key_id must be a name for the sealing key ([A-Za-z0-9._:-]{{1,{MAX_KEY_ID}}}), \
                     sent with every request as the signature's keyid; what is there is not shown, \
                     in case it is the key itself"
                ),
            );
            seal::DEFAULT_KEY_ID.to_owned()
        }
    }
}

fn key_id_ok(s: &str) -> bool {
    (1..=MAX_KEY_ID).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b))
}

/// `expires_s`: how long a seal is good for, 300 s by default.
fn expires_s(v: Option<&Value>, d: &mut Diags) -> u64 {
    let Some(v) = v else {
        return seal::DEFAULT_EXPIRES_S;
    };
    match v.as_u64() {
        Some(n) if (1..=MAX_EXPIRES_S).contains(&n) => n,
        _ => {
            d.push(
                &Scope::Seal,
                "bad_expires",
                format!(
                    "expires_s must be a positive integer of at most {MAX_EXPIRES_S} \
                     (a day), got {}",
                    super::fields::shown(v)
                ),
            );
            seal::DEFAULT_EXPIRES_S
        }
    }
}

/// A sealed configuration replaces the client's `signature-input`,
/// `signature` and `content-digest` with its own: no key may read them.
pub(super) fn check_reads(sources: &[Source], d: &mut Diags) {
    for s in sources {
        for h in s.headers.iter().filter(|h| seal::client_field(h) != 0) {
            d.push(
                &Scope::Source(s.id.clone()),
                "reads_seal_field",
                format!(
                    "a key reads header {h}, which a sealed configuration replaces with its own \
                     seal's (signature-input, signature, content-digest): read another header"
                ),
            );
        }
    }
}
