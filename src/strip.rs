//! Stamp names a client sent: removed from every request's headers and
//! trailers before the filter looks at anything, so that a client never
//! chooses its stamps.

use crate::host::{Host, HostResult};
use crate::stamps;

/// Which of the request's maps.
#[derive(Clone, Copy)]
pub enum Map {
    Headers,
    Trailers,
}

/// Removes every stamp-namespace name (any casing, `_` for `-`) from the
/// host's map (each name once: one removal takes every value of it) and
/// from `pairs`; returns how many values the client had sent.
pub fn strip(host: &mut impl Host, pairs: &mut Vec<(&str, &[u8])>, map: Map) -> HostResult<usize> {
    let before = pairs.len();
    let mut removed: Vec<&str> = Vec::new();
    for (n, _) in pairs.iter() {
        if stamps::is_stamp_header(n) && !removed.contains(n) {
            match map {
                Map::Headers => host.remove_request_header(n)?,
                Map::Trailers => host.remove_request_trailer(n)?,
            }
            removed.push(n);
        }
    }
    if !removed.is_empty() {
        pairs.retain(|(n, _)| !stamps::is_stamp_header(n));
    }
    Ok(before - pairs.len())
}
