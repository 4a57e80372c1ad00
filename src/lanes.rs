//! Ordering lanes: opt-in, sink by sink (see docs/keys.md).
//!
//! An ordered sink delivers one lane's hooks one at a time, in commit order.
//! The lane id is derived, not stored, so any upstream can recompute it.

use crate::key::KeySource;
use crate::stamps;
use sha2::{Digest, Sha256};
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
    pub keyless_id: String,
    /// The longest group the sink's broker takes (see `group_max`); a
    /// longer one is stamped hashed.
    pub group_max: Option<usize>,
}

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
/// SHA-256 of the raw key (71 characters, which every broker takes); `raw`
/// `None` where the group needed no encoding (the keyless group).
pub fn group<'a>(
    encoded: Cow<'a, str>,
    raw: Option<&[u8]>,
    max: Option<usize>,
) -> (Cow<'a, str>, bool) {
    match max {
        Some(m) if encoded.len() > m => {
            let digest = Sha256::digest(raw.unwrap_or(encoded.as_bytes()));
            (Cow::Owned(format!("sha256:{}", hex::encode(digest))), true)
        }
        _ => (encoded, false),
    }
}

impl Lane {
    pub fn new(sink: u16, key: Option<KeySource>, source_id: &str) -> Self {
        Lane {
            sink,
            key,
            names: stamps::lane_names(sink),
            keyless_id: hex(&lane_id(sink, source_id, None)),
            group_max: None,
        }
    }
}

/// A lane id in lowercase hex, as it is stamped.
pub fn hex(id: &[u8; 16]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (pair, &b) in out.chunks_exact_mut(2).zip(id) {
        pair.copy_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xF)]]);
    }
    stamps::ascii(out.to_vec())
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
    let mut h = Sha256::new();
    h.update(domain);
    for p in parts {
        h.update(p);
    }
    match key {
        None => h.update([0u8]),
        Some(k) => {
            h.update([1u8]);
            h.update(k);
        }
    }
    let digest = h.finalize();
    let mut id = [0u8; 16];
    id.copy_from_slice(&digest[..16]);
    id
}

/// The keyless lane's group a sink hands its queue: `<tenant>/<source_id>`
/// (a keyed lane's group is its stamped key).
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
    fn groups_fit_their_broker() {
        let fits = Cow::Borrowed("cus%201/%C3%A9");
        assert_eq!(
            group(fits.clone(), Some(b"cus 1/\xc3\xa9"), Some(128)),
            (fits, false)
        );
        let long = "%C3%A9".repeat(22);
        let (g, hashed) = group(
            Cow::Owned(long.clone()),
            Some(&"é".repeat(22).into_bytes()),
            Some(128),
        );
        assert!(hashed && g.starts_with("sha256:") && g.len() == 71);
        assert_eq!(group(Cow::Owned(long.clone()), None, Some(256)).0, long);
        assert_eq!(group_max("sqs"), Some(128));
        assert_eq!(group_max("kafka"), None);
    }

    #[test]
    fn vectors() {
        assert_eq!(
            hex(&lane_id(0, "stripe", Some(b"cus_123"))),
            "934b1a67e16c9f5bbe58f8aec60bcfd8"
        );
        assert_eq!(
            hex(&lane_id(1, "stripe", None)),
            "3bff39f3de54769d9fb6c5ffaecf4db8"
        );
        assert_eq!(
            Lane::new(1, None, "stripe").keyless_id,
            "3bff39f3de54769d9fb6c5ffaecf4db8"
        );
    }
}
