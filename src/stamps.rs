//! The stamp headers: the contract with the upstream queue.

use std::borrow::Cow;
use std::cell::Cell;

/// Every request header with this prefix is removed before anything else.
pub const PREFIX: &str = "x-hookstamp-";

pub const SOURCE: &str = "x-hookstamp-source";
pub const TENANT: &str = "x-hookstamp-tenant";
/// On sources with `verify` only: `true`, or `false` (flag mode).
pub const VERIFIED: &str = "x-hookstamp-verified";
/// Sources with an event type (their own, or their preset's): what the
/// event is, after the tenant and verified stamps.
pub const EVENT_TYPE: &str = "x-hookstamp-event-type";
pub const DEDUPE_KEY: &str = "x-hookstamp-dedupe-key";
pub const DEDUPE_TTL_MS: &str = "x-hookstamp-dedupe-ttl-ms";
pub const IDEMPOTENCY_KEY: &str = "x-hookstamp-idempotency-key";
/// With `"affinity": true`: the key a consistent-hash load balancer maps
/// to one queue node (see `affinity`).
pub const AFFINITY: &str = "x-hookstamp-affinity";

/// Whether a header name is in the stamp namespace: any casing, and `_`
/// read as `-` (gunicorn and others fold `x_hookstamp_dedupe_key` into
/// `X-Hookstamp-Dedupe-Key` for the application).
#[inline(always)]
pub fn is_stamp_header<N: AsRef<[u8]> + ?Sized>(name: &N) -> bool {
    let n = name.as_ref();
    // Nearly every name fails at its length or its first three bytes
    // (`x-h`), here, in the caller's loop.
    n.len() >= PREFIX.len() && n[0] | 0x20 == b'x' && n[2] | 0x20 == b'h' && in_namespace(n)
}

fn in_namespace(n: &[u8]) -> bool {
    n.iter().zip(PREFIX.as_bytes()).all(|(&a, &b)| {
        let a = if a == b'_' { b'-' } else { a };
        a.eq_ignore_ascii_case(&b)
    })
}

/// The three header names of ordered sink `i`: id, key, group.
pub fn lane_names(i: u16) -> [String; 3] {
    [
        format!("x-hookstamp-lane-{i}"),
        format!("x-hookstamp-lane-{i}-key"),
        format!("x-hookstamp-lane-{i}-group"),
    ]
}

fn safe(b: u8) -> bool {
    (0x21..=0x7E).contains(&b) && b != b'%'
}

/// Percent-encodes a value so any key bytes fit in a header: bytes
/// 0x21..=0x7E other than `%` stay, every other byte becomes `%XX`.
/// Most keys need nothing encoded, and are borrowed, not copied.
pub fn encode(raw: &[u8]) -> Cow<'_, str> {
    if raw.iter().all(|&b| safe(b)) {
        // SAFETY: every safe byte is ASCII (0x21..=0x7E), so `raw` is UTF-8;
        // checking it again would cost as much as the loop above, on every
        // stamp of every request.
        return Cow::Borrowed(unsafe { std::str::from_utf8_unchecked(raw) });
    }
    let mut out = Vec::with_capacity(raw.len() + 8);
    encode_into(&mut out, raw);
    Cow::Owned(ascii(out))
}

/// `encode` of a string: one pass, no re-validation of what is already
/// text where nothing needs encoding.
pub fn encode_str(s: &str) -> Cow<'_, str> {
    if s.bytes().all(safe) {
        Cow::Borrowed(s)
    } else {
        encode(s.as_bytes())
    }
}

/// Appends `encode(raw)` to `out`: the encoding is byte by byte, so the
/// encoding of a concatenation is the concatenation of the encodings.
fn encode_into(out: &mut Vec<u8>, raw: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    // The bytes before the first to encode in one copy (nearly every key
    // is all of them), not a push each.
    let plain = raw.iter().position(|&b| !safe(b)).unwrap_or(raw.len());
    let (plain, rest) = raw.split_at(plain);
    out.extend_from_slice(plain);
    for &b in rest {
        if safe(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xF)]]);
        }
    }
}

/// The encodings of `parts` joined by `:`, as the idempotency key joins
/// its tenant, source and key: each part encoded in turn is the encoding
/// of the joined key, with no joined copy to encode.
pub fn encode_joined(parts: &[&[u8]]) -> String {
    // Room for a usual key's; a longer one grows it.
    let mut out = Vec::with_capacity(64);
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            out.push(b':');
        }
        encode_into(&mut out, p);
    }
    ascii(out)
}

/// Bytes written by `encode_into` (and `:`) as a String, not validated
/// again: an encoding is ASCII by construction.
fn ascii(bytes: Vec<u8>) -> String {
    debug_assert!(bytes.is_ascii());
    // SAFETY: `encode_into` writes safe bytes (0x21..=0x7E), `%` and hex
    // digits, and `encode_joined` adds `:`: all ASCII, so UTF-8.
    unsafe { String::from_utf8_unchecked(bytes) }
}

/// `encode` of an owned string, which is kept when nothing needs encoding.
pub fn encode_string(s: String) -> String {
    if s.bytes().all(safe) {
        return s;
    }
    encode(s.as_bytes()).into_owned()
}

/// `encode`, keeping the lifetime of a borrowed key.
pub fn encode_key<'a>(key: &Cow<'a, [u8]>) -> Cow<'a, str> {
    match key {
        Cow::Borrowed(b) => encode(b),
        Cow::Owned(v) => Cow::Owned(encode(v).into_owned()),
    }
}

/// A header the filter adds: its name and value.
pub type Stamp<'a> = (&'a str, Value<'a>);

thread_local! {
    /// The worker's stamp list, emptied, between its requests, and the
    /// allocation of a stamp's text that the last request built (its
    /// idempotency key): `room`, `recycle`. None a request.
    static SPARE: Cell<Option<(Vec<Stamp<'static>>, String)>> = const { Cell::new(None) };
}

/// An empty stamp list with room for `n`, and an empty string for a text
/// a stamp builds: the worker's spares (`recycle`), or new ones.
pub fn room<'a>(n: usize) -> (Vec<Stamp<'a>>, String) {
    let spare = SPARE.try_with(Cell::take).ok().flatten();
    let (mut list, text) =
        spare.map_or_else(Default::default, |(l, t)| (crate::pairs::relabel(l), t));
    list.reserve(n);
    (list, text)
}

/// Keeps a request's stamp list, emptied, and the first text it built
/// where that is larger than `text` (the room it was given), as the
/// worker's spares.
pub fn recycle(mut list: Vec<Stamp<'_>>, mut text: String) {
    let built = list.iter_mut().find_map(|(_, v)| match v {
        Value::Text(Cow::Owned(t)) => Some(std::mem::take(t)),
        _ => None,
    });
    if let Some(t) = built.filter(|t| t.capacity() > text.capacity()) {
        text = t;
    }
    text.clear();
    let _ = SPARE.try_with(|s| s.set(Some((crate::pairs::relabel(list), text))));
}

/// A stamp's value: text, borrowed from the config or the request where it
/// can be, or an id derived for the request (a lane's, an affinity), held
/// inline: the ids are most of what a request's stamps build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value<'a> {
    Text(Cow<'a, str>),
    Id(Hex),
}

impl std::ops::Deref for Value<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        match self {
            Value::Text(t) => t,
            Value::Id(h) => h.as_str(),
        }
    }
}

impl std::fmt::Display for Value<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl<'a> From<Cow<'a, str>> for Value<'a> {
    fn from(t: Cow<'a, str>) -> Self {
        Value::Text(t)
    }
}

impl<'a> From<&'a str> for Value<'a> {
    fn from(t: &'a str) -> Self {
        Value::Text(Cow::Borrowed(t))
    }
}

impl From<String> for Value<'_> {
    fn from(t: String) -> Self {
        Value::Text(Cow::Owned(t))
    }
}

impl<T: AsRef<str> + ?Sized> PartialEq<T> for Value<'_> {
    fn eq(&self, other: &T) -> bool {
        **self == *other.as_ref()
    }
}

/// A 16-byte id in lowercase hex, as it is stamped: held inline, so that
/// a request's lane and affinity ids cost no allocation.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Hex([u8; 32]);

impl Hex {
    /// A 16-byte id's digits. Not inlined: its callers (lanes, affinity,
    /// the load) share one copy in the module.
    #[inline(never)]
    pub fn of(id: &[u8; 16]) -> Hex {
        #[cfg(target_arch = "wasm32")]
        return Hex(digits_by_vector(id));
        #[cfg(target_arch = "x86_64")]
        return Hex(digits_by_sse2(id));
        #[cfg(not(any(target_arch = "wasm32", target_arch = "x86_64")))]
        return Hex(digits_by_table(id));
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: `of` writes only the ASCII digits 0-9 and a-f.
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }
}

/// A 16-byte id's digits with WebAssembly's vectors: each nibble looked
/// up in the digits by a swizzle, the two halves interleaved by shuffles.
#[cfg(target_arch = "wasm32")]
fn digits_by_vector(id: &[u8; 16]) -> [u8; 32] {
    use core::arch::wasm32::*;
    let digits = u8x16(
        b'0', b'1', b'2', b'3', b'4', b'5', b'6', b'7', b'8', b'9', b'a', b'b', b'c', b'd', b'e',
        b'f',
    );
    // SAFETY: 16 bytes read from a 16-byte array (v128 loads need no
    // alignment).
    let v = unsafe { v128_load(id.as_ptr().cast::<v128>()) };
    let high = u8x16_swizzle(digits, u8x16_shr(v, 4));
    let low = u8x16_swizzle(digits, v128_and(v, u8x16_splat(0x0F)));
    let first = i8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(high, low);
    let second =
        i8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(high, low);
    let mut out = [0u8; 32];
    // SAFETY: two 16-byte stores into a 32-byte array.
    unsafe {
        v128_store(out.as_mut_ptr().cast::<v128>(), first);
        v128_store(out.as_mut_ptr().add(16).cast::<v128>(), second);
    }
    out
}

/// A 16-byte id's digits with SSE2 (in every x86-64): the nibbles apart,
/// interleaved, and made digits sixteen at once (`'0' + n`, and 39 more
/// where `n` is over 9).
#[cfg(target_arch = "x86_64")]
fn digits_by_sse2(id: &[u8; 16]) -> [u8; 32] {
    use std::arch::x86_64::*;
    let mut out = [0u8; 32];
    // SAFETY: SSE2 is part of x86-64; the loads and stores are unaligned
    // ones, 16 bytes from a 16-byte array and into each half of `out`.
    unsafe {
        let v = _mm_loadu_si128(id.as_ptr().cast());
        let low_nibbles = _mm_set1_epi8(0x0F);
        let high = _mm_and_si128(_mm_srli_epi16(v, 4), low_nibbles);
        let low = _mm_and_si128(v, low_nibbles);
        let digits = |n: __m128i| {
            let over9 = _mm_cmpgt_epi8(n, _mm_set1_epi8(9));
            let n = _mm_add_epi8(n, _mm_set1_epi8(b'0' as i8));
            _mm_add_epi8(n, _mm_and_si128(over9, _mm_set1_epi8(39)))
        };
        let (high, low) = (digits(high), digits(low));
        _mm_storeu_si128(out.as_mut_ptr().cast(), _mm_unpacklo_epi8(high, low));
        _mm_storeu_si128(
            out.as_mut_ptr().add(16).cast(),
            _mm_unpackhi_epi8(high, low),
        );
    }
    out
}

/// A 16-byte id's digits, a byte at a time from a table: where neither
/// vector set is (and the tests' reference for both).
#[cfg_attr(any(target_arch = "wasm32", target_arch = "x86_64"), allow(dead_code))]
fn digits_by_table(id: &[u8; 16]) -> [u8; 32] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, &b) in id.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 0xF)];
    }
    out
}

impl PartialEq<&str> for Hex {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Debug for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_str().fmt(f)
    }
}

impl std::fmt::Display for Hex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recycled_list_and_text_are_the_next_requests_emptied() {
        let (mut first, room_text) = room(4);
        let built = "t:s:k".to_owned();
        let (at, text_at) = (first.as_ptr() as usize, built.as_ptr() as usize);
        first.push((SOURCE, Value::from("s")));
        first.push((IDEMPOTENCY_KEY, Value::Text(Cow::Owned(built))));
        recycle(first, room_text);
        let (next, t) = room(4);
        assert!(next.is_empty() && next.capacity() >= 4);
        assert_eq!(next.as_ptr() as usize, at);
        assert!(t.is_empty() && t.capacity() >= 5);
        assert_eq!(t.as_ptr() as usize, text_at);
        // Taken: the next ask gets new ones.
        let (list, text) = room(0);
        assert!(text.capacity() == 0 && list.capacity() == 0);
    }

    #[test]
    fn an_ids_digits_are_its_lowercase_hex() {
        let mut id = [0u8; 16];
        for round in 0..600u32 {
            for (i, b) in id.iter_mut().enumerate() {
                *b = (round.wrapping_mul(2_654_435_761) >> (i % 4 * 8)) as u8 ^ (i as u8 * 17);
            }
            if round < 256 {
                id = [round as u8; 16];
            }
            assert_eq!(Hex::of(&id).as_str(), hex::encode(id));
            assert_eq!(&digits_by_table(&id)[..], hex::encode(id).as_bytes());
        }
    }

    #[test]
    fn a_source_id_or_tenant_is_its_own_stamp() {
        // `decide::stamp` stamps both unencoded.
        for b in 0u8..=0x7F {
            let name = format!("a{}", b as char);
            if crate::names::source_id_ok(&name) || crate::names::tenant_ok(&name) {
                assert!(safe(b), "{b:#x}");
            }
        }
    }

    #[test]
    fn encodes_outside_visible_ascii_and_percent() {
        assert_eq!(encode(b"a b%\n\x00\xff~!"), "a%20b%25%0A%00%FF~!");
        assert!(matches!(encode(b"evt_1~!"), Cow::Borrowed("evt_1~!")));
        assert_eq!(encode(b""), "");
        assert_eq!(encode_str("a b%é"), "a%20b%25%C3%A9");
        assert!(matches!(encode_str("evt_1"), Cow::Borrowed("evt_1")));
        assert_eq!(encode_string("x y".to_owned()), "x%20y");
        assert_eq!(
            encode_joined(&[b"t", b"a b", b"\xff:"]),
            encode(b"t:a b:\xff:")
        );
        assert_eq!(encode_joined(&[]), "");
    }

    #[test]
    fn stamp_namespace_any_case() {
        assert!(is_stamp_header("X-HookStamp-Lane-0"));
        assert!(is_stamp_header("x-hookstamp-"));
        assert!(!is_stamp_header("x-hookstamp"));
        assert!(!is_stamp_header("x-hookstampz"));
        assert!(is_stamp_header("x_hookstamp_dedupe_key"));
        assert!(is_stamp_header("X_HookStamp-Lane_0"));
        assert!(!is_stamp_header("x_hookstamp"));
    }

    #[test]
    fn a_value_reads_as_its_text_whether_borrowed_built_or_an_id() {
        let id = Hex::of(&[
            0x00, 0x01, 0x7f, 0x80, 0xab, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
        ]);
        assert_eq!(id, "00017f80abff00000000000000000010");
        let values = [
            Value::from("evt_1"),
            Value::from("evt_1".to_owned()),
            Value::Id(id),
        ];
        assert_eq!(&*values[0], "evt_1");
        assert_eq!(values[0], values[1]);
        assert_eq!(values[2], id.as_str());
        assert_eq!(values[2].to_string(), id.to_string());
    }

    #[test]
    fn an_id_is_each_byte_in_lowercase_hex_in_order() {
        for start in 0..=255u8 {
            let id: [u8; 16] =
                std::array::from_fn(|i| start.wrapping_add((i as u8).wrapping_mul(17)));
            let want: String = id.iter().map(|b| format!("{b:02x}")).collect();
            assert_eq!(Hex::of(&id).as_str(), want);
        }
    }
}
