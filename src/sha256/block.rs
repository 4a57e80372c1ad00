//! SHA-256's compression, sixteen rounds written out, and the hash core
//! around it that RustCrypto's `digest` and `hmac` drive (their buffering,
//! padding and HMAC are theirs). The .wasm's SHA-256: Envoy's V8 compiles
//! sha2's portable code (the state in four-lane arrays, each Σ's rotations
//! of one value) to some 3 400 instructions a block; this takes a verified
//! 1 KiB body's 18 blocks some 10 000 instructions fewer (BENCHMARKS.md).
//! Natively ring's assembly is used; the tests hold this to sha2 on any
//! input, and to Python's through Envoy.

use hmac::digest::block_buffer::Eager;
use hmac::digest::core_api::{
    AlgorithmName, Block, BlockSizeUser, Buffer, BufferKindUser, CoreWrapper, FixedOutputCore,
    OutputSizeUser, UpdateCore,
};
use hmac::digest::typenum::{U32, U64};
use hmac::digest::{HashMarker, Output, Reset};

/// The round constants (FIPS 180-4, 4.2.2).
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// The initial hash value (FIPS 180-4, 5.3.3).
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// Σ1 (FIPS 180-4, 4.1.2): `e` rotated by 6, 11 and 25, as
/// ((e ⋙ 14 ⊕ e) ⋙ 5 ⊕ e) ⋙ 6, each rotation of the last result: V8 copies
/// a value for each rotation of `e` itself, and this form needs one copy.
#[inline(always)]
fn big_sigma1(e: u32) -> u32 {
    (((e.rotate_right(14) ^ e).rotate_right(5)) ^ e).rotate_right(6)
}

/// Σ0: `a` rotated by 2, 13 and 22, in the same form.
#[inline(always)]
fn big_sigma0(a: u32) -> u32 {
    (((a.rotate_right(9) ^ a).rotate_right(11)) ^ a).rotate_right(2)
}

/// One round; it gives a ⊕ b. The eight working variables are not moved:
/// each round's caller names them one place further on, so only `d` and
/// `h` change. Maj(a, b, c) is b ⊕ ((a ⊕ b) ∧ (b ⊕ c)), and this round's
/// a ⊕ b is the next one's b ⊕ c (`$bc`): three operations, not four.
macro_rules! round {
    ($a:ident, $b:ident, $c:ident, $d:ident, $e:ident, $f:ident, $g:ident, $h:ident, $bc:ident, $wk:expr) => {{
        let t1 = $h
            .wrapping_add(big_sigma1($e))
            .wrapping_add($g ^ ($e & ($f ^ $g)))
            .wrapping_add($wk);
        $d = $d.wrapping_add(t1);
        let ab = $a ^ $b;
        $h = t1
            .wrapping_add(big_sigma0($a))
            .wrapping_add($b ^ (ab & $bc));
        ab
    }};
}

/// Eight rounds over the state `$s`; `$wk(j)` gives the j-th one's word
/// plus its constant. After eight, every name is back in its place.
macro_rules! eight {
    ($s:ident, $wk:ident, $o:expr) => {
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = $s;
        let mut bc = b ^ c;
        bc = round!(a, b, c, d, e, f, g, h, bc, $wk($o));
        bc = round!(h, a, b, c, d, e, f, g, bc, $wk($o + 1));
        bc = round!(g, h, a, b, c, d, e, f, bc, $wk($o + 2));
        bc = round!(f, g, h, a, b, c, d, e, bc, $wk($o + 3));
        bc = round!(e, f, g, h, a, b, c, d, bc, $wk($o + 4));
        bc = round!(d, e, f, g, h, a, b, c, bc, $wk($o + 5));
        bc = round!(c, d, e, f, g, h, a, b, bc, $wk($o + 6));
        round!(b, c, d, e, f, g, h, a, bc, $wk($o + 7));
        $s = [a, b, c, d, e, f, g, h];
    };
}

/// Four message words, a vector's lanes: WebAssembly's 128-bit vectors in
/// the .wasm (built with `simd128`), plain arrays elsewhere, so that the
/// native tests run the same schedule.
#[derive(Clone, Copy)]
struct X4(
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))] v128,
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))] [u32; 4],
);

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
use core::arch::wasm32::*;

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
impl X4 {
    /// Words `4i..4i+4` of the block, big-endian.
    #[inline(always)]
    fn load(b: &[u8; 64], i: usize) -> X4 {
        // One vector load in place: a copy of the words first is a call in
        // V8 (its `memory.copy` leaves the VM), and the bytes one by one
        // are sixteen lane loads.
        let at = 16 * (i & 3);
        // SAFETY: `at + 16 <= 64`, so the load reads the block's own bytes;
        // `v128_load` takes any alignment.
        let v = unsafe { v128_load(b.as_ptr().add(at).cast::<v128>()) };
        X4(i8x16_shuffle::<
            3,
            2,
            1,
            0,
            7,
            6,
            5,
            4,
            11,
            10,
            9,
            8,
            15,
            14,
            13,
            12,
        >(v, v))
    }
    #[inline(always)]
    fn add(self, o: X4) -> X4 {
        X4(u32x4_add(self.0, o.0))
    }
    #[inline(always)]
    fn xor(self, o: X4) -> X4 {
        X4(v128_xor(self.0, o.0))
    }
    #[inline(always)]
    fn shr(self, n: u32) -> X4 {
        X4(u32x4_shr(self.0, n))
    }
    #[inline(always)]
    fn rotr(self, n: u32) -> X4 {
        X4(v128_or(u32x4_shr(self.0, n), u32x4_shl(self.0, 32 - n)))
    }
    /// Lanes 1, 2, 3 of `self` and lane 0 of `next`.
    #[inline(always)]
    fn then(self, next: X4) -> X4 {
        X4(i32x4_shuffle::<1, 2, 3, 4>(self.0, next.0))
    }
    /// Lanes 0, 1, 0, 1.
    #[inline(always)]
    fn low2(self) -> X4 {
        X4(i32x4_shuffle::<0, 1, 0, 1>(self.0, self.0))
    }
    /// Lanes 2, 3, 2, 3.
    #[inline(always)]
    fn high2(self) -> X4 {
        X4(i32x4_shuffle::<2, 3, 2, 3>(self.0, self.0))
    }
    /// Lanes 0 and 1 of `self`, 2 and 3 of `high`.
    #[inline(always)]
    fn with_high(self, high: X4) -> X4 {
        X4(i32x4_shuffle::<0, 1, 6, 7>(self.0, high.0))
    }
    /// Four round constants, `K[i..i + 4]`.
    const fn k4(i: usize) -> X4 {
        X4(u32x4(K[i], K[i + 1], K[i + 2], K[i + 3]))
    }
    /// The four words plus four round constants.
    #[inline(always)]
    fn plus(self, k: X4) -> [u32; 4] {
        let v = u32x4_add(self.0, k.0);
        [
            u32x4_extract_lane::<0>(v),
            u32x4_extract_lane::<1>(v),
            u32x4_extract_lane::<2>(v),
            u32x4_extract_lane::<3>(v),
        ]
    }
}

#[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
impl X4 {
    #[inline(always)]
    fn map(self, f: impl Fn(u32) -> u32) -> X4 {
        X4(self.0.map(f))
    }
    #[inline(always)]
    fn zip(self, o: X4, f: impl Fn(u32, u32) -> u32) -> X4 {
        let [a, b, c, d] = self.0;
        let [e, g, h, i] = o.0;
        X4([f(a, e), f(b, g), f(c, h), f(d, i)])
    }
    fn load(b: &[u8; 64], i: usize) -> X4 {
        let w = |j: usize| u32::from_be_bytes([b[j], b[j + 1], b[j + 2], b[j + 3]]);
        X4([w(16 * i), w(16 * i + 4), w(16 * i + 8), w(16 * i + 12)])
    }
    fn add(self, o: X4) -> X4 {
        self.zip(o, u32::wrapping_add)
    }
    fn xor(self, o: X4) -> X4 {
        self.zip(o, |a, b| a ^ b)
    }
    fn shr(self, n: u32) -> X4 {
        self.map(|a| a >> n)
    }
    fn rotr(self, n: u32) -> X4 {
        self.map(|a| a.rotate_right(n))
    }
    fn then(self, next: X4) -> X4 {
        let ([_, a, b, c], [d, ..]) = (self.0, next.0);
        X4([a, b, c, d])
    }
    fn low2(self) -> X4 {
        let [a, b, ..] = self.0;
        X4([a, b, a, b])
    }
    fn high2(self) -> X4 {
        let [.., c, d] = self.0;
        X4([c, d, c, d])
    }
    fn with_high(self, high: X4) -> X4 {
        let ([a, b, ..], [.., c, d]) = (self.0, high.0);
        X4([a, b, c, d])
    }
    const fn k4(i: usize) -> X4 {
        X4([K[i], K[i + 1], K[i + 2], K[i + 3]])
    }
    fn plus(self, k: X4) -> [u32; 4] {
        self.add(k).0
    }
}

/// The round constants four a vector, made at compile time: a load each.
const KX4: [[X4; 4]; 4] = [row(0), row(16), row(32), row(48)];

/// Sixteen rounds' constants from `at`.
const fn row(at: usize) -> [X4; 4] {
    [X4::k4(at), X4::k4(at + 4), X4::k4(at + 8), X4::k4(at + 12)]
}

/// The message schedule's next four words, w[t..t+4], from w[t-16..],
/// w[t-12..], w[t-8..] and w[t-4..]. σ1 needs w[t-2], so the four come
/// two at a time.
#[inline(always)]
fn next4(w0: X4, w1: X4, w2: X4, w3: X4) -> X4 {
    let w15 = w0.then(w1);
    let s0 = w15.rotr(7).xor(w15.rotr(18)).xor(w15.shr(3));
    let x = w0.add(w2.then(w3)).add(s0);
    let s1 = |v: X4| v.rotr(17).xor(v.rotr(19)).xor(v.shr(10));
    let low = x.add(s1(w3.high2()));
    let high = x.add(s1(low.low2()));
    low.with_high(high)
}

/// Sixteen rounds with the constants `k`, the schedule's last sixteen
/// words in `w` (after the first sixteen rounds, `next` replaces them with
/// the next sixteen first).
#[inline(always)]
fn sixteen(state: &mut [u32; 8], w: &mut [X4; 4], k: &[X4; 4], next: bool) {
    if next {
        w[0] = next4(w[0], w[1], w[2], w[3]);
        w[1] = next4(w[1], w[2], w[3], w[0]);
        w[2] = next4(w[2], w[3], w[0], w[1]);
        w[3] = next4(w[3], w[0], w[1], w[2]);
    }
    let wk = [
        w[0].plus(k[0]),
        w[1].plus(k[1]),
        w[2].plus(k[2]),
        w[3].plus(k[3]),
    ];
    let wk = |j: usize| wk[j / 4][j % 4];
    let mut s = *state;
    eight!(s, wk, 0);
    eight!(s, wk, 8);
    *state = s;
}

/// SHA-256's compression of one 64-byte block into `state`. The words
/// are loaded, and the state added back, without a loop: at opt-level "s"
/// rustc kept a loop's words in memory, and in V8 that cost half as much
/// again (the state's eight adds as a loop: (v) +1 163). The rounds loop over
/// four groups of sixteen: written out whole, they were 5.7 KiB more of
/// .wasm for some 100 instructions a block.
pub fn compress(state: &mut [u32; 8], b: &[u8; 64]) {
    let mut w = [
        X4::load(b, 0),
        X4::load(b, 1),
        X4::load(b, 2),
        X4::load(b, 3),
    ];
    let mut s = *state;
    for (i, k) in KX4.iter().enumerate() {
        sixteen(&mut s, &mut w, k, i > 0);
    }
    let [a, b, c, d, e, f, g, h] = s;
    let [sa, sb, sc, sd, se, sf, sg, sh] = state;
    *sa = sa.wrapping_add(a);
    *sb = sb.wrapping_add(b);
    *sc = sc.wrapping_add(c);
    *sd = sd.wrapping_add(d);
    *se = se.wrapping_add(e);
    *sf = sf.wrapping_add(f);
    *sg = sg.wrapping_add(g);
    *sh = sh.wrapping_add(h);
}

/// The SHA-256 of a message padded into one block.
pub fn digest_block(b: &[u8; 64]) -> [u8; 32] {
    let mut state = IV;
    compress(&mut state, b);
    let mut out = [0u8; 32];
    state_bytes(&state, &mut out);
    out
}

/// The state's words, big-endian, into a digest's 32 bytes. A byte at a
/// time: a four-byte `copy_from_slice` is a call in V8 (`memory.copy`
/// leaves the VM), eight a digest.
fn state_bytes(state: &[u32; 8], out: &mut [u8]) {
    for (o, v) in out.chunks_exact_mut(4).zip(state) {
        let [b0, b1, b2, b3] = v.to_be_bytes();
        o[0] = b0;
        o[1] = b1;
        o[2] = b2;
        o[3] = b3;
    }
}

/// The hash core: the state and the blocks compressed so far; `digest`'s
/// wrapper buffers the bytes between blocks.
#[derive(Clone)]
pub struct Core {
    state: [u32; 8],
    blocks: u64,
}

/// SHA-256 over `Core`, with `digest`'s `Digest` and `hmac`'s `Hmac`.
pub type Sha256 = CoreWrapper<Core>;

impl Default for Core {
    fn default() -> Core {
        Core {
            state: IV,
            blocks: 0,
        }
    }
}

impl HashMarker for Core {}

impl BlockSizeUser for Core {
    type BlockSize = U64;
}

impl BufferKindUser for Core {
    type BufferKind = Eager;
}

impl OutputSizeUser for Core {
    type OutputSize = U32;
}

impl UpdateCore for Core {
    fn update_blocks(&mut self, blocks: &[Block<Self>]) {
        self.blocks = self.blocks.wrapping_add(blocks.len() as u64);
        for b in blocks {
            compress(&mut self.state, b.as_ref());
        }
    }
}

impl FixedOutputCore for Core {
    fn finalize_fixed_core(&mut self, buffer: &mut Buffer<Self>, out: &mut Output<Self>) {
        let bits = self
            .blocks
            .wrapping_mul(512)
            .wrapping_add(8 * buffer.get_pos() as u64);
        buffer.len64_padding_be(bits, |b| compress(&mut self.state, b.as_ref()));
        state_bytes(&self.state, out);
    }
}

impl Reset for Core {
    fn reset(&mut self) {
        *self = Core::default();
    }
}

impl AlgorithmName for Core {
    fn write_alg_name(f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Sha256")
    }
}
