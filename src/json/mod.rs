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

use lex::Parser;
use std::borrow::Cow;

/// A path: object keys from the root, as configured (`data.object.id`).
pub type Path = Vec<String>;

/// A scalar found at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scalar<'a> {
    /// A JSON string, unescaped: UTF-8 (the scan checked it), as bytes,
    /// since a key is bytes (a second check would cost as much again).
    Str(Cow<'a, [u8]>),
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
    let mut p = Parser::new(body);
    let mut walk = Walk {
        paths,
        out: vec![None; paths.len()],
    };
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
    let ok = walk.value_on(&mut p, 0, all).is_some() && {
        p.ws();
        p.at_end()
    };
    if !ok {
        // The scan checks UTF-8 only inside strings, where anything beyond
        // ASCII may be; bytes that are not UTF-8 anywhere are named first.
        let offset = std::str::from_utf8(body).map_or_else(|e| e.valid_up_to(), |_| p.i);
        return Err(Invalid { offset });
    }
    Ok(walk.out)
}

/// Up to this many paths, the candidates of a key are kept on the stack.
const FEW: usize = 8;

/// Whether the whole body is valid JSON (the same grammar as `extract`).
pub fn is_valid(body: &[u8]) -> bool {
    scan(body, &[]).is_ok()
}

/// The walk along the configured paths: the paths, and what each found.
struct Walk<'p, 'a> {
    paths: &'p [Path],
    out: Vec<Option<Scalar<'a>>>,
}

impl<'a> Walk<'_, 'a> {
    /// A value at `depth` under the on-path candidates `cands` (indices into
    /// `paths` whose first `depth` segments led here).
    fn value_on(&mut self, p: &mut Parser<'a>, depth: usize, cands: &[usize]) -> Option<()> {
        let paths = self.paths;
        let leaf = |c: &usize| paths.get(*c).is_some_and(|path| path.len() == depth);
        let found = match p.peek()? {
            b'"' => Some(Scalar::Str(p.string()?)),
            b'-' | b'0'..=b'9' => Some(p.number()?.map_or(Scalar::Other, Scalar::Int)),
            b'{' if cands.iter().any(|c| !leaf(c)) => {
                self.object_on(p, depth, cands)?;
                // An object, for the paths that end here.
                Some(Scalar::Other)
            }
            _ => {
                p.skip_value()?;
                Some(Scalar::Other)
            }
        };
        if let Some(v) = found {
            for c in cands.iter().filter(|c| leaf(c)) {
                if let Some(slot) = self.out.get_mut(*c) {
                    *slot = Some(v.clone());
                }
            }
        }
        Some(())
    }

    fn object_on(&mut self, p: &mut Parser<'a>, depth: usize, cands: &[usize]) -> Option<()> {
        let paths = self.paths;
        p.expect(b'{')?;
        p.ws();
        if p.peek()? == b'}' {
            p.i += 1;
            return Some(());
        }
        loop {
            let key = p.string()?;
            p.ws();
            p.expect(b':')?;
            p.ws();
            let on = |&c: &usize| {
                paths
                    .get(c)
                    .and_then(|p| p.get(depth))
                    .is_some_and(|seg| seg.as_bytes() == &*key)
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
                p.skip_value()?;
            } else {
                // A duplicate key replaces everything an earlier one held.
                for &c in sub {
                    if let Some(slot) = self.out.get_mut(c) {
                        *slot = None;
                    }
                }
                self.value_on(p, depth + 1, sub)?;
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
