//! The native harness: runs the filter's exact logic without a proxy.
//!
//!     hookstamp check CONFIG.json
//!     hookstamp stamp CONFIG.json --path P [--method M] [-H 'Name: value']... [--body FILE|-]
//!     hookstamp batch CONFIG.json < requests.jsonl

use hookstamp::config::{self, Loaded};
use hookstamp::resolve;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::process::ExitCode;

const USAGE: &str = "usage:
  hookstamp check CONFIG.json
  hookstamp stamp CONFIG.json --path P [--method M] [-H 'Name: value']... [--body FILE|-]
  hookstamp batch CONFIG.json < requests.jsonl

check  exits 0 with a one-line summary, or 1 with every config error, one a line.
stamp  prints the filter's answer for one request as JSON:
       {\"action\":\"forward\",\"headers\":[[name,value],...]}, {\"action\":\"reject\",\"status\":404}
       or {\"action\":\"pass\"}; exits 2 on a bad config.
batch  the same for many requests: one JSON object a line in, one answer a line out;
       a request is {\"method\":\"POST\",\"path\":P,\"headers\":[[name,value],...],
       \"body\":text} (or \"body_hex\":hex instead of body).";

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    let cmd = args.first().and_then(|a| a.to_str()).unwrap_or("");
    let result = match cmd {
        "check" => check(&args[1..]),
        "stamp" => stamp(&args[1..]),
        "batch" => batch(&args[1..]),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(usage("a command: check, stamp or batch")),
    };
    result.unwrap_or_else(|e| {
        eprintln!("{e}");
        ExitCode::from(2)
    })
}

fn usage(what: &str) -> String {
    format!("hookstamp: expected {what}\n{USAGE}")
}

/// Reads and checks a config file; `Err` holds every error.
fn load(path: &OsString) -> Result<Loaded, Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![format!(
            "config: cannot read {}: {e}",
            path.to_string_lossy()
        )]
    })?;
    config::load(&text)
}

fn check(args: &[OsString]) -> Result<ExitCode, String> {
    let [path] = args else {
        return Err(usage("check CONFIG.json"));
    };
    match load(path) {
        Ok(l) => {
            for w in &l.warnings {
                eprintln!("warning: {w}");
            }
            println!("{}", l.config.summary());
            Ok(ExitCode::SUCCESS)
        }
        Err(errs) => {
            for e in errs {
                println!("{e}");
            }
            Ok(ExitCode::from(1))
        }
    }
}

struct StampArgs {
    config: OsString,
    path: String,
    method: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Option<OsString>,
}

fn parse_stamp(args: &[OsString]) -> Result<StampArgs, String> {
    let mut it = args.iter();
    let config = it.next().ok_or_else(|| usage("stamp CONFIG.json"))?.clone();
    let mut a = StampArgs {
        config,
        path: String::new(),
        method: "POST".into(),
        headers: Vec::new(),
        body: None,
    };
    let mut have_path = false;
    while let Some(flag) = it.next() {
        let flag = flag.to_string_lossy();
        let value = it
            .next()
            .ok_or_else(|| usage(&format!("a value after {flag}")))?;
        let text = || {
            value
                .to_str()
                .map(str::to_owned)
                .ok_or(format!("{flag}: not UTF-8"))
        };
        match flag.as_ref() {
            "--path" => {
                a.path = text()?;
                have_path = true;
            }
            "--method" => a.method = text()?,
            "-H" | "--header" => a.headers.push(header(value.as_bytes())?),
            "--body" => a.body = Some(value.clone()),
            other => return Err(usage(&format!("a known flag, not {other}"))),
        }
    }
    if !have_path {
        return Err(usage("--path"));
    }
    Ok(a)
}

/// `Name: value` as curl takes it: leading blanks of the value dropped.
fn header(raw: &[u8]) -> Result<(String, Vec<u8>), String> {
    let colon = raw
        .iter()
        .position(|&b| b == b':')
        .ok_or("-H takes 'Name: value'")?;
    let name = std::str::from_utf8(&raw[..colon]).map_err(|_| "-H: header name is not UTF-8")?;
    let mut value = &raw[colon + 1..];
    while let [b' ' | b'\t', rest @ ..] = value {
        value = rest;
    }
    Ok((name.trim().to_ascii_lowercase(), value.to_vec()))
}

fn stamp(args: &[OsString]) -> Result<ExitCode, String> {
    let a = parse_stamp(args)?;
    let loaded = match load(&a.config) {
        Ok(l) => l,
        Err(errs) => return Err(errs.join("\n")),
    };
    let body = match &a.body {
        None => Vec::new(),
        Some(p) if p == "-" => {
            let mut b = Vec::new();
            std::io::stdin()
                .read_to_end(&mut b)
                .map_err(|e| format!("--body -: {e}"))?;
            b
        }
        Some(p) => std::fs::read(p).map_err(|e| format!("--body {}: {e}", p.to_string_lossy()))?,
    };
    let req = Request {
        method: a.method,
        path: a.path,
        headers: a.headers,
        body,
    };
    println!("{}", req.answer(&loaded.config));
    Ok(ExitCode::SUCCESS)
}

/// A request as the harness takes it.
struct Request {
    method: String,
    path: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

impl Request {
    /// The filter's answer, as one line of JSON.
    fn answer(&self, cfg: &config::Config) -> String {
        resolve::handle(cfg, &self.method, &self.path, &self.headers, &self.body)
            .to_json()
            .to_string()
    }
}

/// One request of a batch, as read from a JSON line.
fn batch_request(line: &str) -> Result<Request, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
    let text = |k: &str| v.get(k).and_then(|x| x.as_str());
    let method = text("method").unwrap_or("POST").to_owned();
    let path = text("path").ok_or("path is required")?.to_owned();
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
        method,
        path,
        headers,
        body,
    })
}

fn batch(args: &[OsString]) -> Result<ExitCode, String> {
    let [path] = args else {
        return Err(usage("batch CONFIG.json"));
    };
    let loaded = load(path).map_err(|errs| errs.join("\n"))?;
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for (n, line) in std::io::BufRead::lines(stdin.lock()).enumerate() {
        let line = line.map_err(|e| format!("stdin: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        let req = batch_request(&line).map_err(|e| format!("line {}: {e}", n + 1))?;
        std::io::Write::write_fmt(&mut out, format_args!("{}\n", req.answer(&loaded.config)))
            .map_err(|e| e.to_string())?;
    }
    Ok(ExitCode::SUCCESS)
}
