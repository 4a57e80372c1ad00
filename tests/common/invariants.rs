//! Invariants every stamped request must hold; shared by the property tests
//! and the fuzz targets. A violation panics (a fuzz crash).

use hookstamp::config::Config;
use hookstamp::decide::{self, Outcome};
use hookstamp::lanes::GroupScope;
use hookstamp::route::{self, Route};

/// Undoes the stamp percent-encoding.
pub fn decode(v: &str) -> Vec<u8> {
    let b = v.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// Resolves a request twice and checks: the same stamps both times; one
/// lane id and group per ordered sink (its key where it has one, never
/// empty); each group its key's, its tenant's key's or its keyless group,
/// within its broker's limit (or hashed); every value header-safe; keys
/// within their length rules (or hashed). Returns the outcome.
pub fn check<'a>(
    cfg: &'a Config,
    method: &str,
    path: &'a str,
    headers: &'a [(String, Vec<u8>)],
    body: &'a [u8],
) -> Outcome<'a> {
    check_route(cfg, method, path);
    let now = decide::now_s();
    let a = decide::decide(cfg, method, path, headers, body, now).outcome;
    let b = decide::decide(cfg, method, path, headers, body, now).outcome;
    assert_eq!(a, b, "the same request must give the same stamps");
    let Outcome::Forward { source, stamped } = &a else {
        return a;
    };
    let lanes = cfg.sources[*source].lanes.len();
    let lane_headers = stamped
        .headers
        .iter()
        .filter(|(n, _)| n.starts_with("x-hookstamp-lane-"))
        .count();
    let keyed = stamped
        .headers
        .iter()
        .filter(|(n, _)| n.starts_with("x-hookstamp-lane-") && n.ends_with("-key"))
        .count();
    // A lane id and a group per ordered sink, and a key where it has one.
    assert_eq!(lane_headers, 2 * lanes + keyed, "one pair per ordered sink");
    // With affinity on, never absent: a missing hash header makes Envoy
    // pick a random host.
    if cfg.sources[*source].affinity.is_some() {
        let a = stamped
            .headers
            .iter()
            .find(|(n, _)| *n == "x-hookstamp-affinity");
        let a = a.expect("an affinity stamp");
        assert!(a.1.len() == 32 && a.1.bytes().all(|b| b.is_ascii_hexdigit()));
    }
    // Each group fits its sink's broker: the stamped key (behind its tenant
    // with group_scope tenant), or the keyless group, as is where it fits,
    // else the hash of its raw form.
    let stamp = |n: &str| {
        stamped
            .headers
            .iter()
            .find(|(h, _)| *h == n)
            .map(|(_, v)| v.to_string())
    };
    let tenant = stamp("x-hookstamp-tenant").unwrap();
    let src = &cfg.sources[*source];
    for lane in &src.lanes {
        let [_, key_name, group_name] = &lane.names;
        let (key, group) = (stamp(key_name), stamp(group_name).unwrap());
        assert_ne!(key.as_deref(), Some(""), "{key_name} is never empty");
        if let Some(max) = lane.group_max {
            assert!(
                group.len() <= max,
                "{group_name} is {} characters",
                group.len()
            );
        }
        let (plain, raw) = match (key, lane.group_scope) {
            (None, _) => {
                let g = format!("{tenant}/{}", src.id);
                (g.clone(), g.into_bytes())
            }
            (Some(k), GroupScope::Key) => (k.clone(), decode(&k)),
            (Some(k), GroupScope::Tenant) => (
                format!("k:{tenant}/{k}"),
                [b"k:", tenant.as_bytes(), b"/", &decode(&k)].concat(),
            ),
        };
        let fits = lane.group_max.is_none_or(|m| plain.len() <= m);
        let hashed = hookstamp::key::cap(std::borrow::Cow::Borrowed(&raw[..]), 0);
        let hashed = String::from_utf8(hashed.into_owned()).unwrap();
        assert_eq!(group, if fits { plain } else { hashed }, "{group_name}");
    }
    for (name, value) in &stamped.headers {
        assert!(
            value.bytes().all(|c| (0x21..=0x7e).contains(&c)),
            "{name}: {value:?} is not header-safe"
        );
        let raw = decode(value);
        let limit = match *name {
            "x-hookstamp-dedupe-key" => 200,
            n if n.ends_with("-key") && n.starts_with("x-hookstamp-lane-") => 128,
            _ => continue,
        };
        let hashed = raw.starts_with(b"sha256:") && raw.len() == 71;
        assert!(
            raw.len() <= limit || hashed,
            "{name} is {} bytes",
            raw.len()
        );
    }
    a
}

/// How one kind of upstream server could read a path, written apart from
/// the filter's normaliser: so many percent-decoding rounds, case folded or
/// not, `;` parameters dropped or not, `\\` read as `/` or not, a NUL
/// ending the path or not; then `.` and `..` resolved, empty segments
/// merged. `None` if a decoded byte sequence is not UTF-8.
fn reading(
    raw: &str,
    rounds: usize,
    fold: bool,
    params: bool,
    backslash: bool,
    nul: bool,
) -> Vec<String> {
    let raw = raw.split(['?', '#']).next().unwrap_or("");
    let mut b = raw.as_bytes().to_vec();
    for _ in 0..rounds {
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            match (
                b[i],
                b.get(i + 1).copied().and_then(hex),
                b.get(i + 2).copied().and_then(hex),
            ) {
                (b'%', Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                }
                (c, _, _) => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        b = out;
    }
    if nul {
        if let Some(n) = b.iter().position(|&c| c == 0) {
            b.truncate(n);
        }
    }
    let text = String::from_utf8_lossy(&b).into_owned();
    let text = if backslash {
        text.replace('\\', "/")
    } else {
        text
    };
    let text = if fold {
        text.to_ascii_lowercase()
    } else {
        text
    };
    let mut segs: Vec<String> = Vec::new();
    for seg in text.split('/') {
        let seg = if params {
            seg.split(';').next().unwrap_or("")
        } else {
            seg
        };
        match seg.trim() {
            "" | "." => {}
            ".." => {
                segs.pop();
            }
            s => segs.push(s.to_owned()),
        }
    }
    segs
}

/// No reading of a path that any server model puts under the prefix lets a
/// request other than GET or HEAD pass the filter; and a request the filter
/// stamps is under the prefix in every reading that folds case.
pub fn check_route(cfg: &Config, method: &str, path: &str) {
    let got = route::route(cfg, method, path);
    for rounds in 0..=2 {
        for bits in 0..16u8 {
            let r = reading(
                path,
                rounds,
                bits & 1 != 0,
                bits & 2 != 0,
                bits & 4 != 0,
                bits & 8 != 0,
            );
            let lower: Vec<String> = r.iter().map(|s| s.to_ascii_lowercase()).collect();
            let under = lower.len() >= cfg.prefix_view.len()
                && lower.iter().zip(&cfg.prefix_view).all(|(a, b)| a == b);
            if under && method != "GET" && method != "HEAD" {
                assert!(
                    got != Route::Pass,
                    "{method} {path:?} passed, but reads as {r:?}"
                );
            }
        }
    }
}
