//! Why a hook went where it did: the route decision, what became of the
//! body, the signature, and for the dedupe key and every lane where the key
//! was looked for, what was found, and what became of it. The native
//! harness's `hookstamp explain`: it renders the one decision
//! (`decide::decide`, its `Outcome` and the facts it was made from) in
//! words, adding only descriptions (the form fields a body has, what a
//! JSON path stops at, which part of a signature failed).

use crate::config::{Config, Source};
use crate::decide::{self, Body, Decision, Outcome};
use crate::key::{BodyState, FormJson};
use crate::route::{Route, Target};

mod keys;
mod signature;

/// The explanation of one request, a line each.
pub fn explain<N, V>(
    cfg: &Config,
    method: &str,
    path: &str,
    headers: &[(N, V)],
    body: &[u8],
    now_s: u64,
) -> Vec<String>
where
    N: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let decision = decide::decide(cfg, method, path, headers, body, now_s);
    let mut out = vec![route_line(cfg, method, path, &decision.route)];
    let Route::Source(Target { source: src, .. }) = &decision.route else {
        return out;
    };
    out.push(body_line(cfg, src, body, &decision));
    let words = || signature::words(src, decision.signature.as_ref());
    match &decision.outcome {
        Outcome::Forward { stamped, .. } => {
            match &decision.signature {
                None => {}
                Some(Ok(())) => out.push(format!("signature: {}", words())),
                Some(Err(_)) => out.push(format!(
                    "signature: {} (flag mode): forwarded without its dedupe key, every lane keyless",
                    words()
                )),
            }
            keys::lines(&mut out, src, body, &decision, stamped);
        }
        Outcome::Refused(_) => {
            if let Some(r) = decision.outcome.reply() {
                out.push(format!(
                    "signature: {}: refused, answered {} {} ({})",
                    words(),
                    r.status,
                    r.body,
                    r.details
                ));
            }
        }
        Outcome::Dropped { event_type } => {
            let t = String::from_utf8_lossy(event_type).into_owned();
            let what = format!("events: {t:?} is dropped by the source's events rule");
            answered(&mut out, src, &decision, what);
        }
        Outcome::Handshake(_) => {
            let name = src.handshake.as_ref().map_or("", |h| h.name());
            answered(
                &mut out,
                src,
                &decision,
                format!("handshake: the {name} handshake"),
            );
        }
        Outcome::Pass | Outcome::Unrouted(_) => {}
    }
    out
}

/// Where the route sent the request, and for one it answers, why.
fn route_line(cfg: &Config, method: &str, path: &str, route: &Route) -> String {
    match route {
        Route::Pass => format!(
            "route: {method} {path} passes untouched: {}",
            if crate::path::under(path, &cfg.prefix_view) {
                "GET and HEAD under the prefix are endpoint checks"
            } else {
                "no reading of the path is under the prefix"
            }
        ),
        Route::MethodNotAllowed => format!("route: {method} under the prefix: answered 405 (only POST is stamped; GET and HEAD pass)"),
        Route::UnknownSource => format!(
            "route: {path} is under the prefix but is not a canonical path to a source: answered 404"
        ),
        Route::Handshake(Target { source, tenant, .. }, r) => {
            let name = source.handshake.as_ref().map_or("", |h| h.name());
            format!(
                "route: {method} {path}: source '{}', tenant '{tenant}': the {name} handshake, answered {} {} ({})",
                source.id, r.status, r.body, r.details
            )
        }
        Route::Source(Target { source, tenant, .. }) => {
            format!("route: {method} {path}: source '{}', tenant '{tenant}'", source.id)
        }
    }
}

fn body_line(cfg: &Config, src: &Source, body: &[u8], decision: &Decision) -> String {
    if src.streams() {
        return format!(
            "body: {} bytes, streamed through, its signature checked as it passes (mode stream)",
            body.len()
        );
    }
    if !src.needs_body() {
        return "body: not read (the source's keys come from headers)".to_owned();
    }
    let n = body.len();
    if matches!(decision.body, Some(Body::OverLimit)) {
        return format!(
            "body: {n} bytes, over max_json_bytes ({}): never read, JSON keys missing",
            cfg.max_json_bytes
        );
    }
    let Outcome::Forward { stamped, .. } = &decision.outcome else {
        return format!("body: {n} bytes");
    };
    match stamped.body {
        BodyState::Unread => format!("body: {n} bytes, read for its signature only"),
        BodyState::OverLimit => format!("body: {n} bytes, over max_json_bytes"),
        BodyState::Form(how) => {
            let names: Vec<String> = crate::form::form_fields(body)
                .iter()
                .map(|(k, _)| String::from_utf8_lossy(k).into_owned())
                .collect();
            let field = src.form_json.as_deref().unwrap_or_default();
            let json = match how {
                _ if src.paths.is_empty() => String::new(),
                FormJson::Body => "; the JSON paths read the body itself, valid JSON".to_owned(),
                FormJson::Field => format!("; the JSON paths read the field {field}"),
                FormJson::NoField => format!("; no field {field} for the JSON paths to read"),
                FormJson::NotJson if src.form_json.is_some() => {
                    format!("; the field {field} is not valid JSON")
                }
                FormJson::NotJson => {
                    "; the body is not valid JSON for the JSON paths (no form_json field is configured)"
                        .to_owned()
                }
            };
            format!(
                "body: {n} bytes, form-encoded (by its content-type), fields: {}{json}",
                names.join(", ")
            )
        }
        BodyState::Json => format!("body: {n} bytes, JSON"),
        // Where the scanner that read it stopped.
        BodyState::NotJson => match crate::json::scan(body, &[]) {
            Err(e) if e.offset < n => {
                format!(
                    "body: {n} bytes, not valid JSON: the scan stops at byte {}",
                    e.offset
                )
            }
            _ => format!("body: {n} bytes, not valid JSON: it ends before its value does"),
        },
    }
}

/// An answer of the filter's own that refuses nothing (a handshake, a
/// dropped event): the signature's line where it was checked, then what
/// was answered.
fn answered(out: &mut Vec<String>, src: &Source, decision: &Decision, what: String) {
    let Some(r) = decision.outcome.reply() else {
        return;
    };
    if decision.signature.is_some() {
        out.push(format!(
            "signature: {}",
            signature::words(src, decision.signature.as_ref())
        ));
    }
    out.push(format!(
        "{what}, answered {} {} ({}); nothing reaches the queue",
        r.status, r.body, r.details
    ));
}
