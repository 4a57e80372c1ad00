//! What a tenant, a source id, a secret's environment variable and a
//! handshake's token may be: the config checks the ids and the variables'
//! names at load (and the CLI and `make run` list the variables by the same
//! rule), the route reads a tenant from a request's path by the same rule, a
//! handshake reflects or signs only a token, and a signature check refuses a
//! body that could be one (`verify::Verify::refuses_tokens`).

/// An id: 1 to 64 bytes of `[A-Za-z0-9_-]` and `extra`.
fn id_ok(s: &str, extra: &[u8]) -> bool {
    (1..=64).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || extra.contains(&b))
}

/// A tenant: `[A-Za-z0-9_-]{1,64}`. Neither a tenant nor a source id holds
/// `/` or `:`, which keeps the lane groups of two tenants apart
/// (`lanes::keyed_group`).
pub fn tenant_ok(s: &str) -> bool {
    id_ok(s, b"")
}

/// A source id: `[A-Za-z0-9._-]{1,64}`, but not `.` or `..`, which a
/// server resolves as a path segment.
pub fn source_id_ok(s: &str) -> bool {
    id_ok(s, b".") && s != "." && s != ".."
}

/// What a variable's name is, as an error says it.
pub const ENV_NAME_FORM: &str = "[A-Za-z_][A-Za-z0-9_]*";

/// The name of the environment variable a secret is read from (`{"env":
/// NAME}`): `[A-Za-z_][A-Za-z0-9_]*`, at most 128 bytes, and not a `whsec_`
/// secret written in its place. What fails it is never looked up nor shown.
pub fn env_name_ok(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.starts_with("whsec_")
        && name.len() <= 128
}

/// The longest token a handshake reflects or signs.
pub const MAX_TOKEN: usize = 256;

/// A token a handshake may reflect or sign: 1 to `MAX_TOKEN` bytes of
/// `[A-Za-z0-9._~+/=-]`, never JSON or a body (see `handshake`).
pub fn token_ok(t: &[u8]) -> bool {
    !t.is_empty() && t.len() <= MAX_TOKEN && t.iter().all(|&b| token_byte(b))
}

/// A byte a token may hold: a body made only of these, and no longer than
/// a token, is one the CRC would sign (see `verify::Verify::refuses_tokens`).
pub fn token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"._~+/=-".contains(&b)
}
