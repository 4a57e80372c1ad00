//! Runs the shared case table (tests/cases/*.json) and the config error
//! table (tests/config_errors.json) through the core. The Envoy suite
//! replays the same tables through the real filter.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use hookstamp::{config, decide};
use serde_json::{json, Value};
use std::path::Path;

fn body_of(req: &Value) -> Vec<u8> {
    if let Some(b) = req.get("body").and_then(Value::as_str) {
        return b.as_bytes().to_vec();
    }
    if let Some(h) = req.get("body_hex").and_then(Value::as_str) {
        return hex::decode(h).unwrap();
    }
    if let Some(p) = req.get("body_pad") {
        let head = p["prefix"].as_str().unwrap().as_bytes();
        let tail = p["suffix"].as_str().unwrap().as_bytes();
        let fill = p["fill"].as_str().unwrap().as_bytes();
        let n = p["size"].as_u64().unwrap() as usize - head.len() - tail.len();
        let mut b = head.to_vec();
        b.extend(fill.iter().cycle().take(n * fill.len()));
        b.extend_from_slice(tail);
        return b;
    }
    if let Some(parts) = req.get("body_parts").and_then(Value::as_array) {
        let mut b = Vec::new();
        for part in parts {
            let text = part[0].as_str().unwrap().as_bytes();
            for _ in 0..part[1].as_u64().unwrap() {
                b.extend_from_slice(text);
            }
        }
        return b;
    }
    Vec::new()
}

/// Whether an answer is what a case expects: `headers` lists every stamp
/// in contract order; `stamps` names only the stamps a case is about
/// (`null`: absent), so a rule change elsewhere leaves the row alone.
fn agrees(want: &Value, got: &Value) -> bool {
    let Some(partial) = want.get("stamps").and_then(Value::as_object) else {
        return want == got;
    };
    let headers = got["headers"].as_array().cloned().unwrap_or_default();
    let value = |name: &str| headers.iter().find(|h| h[0] == name).map(|h| h[1].clone());
    got["action"] == want["action"]
        && partial
            .iter()
            .all(|(n, v)| value(n) == if v.is_null() { None } else { Some(v.clone()) })
}

#[test]
fn case_table() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cases");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let mut ran = 0;
    let mut failures = Vec::new();
    for file in files {
        let table: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        // A table may give the environment its secrets come from, and the
        // time its signatures are checked at.
        let vars = table["env"].clone();
        let env = move |n: &str| vars.get(n).and_then(Value::as_str).map(str::to_owned);
        let now = table["now"].as_u64();
        let loaded = config::load_with_env(&table["config"].to_string(), &env)
            .unwrap_or_else(|e| panic!("{}: config: {e:?}", file.display()));
        for case in table["cases"].as_array().unwrap() {
            let req = &case["request"];
            let headers: Vec<(String, String)> = req
                .get("headers")
                .and_then(Value::as_array)
                .map(|hs| {
                    hs.iter()
                        .map(|h| {
                            (
                                h[0].as_str().unwrap().to_owned(),
                                h[1].as_str().unwrap().to_owned(),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            // As Envoy hands them to the filter (repeats joined).
            let headers = hookstamp::pairs::as_envoy_gives(&headers);
            let method = req.get("method").and_then(Value::as_str).unwrap_or("POST");
            let path = req["path"].as_str().unwrap();
            let body = body_of(req);
            let got = hookstamp::wire::outcome(&match now {
                Some(t) => decide::decide(&loaded.config, method, path, &headers, &body, t).outcome,
                None => {
                    decide::decide(
                        &loaded.config,
                        method,
                        path,
                        &headers,
                        &body,
                        decide::now_s(),
                    )
                    .outcome
                }
            });
            if !agrees(&case["expect"], &got) {
                failures.push(format!(
                    "{} / {}:\n  want {}\n  got  {got}",
                    file.display(),
                    case["name"],
                    case["expect"]
                ));
            }
            ran += 1;
        }
    }
    assert!(ran > 50, "the table ran only {ran} cases");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The config error table: every row's errors, by scope and code (the
/// structured form, which the sentences may change under), and the
/// sentences as `hookstamp check` prints them. `HOOKSTAMP_BLESS=1` writes
/// the codes the checker gives into the table, to review before a commit
/// (tests/e2e/bless_config_errors.py writes the sentences).
#[test]
fn config_error_table() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/config_errors.json");
    let mut rows: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(rows.len() > 20);
    let bless = std::env::var_os("HOOKSTAMP_BLESS").is_some();
    for row in &mut rows {
        let text = match (row.get("config_text"), row.get("sinks_repeat")) {
            (Some(t), _) => t.as_str().unwrap().to_owned(),
            (None, Some(n)) => {
                let mut cfg = row["config"].clone();
                cfg["sources"][0]["sinks"] = json!(vec![json!({}); n.as_u64().unwrap() as usize]);
                cfg.to_string()
            }
            (None, None) => row["config"].to_string(),
        };
        let errs = config::load(&text).expect_err(row["name"].as_str().unwrap());
        let want: Vec<String> = serde_json::from_value(row["errors"].clone()).unwrap();
        assert_eq!(errs, want, "{}", row["name"]);
        let Ok(value) = serde_json::from_str::<Value>(&text) else {
            continue; // not JSON: no diagnostics, the parser's error
        };
        let codes: Vec<[String; 2]> = config::diagnose(&value)
            .iter()
            .map(|d| [d.scope.to_string(), d.code.to_owned()])
            .collect();
        if bless {
            row["codes"] = json!(codes);
            continue;
        }
        let want: Vec<[String; 2]> =
            serde_json::from_value(row["codes"].clone()).unwrap_or_else(|_| {
                panic!("{}: no codes (HOOKSTAMP_BLESS=1 writes them)", row["name"])
            });
        assert_eq!(codes, want, "{}", row["name"]);
    }
    if bless {
        let lines: Vec<String> = rows.iter().map(|r| format!("  {r}")).collect();
        std::fs::write(&path, format!("[\n{}\n]\n", lines.join(",\n"))).unwrap();
    }
}

#[test]
fn max_json_bytes_above_envoys_default_buffer_limit_warns_for_body_sources() {
    let body = r#"{"id":"s","dedupe":"stripe"}"#;
    let header = r#"{"id":"g","dedupe":"github"}"#;
    let warned = |max: usize, source: &str| {
        let text = format!(r#"{{"max_json_bytes":{max},"sources":[{source}]}}"#);
        let l = config::load(&text).unwrap();
        l.warnings
            .iter()
            .any(|w| w.contains("per_connection_buffer_limit_bytes"))
    };
    assert!(!warned(1_048_576, body));
    assert!(warned(1_048_577, body));
    assert!(
        !warned(8_388_608, header),
        "a header-only source never waits"
    );
    let l = config::load(r#"{"max_json_bytes":2097152,"sources":[{"id":"s","dedupe":"stripe"}]}"#)
        .unwrap();
    assert_eq!(
        l.warnings,
        vec![
            "max_json_bytes is 2097152, above Envoy's default per_connection_buffer_limit_bytes \
              (1048576): set the listener's limit to at least 2097152, or a body between the two \
              waits for max_hold_ms and is answered 408"
        ]
    );
}

#[test]
fn undeduped_sources_warn_once_each() {
    let l = config::load(r#"{"sources":[{"id":"a"},{"id":"b","dedupe":"github"},{"id":"c"}]}"#)
        .unwrap();
    assert_eq!(l.warnings.len(), 2);
    assert!(l.warnings[0].contains("'a'"));
    assert_eq!(l.config.undeduped().count(), 2);
    assert_eq!(
        l.config.summary(),
        "ok: 3 source(s), 0 ordered sink(s), without dedupe: a, c"
    );
}

#[test]
fn a_secret_never_appears_in_errors_warnings_or_debug_output() {
    const SECRET: &str = "whsec_c2VjcmV0LXZhbHVlLTQy";
    let env = |n: &str| (n == "HOOKSTAMP_TEST_SECRET").then(|| SECRET.to_owned());
    let good = format!(
        r#"{{"sources":[{{"id":"s","dedupe":"svix","verify":{{"scheme":"svix",
            "secrets":[{{"env":"HOOKSTAMP_TEST_SECRET"}},{{"value":"{SECRET}"}}]}}}}]}}"#
    );
    let l = config::load_with_env(&good, &env).unwrap();
    assert_eq!(l.warnings.len(), 1, "{:?}", l.warnings);
    let everything = format!("{:?} {:?} {}", l.config, l.warnings, l.config.summary());
    assert!(!everything.contains("c2VjcmV0") && !everything.contains("secret-value"));
    // Errors around a secret name its place or variable, never its value.
    for bad in [
        r#""scheme":"github","secrets":[{"value":"whsec_c2VjcmV0LXZhbHVlLTQy","env":"X"}]"#,
        r#""scheme":"svix","secrets":[{"value":"whsec_c2VjcmV0LXZhbHVlLTQy!"}]"#,
        r#""scheme":"nope","secrets":"whsec_c2VjcmV0LXZhbHVlLTQy""#,
    ] {
        let text = format!(r#"{{"sources":[{{"id":"s","verify":{{{bad}}}}}]}}"#);
        let errs = config::load_with_env(&text, &env).unwrap_err();
        assert!(!errs.is_empty());
        assert!(errs.iter().all(|e| !e.contains("c2VjcmV0")), "{errs:?}");
    }
}

#[test]
fn a_path_that_looks_like_jsonpath_or_a_pointer_is_warned_about() {
    for p in ["$.data.id", "/data/id", "data.items[0].id"] {
        let text = format!(r#"{{"sources":[{{"id":"s","dedupe":{{"json":{p:?}}}}}]}}"#);
        let l = config::load(&text).unwrap();
        assert!(
            l.warnings
                .iter()
                .any(|w| w.starts_with("source 's' dedupe: json path")
                    && w.contains("looks like JSONPath or a JSON Pointer")),
            "{p}: {:?}",
            l.warnings
        );
    }
    let l = config::load(r#"{"sources":[{"id":"s","dedupe":{"json":"data.id"}}]}"#).unwrap();
    assert!(l.warnings.is_empty());
}

#[test]
fn explain_gives_the_reason_for_every_missing_key() {
    let cfg = config::load(
        r#"{"max_json_bytes": 400, "sources":[{"id":"s","dedupe":{"json":"id"},"sinks":[
            {"type":"sqs","ordered":true,"ordering_key":{"json":"data.customer"}},
            {"type":"sqs","ordered":true,"ordering_key":{"header":"x-entity-id"}},
            {"type":"sqs","ordered":true,"ordering_key":{"form":"From"}}]}]}"#,
    )
    .unwrap()
    .config;
    let run = |headers: &[(&str, &str)], body: &str| {
        hookstamp::explain::explain(&cfg, "POST", "/webhooks/s", headers, body.as_bytes(), 0)
            .join("\n")
    };
    let e = run(
        &[("x-entity-id", "")],
        r#"{"id":1.5,"data":{"customer":7}}"#,
    );
    assert!(
        e.contains("dedupe key: json id (integers too) → none (wrong_type): the value is a float"),
        "{e}"
    );
    assert!(e.contains("→ none (wrong_type): the value is an integer, which this key takes only with \"integer\": true"), "{e}");
    assert!(
        e.contains("header x-entity-id → none (empty): the header is empty"),
        "{e}"
    );
    assert!(e.contains("form field From → none (not_form)"), "{e}");
    let e = run(&[], r#"{"data":[]}"#);
    assert!(
        e.contains("→ none (absent): the body has no key \"id\""),
        "{e}"
    );
    assert!(
        e.contains("(absent): data is an array (paths go through objects only)"),
        "{e}"
    );
    let e = run(&[], r#"{"id":"x""#);
    assert!(
        e.contains("body: 9 bytes, not valid JSON: it ends before its value does"),
        "{e}"
    );
    assert!(e.contains("(not_json)"), "{e}");
    let e = run(&[], r#"{"id":"x",}"#);
    assert!(
        e.contains("not valid JSON: the scan stops at byte 10"),
        "{e}"
    );
    let e = run(&[], &"x".repeat(401));
    assert!(
        e.contains("over max_json_bytes (400)") && e.contains("(over_limit)"),
        "{e}"
    );
    let e = run(&[], &format!(r#"{{"id":"{}"}}"#, "k".repeat(250)));
    assert!(
        e.contains("hashed, as it was over 200 bytes: sha256:"),
        "{e}"
    );
}

#[test]
fn bounds_refuse_what_costs_stack_or_time_naming_the_source() {
    // The issue's crash: a 5000-segment path, which V8 could not follow.
    let path = vec!["a"; 5000].join(".");
    let text = format!(r#"{{"sources":[{{"id":"s","dedupe":{{"json":"{path}"}}}}]}}"#);
    assert_eq!(
        config::load(&text).unwrap_err(),
        vec!["source 's' dedupe: segments of a json path: at most 32, got 5000"]
    );
    let sources: Vec<String> = (0..1025)
        .map(|i| format!(r#"{{"id":"s{i}","dedupe":"stripe"}}"#))
        .collect();
    let text = format!(r#"{{"sources":[{}]}}"#, sources.join(","));
    assert_eq!(
        config::load(&text).unwrap_err(),
        vec!["config: sources: at most 1024, got 1025"]
    );
    // At the bound, a body nested along the path is read.
    let path = vec!["a"; 32].join(".");
    let text = format!(r#"{{"sources":[{{"id":"s","dedupe":{{"json":"{path}"}}}}]}}"#);
    let cfg = config::load(&text).unwrap().config;
    let body = format!("{}\"evt_deep\"{}", r#"{"a":"#.repeat(32), "}".repeat(32));
    let paths = &cfg.sources[0].paths;
    let found = hookstamp::json::extract(body.as_bytes(), paths).unwrap();
    assert_eq!(
        found[0],
        Some(hookstamp::json::Scalar::Str(b"evt_deep"[..].into()))
    );
}

#[test]
fn explain_renders_the_decision_the_signature_and_hashing_included() {
    let cfg = config::load(
        r#"{"sources":[{"id":"gh","dedupe":"github","verify":{"scheme":"github","secrets":[{"value":"s"}]}},
                       {"id":"h","dedupe":{"header":"x-id"}}]}"#,
    )
    .unwrap()
    .config;
    let run = |path: &str, headers: &[(&str, &str)]| {
        hookstamp::explain::explain(&cfg, "POST", path, headers, b"{}", 0).join("\n")
    };
    let e = run(
        "/webhooks/gh",
        &[("x-hub-signature-256", &format!("sha256={}", "0".repeat(64)))],
    );
    assert!(
        e.contains("signature: did not verify (github): the signature in x-hub-signature-256 does not match the HMAC under the secret [mismatch]: refused, answered 401"),
        "{e}"
    );
    let e = run("/webhooks/gh", &[]);
    assert!(
        e.contains("signature: did not verify (github): the header x-hub-signature-256 is absent [missing]: refused, answered 401 {\"error\":\"invalid_signature\"} (hookstamp.invalid_signature.missing)"),
        "{e}"
    );
    // A key that looks like a hash but was not hashed, and one that was.
    let looks = format!("sha256:{}", "a".repeat(64));
    let e = run("/webhooks/h", &[("x-id", &looks)]);
    assert!(e.contains(&format!("→ {looks} (as is)")), "{e}");
    let long = "k".repeat(201);
    let e = run("/webhooks/h", &[("x-id", &long)]);
    assert!(
        e.contains("→ hashed, as it was over 200 bytes: sha256:"),
        "{e}"
    );
}

/// `explain` tells the signature's story: which header, which part failed
/// (absent, malformed, an unsupported version, the skew against the
/// tolerance, a mismatch against each secret), one line a variant.
#[test]
fn explain_names_the_exact_signature_failure() {
    use hmac::Mac as _;
    let cfg = config::load(
        r#"{"sources":[
            {"id":"st","dedupe":"stripe","verify":{"scheme":"stripe","secrets":[{"value":"a"},{"value":"b"}]}},
            {"id":"sv","dedupe":"svix","verify":{"scheme":"svix","secrets":[{"value":"whsec_c2VjcmV0"}]}},
            {"id":"sl","verify":{"scheme":"slack","secrets":[{"value":"s"}]},"dedupe":{"header":"x-id"}}]}"#,
    )
    .unwrap()
    .config;
    let now = 1_700_000_000u64;
    let body = br#"{"id":"evt_1"}"#;
    let sign = |t: u64, key: &[u8]| {
        let mut m = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).unwrap();
        m.update(format!("{t}.").as_bytes());
        m.update(body);
        hex::encode(m.finalize().into_bytes())
    };
    let line = |path: &str, headers: &[(&str, String)]| {
        hookstamp::explain::explain(&cfg, "POST", path, headers, body, now)
            .into_iter()
            .find(|l| l.starts_with("signature:"))
            .unwrap()
    };
    let stripe = |v: String| line("/webhooks/st", &[("stripe-signature", v)]);
    let cases: Vec<(String, &str)> = vec![
        (stripe(format!("t={now},v1={}", sign(now, b"b"))), "signature: verified (stripe, stripe-signature)"),
        (line("/webhooks/st", &[]), "the header stripe-signature is absent [missing]"),
        (stripe(format!("v1={}", sign(now, b"a"))), "the header stripe-signature is malformed: expected t=<timestamp>,v1=<hex>: no t= [malformed]"),
        (stripe(format!("t={now},v0={}", sign(now, b"a"))), "the header stripe-signature carries only signature versions stripe does not check here: v0 [malformed]"),
        (stripe(format!("t={},v1={}", now - 412, sign(now - 412, b"a"))), "the timestamp in stripe-signature is 412 s old, over the tolerance of 300 s [expired]"),
        (stripe(format!("t={},v1={}", now + 3600, sign(now + 3600, b"a"))), "the timestamp in stripe-signature is 3600 s in the future, over the tolerance of 300 s [expired]"),
        (stripe(format!("t=soon,v1={}", sign(now, b"a"))), "the timestamp in stripe-signature is not a whole number of seconds [malformed]"),
        (stripe(format!("t={now},v1={},v1={}", sign(now, b"x"), sign(now, b"y"))), "none of the 2 signatures in stripe-signature matches the HMAC under any of the 2 secrets, each tried [mismatch]"),
        (stripe(format!("t={now},v1={}", sign(now, b"x"))), "the signature in stripe-signature matches the HMAC under none of the 2 secrets, each tried [mismatch]"),
        (
            line("/webhooks/sv", &[("svix-id", "msg_1".into()), ("svix-timestamp", now.to_string()), ("svix-signature", "v1a,AAAA v2,BBBB".into())]),
            "the header svix-signature carries only signature versions svix does not check here: v2 [malformed]",
        ),
        (
            line("/webhooks/sv", &[("webhook-id", "msg_1".into()), ("webhook-timestamp", now.to_string())]),
            "the header webhook-signature is absent [missing]",
        ),
        (
            line("/webhooks/sl", &[("x-slack-signature", "v0=00".into()), ("x-slack-request-timestamp", "1e9".into())]),
            "the timestamp in x-slack-request-timestamp is not a whole number of seconds [malformed]",
        ),
    ];
    for (got, want) in cases {
        assert!(got.contains(want), "{got}\n  wanted: {want}");
    }
}

/// Which keys read a body as what: a form content-type decodes the fields
/// for form keys; JSON paths read the `form_json` field where the source
/// names one, the body itself otherwise (whatever the content-type); and
/// `explain` gives every alternative's and part's reason.
#[test]
fn the_body_rule_and_every_parts_reason() {
    let cfg = config::load(
        r#"{"sources":[
            {"id":"mix","dedupe":{"first":[{"form":"MessageSid"},{"json":"id"}]},
             "sinks":[{"type":"kafka","ordered":true,"ordering_key":{"concat":[{"header":"x-a"},{"json":"data.customer"}],"separator":":"}}]},
            {"id":"fj","form_json":"payload","dedupe":{"json":"id"}}]}"#,
    )
    .unwrap()
    .config;
    let form = ("content-type", "application/x-www-form-urlencoded");
    let stamps = |path: &str, headers: &[(&str, &str)], body: &str| match hookstamp::decide::decide(
        &cfg,
        "POST",
        path,
        headers,
        body.as_bytes(),
        0,
    )
    .outcome
    {
        hookstamp::decide::Outcome::Forward { stamped, .. } => stamped
            .headers
            .iter()
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    // A JSON body sent with a form content-type: the JSON key reads it.
    let s = stamps(
        "/webhooks/mix",
        &[form],
        r#"{"id":"evt_9","data":{"customer":"c1"}}"#,
    );
    assert!(
        s.contains(&"x-hookstamp-dedupe-key=evt_9".to_owned()),
        "{s:?}"
    );
    // A real form: the form key reads it.
    let s = stamps("/webhooks/mix", &[form], "MessageSid=SM1&x=1");
    assert!(
        s.contains(&"x-hookstamp-dedupe-key=SM1".to_owned()),
        "{s:?}"
    );
    // form_json: the field is read, not the body.
    let s = stamps(
        "/webhooks/fj",
        &[form],
        "payload=%7B%22id%22%3A%22evt_f%22%7D",
    );
    assert!(
        s.contains(&"x-hookstamp-dedupe-key=evt_f".to_owned()),
        "{s:?}"
    );
    let explain = |path: &str, headers: &[(&str, &str)], body: &str| {
        hookstamp::explain::explain(&cfg, "POST", path, headers, body.as_bytes(), 0).join("\n")
    };
    let e = explain("/webhooks/mix", &[form], "x=1");
    assert!(e.contains("body: 3 bytes, form-encoded (by its content-type), fields: x; the body is not valid JSON for the JSON paths"), "{e}");
    assert!(e.contains("dedupe key: the first of (form field MessageSid, json id (integers too)) → none (absent): no alternative gave a key: form field MessageSid: absent (no form field MessageSid); json id (integers too): not_json (the JSON the paths read is not valid (see the body line))"), "{e}");
    let e = explain("/webhooks/mix", &[("x-a", "A")], r#"{"data":{}}"#);
    assert!(e.contains(r#"lane of sink 0: (header x-a, json data.customer) joined by ":" → none (absent): a part is missing: header x-a: found; json data.customer: absent (data has no key "customer"); the keyless lane (counted)"#), "{e}");
    let e = explain("/webhooks/fj", &[form], "other=1");
    assert!(
        e.contains("no field payload for the JSON paths to read"),
        "{e}"
    );
    assert!(
        e.contains("the form has no field payload for the JSON paths"),
        "{e}"
    );
}

/// GitHub never redelivers by itself and sends up to 25 MB: a GitHub
/// source that holds the body under a smaller max_json_bytes is warned of
/// (its larger deliveries would be answered 413 and lost); one that reads
/// headers only, or a limit of 25 MiB, is not.
#[test]
fn a_github_source_that_would_refuse_its_providers_deliveries_is_warned_of() {
    let verified =
        r#"{"id":"gh","dedupe":"github","verify":{"scheme":"github","secrets":[{"env":"GH_S"}]}}"#;
    let body_key = r#"{"id":"gh","dedupe":"github","sinks":[{"ordered":true,"ordering_key":{"json":"repository.id","integer":true}}]}"#;
    let headers_only = r#"{"id":"gh","dedupe":"github"}"#;
    let env = |_: &str| Some("s".to_owned());
    let warned = |max: usize, source: &str| {
        let text = format!(
            r#"{{"max_json_bytes":{max},"max_held_bytes":{},"sources":[{source}]}}"#,
            4 * max
        );
        let l = config::load_with_env(&text, &env).unwrap();
        l.warnings.iter().any(|w| {
            w.starts_with("source 'gh' is GitHub's and holds the body, but max_json_bytes is")
                && w.contains("never redelivers one by itself")
        })
    };
    assert!(warned(1_048_576, verified));
    assert!(warned(1_048_576, body_key));
    assert!(!warned(1_048_576, headers_only));
    assert!(!warned(26_214_400, verified));
    let cfg = config::load_with_env(
        &format!(r#"{{"sources":[{verified},{{"id":"st","dedupe":"stripe"}}]}}"#),
        &env,
    )
    .unwrap()
    .config;
    assert!(cfg.sources[0].never_redelivered() && !cfg.sources[1].never_redelivered());
}

/// What the filter records for the access log (`wasm.hookstamp_why`): the
/// reasons only, never a key.
#[test]
fn why_names_every_missing_key_by_its_reason() {
    let cfg = config::load(
        r#"{"sources":[{"id":"s","dedupe":{"json":"id"},"sinks":[
            {"type":"sqs","ordered":true,"ordering_key":{"json":"c"}},
            {"type":"sqs","ordered":true,"ordering_key":{"json":"k"}}]}]}"#,
    )
    .unwrap()
    .config;
    let long = "é".repeat(50);
    let body = format!(r#"{{"k":"{long}"}}"#);
    let d = decide::decide(
        &cfg,
        "POST",
        "/webhooks/s",
        &[] as &[(&str, &str)],
        body.as_bytes(),
        0,
    );
    let decide::Outcome::Forward { stamped, .. } = d.outcome else {
        panic!("not forwarded")
    };
    assert_eq!(
        stamped.why(None),
        "dedupe=absent lane-0=absent lane-1-group=hashed"
    );
    assert_eq!(
        stamped.why(Some(hookstamp::verify::Reason::Expired)),
        "signature=expired dedupe=absent lane-0=absent lane-1-group=hashed"
    );
}

/// An events rule that decides by a header the signature does not sign
/// (GitHub's X-GitHub-Event) is warned of, as such a key is.
#[test]
fn an_events_rule_on_an_unsigned_header_is_warned_of() {
    let env = |_: &str| Some("s".to_owned());
    let warned = |events: &str| {
        let text = format!(
            r#"{{"sources":[{{"id":"gh","dedupe":{{"sha256":"body"}},"verify":{{"scheme":"github","secrets":[{{"env":"S"}}]}}{events}}}]}}"#
        );
        config::load_with_env(&text, &env)
            .unwrap()
            .warnings
            .iter()
            .any(|w| {
                w.contains(
                    "the event type its events rule reads is read from header x-github-event",
                )
            })
    };
    assert!(warned(r#","events":{"drop":["ping"]}"#));
    assert!(!warned(""), "a stamped type alone decides nothing");
}

/// An ordered sink of a source reached as more than one tenant, whose
/// groups are its keys alone, is warned of by source and sink; a sink with
/// `"group_scope": "tenant"`, one that chose `"key"` (a queue per tenant),
/// or a source of one tenant, is not.
#[test]
fn groups_tenants_may_share_are_warned_of() {
    let warned = |source: &str| {
        let text = format!(
            r#"{{"routing":"tenant_path","sources":[{{"id":"s","dedupe":"stripe"{source},"sinks":[
                {{"type":"sqs","ordered":true,"ordering_key":{{"json":"c"}}}},
                {{"type":"log"}},
                {{"type":"sqs","ordered":true,"group_scope":"tenant"}},
                {{"type":"kafka","ordered":true,"group_scope":"key"}}]}}]}}"#
        );
        let l = config::load(&text).unwrap();
        let warnings: Vec<&str> = l
            .warnings
            .iter()
            .filter(|w| w.contains("set \"group_scope\": \"tenant\""))
            .map(|w| w.split(':').next().unwrap_or(""))
            .collect();
        warnings.join(", ")
    };
    let both = "source 's' sink 0";
    // Any tenant, or two named.
    assert_eq!(warned(""), both);
    assert_eq!(warned(r#","tenants":["a","b"]"#), both);
    assert_eq!(warned(r#","routing":["path","tenant_path"]"#), both);
    // One tenant: its own, or the one its list names.
    assert_eq!(warned(r#","tenant":"acme""#), "");
    assert_eq!(warned(r#","tenants":["a","a"]"#), "");
    assert_eq!(warned(r#","routing":"path""#), "");
}
