//! Invariants every stamped request must hold; shared by the property tests
//! and the fuzz targets. A violation panics (a fuzz crash).

use hookstamp::config::Config;
use hookstamp::resolve::{self, Outcome};

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
/// lane triple per ordered sink; every value header-safe; keys within their
/// length rules (or hashed). Returns the outcome.
pub fn check<'a>(
    cfg: &'a Config,
    method: &str,
    path: &'a str,
    headers: &'a [(String, Vec<u8>)],
    body: &'a [u8],
) -> Outcome<'a> {
    let a = resolve::handle(cfg, method, path, headers, body);
    let b = resolve::handle(cfg, method, path, headers, body);
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
    assert_eq!(lane_headers, 3 * lanes, "one triple per ordered sink");
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
