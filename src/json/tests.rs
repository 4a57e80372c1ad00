//! The scanner's unit tests.

use super::lex::ends_run;
use super::*;

fn one(body: &str, path: &str) -> Option<Option<String>> {
    let paths = vec![parse_path(path).unwrap()];
    extract(body.as_bytes(), &paths).map(|v| {
        v.into_iter().next().flatten().map(|s| match s {
            Scalar::Str(s) => format!("s:{s}"),
            Scalar::Int(i) => format!("i:{i}"),
            Scalar::Other => "other".into(),
        })
    })
}

#[test]
fn finds_strings_and_integers() {
    assert_eq!(one(r#"{"id":"evt_1"}"#, "id"), Some(Some("s:evt_1".into())));
    assert_eq!(one(r#"{"id":-0}"#, "id"), Some(Some("i:0".into())));
    assert_eq!(
        one(r#"{"id":123456789012345678901234567890}"#, "id"),
        Some(Some("i:123456789012345678901234567890".into()))
    );
    assert_eq!(one(r#"{"id":1.0}"#, "id"), Some(Some("other".into())));
    assert_eq!(one(r#"{"id":1e3}"#, "id"), Some(Some("other".into())));
    assert_eq!(one(r#"{"x":1}"#, "id"), Some(None));
    assert_eq!(one(r#"{"id":{"a":1}}"#, "id"), Some(Some("other".into())));
    assert_eq!(
        one(r#"{"a":{"b":{"c":"x"}}}"#, "a.b.c"),
        Some(Some("s:x".into()))
    );
}

#[test]
fn duplicates_last_wins_whole_subtree() {
    assert_eq!(one(r#"{"a":{"b":"1"},"a":{"c":"2"}}"#, "a.b"), Some(None));
    assert_eq!(
        one(r#"{"id":"1","id":"2"}"#, "id"),
        Some(Some("s:2".into()))
    );
    assert_eq!(
        one(r#"{"id":"1","id":null}"#, "id"),
        Some(Some("other".into()))
    );
}

#[test]
fn invalid_anywhere_finds_nothing() {
    assert_eq!(one(r#"{"id":"x"} x"#, "id"), None);
    assert_eq!(one(r#"{"id":"x","y":"\ud800"}"#, "id"), None);
    assert_eq!(one(r#"{"id":"x","y":01}"#, "id"), None);
    assert_eq!(one("\u{feff}{\"id\":\"x\"}", "id"), None);
    assert_eq!(one("", "id"), None);
    assert!(extract(b"{\"id\":\"x\",\"y\":\"\xff\"}", &[]).is_none());
}

#[test]
fn escaped_keys_and_values() {
    assert_eq!(
        one(r#"{"\u0069d":"a\nb\ud83d\ude00"}"#, "id"),
        Some(Some("s:a\nb\u{1f600}".into()))
    );
}

#[test]
fn ends_run_exactly_at_quote_backslash_and_control() {
    for b in 0..=255u8 {
        let want = b == b'"' || b == b'\\' || b < 0x20;
        for at in 0..8 {
            let mut w = [b'a', 0xC3, 0xA9, b'z', 0x7F, 0xFF, b' ', b'~'];
            w[at] = b;
            assert_eq!(ends_run(u64::from_le_bytes(w)), want, "byte {b:#x} at {at}");
        }
    }
}

#[test]
fn an_invalid_body_says_where_the_scan_stopped() {
    let at = |b: &[u8]| scan(b, &[]).err().map(|e| e.offset);
    assert_eq!(at(br#"{"a":1}"#), None);
    assert_eq!(at(br#"{"a":1,}"#), Some(7));
    assert_eq!(at(br#"{"a" 1}"#), Some(5));
    assert_eq!(at(b"{\"a\":\"\xff\"}"), Some(6));
    assert_eq!(at(br#"{"a":1} x"#), Some(8));
    assert_eq!(at(br#"[1,2"#), Some(4));
}

#[test]
fn deep_nesting_does_not_recurse() {
    let deep = "[".repeat(200_000) + &"]".repeat(200_000);
    assert!(is_valid(deep.as_bytes()));
    let body = format!(r#"{{"x":{deep},"id":"k"}}"#);
    assert_eq!(one(&body, "id"), Some(Some("s:k".into())));
    assert!(!is_valid("[".repeat(1000).as_bytes()));
}
