//! The JSON lexing the path walk stands on: whitespace, strings (plain
//! bytes sixteen and sixty-four at a time, a character beyond ASCII checked
//! as UTF-8 where it is met), numbers, literals, and a value skipped whole
//! without recursion.

use std::borrow::Cow;

/// Whether a byte ends a run of plain string bytes: `"`, `\`, a control
/// byte (invalid inside a string), or the first byte of a character beyond
/// ASCII (checked as UTF-8 on its own, `utf8_char`).
#[inline]
fn ends_run_at(c: u8) -> bool {
    c == b'"' || c == b'\\' || !(0x20..0x80).contains(&c)
}

/// Where the first byte of sixteen that ends a run (`ends_run_at`) is, and
/// whether any of sixty-four does (a long string's bulk, one test for the
/// four sixteens): all sixteen compared at once with SSE2 on x86_64 and
/// with WebAssembly's vectors in the .wasm (`ends16`), elsewhere `words`.
#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
pub(super) use vector::{any_end, first_end};
#[cfg(not(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
)))]
pub(super) use words::{any_end, first_end};

#[cfg(any(
    target_arch = "x86_64",
    all(target_arch = "wasm32", target_feature = "simd128")
))]
mod vector {
    #[inline]
    pub(in crate::json) fn first_end(chunk: &[u8; 16]) -> Option<usize> {
        let m = super::ends16(chunk);
        (m != 0).then(|| m.trailing_zeros() as usize)
    }

    #[inline]
    pub(in crate::json) fn any_end(block: &[u8; 64]) -> bool {
        let chunks = block.as_chunks::<16>().0.iter();
        chunks.fold(0, |m, c| m | super::ends16(c)) != 0
    }
}

/// The same a word at a time, with bit tricks: where no vectors are, and
/// in the tests, which hold the vectors to them.
#[cfg(any(
    test,
    not(any(
        target_arch = "x86_64",
        all(target_arch = "wasm32", target_feature = "simd128")
    ))
))]
pub(super) mod words {
    /// The bytes of `w` (little-endian) that end a run (`ends_run_at`), as
    /// each byte's high bit (the bit trick for "has a zero byte" / "has a
    /// byte less than n"). The lowest flagged byte is exact: a borrow only
    /// flags a byte above one that ends the run itself.
    #[inline]
    pub(in crate::json) fn ends_run(w: u64) -> u64 {
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGH: u64 = 0x8080_8080_8080_8080;
        let zero = |v: u64| v.wrapping_sub(ONES) & !v;
        let quote = zero(w ^ (ONES * u64::from(b'"')));
        let backslash = zero(w ^ (ONES * u64::from(b'\\')));
        let control = w.wrapping_sub(ONES * 0x20) & !w;
        (quote | backslash | control | w) & HIGH
    }

    #[inline]
    pub(in crate::json) fn first_end(chunk: &[u8; 16]) -> Option<usize> {
        let [a, b] = chunk.as_chunks::<8>().0 else {
            return None;
        };
        let ends = |w: &[u8; 8]| ends_run(u64::from_le_bytes(*w));
        match (ends(a), ends(b)) {
            (0, 0) => None,
            (0, m) => Some(8 + m.trailing_zeros() as usize / 8),
            (m, _) => Some(m.trailing_zeros() as usize / 8),
        }
    }

    #[inline]
    pub(in crate::json) fn any_end(block: &[u8; 64]) -> bool {
        let words = block.as_chunks::<8>().0.iter();
        words.fold(0, |m, w| m | ends_run(u64::from_le_bytes(*w))) != 0
    }
}

/// The bytes of `chunk` that end a run, a bit each (lowest: the first),
/// with SSE2, part of every x86_64 CPU: all sixteen compared at once.
#[cfg(target_arch = "x86_64")]
#[inline]
fn ends16(chunk: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{
        _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    // SAFETY: SSE2 is in x86_64's baseline, so the intrinsics run on any
    // CPU this code does; the load reads the sixteen bytes `chunk` borrows
    // (an unaligned load, as `loadu` allows).
    let mask = unsafe {
        let v = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        // Signed: below 0x20, or 0x80 and above (negative as i8).
        let other = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
        _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), other))
    };
    mask as u32
}

/// The same with WebAssembly's 128-bit vectors (the .wasm is built with
/// them; V8 gives each operation its SSE instruction).
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
#[inline]
fn ends16(chunk: &[u8; 16]) -> u32 {
    use core::arch::wasm32::{
        i8x16_bitmask, i8x16_eq, i8x16_lt, i8x16_splat, v128, v128_load, v128_or,
    };
    // SAFETY: the load reads the sixteen bytes `chunk` borrows; WebAssembly
    // loads need no alignment.
    let v = unsafe { v128_load(chunk.as_ptr().cast::<v128>()) };
    let quote = i8x16_eq(v, i8x16_splat(b'"' as i8));
    let backslash = i8x16_eq(v, i8x16_splat(b'\\' as i8));
    // Signed: below 0x20, or 0x80 and above (negative as i8).
    let other = i8x16_lt(v, i8x16_splat(0x20));
    u32::from(i8x16_bitmask(v128_or(v128_or(quote, backslash), other)))
}

/// The length of the UTF-8 character `b` starts with, or `None` where it
/// starts with none: the well-formed sequences of Unicode's table 3-7 (no
/// overlong form, no surrogate, nothing past U+10FFFF), as
/// `std::str::from_utf8` takes them, without its call per character.
#[inline]
pub(super) fn utf8_char(b: &[u8]) -> Option<usize> {
    let cont = |i: usize| b.get(i).is_some_and(|&c| c & 0xC0 == 0x80);
    let second = |lo: u8, hi: u8| b.get(1).is_some_and(|c| (lo..=hi).contains(c));
    let (len, ok) = match *b.first()? {
        0xC2..=0xDF => (2, cont(1)),
        0xE0 => (3, second(0xA0, 0xBF) && cont(2)),
        0xE1..=0xEC | 0xEE..=0xEF => (3, cont(1) && cont(2)),
        0xED => (3, second(0x80, 0x9F) && cont(2)),
        0xF0 => (4, second(0x90, 0xBF) && cont(2) && cont(3)),
        0xF1..=0xF3 => (4, cont(1) && cont(2) && cont(3)),
        0xF4 => (4, second(0x80, 0x8F) && cont(2) && cont(3)),
        _ => return None,
    };
    ok.then_some(len)
}

/// The scanner's place in a body, and the lexing every walk shares.
pub(super) struct Parser<'a> {
    b: &'a [u8],
    pub(super) i: usize,
    /// Open containers while skipping: true for an object.
    stack: Vec<bool>,
}

impl<'a> Parser<'a> {
    pub(super) fn new(body: &'a [u8]) -> Self {
        Parser {
            b: body,
            i: 0,
            stack: Vec::new(),
        }
    }

    /// Whether the whole body has been read.
    pub(super) fn at_end(&self) -> bool {
        self.i == self.b.len()
    }

    #[inline]
    pub(super) fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    pub(super) fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    #[inline]
    pub(super) fn expect(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// Validates and skips one value of any depth without recursion.
    pub(super) fn skip_value(&mut self) -> Option<()> {
        self.stack.clear();
        loop {
            // Expecting a value.
            self.ws();
            match self.peek()? {
                open @ (b'{' | b'[') => {
                    let is_obj = open == b'{';
                    self.i += 1;
                    self.ws();
                    if self.peek()? == if is_obj { b'}' } else { b']' } {
                        self.i += 1;
                    } else {
                        self.stack.push(is_obj);
                        if is_obj {
                            self.member_key()?;
                        }
                        continue;
                    }
                }
                b'"' => self.skip_string()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => {
                    self.number_end()?;
                }
                _ => return None,
            }
            // After a value: close what ends here, or move to the next item.
            loop {
                let Some(&is_obj) = self.stack.last() else {
                    return Some(());
                };
                self.ws();
                match self.peek()? {
                    b',' => {
                        self.i += 1;
                        if is_obj {
                            self.ws();
                            self.member_key()?;
                        }
                        break;
                    }
                    b'}' if is_obj => {
                        self.i += 1;
                        self.stack.pop();
                    }
                    b']' if !is_obj => {
                        self.i += 1;
                        self.stack.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    /// `"key" :` inside an object being skipped.
    fn member_key(&mut self) -> Option<()> {
        self.skip_string()?;
        self.ws();
        self.expect(b':')
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.i.checked_add(word.len())?;
        if self.b.get(self.i..end)? == word {
            self.i = end;
            Some(())
        } else {
            None
        }
    }

    /// Parses a number. `Some(Some(text))` for an integer, `Some(None)` for
    /// any other valid number, `None` when it is not a JSON number.
    pub(super) fn number(&mut self) -> Option<Option<&'a str>> {
        let start = self.i;
        if !self.number_end()? {
            return Some(None);
        }
        let text = std::str::from_utf8(self.b.get(start..self.i)?).ok()?;
        Some(Some(if text == "-0" { "0" } else { text }))
    }

    /// Skips a number: whether it is an integer, `None` when it is not a
    /// JSON number (a skipped one's text is never needed).
    fn number_end(&mut self) -> Option<bool> {
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let mut integer = true;
        if self.peek() == Some(b'.') {
            self.i += 1;
            self.some_digits()?;
            integer = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            self.some_digits()?;
            integer = false;
        }
        Some(integer)
    }

    fn digits(&mut self) {
        while let Some(b'0'..=b'9') = self.peek() {
            self.i += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.i;
        self.digits();
        (self.i > start).then_some(())
    }

    /// Advances over string bytes to the first that ends the run
    /// (`ends_run_at`): sixteen at a time, where most keys and values end;
    /// past them, sixty-four at a time while none ends it.
    #[inline]
    fn plain_run(&mut self) {
        // A run that ends at once or after a byte (an empty string, one
        // right after an escape, a one-letter key) costs a byte's look, not
        // a chunk's.
        for _ in 0..2 {
            match self.peek() {
                Some(c) if !ends_run_at(c) => self.i += 1,
                _ => return,
            }
        }
        let mut long = false;
        loop {
            if long {
                while let Some(block) = self.b.get(self.i..).and_then(<[u8]>::first_chunk::<64>) {
                    if any_end(block) {
                        break;
                    }
                    self.i += 64;
                }
            }
            let Some(chunk) = self.b.get(self.i..).and_then(<[u8]>::first_chunk::<16>) else {
                break;
            };
            if let Some(at) = first_end(chunk) {
                self.i += at;
                return;
            }
            self.i += 16;
            long = true;
        }
        while let Some(&c) = self.b.get(self.i) {
            if ends_run_at(c) {
                return;
            }
            self.i += 1;
        }
    }

    /// Advances over string bytes up to a `"`, a `\` or a byte that is
    /// invalid in a string; `None` at a character that is not UTF-8 (the
    /// scan left at its first byte, for `invalid_at`).
    #[inline(always)]
    fn text_run(&mut self) -> Option<()> {
        self.plain_run();
        match self.peek() {
            Some(0x80..) => self.wide_run(),
            _ => Some(()),
        }
    }

    /// `text_run` from a byte beyond ASCII: a character at a time (checked
    /// by `utf8_char`, with no call), ASCII between them a run at a time.
    #[inline(never)]
    fn wide_run(&mut self) -> Option<()> {
        loop {
            match self.peek() {
                Some(0x80..) => self.i += utf8_char(self.b.get(self.i..)?)?,
                Some(c) if !ends_run_at(c) => self.plain_run(),
                _ => return Some(()),
            }
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.expect(b'"')?;
        loop {
            self.text_run()?;
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => {
                    self.escape()?;
                }
                _ => return None,
            }
        }
    }

    /// A string's UTF-8 bytes, unescaped: checked as UTF-8 on the way, so
    /// neither a key compared nor a value found needs a second pass;
    /// borrowed when it holds no escape.
    pub(super) fn string(&mut self) -> Option<Cow<'a, [u8]>> {
        self.expect(b'"')?;
        let start = self.i;
        self.text_run()?;
        if self.peek()? == b'"' {
            let s = self.b.get(start..self.i)?;
            self.i += 1;
            return Some(Cow::Borrowed(s));
        }
        let mut owned = self.b.get(start..self.i)?.to_vec();
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(Cow::Owned(owned));
                }
                b'\\' => match self.escape()? {
                    c @ '\0'..='\x7f' => owned.push(c as u8),
                    c => owned.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                },
                _ => return None,
            }
            let run = self.i;
            self.text_run()?;
            if run < self.i {
                owned.extend_from_slice(self.b.get(run..self.i)?);
            }
        }
    }

    /// Decodes one escape sequence starting at the backslash.
    fn escape(&mut self) -> Option<char> {
        self.expect(b'\\')?;
        let c = self.peek()?;
        self.i += 1;
        Some(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                match hi {
                    0xD800..=0xDBFF => {
                        self.expect(b'\\')?;
                        self.expect(b'u')?;
                        let lo = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&lo) {
                            return None;
                        }
                        char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?
                    }
                    0xDC00..=0xDFFF => return None,
                    _ => char::from_u32(hi)?,
                }
            }
            _ => return None,
        })
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = (self.peek()? as char).to_digit(16)?;
            v = v * 16 + d;
            self.i += 1;
        }
        Some(v)
    }
}
