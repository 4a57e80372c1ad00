//! Provider event keys: what makes a provider's retry recognisable.

use crate::key::KeySource;

/// Keys longer than this are hashed before they are stamped.
pub const MAX_DEDUPE_KEY: usize = 200;

/// 72 hours: longer than any provider's retry schedule.
pub const DEFAULT_TTL_MS: u64 = 259_200_000;

/// Where a provider puts its event id.
pub enum PresetKey {
    /// The first of these headers that is present.
    Headers(&'static [&'static str]),
    Json(&'static str),
}

/// Provider presets, by name.
pub const PRESETS: &[(&str, PresetKey)] = &[
    ("github", PresetKey::Headers(&["x-github-delivery"])),
    ("standard_webhooks", PresetKey::Headers(&["webhook-id"])),
    // Svix's own library takes the unbranded name too.
    ("svix", PresetKey::Headers(&["svix-id", "webhook-id"])),
    // Shopify's webhook deliveries, and its newer event deliveries, which
    // drop the X- prefix. (Shopify suggests X-Shopify-Event-Id for
    // duplicates across topics; a delivery id is what a retry repeats.)
    (
        "shopify",
        PresetKey::Headers(&["x-shopify-webhook-id", "shopify-webhook-id"]),
    ),
    ("stripe", PresetKey::Json("id")),
    // A convention: the callout must put a retry-stable id there.
    ("salesforce", PresetKey::Json("id")),
];

/// Looks up a preset by name.
pub fn preset(name: &str) -> Option<&'static PresetKey> {
    PRESETS.iter().find(|(n, _)| *n == name).map(|(_, k)| k)
}

/// The names of all presets, for error messages.
/// The presets' names.
pub fn names() -> Vec<&'static str> {
    PRESETS.iter().map(|(n, _)| *n).collect()
}

pub fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(", ")
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
