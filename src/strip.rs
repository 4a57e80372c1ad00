//! Stamp names a client sent: removed from every request's headers and
//! trailers before the filter looks at anything, so that a client never
//! chooses its stamps. And, on a sealed request, the client's own seal
//! fields (`signature-input`, `signature`, `content-digest`), removed as
//! the filter adds its seal, so that the queue sees only the filter's.

use crate::host::{Header, HostError, HostResult, StreamHost};
use crate::{seal, stamps};

/// Which of the request's maps.
#[derive(Clone, Copy)]
pub enum Map {
    Headers,
    Trailers,
}

/// Removes every stamp-namespace name (any casing, `_` for `-`) from the
/// host's map (each name once: one removal takes every value of it) and
/// from `pairs`; returns how many values the client had sent.
pub fn strip(
    host: &mut impl StreamHost,
    pairs: &mut Vec<Header<'_>>,
    map: Map,
) -> HostResult<usize> {
    let before = pairs.len();
    if !pairs.iter().any(|(n, _)| stamps::is_stamp_header(n)) {
        return Ok(0);
    }
    // The names are copied and their views dropped before the host removes
    // a header: a view into the host's own map (the dynamic module's) is
    // gone with the header it shows.
    let mut names: Vec<String> = Vec::new();
    for (n, _) in pairs.iter() {
        if stamps::is_stamp_header(n) && !names.iter().any(|r| r.as_bytes() == *n) {
            // A proxy's names are tokens, ASCII: one that is not text
            // cannot be named to remove it, and the request is answered.
            let name = std::str::from_utf8(n).map_err(|_| HostError {
                call: "strip",
                status: 0,
            })?;
            names.push(name.to_owned());
        }
    }
    pairs.retain(|(n, _)| !stamps::is_stamp_header(n));
    for n in &names {
        match map {
            Map::Headers => host.remove_request_header(n)?,
            Map::Trailers => host.remove_request_trailer(n)?,
        }
    }
    Ok(before - pairs.len())
}

/// Which spellings of the seal's fields (`seal::CLIENT_FIELDS`, a bit
/// each) a request's headers hold: 0 for nearly every request.
pub fn seal_fields_sent(pairs: &[Header<'_>]) -> u8 {
    pairs
        .iter()
        .fold(0, |sent, (n, _)| sent | seal::client_field(n))
}

/// Removes the seal's fields the client sent (`sent`, from
/// `seal_fields_sent`): each spelling at once, every value of it, any case
/// (the host's header names are case-insensitive).
pub fn seal_fields(host: &mut impl StreamHost, sent: u8) -> HostResult<()> {
    for (name, i) in seal::CLIENT_FIELDS.iter().zip(0u8..) {
        if sent & (1 << i) != 0 {
            host.remove_request_header(name)?;
        }
    }
    Ok(())
}
