//! What a request offers a source's keys: its key headers' values, and
//! its body read once (as JSON at every path the source reads, or as a
//! form) for the stamps and `explain` alike.

use crate::config::Source;
use crate::json::{self, Scalar};
use crate::key::{self, BodyState, FormJson};
use std::borrow::Cow;

use super::Body;

/// What a request offers a source's keys: the values of its key headers
/// (see `header_keys`), what its body gave (the value at each JSON path,
/// one scan serving them all; each form field the source reads), what the
/// body was found to be, and its hash. The stamps and `explain` read the
/// same offer.
pub struct Offered<'a, 'h> {
    pub headers: &'h [Option<&'a [u8]>],
    pub json: Vec<Option<Scalar<'a>>>,
    pub form: Vec<Option<Vec<u8>>>,
    pub state: BodyState,
    pub body_sha256: Option<[u8; 32]>,
}

impl<'a> Offered<'a, '_> {
    pub fn values(&self) -> key::Values<'_, 'a> {
        key::Values {
            headers: self.headers,
            json: &self.json,
            form: &self.form,
            body: self.state,
            body_sha256: self.body_sha256,
        }
    }
}

/// Reads the body for `src`'s keys (see `key::BodyState` for the rule of
/// which keys read it as what). A body over the limit matters to a source
/// that reads it or hashes it; a source that does neither leaves it unread.
pub fn offered<'a, 'h>(
    src: &Source,
    header_keys: &'h [Option<&'a [u8]>],
    body: Body<'a>,
    body_hash: Option<[u8; 32]>,
) -> Offered<'a, 'h> {
    let (json, form, state) = match body {
        Body::OverLimit if src.keeps_body() || src.hashes_body => {
            (Vec::new(), Vec::new(), BodyState::OverLimit)
        }
        Body::Bytes(b) if src.keeps_body() => read_body(src, header_keys, b),
        _ => (Vec::new(), Vec::new(), BodyState::Unread),
    };
    Offered {
        headers: header_keys,
        json,
        form,
        state,
        body_sha256: body_hash.filter(|_| !matches!(body, Body::OverLimit)),
    }
}

type Read<'a> = (Vec<Option<Scalar<'a>>>, Vec<Option<Vec<u8>>>, BodyState);

/// The body as JSON, at every path the source reads; `None` if it is not
/// valid JSON.
fn scan<'a>(src: &Source, json: &'a [u8]) -> Option<Vec<Option<Scalar<'a>>>> {
    json::extract(json, &src.paths)
}

fn read_body<'a>(src: &Source, header_keys: &[Option<&'a [u8]>], body: &'a [u8]) -> Read<'a> {
    let content_type = src.content_type.and_then(|i| *header_keys.get(i)?);
    if !crate::form::is_form(content_type) {
        return match scan(src, body) {
            Some(json) => (json, Vec::new(), BodyState::Json),
            None => (Vec::new(), Vec::new(), BodyState::NotJson),
        };
    }
    let fields = crate::form::form_fields(body);
    let field = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| k == name.as_bytes())
            .map(|(_, v)| v.clone())
    };
    let form = src.forms.iter().map(|f| field(f)).collect();
    let none = || vec![None; src.paths.len()];
    let (json, how) = match src.form_json.as_deref().map(field) {
        // No form_json: the paths read the body itself.
        None => match scan(src, body) {
            Some(json) => (json, FormJson::Body),
            None => (none(), FormJson::NotJson),
        },
        Some(None) => (none(), FormJson::NoField),
        // Decoded from the form: owned, not borrowed from the body.
        Some(Some(text)) => match json::extract(&text, &src.paths) {
            Some(json) => (
                json.into_iter().map(|s| s.map(owned)).collect(),
                FormJson::Field,
            ),
            None => (none(), FormJson::NotJson),
        },
    };
    (json, form, BodyState::Form(how))
}

/// A scalar of a decoded form field's JSON, owned: it outlives the field.
fn owned<'a>(s: Scalar<'_>) -> Scalar<'a> {
    match s {
        Scalar::Str(s) => Scalar::Str(Cow::Owned(s.into_owned())),
        Scalar::Int(n) => Scalar::Int(Cow::Owned(n.into_owned())),
        Scalar::Other => Scalar::Other,
    }
}
