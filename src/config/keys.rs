//! Key expressions, as a dedupe rule and an ordering key take them:
//! `{"header": name}`, `{"json": "a.b"}` or `{"json": ["a", "b.c"]}` (with
//! `"integer": true` to take a JSON integer), `{"form": field}`,
//! `{"first": [expr, ...]}` and `{"concat": [expr, ...], "separator": s}`.

use super::bounds::{
    within, MAX_KEY_DEPTH, MAX_KEY_TERMS, MAX_NAME_BYTES, MAX_PATH_SEGMENTS, MAX_SEPARATOR_BYTES,
};
use super::diag::{Diags, Issue, Issues, Scope};
use super::fields::key_header;
use super::reads::Reads;
use crate::json::{self, Path};
use crate::key::KeySource;
use serde_json::{Map, Value};

pub const FORMS: &str = "{\"header\": name}, {\"json\": path}, {\"form\": field}, \
{\"sha256\": \"body\"}, {\"first\": [key, ...]} or {\"concat\": [key, ...], \"separator\": text}";

/// The fields that make a key, one each.
pub const KINDS: [&str; 6] = ["header", "json", "form", "sha256", "first", "concat"];

/// What an expression's place allows.
pub struct KeyCtx<'a> {
    /// A JSON integer is a key without `"integer": true` (dedupe keys).
    pub integers: bool,
    /// A header must pass this (an ordering key's header must be stored).
    pub header_ok: &'a dyn Fn(&str) -> Result<(), Issue>,
}

/// Parses a key expression object (the fields other than `skip`), interning
/// what it reads; warnings (a path that can never match) go to `warn`.
/// Its nesting and the terms it reads are bounded (`bounds`).
pub fn expr(
    obj: &Map<String, Value>,
    skip: &[&str],
    ctx: &KeyCtx,
    reads: &mut Reads,
    warn: &mut Vec<String>,
) -> Result<KeySource, Issues> {
    let mut walk = Walk { ctx, reads, warn };
    let key = walk.nested(obj, skip, 0)?;
    within(
        "headers, paths and form fields one key reads",
        MAX_KEY_TERMS,
        terms(&key),
    )?;
    Ok(key)
}

/// `expr` where a part of a source takes a key (`place`: its field), its
/// warnings and its errors, each behind `place: `, reported in `scope`.
pub(super) fn expr_in(
    place: &str,
    obj: &Map<String, Value>,
    ctx: &KeyCtx,
    reads: &mut Reads,
    scope: &Scope,
    d: &mut Diags,
) -> Option<KeySource> {
    let mut warned = Vec::new();
    let key = expr(obj, &[], ctx, reads, &mut warned);
    for w in warned {
        d.warn(scope, "never_matches", w);
    }
    match key {
        Ok(k) => Some(k),
        Err(Issues(problems)) => {
            for e in problems {
                d.issue(scope, e.within(place));
            }
            None
        }
    }
}

/// How many headers, paths and form fields an expression reads.
fn terms(k: &KeySource) -> usize {
    match k {
        KeySource::Header(_)
        | KeySource::Json { .. }
        | KeySource::Form(_)
        | KeySource::BodySha256 => 1,
        KeySource::First(ks) | KeySource::Concat(ks, _) => ks.iter().map(terms).sum(),
    }
}

/// One expression's walk: what its place allows, the tables it interns
/// what it reads into, and its warnings.
struct Walk<'w> {
    ctx: &'w KeyCtx<'w>,
    reads: &'w mut Reads,
    warn: &'w mut Vec<String>,
}

impl Walk<'_> {
    /// One expression `depth` deep: its one kind, and no field that kind
    /// does not take.
    fn nested(
        &mut self,
        obj: &Map<String, Value>,
        skip: &[&str],
        depth: usize,
    ) -> Result<KeySource, Issues> {
        let fields: Vec<&str> = obj
            .iter()
            .filter(|(k, v)| !skip.contains(&k.as_str()) && !v.is_null())
            .map(|(k, _)| k.as_str())
            .collect();
        let kinds: Vec<&str> = KINDS.into_iter().filter(|k| fields.contains(k)).collect();
        let kind = match kinds[..] {
            [] => return Err(bad_key(format!("a key must be {FORMS}")).into()),
            [kind] => kind,
            _ => {
                return Err(Issue::new(
                    "bad_key",
                    "a key takes exactly one of header, json, form, sha256, first or concat",
                )
                .into())
            }
        };
        let allowed: &[&str] = match kind {
            "json" => &["json", "integer"],
            "concat" => &["concat", "separator"],
            _ => std::slice::from_ref(&kind),
        };
        if let Some(k) = fields.iter().find(|k| !allowed.contains(*k)) {
            return Err(
                Issue::new("unknown_field", format!("unknown field {k:?} in a key")).into(),
            );
        }
        match kind {
            "header" => self.header(obj),
            "json" => self.json(obj),
            "sha256" => self.sha256(obj),
            "form" => self.form(obj),
            name => self.list(name, obj, depth),
        }
    }

    fn header(&mut self, obj: &Map<String, Value>) -> Result<KeySource, Issues> {
        let h = obj
            .get("header")
            .and_then(Value::as_str)
            .ok_or_else(|| Issue::new("bad_key", "header must be a string"))?;
        let h = key_header(h)?;
        (self.ctx.header_ok)(&h)?;
        Ok(self.reads.header(h))
    }

    fn json(&mut self, obj: &Map<String, Value>) -> Result<KeySource, Issues> {
        let path = json_path(obj.get("json").unwrap_or(&Value::Null), self.warn)?;
        let integer = match obj.get("integer") {
            None | Some(Value::Null) => self.ctx.integers,
            Some(Value::Bool(b)) => *b || self.ctx.integers,
            Some(other) => {
                return Err(bad_key(format!("integer must be true or false, got {other}")).into())
            }
        };
        Ok(self.reads.path(path, integer))
    }

    fn sha256(&mut self, obj: &Map<String, Value>) -> Result<KeySource, Issues> {
        if obj.get("sha256").and_then(Value::as_str) != Some("body") {
            return Err(bad_key(format!(
                "sha256 takes \"body\" (the body's SHA-256), got {}",
                show(obj.get("sha256"))
            ))
            .into());
        }
        self.reads.body_hash = true;
        Ok(KeySource::BodySha256)
    }

    fn form(&mut self, obj: &Map<String, Value>) -> Result<KeySource, Issues> {
        match obj.get("form") {
            Some(Value::String(f)) if !f.is_empty() => {
                within("bytes of a form field name", MAX_NAME_BYTES, f.len())?;
                Ok(self.reads.form(f.clone()))
            }
            other => Err(bad_key(format!(
                "form must be a non-empty field name, got {}",
                show(other)
            ))
            .into()),
        }
    }

    /// `first` or `concat` (`name`): a bounded list of keys, one level
    /// deeper, each checked.
    fn list(
        &mut self,
        name: &str,
        obj: &Map<String, Value>,
        depth: usize,
    ) -> Result<KeySource, Issues> {
        let Some(Value::Array(list)) = obj.get(name) else {
            return Err(bad_key(format!("{name} must be a list of keys")).into());
        };
        let (min, words) = if name == "first" {
            (1, "one key")
        } else {
            (2, "two keys")
        };
        if list.len() < min {
            return Err(bad_key(format!("{name} needs at least {words}")).into());
        }
        if depth >= MAX_KEY_DEPTH {
            return Err(Issue::new(
                "bound",
                format!("first and concat nest at most {MAX_KEY_DEPTH} deep"),
            )
            .into());
        }
        within(&format!("keys of a {name}"), MAX_KEY_TERMS, list.len())?;
        let parts = self.parts(name, list, depth)?;
        if name == "first" {
            return Ok(KeySource::First(parts));
        }
        Ok(KeySource::Concat(parts, separator(obj)?))
    }

    /// Every part is checked: each one's problems are reported.
    fn parts(
        &mut self,
        name: &str,
        list: &[Value],
        depth: usize,
    ) -> Result<Vec<KeySource>, Issues> {
        let mut parts = Vec::new();
        let mut problems = Vec::new();
        for item in list {
            let part = match item.as_object() {
                Some(o) => self.nested(o, &[], depth + 1),
                None => {
                    Err(bad_key(format!("each key in {name} must be {FORMS}, got {item}")).into())
                }
            };
            match part {
                Ok(k) => parts.push(k),
                Err(Issues(mut e)) => problems.append(&mut e),
            }
        }
        if !problems.is_empty() {
            return Err(Issues(problems));
        }
        Ok(parts)
    }
}

/// A `concat`'s separator: `:` unless it names another.
fn separator(obj: &Map<String, Value>) -> Result<String, Issue> {
    match obj.get("separator") {
        None => Ok(":".to_owned()),
        Some(Value::String(s)) => {
            within("bytes of a separator", MAX_SEPARATOR_BYTES, s.len())?;
            Ok(s.clone())
        }
        Some(other) => Err(bad_key(format!("separator must be a string, got {other}"))),
    }
}

/// A malformed key expression.
fn bad_key(message: String) -> Issue {
    Issue::new("bad_key", message)
}

fn show(v: Option<&Value>) -> String {
    v.map_or("nothing".to_owned(), Value::to_string)
}

/// A path: a dotted string, or a list of keys (for keys with dots in them).
pub fn json_path(v: &Value, warn: &mut Vec<String>) -> Result<Path, Issue> {
    let path: Path = match v {
        Value::String(s) => {
            let p = json::parse_path(s)
                .ok_or_else(|| bad_key(format!("json path {s:?} has an empty segment")))?;
            if s.starts_with('$') || s.starts_with('/') || s.contains('[') {
                warn.push(format!(
                    "json path {s:?} looks like JSONPath or a JSON Pointer, which hookstamp does not read: \
                     a path is dotted keys (data.object.id) or a list of keys, and this one never matches"
                ));
            }
            p
        }
        Value::Array(list) if !list.is_empty() => {
            let mut p = Vec::new();
            for seg in list {
                match seg.as_str() {
                    Some(s) if !s.is_empty() => p.push(s.to_owned()),
                    _ => {
                        return Err(bad_key(format!(
                            "json path {v} must be a list of non-empty keys"
                        )))
                    }
                }
            }
            p
        }
        other => {
            return Err(bad_key(format!(
                "json path must be a dotted string or a list of keys, got {other}"
            )))
        }
    };
    within("segments of a json path", MAX_PATH_SEGMENTS, path.len())?;
    let longest = path.iter().map(String::len).max().unwrap_or(0);
    within("bytes of a json path segment", MAX_NAME_BYTES, longest)?;
    Ok(path)
}
