//! A request the filter holds for its body: what it keeps, and what it
//! is charged. It keeps only what the stamps need: the header-derived keys
//! were resolved at the headers, and nothing else of the headers is held.

use super::Plugin;
use crate::budget;
use crate::config::Source;
use crate::verify::{self, Reason};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// What a sealed request's seal covers that its stamps do not, and the
/// client's seal fields it replaces.
pub struct Sealing {
    /// The method and the path as sent.
    pub method: String,
    pub path: String,
    /// Its `x-request-id`, which the seal's nonce reads.
    pub request_id: Vec<u8>,
    /// Which spellings of the seal's fields the client sent
    /// (`strip::seal_fields_sent`), removed as the seal is added.
    pub fields: u8,
}

/// A request routed to a body source, held until its body is in.
pub struct Held<K> {
    pub plugin: Arc<Plugin>,
    /// Its stream, as its adapter reaches it: for the tick.
    pub key: K,
    /// The body length it declared, if any: the buffer never grows past it
    /// (it reserves nothing: bytes are charged as they arrive).
    pub declared: Option<usize>,
    /// Its source's index in its plugin's config (and metrics).
    pub source: usize,
    /// Whether the source's keys read the body (the filter then copies it).
    pub keeps_body: bool,
    /// The tenant its path named, where that is not its source's own
    /// (`tenant`): most requests' tenant is their source's, kept by the
    /// plugin and not copied for each.
    pub path_tenant: Option<String>,
    /// The values of the source's key headers (see `decide::header_keys`).
    pub header_keys: Vec<Option<Vec<u8>>>,
    /// Its signature check, for a source with `verify`.
    pub check: Check,
    /// For a source that reads the body, its hash as the chunks pass.
    pub digest: Option<Box<crate::sha256::Sha256>>,
    /// With a seal key: what the seal needs of the headers.
    pub sealing: Option<Box<Sealing>>,
    /// How many stamp headers the client sent (stripped at the headers),
    /// counted in its source's metrics once it is stamped.
    pub spoofed: usize,
    pub body: Vec<u8>,
    /// When its headers came, in wall-clock milliseconds.
    pub started_ms: u64,
    /// When the body must be in.
    pub deadline_ms: u64,
    /// Whether a body callback has come for it: none at all by the
    /// deadline is what Envoy does without allow_on_headers_stop_iteration.
    pub seen_body: bool,
    /// Body bytes seen so far: Envoy buffers every one of them while the
    /// filter holds the request (and `body` keeps them for body keys).
    pub seen_bytes: usize,
    /// What this request counts against the budget now: its own state,
    /// Envoy's buffered bytes and its body's capacity.
    pub charged: usize,
    /// Its signature is checked as the body streams through (`"mode":
    /// "stream"`): its headers went upstream, stamped; its body passes.
    pub streaming: bool,
    /// A streamed request's events rule drops it once its signature
    /// verifies: found with its stamps at its headers, answered at its
    /// verdict.
    pub drops: bool,
    /// A streamed request's last body byte, held back until its signature
    /// is checked (with a declared length, the byte that would complete
    /// the upstream request).
    pub tail: Option<u8>,
}

/// Where a request's signature check stands.
pub enum Check {
    /// The source does not verify.
    Off,
    /// Under way: fed each chunk as it passes.
    Running(verify::Pending),
    /// Failed already at the headers (flag mode goes on for the JSON keys).
    Failed(Reason),
}

impl<K> Held<K> {
    /// Its source, in its own plugin's config (where `source` came from).
    pub fn source(&self) -> Option<&Source> {
        self.plugin.config.sources.get(self.source)
    }

    /// Its tenant: the one its path named, or its source's. (A source
    /// missing from its plugin has none; its request is answered 500, never
    /// stamped.)
    pub fn tenant(&self) -> &str {
        match &self.path_tenant {
            Some(t) => t,
            None => self.source().map_or("", |s| &s.tenant),
        }
    }

    /// A streamed request's deadline as of `now`, when its last chunk came:
    /// idle for max_hold_ms, past max_stream_ms in all, or its average rate
    /// below min_stream_rate once slow_body_ms has passed, whichever comes
    /// first.
    pub fn stream_deadline(&self, now: u64) -> u64 {
        let cfg = &self.plugin.config;
        now.saturating_add(cfg.max_hold_ms)
            .min(self.started_ms.saturating_add(cfg.max_stream_ms))
            .min(self.rate_deadline())
    }

    /// When a streamed body that sends nothing more falls below
    /// min_stream_rate: slow_body_ms after its headers, and a second more
    /// for every min_stream_rate bytes it has sent.
    pub fn rate_deadline(&self) -> u64 {
        let cfg = &self.plugin.config;
        self.credit(cfg.slow_body_ms, cfg.min_stream_rate)
    }

    /// When it falls below `rate` bytes a second on average after a grace
    /// of `grace_ms` (its rate credit: the later, the faster it came).
    pub fn credit(&self, grace_ms: u64, rate: u64) -> u64 {
        let earned = (self.seen_bytes as u64).saturating_mul(1000) / rate.max(1);
        self.started_ms
            .saturating_add(grace_ms)
            .saturating_add(earned)
    }

    /// The bytes held for this request besides the body's buffer.
    pub fn overhead(&self) -> usize {
        let check = match &self.check {
            Check::Running(p) => p.size(),
            _ => 0,
        };
        check
            + std::mem::size_of::<Self>()
            + budget::PER_REQUEST
            + self.path_tenant.as_ref().map_or(0, String::len)
            + self.sealing.as_ref().map_or(0, |s| {
                std::mem::size_of::<Sealing>() + s.method.len() + s.path.len() + s.request_id.len()
            })
            + self
                .digest
                .as_ref()
                .map_or(0, |_| std::mem::size_of::<crate::sha256::Sha256>())
            + self
                .header_keys
                .iter()
                .map(|k| std::mem::size_of::<Option<Vec<u8>>>() + k.as_ref().map_or(0, Vec::len))
                .sum::<usize>()
    }

    /// What it is charged: its own state, every body byte Envoy buffers
    /// while the filter holds it, and its body buffer's capacity.
    pub fn charge(&self) -> usize {
        if self.streaming {
            // Its body passes: Envoy buffers nothing on its behalf.
            return self.overhead();
        }
        self.overhead()
            .saturating_add(self.seen_bytes)
            .saturating_add(self.body.capacity())
    }
}

/// Ids are small integers: the host's context ids, an instance's serials
/// of held requests; none is attacker input. A multiplicative hash is
/// enough, and a fraction of SipHash's cost on every request's create,
/// lookups and delete.
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map keyed by ids (`IdHasher`).
pub type ById<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;
