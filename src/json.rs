//! One-pass JSON path extraction.
//!
//! The filter needs a handful of scalar values (a dedupe id, ordering keys)
//! out of a body that may be a megabyte. Building a document tree for that
//! would cost an allocation per node, so this scanner validates the whole
//! body in one pass, descends only into objects on a wanted path, and hands
//! back strings borrowed from the body unless an escape forces a copy.
//!
//! Semantics (the contract the tests pin down):
//! - the body must be valid JSON as a whole (RFC 8259, no BOM), valid UTF-8
//!   everywhere, with no lone surrogate escape; otherwise nothing is found,
//!   even a value seen before the error;
//! - paths go through objects only, never into arrays;
//! - object keys are compared after unescaping; with duplicate keys the last
//!   one wins (a later duplicate replaces the whole earlier subtree);
//! - an integer is returned as its exact decimal text (`-0` becomes `0`);
//!   floats, booleans, null, objects and arrays are `Other`: there, but not
//!   keys.
//!
//! Off-path values are skipped with an explicit stack, so hostile nesting
//! cannot overflow the (small, fixed) wasm stack. Recursion only follows the
//! configured paths: at most `config::bounds::MAX_PATH_SEGMENTS` frames.

use std::borrow::Cow;

/// A path: object keys from the root, as configured (`data.object.id`).
pub type Path = Vec<String>;

/// A scalar found at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar<'a> {
    /// A JSON string, unescaped.
    Str(Cow<'a, str>),
    /// A JSON integer, as exact decimal text.
    Int(&'a str),
    /// Something else is there (a float, a boolean, null, an object or an
    /// array): never a key, but not absent either (the missing-key reason).
    Other,
}

/// Splits a configured dot path. Returns `None` if any segment is empty.
pub fn parse_path(text: &str) -> Option<Path> {
    let segs: Path = text.split('.').map(str::to_owned).collect();
    if segs.iter().any(String::is_empty) {
        return None;
    }
    Some(segs)
}

/// Why a body is not JSON as hookstamp reads it: the byte where the scan
/// stopped (for bytes that are not UTF-8, the first of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid {
    pub offset: usize,
}

/// Finds the scalar at each path. `None` when the body is not valid JSON;
/// otherwise one slot per path, `None` where the path holds no scalar.
pub fn extract<'a>(body: &'a [u8], paths: &[Path]) -> Option<Vec<Option<Scalar<'a>>>> {
    scan(body, paths).ok()
}

/// `extract`, telling where an invalid body stops being JSON.
pub fn scan<'a>(body: &'a [u8], paths: &[Path]) -> Result<Vec<Option<Scalar<'a>>>, Invalid> {
    let text = std::str::from_utf8(body).map_err(|e| Invalid {
        offset: e.valid_up_to(),
    })?;
    let mut p = Parser {
        s: text,
        b: text.as_bytes(),
        i: 0,
        stack: Vec::new(),
    };
    let mut out: Vec<Option<Scalar<'a>>> = vec![None; paths.len()];
    let mut few = [0usize; FEW];
    let many: Vec<usize>;
    let all: &[usize] = match few.get_mut(..paths.len()) {
        Some(f) => {
            for (i, slot) in f.iter_mut().enumerate() {
                *slot = i;
            }
            f
        }
        None => {
            many = (0..paths.len()).collect();
            &many
        }
    };
    p.ws();
    let ok = p.value_on(0, all, paths, &mut out).is_some() && {
        p.ws();
        p.i == p.b.len()
    };
    if !ok {
        return Err(Invalid { offset: p.i });
    }
    Ok(out)
}

/// Up to this many paths, the candidates of a key are kept on the stack.
const FEW: usize = 8;

/// Whether the whole body is valid JSON (the same grammar as `extract`).
pub fn is_valid(body: &[u8]) -> bool {
    scan(body, &[]).is_ok()
}

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
fn ends_run(w: u64) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v;
    let quote = zero(w ^ (ONES * u64::from(b'"')));
    let backslash = zero(w ^ (ONES * u64::from(b'\\')));
    let control = w.wrapping_sub(ONES * 0x20) & !w;
    (quote | backslash | control) & HIGH != 0
}

struct Parser<'a> {
    s: &'a str,
    b: &'a [u8],
    i: usize,
    /// Open containers while skipping: true for an object.
    stack: Vec<bool>,
}

impl<'a> Parser<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.i += 1;
        }
    }

    #[inline]
    fn expect(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    /// A value at `depth` under the on-path candidates `cands` (indices into
    /// `paths` whose first `depth` segments led here).
    fn value_on(
        &mut self,
        depth: usize,
        cands: &[usize],
        paths: &[Path],
        out: &mut [Option<Scalar<'a>>],
    ) -> Option<()> {
        let leaf = |c: &usize| paths.get(*c).is_some_and(|p| p.len() == depth);
        let found = match self.peek()? {
            b'"' => Some(Scalar::Str(self.string()?)),
            b'-' | b'0'..=b'9' => Some(self.number()?.map_or(Scalar::Other, Scalar::Int)),
            b'{' if cands.iter().any(|c| !leaf(c)) => {
                self.object_on(depth, cands, paths, out)?;
                // An object, for the paths that end here.
                Some(Scalar::Other)
            }
            _ => {
                self.skip_value()?;
                Some(Scalar::Other)
            }
        };
        if let Some(v) = found {
            for c in cands.iter().filter(|c| leaf(c)) {
                if let Some(slot) = out.get_mut(*c) {
                    *slot = Some(v.clone());
                }
            }
        }
        Some(())
    }

    fn object_on(
        &mut self,
        depth: usize,
        cands: &[usize],
        paths: &[Path],
        out: &mut [Option<Scalar<'a>>],
    ) -> Option<()> {
        self.expect(b'{')?;
        self.ws();
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.ws();
            self.expect(b':')?;
            self.ws();
            let on = |&c: &usize| {
                paths
                    .get(c)
                    .and_then(|p| p.get(depth))
                    .is_some_and(|seg| *seg == *key)
            };
            // The candidates on this key: on the stack for a few paths (no
            // allocation per key), a Vec for many.
            let mut few = [0usize; FEW];
            let many: Vec<usize>;
            let sub: &[usize] = if cands.len() <= FEW {
                let mut n = 0;
                for &c in cands.iter().filter(|c| on(c)) {
                    if let Some(slot) = few.get_mut(n) {
                        *slot = c;
                        n += 1;
                    }
                }
                few.get(..n).unwrap_or_default()
            } else {
                many = cands.iter().copied().filter(on).collect();
                &many
            };
            if sub.is_empty() {
                self.skip_value()?;
            } else {
                // A duplicate key replaces everything an earlier one held.
                for &c in sub {
                    if let Some(slot) = out.get_mut(c) {
                        *slot = None;
                    }
                }
                self.value_on(depth + 1, sub, paths, out)?;
            }
            self.ws();
            match self.peek()? {
                b',' => {
                    self.i += 1;
                    self.ws();
                }
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Validates and skips one value of any depth without recursion.
    fn skip_value(&mut self) -> Option<()> {
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
    fn number(&mut self) -> Option<Option<&'a str>> {
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
    fn string(&mut self) -> Option<Cow<'a, str>> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn one(body: &str, path: &str) -> Option<Option<String>> {
        let paths = vec![parse_path(path).unwrap()];
        extract(body.as_bytes(), &paths).map(|v| {
            v.into_iter().next().flatten().map(|s| match s {
                Scalar::Str(s) => format!("s:{s}"),
                Scalar::Int(i) => format!("i:{i}"),
                Scalar::Other => "other".into(),
            })
        })
    }

    #[test]
    fn finds_strings_and_integers() {
        assert_eq!(one(r#"{"id":"evt_1"}"#, "id"), Some(Some("s:evt_1".into())));
        assert_eq!(one(r#"{"id":-0}"#, "id"), Some(Some("i:0".into())));
        assert_eq!(
            one(r#"{"id":123456789012345678901234567890}"#, "id"),
            Some(Some("i:123456789012345678901234567890".into()))
        );
        assert_eq!(one(r#"{"id":1.0}"#, "id"), Some(Some("other".into())));
        assert_eq!(one(r#"{"id":1e3}"#, "id"), Some(Some("other".into())));
        assert_eq!(one(r#"{"x":1}"#, "id"), Some(None));
        assert_eq!(one(r#"{"id":{"a":1}}"#, "id"), Some(Some("other".into())));
        assert_eq!(
            one(r#"{"a":{"b":{"c":"x"}}}"#, "a.b.c"),
            Some(Some("s:x".into()))
        );
    }

    #[test]
    fn duplicates_last_wins_whole_subtree() {
        assert_eq!(one(r#"{"a":{"b":"1"},"a":{"c":"2"}}"#, "a.b"), Some(None));
        assert_eq!(
            one(r#"{"id":"1","id":"2"}"#, "id"),
            Some(Some("s:2".into()))
        );
        assert_eq!(
            one(r#"{"id":"1","id":null}"#, "id"),
            Some(Some("other".into()))
        );
    }

    #[test]
    fn invalid_anywhere_finds_nothing() {
        assert_eq!(one(r#"{"id":"x"} x"#, "id"), None);
        assert_eq!(one(r#"{"id":"x","y":"\ud800"}"#, "id"), None);
        assert_eq!(one(r#"{"id":"x","y":01}"#, "id"), None);
        assert_eq!(one("\u{feff}{\"id\":\"x\"}", "id"), None);
        assert_eq!(one("", "id"), None);
        assert!(extract(b"{\"id\":\"x\",\"y\":\"\xff\"}", &[]).is_none());
    }

    #[test]
    fn escaped_keys_and_values() {
        assert_eq!(
            one(r#"{"\u0069d":"a\nb\ud83d\ude00"}"#, "id"),
            Some(Some("s:a\nb\u{1f600}".into()))
        );
    }

    #[test]
    fn ends_run_exactly_at_quote_backslash_and_control() {
        for b in 0..=255u8 {
            let want = b == b'"' || b == b'\\' || b < 0x20;
            for at in 0..8 {
                let mut w = [b'a', 0xC3, 0xA9, b'z', 0x7F, 0xFF, b' ', b'~'];
                w[at] = b;
                assert_eq!(ends_run(u64::from_le_bytes(w)), want, "byte {b:#x} at {at}");
            }
        }
    }

    #[test]
    fn an_invalid_body_says_where_the_scan_stopped() {
        let at = |b: &[u8]| scan(b, &[]).err().map(|e| e.offset);
        assert_eq!(at(br#"{"a":1}"#), None);
        assert_eq!(at(br#"{"a":1,}"#), Some(7));
        assert_eq!(at(br#"{"a" 1}"#), Some(5));
        assert_eq!(at(b"{\"a\":\"\xff\"}"), Some(6));
        assert_eq!(at(br#"{"a":1} x"#), Some(8));
        assert_eq!(at(br#"[1,2"#), Some(4));
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let deep = "[".repeat(200_000) + &"]".repeat(200_000);
        assert!(is_valid(deep.as_bytes()));
        let body = format!(r#"{{"x":{deep},"id":"k"}}"#);
        assert_eq!(one(&body, "id"), Some(Some("s:k".into())));
        assert!(!is_valid("[".repeat(1000).as_bytes()));
    }
}
