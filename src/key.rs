//! Where a key comes from (a key expression), how one is evaluated, and the
//! length rule both kinds of key share.

use crate::json::Scalar;
use std::borrow::Cow;

/// Where a dedupe or ordering key is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The first value of a header; the index names it in the source's
    /// header table, read once at the request headers.
    Header(usize),
    /// The value at a path of the JSON body (or of the form field
    /// `form_json` names); the index names the path in the source's path
    /// table, so one scan serves every key. A JSON integer is a key where
    /// `integer` is set (always, for a dedupe key).
    Json { path: usize, integer: bool },
    /// A field of a form-encoded body; the index names it in the source's
    /// form field table.
    Form(usize),
    /// The first of these that gives a key.
    First(Vec<KeySource>),
    /// All of these, joined by the separator; no key if one is missing.
    Concat(Vec<KeySource>, String),
    /// The lowercase hex SHA-256 of the whole body: a key the sender cannot
    /// vary without breaking a signature over the body.
    BodySha256,
}

impl KeySource {
    /// The header-table indices this expression reads.
    pub fn headers(&self) -> Vec<usize> {
        match self {
            KeySource::Header(i) => vec![*i],
            KeySource::Json { .. } | KeySource::Form(_) | KeySource::BodySha256 => Vec::new(),
            KeySource::First(ks) | KeySource::Concat(ks, _) => {
                ks.iter().flat_map(KeySource::headers).collect()
            }
        }
    }

    /// Whether any part reads the body.
    pub fn reads_body(&self) -> bool {
        match self {
            KeySource::Header(_) => false,
            KeySource::Json { .. } | KeySource::Form(_) | KeySource::BodySha256 => true,
            KeySource::First(ks) | KeySource::Concat(ks, _) => ks.iter().any(KeySource::reads_body),
        }
    }
}

/// What a request offers its key expressions.
pub struct Values<'v, 'a> {
    pub headers: &'v [Option<&'a [u8]>],
    pub json: &'v [Option<Scalar<'a>>],
    pub form: &'v [Option<Vec<u8>>],
    /// What became of the body (for the reason a key is missing).
    pub body: BodyState,
    /// The whole body's SHA-256, where the filter saw all of it.
    pub body_sha256: Option<[u8; 32]>,
}

/// What became of a body, as its keys see it. The rule: a body whose
/// content-type is a form's has its fields decoded for the form keys; the
/// JSON paths read the `form_json` field of such a body where the source
/// names one, and the body itself in every other case (whatever its
/// content-type says).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BodyState {
    /// Not read: the source's keys come from headers.
    #[default]
    Unread,
    /// JSON, scanned.
    Json,
    /// Not valid JSON (as a whole).
    NotJson,
    /// Form-encoded (by its content-type), its fields decoded; where the
    /// JSON paths were read, and how that went.
    Form(FormJson),
    /// Over max_json_bytes: never read.
    OverLimit,
}

/// Where a form-encoded body's JSON paths were read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormJson {
    /// The source names no `form_json` field: the body itself, valid JSON.
    Body,
    /// The `form_json` field, valid JSON.
    Field,
    /// The source's `form_json` field is not in the form.
    NoField,
    /// The JSON the paths read (the field's value, or the body) is not
    /// valid.
    NotJson,
}

/// Why a key is missing: the `reason` label of the missing-key counters,
/// a bounded set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The header, path or form field is not there.
    Absent,
    /// It is there, empty.
    Empty,
    /// A value that is not a key: a float, a boolean, null, an object, an
    /// array, or an integer where the key does not take one.
    WrongType,
    /// The body is not valid JSON.
    NotJson,
    /// A form field was wanted and the body is not form-encoded.
    NotForm,
    /// The body was over max_json_bytes.
    OverLimit,
    /// The signature did not verify (flag mode): no key of the request is
    /// trusted, so it takes the keyless lane.
    Unverified,
}

impl Missing {
    pub const ALL: [Missing; 7] = [
        Missing::Absent,
        Missing::Empty,
        Missing::WrongType,
        Missing::NotJson,
        Missing::NotForm,
        Missing::OverLimit,
        Missing::Unverified,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Missing::Absent => "absent",
            Missing::Empty => "empty",
            Missing::WrongType => "wrong_type",
            Missing::NotJson => "not_json",
            Missing::NotForm => "not_form",
            Missing::OverLimit => "over_limit",
            Missing::Unverified => "unverified",
        }
    }
}

/// Why `k` gave no key (called only when it gave none): the first
/// alternative's reason for `first`, the first missing part's for `concat`
/// (the metric's one label; `explain` gives every part's, with `parts`).
pub fn why(k: &KeySource, v: &Values<'_, '_>) -> Missing {
    match k {
        KeySource::Header(i) => match v.headers.get(*i).copied().flatten() {
            None => Missing::Absent,
            Some(_) => Missing::Empty,
        },
        KeySource::Json { path, .. } => match v.body {
            BodyState::OverLimit => Missing::OverLimit,
            BodyState::NotJson | BodyState::Form(FormJson::NotJson) => Missing::NotJson,
            BodyState::Form(FormJson::NoField) => Missing::Absent,
            _ => match v.json.get(*path).and_then(Option::as_ref) {
                None => Missing::Absent,
                Some(Scalar::Str(s)) if s.is_empty() => Missing::Empty,
                Some(_) => Missing::WrongType,
            },
        },
        KeySource::Form(i) => match v.body {
            BodyState::OverLimit => Missing::OverLimit,
            BodyState::Form(_) => match v.form.get(*i).and_then(Option::as_ref) {
                None => Missing::Absent,
                Some(_) => Missing::Empty,
            },
            _ => Missing::NotForm,
        },
        KeySource::BodySha256 => match v.body {
            BodyState::OverLimit => Missing::OverLimit,
            _ => Missing::Absent,
        },
        KeySource::First(ks) => ks.first().map_or(Missing::Absent, |k| why(k, v)),
        KeySource::Concat(ks, _) => ks
            .iter()
            .find(|k| eval(k, v).is_none())
            .map_or(Missing::Absent, |k| why(k, v)),
    }
}

/// For `first` and `concat`: each part, and why it gave no key (`None`:
/// it gave one). Empty for a leaf.
pub fn parts<'k>(k: &'k KeySource, v: &Values<'_, '_>) -> Vec<(&'k KeySource, Option<Missing>)> {
    match k {
        KeySource::First(ks) | KeySource::Concat(ks, _) => ks
            .iter()
            .map(|p| (p, eval(p, v).is_none().then(|| why(p, v))))
            .collect(),
        _ => Vec::new(),
    }
}

/// Evaluates a key expression; `None` (no key) when what it reads is
/// missing or empty.
pub fn eval<'a>(k: &KeySource, v: &Values<'_, 'a>) -> Option<Cow<'a, [u8]>> {
    let raw = match k {
        KeySource::Header(i) => Cow::Borrowed((*v.headers.get(*i)?)?),
        KeySource::Json { path, integer } => match v.json.get(*path)?.as_ref()? {
            Scalar::Str(s) => s.clone(),
            Scalar::Int(n) if *integer => n.clone(),
            Scalar::Int(_) | Scalar::Other => return None,
        },
        KeySource::Form(i) => Cow::Owned(v.form.get(*i)?.as_ref()?.clone()),
        KeySource::BodySha256 => Cow::Owned(hex::encode(v.body_sha256?).into_bytes()),
        KeySource::First(ks) => return ks.iter().find_map(|k| eval(k, v)),
        KeySource::Concat(ks, sep) => {
            let mut out = Vec::new();
            for (n, k) in ks.iter().enumerate() {
                if n > 0 {
                    out.extend_from_slice(sep.as_bytes());
                }
                out.extend_from_slice(&eval(k, v)?);
            }
            Cow::Owned(out)
        }
    };
    (!raw.is_empty()).then_some(raw)
}

/// A key longer than `max` bytes becomes `sha256:` + lowercase hex of its
/// SHA-256, so that it fits the store's and the queue's limits.
#[inline]
pub fn cap(raw: Cow<'_, [u8]>, max: usize) -> Cow<'_, [u8]> {
    if raw.len() <= max {
        raw
    } else {
        hashed(&raw)
    }
}

/// `sha256:` + the lowercase hex SHA-256 of a key over its limit.
fn hashed(raw: &[u8]) -> Cow<'static, [u8]> {
    let digest = crate::sha256::digest(raw);
    Cow::Owned(format!("sha256:{}", hex::encode(digest)).into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_keeps_exact_limit_and_hashes_above() {
        let at = vec![b'a'; 200];
        assert_eq!(cap(Cow::Borrowed(&at), 200).len(), 200);
        let over = vec![b'a'; 201];
        let capped = cap(Cow::Borrowed(&over), 200);
        assert!(capped.starts_with(b"sha256:"));
        assert_eq!(capped.len(), 7 + 64);
    }

    #[test]
    fn expressions() {
        let json = [
            Some(Scalar::Str(Cow::Borrowed(&b"cus_1"[..]))),
            Some(Scalar::Int(Cow::Borrowed(&b"42"[..]))),
            None,
        ];
        let v = Values {
            headers: &[Some(b"h1"), None],
            json: &json,
            form: &[Some(b"f".to_vec())],
            body: BodyState::Json,
            body_sha256: Some([7; 32]),
        };
        let first = KeySource::First(vec![
            KeySource::Header(1),
            KeySource::Json {
                path: 2,
                integer: false,
            },
            KeySource::Json {
                path: 0,
                integer: false,
            },
        ]);
        assert_eq!(eval(&first, &v).as_deref(), Some(&b"cus_1"[..]));
        assert_eq!(
            eval(
                &KeySource::Json {
                    path: 1,
                    integer: false
                },
                &v
            ),
            None
        );
        assert_eq!(
            eval(
                &KeySource::Json {
                    path: 1,
                    integer: true
                },
                &v
            )
            .as_deref(),
            Some(&b"42"[..])
        );
        let cat = KeySource::Concat(vec![KeySource::Header(0), KeySource::Form(0)], ":".into());
        assert_eq!(eval(&cat, &v).as_deref(), Some(&b"h1:f"[..]));
        let missing =
            KeySource::Concat(vec![KeySource::Header(0), KeySource::Header(1)], ":".into());
        assert_eq!(eval(&missing, &v), None);
        assert_eq!(why(&missing, &v), Missing::Absent);
        let int = KeySource::Json {
            path: 1,
            integer: false,
        };
        assert_eq!(why(&int, &v), Missing::WrongType);
        let not_form = Values {
            body: BodyState::Json,
            ..v
        };
        assert_eq!(why(&KeySource::Form(0), &not_form), Missing::NotForm);
        assert_eq!(
            eval(&KeySource::BodySha256, &v).as_deref(),
            Some(hex::encode([7u8; 32]).as_bytes())
        );
    }
}
