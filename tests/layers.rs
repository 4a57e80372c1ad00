//! The modules of src/ as ARCHITECTURE.md layers them: no module uses one
//! that uses it back (`crate::x` in any of its files), and `providers`, the
//! table every per-provider list derives from, uses none.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module of src/ and the top-level modules it names as
/// `crate::x` (comments left out).
fn uses() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut files = vec![src.clone()];
    while let Some(p) = files.pop() {
        if p.is_dir() {
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        if p.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = p.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str();
        let module = first.to_string_lossy().trim_end_matches(".rs").to_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        let used = graph.entry(module.clone()).or_default();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or_default();
            for (at, _) in code.match_indices("crate::") {
                let rest = &code[at + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    // `use crate::{a, b::c}` on one line.
                    Some(group) => group
                        .split('}')
                        .next()
                        .unwrap_or_default()
                        .split(',')
                        .map(|n| n.trim().split("::").next().unwrap_or_default())
                        .collect(),
                    None => vec![rest
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or_default()],
                };
                used.extend(
                    names
                        .into_iter()
                        .filter(|n| !n.is_empty() && *n != module)
                        .map(str::to_owned),
                );
            }
        }
    }
    let modules: BTreeSet<String> = graph.keys().cloned().collect();
    for used in graph.values_mut() {
        used.retain(|m| modules.contains(m));
    }
    graph
}

/// A cycle through `from`, if any: the modules along it.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
    let mut stack = vec![(from.to_owned(), vec![from.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((m, path)) = stack.pop() {
        for next in &graph[&m] {
            if next == from {
                return Some([path.clone(), vec![next.clone()]].concat());
            }
            if seen.insert(next.clone()) {
                stack.push((next.clone(), [path.clone(), vec![next.clone()]].concat()));
            }
        }
    }
    None
}

#[test]
fn no_module_uses_one_that_uses_it_back() {
    let graph = uses();
    assert!(graph.contains_key("verify") && graph.contains_key("config"));
    for m in graph.keys() {
        assert_eq!(cycle(&graph, m), None, "an import cycle through {m}");
    }
}

#[test]
fn the_provider_table_uses_no_other_module() {
    assert_eq!(uses()["providers"], BTreeSet::new());
}
