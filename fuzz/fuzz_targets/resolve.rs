//! Request resolution over arbitrary path, headers and body, against fixed
//! configurations (the case table's): never a panic, every stamp invariant,
//! and on a body serde_json accepts, the same keys as a full decode.
#![no_main]

use hookstamp::config::Config;
use hookstamp::json::{self, Scalar};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

#[path = "../../tests/common/fuzz_input.rs"]
mod fuzz_input;
#[path = "../../tests/common/invariants.rs"]
mod invariants;

fn configs() -> &'static Vec<Config> {
    static C: OnceLock<Vec<Config>> = OnceLock::new();
    C.get_or_init(|| {
        fuzz_input::table_configs(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cases"))
    })
}

/// The full-decode reference for one path.
fn reference(v: &Value, path: &[String]) -> Option<String> {
    let mut cur = v;
    for seg in path {
        cur = cur.as_object()?.get(seg)?;
    }
    match cur {
        Value::String(s) => Some(format!("s:{s}")),
        Value::Number(n) => {
            let t = n.to_string();
            Some(if t.contains(['.', 'e', 'E']) {
                "other".to_owned()
            } else {
                format!("i:{}", if t == "-0" { "0" } else { &t })
            })
        }
        // There, but not a key.
        _ => Some("other".to_owned()),
    }
}

fuzz_target!(|data: &[u8]| {
    let cfgs = configs();
    let Some(input) = fuzz_input::split(data, cfgs.len()) else {
        return;
    };
    let cfg = &cfgs[input.config];
    let body = input.body;
    invariants::check(cfg, input.method, &input.path, &input.headers, body);

    // The scanner against a full decode, on every configured path.
    for src in &cfg.sources {
        if src.paths.is_empty() {
            continue;
        }
        let ours = json::extract(body, &src.paths);
        match serde_json::from_slice::<Value>(body) {
            Ok(v) => {
                let ours = ours.expect("serde_json accepted a body the scanner rejected");
                for (p, got) in src.paths.iter().zip(ours) {
                    let got = got.map(|s| match s {
                        Scalar::Str(s) => format!("s:{}", String::from_utf8_lossy(&s)),
                        Scalar::Int(n) => format!("i:{}", String::from_utf8_lossy(&n)),
                        Scalar::Other => "other".to_owned(),
                    });
                    assert_eq!(got, reference(&v, p), "path {p:?}");
                }
            }
            Err(e) if e.to_string().contains("recursion limit") => {}
            Err(e) => assert!(
                ours.is_none(),
                "scanner accepted a body serde_json rejects: {e}"
            ),
        }
    }
});
