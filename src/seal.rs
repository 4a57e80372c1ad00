//! The stamp seal: proof for the queue that a request's stamps came from
//! the filter, as an HTTP message signature (RFC 9421) that off-the-shelf
//! libraries verify. With a seal key, the filter adds, after the stamps,
//!
//! ```text
//! content-digest: sha-256=:<base64 SHA-256 of the body>:   (a held body only)
//! signature-input: hookstamp=("@method" "@path" "@query" "x-hookstamp-source" ...
//!   "content-digest");created=<t>;expires=<t + expires_s>;nonce="<hex>";
//!   alg="hmac-sha256";keyid="<key_id>";tag="hookstamp"
//! signature: hookstamp=:<base64 HMAC-SHA256 of the signature base>:
//! ```
//!
//! covering the method, the path and the query (`?` alone where there is
//! none), every stamp in order, and the body's digest (RFC 9530) where the
//! filter held the whole body. The signature base is RFC 9421's (section
//! 2.5): a `"<component>": <value>` line for each, then
//! `"@signature-params": <the inner list>`, lines joined by `\n`. The nonce
//! is derived, so that a seal made at a given second is reproducible: the
//! first 16 bytes, in hex, of the SHA-256 of
//! `hookstamp-nonce\n<created>\n<x-request-id>\n` and the HMAC-SHA256, with
//! the sealing key, of the base's component lines (each ending in `\n`):
//! Envoy gives every request its own id, so every request its own nonce,
//! and without the key no one can tell it in advance.

use crate::sha256::Sha256;
use crate::stamps::Stamp;
use crate::verify::{Algorithm, Request, Secret};
use base64::Engine;
use std::fmt::Write;

/// The signature's label (its member of `Signature-Input` and `Signature`)
/// and its `tag` parameter, which the signature covers.
pub const LABEL: &str = "hookstamp";
/// The algorithm, as RFC 9421's registry names it.
pub const ALG: &str = "hmac-sha256";
/// The key id by default: a name for the key, never the key.
pub const DEFAULT_KEY_ID: &str = "hookstamp";
/// How long a seal is good for by default, in seconds.
pub const DEFAULT_EXPIRES_S: u64 = 300;
/// The fields the filter adds, after the stamps.
pub const CONTENT_DIGEST: &str = "content-digest";
pub const SIGNATURE_INPUT: &str = "signature-input";
pub const SIGNATURE: &str = "signature";
/// Every spelling of those fields (any case; `_` read as `-` by WSGI
/// servers and others): a sealed request loses the client's.
pub const CLIENT_FIELDS: [&str; 5] = [
    "signature-input",
    "signature_input",
    "signature",
    "content-digest",
    "content_digest",
];
/// The derived components every seal covers, first.
const DERIVED: [&str; 3] = ["@method", "@path", "@query"];
/// What the nonce's hash starts with.
const NONCE_TAG: &[u8] = b"hookstamp-nonce\n";

/// Which of `CLIENT_FIELDS` a header name is (a bit each), 0 for none.
pub fn client_field<N: AsRef<[u8]> + ?Sized>(name: &N) -> u8 {
    let name = name.as_ref();
    CLIENT_FIELDS
        .iter()
        .zip(0u8..)
        .find(|(f, _)| f.as_bytes().eq_ignore_ascii_case(name))
        .map_or(0, |(_, i)| 1 << i)
}

/// The sealing key and what the seal says of it.
#[derive(Debug, Clone, Copy)]
pub struct Key<'a> {
    pub secret: &'a Secret,
    /// Sent as `keyid`: `[A-Za-z0-9._:-]`, so an sf-string as it is.
    pub id: &'a str,
    /// `created` and `expires` (Unix seconds).
    pub created: u64,
    pub expires: u64,
}

/// The fields a seal adds: `content-digest` (for a held body),
/// `signature-input` and `signature`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    pub content_digest: Option<String>,
    pub input: String,
    pub signature: String,
}

/// The seal of a request (its method and path as sent) with these stamps
/// and (where the filter held the whole body) this body hash; its
/// `x-request-id` (empty if none) only the nonce reads.
pub fn seal(
    key: &Key,
    r: &Request,
    request_id: &[u8],
    stamps: &[Stamp<'_>],
    body: Option<&[u8; 32]>,
) -> Fields {
    let content_digest = body.map(digest_field);
    let covered = || components(r, stamps, content_digest.as_deref());
    let mut input = String::with_capacity(
        160 + key.id.len() + covered().map(|(n, _)| n.len() + 3).sum::<usize>(),
    );
    input.push_str(LABEL);
    input.push('=');
    let params_at = input.len();
    for (i, (n, _)) in covered().enumerate() {
        input.push_str(if i == 0 { "(\"" } else { " \"" });
        input.push_str(n);
        input.push('"');
    }
    let created = key.created.to_string();
    let _ = write!(
        input,
        ");created={created};expires={};nonce=\"",
        key.expires
    );
    let Some(mut mac) = key.secret.mac(Algorithm::Sha256) else {
        // The seal's keys are HMAC keys (config::seal): not reached.
        return Fields {
            content_digest,
            input,
            signature: String::new(),
        };
    };
    // The base's lines, then the nonce from their HMAC so far (the keyed
    // digest of what the seal covers), then the last line: the parameters.
    for (name, value) in covered() {
        for part in [b"\"", name.as_bytes(), b"\": ", value.as_bytes(), b"\n"] {
            mac.update(part);
        }
    }
    let mut nonce = Sha256::new();
    let so_far = mac.clone().tag();
    for part in [
        NONCE_TAG,
        created.as_bytes(),
        b"\n",
        request_id,
        b"\n",
        so_far.as_ref(),
    ] {
        nonce.update(part);
    }
    input.push_str(&hex::encode(&nonce.finish()[..16]));
    let _ = write!(
        input,
        "\";alg=\"{ALG}\";keyid=\"{}\";tag=\"{LABEL}\"",
        key.id
    );
    mac.update(b"\"@signature-params\": ");
    mac.update(input.get(params_at..).unwrap_or("").as_bytes());
    let mut signature = String::with_capacity(LABEL.len() + 48);
    signature.push_str(LABEL);
    signature.push_str("=:");
    base64::engine::general_purpose::STANDARD.encode_string(mac.tag(), &mut signature);
    signature.push(':');
    Fields {
        content_digest,
        input,
        signature,
    }
}

/// What a seal covers, in order, each component's name and value: the
/// method, path and query, the stamps, the body's digest.
fn components<'s>(
    r: &Request<'s>,
    stamps: &'s [Stamp<'_>],
    digest: Option<&'s str>,
) -> impl Iterator<Item = (&'s str, &'s str)> {
    let (path, query) = split_target(r.path);
    DERIVED
        .into_iter()
        .zip([r.method, path, query])
        .chain(stamps.iter().map(|(n, v)| (*n, &**v)))
        .chain(digest.map(|d| (CONTENT_DIGEST, d)))
}

/// RFC 9530's `Content-Digest` of a body with this SHA-256.
fn digest_field(hash: &[u8; 32]) -> String {
    let mut out = String::with_capacity(54);
    out.push_str("sha-256=:");
    base64::engine::general_purpose::STANDARD.encode_string(hash, &mut out);
    out.push(':');
    out
}

/// `@path` and `@query` of a request target: the path (`/` if empty)
/// without its query, and the query with its `?` (`?` alone if none).
fn split_target(target: &str) -> (&str, &str) {
    let (path, query) = match target.find('?') {
        Some(i) => target.split_at(i),
        None => (target, "?"),
    };
    (if path.is_empty() { "/" } else { path }, query)
}

/// The SHA-256 of a whole body, as the seal covers it.
pub fn body_hash(body: &[u8]) -> [u8; 32] {
    crate::sha256::digest(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests' sealing key: created at 1 700 000 000, for 300 s.
    fn test_key<'a>(secret: &'a Secret, id: &'a str) -> Key<'a> {
        Key {
            secret,
            id,
            created: 1_700_000_000,
            expires: 1_700_000_300,
        }
    }

    fn sealed(
        target: &str,
        stamps: &[(&'static str, &'static str)],
        body: Option<&[u8]>,
    ) -> Fields {
        let secret = Secret::hmac(b"queue-key".to_vec());
        let key = test_key(&secret, "queue-1");
        let r = Request {
            method: "POST",
            path: target,
        };
        let stamps: Vec<Stamp<'_>> = stamps.iter().map(|(n, v)| (*n, (*v).into())).collect();
        seal(&key, &r, b"", &stamps, body.map(body_hash).as_ref())
    }

    /// docs/keys.md's vectors, computed apart (tests/e2e/seal.py).
    #[test]
    fn the_docs_vectors() {
        let s = sealed(
            "/webhooks/github",
            &[
                ("x-hookstamp-source", "github"),
                ("x-hookstamp-tenant", "default"),
            ],
            None,
        );
        assert_eq!(s.content_digest, None);
        assert_eq!(
            s.input,
            "hookstamp=(\"@method\" \"@path\" \"@query\" \"x-hookstamp-source\" \
             \"x-hookstamp-tenant\");created=1700000000;expires=1700000300;\
             nonce=\"53839be6848f1b8898cc3b763cd76624\";alg=\"hmac-sha256\";\
             keyid=\"queue-1\";tag=\"hookstamp\""
        );
        assert_eq!(
            s.signature,
            "hookstamp=:93+1OhhrAIgJvvIeUxHXpsyY7cV6quamnFGIokDXL4Q=:"
        );
        let s = sealed(
            "/webhooks/stripe?x=1",
            &[
                ("x-hookstamp-source", "stripe"),
                ("x-hookstamp-tenant", "acme"),
                ("x-hookstamp-dedupe-key", "evt_1"),
                ("x-hookstamp-dedupe-ttl-ms", "259200000"),
                ("x-hookstamp-idempotency-key", "acme:stripe:evt_1"),
            ],
            Some(br#"{"id":"evt_1"}"#),
        );
        assert_eq!(
            s.content_digest.as_deref(),
            Some("sha-256=:QJk8Y5/7XxOgou9ck8ll8QtAXyuHo3knI4HaLbwVjfo=:")
        );
        assert_eq!(
            s.input,
            "hookstamp=(\"@method\" \"@path\" \"@query\" \"x-hookstamp-source\" \
             \"x-hookstamp-tenant\" \"x-hookstamp-dedupe-key\" \"x-hookstamp-dedupe-ttl-ms\" \
             \"x-hookstamp-idempotency-key\" \"content-digest\");\
             created=1700000000;expires=1700000300;\
             nonce=\"6541c60190230d6b781dae438083ff9d\";alg=\"hmac-sha256\";\
             keyid=\"queue-1\";tag=\"hookstamp\""
        );
        assert_eq!(
            s.signature,
            "hookstamp=:AXtGHl6QKigpV9FHt1HfZMoPXAgoXN7ClReW8xuqSbU=:"
        );
    }

    /// RFC 9421's signature base, built by hand for one request: the lines,
    /// then @signature-params with no newline after it.
    #[test]
    fn the_signature_base_is_rfc_9421s() {
        let stamps = [("x-hookstamp-source", "github")];
        let s = sealed("", &stamps, None);
        let params = s.input.strip_prefix("hookstamp=").unwrap_or_default();
        let base = format!(
            "\"@method\": POST\n\"@path\": /\n\"@query\": ?\n\
             \"x-hookstamp-source\": github\n\"@signature-params\": {params}"
        );
        use hmac::{Hmac, Mac};
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(b"queue-key").unwrap();
        mac.update(base.as_bytes());
        let want = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
        assert_eq!(s.signature, format!("hookstamp=:{want}:"));
    }

    #[test]
    fn the_nonce_is_each_requests_own() {
        let stamps = [("x-hookstamp-source", "github")];
        let nonce = |f: &Fields| f.input.split("nonce=").nth(1).map(|s| s[1..33].to_owned());
        let a = sealed("/webhooks/github", &stamps, None);
        assert_eq!(nonce(&a), nonce(&sealed("/webhooks/github", &stamps, None)));
        assert_ne!(
            nonce(&a),
            nonce(&sealed("/webhooks/github?a", &stamps, None))
        );
        let secret = Secret::hmac(b"queue-key".to_vec());
        let key = test_key(&secret, "k");
        let with_id = |id: &'static [u8]| {
            let r = Request {
                method: "POST",
                path: "/webhooks/github",
            };
            seal(
                &key,
                &r,
                id,
                &[("x-hookstamp-source", "github".into())],
                None,
            )
        };
        assert_ne!(nonce(&with_id(b"a")), nonce(&with_id(b"b")));
        assert_eq!(nonce(&with_id(b"a")), nonce(&with_id(b"a")));
    }

    #[test]
    fn targets_and_client_fields() {
        assert_eq!(split_target("/a?b=c?d"), ("/a", "?b=c?d"));
        assert_eq!(split_target("/a?"), ("/a", "?"));
        assert_eq!(split_target("?x"), ("/", "?x"));
        assert_eq!(client_field("Signature-Input"), 1);
        assert_eq!(client_field("SIGNATURE_INPUT"), 2);
        assert_eq!(client_field("signature"), 4);
        assert_eq!(client_field("Content_Digest"), 16);
        assert_eq!(client_field("signatures"), 0);
        assert_eq!(client_field("x-hookstamp-source"), 0);
    }
}
