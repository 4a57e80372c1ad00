//! Request resolution over arbitrary path, headers and body, against fixed
//! configurations (the case table's): never a panic, every stamp invariant,
//! and on a body serde_json accepts, the same keys as a full decode.
#![no_main]

use hookstamp::config::{self, Config};
use hookstamp::json::{self, Scalar};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use std::sync::OnceLock;

#[path = "../../tests/common/invariants.rs"]
mod invariants;

fn configs() -> &'static Vec<Config> {
    static C: OnceLock<Vec<Config>> = OnceLock::new();
    C.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/cases");
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        files
            .iter()
            .map(|f| {
                let t: Value = serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
                config::load(&t["config"].to_string()).unwrap().config
            })
            .collect()
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
            (!t.contains(['.', 'e', 'E']))
                .then(|| format!("i:{}", if t == "-0" { "0" } else { &t }))
        }
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    // Layout: config selector, then path, headers ("name:value"), body,
    // separated by 0xFF bytes.
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let cfgs = configs();
    let cfg = &cfgs[usize::from(sel) % cfgs.len()];
    let mut parts = rest.split(|&b| b == 0xFF);
    let path = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let mut headers = Vec::new();
    let mut body: &[u8] = &[];
    let rest: Vec<&[u8]> = parts.collect();
    if let Some((last, hs)) = rest.split_last() {
        body = last;
        for h in hs {
            let mut kv = h.splitn(2, |&b| b == b':');
            let name = String::from_utf8_lossy(kv.next().unwrap_or_default()).to_ascii_lowercase();
            headers.push((name, kv.next().unwrap_or_default().to_vec()));
        }
    }
    let method = if sel & 0x80 == 0 { "POST" } else { "GET" };
    invariants::check(cfg, method, &format!("/{path}"), &headers, body);

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
                        Scalar::Str(s) => format!("s:{s}"),
                        Scalar::Int(n) => format!("i:{n}"),
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
