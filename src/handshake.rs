//! Endpoint handshakes answered at the edge: a provider's check that the
//! endpoint is its own, answered by the filter, never forwarded to the
//! queue. A POST handshake (Slack, Discord, Zoom) is answered only once its
//! signature verified (the provider signs it); a GET one (Meta's
//! `hub.challenge`, the X/Twitter CRC) is answered from its query.
//!
//! Every value a handshake reflects or signs is a token of at most 256
//! characters of `[A-Za-z0-9._~+/=-]`: never JSON or a body, so the CRC's
//! HMAC cannot be turned into a signature over a forged hook, and no answer
//! needs escaping.

use crate::json::{self, Scalar};
use crate::names::token_ok;
use crate::reply::{self, Reply};
use crate::verify::{Algorithm, Secret};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;

/// A source's handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handshake {
    /// Slack's `url_verification`: `{"challenge": C}`.
    Slack,
    /// Discord's interaction PING (`"type": 1`): `{"type": 1}`.
    Discord,
    /// Zoom's `endpoint.url_validation`: the plain token and its HMAC under
    /// the source's first secret.
    Zoom,
    /// Meta's subscription check: a GET with `hub.mode=subscribe`, the
    /// verify token, and `hub.challenge`, answered with the challenge.
    Meta { token: Secret },
    /// The X/Twitter CRC: a GET with `<query>=T`, answered with
    /// `sha256=` + base64 of T's HMAC-SHA256 under the first secret.
    Crc { query: String },
}

const JSON: &str = "application/json";

fn hmac256(secret: &Secret, msg: &[u8]) -> Option<Vec<u8>> {
    let mut m = secret.mac(Algorithm::Sha256)?;
    m.update(msg);
    Some(m.tag().as_ref().to_vec())
}

impl Handshake {
    pub fn name(&self) -> &'static str {
        match self {
            Handshake::Slack => "slack",
            Handshake::Discord => "discord",
            Handshake::Zoom => "zoom",
            Handshake::Meta { .. } => "meta",
            Handshake::Crc { .. } => "crc",
        }
    }

    /// Whether the handshake comes as a GET (else as a signed POST).
    pub fn on_get(&self) -> bool {
        matches!(self, Handshake::Meta { .. } | Handshake::Crc { .. })
    }

    /// Whether it needs the source's first secret.
    pub fn signs(&self) -> bool {
        matches!(self, Handshake::Zoom | Handshake::Crc { .. })
    }

    /// A GET's answer from its query string (without `?`); `None`: not a
    /// handshake, which passes as any GET does.
    pub fn answer_get(&self, query: &str, secret: Option<&Secret>) -> Option<Reply> {
        let fields = crate::form::form_fields(query.as_bytes());
        let get = |n: &str| {
            fields
                .iter()
                .find(|(k, _)| k == n.as_bytes())
                .map(|(_, v)| v.as_slice())
        };
        match self {
            Handshake::Meta { token } => {
                if get("hub.mode")? != b"subscribe" {
                    return None;
                }
                let known =
                    get("hub.verify_token").is_some_and(|t| crate::verify::ct_eq(t, &token.0));
                Some(
                    match get("hub.challenge").filter(|c| known && token_ok(c)) {
                        Some(c) => {
                            reply::handshake(String::from_utf8_lossy(c).into_owned(), "text/plain")
                        }
                        None => reply::HANDSHAKE_REFUSED,
                    },
                )
            }
            Handshake::Crc { query: name } => {
                let t = get(name)?;
                let tag = secret.filter(|_| token_ok(t)).and_then(|s| hmac256(s, t));
                Some(match tag {
                    Some(tag) => reply::handshake(
                        format!(r#"{{"response_token":"sha256={}"}}"#, STANDARD.encode(tag)),
                        JSON,
                    ),
                    None => reply::HANDSHAKE_REFUSED,
                })
            }
            _ => None,
        }
    }

    /// A verified POST's answer from its JSON body; `None`: an ordinary
    /// hook, stamped and forwarded.
    pub fn answer_post(&self, body: &[u8], secret: Option<&Secret>) -> Option<Reply> {
        let text = |s: &Option<Scalar<'_>>| match s {
            Some(Scalar::Str(v)) => String::from_utf8(v.to_vec()).ok(),
            _ => None,
        };
        match self {
            Handshake::Slack => {
                let paths = [vec!["type".to_owned()], vec!["challenge".to_owned()]];
                let found = json::extract(body, &paths)?;
                if text(&found[0]).as_deref() != Some("url_verification") {
                    return None;
                }
                Some(match text(&found[1]).filter(|c| token_ok(c.as_bytes())) {
                    Some(c) => reply::handshake(format!(r#"{{"challenge":"{c}"}}"#), JSON),
                    None => reply::HANDSHAKE_REFUSED,
                })
            }
            Handshake::Discord => {
                let found = json::extract(body, &[vec!["type".to_owned()]])?;
                matches!(&found[0], Some(Scalar::Int(n)) if **n == *b"1")
                    .then(|| reply::handshake(r#"{"type":1}"#.to_owned(), JSON))
            }
            Handshake::Zoom => {
                let paths = [
                    vec!["event".to_owned()],
                    vec!["payload".to_owned(), "plainToken".to_owned()],
                ];
                let found = json::extract(body, &paths)?;
                if text(&found[0]).as_deref() != Some("endpoint.url_validation") {
                    return None;
                }
                let plain = text(&found[1]).filter(|p| token_ok(p.as_bytes()));
                let answer = plain.and_then(|p| {
                    let tag = hmac256(secret?, p.as_bytes())?;
                    Some(format!(
                        r#"{{"plainToken":"{p}","encryptedToken":"{}"}}"#,
                        hex::encode(tag)
                    ))
                });
                Some(match answer {
                    Some(b) => reply::handshake(b, JSON),
                    None => reply::HANDSHAKE_REFUSED,
                })
            }
            Handshake::Meta { .. } | Handshake::Crc { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::MAX_TOKEN;

    #[test]
    fn tokens_are_bounded_and_never_json() {
        assert!(token_ok(
            b"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
        ));
        assert!(!token_ok(b"{\"id\":1}"));
        assert!(!token_ok(&[b'a'; MAX_TOKEN + 1]));
        assert!(!token_ok(b""));
    }

    #[test]
    fn crc_is_no_oracle_for_a_body() {
        let h = Handshake::Crc {
            query: "crc_token".to_owned(),
        };
        let s = Secret::hmac(b"k".to_vec());
        assert_eq!(
            h.answer_get("crc_token=%7B%22a%22%3A1%7D", Some(&s)),
            Some(reply::HANDSHAKE_REFUSED)
        );
        assert_eq!(h.answer_get("other=1", Some(&s)), None);
    }
}
