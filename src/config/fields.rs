//! Readers of a configuration's fields, shared by every level of the
//! checker: a field that may be absent, the unknown ones, a flag, a
//! non-empty string, a choice of strings, a bounded count, the routing
//! forms, a key header's name, a value as an error may show it (never a
//! secret), and the distance behind a "did you mean".

use super::bounds::{within, MAX_NAME_BYTES};
use super::diag::{Code, Diags, Issue, Scope};
use super::Routing;
use crate::stamps;
use serde_json::{Map, Value};

/// The environment secrets are read from.
pub type Env<'e> = &'e dyn Fn(&str) -> Option<String>;

/// Reports fields of `obj` that are not in `known`.
pub(super) fn unknown_fields(
    obj: &Map<String, Value>,
    known: &[&str],
    scope: &Scope,
    d: &mut Diags,
) {
    for k in obj.keys().filter(|k| !known.contains(&k.as_str())) {
        // A name is shown; anything else might be a secret in the wrong place.
        let name_like = k.len() <= 64
            && !k.starts_with("whsec_")
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_like {
            d.push(
                scope,
                "unknown_field",
                format!(
                    "an unknown field that is not a name (not shown, in case it is a secret; known: {})",
                    known.join(", ")
                ),
            );
            continue;
        }
        d.push(
            scope,
            "unknown_field",
            format!(
                "unknown field {k:?}{} (known: {})",
                did_you_mean(k, known),
                known.join(", ")
            ),
        );
    }
}

/// A field that may be absent; `null` counts as absent.
pub(super) fn field<'v>(obj: &'v Map<String, Value>, name: &str) -> Option<&'v Value> {
    obj.get(name).filter(|v| !v.is_null())
}

/// A field that is `true` or `false`; absent (or wrong, and reported) it
/// is false.
pub(super) fn flag(obj: &Map<String, Value>, name: &str, scope: &Scope, d: &mut Diags) -> bool {
    match field(obj, name) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            d.push(
                scope,
                "not_a_bool",
                format!("{name} must be true or false, got {other}"),
            );
            false
        }
    }
}

/// A field that, when given, is a non-empty string; another value is
/// reported under `code` as not being `what`.
pub(super) fn nonempty_string<'v>(
    obj: &'v Map<String, Value>,
    name: &str,
    code: Code,
    what: &str,
    scope: &Scope,
    d: &mut Diags,
) -> Option<&'v str> {
    match field(obj, name) {
        None => None,
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        Some(other) => {
            d.push(scope, code, format!("{name} must be {what}, got {other}"));
            None
        }
    }
}

/// A top-level field that takes one of a few strings; the first is the
/// default.
pub(super) fn choice<T: Copy>(
    obj: &Map<String, Value>,
    name: &str,
    options: &[(&str, T)],
    d: &mut Diags,
) -> T {
    let default = options[0].1;
    let Some(v) = field(obj, name) else {
        return default;
    };
    if let Some(&(_, t)) = options.iter().find(|(o, _)| v.as_str() == Some(*o)) {
        return t;
    }
    let names: Vec<String> = options.iter().map(|(o, _)| format!("{o:?}")).collect();
    d.push(
        &Scope::Config,
        "bad_choice",
        format!("{name} must be {}", names.join(" or ")),
    );
    default
}

/// A positive integer of at most u32::MAX (the wasm32 address space).
pub(super) fn count(obj: &Map<String, Value>, name: &str, default: u64, d: &mut Diags) -> u64 {
    let Some(v) = field(obj, name) else {
        return default;
    };
    match v.as_u64() {
        Some(n) if n > 0 && n <= u64::from(u32::MAX) => n,
        _ => {
            d.push(
                &Scope::Config,
                "bad_count",
                format!(
                    "{name} must be a positive integer of at most {}, got {v}",
                    u32::MAX
                ),
            );
            default
        }
    }
}

/// `"path"`, `"tenant_path"`, or a list of both.
pub(super) fn routing_of(v: Option<&Value>, scope: &Scope, d: &mut Diags) -> Option<Routing> {
    let v = v?;
    let one = |s: &str| match s {
        "path" => Some(Routing::Path),
        "tenant_path" => Some(Routing::TenantPath),
        _ => None,
    };
    let r = match v {
        Value::String(s) => one(s),
        Value::Array(list) => {
            let forms: Option<Vec<Routing>> =
                list.iter().map(|x| x.as_str().and_then(one)).collect();
            match forms.as_deref() {
                Some([r]) => Some(*r),
                Some(rs) if rs.contains(&Routing::Path) && rs.contains(&Routing::TenantPath) => {
                    Some(Routing::Both)
                }
                _ => None,
            }
        }
        _ => None,
    };
    if r.is_none() {
        d.push(
            scope,
            "bad_routing",
            "routing must be \"path\", \"tenant_path\" or [\"path\", \"tenant_path\"]",
        );
    }
    r
}

/// Checks a header name used as a key source; returns it lowercased.
pub(super) fn key_header(h: &str) -> Result<String, Issue> {
    if h.is_empty() {
        return Err(Issue::new("empty_header", "header name is empty"));
    }
    within("bytes of a header name", MAX_NAME_BYTES, h.len())?;
    if !h.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
        return Err(Issue::new(
            "bad_header",
            format!("header name {h:?} is not a valid header name"),
        ));
    }
    if stamps::is_stamp_header(h) {
        return Err(Issue::new(
            "stamp_namespace",
            format!(
                "header {h:?} is in the stamp namespace, which the filter strips from every request"
            ),
        ));
    }
    Ok(h.to_ascii_lowercase())
}

/// `: did you mean "x"?` for the nearest of `known` within two edits (or
/// differing only in case, or `-` for `_`), else nothing.
pub(super) fn did_you_mean(t: &str, known: &[&str]) -> String {
    let folded = t.to_ascii_lowercase().replace('-', "_");
    known
        .iter()
        .map(|k| (distance(&folded, k).min(distance(t, k)), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map_or(String::new(), |(_, k)| format!(": did you mean {k:?}?"))
}

/// Levenshtein distance, for the suggestion.
pub(super) fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// A value under `verify` (or any field that may hold a secret), as an error may show it: a number, or a short
/// name-like string (a scheme's name); anything else only by its kind, in
/// case it is a secret written in the wrong place.
pub(super) fn shown(v: &Value) -> String {
    match v {
        Value::Number(n) => n.to_string(),
        // A preset-like name (lowercase letters and `_`): a secret rarely is.
        Value::String(s)
            if s.len() <= 24 && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') =>
        {
            format!("{s:?}")
        }
        other => kind(other).to_owned(),
    }
}

/// A JSON value's kind, for errors about a field that may hold a secret.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
