//! Ordering lanes: opt-in, sink by sink (see docs/keys.md).
//!
//! An ordered sink delivers one lane's hooks one at a time, in commit order.
//! The lane id is derived, not stored, so any upstream can recompute it.

use crate::key::KeySource;
use crate::sha256::{self, Sha256};
use crate::stamps;
use std::borrow::Cow;

/// Keys longer than this are hashed: the SQS MessageGroupId limit.
pub const MAX_LANE_KEY: usize = 128;

/// Domain separation for the lane id hash; bump the version to change it.
const LANE_DOMAIN: &[u8] = b"hookstamp.lane.v1\0";

/// One ordered sink of a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lane {
    /// The sink's index in the source's `sinks` list.
    pub sink: u16,
    /// Where its key comes from; `None` is the keyless lane.
    pub key: Option<KeySource>,
    /// The stamp header names: id, key, group. Made once, at load.
    pub names: [String; 3],
    /// The keyless lane's id, lowercase hex: fixed per source and sink, so
    /// it is computed at load, not per request.
    pub keyless_id: stamps::Hex,
    /// The longest group the sink's broker takes (see `group_max`); a
    /// longer one is stamped hashed.
    pub group_max: Option<usize>,
    /// What a keyed lane's group is namespaced by (`group_scope`).
    pub group_scope: GroupScope,
    /// A keyed lane id's message up to its key, in one SHA-256 block where
    /// it fits (`KeyedBlock`).
    keyed: Option<KeyedBlock>,
}

/// A keyed lane id's message up to its key, `domain || sink || len || id
/// || 0x01`, made at load at the head of a block of zeros: a key that
/// fits after it is hashed in one compression.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KeyedBlock {
    block: [u8; 64],
    at: usize,
}

/// What a keyed lane's group is namespaced by: the sink's `group_scope`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum GroupScope {
    /// `"key"` (the default): the group is the stamped key, whoever's
    /// tenant sent it.
    #[default]
    Key,
    /// `"tenant"`: the group is `k:<tenant>/<stamped key>`, for a broker
    /// queue that tenants share (see `keyed_group`).
    Tenant,
}

/// The values `group_scope` takes, as the configuration writes them.
pub const GROUP_SCOPES: &[(&str, GroupScope)] =
    &[("key", GroupScope::Key), ("tenant", GroupScope::Tenant)];

/// What a tenant-scoped keyed group begins with.
const KEYED_GROUP_PREFIX: &str = "k:";

/// The longest group (in stamped characters) a sink type's broker takes
/// as its grouping or partition key; `None` where it has no limit a group
/// can reach. The stamped group is always printable ASCII (0x21..=0x7E:
/// the stamp encoding), which every one of these takes.
/// - sqs, sns: a FIFO MessageGroupId is 1 to 128 characters of letters,
///   digits and punctuation;
/// - kinesis: a PartitionKey is 1 to 256 Unicode characters;
/// - rabbitmq: a routing key is at most 255 bytes (an AMQP short string);
/// - google_pubsub: an ordering key is at most 1 KiB, kafka and the others
///   take any key: a lane key's stamp (at most 3 × 128 characters) fits.
pub fn group_max(sink_type: &str) -> Option<usize> {
    match sink_type {
        "sqs" | "sns" => Some(128),
        "rabbitmq" => Some(255),
        "kinesis" => Some(256),
        _ => None,
    }
}

/// A lane's group as its sink's broker takes it: the stamped form
/// (`encoded`) where it fits `max`, else `sha256:` + the lowercase hex
/// SHA-256 of the raw group, the concatenation of `raw` (`None` where the
/// group needed no encoding, the keyless group: then of `encoded`): 71
/// characters, which every broker takes.
pub fn group<'a>(
    encoded: Cow<'a, str>,
    raw: Option<&[&[u8]]>,
    max: Option<usize>,
) -> (Cow<'a, str>, bool) {
    match max {
        Some(m) if encoded.len() > m => {
            let mut h = Sha256::new();
            match raw {
                Some(parts) => parts.iter().for_each(|p| h.update(p)),
                None => h.update(encoded.as_bytes()),
            }
            let digest = h.finish();
            (Cow::Owned(format!("sha256:{}", hex::encode(digest))), true)
        }
        _ => (encoded, false),
    }
}

/// A keyed lane's group, from its key after the 128-byte rule (`key`) and
/// that key's stamp (`encoded`); whether it was hashed to fit `max`.
///
/// - `GroupScope::Key`: the stamped key (its hash: of the key).
/// - `GroupScope::Tenant`: `k:<tenant>/<stamped key>` (its hash: of
///   `k:<tenant>/<key>`). A tenant is its own stamp (`names::tenant_ok`:
///   `[A-Za-z0-9_-]`, none of them encoded), so the group is printable
///   ASCII as the stamped key is.
///
/// Why a tenant-scoped group never collides, on a queue every tenant's
/// tenant-scoped sinks share. Its groups are of three forms: a keyed group
/// `K = "k:" t "/" e(k)`, a keyless group `L = t' "/" s` (`keyless_group`)
/// and a hashed one `H(x) = "sha256:" hex(SHA-256(x))`, where `x` is `"k:"
/// t "/" k` or `L`.
/// (a) Equal keys of two tenants: a tenant holds no `/`, so in `K` the
/// tenant is everything between `k:` and the first `/`, and the rest is the
/// stamped key, whose percent-encoding decodes to the one key: `K`
/// determines (t, k). So does `x` (raw bytes, the same cut), and two
/// different `x` hash apart but for a SHA-256 collision. `K` starts with
/// `k`, `H` with `s`: a plain group never equals a hashed one.
/// (b) A keyed group against a keyless one: `L` holds no `:` (neither a
/// tenant nor a source id may, `names`), `K` holds one at its second byte
/// and `H` at its seventh: neither equals any `L`. The keyed `x` holds a
/// `:`, the keyless one does not: their hashes differ too (but for a
/// collision).
pub fn keyed_group<'a>(
    scope: GroupScope,
    tenant: &str,
    key: &[u8],
    encoded: Cow<'a, str>,
    max: Option<usize>,
) -> (Cow<'a, str>, bool) {
    match scope {
        GroupScope::Key => group(encoded, Some(&[key]), max),
        GroupScope::Tenant => {
            let mut g = String::with_capacity(3 + tenant.len() + encoded.len());
            g.push_str(KEYED_GROUP_PREFIX);
            g.push_str(tenant);
            g.push('/');
            g.push_str(&encoded);
            let raw: [&[u8]; 4] = [KEYED_GROUP_PREFIX.as_bytes(), tenant.as_bytes(), b"/", key];
            group(Cow::Owned(g), Some(&raw), max)
        }
    }
}

impl Lane {
    pub fn new(sink: u16, key: Option<KeySource>, source_id: &str) -> Self {
        Lane {
            sink,
            key,
            names: stamps::lane_names(sink),
            keyless_id: stamps::Hex::of(&lane_id(sink, source_id, None)),
            group_max: None,
            group_scope: GroupScope::Key,
            keyed: keyed_block(sink, source_id),
        }
    }

    /// The lane id of `key` (`lane_id`'s, `source_id` the lane's source's).
    pub fn keyed_id(&self, source_id: &str, key: &[u8]) -> [u8; 16] {
        match &self.keyed {
            Some(k) if k.at + key.len() <= sha256::ONE_BLOCK => {
                let mut block = k.block;
                if let Some(at) = block.get_mut(k.at..k.at + key.len()) {
                    at.copy_from_slice(key);
                }
                first16(&sha256::digest_block(block, k.at + key.len()))
            }
            _ => lane_id(self.sink, source_id, Some(key)),
        }
    }
}

/// The block a keyed lane's ids start from (`KeyedBlock`), where its
/// message up to the key leaves room in one.
fn keyed_block(sink: u16, source_id: &str) -> Option<KeyedBlock> {
    let len = (source_id.len() as u16).to_be_bytes();
    let head = [
        LANE_DOMAIN,
        &sink.to_be_bytes(),
        &len,
        source_id.as_bytes(),
        &[1],
    ];
    let at: usize = head.iter().map(|p| p.len()).sum();
    let mut block = [0u8; 64];
    block.get_mut(..at)?.copy_from_slice(&head.concat());
    (at <= sha256::ONE_BLOCK).then_some(KeyedBlock { block, at })
}

/// The first 16 bytes of a digest: an id.
fn first16(digest: &[u8; 32]) -> [u8; 16] {
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

/// The 16-byte lane id: the first 16 bytes of SHA-256 over
/// `"hookstamp.lane.v1" 0x00 || u16be(sink) || u16be(len id) || id ||
/// (0x00 | 0x01 || key)`. `key` is the stamped key (after the 128-byte rule).
pub fn lane_id(sink: u16, source_id: &str, key: Option<&[u8]>) -> [u8; 16] {
    // Source ids are checked to at most 64 bytes, so the length fits.
    let len = (source_id.len() as u16).to_be_bytes();
    id16(
        LANE_DOMAIN,
        &[&sink.to_be_bytes(), &len, source_id.as_bytes()],
        key,
    )
}

/// The first 16 bytes of SHA-256 over `domain || parts... || (0x00 |
/// 0x01 || key)`: the shape of every id hookstamp derives (lanes,
/// affinity), so that an upstream recomputes one the same way.
pub fn id16(domain: &[u8], parts: &[&[u8]], key: Option<&[u8]>) -> [u8; 16] {
    let (mark, key): (&[u8], &[u8]) = match key {
        None => (&[0], &[]),
        Some(k) => (&[1], k),
    };
    let pieces = [domain]
        .into_iter()
        .chain(parts.iter().copied())
        .chain([mark, key]);
    first16(&sha256::digest_joined(pieces))
}

/// The keyless lane's group a sink hands its queue: `<tenant>/<source_id>`,
/// whatever the sink's `group_scope` (a keyed lane's: `keyed_group`).
pub fn keyless_group(tenant: &str, source_id: &str) -> String {
    let mut g = String::with_capacity(tenant.len() + 1 + source_id.len());
    g.push_str(tenant);
    g.push('/');
    g.push_str(source_id);
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_id_in_one_block_is_the_lane_id() {
        // Every source id length a block's head leaves room for, and past
        // it; every key length about the block's edge.
        for id_len in [1, 2, 10, 30, 32, 33, 34, 35, 36, 64] {
            let id = "s".repeat(id_len);
            for sink in [0, 7, 300] {
                let lane = Lane::new(sink, None, &id);
                for key_len in 0..80 {
                    let key: Vec<u8> = (0..key_len).map(|i| (i * 37 + 1) as u8).collect();
                    assert_eq!(
                        lane.keyed_id(&id, &key),
                        lane_id(sink, &id, Some(&key)),
                        "{id_len} {sink} {key_len}"
                    );
                }
            }
        }
    }

    #[test]
    fn groups_fit_their_broker() {
        let fits = Cow::Borrowed("cus%201/%C3%A9");
        assert_eq!(
            group(fits.clone(), Some(&[b"cus 1/\xc3\xa9"]), Some(128)),
            (fits, false)
        );
        let long = "%C3%A9".repeat(22);
        let (g, hashed) = group(
            Cow::Owned(long.clone()),
            Some(&["é".repeat(22).as_bytes()]),
            Some(128),
        );
        assert!(hashed && g.starts_with("sha256:") && g.len() == 71);
        assert_eq!(group(Cow::Owned(long.clone()), None, Some(256)).0, long);
        assert_eq!(group_max("sqs"), Some(128));
        assert_eq!(group_max("kafka"), None);
    }

    #[test]
    fn tenant_scoped_groups() {
        let enc = || Cow::Borrowed("cus%201");
        let g = |scope, max| keyed_group(scope, "acme", b"cus 1", enc(), max);
        assert_eq!(g(GroupScope::Key, Some(128)), (enc(), false));
        assert_eq!(g(GroupScope::Tenant, Some(128)).0, "k:acme/cus%201");
        // 195 characters: hashed for SQS, of `k:<tenant>/<key>` (computed
        // apart with Python's hashlib).
        let (t, k) = ("t".repeat(64), "k".repeat(128));
        let long = |max| keyed_group(GroupScope::Tenant, &t, k.as_bytes(), Cow::Borrowed(&k), max);
        assert_eq!(
            long(Some(128)),
            (
                Cow::Owned(
                    "sha256:f0b8a053fe7bcda9695e88e19b1d0c798d1f4f4c2d34ca572345ebb64ffc9567"
                        .to_owned()
                ),
                true
            )
        );
        assert_eq!(long(Some(256)).0.len(), 195);
    }

    #[test]
    fn vectors() {
        assert_eq!(
            stamps::Hex::of(&lane_id(0, "stripe", Some(b"cus_123"))),
            "934b1a67e16c9f5bbe58f8aec60bcfd8"
        );
        assert_eq!(
            stamps::Hex::of(&lane_id(1, "stripe", None)),
            "3bff39f3de54769d9fb6c5ffaecf4db8"
        );
        assert_eq!(
            Lane::new(1, None, "stripe").keyless_id,
            "3bff39f3de54769d9fb6c5ffaecf4db8"
        );
    }
}
