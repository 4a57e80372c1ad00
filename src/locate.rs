//! Every hookstamp configuration in a file as users have it: the plugin
//! configuration itself (JSON or YAML), an Envoy bootstrap or listener
//! (JSON or YAML), or Kubernetes manifests (an Istio EnvoyFilter or
//! WasmPlugin, an Envoy Gateway EnvoyExtensionPolicy), each found with a
//! name for where it was, what its deployment passes the VM, and the
//! environment variables it reads.

use hookstamp::names::env_name_ok;
use serde_json::Value;

/// One configuration found in a file.
pub struct Located {
    /// Where: the document and the path within it.
    pub place: String,
    /// The plugin configuration, as JSON.
    pub config: Value,
    /// Variables the filter's VM gets inline (`environment_variables.key_values`,
    /// a WasmPlugin's `INLINE` env).
    pub env: Vec<(String, String)>,
    /// What the deployment gives the VM from the proxy's own environment;
    /// `None` for a bare plugin configuration, which says nothing of its
    /// VM.
    pub vm: Option<Vm>,
    /// The enclosing listener's `per_connection_buffer_limit_bytes`, where
    /// the file sets one.
    pub buffer_limit: Option<u64>,
    /// Whether the deployment can hold headers for a body
    /// (`allow_on_headers_stop_iteration`; never in a WasmPlugin).
    pub holds_headers: bool,
}

/// The variables a VM gets from the proxy's environment, and the field
/// that lists them.
pub struct Vm {
    pub host_keys: Vec<String>,
    pub field: &'static str,
    /// For a Wasm filter of a bootstrap or listener: the JSON pointer,
    /// within its document, of the filter's `config` (which holds
    /// `vm_config.environment_variables`).
    pub at: Option<String>,
}

impl Located {
    /// Every variable the configuration reads with `{"env": NAME}` (its
    /// secrets, seal keys, a handshake's token), sorted: names only, and
    /// only what `names::env_name_ok` takes (the load refuses any other,
    /// unshown).
    pub fn reads(&self) -> Vec<String> {
        fn names(v: &Value, out: &mut Vec<String>) {
            match v {
                Value::Object(o) => {
                    if let (1, Some(Value::String(n))) = (o.len(), o.get("env")) {
                        out.push(n.clone());
                    }
                    o.values().for_each(|v| names(v, out));
                }
                Value::Array(a) => a.iter().for_each(|v| names(v, out)),
                _ => {}
            }
        }
        let mut read = Vec::new();
        match &self.config {
            Value::String(s) => match serde_json::from_str(s) {
                Ok(v) => names(&v, &mut read),
                Err(_) => return Vec::new(),
            },
            v => names(v, &mut read),
        }
        read.retain(|n| env_name_ok(n));
        read.sort();
        read.dedup();
        read
    }

    /// Whether its VM's inline variables (`key_values`) give `name`.
    fn inline(&self, name: &str) -> bool {
        self.env.iter().any(|(k, _)| k == name)
    }

    /// The variables it reads that its deployment passes the VM neither
    /// from the proxy's environment nor inline: the filter cannot read
    /// them. Nothing for a configuration that says nothing of its VM.
    pub fn unpassed(&self) -> Vec<String> {
        let Some(vm) = &self.vm else {
            return Vec::new();
        };
        let mut read = self.reads();
        read.retain(|n| !vm.host_keys.contains(n) && !self.inline(n));
        read
    }

    /// The secret variables the VM's `key_values` give inline, where Envoy
    /// shows them.
    pub fn inline_secrets(&self) -> Vec<String> {
        let mut read = self.reads();
        read.retain(|n| self.inline(n));
        read
    }

    /// A Wasm filter's `host_env_keys` once its VM gets every variable it
    /// reads and `also` from the proxy's environment: those it lists, then,
    /// sorted, the others (but those its `key_values` give). `None` where
    /// it is no Wasm filter of a bootstrap or listener.
    pub fn host_env_keys(&self, also: &[String]) -> Option<Vec<String>> {
        let vm = self.vm.as_ref().filter(|vm| vm.at.is_some())?;
        let mut want = self.reads();
        want.retain(|n| !self.inline(n));
        want.extend(also.iter().cloned());
        want.retain(|n| !vm.host_keys.contains(n));
        want.sort();
        want.dedup();
        Some(vm.host_keys.iter().cloned().chain(want).collect())
    }
}

const WASM_FILTER: &str = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
const DYNAMIC_MODULE_FILTER: &str =
    "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter";

/// Parses a file (JSON, or YAML with one or more documents) and finds every
/// hookstamp configuration in it, named after `file`.
pub fn find(text: &str, file: &str) -> Result<Vec<Located>, String> {
    let docs = documents(text)?;
    let mut out = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let name = doc_name(doc, i, docs.len(), file);
        if doc.get("sources").is_some() {
            out.push(plain(name, doc));
            continue;
        }
        match doc.get("kind").and_then(Value::as_str) {
            Some("EnvoyExtensionPolicy") => extension_policy(doc, &name, &mut out),
            Some("WasmPlugin") => wasm_plugin(doc, &name, &mut out),
            _ => {
                let before = out.len();
                walk(doc, &name, ("", ""), None, &mut out);
                // Nothing of Envoy's or Kubernetes' in it: it is meant as a
                // plugin configuration, and checking it says what it lacks.
                let bare = doc.get("kind").is_none() && doc.get("static_resources").is_none();
                if out.len() == before && bare {
                    out.push(plain(name, doc));
                }
            }
        }
    }
    Ok(out)
}

/// The documents of a file: one JSON value, or every YAML document that is
/// not empty.
fn documents(text: &str) -> Result<Vec<Value>, String> {
    let json_like = text.trim_start().starts_with(['{', '[']);
    match serde_json::from_str::<Value>(text) {
        Ok(v) => Ok(vec![v]),
        // Text that starts as JSON is JSON: its error is the JSON one.
        Err(e) if json_like => Err(format!("not valid JSON: {e}")),
        Err(json_err) => {
            let mut docs = Vec::new();
            for d in serde_yaml_ng::Deserializer::from_str(text) {
                let v = <Value as serde::Deserialize>::deserialize(d)
                    .map_err(|e| format!("neither JSON ({json_err}) nor YAML ({e})"))?;
                if !v.is_null() {
                    docs.push(v);
                }
            }
            Ok(docs)
        }
    }
}

/// A plugin configuration as it is, with no deployment around it.
fn plain(place: String, c: &Value) -> Located {
    Located {
        place,
        config: c.clone(),
        env: Vec::new(),
        vm: None,
        buffer_limit: None,
        holds_headers: true,
    }
}

/// Istio's WasmPlugin and Envoy Gateway's policy: neither can hold headers
/// for a body.
fn headless(
    place: String,
    c: &Value,
    env: Vec<(String, String)>,
    host_keys: Vec<String>,
    field: &'static str,
) -> Located {
    Located {
        place,
        config: c.clone(),
        env,
        vm: Some(Vm {
            host_keys,
            field,
            at: None,
        }),
        buffer_limit: None,
        holds_headers: false,
    }
}

/// Envoy Gateway's EnvoyExtensionPolicy: its Wasm filters' configurations,
/// and its dynamic modules'.
fn extension_policy(doc: &Value, name: &str, out: &mut Vec<Located>) {
    let wasm = doc.pointer("/spec/wasm").and_then(Value::as_array);
    for (k, w) in wasm.into_iter().flatten().enumerate() {
        if let Some(c) = w.get("config").filter(|c| c.get("sources").is_some()) {
            let keys = strings(w.pointer("/env/hostKeys"));
            let place = format!("{name} spec.wasm[{k}].config");
            out.push(headless(
                place,
                c,
                Vec::new(),
                keys,
                "spec.wasm[].env.hostKeys",
            ));
        }
    }
    // The dynamic module: it holds headers for a body, and reads Envoy's
    // own environment.
    let modules = doc.pointer("/spec/dynamicModule").and_then(Value::as_array);
    for (k, m) in modules.into_iter().flatten().enumerate() {
        if let Some(c) = m.get("config").filter(|c| c.get("sources").is_some()) {
            out.push(module(format!("{name} spec.dynamicModule[{k}].config"), c));
        }
    }
}

/// Istio's WasmPlugin: its plugin configuration and the VM's environment.
fn wasm_plugin(doc: &Value, name: &str, out: &mut Vec<Located>) {
    if let Some(c) = doc.pointer("/spec/pluginConfig") {
        let (inline, host) = wasmplugin_env(doc.pointer("/spec/vmConfig/env"));
        let field = "spec.vmConfig.env (valueFrom: HOST)";
        out.push(headless(
            format!("{name} spec.pluginConfig"),
            c,
            inline,
            host,
            field,
        ));
    }
}

/// A list of strings (others skipped).
fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| Some(x.as_str()?.to_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// A WasmPlugin's `vmConfig.env`: the inline variables (`valueFrom`
/// `INLINE`, the default) and the names taken from the host (`HOST`).
fn wasmplugin_env(v: Option<&Value>) -> (Vec<(String, String)>, Vec<String>) {
    let (mut inline, mut host) = (Vec::new(), Vec::new());
    for e in v.and_then(Value::as_array).into_iter().flatten() {
        let Some(name) = e.get("name").and_then(Value::as_str) else {
            continue;
        };
        match e.get("valueFrom").and_then(Value::as_str) {
            Some("HOST") => host.push(name.to_owned()),
            _ => inline.push((
                name.to_owned(),
                e.get("value")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
            )),
        }
    }
    (inline, host)
}

/// A document's name: the file's, its place among several, its kind and
/// metadata.name when it has them.
fn doc_name(doc: &Value, i: usize, n: usize, file: &str) -> String {
    let kind = doc.get("kind").and_then(Value::as_str);
    let meta = doc.pointer("/metadata/name").and_then(Value::as_str);
    let base = if n > 1 {
        format!("{file} document {}", i + 1)
    } else {
        file.to_owned()
    };
    match (kind, meta) {
        (Some(k), Some(m)) => format!("{base} ({k} {m})"),
        (Some(k), None) => format!("{base} ({k})"),
        _ => base,
    }
}

/// Finds Wasm filter configurations (`@type` ...wasm.v3.Wasm) and the
/// dynamic module's (`...DynamicModuleFilter` with `filter_name:
/// hookstamp`) anywhere.
/// `at` is where `v` is, as its place names it and as a JSON pointer;
/// `limit` is the enclosing listener's `per_connection_buffer_limit_bytes`.
fn walk(v: &Value, doc: &str, at: (&str, &str), limit: Option<u64>, out: &mut Vec<Located>) {
    let (path, pointer) = at;
    match v {
        Value::Object(o) => {
            if o.get("@type").and_then(Value::as_str) == Some(WASM_FILTER) {
                if let Some(mut f) = filter(o.get("config"), doc, path, pointer) {
                    f.buffer_limit = limit;
                    out.push(f);
                }
                return;
            }
            if o.get("@type").and_then(Value::as_str) == Some(DYNAMIC_MODULE_FILTER) {
                let ours = o.get("filter_name").and_then(Value::as_str) == Some("hookstamp");
                if let Some(c) = o.get("filter_config").and_then(|c| c.get("value")) {
                    if ours {
                        let place = format!("{doc} at {}", path.trim_start_matches('.'));
                        let mut f = module(place, &plugin_value(c));
                        f.buffer_limit = limit;
                        out.push(f);
                    }
                }
                return;
            }
            let limit = o
                .get("per_connection_buffer_limit_bytes")
                .and_then(buffer_limit)
                .or(limit);
            for (k, x) in o {
                let key = k.replace('~', "~0").replace('/', "~1");
                let at = (&format!("{path}.{k}")[..], &format!("{pointer}/{key}")[..]);
                walk(x, doc, at, limit, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let at = (&format!("{path}[{i}]")[..], &format!("{pointer}/{i}")[..]);
                walk(x, doc, at, limit, out);
            }
        }
        _ => {}
    }
}

/// A buffer limit as Envoy's JSON and YAML write it: a number, or a
/// `UInt32Value` as a string or `{value: n}`.
fn buffer_limit(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.parse().ok(),
        Value::Object(o) => o.get("value").and_then(buffer_limit),
        _ => None,
    }
}

/// A configuration as a filter's `value` holds it: JSON text (a
/// StringValue) or the object itself (a Struct).
fn plugin_value(v: &Value) -> Value {
    match v {
        Value::String(s) => serde_json::from_str(s).unwrap_or(Value::String(s.clone())),
        other => other.clone(),
    }
}

/// The dynamic module's configuration (`libhookstamp.so`): a native filter
/// holds headers for a body, and reads its secrets from Envoy's own
/// environment, with no VM to pass them.
fn module(place: String, config: &Value) -> Located {
    Located {
        place,
        config: config.clone(),
        env: Vec::new(),
        vm: None,
        buffer_limit: None,
        holds_headers: true,
    }
}

/// The plugin configuration of a Wasm filter's `config`, if it is ours
/// (a configuration with `sources`).
/// `pointer` is the filter's own, in its document.
fn filter(config: Option<&Value>, doc: &str, path: &str, pointer: &str) -> Option<Located> {
    let c = config?;
    let conf = c.get("configuration")?;
    let value = plugin_value(conf.get("value")?);
    if value.get("sources").is_none() && !value.is_string() {
        return None;
    }
    let env = c
        .pointer("/vm_config/environment_variables/key_values")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    let host_keys = strings(c.pointer("/vm_config/environment_variables/host_env_keys"));
    Some(Located {
        place: format!("{doc} at {}", path.trim_start_matches('.')),
        config: value,
        env,
        vm: Some(Vm {
            host_keys,
            field: "vm_config.environment_variables.host_env_keys",
            at: Some(format!("{pointer}/config")),
        }),
        buffer_limit: None,
        holds_headers: c.get("allow_on_headers_stop_iteration") == Some(&Value::Bool(true)),
    })
}
