//! The affinity stamp: one key per hook that a consistent-hash load
//! balancer (Envoy's MAGLEV or RING_HASH, a route `hash_policy` on
//! `x-hookstamp-affinity`) maps to one queue node, so that a lane's hooks,
//! and a provider's retries of one event, are committed on one node.

use crate::lanes;
use crate::stamps::Hex;

/// Domain separation for the affinity hash; bump the version to change it.
const AFFINITY_DOMAIN: &[u8] = b"hookstamp.affinity.v1\0";

/// What a source's affinity stamp carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Affinity {
    /// The lane of this ordered sink (its index among the source's sinks),
    /// with the tenant (`lane_hex`): every hook of a tenant's lane on one
    /// node.
    Lane(u16),
    /// The hash of (tenant, source, dedupe key): a provider's retries of
    /// one event on the node that saw it first; (tenant, source) when the
    /// key is missing.
    Dedupe,
    /// The hash of (tenant, source).
    Source,
}

/// The 16-byte affinity id of (tenant, source, key), stamped as 32
/// lowercase hex: the first 16 bytes of SHA-256 over
/// `"hookstamp.affinity.v1" 0x00 || u16be(len tenant) || tenant ||
/// u16be(len source_id) || source_id || (0x00 | 0x01 || key)`, where `key`
/// is the stamped dedupe key (after the 200-byte rule).
pub fn id(tenant: &str, source_id: &str, key: Option<&[u8]>) -> [u8; 16] {
    // Tenants and source ids are checked to at most 64 bytes.
    let (t, s) = (tenant.len() as u16, source_id.len() as u16);
    let parts: [&[u8]; 4] = [
        &t.to_be_bytes(),
        tenant.as_bytes(),
        &s.to_be_bytes(),
        source_id.as_bytes(),
    ];
    lanes::id16(AFFINITY_DOMAIN, &parts, key)
}

/// Domain separation for a lane's affinity id (v2: the tenant in it).
const LANE_DOMAIN: &[u8] = b"hookstamp.affinity.v2\0";

/// The affinity id of a tenant's lane, stamped as 32 lowercase hex: the
/// first 16 bytes of SHA-256 over `"hookstamp.affinity.v2" 0x00 ||
/// u16be(len tenant) || tenant || 0x01 || lane id` (its 16 bytes). The lane
/// id leaves the tenant out (the queue keys a lane by the tenant beside
/// it), so without the tenant here every tenant's keyless lane of a
/// multi-tenant source would land on one node; with it, tenants spread and
/// each tenant's lane stays on one node.
pub fn lane_hex(tenant: &str, lane_id: &[u8; 16]) -> Hex {
    // Tenants are checked to at most 64 bytes.
    let t = tenant.len() as u16;
    Hex::of(&lanes::id16(
        LANE_DOMAIN,
        &[&t.to_be_bytes(), tenant.as_bytes()],
        Some(lane_id),
    ))
}

/// `id` in lowercase hex, as stamped.
pub fn hex(tenant: &str, source_id: &str, key: Option<&[u8]>) -> Hex {
    Hex::of(&id(tenant, source_id, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors() {
        assert_eq!(
            hex("acme", "stripe", Some(b"evt_1")),
            "89823b7f06150c39bec55fc680364012"
        );
        assert_eq!(
            hex("acme", "stripe", None),
            "8006f687106fbf9ba9b308d41e0b5d73"
        );
        // A lane's affinity: docs/fleet.md's vectors, computed apart.
        let cus = lanes::lane_id(0, "stripe", Some(b"cus_123"));
        assert_eq!(lane_hex("acme", &cus), "45d7e9af9493e9e1a097845c1e77836d");
        assert_eq!(lane_hex("globex", &cus), "f17e76b9691865bc60e38c35b3a2b6a1");
        let keyless = lanes::lane_id(1, "stripe", None);
        assert_eq!(
            lane_hex("acme", &keyless),
            "4ed257dffaed2a3b1c9fa8df82303769"
        );
        assert_eq!(
            lane_hex("globex", &keyless),
            "52f9258c2aa651e3fc7e1d9776ebaa68"
        );
    }
}
