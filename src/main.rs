//! The native harness: runs the filter's exact logic without a proxy.

mod locate;

use hookstamp::config::{self, Loaded};
use hookstamp::decide;
use lexopt::prelude::*;
use locate::Located;
use std::ffi::OsString;
use std::io::{BufRead, Read, Write};
use std::process::ExitCode;

const SYNOPSIS: &str = "usage:
  hookstamp check FILE|- [--deployment envoy|wasmplugin] [--env values|names] [--strict]
  hookstamp stamp FILE --path P [--method M] [-H 'Name: value']... [--body FILE|-] [--now UNIX_SECONDS] [--config N|TEXT]
  hookstamp explain FILE --path P [--method M] [-H 'Name: value']... [--body FILE|-] [--now UNIX_SECONDS] [--config N|TEXT]
  hookstamp batch FILE [--now UNIX_SECONDS] [--config N|TEXT] < requests.jsonl
  hookstamp vars FILE [--add-from VAR]
  hookstamp COMMAND --help
  hookstamp --version";

const CHECK_HELP: &str =
    "check  FILE is a plugin configuration (JSON or YAML), an Envoy bootstrap or
       listener, or Istio / Envoy Gateway manifests (- reads it from standard
       input): every hookstamp configuration in it is checked, named by where
       it was found. Exits 0 with a one-line summary each (and its warnings,
       on stderr), or 1 with every config error and every warning, one a line
       (on stderr). A WasmPlugin or a filter without
       allow_on_headers_stop_iteration also refuses sources that read the body.
       The options, before or after FILE:
       --deployment envoy|wasmplugin  where the filter runs: wasmplugin refuses
                      sources that read the body, as for a WasmPlugin (default: envoy)
       --env values|names  values (the default): each secret's variable read from
                      the environment and the VM's key_values; names: only checked
                      to be passed to the VM, no value read (CI)
       --strict       a warning fails too";

const STAMP_HELP: &str = "stamp  FILE is any file check reads; where it holds several configurations,
       --config N (1-based, as check lists them) or --config TEXT (part of
       the configuration's place, e.g. a manifest's name) chooses one.
       Prints the filter's answer for one request as JSON:
       {\"action\":\"forward\",\"headers\":[[name,value],...]}, {\"action\":\"reject\",\"status\":404}
       (any error status the filter answers), {\"action\":\"answer\",\"status\":200,\"body\":B}
       (a handshake answered or an event dropped by the filter) or
       {\"action\":\"pass\"}; exits 2 on a bad config.
       Signatures are checked (and seals made) at --now (default: the clock),
       with secrets from the environment, as in the filter.";

const EXPLAIN_HELP: &str =
    "explain  why a request goes where it does: the route, the body, the signature,
       and for the dedupe key and each lane where the key was looked for, what
       was found (or why nothing was), and what became of it.";

const BATCH_HELP: &str =
    "batch  the same as stamp for many requests: one JSON object a line in, one answer a line out;
       a request is {\"method\":\"POST\",\"path\":P,\"headers\":[[name,value],...],
       \"body\":text} (or \"body_hex\":hex instead of body).";

const VARS_HELP: &str =
    "vars  the environment variables of each configuration check finds in FILE, by
       name (never a value), one JSON object a line: {\"place\":P,\"reads\":[NAME,...],
       \"wasm_config\":POINTER,\"host_env_keys\":[NAME,...]}. For a Wasm filter of a
       bootstrap or listener, wasm_config is the JSON pointer of its config in its
       document, and host_env_keys what its vm_config lists there once its VM gets
       every variable it reads (but those key_values give) and those the variable VAR
       of --add-from names (separated by commas or blanks) from Envoy's environment;
       both are null otherwise. make run builds its bootstrap with it.";

/// Every command's help, after the synopsis.
fn usage_text() -> String {
    [
        SYNOPSIS,
        CHECK_HELP,
        STAMP_HELP,
        EXPLAIN_HELP,
        BATCH_HELP,
        VARS_HELP,
    ]
    .join("\n\n")
}

fn main() -> ExitCode {
    run().unwrap_or_else(|e| {
        eprintln!("hookstamp: {e}");
        ExitCode::from(2)
    })
}

fn run() -> Result<ExitCode, String> {
    let mut p = lexopt::Parser::from_env();
    let cmd = match p.next().map_err(|e| e.to_string())? {
        Some(Value(v)) => v.string().map_err(|e| e.to_string())?,
        Some(Long("version")) => {
            println!("hookstamp {}", env!("CARGO_PKG_VERSION"));
            return Ok(ExitCode::SUCCESS);
        }
        Some(Short('h') | Long("help")) => {
            println!("{}", usage_text());
            return Ok(ExitCode::SUCCESS);
        }
        _ => return Err(usage("a command: check, stamp, explain, batch or vars")),
    };
    match cmd.as_str() {
        "check" => check(&mut p),
        "stamp" => stamp(&mut p),
        "batch" => batch(&mut p),
        "explain" => explain(&mut p),
        "vars" => vars(&mut p),
        "help" => {
            println!("{}", usage_text());
            Ok(ExitCode::SUCCESS)
        }
        other => Err(usage(&format!(
            "a command (check, stamp, explain, batch or vars), not {other:?}"
        ))),
    }
}

fn usage(what: &str) -> String {
    format!("expected {what}\n{SYNOPSIS}")
}

/// Takes the command's FILE (its one positional argument, before or after
/// the options) or its `--help`; anything else is the caller's to match.
fn file_or_help(
    arg: lexopt::Arg<'_>,
    file: &mut Option<OsString>,
    help: &str,
) -> Result<(), String> {
    match arg {
        Value(v) if file.is_none() => {
            *file = Some(v);
            Ok(())
        }
        Short('h') | Long("help") => {
            println!("{help}");
            std::process::exit(0)
        }
        other => Err(other.unexpected().to_string()),
    }
}

/// A file's text, and its name in messages (`-`: standard input).
fn read_input(path: &OsString) -> Result<(String, String), String> {
    if path == "-" {
        let mut t = String::new();
        std::io::stdin()
            .read_to_string(&mut t)
            .map_err(|e| format!("config: cannot read standard input: {e}"))?;
        return Ok((t, "standard input".to_owned()));
    }
    let name = path.to_string_lossy().into_owned();
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("config: cannot read {name}: {e}"))?;
    Ok((text, name))
}

/// Every hookstamp configuration in a file, as `check` reads it: a plugin
/// configuration (JSON or YAML), an Envoy bootstrap or listener, or Istio /
/// Envoy Gateway manifests.
fn configs(path: &OsString) -> Result<(String, Vec<Located>), String> {
    let (text, name) = read_input(path)?;
    match locate::find(&text, &name) {
        Ok(f) if f.is_empty() => Err(format!(
            "config: no hookstamp configuration in {name} (a plugin configuration, an Envoy bootstrap or listener, or Istio / Envoy Gateway manifests)"
        )),
        Ok(f) => Ok((name, f)),
        Err(e) => Err(format!("config: {e}")),
    }
}

/// How the secrets' variables are read: their values (the environment and
/// the VM's inline variables), or their names only (CI, where no secret is
/// at hand: each variable must be passed to the VM, its value is not read).
#[derive(Clone, Copy, PartialEq, Eq)]
enum EnvMode {
    Values,
    Names,
}

/// A value that loads as any secret (a `whsec_` one too), for names mode.
const NAMES_ONLY: &str = "whsec_bmFtZXMgb25seQ==";

/// The environment a found configuration loads with.
fn env_of(f: &Located, mode: EnvMode) -> impl Fn(&str) -> Option<String> {
    let vars = f.env.clone();
    move |n: &str| match mode {
        EnvMode::Names => Some(NAMES_ONLY.to_owned()),
        EnvMode::Values => vars
            .iter()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(n).ok()),
    }
}

/// The text `config::load` takes.
fn config_text(f: &Located) -> String {
    match &f.config {
        serde_json::Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// The one configuration a request command runs: the only one in the
/// file, or the one `select` names (a 1-based index, or text its place
/// contains).
fn load(path: &OsString, select: Option<&str>) -> Result<Loaded, String> {
    let (name, found) = configs(path)?;
    let list = || {
        found
            .iter()
            .enumerate()
            .map(|(i, f)| format!("  {}: {}", i + 1, f.place))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let chosen: Vec<&Located> = match select {
        None => found.iter().collect(),
        Some(s) => match s.parse::<usize>() {
            Ok(i) => found.get(i.wrapping_sub(1)).into_iter().collect(),
            Err(_) => found.iter().filter(|f| f.place.contains(s)).collect(),
        },
    };
    let f = match chosen.as_slice() {
        [one] => *one,
        [] => {
            return Err(format!(
                "config: --config {:?} names none of the configurations in {name}:\n{}",
                select.unwrap_or_default(),
                list()
            ))
        }
        _ => {
            return Err(format!(
                "config: {name} holds {} configurations: choose one with --config N or --config TEXT (part of its place):\n{}",
                chosen.len(),
                list()
            ))
        }
    };
    config::load_with_env(&config_text(f), &env_of(f, EnvMode::Values))
        .map_err(|errs| errs.join("\n"))
}

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

fn check(p: &mut lexopt::Parser) -> Result<ExitCode, String> {
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

fn vars(p: &mut lexopt::Parser) -> Result<ExitCode, String> {
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

/// A request as the harness takes it.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Request {
    /// The filter's answer at `now` (Unix seconds), as one line of JSON.
    fn answer(&self, cfg: &config::Config, now: Option<u64>) -> String {
        let (m, p, h, b) = (&self.method, &self.path, &self.headers, &self.body);
        let outcome = match now {
            Some(t) => decide::decide(cfg, m, p, h, b, t).outcome,
            None => decide::decide(cfg, m, p, h, b, decide::now_s()).outcome,
        };
        hookstamp::wire::outcome(&outcome).to_string()
    }
}

fn now_arg(p: &mut lexopt::Parser) -> Result<u64, String> {
    let v = p.value().map_err(|e| e.to_string())?;
    v.to_str()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| usage("--now UNIX_SECONDS"))
}

/// A request from the command line, and the time it is checked at.
fn request_args(
    p: &mut lexopt::Parser,
    explaining: bool,
) -> Result<(Loaded, Request, Option<u64>), String> {
    let help = if explaining { EXPLAIN_HELP } else { STAMP_HELP };
    let mut config = None;
    let mut req = Request {
        method: "POST".into(),
        path: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    let mut body: Option<OsString> = None;
    let mut now = None;
    let mut select = None;
    let mut have_path = false;
    let text = |p: &mut lexopt::Parser| -> Result<String, String> {
        p.value()
            .map_err(|e| e.to_string())?
            .into_string()
            .map_err(|v| format!("{}: not UTF-8", v.to_string_lossy()))
    };
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("path") => {
                req.path = text(p)?;
                have_path = true;
            }
            Long("method") => req.method = text(p)?,
            Short('H') | Long("header") => req.headers.push(header(&text(p)?)?),
            Long("body") => body = Some(p.value().map_err(|e| e.to_string())?),
            Long("now") => now = Some(now_arg(p)?),
            Long("config") => select = Some(text(p)?),
            other => file_or_help(other, &mut config, help)?,
        }
    }
    let config = config.ok_or_else(|| usage("FILE"))?;
    if !have_path {
        return Err(usage("--path"));
    }
    // Repeats joined as Envoy joins them, so the answer is the filter's.
    req.headers = hookstamp::pairs::as_envoy_gives(&req.headers);
    let loaded = load(&config, select.as_deref())?;
    req.body = match &body {
        None => Vec::new(),
        Some(b) if b == "-" => {
            let mut buf = Vec::new();
            std::io::stdin()
                .read_to_end(&mut buf)
                .map_err(|e| format!("--body -: {e}"))?;
            buf
        }
        Some(b) => std::fs::read(b).map_err(|e| format!("--body {}: {e}", b.to_string_lossy()))?,
    };
    Ok((loaded, req, now))
}

fn stamp(p: &mut lexopt::Parser) -> Result<ExitCode, String> {
    let (loaded, req, now) = request_args(p, false)?;
    println!("{}", req.answer(&loaded.config, now));
    Ok(ExitCode::SUCCESS)
}

fn explain(p: &mut lexopt::Parser) -> Result<ExitCode, String> {
    let (loaded, req, now) = request_args(p, true)?;
    let now = now.unwrap_or_else(decide::now_s);
    for line in hookstamp::explain::explain(
        &loaded.config,
        &req.method,
        &req.path,
        &req.headers,
        &req.body,
        now,
    ) {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `Name: value` as curl takes it: leading blanks of the value dropped.
fn header(raw: &str) -> Result<(String, Vec<u8>), String> {
    let (name, value) = raw.split_once(':').ok_or("-H takes 'Name: value'")?;
    let value = value.trim_start_matches([' ', '\t']);
    Ok((name.trim().to_ascii_lowercase(), value.as_bytes().to_vec()))
}

/// One request of a batch, as read from a JSON line.
fn batch_request(line: &str) -> Result<Request, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str());
    let mut headers = Vec::new();
    for h in v
        .get("headers")
        .and_then(|h| h.as_array())
        .into_iter()
        .flatten()
    {
        match (
            h.get(0).and_then(|x| x.as_str()),
            h.get(1).and_then(|x| x.as_str()),
        ) {
            (Some(n), Some(val)) => headers.push((n.to_ascii_lowercase(), val.as_bytes().to_vec())),
            _ => return Err("headers are [name, value] pairs of strings".into()),
        }
    }
    let body = match (text("body"), text("body_hex")) {
        (Some(b), _) => b.as_bytes().to_vec(),
        (None, Some(h)) => hex::decode(h).map_err(|e| format!("body_hex: {e}"))?,
        (None, None) => Vec::new(),
    };
    Ok(Request {
        method: text("method").unwrap_or("POST").to_owned(),
        path: text("path").ok_or("path is required")?.to_owned(),
        headers: hookstamp::pairs::as_envoy_gives(&headers),
        body,
    })
}

fn batch(p: &mut lexopt::Parser) -> Result<ExitCode, String> {
    let mut config = None;
    let mut now = None;
    let mut select = None;
    while let Some(arg) = p.next().map_err(|e| e.to_string())? {
        match arg {
            Long("now") => now = Some(now_arg(p)?),
            Long("config") => {
                let v = p.value().map_err(|e| e.to_string())?;
                select = Some(v.to_string_lossy().into_owned());
            }
            other => file_or_help(other, &mut config, BATCH_HELP)?,
        }
    }
    let config = config.ok_or_else(|| usage("FILE"))?;
    let loaded = load(&config, select.as_deref())?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let req = batch_request(&line).map_err(|e| format!("line {}: {e}", n + 1))?;
        writeln!(out, "{}", req.answer(&loaded.config, now)).map_err(|e| e.to_string())?;
    }
    Ok(ExitCode::SUCCESS)
}
