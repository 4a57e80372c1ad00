//! Forged requests one worker's core refuses a second, per scheme, beside
//! valid ones: each scheme at its worst for the filter (eight secrets or
//! public keys, the signature header listing as many entries as the
//! filter reads, none of them matching), over a 1 KiB body. The rates are
//! wall-clock times of the native core (the dynamic module's), printed,
//! never asserted: BENCHMARKS.md records a run.

use super::{event, Lean};
use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use ed25519_dalek::{Signer, SigningKey};
use hmac::{Hmac, Mac};
use hookstamp::host::Header;
use hookstamp::lifecycle::{Instance, Plugin, Request};
use sha2::Sha256;
use std::sync::Arc;
use std::time::Instant;

/// The seconds of the Lean host's clock (`Lean::now_ms`).
const NOW: &str = "1700000000";
const SECRETS: usize = 8;
/// The most entries a signature header may list (`verify`'s bound).
const ENTRIES: usize = 8;

fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).expect("any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().to_vec()
}

/// One scheme's configuration and its valid and forged headers.
struct Scheme {
    name: &'static str,
    config: String,
    valid: Vec<(String, String)>,
    forged: Vec<(String, String)>,
}

fn secrets(values: impl Iterator<Item = String>) -> String {
    let list: Vec<String> = values.map(|v| format!(r#"{{"value": "{v}"}}"#)).collect();
    list.join(", ")
}

fn config(id: &str, scheme: &str, secrets: &str) -> String {
    format!(
        r#"{{"sources": [{{"id": "{id}", "verify": {{"scheme": "{scheme}", "secrets": [{secrets}]}}}}]}}"#
    )
}

fn schemes(body: &[u8]) -> Vec<Scheme> {
    let keys: Vec<String> = (0..SECRETS).map(|i| format!("secret-{i}")).collect();
    let last = keys[SECRETS - 1].as_bytes();
    let github = Scheme {
        name: "github (hmac, 8 secrets)",
        config: config("gh", "github", &secrets(keys.iter().cloned())),
        valid: vec![(
            "x-hub-signature-256".into(),
            format!("sha256={}", hex::encode(hmac(last, &[body]))),
        )],
        forged: vec![(
            "x-hub-signature-256".into(),
            format!("sha256={}", "0".repeat(64)),
        )],
    };
    let signed = hmac(last, &[NOW.as_bytes(), b".", body]);
    let wrong = (0..ENTRIES).map(|i| format!("v1={i:064x}"));
    let stripe = Scheme {
        name: "stripe (hmac, 8 secrets, 8 v1 entries)",
        config: config("stripe", "stripe", &secrets(keys.iter().cloned())),
        valid: vec![(
            "stripe-signature".into(),
            format!("t={NOW},v1={}", hex::encode(signed)),
        )],
        forged: vec![(
            "stripe-signature".into(),
            format!("t={NOW},{}", wrong.collect::<Vec<_>>().join(",")),
        )],
    };
    let whsec: Vec<Vec<u8>> = (0..SECRETS).map(|i| vec![i as u8 + 1; 24]).collect();
    let id_headers = |sig: String| {
        vec![
            ("webhook-id".into(), "msg_1".into()),
            ("webhook-timestamp".into(), NOW.into()),
            ("webhook-signature".into(), sig),
        ]
    };
    let mac = hmac(
        &whsec[SECRETS - 1],
        &[b"msg_1.", NOW.as_bytes(), b".", body],
    );
    let junk = B64.encode([7u8; 32]);
    let standard = Scheme {
        name: "standard_webhooks (hmac, 8 secrets, 8 v1 entries)",
        config: config(
            "sw",
            "standard_webhooks",
            &secrets(whsec.iter().map(|k| format!("whsec_{}", B64.encode(k)))),
        ),
        valid: id_headers(format!("v1,{}", B64.encode(mac))),
        forged: id_headers(vec![format!("v1,{junk}"); ENTRIES].join(" ")),
    };
    let signers: Vec<SigningKey> = (0..SECRETS)
        .map(|i| SigningKey::from_bytes(&[i as u8 + 1; 32]))
        .collect();
    let mut msg = b"msg_1.".to_vec();
    msg.extend_from_slice(NOW.as_bytes());
    msg.push(b'.');
    msg.extend_from_slice(body);
    let good = B64.encode(signers[SECRETS - 1].sign(&msg).to_bytes());
    // Well-formed signatures (a curve point, a canonical scalar) of
    // another message, each checked in full: no cheap early refusal.
    let bad = B64.encode(signers[0].sign(b"another message").to_bytes());
    let ed25519 = Scheme {
        name: "standard_webhooks (ed25519, 8 public keys, 1 v1a entry)",
        config: config(
            "swa",
            "standard_webhooks",
            &secrets(
                signers
                    .iter()
                    .map(|k| format!("whpk_{}", B64.encode(k.verifying_key().to_bytes()))),
            ),
        ),
        valid: id_headers(format!("v1a,{good}")),
        // One entry under eight keys: the most Ed25519 checks a request
        // gets (more entries times keys is refused before any).
        forged: id_headers(format!("v1a,{}", bad)),
    };
    vec![github, stripe, standard, ed25519]
}

/// `n` requests of one scheme's headers; (requests a second, 401s sent).
fn rate(scheme: &Scheme, headers: &[(String, String)], body: &[u8], n: u32) -> (f64, usize) {
    let path = format!("/webhooks/{}", source_id(&scheme.config));
    let len = body.len().to_string();
    let mut all: Vec<(String, String)> = vec![
        (":method".into(), "POST".into()),
        (":path".into(), path),
        (":authority".into(), "127.0.0.1".into()),
        ("content-type".into(), "application/json".into()),
        ("content-length".into(), len),
    ];
    all.extend_from_slice(headers);
    let leaked: &'static [(String, String)] = Box::leak(all.into_boxed_slice());
    let views: Vec<Header<'static>> = leaked
        .iter()
        .map(|(k, v)| (k.as_bytes(), v.as_bytes()))
        .collect();
    let mut host = Lean {
        headers: views,
        body: body.to_vec(),
        added: 0,
        replies: 0,
    };
    let plugin = Plugin::load(&mut host, scheme.config.as_bytes()).expect("the scheme loads");
    let instance = Instance::new(Arc::new(plugin));
    let size = body.len();
    let t0 = Instant::now();
    for i in 0..n {
        let mut r = Request::new(Some(instance.clone()), i);
        r.on_headers(&mut host, false);
        r.on_body(&mut host, size, true);
    }
    (f64::from(n) / t0.elapsed().as_secs_f64(), host.replies)
}

fn source_id(config: &str) -> &str {
    let start = config.find(r#""id": ""#).map_or(0, |i| i + 7);
    let end = config[start..].find('"').map_or(start, |e| start + e);
    &config[start..end]
}

pub fn run(n: u32) {
    let body = event(1024, "x");
    println!("Forged vs valid requests one worker's core refuses or stamps a second (1 KiB body, {n} each):");
    println!(
        "{:<58} {:>12} {:>12} {:>8}",
        "scheme (its worst forgery)", "valid/s", "forged/s", "forged÷valid"
    );
    for s in schemes(&body) {
        let (valid, refused) = rate(&s, &s.valid, &body, n);
        assert_eq!(refused, 0, "{}: a valid request was refused", s.name);
        let (forged, refused) = rate(&s, &s.forged, &body, n);
        assert_eq!(refused, n as usize, "{}: a forgery was not refused", s.name);
        println!(
            "{:<58} {:>12.0} {:>12.0} {:>8.2}",
            s.name,
            valid,
            forged,
            forged / valid
        );
    }
}
