//! SHA-256 and HMAC-SHA256, the hash of every lane id, capped key, body
//! key, seal and most signatures. Natively (the CLI, the dynamic module)
//! ring's: BoringSSL's assembly, which on a CPU without SHA extensions
//! (many servers' still, and the CPU callgrind emulates) keeps the message
//! schedule in vector registers, a quarter fewer instructions a block than
//! sha2's assembly. Where the CPU has SHA extensions both use them, and
//! ring's costs some 40 ns more a digest, a fraction of a percent of a
//! request in Envoy; without them, a verified 1 KiB body is some 14 000
//! instructions cheaper (BENCHMARKS.md measures both). Choosing per CPU
//! would keep both in the .so, over its ceiling. In the .wasm, `block`'s
//! compression, written for V8, inside RustCrypto's `digest` and `hmac`;
//! the tests hold it, ring's and RustCrypto's sha2 to each other.

pub mod block;

#[cfg(target_arch = "wasm32")]
use hmac::digest::Digest as _;
#[cfg(target_arch = "wasm32")]
use hmac::Mac as _;

/// `update` and `finish` of a hash under way: ring's call that ends it
/// (natively), then RustCrypto's calls that give its output.
macro_rules! under_way {
    ($ring:ident, $($rc:ident).+) => {
        pub fn update(&mut self, b: &[u8]) {
            self.0.update(b);
        }

        pub fn finish(self) -> [u8; 32] {
            #[cfg(not(target_arch = "wasm32"))]
            return bytes32(self.0.$ring().as_ref());
            #[cfg(target_arch = "wasm32")]
            return self.0$(.$rc())+.into();
        }
    };
}

/// A SHA-256 under way.
#[derive(Clone)]
pub struct Sha256(
    #[cfg(not(target_arch = "wasm32"))] ring::digest::Context,
    #[cfg(target_arch = "wasm32")] block::Sha256,
);

impl Default for Sha256 {
    fn default() -> Sha256 {
        Sha256::new()
    }
}

impl Sha256 {
    pub fn new() -> Sha256 {
        #[cfg(not(target_arch = "wasm32"))]
        return Sha256(ring::digest::Context::new(&ring::digest::SHA256));
        #[cfg(target_arch = "wasm32")]
        return Sha256(block::Sha256::new());
    }

    under_way!(finish, finalize);
}

/// The SHA-256 of `b`.
pub fn digest(b: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b);
    h.finish()
}

/// The SHA-256 of `pieces` joined. Natively a short message (a lane id's)
/// is gathered and hashed at once: ring's hash kept under way, and each
/// update to it, cost more than the copy (some 150 instructions a lane
/// id). In the .wasm a copy is a call out of V8: each piece is hashed in
/// turn.
pub fn digest_joined<'p>(pieces: impl Iterator<Item = &'p [u8]> + Clone) -> [u8; 32] {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let mut room = [0u8; 192];
        let mut len = 0;
        let fits = pieces
            .clone()
            .all(|p| match room.get_mut(len..len + p.len()) {
                Some(at) => {
                    at.copy_from_slice(p);
                    len += p.len();
                    true
                }
                None => false,
            });
        if fits {
            return digest(&room[..len]);
        }
    }
    let mut h = Sha256::new();
    pieces.for_each(|p| h.update(p));
    h.finish()
}

/// The most a message hashed in one block holds: its 64 bytes less the
/// padding's `0x80` and its 8-byte length.
pub const ONE_BLOCK: usize = 55;

/// The SHA-256 of the first `len` bytes of `block` (at most `ONE_BLOCK`),
/// the rest of it zeros: one compression, with no buffering between
/// pieces (in the .wasm each piece was a copy, a call out of V8).
pub fn digest_block(block: [u8; 64], len: usize) -> [u8; 32] {
    #[cfg(not(target_arch = "wasm32"))]
    return digest(block.get(..len).unwrap_or(&block));
    #[cfg(target_arch = "wasm32")]
    return block::digest_block(&padded(block, len));
}

/// `block`'s first `len` bytes (at most `ONE_BLOCK`, zeros after them)
/// padded as SHA-256 pads a message that fits one block.
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
fn padded(mut block: [u8; 64], len: usize) -> [u8; 64] {
    if let Some(b) = block.get_mut(len) {
        *b = 0x80;
    }
    let bits = (len as u64).wrapping_mul(8).to_be_bytes();
    for (b, v) in block[56..].iter_mut().zip(bits) {
        *b = v;
    }
    block
}

/// An HMAC-SHA256 under way: its key's pads are hashed when it is made,
/// so a clone of a fresh one is a keyed state (`verify::mac::Pads`).
#[derive(Clone)]
pub struct Hmac(
    #[cfg(not(target_arch = "wasm32"))] ring::hmac::Context,
    #[cfg(target_arch = "wasm32")] hmac::Hmac<block::Sha256>,
);

impl Hmac {
    /// Any key length is valid for HMAC: never `None`.
    pub fn new(key: &[u8]) -> Option<Hmac> {
        #[cfg(not(target_arch = "wasm32"))]
        return Some(Hmac(ring::hmac::Context::with_key(&ring::hmac::Key::new(
            ring::hmac::HMAC_SHA256,
            key,
        ))));
        #[cfg(target_arch = "wasm32")]
        return hmac::Hmac::new_from_slice(key).ok().map(Hmac);
    }

    under_way!(sign, finalize.into_bytes);
}

/// ring's output of SHA-256, which is 32 bytes.
#[cfg(not(target_arch = "wasm32"))]
fn bytes32(out: &[u8]) -> [u8; 32] {
    let mut b = [0; 32];
    b.copy_from_slice(&out[..32]);
    b
}

#[cfg(test)]
mod tests {
    use super::*;
    use hmac::Mac as _;
    use proptest::prelude::*;
    use sha2::Digest as _;

    #[test]
    fn a_message_in_one_block_hashes_as_sha256() {
        for len in 0..=ONE_BLOCK {
            let mut block = [0u8; 64];
            for (i, b) in block[..len].iter_mut().enumerate() {
                *b = (i * 29 + 3) as u8;
            }
            let want: [u8; 32] = sha2::Sha256::digest(&block[..len]).into();
            assert_eq!(block::digest_block(&padded(block, len)), want, "{len}");
            assert_eq!(digest_block(block, len), want, "{len}");
        }
    }

    fn hex32(s: &str) -> [u8; 32] {
        let mut out = [0; 32];
        hex::decode_to_slice(s, &mut out).unwrap();
        out
    }

    #[test]
    fn known_digests() {
        // FIPS 180-2's examples: one block, two blocks, and a million bytes
        // fed in uneven pieces across block boundaries.
        assert_eq!(
            digest(b"abc"),
            hex32("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            digest(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            hex32("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        );
        let mut h = Sha256::default();
        let a = [b'a'; 997];
        let mut left = 1_000_000;
        while left > 0 {
            let n = left.min(a.len());
            h.update(&a[..n]);
            left -= n;
        }
        assert_eq!(
            h.finish(),
            hex32("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        );
    }

    #[test]
    fn the_wasms_compression_known_digests() {
        // The same examples through `block`, and the empty message.
        let d = |b: &[u8]| -> [u8; 32] { block::Sha256::digest(b).into() };
        assert_eq!(
            d(b""),
            hex32("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        );
        assert_eq!(
            d(b"abc"),
            hex32("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        );
        assert_eq!(
            d(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            hex32("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        );
        assert_eq!(
            d(&[b'a'; 1_000_000]),
            hex32("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        );
    }

    #[test]
    fn known_hmacs() {
        // RFC 4231's test cases 1, 2 and 6 (a key longer than a block).
        let mut m = Hmac::new(&[0x0b; 20]).unwrap();
        m.update(b"Hi There");
        assert_eq!(
            m.finish(),
            hex32("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        );
        let mut m = Hmac::new(b"Jefe").unwrap();
        m.update(b"what do ya want ");
        let keyed = m.clone();
        m.update(b"for nothing?");
        assert_eq!(
            m.finish(),
            hex32("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        let mut again = keyed;
        again.update(b"for nothing?");
        assert_eq!(
            again.finish(),
            hex32("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        let mut m = Hmac::new(&[0xaa; 131]).unwrap();
        m.update(b"Test Using Larger Than Block-Size Key - Hash Key First");
        assert_eq!(
            m.finish(),
            hex32("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54")
        );
    }

    proptest! {
        /// The pieces joined hash as the whole, gathered (a short message)
        /// or not (one longer than the room).
        #[test]
        fn joined_is_the_whole(
            data in proptest::collection::vec(any::<u8>(), 0..400),
            cuts in proptest::collection::vec(0usize..400, 0..8),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let ends = cuts.iter().copied().chain([data.len()]);
            let starts = [0].into_iter().chain(cuts.iter().copied());
            let pieces: Vec<&[u8]> = starts.zip(ends).map(|(a, b)| &data[a..b]).collect();
            let whole = sha2::Sha256::digest(&data);
            prop_assert_eq!(&digest_joined(pieces.iter().copied())[..], &whole[..]);
        }

        /// Natively ring's, and the .wasm's (`block`), held to RustCrypto's
        /// sha2 on any key, message and cut into pieces.
        #[test]
        fn agrees_with_rustcrypto(
            key in proptest::collection::vec(any::<u8>(), 0..200),
            data in proptest::collection::vec(any::<u8>(), 0..700),
            cuts in proptest::collection::vec(0usize..700, 0..6),
            cuts2 in proptest::collection::vec(0usize..700, 0..6),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(data.len())).collect();
            cuts.sort_unstable();
            let (mut h, mut m) = (Sha256::new(), Hmac::new(&key).unwrap());
            let mut at = 0;
            for c in cuts.into_iter().chain([data.len()]) {
                h.update(&data[at..c]);
                m.update(&data[at..c]);
                at = c;
            }
            let keyed = hmac::Hmac::<sha2::Sha256>::new_from_slice(&key)
                .unwrap()
                .chain_update(&data)
                .finalize()
                .into_bytes();
            let digest = sha2::Sha256::digest(&data);
            prop_assert_eq!(&h.finish()[..], &digest[..]);
            prop_assert_eq!(&m.finish()[..], &keyed[..]);
            // The .wasm's: `block`'s compression in digest's and hmac's
            // wrappers, fed the same pieces.
            let (mut h, mut m) = (block::Sha256::new(), hmac::Hmac::<block::Sha256>::new_from_slice(&key).unwrap());
            let mut at = 0;
            for c in cuts2.into_iter().chain([data.len()]) {
                let c = c.min(data.len()).max(at);
                h.update(&data[at..c]);
                m.update(&data[at..c]);
                at = c;
            }
            prop_assert_eq!(&h.finalize()[..], &digest[..]);
            prop_assert_eq!(&m.finalize().into_bytes()[..], &keyed[..]);
        }
    }
}
