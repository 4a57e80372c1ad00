//! What a configuration may ask for, at most: every value that costs the
//! filter stack or time on each request is bounded here, at load, so that no
//! configuration can arm a crash or a slow path (V8's stack ends a few
//! thousand frames deep; a JSON path is followed by recursion, one frame a
//! segment). Errors name the source and the bound.

use super::diag::{Diags, Issue, Scope};

// How many of a configuration's parts there are: each is checked, and
// each costs a lookup or a stamp on the requests it serves.

/// Sources in one configuration.
pub const MAX_SOURCES: usize = 1024;
/// Sinks of one source (each ordered one stamps up to three headers).
pub const MAX_SINKS: usize = 64;
/// Tenants a source lists (or has per-tenant secrets for).
pub const MAX_TENANTS: usize = 10_000;
/// Secrets in one list (a rotation tries each).
pub const MAX_SECRETS: usize = 8;

/// The first `max` items of `list`, the only ones checked: a longer list
/// is reported in `scope` (`within`), and its items past the bound are
/// not read at all.
pub(super) fn bounded<'l, T>(
    list: &'l [T],
    what: &str,
    max: usize,
    scope: &Scope,
    d: &mut Diags,
) -> &'l [T] {
    if let Err(e) = within(what, max, list.len()) {
        d.issue(scope, e);
    }
    list.get(..max).unwrap_or(list)
}

// How large one value is: what a request's walk through it costs.

/// Segments of the route prefix.
pub const MAX_PREFIX_SEGMENTS: usize = 16;
/// Segments of one JSON path: the scanner's recursion depth.
pub const MAX_PATH_SEGMENTS: usize = 32;
/// Bytes of a path segment, a header name or a form field name.
pub const MAX_NAME_BYTES: usize = 256;
/// Nesting of `first` and `concat` in one key expression.
pub const MAX_KEY_DEPTH: usize = 4;
/// Headers, paths and form fields one key expression reads, in all.
pub const MAX_KEY_TERMS: usize = 16;
/// Bytes of a `concat` separator.
pub const MAX_SEPARATOR_BYTES: usize = 16;
/// Bytes of a custom scheme's `signed` template.
pub const MAX_TEMPLATE_BYTES: usize = 1024;
/// Bytes of a verify object's `public_url` (signed with every request's
/// URL).
pub const MAX_PUBLIC_URL_BYTES: usize = 256;

/// `Err` naming the bound when `got` is past `max`: "{what}: at most
/// {max}, got {got}", one form (and the code `bound`) for every bound.
pub fn within(what: &str, max: usize, got: usize) -> Result<(), Issue> {
    if got > max {
        return Err(Issue::new(
            "bound",
            format!("{what}: at most {max}, got {got}"),
        ));
    }
    Ok(())
}
