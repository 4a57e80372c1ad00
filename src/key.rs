//! Where a key comes from, and the length rule both kinds of key share.

use sha2::{Digest, Sha256};
use std::borrow::Cow;

/// Where a dedupe or ordering key is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The first value of a header; the index names it in the source's
    /// header table, read once at the request headers.
    Header(usize),
    /// The value at this path of the JSON body; the index names the path in
    /// the source's path table, so one decode serves every key.
    Json(usize),
}

/// A key longer than `max` bytes becomes `sha256:` + lowercase hex of its
/// SHA-256, so that it fits the store's and the queue's limits.
pub fn cap(raw: Cow<'_, [u8]>, max: usize) -> Cow<'_, [u8]> {
    if raw.len() <= max {
        return raw;
    }
    let digest = Sha256::digest(&raw);
    Cow::Owned(format!("sha256:{}", hex::encode(digest)).into_bytes())
}

/// The first value of header `name` (lowercase) in arrival order, if any.
/// Names are compared case-insensitively. (A key header is never in the
/// stamp namespace: the config refuses it, and the filter strips those.)
pub fn first_header<'h, N, V>(headers: &'h [(N, V)], name: &str) -> Option<&'h [u8]>
where
    N: AsRef<str>,
    V: AsRef<[u8]>,
{
    headers
        .iter()
        .find(|(n, _)| n.as_ref().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_keeps_exact_limit_and_hashes_above() {
        let at = vec![b'a'; 200];
        assert_eq!(cap(Cow::Borrowed(&at), 200).len(), 200);
        let over = vec![b'a'; 201];
        let capped = cap(Cow::Borrowed(&over), 200);
        assert!(capped.starts_with(b"sha256:"));
        assert_eq!(capped.len(), 7 + 64);
    }
}
