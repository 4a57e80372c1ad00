//! The native harness: runs the filter's exact logic without a proxy.

mod check;
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
        "check" => check::check(&mut p),
        "stamp" => stamp(&mut p),
        "batch" => batch(&mut p),
        "explain" => explain(&mut p),
        "vars" => check::vars(&mut p),
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
