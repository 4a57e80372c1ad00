//! Which source a request belongs to.
//!
//! A request is ours when the normalised view of its path (see `path`) is
//! under the prefix: then it is stamped, or answered by the filter, never
//! passed around the stamps. Only a canonical path (the raw path, segment
//! for segment) names a source; any other spelling of a path under the
//! prefix is answered 404.

use crate::config::{Config, Source, DEFAULT_TENANT};
use crate::names::tenant_ok;
use crate::pairs::same;
use crate::path;
use crate::reply::{self, Reply};

/// Where a request goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Route<'a> {
    /// Not a webhook of ours (outside the prefix), or a GET or HEAD under
    /// it (an endpoint check, such as Meta's `hub.challenge`): untouched but
    /// for the stamp headers, which are stripped from every request.
    Pass,
    /// Under the prefix but names no source: answered 404 by the filter.
    UnknownSource,
    /// Under the prefix with a method other than POST, GET or HEAD (`post`
    /// included): answered 405 by the filter.
    MethodNotAllowed,
    /// A webhook of a configured source.
    Source(Target<'a>),
    /// A GET handshake of a source's (Meta's, the CRC): answered by the
    /// filter with this reply.
    Handshake(Target<'a>, Reply),
}

/// A routed webhook: its source (looked up once, here) and tenant.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    /// The source's place in the configuration (its metrics' index).
    pub index: usize,
    pub source: &'a Source,
    /// Borrowed from the config or the path.
    pub tenant: &'a str,
}

impl Target<'_> {
    /// The first secret the source has for the tenant (the one a handshake
    /// signs its answer with).
    pub fn first_secret(&self) -> Option<&crate::verify::Secret> {
        let v = self.source.verify.as_ref()?;
        v.secrets_for(self.tenant)?.first()
    }
}

impl PartialEq for Target<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.index == other.index && self.tenant == other.tenant
    }
}

impl Route<'_> {
    /// The filter's own answer, for a route it answers.
    pub fn answer(&self) -> Option<Reply> {
        match self {
            Route::UnknownSource => Some(reply::UNKNOWN_SOURCE),
            Route::MethodNotAllowed => Some(reply::METHOD_NOT_ALLOWED),
            Route::Handshake(_, r) => Some(r.clone()),
            Route::Pass | Route::Source(_) => None,
        }
    }
}

/// Routes by method and path (`:path`, query string ignored).
pub fn route<'a>(cfg: &'a Config, method: &str, path: &'a str) -> Route<'a> {
    // A POST to a source's path as the configuration spells it (nearly
    // every webhook's) is under the prefix by every reading `under` takes:
    // its segments are the prefix's, as it is spelled. Routed without
    // them, which cost such a request some 600 instructions in V8.
    if method == "POST" {
        // A source's own path, spelled as the configuration spells it: one
        // comparison, the answer `canonical` gives it.
        if let Some((index, source)) = cfg.own_path(path) {
            return Route::Source(Target {
                index,
                source,
                tenant: &source.tenant,
            });
        }
        // Its segments read once: the answer under the prefix too.
        let found = canonical(cfg, path);
        return if matches!(found, Route::Source(_)) || path::under(path, &cfg.prefix_view) {
            found
        } else {
            Route::Pass
        };
    }
    if !path::under(path, &cfg.prefix_view) {
        return Route::Pass;
    }
    match method {
        "GET" => handshake(cfg, path),
        "HEAD" => Route::Pass,
        _ => Route::MethodNotAllowed,
    }
}

/// A GET to a source with a GET handshake, answered where its query is
/// the handshake's; any other GET passes (an endpoint check).
fn handshake<'a>(cfg: &'a Config, path: &'a str) -> Route<'a> {
    let Route::Source(t) = canonical(cfg, path) else {
        return Route::Pass;
    };
    let Some(h) = t.source.handshake.as_ref().filter(|h| h.on_get()) else {
        return Route::Pass;
    };
    let query = path
        .split_once('?')
        .map_or("", |(_, q)| q.split('#').next().unwrap_or(""));
    match h.answer_get(query, t.first_secret()) {
        Some(r) => Route::Handshake(t, r),
        None => Route::Pass,
    }
}

/// The non-empty segments of a path between its `/`s, up to its query or
/// fragment: found as they are read, in one pass (a byte search: `/`, `?`
/// and `#` are ASCII, so every cut is a char boundary).
struct Segments<'a> {
    rest: &'a str,
}

impl<'a> Iterator for Segments<'a> {
    type Item = &'a str;
    fn next(&mut self) -> Option<&'a str> {
        while !self.rest.is_empty() {
            let r = self.rest;
            let end = r
                .bytes()
                .position(|b| matches!(b, b'/' | b'?' | b'#'))
                .unwrap_or(r.len());
            // After a `?` or a `#` (or at the end), no segment is left.
            self.rest = match r.as_bytes().get(end) {
                Some(b'/') => r.get(end + 1..).unwrap_or(""),
                _ => "",
            };
            match r.get(..end) {
                Some(seg) if !seg.is_empty() => return Some(seg),
                _ => {}
            }
        }
        None
    }
}

/// The source a canonical path names; anything else is rejected.
fn canonical<'a>(cfg: &'a Config, path: &'a str) -> Route<'a> {
    let mut segs = Segments { rest: path };
    for want in &cfg.prefix {
        if !segs
            .next()
            .is_some_and(|seg| same(seg.as_bytes(), want.as_bytes()))
        {
            return Route::UnknownSource;
        }
    }
    // At most two more segments name a source; a third is refused.
    let rest = [segs.next(), segs.next(), segs.next()];
    match rest {
        // By the path form a source has its own tenant, which a tenant
        // list (or per-tenant secrets) must name.
        [Some(id), None, _] => match cfg.find(id) {
            Some((index, s)) if s.routing.path() && s.accepts(&s.tenant) => Route::Source(Target {
                index,
                source: s,
                tenant: &s.tenant,
            }),
            _ => Route::UnknownSource,
        },
        [Some(tenant), Some(id), None] if tenant_ok(tenant) => match cfg.find(id) {
            Some((index, s))
                if s.routing.tenant_path()
                    && (s.tenant == DEFAULT_TENANT || s.tenant == *tenant)
                    && s.accepts(tenant) =>
            {
                Route::Source(Target {
                    index,
                    source: s,
                    tenant,
                })
            }
            _ => Route::UnknownSource,
        },
        _ => Route::UnknownSource,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The route of a POST without its own-path table: its segments
    /// matched, then the prefix.
    fn by_segments<'a>(cfg: &'a Config, path: &'a str) -> Route<'a> {
        let found = canonical(cfg, path);
        if matches!(found, Route::Source(_)) || path::under(path, &cfg.prefix_view) {
            found
        } else {
            Route::Pass
        }
    }

    fn config(prefix: &str) -> Config {
        let text = format!(
            r#"{{"prefix": "{prefix}", "routing": ["path", "tenant_path"], "sources": [
                {{"id": "stripe", "dedupe": "stripe"}},
                {{"id": "Git-Hub", "dedupe": "github", "tenants": ["acme", "default"]}},
                {{"id": "only", "dedupe": "github", "tenants": ["acme"]}},
                {{"id": "a.", "dedupe": "github", "tenant": "acme", "routing": "tenant_path"}}]}}"#
        );
        crate::config::load(&text)
            .map(|l| l.config)
            .unwrap_or_else(|e| panic!("{e:?}"))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// A POST's route is the same whether its path is a source's own,
        /// found in the table, or matched segment by segment.
        #[test]
        fn the_own_path_table_routes_as_the_segments_do(
            prefix in prop::sample::select(vec!["/webhooks", "/", "/Hooks/In"]),
            segs in prop::collection::vec(prop::sample::select(vec![
                "webhooks", "Webhooks", "Hooks", "In", "stripe", "Git-Hub", "git-hub",
                "only", "a.", "acme", "", ".", "..", "%2F", "x?y", "#f", "?"]), 0..5),
            slash in prop::sample::select(vec!["/", "//"]),
        ) {
            let cfg = config(prefix);
            let path = format!("/{}", segs.join(slash));
            prop_assert_eq!(route(&cfg, "POST", &path), by_segments(&cfg, &path), "{}", path);
        }
    }

    #[test]
    fn a_sources_own_path_is_in_the_table_for_its_own_tenant_only() {
        let cfg = config("/webhooks");
        let own = |p: &str| cfg.own_path(p).map(|(_, s)| s.id.as_str());
        assert_eq!(own("/webhooks/stripe"), Some("stripe"));
        assert_eq!(own("/webhooks/Git-Hub?x=1#f"), Some("Git-Hub"));
        assert_eq!(own("/webhooks/stripe#/x"), Some("stripe"));
        // Not its tenant's (a tenant list without it), nor the path form's.
        assert_eq!(own("/webhooks/only"), None);
        assert_eq!(own("/webhooks/a."), None);
        for p in [
            "/webhooks/git-hub",
            "/webhooks//stripe",
            "/webhooks/stripe/",
            "/webhooks",
        ] {
            assert_eq!(own(p), None, "{p}");
        }
    }
}
