//! Config parsing and checking: never a panic; a config that loads routes
//! each of its sources, and loads the same way twice.
#![no_main]

use hookstamp::config::{self, Routing};
use hookstamp::route::{self, Route};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let first = config::load(text);
    let again = config::load(text);
    match (&first, &again) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.warnings, b.warnings);
            let cfg = &a.config;
            let _ = cfg.summary();
            for (i, s) in cfg.sources.iter().enumerate() {
                let prefix: String = cfg.prefix.iter().map(|p| format!("/{p}")).collect();
                let path = match cfg.routing {
                    Routing::Path => format!("{prefix}/{}", s.id),
                    Routing::TenantPath => format!("{prefix}/{}/{}", s.tenant, s.id),
                };
                match route::route(cfg, "POST", &path) {
                    Route::Source { source, .. } => assert_eq!(source, i),
                    other => panic!("{path} routed to {other:?}"),
                }
            }
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b);
            assert!(!a.is_empty());
        }
        _ => panic!("loading the same config twice differed"),
    }
});
