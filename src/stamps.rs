//! The stamp headers: the contract with the upstream queue.

/// Every request header with this prefix is removed before anything else.
pub const PREFIX: &str = "x-hookstamp-";

pub const SOURCE: &str = "x-hookstamp-source";
pub const TENANT: &str = "x-hookstamp-tenant";
pub const DEDUPE_KEY: &str = "x-hookstamp-dedupe-key";
pub const DEDUPE_TTL_MS: &str = "x-hookstamp-dedupe-ttl-ms";
pub const IDEMPOTENCY_KEY: &str = "x-hookstamp-idempotency-key";

/// Whether a header name is in the stamp namespace (any casing).
pub fn is_stamp_header(name: &str) -> bool {
    name.len() >= PREFIX.len()
        && name.as_bytes()[..PREFIX.len()].eq_ignore_ascii_case(PREFIX.as_bytes())
}

/// The three header names of ordered sink `i`: id, key, group.
pub fn lane_names(i: u16) -> [String; 3] {
    [
        format!("x-hookstamp-lane-{i}"),
        format!("x-hookstamp-lane-{i}-key"),
        format!("x-hookstamp-lane-{i}-group"),
    ]
}

/// Percent-encodes a value so any key bytes fit in a header: bytes
/// 0x21..=0x7E other than `%` stay, every other byte becomes `%XX`.
pub fn encode(raw: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(raw.len());
    for &b in raw {
        if (0x21..=0x7E).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xF)] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_outside_visible_ascii_and_percent() {
        assert_eq!(encode(b"a b%\n\x00\xff~!"), "a%20b%25%0A%00%FF~!");
    }

    #[test]
    fn stamp_namespace_any_case() {
        assert!(is_stamp_header("X-HookStamp-Lane-0"));
        assert!(is_stamp_header("x-hookstamp-"));
        assert!(!is_stamp_header("x-hookstamp"));
        assert!(!is_stamp_header("x-hookstampz"));
    }
}
