//! Provider event keys: what makes a provider's retry recognisable.

use crate::key::KeySource;
use crate::providers::{self, EventId};

/// Keys longer than this are hashed before they are stamped.
pub const MAX_DEDUPE_KEY: usize = 200;

/// 72 hours: longer than any provider's retry schedule.
pub const DEFAULT_TTL_MS: u64 = 259_200_000;

/// A preset by name: where its provider puts its event id (see
/// `providers`).
pub fn preset(name: &str) -> Option<&'static EventId> {
    providers::find(name)?.dedupe.as_ref()
}

/// The presets' names, for error messages.
pub fn names() -> Vec<&'static str> {
    providers::listed(|p| p.dedupe.as_ref().map(|_| p.name))
}

/// A source's dedupe rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dedupe {
    pub key: KeySource,
    /// ttl_ms in decimal, as stamped: made once, at load.
    pub ttl_ms: String,
}

impl Dedupe {
    pub fn new(key: KeySource, ttl_ms: u64) -> Self {
        Dedupe {
            key,
            ttl_ms: ttl_ms.to_string(),
        }
    }
}
