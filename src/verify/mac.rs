//! HMACs keyed once per secret: the key's inner and outer pads hashed into
//! their states at the first request that needs them (`Pads`), so each
//! request after pays for its own blocks only, two compressions fewer per
//! secret (BENCHMARKS.md). A state is as secret as its key: never printed,
//! zeroed when its secret goes.

use super::Algorithm;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac as _};
use std::sync::OnceLock;

/// One HMAC under way.
#[derive(Clone)]
pub(crate) enum Mac {
    Sha1(Hmac<sha1::Sha1>),
    Sha256(crate::sha256::Hmac),
    Sha512(Hmac<sha2::Sha512>),
}

impl Mac {
    /// A fresh HMAC under `key`; `None` for Ed25519 (no HMAC).
    pub(crate) fn new(alg: Algorithm, key: &[u8]) -> Option<Mac> {
        // Any key length is valid for HMAC: these never fail.
        Some(match alg {
            Algorithm::Sha1 => Mac::Sha1(KeyInit::new_from_slice(key).ok()?),
            Algorithm::Sha256 => Mac::Sha256(crate::sha256::Hmac::new(key)?),
            Algorithm::Sha512 => Mac::Sha512(KeyInit::new_from_slice(key).ok()?),
            Algorithm::Ed25519 => return None,
        })
    }

    pub(crate) fn update(&mut self, b: &[u8]) {
        match self {
            Mac::Sha1(m) => m.update(b),
            Mac::Sha256(m) => m.update(b),
            Mac::Sha512(m) => m.update(b),
        }
    }

    pub(crate) fn tag(self) -> Tag {
        match self {
            Mac::Sha1(m) => Tag::of(&m.finalize().into_bytes()),
            Mac::Sha256(m) => Tag::of(&m.finish()),
            Mac::Sha512(m) => Tag::of(&m.finalize().into_bytes()),
        }
    }
}

/// An HMAC's output, up to SHA-512's 64 bytes, kept where it is made (no
/// allocation per secret and request).
pub(crate) struct Tag {
    bytes: [u8; 64],
    len: usize,
}

impl Tag {
    fn of(out: &[u8]) -> Tag {
        let mut bytes = [0; 64];
        let len = out.len().min(64);
        bytes[..len].copy_from_slice(&out[..len]);
        Tag { bytes, len }
    }
}

impl AsRef<[u8]> for Tag {
    fn as_ref(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A secret's keyed HMAC states, one per algorithm a request has asked
/// for (boxed: a secret of a per-tenant list that no request names costs
/// three pointers). Configurations are shared by a worker's requests, and
/// by the module's workers: each state is made once.
#[derive(Clone, Default)]
pub struct Pads {
    sha1: OnceLock<Option<Box<Mac>>>,
    sha256: OnceLock<Option<Box<Mac>>>,
    sha512: OnceLock<Option<Box<Mac>>>,
}

impl Pads {
    /// An HMAC under `key` (the secret's bytes), its pads already hashed:
    /// through `Secret::mac`, which holds the key and its pads together.
    pub(super) fn mac(&self, alg: Algorithm, key: &[u8]) -> Option<Mac> {
        let slot = match alg {
            Algorithm::Sha1 => &self.sha1,
            Algorithm::Sha256 => &self.sha256,
            Algorithm::Sha512 => &self.sha512,
            Algorithm::Ed25519 => return None,
        };
        // Keyed inside the initializer: of two workers' first requests, one
        // keys the state and the other waits for it, so no keyed state is
        // made and dropped unwiped.
        slot.get_or_init(|| Mac::new(alg, key).map(Box::new))
            .as_deref()
            .cloned()
    }

    /// Zeroes each keyed state and frees it.
    fn wipe(&mut self) {
        for slot in [&mut self.sha1, &mut self.sha256, &mut self.sha512] {
            if let Some(Some(m)) = slot.take() {
                wipe(m);
            }
        }
    }
}

/// The states follow from the secret's bytes, which `Secret` compares.
impl PartialEq for Pads {
    fn eq(&self, _: &Pads) -> bool {
        true
    }
}

impl Eq for Pads {}

impl Drop for Pads {
    fn drop(&mut self) {
        self.wipe();
    }
}

/// Overwrites a keyed state with zeros, as writes the compiler keeps, and
/// frees its memory as bytes: zeros are no value of `Mac` (a state may hold
/// references), so it is never read or dropped as one after. Nothing leaks:
/// no part of a `Mac` has a `Drop` of its own (a test holds this).
fn wipe(m: Box<Mac>) {
    let p = zeroed(m);
    // SAFETY: the allocation of a `Box<Mac>`, with the global allocator.
    unsafe { std::alloc::dealloc(p, std::alloc::Layout::new::<Mac>()) };
}

/// The box's memory, zeroed: its bytes, no longer a `Mac`.
fn zeroed(m: Box<Mac>) -> *mut u8 {
    let p = Box::into_raw(m).cast::<u8>();
    for i in 0..std::mem::size_of::<Mac>() {
        // SAFETY: `p + i` is within the box's memory, which is ours.
        unsafe { std::ptr::write_volatile(p.add(i), 0) };
    }
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_keyed_state_is_the_plain_hmac_each_time() {
        for alg in [Algorithm::Sha1, Algorithm::Sha256, Algorithm::Sha512] {
            for key in [&b"k"[..], &[7u8; 200][..]] {
                let pads = Pads::default();
                for _ in 0..2 {
                    let mut m = pads.mac(alg, key).unwrap();
                    m.update(b"the body");
                    let mut plain = Mac::new(alg, key).unwrap();
                    plain.update(b"the body");
                    assert_eq!(m.tag().as_ref(), plain.tag().as_ref(), "{alg:?}");
                }
            }
        }
        assert!(Pads::default().mac(Algorithm::Ed25519, b"k").is_none());
    }

    #[test]
    fn workers_keying_at_once_share_one_state() {
        let pads = std::sync::Arc::new(Pads::default());
        let tags: Vec<Vec<u8>> = (0..4)
            .map(|_| {
                let pads = pads.clone();
                std::thread::spawn(move || {
                    let mut m = pads.mac(Algorithm::Sha256, b"secret").unwrap();
                    m.update(b"the body");
                    m.tag().as_ref().to_vec()
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        let mut plain = Mac::new(Algorithm::Sha256, b"secret").unwrap();
        plain.update(b"the body");
        let want = plain.tag().as_ref().to_vec();
        assert!(tags.iter().all(|t| *t == want));
    }

    #[test]
    fn dropping_the_pads_wipes_each_keyed_state() {
        let mut pads = Pads::default();
        pads.mac(Algorithm::Sha256, b"secret").unwrap();
        pads.wipe();
        assert!(pads.sha256.get().is_none());
    }

    #[test]
    fn a_wiped_state_is_zeros_before_it_is_freed() {
        // `wipe` frees a `Mac` without dropping it: nothing leaks while no
        // part of it has drop glue.
        assert!(!std::mem::needs_drop::<Mac>());
        for alg in [Algorithm::Sha1, Algorithm::Sha256, Algorithm::Sha512] {
            let mut m = Mac::new(alg, b"secret").unwrap();
            m.update(b"part of a body");
            let p = zeroed(Box::new(m));
            // SAFETY: the box's memory, alive until freed below.
            let bytes = unsafe { std::slice::from_raw_parts(p, std::mem::size_of::<Mac>()) };
            assert!(bytes.iter().all(|&b| b == 0), "{alg:?}");
            // SAFETY: as `wipe` frees it.
            unsafe { std::alloc::dealloc(p, std::alloc::Layout::new::<Mac>()) };
        }
    }
}
