//! The stamp seal: proof for the queue that a request's stamps came from
//! the filter. With a proxy-to-queue key, the filter stamps, last,
//!
//! ```text
//! x-hookstamp-seal: t=<unix seconds>,v1=<hex HMAC-SHA256>
//! ```
//!
//! over the canonical text
//!
//! ```text
//! hookstamp-seal-v1\n<t>\n<METHOD>\n<path>\n<name>:<value>\n ... <body>\n
//! ```
//!
//! a `name:value` line for every stamp in order, and `<body>` the hex
//! SHA-256 of the body where the filter held the whole of it (a source
//! whose keys or signature read the body), else `-`. The queue recomputes
//! it with its copy of the key, compares in constant time, and rejects a
//! request that is unsealed, sealed wrong, or older than it tolerates.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The seal's version tag, first in the signed text.
const VERSION: &str = "hookstamp-seal-v1";

/// The seal's value for a request.
pub fn seal<'s>(
    key: &[u8],
    t: u64,
    method: &str,
    path: &str,
    stamps: impl IntoIterator<Item = (&'s str, &'s str)>,
    body: Option<&[u8; 32]>,
) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        // HMAC takes a key of any length; this arm cannot be reached.
        return String::new();
    };
    for part in [VERSION, &t.to_string(), method, path] {
        mac.update(part.as_bytes());
        mac.update(b"\n");
    }
    for (name, value) in stamps {
        mac.update(name.as_bytes());
        mac.update(b":");
        mac.update(value.as_bytes());
        mac.update(b"\n");
    }
    match body {
        Some(h) => mac.update(hex::encode(h).as_bytes()),
        None => mac.update(b"-"),
    }
    mac.update(b"\n");
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// The SHA-256 of a whole body, as the seal covers it.
pub fn body_hash(body: &[u8]) -> [u8; 32] {
    Sha256::digest(body).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/keys.md's vectors, computed apart (tests/e2e/seal.py).
    #[test]
    fn the_readmes_vectors() {
        let s = seal(
            b"queue-key",
            1_700_000_000,
            "POST",
            "/webhooks/github",
            [
                ("x-hookstamp-source", "github"),
                ("x-hookstamp-tenant", "default"),
            ],
            None,
        );
        assert_eq!(
            s,
            "t=1700000000,v1=16102752da1b334812029c693c3345201b1c950299b58d648271275e19548b49"
        );
        let s = seal(
            b"queue-key",
            1_700_000_000,
            "POST",
            "/webhooks/stripe",
            [
                ("x-hookstamp-source", "stripe"),
                ("x-hookstamp-tenant", "acme"),
                ("x-hookstamp-dedupe-key", "evt_1"),
            ],
            Some(&body_hash(br#"{"id":"evt_1"}"#)),
        );
        assert_eq!(
            s,
            "t=1700000000,v1=40c4dbe9b80944ad3be86b53ffb369a5287dba5c96e5abe46021726b9cd97bf9"
        );
    }
}
