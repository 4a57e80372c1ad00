//! What a tenant and a source id may be: the config checks them at load,
//! and the route reads a tenant from a request's path by the same rule.

/// An id: 1 to 64 bytes of `[A-Za-z0-9_-]` and `extra`.
fn id_ok(s: &str, extra: &[u8]) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || extra.contains(&b))
}

/// A tenant: `[A-Za-z0-9_-]{1,64}`.
pub fn tenant_ok(s: &str) -> bool {
    id_ok(s, b"")
}

/// A source id: `[A-Za-z0-9._-]{1,64}`, but not `.` or `..`, which a
/// server resolves as a path segment.
pub fn source_id_ok(s: &str) -> bool {
    id_ok(s, b".") && s != "." && s != ".."
}
