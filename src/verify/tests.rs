//! The checks of a few schemes by hand, over chunks and rotation lists.

use super::*;

const REQ: Request<'static> = Request {
    method: "POST",
    path: "/",
};

fn hmac256(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut m = Mac::new(Algorithm::Sha256, key).unwrap();
    m.update(msg);
    m.tag().as_ref().to_vec()
}

#[test]
fn github_over_chunks_and_rotation() {
    let v = Verify {
        scheme: Scheme::Preset(SchemePreset::Github),
        secrets: Secrets::All(vec![]),
        tolerance_s: 300,
        on_failure: OnFailure::Reject,
        public_url: None,
        mode: Mode::Hold,
        refuses_tokens: false,
    };
    let body = b"{\"zen\":\"hi\"}";
    let sig = format!("sha256={}", hex::encode(hmac256(b"new", body)));
    let hdr = |n: &str| (n == "x-hub-signature-256").then_some(sig.as_bytes());
    let secrets = [Secret::hmac(b"old".to_vec()), Secret::hmac(b"new".to_vec())];
    let mut p = v.start(&secrets, hdr, REQ, 0).unwrap();
    p.update(&body[..3]);
    p.update(&body[3..]);
    assert_eq!(p.finish(b""), Ok(()));
    let reason = |r: Result<(), Failure>| r.map_err(|f| f.reason);
    assert_eq!(
        v.check(&secrets[..1], hdr, REQ, body, 0),
        Err(Failure::new(
            Reason::Mismatch,
            Why::Mismatch {
                signatures: 1,
                secrets: 1
            }
        ))
    );
    assert_eq!(
        reason(v.check(&secrets, hdr, REQ, b"{\"zen\":\"hI\"}", 0)),
        Err(Reason::Mismatch)
    );
    assert_eq!(
        v.check(&secrets, |_| None, REQ, body, 0),
        Err(Failure::missing("x-hub-signature-256"))
    );
    let bad = |n: &str| (n == "x-hub-signature-256").then_some(b"sha1=00".as_slice());
    assert_eq!(
        reason(v.check(&secrets, bad, REQ, body, 0)),
        Err(Reason::Malformed)
    );
}

fn verify(scheme: Scheme, public_url: Option<PublicUrl>) -> Verify {
    Verify {
        scheme,
        secrets: Secrets::All(vec![]),
        tolerance_s: 300,
        on_failure: OnFailure::Reject,
        public_url,
        mode: Mode::Hold,
        refuses_tokens: false,
    }
}

fn pairs<'h>(h: &'h [(&str, String)]) -> impl Fn(&str) -> Option<&'h [u8]> {
    |n: &str| h.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_bytes())
}

/// Twilio's own example (its RequestValidator's documentation and
/// tests): the URL, then the form's fields sorted by name.
#[test]
fn twilio_signs_the_url_and_the_sorted_form() {
    let url = PublicUrl {
        origin: "https://mycompany.com".into(),
        bare: "https://mycompany.com".into(),
        with_port: "https://mycompany.com:443".into(),
    };
    let v = verify(Scheme::Preset(SchemePreset::Twilio), Some(url));
    let h = [(
        "x-twilio-signature",
        "RSOYDt4T1cUTdK1PDd93/VVr8B8=".to_owned(),
    )];
    let req = Request {
        method: "POST",
        path: "/myapp.php?foo=1&bar=2",
    };
    // The fields in another order than signed, as a client may send them.
    let body = b"To=%2B18005551212&Digits=1234&CallSid=CA1234567890ABCDE&From=%2B14158675309&Caller=%2B14158675309";
    let token = [Secret::hmac(b"12345".to_vec())];
    let mut p = v.start(&token, pairs(&h), req, 0).unwrap();
    assert!(p.keeps_body());
    for chunk in body.chunks(7) {
        p.update(chunk);
    }
    assert_eq!(p.finish(body), Ok(()));
    let changed = b"To=%2B18005551212&Digits=1235&CallSid=CA1234567890ABCDE&From=%2B14158675309&Caller=%2B14158675309";
    assert!(v.check(&token, pairs(&h), req, changed, 0).is_err());
    let other = Request {
        method: "POST",
        path: "/myapp.php?foo=1&bar=3",
    };
    assert!(v.check(&token, pairs(&h), other, body, 0).is_err());
}

/// Ed25519 verified as the body streams, under any key of a rotation
/// list; the content after `{body}` fed at the end.
#[test]
fn ed25519_over_chunks_with_content_after_the_body() {
    use ed25519_dalek::{Signer, SigningKey};
    let sk = SigningKey::from_bytes(&[7u8; 32]);
    let other = SigningKey::from_bytes(&[8u8; 32]);
    let key = |k: &SigningKey| {
        Secret(
            k.verifying_key().to_bytes().to_vec(),
            Key::Ed25519(k.verifying_key()),
        )
    };
    let v = verify(
        Scheme::Custom(Custom {
            header: "x-sig".into(),
            prefix: String::new(),
            encoding: Encoding::Hex,
            algorithm: Algorithm::Ed25519,
            timestamp_header: Some("x-ts".into()),
            timestamp_ms: false,
            signed: vec![Part::Method, Part::Path, Part::Body, Part::Timestamp],
        }),
        None,
    );
    let body = b"{\"id\":\"evt_1\",\"pad\":\"xxxxxxxxxxxxxxxxxxxx\"}";
    let mut msg = b"PUT/hooks".to_vec();
    msg.extend_from_slice(body);
    msg.extend_from_slice(b"1700000000");
    let h = [
        ("x-sig", hex::encode(sk.sign(&msg).to_bytes())),
        ("x-ts", "1700000000".to_owned()),
    ];
    let req = Request {
        method: "PUT",
        path: "/hooks?x=1",
    };
    let keys = [key(&other), key(&sk)];
    let mut p = v.start(&keys, pairs(&h), req, 1_700_000_000).unwrap();
    assert!(!p.keeps_body());
    for chunk in body.chunks(5) {
        p.update(chunk);
    }
    assert_eq!(p.finish(b""), Ok(()));
    let post = Request {
        method: "POST",
        path: "/hooks",
    };
    assert_eq!(
        v.check(&keys, pairs(&h), post, body, 1_700_000_000)
            .map_err(|f| f.why),
        Err(Why::NoMatch {
            hmac_signatures: 0,
            secrets: 0,
            ed25519_signatures: 1,
            public_keys: 2
        })
    );
    assert!(v
        .check(&keys[..1], pairs(&h), req, body, 1_700_000_000)
        .is_err());
}

#[test]
fn secrets_never_print() {
    let s = Secret::hmac(b"whsec_topsecret".to_vec());
    assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
}

#[test]
fn a_secret_is_wiped_in_place() {
    let mut s = Secret::hmac(b"whsec-not-a-real-one".to_vec());
    let (ptr, len) = (s.0.as_ptr(), s.0.len());
    s.wipe();
    // The same buffer, every byte zero: what Drop leaves in freed memory.
    assert_eq!((s.0.as_ptr(), s.0.len()), (ptr, len));
    assert!(s.0.iter().all(|&b| b == 0));
    // Its keyed HMAC state is made anew from the zeroed bytes: the old
    // key's tag no longer comes out.
    let mut old = Secret::hmac(b"whsec-not-a-real-one".to_vec());
    let tag = |s: &Secret| {
        let mut m = s.mac(Algorithm::Sha256).unwrap();
        m.update(b"body");
        m.tag().as_ref().to_vec()
    };
    let before = tag(&old);
    old.wipe();
    assert_ne!(tag(&old), before);
    assert_eq!(tag(&old), tag(&Secret::hmac(vec![0; 20])));
}

/// Stripe's header: the first `t=` counts, empty and unknown entries are
/// passed over, and nine entries are the most (a `t=` and eight `v1=`),
/// whatever they are.
#[test]
fn stripe_entries_duplicates_and_blanks() {
    let stripe = verify(Scheme::Preset(SchemePreset::Stripe), None);
    let key = [Secret::hmac(b"k".to_vec())];
    let good = hex::encode(hmac256(b"k", b"1700000000.{}"));
    let check = |h: String| {
        let v = &stripe;
        let p = v.start(&key, pairs(&[("stripe-signature", h)]), REQ, 1_700_000_000);
        p.and_then(|mut p| {
            p.update(b"{}");
            p.finish(b"{}")
        })
        .map_err(|f| f.reason)
    };
    assert_eq!(check(format!("t=1700000000,v1={good}")), Ok(()));
    assert_eq!(check(format!(",t=1700000000,,v0=x, v1={good} ,")), Ok(()));
    // The second t= is not the one signed: the first is.
    assert_eq!(check(format!("t=1700000000,t=1,v1={good}")), Ok(()));
    assert_eq!(
        check(format!("t=1,t=1700000000,v1={good}")),
        Err(Reason::Expired)
    );
    let nine = format!("t=1700000000{}", ",".repeat(7)) + &format!(",v1={good}");
    assert_eq!(check(nine.clone()), Ok(()));
    assert_eq!(check(nine + ","), Err(Reason::Malformed));
}

/// A signature header listing more entries than a sender ever does is
/// malformed before any entry is decoded or any body hashed; so is one
/// whose Ed25519 signatures times public keys pass the bound.
#[test]
fn long_signature_lists_are_refused_before_any_work() {
    use ed25519_dalek::SigningKey;
    let malformed = |v: &Verify, secrets: &[Secret], h: &[(&str, String)]| {
        let r = v.start(secrets, pairs(h), REQ, 1_700_000_000).map(|_| ());
        assert_eq!(r.map_err(|f| f.reason), Err(Reason::Malformed), "{h:?}");
    };
    let hmac = [Secret::hmac(b"k".to_vec())];
    let stripe = verify(Scheme::Preset(SchemePreset::Stripe), None);
    let v1 = format!(",v1={}", "ab".repeat(32));
    let list = |n: usize| format!("t=1700000000{}", v1.repeat(n));
    assert!(stripe
        .start(
            &hmac,
            pairs(&[("stripe-signature", list(8))]),
            REQ,
            1_700_000_000
        )
        .is_ok());
    malformed(&stripe, &hmac, &[("stripe-signature", list(9))]);

    let sw = verify(Scheme::Preset(SchemePreset::StandardWebhooks), None);
    let entry = format!("v1,{}", "A".repeat(44));
    let sw_headers = |sig: String| {
        vec![
            ("webhook-id", "msg_1".to_owned()),
            ("webhook-timestamp", "1700000000".to_owned()),
            ("webhook-signature", sig),
        ]
    };
    let entries = |n: usize| vec![entry.clone(); n].join(" ");
    assert!(sw
        .start(&hmac, pairs(&sw_headers(entries(8))), REQ, 1_700_000_000)
        .is_ok());
    malformed(&sw, &hmac, &sw_headers(entries(9)));

    let keys: Vec<Secret> = (1..=8u8)
        .map(|i| {
            let k = SigningKey::from_bytes(&[i; 32]).verifying_key();
            Secret(k.to_bytes().to_vec(), Key::Ed25519(k))
        })
        .collect();
    let v1a = format!("v1a,{}", "A".repeat(86) + "==");
    assert!(sw
        .start(&keys, pairs(&sw_headers(v1a.clone())), REQ, 1_700_000_000)
        .is_ok());
    malformed(&sw, &keys, &sw_headers(format!("{v1a} {v1a}")));
}

#[test]
fn unhex_is_hex_decode() {
    for s in [
        "", "00", "0aFf", "deadBEEF", "0", "0g", "zz", "é1", "123", "ff00",
    ] {
        assert_eq!(super::unhex(s), hex::decode(s).ok(), "{s:?}");
    }
    // Every pair of characters a header's text can hold.
    let chars: Vec<char> = (0u8..128).map(char::from).chain(['é', 'ÿ', '€']).collect();
    for a in &chars {
        for b in &chars {
            let s = format!("{a}{b}");
            assert_eq!(super::unhex(&s), hex::decode(&s).ok(), "{s:?}");
        }
    }
}

/// The comparison a word at a time tells equal from unequal at every
/// length and every place a byte differs, as a byte at a time does.
#[test]
fn tags_compare_equal_only_when_every_byte_is() {
    for len in 0..=70usize {
        let a: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
        assert!(pending::ct_eq(&a, &a.clone()), "{len}");
        for at in 0..len {
            for flip in [0x01, 0x80, 0xFF] {
                let mut b = a.clone();
                b[at] ^= flip;
                assert!(!pending::ct_eq(&a, &b), "{len} {at} {flip}");
            }
        }
        assert!(!pending::ct_eq(&a, &a[..len.saturating_sub(1)]) || len == 0);
    }
}
