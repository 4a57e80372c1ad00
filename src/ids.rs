//! Maps keyed by the host's context ids.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Context ids are small integers the host hands out, not attacker input:
/// a multiplicative hash is enough, and a fraction of SipHash's cost on
/// every request's create, lookups and delete.
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
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A map from context ids.
pub type ById<V> = HashMap<u32, V, BuildHasherDefault<IdHasher>>;
