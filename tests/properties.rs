//! Property tests: the scanner against a full-decode reference on generated
//! JSON (escapes, duplicate keys, nesting, big numbers), and the stamp
//! invariants on every request.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hookstamp::config;
use hookstamp::decide::Outcome;
use hookstamp::json::{self, Scalar};
use hookstamp::pairs;

#[path = "common/invariants.rs"]
mod invariants;
use proptest::prelude::*;

/// A JSON document as generated: objects keep duplicate keys in order.
#[derive(Debug, Clone)]
enum J {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        "-?[1-9][0-9]{19,40}",
        Just("-0".to_owned()),
        Just("0".to_owned()),
        "-?(0|[1-9][0-9]{0,5})\\.[0-9]{1,4}",
        "-?(0|[1-9][0-9]{0,3})[eE][+-]?[0-9]{1,2}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_0-9]{0,12}",
        "\\PC{0,8}",
        // Long enough for the scanner's sixteen-byte steps, with quotes,
        // backslashes and control bytes (escaped when rendered) anywhere.
        "\\PC{14,70}",
        "[a-z\"\\\\\n\t\u{e9}]{15,60}",
        any::<String>().prop_map(|s| s.chars().take(10).collect()),
        Just("cus_123".to_owned()),
        Just(String::new()),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("id".to_owned()),
        Just("data".to_owned()),
        Just("object".to_owned()),
        Just("customer".to_owned()),
        "[a-z]{1,3}",
        text(),
    ]
}

fn doc() -> impl Strategy<Value = J> {
    let leaf = prop_oneof![
        Just(J::Null),
        any::<bool>().prop_map(J::Bool),
        number().prop_map(J::Num),
        text().prop_map(J::Str),
    ];
    leaf.prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(J::Arr),
            prop::collection::vec((key(), inner), 0..6).prop_map(J::Obj),
        ]
    })
}

/// Renders with or without escaping every character, and with whitespace.
fn render(j: &J, escape: bool, ws: &str, out: &mut String) {
    let s = |t: &str, out: &mut String| {
        out.push('"');
        for c in t.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if escape || (c as u32) < 0x20 => {
                    let mut buf = [0u16; 2];
                    for u in c.encode_utf16(&mut buf) {
                        out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    };
    match j {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Num(n) => out.push_str(n),
        J::Str(t) => s(t, out),
        J::Arr(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                render(v, escape, ws, out);
            }
            out.push(']');
        }
        J::Obj(members) => {
            out.push('{');
            for (i, (k, v)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws);
                s(k, out);
                out.push_str(ws);
                out.push(':');
                render(v, escape, ws, out);
            }
            out.push_str(ws);
            out.push('}');
        }
    }
}

/// The reference: a full decode, then the path through objects only, the
/// last duplicate winning.
fn reference(j: &J, path: &[&str]) -> Option<String> {
    let mut cur = j;
    for seg in path {
        let J::Obj(members) = cur else { return None };
        cur = &members.iter().rev().find(|(k, _)| k == seg)?.1;
    }
    match cur {
        J::Str(s) => Some(format!("s:{s}")),
        J::Num(n) if !n.contains(['.', 'e', 'E']) => {
            Some(format!("i:{}", if n == "-0" { "0" } else { n }))
        }
        // There, but not a key.
        _ => Some("other".to_owned()),
    }
}

fn ours(body: &[u8], paths: &[&[&str]]) -> Option<Vec<Option<String>>> {
    let paths: Vec<json::Path> = paths
        .iter()
        .map(|p| p.iter().map(|s| s.to_string()).collect())
        .collect();
    json::extract(body, &paths).map(|found| {
        found
            .into_iter()
            .map(|f| {
                f.map(|s| match s {
                    Scalar::Str(s) => format!("s:{s}"),
                    Scalar::Int(n) => format!("i:{n}"),
                    Scalar::Other => "other".to_owned(),
                })
            })
            .collect()
    })
}

const PATHS: &[&[&str]] = &[
    &["id"],
    &["data", "object", "customer"],
    &["data"],
    &["data", "object"],
];

const CONFIG: &str = r#"{"max_json_bytes": 65536, "sources":[{"id":"s.1","tenant":"t-1","dedupe":"stripe","sinks":[
  {"type":"sqs","ordered":true,"ordering_key":{"json":"data.object.customer"}},
  {"type":"log"},
  {"type":"kinesis","ordered":true,"ordering_key":{"header":"x-entity-id"}},
  {"type":"sns","ordered":true},
  {"type":"kafka","ordered":true,"ordering_key":{"header":"x-entity-id"}}]}]}"#;

fn check_stamps(body: &[u8], headers: &[(String, Vec<u8>)]) {
    let cfg = config::load(CONFIG).unwrap().config;
    let out = invariants::check(&cfg, "POST", "/webhooks/s.1", headers, body);
    assert!(matches!(out, Outcome::Forward { .. }), "not forwarded");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn scanner_equals_full_decode(j in doc(), escape in any::<bool>(), ws in "[ \t\r\n]{0,2}") {
        let mut text = String::new();
        render(&j, escape, &ws, &mut text);
        let got = ours(text.as_bytes(), PATHS).expect("a generated document is valid JSON");
        let want: Vec<Option<String>> = PATHS.iter().map(|p| reference(&j, p)).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn validity_agrees_with_serde_json(
        j in doc(),
        cut in any::<prop::sample::Index>(),
        byte in prop_oneof![any::<u8>(), prop::sample::select(b"0123456789{}[]\",:.-+eE \\/u\x00\x1f\x7f\xc0\xff".to_vec())],
    ) {
        let mut text = String::new();
        render(&j, false, " ", &mut text);
        let mut body = text.into_bytes();
        // A valid document, then one byte changed: both parsers must agree.
        if !body.is_empty() {
            let i = cut.index(body.len());
            body[i] = byte;
        }
        let serde = serde_json::from_slice::<serde_json::Value>(&body);
        match (json::is_valid(&body), serde) {
            (true, Ok(_)) | (false, Err(_)) => {}
            (true, Err(e)) => prop_assert!(e.to_string().contains("out of range"), "{e}"),
            (false, Ok(_)) => prop_assert!(false, "rejected a body serde_json accepts"),
        }
    }

    #[test]
    fn stamps_hold_their_invariants(j in doc(), escape in any::<bool>(), entity in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut text = String::new();
        render(&j, escape, "", &mut text);
        check_stamps(text.as_bytes(), &[("x-entity-id".to_owned(), entity)]);
    }

    #[test]
    fn header_maps_round_trip_and_bytes_never_panic(
        map in prop::collection::vec(("[a-z:-]{0,20}", prop::collection::vec(any::<u8>(), 0..40)), 0..12),
        raw in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let map: Vec<(&str, &[u8])> = map.iter().map(|(n, v)| (n.as_str(), v.as_slice())).collect();
        let wire = pairs::serialise(&map);
        prop_assert_eq!(pairs::parse(&wire), Some(map.clone()));
        let _ = pairs::parse(&raw);
    }

    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = json::extract(&body, &PATHS.iter().map(|p| p.iter().map(|s| s.to_string()).collect()).collect::<Vec<_>>());
        check_stamps(&body, &[]);
    }
}

#[test]
fn long_keys_follow_the_length_rules() {
    for n in [0, 1, 127, 128, 129, 199, 200, 201, 5000] {
        let k = "k".repeat(n);
        let body = format!(r#"{{"id":"{k}","data":{{"object":{{"customer":"{k}"}}}}}}"#);
        check_stamps(
            body.as_bytes(),
            &[("x-entity-id".to_owned(), k.into_bytes())],
        );
    }
}

/// One way a client can respell a path segment that a server reads back
/// as the same segment.
fn respell(seg: &str, how: u8) -> String {
    match how % 7 {
        0 => seg.to_owned(),
        1 => seg.to_ascii_uppercase(),
        2 => seg.bytes().map(|b| format!("%{b:02X}")).collect(),
        3 => seg.bytes().map(|b| format!("%25{b:02x}")).collect(),
        4 => format!("{seg};v=1"),
        5 => format!("./{seg}"),
        _ => format!("x/../{seg}"),
    }
}

proptest! {
    /// No respelling of a source's path is ever passed by the filter: it is
    /// stamped (the canonical one) or answered.
    #[test]
    fn no_variant_of_a_source_path_passes(
        hows in proptest::collection::vec(any::<u8>(), 2),
        sep in prop_oneof![Just("/"), Just("//"), Just("\\"), Just("%2F"), Just("%5c")],
        method in prop_oneof![Just("POST"), Just("PUT"), Just("post"), Just("DELETE")],
        tail in prop_oneof![Just(""), Just("/"), Just("?a=1"), Just("%00"), Just("%20")],
    ) {
        let cfg = config::load(r#"{"sources":[{"id":"stripe","dedupe":"stripe"}]}"#).unwrap().config;
        let path = format!("/{}{sep}{}{tail}", respell("webhooks", hows[0]), respell("stripe", hows[1]));
        let got = hookstamp::route::route(&cfg, method, &path);
        prop_assert_ne!(got.clone(), hookstamp::route::Route::Pass, "{} {}", method, path);
        invariants::check_route(&cfg, method, &path);
    }
}
