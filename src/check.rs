//! The `check` and `vars` commands: every configuration a file holds,
//! checked as its deployment would load it, and the variables each reads.

use crate::locate::Located;
use crate::{config_text, configs, env_of, file_or_help, usage, EnvMode, CHECK_HELP, VARS_HELP};
use hookstamp::config::{self, Loaded};
use lexopt::prelude::*;
use std::ffi::OsString;
use std::process::ExitCode;

/// `check`'s options and its FILE.
struct CheckArgs {
    path: OsString,
    wasmplugin: bool,
    strict: bool,
    mode: EnvMode,
}

fn check_args(p: &mut lexopt::Parser) -> Result<CheckArgs, String> {
    let mut path = None;
    let (mut wasmplugin, mut strict, mut mode) = (false, false, EnvMode::Values);
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("deployment") => {
                let v = p.value().map_err(|e| e.to_string())?;
                wasmplugin = match v.to_str() {
                    Some("envoy") => false,
                    Some("wasmplugin") => true,
                    _ => return Err(usage("--deployment envoy or wasmplugin")),
                };
            }
            Long("env") => {
                let v = p.value().map_err(|e| e.to_string())?;
                mode = match v.to_str() {
                    Some("values") => EnvMode::Values,
                    Some("names") => EnvMode::Names,
                    _ => return Err(usage("--env values or names")),
                };
            }
            Long("strict") => strict = true,
            other => file_or_help(other, &mut path, CHECK_HELP)?,
        }
    }
    let path = path.ok_or_else(|| usage("FILE"))?;
    Ok(CheckArgs {
        path,
        wasmplugin,
        strict,
        mode,
    })
}

pub fn check(p: &mut lexopt::Parser) -> Result<ExitCode, String> {
    let args = check_args(p)?;
    let (name, found) = match configs(&args.path) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{e}");
            return Ok(ExitCode::from(1));
        }
    };
    let many = found.len() > 1 || found.first().is_some_and(|f| f.place != name);
    let mut failed = false;
    for f in &found {
        let prefix = if many {
            format!("{}: ", f.place)
        } else {
            String::new()
        };
        failed |= check_one(f, &prefix, &args);
    }
    Ok(ExitCode::from(u8::from(failed)))
}

/// Checks one found configuration, saying its summary (stdout) or its
/// errors, and its warnings (stderr); whether it fails.
fn check_one(f: &Located, prefix: &str, args: &CheckArgs) -> bool {
    let (result, mut warnings) = config::load_reporting(&config_text(f), &env_of(f, args.mode));
    // The buffer-limit warning is for a filter that cannot see its
    // listener: where the file shows a listener limit that holds
    // max_json_bytes, it does not apply.
    let max = match &result {
        Ok(l) => Some(l.config.max_json_bytes as u64),
        Err(_) => stated_max_json_bytes(f),
    };
    if f.buffer_limit.zip(max).is_some_and(|(b, max)| b >= max) {
        warnings.retain(|w| !w.contains(config::BUFFER_LIMIT_WARNING));
    }
    let mut errs = unpassed(f);
    match &result {
        Ok(l) if args.wasmplugin || !f.holds_headers => errs.extend(body_sources(l)),
        Ok(_) => warnings.extend(f.inline_secrets().into_iter().map(|name| {
            format!(
                "the secret variable {name} is given inline in the filter's \
                 vm_config key_values: Envoy's /config_dump and its debug log show it; give it \
                 through host_env_keys (Envoy's own environment) instead"
            )
        })),
        Err(e) => errs.extend(e.iter().cloned()),
    }
    // Warnings are said beside the errors too, never hidden by them.
    for w in &warnings {
        eprintln!("{prefix}warning: {w}");
    }
    for e in &errs {
        eprintln!("{prefix}{e}");
    }
    match result {
        Ok(l) if errs.is_empty() && f.holds_headers && !args.wasmplugin => {
            println!("{prefix}{}{}", l.config.summary(), mode_note(args.mode));
        }
        Ok(_) if errs.is_empty() => println!(
            "{prefix}ok for a deployment that cannot hold headers for a body (a WasmPlugin, Envoy Gateway){}",
            mode_note(args.mode)
        ),
        _ => {}
    }
    !errs.is_empty() || (args.strict && !warnings.is_empty())
}

/// The max_json_bytes a configuration that does not load states, if it
/// states one: what the buffer-limit warning was said for.
fn stated_max_json_bytes(f: &Located) -> Option<u64> {
    let v: serde_json::Value = serde_json::from_str(&config_text(f)).ok()?;
    v.get("max_json_bytes")?.as_u64()
}

/// Which mode ran, said after each summary.
fn mode_note(mode: EnvMode) -> &'static str {
    match mode {
        EnvMode::Values => "",
        EnvMode::Names => {
            " (names checked: each secret's variable is passed to the VM; values not read)"
        }
    }
}

/// The variables the configuration reads (`{"env": NAME}`: secrets, seal
/// keys) that its deployment does not pass to the VM: the filter cannot
/// read them, its configuration fails, and Envoy refuses it.
fn unpassed(f: &Located) -> Vec<String> {
    let Some(vm) = &f.vm else {
        return Vec::new();
    };
    f.unpassed()
        .into_iter()
        .map(|n| {
            format!(
                "the configuration reads the variable {n} ({{\"env\": \"{n}\"}}), which is not passed to the filter's VM: \
                 add it to {} (the filter cannot read it otherwise, and the configuration is refused)",
                vm.field
            )
        })
        .collect()
}

pub fn vars(p: &mut lexopt::Parser) -> Result<ExitCode, String> {
    let mut path = None;
    let mut also = Vec::new();
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("add-from") => {
                let var = p.value().map_err(|e| e.to_string())?;
                let var = var.to_string_lossy().into_owned();
                also = names_in(&var)?;
            }
            other => file_or_help(other, &mut path, VARS_HELP)?,
        }
    }
    let (_, found) = configs(&path.ok_or_else(|| usage("FILE"))?)?;
    for f in &found {
        let line = serde_json::json!({
            "place": f.place,
            "reads": f.reads(),
            "wasm_config": f.vm.as_ref().and_then(|vm| vm.at.as_ref()),
            "host_env_keys": f.host_env_keys(&also),
        });
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The variable names the environment variable `var` lists (separated by
/// commas or blanks; none where it is not set); an entry that is no name
/// (a secret pasted in its place) is refused without being shown.
fn names_in(var: &str) -> Result<Vec<String>, String> {
    let list = std::env::var(var).unwrap_or_default();
    let names: Vec<String> = list
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .collect();
    if names.iter().all(|n| hookstamp::names::env_name_ok(n)) {
        return Ok(names);
    }
    Err(format!(
        "{var} holds an entry that is not a variable name ({}); not shown",
        hookstamp::names::ENV_NAME_FORM
    ))
}

/// A body source held under a WasmPlugin waits for a body Envoy never
/// hands it (answered 408 at max_hold_ms): an error for that deployment.
fn body_sources(l: &Loaded) -> Vec<String> {
    l.config
        .sources
        .iter()
        .filter(|s| s.needs_body())
        .map(|s| {
            format!(
                "source '{}': it reads the body (JSON keys or a signature), which needs allow_on_headers_stop_iteration: true; \
                 Istio's WasmPlugin cannot set it (use the EnvoyFilter form, or header keys with verify \"mode\": \"stream\")",
                s.id
            )
        })
        .collect()
}
