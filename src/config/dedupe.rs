//! A source's `dedupe`: a preset's name, or an object of a preset or a key
//! expression (`keys`), either with its `ttl_ms`.

use super::diag::{Diags, Issue, Issues, Scope};
use super::fields::{field, unknown_fields};
use super::keys::KeyCtx;
use super::reads::Reads;
use crate::dedupe::{self, Dedupe, DEFAULT_TTL_MS};
use crate::key::KeySource;
use crate::providers::EventId;
use serde_json::{Map, Value};

/// Checks a source's dedupe rule; its key's errors are reported once the
/// ttl's are.
pub(super) fn check(v: &Value, scope: &Scope, reads: &mut Reads, d: &mut Diags) -> Option<Dedupe> {
    let (key, ttl_ms) = match v {
        Value::String(p) => (preset(p, reads).map_err(Issues::from), DEFAULT_TTL_MS),
        Value::Object(o) => {
            let ttl_ms = ttl_ms(o, scope, d);
            (object_key(o, scope, reads, d), ttl_ms)
        }
        _ => (
            Err(Issue::new("bad_dedupe", "must be a preset name or an object").into()),
            DEFAULT_TTL_MS,
        ),
    };
    match key {
        Ok(k) => Some(Dedupe::new(k, ttl_ms)),
        Err(Issues(problems)) => {
            for e in problems {
                d.issue(scope, e);
            }
            None
        }
    }
}

/// How long a key is remembered: the default unless `ttl_ms` gives a
/// positive integer.
fn ttl_ms(o: &Map<String, Value>, scope: &Scope, d: &mut Diags) -> u64 {
    let Some(t) = field(o, "ttl_ms") else {
        return DEFAULT_TTL_MS;
    };
    match t.as_u64() {
        Some(n) if n > 0 => n,
        _ => {
            d.push(
                scope,
                "bad_ttl",
                format!("ttl_ms must be a positive integer, got {t}"),
            );
            DEFAULT_TTL_MS
        }
    }
}

/// A dedupe object's key: its `preset`, or the key expression its other
/// fields make (never both). A dedupe key may be a JSON integer as it is.
fn object_key(
    o: &Map<String, Value>,
    scope: &Scope,
    reads: &mut Reads,
    d: &mut Diags,
) -> Result<KeySource, Issues> {
    match field(o, "preset") {
        Some(Value::String(_)) if o.keys().any(|k| super::keys::KINDS.contains(&k.as_str())) => {
            Err(Issue::new("bad_dedupe", "takes a preset or a key, not both").into())
        }
        Some(Value::String(p)) => {
            unknown_fields(o, &["preset", "ttl_ms"], scope, d);
            preset(p, reads).map_err(Issues::from)
        }
        Some(other) => Err(Issue::new(
            "bad_dedupe",
            format!("preset must be a string, got {other}"),
        )
        .into()),
        None if o.keys().all(|k| k == "ttl_ms") => Err(Issue::new(
            "bad_dedupe",
            format!("needs a preset or a key: {}", super::keys::FORMS),
        )
        .into()),
        None => {
            let ctx = KeyCtx {
                integers: true,
                header_ok: &|_| Ok(()),
            };
            let mut warned = Vec::new();
            let k = super::keys::expr(o, &["ttl_ms"], &ctx, reads, &mut warned);
            for w in warned {
                d.warn(scope, "never_matches", w);
            }
            k
        }
    }
}

/// A dedupe preset's key: its header (the first present of several), or
/// its JSON path.
pub(super) fn preset(p: &str, reads: &mut Reads) -> Result<KeySource, Issue> {
    match dedupe::preset(p) {
        Some(EventId::Headers(hs)) => {
            let mut alts: Vec<KeySource> =
                hs.iter().map(|h| reads.header((*h).to_owned())).collect();
            Ok(if alts.len() == 1 {
                alts.remove(0)
            } else {
                KeySource::First(alts)
            })
        }
        Some(EventId::Json(j)) => Ok(reads.path(j.split('.').map(str::to_owned).collect(), true)),
        None => Err(Issue::new(
            "unknown_preset",
            format!(
                "unknown preset {p:?}{} (known: {})",
                super::fields::did_you_mean(p, &dedupe::names()),
                dedupe::names().join(", ")
            ),
        )),
    }
}
