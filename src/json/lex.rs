//! The JSON lexing the path walk stands on: whitespace, strings (a run of
//! plain bytes a word at a time), numbers, literals, and a value skipped
//! whole without recursion.

use std::borrow::Cow;

/// Whether a byte ends a run of plain string bytes.
#[inline]
fn ends_run_at(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// Eight bytes as a little-endian word (0, which ends a run, if not eight).
#[inline]
fn word(b: &[u8]) -> u64 {
    <[u8; 8]>::try_from(b).map_or(0, u64::from_le_bytes)
}

/// Whether any byte of `w` is `"`, `\` or below 0x20 (the bit trick for
/// "has a zero byte" / "has a byte less than n"; exact as a yes or no).
#[inline]
pub(super) fn ends_run(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let backslash = zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    (quote | backslash | control) & HIGH != 0
}

/// The scanner's place in a body, and the lexing every walk shares.
pub(super) struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    pub(super) i: usize,
    /// Open containers while skipping: true for an object.
    stack: Vec<bool>,
}

impl<'a> Parser<'a> {
    pub(super) fn new(text: &'a str) -> Self {
        Parser {
            s: text,
            b: text.as_bytes(),
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
                    self.number()?;
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
        if !integer {
            return Some(None);
        }
        let text = self.s.get(start..self.i)?;
        Some(Some(if text == "-0" { "0" } else { text }))
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

    /// Advances over plain string bytes; stops at `"`, `\` or a control
    /// byte (invalid inside a string). UTF-8 was validated up front.
    #[inline]
    fn plain_run(&mut self) {
        // Most keys and values are short: a byte at a time first.
        let short = self.i + 16;
        while let Some(&c) = self.b.get(self.i) {
            if ends_run_at(c) {
                return;
            }
            self.i += 1;
            if self.i == short {
                return self.long_run();
            }
        }
    }

    /// The rest of a long run (a description, an embedded document):
    /// sixteen bytes at a time while none of them ends it.
    #[inline(never)]
    fn long_run(&mut self) {
        if let Some(rest) = self.b.get(self.i..) {
            for pair in rest.chunks_exact(16) {
                let (a, b) = pair.split_at(8);
                if ends_run(word(a)) || ends_run(word(b)) {
                    break;
                }
                self.i += 16;
            }
        }
        while let Some(&c) = self.b.get(self.i) {
            if ends_run_at(c) {
                break;
            }
            self.i += 1;
        }
    }

    fn skip_string(&mut self) -> Option<()> {
        self.expect(b'"')?;
        loop {
            self.plain_run();
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

    /// Parses a string, borrowing it when it holds no escape.
    pub(super) fn string(&mut self) -> Option<Cow<'a, str>> {
        self.expect(b'"')?;
        let start = self.i;
        self.plain_run();
        if self.peek()? == b'"' {
            let s = self.s.get(start..self.i)?;
            self.i += 1;
            return Some(Cow::Borrowed(s));
        }
        let mut owned = String::from(self.s.get(start..self.i)?);
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(Cow::Owned(owned));
                }
                b'\\' => owned.push(self.escape()?),
                _ => return None,
            }
            let run = self.i;
            self.plain_run();
            owned.push_str(self.s.get(run..self.i)?);
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
