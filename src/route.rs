//! Which source a request belongs to.

use crate::config::{tenant_ok, Config, Routing, DEFAULT_TENANT};

/// The status and body of a request that names no configured source.
pub const REJECT_STATUS: u32 = 404;
pub const REJECT_BODY: &str = r#"{"error":"unknown_source"}"#;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route<'a> {
    /// Not a webhook of ours (outside the prefix, or not POST): untouched.
    Pass,
    /// Under the prefix but names no source: answered 404 by the filter.
    Reject,
    /// A webhook of source `source` (an index) for `tenant`.
    /// The tenant is borrowed from the config or the path.
    Source { source: usize, tenant: &'a str },
}

/// Routes by method and path (`:path`, query string ignored).
pub fn route<'a>(cfg: &'a Config, method: &str, path: &'a str) -> Route<'a> {
    if method != "POST" {
        return Route::Pass;
    }
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut segs = path.split('/').filter(|s| !s.is_empty());
    for want in &cfg.prefix {
        if segs.next() != Some(want.as_str()) {
            return Route::Pass;
        }
    }
    let rest: Vec<&str> = segs.collect();
    match (cfg.routing, rest.as_slice()) {
        (Routing::Path, [id]) => match cfg.find(id) {
            Some((source, s)) => Route::Source {
                source,
                tenant: &s.tenant,
            },
            None => Route::Reject,
        },
        (Routing::TenantPath, [tenant, id]) if tenant_ok(tenant) => match cfg.find(id) {
            Some((source, s)) if s.tenant == DEFAULT_TENANT || s.tenant == *tenant => {
                Route::Source { source, tenant }
            }
            _ => Route::Reject,
        },
        _ => Route::Reject,
    }
}
