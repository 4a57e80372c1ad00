//! What a source's keys read (its header, path and form tables, each
//! entry interned once), which headers its stored hooks keep, and which of
//! its sinks are ordered: the tables the source, sink, key and affinity
//! checks share.

use crate::json::Path;
use crate::key::KeySource;

/// Headers that `store_headers: "all"` never stores.
pub(super) const CREDENTIAL_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
];

/// Which headers a source's stored hook keeps (a replay re-reads lanes).
pub(super) enum StoreHeaders {
    All,
    None,
    Only(Vec<String>),
}

impl StoreHeaders {
    pub(super) fn keeps(&self, name: &str) -> bool {
        match self {
            StoreHeaders::All => !CREDENTIAL_HEADERS.contains(&name),
            StoreHeaders::None => false,
            StoreHeaders::Only(list) => list.iter().any(|n| n == name),
        }
    }
}

/// The paths, headers and form fields a source's keys read, each
/// interned once.
#[derive(Default)]
pub(super) struct Reads {
    pub(super) paths: Vec<Path>,
    pub(super) headers: Vec<String>,
    pub(super) forms: Vec<String>,
    /// A key is the body's SHA-256.
    pub(super) body_hash: bool,
}

impl Reads {
    pub(super) fn path(&mut self, p: Path, integer: bool) -> KeySource {
        KeySource::Json {
            path: intern(&mut self.paths, p),
            integer,
        }
    }

    pub(super) fn header(&mut self, h: String) -> KeySource {
        KeySource::Header(intern(&mut self.headers, h))
    }

    pub(super) fn form(&mut self, f: String) -> KeySource {
        KeySource::Form(intern(&mut self.forms, f))
    }
}

/// Adds an item to a table (once) and returns its index.
pub(super) fn intern<T: PartialEq>(table: &mut Vec<T>, item: T) -> usize {
    if let Some(i) = table.iter().position(|p| *p == item) {
        return i;
    }
    table.push(item);
    table.len() - 1
}

/// How many sinks a source has, and which are ordered (even those whose
/// lane an error dropped), for the affinity check's errors; noted as the
/// sinks are checked.
#[derive(Default)]
pub(super) struct Ordered {
    pub count: usize,
    pub ordered: Vec<usize>,
}

/// An ordering key's header must be stored with the hook: a replay
/// resolves the lane again from the stored hook.
pub(super) fn stored(store: &StoreHeaders, h: &str) -> Result<(), super::diag::Issue> {
    if store.keeps(h) {
        return Ok(());
    }
    let why = if CREDENTIAL_HEADERS.contains(&h) {
        " (a credential header is never stored)"
    } else {
        ""
    };
    Err(super::diag::Issue::new(
        "header_not_stored",
        format!(
        "header {h:?} is not kept by the source's store_headers{why}, so a replay could not resolve the lane again"
    )))
}
