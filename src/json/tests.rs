//! The scanner's unit tests.

use super::lex::words::{any_end as any_end_words, ends_run, first_end as first_end_words};
use super::lex::{any_end, first_end, utf8_char};
use super::*;

fn one(body: &str, path: &str) -> Option<Option<String>> {
    let paths = vec![parse_path(path).unwrap()];
    extract(body.as_bytes(), &paths).map(|v| {
        v.into_iter().next().flatten().map(|s| match s {
            Scalar::Str(s) => format!("s:{}", String::from_utf8_lossy(&s)),
            Scalar::Int(i) => format!("i:{}", String::from_utf8_lossy(&i)),
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
fn more_paths_than_the_stack_holds() {
    // Past FEW paths through one key, their candidates are gathered on the
    // heap: each still finds its own value.
    for n in [FEW - 1, FEW, FEW + 1, FEW + 2, 3 * FEW] {
        let fields: Vec<String> = (0..n).map(|i| format!(r#""k{i}":"v{i}""#)).collect();
        let body = format!(r#"{{"pad":[1],"a":{{{}}}}}"#, fields.join(","));
        let paths: Vec<Path> = (0..n).map(|i| vec!["a".into(), format!("k{i}")]).collect();
        let found = extract(body.as_bytes(), &paths).unwrap();
        for (i, f) in found.iter().enumerate() {
            assert_eq!(
                f,
                &Some(Scalar::Str(format!("v{i}").into_bytes().into())),
                "{n} paths, {i}"
            );
        }
    }
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

/// The bytes that end a run, stated plainly.
fn ends(c: u8) -> bool {
    c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c)
}

#[test]
fn ends_run_exactly_at_quote_backslash_control_and_beyond_ascii() {
    for b in 0..=255u8 {
        for at in 0..8 {
            let mut w = [b'a', b'!', b'#', b'z', 0x7F, b'[', b' ', b'~'];
            w[at] = b;
            let w = u64::from_le_bytes(w);
            assert_eq!(ends_run(w) != 0, ends(b), "byte {b:#x} at {at}");
        }
    }
}

#[test]
fn the_first_end_of_a_chunk_is_exact_both_ways() {
    // Every byte at every place, behind plain bytes and ahead of bytes
    // that end a run too (a borrow must not move the answer).
    let ahead = [b'"', b'\\', 0x00, 0x1F, 0x80, 0xFF, b'a'];
    for b in 0..=255u8 {
        for at in 0..16 {
            for &next in &ahead {
                let mut chunk = [b'x'; 16];
                chunk[at] = b;
                for c in chunk.iter_mut().skip(at + 1) {
                    *c = next;
                }
                let want = chunk.iter().position(|&c| ends(c));
                let case = format!("byte {b:#x} at {at}, then {next:#x}");
                assert_eq!(first_end_words(&chunk), want, "{case}");
                assert_eq!(first_end(&chunk), want, "{case}");
            }
        }
    }
}

#[test]
fn a_block_ends_a_run_if_any_byte_does_both_ways() {
    for b in 0..=255u8 {
        for at in 0..64 {
            let mut block = [b'x'; 64];
            block[at] = b;
            assert_eq!(any_end_words(&block), ends(b), "byte {b:#x} at {at}");
            assert_eq!(any_end(&block), ends(b), "byte {b:#x} at {at}");
        }
    }
}

#[test]
fn a_character_beyond_ascii_is_utf8_as_the_standard_library_reads_it() {
    // Every lead and second byte, the third and fourth from the values
    // where the table's ranges turn: the length the standard library
    // gives the first character, or none.
    let turns = [
        0x00, 0x41, 0x7F, 0x80, 0x81, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xFF,
    ];
    for b0 in 0x80..=0xFFu8 {
        for b1 in 0..=0xFFu8 {
            for (&b2, &b3) in turns.iter().flat_map(|x| turns.iter().map(move |y| (x, y))) {
                let seq = [b0, b1, b2, b3];
                let want = match std::str::from_utf8(&seq) {
                    Ok(s) => s.chars().next().map(char::len_utf8),
                    Err(e) => std::str::from_utf8(&seq[..e.valid_up_to()])
                        .ok()
                        .and_then(|s| s.chars().next())
                        .map(char::len_utf8),
                };
                assert_eq!(utf8_char(&seq), want, "{seq:x?}");
                // Cut short, a character is never taken.
                for cut in 0..want.unwrap_or(0) {
                    assert_eq!(utf8_char(&seq[..cut]), None, "{seq:x?} cut to {cut}");
                }
            }
        }
    }
}

#[test]
fn runs_of_every_length_end_at_their_first_ending_byte() {
    // Every length up to past two blocks, each ending byte: the sixteens,
    // the sixty-fours and the byte-at-a-time tail all find the same end.
    for (len, wide) in (0..200).flat_map(|len| [(len, false), (len, true)]) {
        for end in [&b"\""[..], b"\\n\"", b"\xC3\xA9\""] {
            // Wide: a character beyond ASCII first, so the run is checked
            // as UTF-8 from there on.
            let lead = if wide { "é" } else { "" };
            let mut body = format!(r#"{{"id":"{lead}"#).into_bytes();
            body.extend(std::iter::repeat_n(b'a', len));
            body.extend_from_slice(end);
            body.push(b'}');
            let mut want = format!("{lead}{}", "a".repeat(len));
            want.push_str(match end[0] {
                b'"' => "",
                b'\\' => "\n",
                _ => "\u{e9}",
            });
            assert_eq!(
                one(std::str::from_utf8(&body).unwrap(), "id"),
                Some(Some(format!("s:{want}"))),
                "{len}"
            );
        }
    }
}

#[test]
fn strings_beyond_ascii_are_checked_as_utf8() {
    let at = |b: &[u8]| scan(b, &[]).err().map(|e| e.offset);
    // Valid: two, three and four bytes, inside long runs and short ones.
    let long = "é€😀".repeat(20);
    for text in [
        "é",
        "€",
        "😀",
        "aé",
        long.as_str(),
        &format!("{long}\\n{long}"),
    ] {
        let body = format!(r#"{{"k":"{text}","id":"{text}"}}"#);
        assert_eq!(at(body.as_bytes()), None, "{text}");
        let want = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(one(&body, "id"), Some(Some(format!("s:{want}"))));
    }
    // Not UTF-8: a lone continuation, an overlong form, a surrogate, past
    // U+10FFFF, a truncated character, each after a long ASCII run too.
    for bad in [
        &b"\x80"[..],
        b"\xC0\xAF",
        b"\xED\xA0\x80",
        b"\xF4\x90\x80\x80",
        b"\xE2\x82",
    ] {
        for (pad, lead) in [0, 3, 40, 100]
            .into_iter()
            .flat_map(|p| [(p, ""), (p, "é")])
        {
            let mut body = format!(r#"{{"k":"{lead}"#).into_bytes();
            body.extend(std::iter::repeat_n(b'a', pad));
            body.extend_from_slice(bad);
            body.extend_from_slice(br#"","id":"x"}"#);
            let want = 6 + lead.len() + pad;
            assert_eq!(at(&body), Some(want), "{bad:x?} after {lead:?} and {pad}");
            assert_eq!(extract(&body, &[vec!["id".into()]]), None);
        }
    }
    // Beyond ASCII outside a string is not JSON; a later bad byte is named
    // before an earlier syntax error, as a whole-body UTF-8 check would.
    assert_eq!(at("{\"a\":é}".as_bytes()), Some(5));
    assert_eq!(at(b"{\"a\" 1, \"b\":\"\xff\"}"), Some(13));
    // A bad escape takes one byte unchecked: a lone continuation byte, or
    // the first of a character; a later bad byte is still named first.
    assert_eq!(at(b"{\"a\":\"\\\x80\"}"), Some(7));
    assert_eq!(at(b"{\"a\":\"\\\x80 \xff\"}"), Some(7));
    assert_eq!(at("{\"a\":\"\\\u{e9}\"}".as_bytes()), Some(8));
    assert_eq!(
        at("{\"a\":\"\\\u{e9}\", \"b\":\"\u{e9}".as_bytes()),
        Some(8)
    );
    let mut late = "{\"a\":\"\\\u{e9}\"} ".as_bytes().to_vec();
    late.push(0xFF);
    assert_eq!(at(&late), Some(12));
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
