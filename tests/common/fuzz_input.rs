//! What the fuzz targets check, shared with the native replay of the
//! committed corpus (tests/fuzz_regressions.rs), so a regression input is
//! checked the same way with or without libFuzzer.

use hookstamp::config;
use hookstamp::route::{self, Route};

/// Config: loads the same way twice; a config that loads routes each of its
/// sources. Panics on a violation.
pub fn check_config(data: &[u8]) {
    // Any bytes as Envoy might hand them over: an answer, never a panic.
    let _ = config::load_plugin_config(data);
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The same configuration as a Struct (YAML in Envoy) loads the same.
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        if v.is_object() {
            let as_struct = config::structpb::encode(&v);
            let (a, b) = (config::load(text), config::load_plugin_config(&as_struct));
            match (&a, &b) {
                (Ok(a), Ok(b)) => assert_eq!(a.config.summary(), b.config.summary()),
                // A Struct carries every number as a double: 1.0 is 1 there.
                _ => assert!(
                    a.is_err() || text.contains('.') || text.contains(['e', 'E']),
                    "{b:?}"
                ),
            }
        }
    }
    match (config::load(text), config::load(text)) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a.warnings, b.warnings);
            let cfg = &a.config;
            let _ = cfg.summary();
            for (i, s) in cfg.sources.iter().enumerate() {
                let prefix: String = cfg.prefix.iter().map(|p| format!("/{p}")).collect();
                // Each route form the source allows reaches it (a tenant
                // list's first tenant where it has one).
                let tenant = s
                    .tenants
                    .as_ref()
                    .and_then(|t| t.first())
                    .unwrap_or(&s.tenant);
                let mut paths = Vec::new();
                if s.routing.path() && s.accepts(&s.tenant) {
                    paths.push(format!("{prefix}/{}", s.id));
                }
                if s.routing.tenant_path() {
                    paths.push(format!("{prefix}/{tenant}/{}", s.id));
                }
                for path in paths {
                    match route::route(cfg, "POST", &path) {
                        Route::Source(t) => assert_eq!(t.index, i),
                        other => panic!("{path} routed to {other:?}"),
                    }
                }
            }
        }
        (Err(a), Err(b)) => {
            assert_eq!(a, b);
            assert!(!a.is_empty());
        }
        _ => panic!("loading the same config twice differed"),
    }
}

/// A resolve input: a config selector byte, then path, headers
/// ("name:value") and body separated by 0xFF bytes. The selector's two high
/// bits choose the method: POST, GET, PUT or `post`.
pub struct Input<'a> {
    pub config: usize,
    pub method: &'static str,
    pub path: String,
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: &'a [u8],
}

pub fn split(data: &[u8], configs: usize) -> Option<Input<'_>> {
    let (&sel, rest) = data.split_first()?;
    let mut parts = rest.split(|&b| b == 0xFF);
    let path = format!(
        "/{}",
        String::from_utf8_lossy(parts.next().unwrap_or_default())
    );
    let rest: Vec<&[u8]> = parts.collect();
    let mut headers = Vec::new();
    let mut body: &[u8] = &[];
    if let Some((last, hs)) = rest.split_last() {
        body = last;
        for h in hs {
            let mut kv = h.splitn(2, |&b| b == b':');
            let name = String::from_utf8_lossy(kv.next().unwrap_or_default()).to_ascii_lowercase();
            headers.push((name, kv.next().unwrap_or_default().to_vec()));
        }
    }
    Some(Input {
        config: usize::from(sel) % configs,
        method: ["POST", "GET", "PUT", "post"][usize::from(sel >> 6)],
        path,
        headers,
        body,
    })
}

/// The case tables' configurations, in file order.
pub fn table_configs(dir: &str) -> Vec<hookstamp::config::Config> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
        .iter()
        .map(|f| {
            let t: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(f).unwrap()).unwrap();
            let vars = t["env"].clone();
            let env = move |n: &str| vars.get(n).and_then(|v| v.as_str()).map(str::to_owned);
            config::load_with_env(&t["config"].to_string(), &env)
                .unwrap()
                .config
        })
        .collect()
}
