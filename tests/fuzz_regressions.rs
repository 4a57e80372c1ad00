//! Replays the committed fuzz corpus (fuzz/regressions/, minimised, crash
//! reproducers included) natively, with the checks of the fuzz targets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "common/fuzz_input.rs"]
mod fuzz_input;
#[path = "common/invariants.rs"]
mod invariants;

use std::path::Path;

fn inputs(target: &str) -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/regressions")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).unwrap()).collect()
}

#[test]
fn config_corpus() {
    let all = inputs("config");
    assert!(all.len() > 20, "only {} config inputs", all.len());
    for data in all {
        fuzz_input::check_config(&data);
    }
}

#[test]
fn resolve_corpus() {
    let configs = fuzz_input::table_configs(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cases"));
    let all = inputs("resolve");
    assert!(all.len() > 50, "only {} resolve inputs", all.len());
    for data in all {
        if let Some(i) = fuzz_input::split(&data, configs.len()) {
            invariants::check(&configs[i.config], i.method, &i.path, &i.headers, i.body);
        }
    }
}
