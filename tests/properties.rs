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
                    Scalar::Str(s) => format!("s:{}", String::from_utf8_lossy(&s)),
                    Scalar::Int(n) => format!("i:{}", String::from_utf8_lossy(&n)),
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
  {"type":"kinesis","ordered":true,"ordering_key":{"header":"x-entity-id"},"group_scope":"tenant"},
  {"type":"sns","ordered":true,"group_scope":"tenant"},
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
    fn validity_agrees_with_serde_json_when_bytes_are_spliced_in(
        j in doc(),
        at in any::<prop::sample::Index>(),
        bytes in prop::collection::vec(prop_oneof![any::<u8>(), 0x80u8..0xC0, 0xC2u8..0xF5], 1..5),
    ) {
        // Bytes beyond ASCII are checked as UTF-8 where a string leaves
        // ASCII: up to four arbitrary ones (lead and continuation bytes
        // favoured) spliced in anywhere, both parsers must agree.
        let mut text = String::new();
        render(&j, false, " ", &mut text);
        let mut body = text.into_bytes();
        let i = at.index(body.len() + 1);
        body.splice(i..i, bytes);
        let serde = serde_json::from_slice::<serde_json::Value>(&body);
        match (json::is_valid(&body), serde) {
            (true, Ok(_)) | (false, Err(_)) => {}
            (true, Err(e)) => prop_assert!(e.to_string().contains("out of range"), "{e}"),
            (false, Ok(_)) => prop_assert!(false, "rejected a body serde_json accepts"),
        }
        if std::str::from_utf8(&body).is_err() {
            prop_assert!(!json::is_valid(&body));
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
        let bytes: Vec<(&[u8], &[u8])> = map.iter().map(|(n, v)| (n.as_bytes(), *v)).collect();
        prop_assert_eq!(pairs::parse(&wire), Some(bytes));
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

/// What the groups' argument rests on (`lanes::keyed_group`): the bytes a
/// tenant or a source id may hold, tried one by one, are `[A-Za-z0-9._-]`
/// (`.` a source id's only): never `/` nor `:`.
#[test]
fn names_hold_neither_slash_nor_colon() {
    // In byte order, as tried.
    let taken = |ok: fn(&str) -> bool| -> String {
        (0..=127u8)
            .map(char::from)
            .filter(|c| ok(&format!("a{c}b")))
            .collect()
    };
    // Digits, capitals, `_`, small letters.
    let word = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ_abcdefghijklmnopqrstuvwxyz";
    assert_eq!(taken(config::tenant_ok), format!("-{word}"));
    assert_eq!(taken(config::source_id_ok), format!("-.{word}"));
    for name in ["a/b", "a:b", "k:acme", "acme/stripe"] {
        assert!(
            !config::tenant_ok(name) && !config::source_id_ok(name),
            "{name}"
        );
    }
}

/// The config of `groups_of_tenants_never_collide`: two sources of any
/// tenant, each with a tenant-scoped lane keyed by a header on four
/// brokers' limits (SQS 128, RabbitMQ 255, Kinesis 256, Kafka none).
fn tenant_scoped(s1: &str, s2: &str) -> config::Config {
    let sinks = ["sqs", "rabbitmq", "kinesis", "kafka"]
        .map(|t| {
            format!(
                r#"{{"type":"{t}","ordered":true,"group_scope":"tenant","ordering_key":{{"header":"x-k"}}}}"#
            )
        })
        .join(",");
    let source =
        |id: &str| format!(r#"{{"id":"{id}","dedupe":{{"header":"x-k"}},"sinks":[{sinks}]}}"#);
    let text = format!(
        r#"{{"routing":"tenant_path","sources":[{},{}]}}"#,
        source(s1),
        source(s2)
    );
    config::load(&text).unwrap().config
}

/// Which group a request's lane must have: a keyed lane's is its tenant's
/// and its key's (after the 128-byte rule), whatever the source; a keyless
/// lane's, its tenant's and its source's.
#[derive(Debug, PartialEq, Eq)]
enum GroupOf {
    Keyed(String, Vec<u8>),
    Keyless(String, String),
}

/// The groups of each ordered sink a request to `source` as `tenant` with
/// header `x-k: key` (none: no header) is stamped, and which group it must
/// be.
fn groups(
    cfg: &config::Config,
    tenant: &str,
    source: &str,
    key: Option<&[u8]>,
) -> (Vec<String>, GroupOf) {
    let headers: Vec<(String, Vec<u8>)> = key
        .map(|k| vec![("x-k".to_owned(), k.to_vec())])
        .unwrap_or_default();
    let path = format!("/webhooks/{tenant}/{source}");
    let out = invariants::check(cfg, "POST", &path, &headers, b"");
    let Outcome::Forward { stamped, .. } = out else {
        panic!("{path}: not forwarded")
    };
    let got = (0..4)
        .map(|i| {
            let name = format!("x-hookstamp-lane-{i}-group");
            let (_, v) = stamped.headers.iter().find(|(n, _)| *n == name).unwrap();
            v.to_string()
        })
        .collect();
    let of = match key.filter(|k| !k.is_empty()) {
        Some(k) => GroupOf::Keyed(
            tenant.to_owned(),
            hookstamp::key::cap(std::borrow::Cow::Borrowed(k), 128).into_owned(),
        ),
        None => GroupOf::Keyless(tenant.to_owned(), source.to_owned()),
    };
    (got, of)
}

/// A key as a client could choose one against another tenant: any bytes,
/// another tenant's keyless group (`acme/stripe`), the keyed form itself
/// (`k:acme/cus_1`), a hash's form, long enough to be hashed.
fn chosen_key(t: String, s: String) -> impl Strategy<Value = Option<Vec<u8>>> {
    prop_oneof![
        Just(None),
        prop::collection::vec(any::<u8>(), 0..200).prop_map(Some),
        "[a-z:/_]{1,12}".prop_map(|k| Some(k.into_bytes())),
        Just(Some(format!("{t}/{s}").into_bytes())),
        Just(Some(format!("k:{t}/{s}").into_bytes())),
        "[a-z]{120,130}".prop_map(move |k| Some(format!("{t}/{k}").into_bytes())),
        "[0-9a-f]{64}".prop_map(|h| Some(format!("sha256:{h}").into_bytes())),
    ]
}

fn tenant() -> impl Strategy<Value = String> {
    prop_oneof!["[A-Za-z0-9_-]{1,64}", "[a-c]{1,2}", Just("acme".to_owned())]
}

fn source_id() -> impl Strategy<Value = String> {
    prop_oneof![
        "[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}",
        "[a-c.]{1,2}[a-c]",
        Just("stripe".to_owned())
    ]
}

/// A request's tenant, source and `x-k` header (none: no header).
type Request = (String, String, Option<Vec<u8>>);

/// Two requests: the second may share the first's tenant, source or key,
/// and each may take the other's keyless group (or its keyed form) as key.
fn two_requests() -> impl Strategy<Value = (Request, Request)> {
    (
        tenant(),
        tenant(),
        source_id(),
        source_id(),
        any::<(bool, bool, bool)>(),
    )
        .prop_flat_map(|(t1, t2, s1, s2, (same_tenant, same_source, same_key))| {
            let t2 = if same_tenant { t1.clone() } else { t2 };
            let s2 = if same_source { s1.clone() } else { s2 };
            let k1 = chosen_key(t2.clone(), s2.clone());
            let k2 = chosen_key(t1.clone(), s1.clone());
            (k1, k2).prop_map(move |(k1, k2)| {
                let k2 = if same_key { k1.clone() } else { k2 };
                ((t1.clone(), s1.clone(), k1), (t2.clone(), s2.clone(), k2))
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    /// With `"group_scope": "tenant"`, two requests share a sink's group
    /// only where they share its tenant and key (a keyed lane) or its
    /// tenant and source (the keyless lane): equal keys of two tenants
    /// never do, nor a key and any keyless group (the argument is in
    /// `lanes::keyed_group`). Through `decide`, on every broker's limit.
    #[test]
    fn groups_of_tenants_never_collide(((t1, s1, k1), (t2, s2, k2)) in two_requests()) {
        // Two sources (a second one where both requests go to one).
        let filler = if s1 == "filler" { "filler2" } else { "filler" };
        let cfg = tenant_scoped(&s1, if s1 == s2 { filler } else { &s2 });
        let (g1, of1) = groups(&cfg, &t1, &s1, k1.as_deref());
        let (g2, of2) = groups(&cfg, &t2, &s2, k2.as_deref());
        for (x, y) in g1.iter().zip(&g2) {
            prop_assert_eq!(x == y, of1 == of2, "{} / {}: {:?} / {:?}", x, y, of1, of2);
        }
    }
}

/// A configuration for `a_routed_post_is_under_its_prefix`: `prefix` and
/// both routing forms, a source id of each shape, a tenant list.
fn routing_config(prefix: &str) -> config::Config {
    let json = format!(
        r#"{{"prefix": "{prefix}", "routing": ["path", "tenant_path"], "sources": [
            {{"id": "stripe", "dedupe": "stripe"}},
            {{"id": "Git-Hub", "dedupe": "github", "tenants": ["acme", "default"]}},
            {{"id": "a.", "dedupe": "github", "tenant": "acme"}}]}}"#
    );
    config::load(&json).unwrap().config
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    /// `route::route` routes a POST that names a source by its segments as
    /// spelled before it reads the path every way `path::under` does: sound
    /// only because every path so routed is under the prefix by all those
    /// readings (else it would have been passed, unstamped). Paths made of
    /// the prefix's segments, the ids and respellings of them.
    #[test]
    fn a_routed_post_is_under_its_prefix(
        prefix in prop_oneof![Just("/webhooks"), Just("/Hooks/In"), Just("/"), Just("/a.b/c~")],
        parts in proptest::collection::vec(prop_oneof![
            Just("webhooks"), Just("Hooks"), Just("hooks"), Just("In"), Just("in"), Just("a.b"),
            Just("c~"), Just("stripe"), Just("Git-Hub"), Just("a."), Just("acme"), Just(""),
            Just("."), Just(".."), Just("%2e"), Just("STRIPE"), Just("a%2Eb"), Just("x")], 0..5),
        seps in proptest::collection::vec(prop_oneof![Just("/"), Just("//"), Just("\\"), Just("/./")], 5),
        tail in prop_oneof![Just(""), Just("/"), Just("?a=1"), Just("#f"), Just("?/x")],
    ) {
        let cfg = routing_config(prefix);
        let mut path = String::new();
        for (part, sep) in parts.iter().zip(&seps) {
            path.push_str(sep);
            path.push_str(part);
        }
        path.push_str(tail);
        if let hookstamp::route::Route::Source(_) = hookstamp::route::route(&cfg, "POST", &path) {
            prop_assert!(hookstamp::path::under(&path, &cfg.prefix_view), "{} routed, not under {}", path, prefix);
        }
    }
}

/// The paths `a_routed_post_is_under_its_prefix` rests on are routed: a
/// source's own path, a tenant's, with a query, and with empty segments.
#[test]
fn a_sources_own_paths_are_routed() {
    for (prefix, path) in [
        ("/webhooks", "/webhooks/stripe"),
        ("/webhooks", "/webhooks/stripe?x=1"),
        ("/webhooks", "//webhooks//stripe"),
        ("/Hooks/In", "/Hooks/In/acme/Git-Hub"),
        ("/", "/a."),
        ("/a.b/c~", "/a.b/c~/stripe#f"),
    ] {
        let cfg = routing_config(prefix);
        let got = hookstamp::route::route(&cfg, "POST", path);
        assert!(
            matches!(got, hookstamp::route::Route::Source(_)),
            "{path}: {got:?}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// A source's own tenant's idempotency key is its prefix made at load
    /// and the key's encoding; any other tenant's (one the path names,
    /// even spelled as the source's own) is encoded whole. Both are
    /// `<tenant>:<source_id>:<key>` percent-encoded, for any key.
    #[test]
    fn an_idempotency_key_is_the_same_however_its_tenant_came(
        key in proptest::collection::vec(any::<u8>(), 1..260),
    ) {
        let cfg = config::load(r#"{"routing": ["path", "tenant_path"], "sources": [
            {"id": "git.hub", "dedupe": "github", "tenant": "acme"}]}"#).unwrap().config;
        let headers = [("x-github-delivery", key.clone())];
        let idempotency = |path: &str| -> Option<String> {
            let d = hookstamp::decide::decide(&cfg, "POST", path, &headers, b"", 0);
            let Outcome::Forward { stamped, .. } = d.outcome else { return None };
            let h = stamped.headers.iter().find(|(n, _)| *n == "x-hookstamp-idempotency-key");
            h.map(|(_, v)| v.to_string())
        };
        let want = format!("acme:git.hub:{}", hookstamp::stamps::encode(&hookstamp::key::cap(key.clone().into(), hookstamp::dedupe::MAX_DEDUPE_KEY)));
        prop_assert_eq!(idempotency("/webhooks/git.hub"), Some(want.clone()));
        prop_assert_eq!(idempotency("/webhooks/acme/git.hub"), Some(want));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Sources are found by id however many there are (a few compared
    /// one by one, more looked up in their ids' order), and a repeated id
    /// is an error naming its first place and its own.
    #[test]
    fn a_source_is_found_by_its_id_and_a_repeat_named(
        ids in proptest::collection::vec("[a-e][a-e]?", 1..30),
    ) {
        let list: Vec<String> = ids.iter().map(|id| format!(r#"{{"id": "{id}", "dedupe": "github"}}"#)).collect();
        let json = format!(r#"{{"sources": [{}]}}"#, list.join(","));
        let mut want = Vec::new();
        for (i, id) in ids.iter().enumerate() {
            if let Some(first) = ids.iter().position(|x| x == id).filter(|&f| f < i) {
                want.push(format!("source '{id}': id is not unique: sources #{first} and #{i} both have it"));
            }
        }
        match config::load(&json) {
            Ok(loaded) => {
                prop_assert!(want.is_empty());
                let cfg = loaded.config;
                for (i, id) in ids.iter().enumerate() {
                    let found = cfg.find(id).map(|(at, s)| (at, s.id.clone()));
                    prop_assert_eq!(found, Some((i, id.clone())));
                }
                for absent in ["", "f", "aaa", "ab ", "A"] {
                    prop_assert!(cfg.find(absent).is_none(), "{absent}");
                }
            }
            Err(errors) => {
                let got: Vec<&String> = errors.iter().filter(|e| e.contains("not unique")).collect();
                prop_assert_eq!(got, want.iter().collect::<Vec<_>>());
            }
        }
    }
}
