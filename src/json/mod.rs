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

mod lex;
#[cfg(test)]
mod tests;

use crate::pairs::same;
use lex::Parser;
use std::borrow::Cow;

/// A path: object keys from the root, as configured (`data.object.id`).
pub type Path = Vec<String>;

/// A scalar found at a path: what a key reads of a JSON body (`key::eval`),
/// borrowed from the body, or owned where it was decoded (a form's JSON
/// field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar<'a> {
    /// A JSON string, unescaped: UTF-8 (the scan checked it), as bytes,
    /// since a key is bytes (a second check would cost as much again).
    Str(Cow<'a, [u8]>),
    /// A JSON integer, as exact decimal text (ASCII), as bytes.
    Int(Cow<'a, [u8]>),
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
    let mut p = Parser::new(body);
    let mut walk = Walk {
        out: vec![None; paths.len()],
    };
    let mut few = [Cand::NONE; FEW];
    let mut many = Vec::new();
    let all = gather(&mut few, &mut many, paths, |slot, path| {
        Some(Cand {
            slot,
            rest: path.as_slice(),
        })
    });
    p.ws();
    let ok = walk.value_on(&mut p, all).is_some() && {
        p.ws();
        p.at_end()
    };
    if !ok {
        return Err(Invalid {
            offset: invalid_at(body, p.i),
        });
    }
    Ok(walk.out)
}

/// Where an invalid body stops being JSON, the scan having stopped at
/// `stop`: its first byte that is not UTF-8, as a check of the whole body
/// would name it, else `stop`. All before the scan's last byte is UTF-8
/// already (outside strings the scan takes only ASCII; a string's text
/// beyond ASCII is checked before the scan moves past it, and text that
/// fails leaves the scan at its first bad byte; only a bad escape's one
/// byte is taken unchecked), so only the rest is checked, from the first
/// byte of the character that last byte is in: a body that fails costs
/// one UTF-8 check, not two.
fn invalid_at(body: &[u8], stop: usize) -> usize {
    let continues = |i: usize| body.get(i).is_some_and(|b| (0x80..0xC0).contains(b));
    let mut from = stop.saturating_sub(1);
    while from > 0 && stop - from <= 4 && continues(from) {
        from -= 1;
    }
    let rest = body.get(from..).unwrap_or_default();
    std::str::from_utf8(rest).map_or_else(|e| from + e.valid_up_to(), |_| stop)
}

/// Up to this many paths, the candidates of a key are kept on the stack.
const FEW: usize = 8;

/// The candidates `take` makes of `items` (given each one's index): in
/// `few` where they fit (no allocation per key), else in `many`. Inlined,
/// and a loop with `take` called in it: called once a key, a call cost (d)
/// some 300 instructions a request, and an iterator adapter's closure is a
/// call per item at the .wasm's opt-level.
#[inline(always)]
fn gather<'s, 'i, 'p, T>(
    few: &'s mut [Cand<'p>; FEW],
    many: &'s mut Vec<Cand<'p>>,
    items: &'i [T],
    mut take: impl FnMut(usize, &'i T) -> Option<Cand<'p>>,
) -> &'s [Cand<'p>] {
    if items.len() > FEW {
        for (i, item) in items.iter().enumerate() {
            many.extend(take(i, item));
        }
        return many;
    }
    let mut n = 0;
    for (i, item) in items.iter().enumerate() {
        if let (Some(c), Some(slot)) = (take(i, item), few.get_mut(n)) {
            *slot = c;
            n += 1;
        }
    }
    few.get(..n).unwrap_or_default()
}

/// Whether the whole body is valid JSON (the same grammar as `extract`).
pub fn is_valid(body: &[u8]) -> bool {
    scan(body, &[]).is_ok()
}

/// A path still on course at some value: its slot in the answer, and the
/// keys it has yet to take from there (none: the path ends at the value).
#[derive(Clone, Copy)]
struct Cand<'p> {
    slot: usize,
    rest: &'p [String],
}

impl Cand<'_> {
    const NONE: Self = Cand { slot: 0, rest: &[] };
}

/// The walk along the configured paths: what each path found.
struct Walk<'a> {
    out: Vec<Option<Scalar<'a>>>,
}

impl<'a> Walk<'a> {
    /// A value under the paths `cands` that led here.
    fn value_on(&mut self, p: &mut Parser<'a>, cands: &[Cand<'_>]) -> Option<()> {
        let found = match p.peek()? {
            b'"' => Scalar::Str(p.string()?),
            b'-' | b'0'..=b'9' => p
                .number()?
                .map_or(Scalar::Other, |n| Scalar::Int(Cow::Borrowed(n.as_bytes()))),
            b'{' if cands.iter().any(|c| !c.rest.is_empty()) => {
                self.object_on(p, cands)?;
                // An object, for the paths that end here.
                Scalar::Other
            }
            _ => {
                p.skip_value()?;
                Scalar::Other
            }
        };
        for c in cands.iter().filter(|c| c.rest.is_empty()) {
            if let Some(slot) = self.out.get_mut(c.slot) {
                *slot = Some(found.clone());
            }
        }
        Some(())
    }

    fn object_on(&mut self, p: &mut Parser<'a>, cands: &[Cand<'_>]) -> Option<()> {
        p.expect(b'{')?;
        p.ws();
        if p.peek()? == b'}' {
            p.i += 1;
            return Some(());
        }
        // Room for each key's paths, made once an object: a vector made
        // and dropped a key is a call to free it in the .wasm, even empty.
        let mut few = [Cand::NONE; FEW];
        let mut many = Vec::new();
        loop {
            let key = p.string()?;
            p.ws();
            p.expect(b':')?;
            p.ws();
            // The paths that take this key, one key further on.
            many.clear();
            let sub = gather(&mut few, &mut many, cands, |_, c| {
                let (seg, rest) = c.rest.split_first()?;
                same(seg.as_bytes(), &key).then_some(Cand { slot: c.slot, rest })
            });
            if sub.is_empty() {
                p.skip_value()?;
            } else {
                // A duplicate key replaces everything an earlier one held.
                for c in sub {
                    if let Some(slot) = self.out.get_mut(c.slot) {
                        *slot = None;
                    }
                }
                self.value_on(p, sub)?;
            }
            p.ws();
            match p.peek()? {
                b',' => {
                    p.i += 1;
                    p.ws();
                }
                b'}' => {
                    p.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}
