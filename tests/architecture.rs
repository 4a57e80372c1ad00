//! ARCHITECTURE.md is the map of the code, and this test holds src/ to it.
//!
//! The map: under `## The layers`, each `### N. Title` is a layer, and its
//! `Modules:` paragraph (to the next blank line) names its modules in
//! backticks (`main.rs`: the CLI's root, the module `main`). The code:
//! src/'s top-level modules, a file `src/x.rs` or a directory `src/x/` (with
//! `mod.rs`, or beside `src/x.rs`) with every .rs file under it. A module
//! uses another where one of its files names `crate::other` (a `use`, a
//! group `crate::{a, b::c}`, a path inline) or `hookstamp::other` (the
//! CLI), outside comments and literals.
//!
//! The rules: every module of src/ is in exactly one layer and the map
//! names no other; a module uses only its own layer and lower numbers
//! (layers that share a number stand side by side: neither uses the
//! other); no modules use each other in a circle. `problems` is the whole
//! check, run on the tree and, below, on made-up maps and trees that break
//! each rule, so that it cannot pass vacuously.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// A module's files: (the path shown in a failure, the text).
type Code = BTreeMap<String, Vec<(String, String)>>;

#[derive(Debug)]
struct Layer {
    rank: u32,
    title: String,
    /// The line of its heading, from 1.
    line: usize,
    modules: Vec<String>,
}

impl Layer {
    fn describe(&self) -> String {
        format!("layer {}, {}", self.rank, self.title)
    }
}

/// One module naming another, and where.
#[derive(Debug)]
struct Use {
    from: String,
    to: String,
    file: String,
    line: usize,
}

// ------------------------------------------------------------------ the map

/// The layers of a map, or every reason it cannot be read.
fn parse_map(text: &str) -> Result<Vec<Layer>, Vec<String>> {
    let mut layers: Vec<Layer> = Vec::new();
    let mut errors = Vec::new();
    let (mut section, mut inside, mut reading) = (false, false, false);
    for (n, line) in text.lines().enumerate() {
        let (at, line) = (format!("ARCHITECTURE.md:{}", n + 1), line.trim_end());
        if let Some(heading) = line.strip_prefix("## ") {
            inside = heading == "The layers";
            section |= inside;
            reading = false;
        } else if !inside {
        } else if let Some(heading) = line.strip_prefix("### ") {
            reading = false;
            let rank = heading
                .split_once(". ")
                .and_then(|(r, t)| Some((r.parse().ok()?, t)));
            let Some((rank, title)) = rank else {
                errors.push(format!(
                    "{at}: a layer's heading is `### N. Title`, not `{line}`"
                ));
                continue;
            };
            let (title, line, modules) = (title.to_owned(), n + 1, Vec::new());
            layers.push(Layer {
                rank,
                title,
                line,
                modules,
            });
        } else if let Some(rest) = line.strip_prefix("Modules:") {
            match layers.last_mut() {
                Some(l) if l.modules.is_empty() => l.modules.extend(backticked(rest)),
                Some(l) => errors.push(format!("{at}: a second Modules: line in {}", l.describe())),
                None => errors.push(format!("{at}: a Modules: line before any layer")),
            }
            reading = true;
        } else if line.is_empty() {
            reading = false;
        } else if let Some(l) = layers.last_mut().filter(|_| reading) {
            l.modules.extend(backticked(line));
        }
    }
    if !section {
        errors.push("ARCHITECTURE.md has no `## The layers` section".to_owned());
    } else if layers.is_empty() {
        errors.push("ARCHITECTURE.md's `## The layers` has no layer (`### N. Title`)".to_owned());
    }
    errors.extend(check_names(&layers));
    if errors.is_empty() {
        Ok(layers)
    } else {
        Err(errors)
    }
}

/// The names in backticks of a text, `x.rs` read as `x`.
fn backticked(text: &str) -> Vec<String> {
    let spans = text.split('`').skip(1).step_by(2);
    spans
        .map(|s| s.trim().trim_end_matches(".rs").to_owned())
        .collect()
}

/// A layer that names nothing, a name that is no module name, a module in
/// two layers.
fn check_names(layers: &[Layer]) -> Vec<String> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<&str, &Layer> = BTreeMap::new();
    for l in layers {
        let at = format!("ARCHITECTURE.md:{}: {}", l.line, l.describe());
        if l.modules.is_empty() {
            out.push(format!("{at} names no module (a line `Modules: `a`, `b``)"));
        }
        for m in &l.modules {
            let ident = m
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
            if !ident || !m.starts_with(|c: char| c.is_ascii_lowercase()) {
                out.push(format!("{at} names `{m}`, which is no module name"));
            }
            if let Some(first) = seen.insert(m, l) {
                out.push(format!("{at} names `{m}`, already in {}", first.describe()));
            }
        }
    }
    out
}

// ----------------------------------------------------------------- the code

/// src/'s top-level modules and the files of each.
fn src_modules(src: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for entry in fs::read_dir(src).unwrap_or_else(|e| panic!("{}: {e}", src.display())) {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(stem) = name
            .strip_suffix(".rs")
            .filter(|s| *s != "lib" && path.is_file())
        {
            out.entry(stem.to_owned()).or_default().push(path);
        } else if path.join("mod.rs").is_file() || src.join(format!("{name}.rs")).is_file() {
            rs_files(&path, out.entry(name).or_default());
        }
    }
    out.values_mut().for_each(|files| files.sort());
    out
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rs_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Rust source with its comments and literals blanked, newlines kept: what
/// is left is code, on the lines it was on.
fn code_only(src: &str) -> Vec<char> {
    let mut c: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < c.len() {
        match skipped(&c, i) {
            Some(end) => {
                let end = end.min(c.len());
                c[i..end]
                    .iter_mut()
                    .filter(|ch| **ch != '\n')
                    .for_each(|ch| *ch = ' ');
                i = end;
            }
            None => i += 1,
        }
    }
    c
}

fn is_ident(ch: Option<&char>) -> bool {
    ch.is_some_and(|ch| ch.is_alphanumeric() || *ch == '_')
}

/// Where the comment or literal that starts at `i` ends, if one starts.
fn skipped(c: &[char], i: usize) -> Option<usize> {
    let find = |from: usize, pat: &dyn Fn(usize) -> bool| {
        (from..c.len()).find(|&k| pat(k)).unwrap_or(c.len())
    };
    let prev = |k: usize| k.checked_sub(1).and_then(|k| c.get(k));
    match (c[i], c.get(i + 1)) {
        ('/', Some('/')) => Some(find(i, &|k| c[k] == '\n')),
        // Block comments, nested ones not counted: src/ has none.
        ('/', Some('*')) => Some(find(i + 2, &|k| c[k..].starts_with(&['*', '/'])) + 2),
        ('"', _) => {
            let mut k = i + 1;
            while k < c.len() && c[k] != '"' {
                k += if c[k] == '\\' { 2 } else { 1 };
            }
            Some(k + 1)
        }
        // r"..", r#".."#, br"..": no escapes; a quote and as many # end it.
        ('r', _) if !is_ident(prev(i)) || (prev(i) == Some(&'b') && !is_ident(prev(i - 1))) => {
            let hashes = c[i + 1..].iter().take_while(|&&ch| ch == '#').count();
            (c.get(i + 1 + hashes) == Some(&'"')).then(|| {
                let closes = |k: usize| c[k] == '"' && c[k + 1..].starts_with(&vec!['#'; hashes]);
                find(i + 2 + hashes, &closes) + 1 + hashes
            })
        }
        ('\'', Some('\\')) => Some(find(i + 3, &|k| c[k] == '\'') + 1),
        ('\'', _) if c.get(i + 2) == Some(&'\'') => Some(i + 3),
        _ => None,
    }
}

/// The word that starts at `i` (empty if none does), and where it ends.
fn word_at(code: &[char], i: usize) -> (String, usize) {
    if i > 0 && is_ident(code.get(i - 1)) {
        return (String::new(), i);
    }
    let end = i + code[i..]
        .iter()
        .take_while(|&ch| is_ident(Some(ch)))
        .count();
    (code[i..end].iter().collect(), end)
}

/// Every top-level module a file names, with its line: `crate::x` and
/// `hookstamp::x`, and in a group `crate::{a, b::{c}}` each item's first
/// segment (`self` left out).
fn references(src: &str) -> Vec<(usize, String)> {
    let code = code_only(src);
    let line_of = |k: usize| code[..k].iter().filter(|&&ch| ch == '\n').count() + 1;
    let mut out = Vec::new();
    for i in 0..code.len() {
        let (word, k) = word_at(&code, i);
        if !matches!(word.as_str(), "crate" | "hookstamp") || !code[k..].starts_with(&[':', ':']) {
            continue;
        }
        // One name, or a group's: a name at depth 1 just after `{` or `,`.
        let group = code.get(k + 2) == Some(&'{');
        let (mut depth, mut last) = (i32::from(!group), '{');
        for (k, &ch) in code.iter().enumerate().skip(k + 2) {
            let name = word_at(&code, k).0;
            if depth == 1 && matches!(last, '{' | ',') && !name.is_empty() && name != "self" {
                out.push((line_of(k), name));
            }
            depth += i32::from(ch == '{') - i32::from(ch == '}');
            if depth == 0 || !group {
                break;
            }
            last = if ch.is_whitespace() { last } else { ch };
        }
    }
    out
}

/// Every use of one module by another; names that are no module are left
/// out (a crate's own `crate::` in a nested binary module, say).
fn uses(code: &Code) -> Vec<Use> {
    let mut out = Vec::new();
    for (from, files) in code {
        for (file, text) in files {
            for (line, to) in references(text) {
                if &to != from && code.contains_key(&to) {
                    out.push(Use {
                        from: from.clone(),
                        to,
                        file: file.clone(),
                        line,
                    });
                }
            }
        }
    }
    out
}

// --------------------------------------------------------------- the checks

/// The modules of src/ the map leaves out, and the names it gives that src/
/// has no module for.
fn check_map(layers: &[Layer], code: &Code) -> Vec<String> {
    let mapped: BTreeSet<&String> = layers.iter().flat_map(|l| &l.modules).collect();
    let mut out = Vec::new();
    for (m, files) in code.iter().filter(|(m, _)| !mapped.contains(m)) {
        let file = files.first().map_or("src/", |(f, _)| f);
        out.push(format!("{file}: the module `{m}` is in no layer of ARCHITECTURE.md (add it to a Modules: line)"));
    }
    for l in layers {
        for m in l.modules.iter().filter(|m| !code.contains_key(*m)) {
            out.push(format!(
                "ARCHITECTURE.md:{}: {} names `{m}`, but src/ has no such module (no src/{m}.rs, no src/{m}/)",
                l.line,
                l.describe()
            ));
        }
    }
    out
}

/// Every use of a module of a higher layer, or of a layer beside its own.
fn check_layers(layers: &[Layer], uses: &[Use]) -> Vec<String> {
    let layer_of: BTreeMap<&str, &Layer> = layers
        .iter()
        .flat_map(|l| l.modules.iter().map(move |m| (m.as_str(), l)))
        .collect();
    let mut out = Vec::new();
    for u in uses {
        let (Some(a), Some(b)) = (layer_of.get(u.from.as_str()), layer_of.get(u.to.as_str()))
        else {
            continue; // check_map reports a module in no layer
        };
        let how = match b.rank.cmp(&a.rank) {
            std::cmp::Ordering::Greater => "a higher layer",
            std::cmp::Ordering::Equal if a.line != b.line => "a layer beside its own",
            _ => continue,
        };
        out.push(format!(
            "{}:{}: `{}` ({}) uses `{}` ({}), {how}",
            u.file,
            u.line,
            u.from,
            a.describe(),
            u.to,
            b.describe()
        ));
    }
    out
}

/// For each module on a circle of uses, its shortest circle, each step
/// with where it is written; a circle once.
fn check_cycles(uses: &[Use]) -> Vec<String> {
    let mut reported = BTreeSet::new();
    let mut out = Vec::new();
    for m in uses
        .iter()
        .map(|u| u.from.as_str())
        .collect::<BTreeSet<_>>()
    {
        let Some(circle) = shortest_circle(uses, m) else {
            continue;
        };
        let mut members: Vec<&str> = circle.iter().map(|u| u.from.as_str()).collect();
        members.sort();
        if reported.insert(members) {
            let to: Vec<&str> = circle.iter().map(|u| u.to.as_str()).collect();
            let steps: Vec<String> = circle
                .iter()
                .map(|u| format!("\n  {}:{}: `{}` uses `{}`", u.file, u.line, u.from, u.to))
                .collect();
            out.push(format!(
                "a circle of uses, `{m}` → `{}`:{}",
                to.join("` → `"),
                steps.concat()
            ));
        }
    }
    out
}

/// The shortest way from `m` back to itself, as the uses it takes.
fn shortest_circle<'a>(uses: &'a [Use], m: &str) -> Option<Vec<&'a Use>> {
    let mut back: BTreeMap<&str, &Use> = BTreeMap::new();
    let mut queue = VecDeque::from([m]);
    while let Some(a) = queue.pop_front() {
        for u in uses.iter().filter(|u| u.from == a) {
            if back.contains_key(u.to.as_str()) {
                continue;
            }
            back.insert(&u.to, u);
            if u.to == m {
                let mut path = vec![u];
                while let Some(&u) = path.last().filter(|u| u.from != m) {
                    path.push(back[u.from.as_str()]);
                }
                path.reverse();
                return Some(path);
            }
            queue.push_back(&u.to);
        }
    }
    None
}

/// Everything wrong with a map (ARCHITECTURE.md's text) over the code.
fn problems(map: &str, code: &Code) -> Vec<String> {
    let layers = match parse_map(map) {
        Ok(layers) => layers,
        Err(errors) => return errors,
    };
    let uses = uses(code);
    let mut out = check_map(&layers, code);
    out.extend(check_layers(&layers, &uses));
    out.extend(check_cycles(&uses));
    out
}

// ------------------------------------------------------- the tree, checked

fn the_code() -> Code {
    let root = Path::new(ROOT);
    let read = |f: &PathBuf| {
        let shown = f.strip_prefix(root).unwrap_or(f).display().to_string();
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("{shown}: {e}"));
        (shown, text)
    };
    let modules = src_modules(&root.join("src")).into_iter();
    modules
        .map(|(m, files)| (m, files.iter().map(&read).collect()))
        .collect()
}

#[test]
fn src_keeps_to_the_map_in_architecture_md() {
    let map = fs::read_to_string(Path::new(ROOT).join("ARCHITECTURE.md")).unwrap();
    let code = the_code();
    // The reading itself works on the tree: one that found nothing would
    // pass every rule.
    let found = uses(&code);
    let host = found
        .iter()
        .any(|u| u.from == "lifecycle" && u.to == "host");
    assert!(host, "src/lifecycle's use of host not found: {found:?}");
    let problems = problems(&map, &code);
    let n = problems.len();
    assert!(
        n == 0,
        "src/ against ARCHITECTURE.md ({n}):\n{}",
        problems.join("\n")
    );
}

/// The provider table is the facts every per-provider list derives from;
/// it names no other module, so none of them can bend it.
#[test]
fn the_provider_table_uses_no_other_module() {
    let code = the_code();
    assert!(code.contains_key("providers"), "src/providers.rs not found");
    let from: Vec<Use> = uses(&code)
        .into_iter()
        .filter(|u| u.from == "providers")
        .collect();
    assert!(from.is_empty(), "providers uses {from:?}");
}

// ------------------------------------------------- the check, on examples

const MAP: &str = "# Architecture\n\n## The layers\n\nProse; `prose` is no module.\n\n\
                   ### 1. Facts\n\nModules: `a`,\n`b`\n\n### 2. Host\n\nModules: `h`\n\n\
                   ### 3. Adapter\n\nModules: `f`\n\n### 3. CLI\n\nModules: `main.rs`\n\n\
                   ## After\n\nModules: `z`\n";

/// A made-up tree: each file a line `== src/x.rs`, then its text.
fn code(tree: &str) -> Code {
    let mut out = Code::new();
    for part in tree.split("== ").skip(1) {
        let (file, text) = part.split_once('\n').unwrap();
        let module = file[4..].split(['/', '.']).next().unwrap().to_owned();
        out.entry(module)
            .or_default()
            .push((file.to_owned(), text.to_owned()));
    }
    out
}

#[test]
fn a_tree_that_keeps_to_its_map_passes() {
    let layers: Vec<String> = parse_map(MAP)
        .unwrap()
        .iter()
        .map(|l| format!("{l:?}"))
        .collect();
    let layers = layers.join("\n").replace("Layer ", "");
    let want = r#"{ rank: 1, title: "Facts", line: 7, modules: ["a", "b"] }
{ rank: 2, title: "Host", line: 12, modules: ["h"] }
{ rank: 3, title: "Adapter", line: 16, modules: ["f"] }
{ rank: 3, title: "CLI", line: 20, modules: ["main"] }"#;
    assert_eq!(layers, want);
    let tree = code(
        "== src/a.rs\nuse crate::b::X;\n== src/b.rs\n== src/h.rs\nuse crate::{a, b::{self, Y}};\n\
         == src/f/mod.rs\nfn g() { crate::h::go() }\n\
         == src/main.rs\nuse hookstamp::h;\n// crate::f\nlet s = \"crate::f\";\n",
    );
    assert_eq!(problems(MAP, &tree), Vec::<String>::new());
}

#[test]
fn a_use_of_a_higher_layer_or_one_beside_fails() {
    let tree = code(
        "== src/a.rs\n\n\nfn x() { crate::h::go(); }\n== src/b.rs\n== src/h.rs\n== src/main.rs\n\
         == src/f/mod.rs\n== src/f/abi.rs\nuse crate::{\n    main,\n};\n",
    );
    assert_eq!(
        problems(MAP, &tree),
        [
            "src/a.rs:3: `a` (layer 1, Facts) uses `h` (layer 2, Host), a higher layer",
            "src/f/abi.rs:2: `f` (layer 3, Adapter) uses `main` (layer 3, CLI), a layer beside its own",
        ]
    );
}

#[test]
fn a_module_missing_from_the_map_or_a_name_with_no_module_fails() {
    let tree = code("== src/a.rs\n== src/h.rs\n== src/f.rs\n== src/main.rs\n== src/new.rs\n");
    assert_eq!(
        problems(MAP, &tree),
        [
            "src/new.rs: the module `new` is in no layer of ARCHITECTURE.md (add it to a Modules: line)",
            "ARCHITECTURE.md:7: layer 1, Facts names `b`, but src/ has no such module (no src/b.rs, no src/b/)",
        ]
    );
}

#[test]
fn a_circle_fails_even_within_a_layer() {
    let tree = code(
        "== src/a.rs\nuse crate::b;\n== src/b.rs\nuse crate::a::X;\n\
         == src/h.rs\nuse crate::a;\n== src/f.rs\n== src/main.rs\n",
    );
    let circle = "a circle of uses, `a` → `b` → `a`:\n  src/a.rs:1: `a` uses `b`\n  src/b.rs:1: `b` uses `a`";
    assert_eq!(problems(MAP, &tree), [circle]);
}

#[test]
fn a_map_that_cannot_be_read_fails() {
    let twice = "## The layers\n\n### 1. A\n\nModules: `a`\n\n### 2. B\n\nModules: `a`, `B-1`\n";
    assert_eq!(
        parse_map(twice).unwrap_err(),
        [
            "ARCHITECTURE.md:7: layer 2, B names `a`, already in layer 1, A",
            "ARCHITECTURE.md:7: layer 2, B names `B-1`, which is no module name",
        ]
    );
    let bad =
        "## The layers\n\n### 1. A\n\nNo modules.\n\n### Two. B\n\nModules: `b`\nModules: `c`\n";
    assert_eq!(
        parse_map(bad).unwrap_err(),
        [
            "ARCHITECTURE.md:7: a layer's heading is `### N. Title`, not `### Two. B`",
            "ARCHITECTURE.md:10: a second Modules: line in layer 1, A",
        ]
    );
    let none = [
        parse_map("# none\n"),
        parse_map("## The layers\n\nProse.\n"),
    ];
    let none: Vec<String> = none.into_iter().flat_map(Result::unwrap_err).collect();
    let want = "ARCHITECTURE.md has no `## The layers` section\n\
                ARCHITECTURE.md's `## The layers` has no layer (`### N. Title`)";
    assert_eq!(none.join("\n"), want);
}

#[test]
fn comments_and_literals_name_no_module() {
    let src = "//! crate::a\n/* crate::b\n crate::c */ \
               let s = \"crate::d \\\" crate::e\"; let r = r#\"crate::f \"# ;\n\
               let q = '\"'; let e = '\\''; fn x<'a>(v: &'a str) { crate::g::h(v) }\n\
               mycrate::i; $crate::j; pub(crate) fn k() {} use crate::l;\n\
               use crate::{m, n::{o, p}, q::r as s, self};\n";
    let found: Vec<String> = references(src)
        .iter()
        .map(|(n, m)| format!("{n}:{m}"))
        .collect();
    assert_eq!(found.join(" "), "4:g 5:j 5:l 6:m 6:n 6:q");
}

#[test]
fn src_modules_are_files_and_directories() {
    let dir = std::env::temp_dir().join(format!("hookstamp-architecture-{}", std::process::id()));
    for file in
        "lib.rs main.rs x.rs y/mod.rs y/z/deep.rs w.rs w/part.rs notes/a.md loose/b.rs".split(' ')
    {
        fs::create_dir_all(dir.join(file).parent().unwrap()).unwrap();
        fs::write(dir.join(file), "").unwrap();
    }
    let found = src_modules(&dir);
    let _ = fs::remove_dir_all(&dir);
    let shown = found.iter().map(|(m, files)| {
        let files: Vec<String> = files
            .iter()
            .map(|f| f.strip_prefix(&dir).unwrap().display().to_string())
            .collect();
        format!("{m}: {}", files.join(" "))
    });
    let want = "main: main.rs; w: w/part.rs w.rs; x: x.rs; y: y/mod.rs y/z/deep.rs";
    assert_eq!(shown.collect::<Vec<_>>().join("; "), want);
}
