//! One source's check: its id, tenant and tenants, routing, store_headers,
//! dedupe, signature, sinks and affinity.

use super::bounds::{within, MAX_SINKS, MAX_TENANTS};
use super::diag::{Diags, Issue, Issues, Scope};
use super::fields::{field, routing_of, unknown_fields, Env};
use super::keys::KeyCtx;
use super::reads::{Ordered, Reads, StoreHeaders};
use super::sink::{check_sink, SinkCtx};
use super::{source_id_ok, tenant_ok, Delivery, Routing, Source, DEFAULT_TENANT};
use crate::dedupe::{self, Dedupe, DEFAULT_TTL_MS};
use crate::key::KeySource;
use crate::providers::{EventId, SchemePreset};
use serde_json::Value;

/// What a source's check needs from the top level.
pub(super) struct SourceCtx<'e> {
    pub(super) index: usize,
    pub(super) delivery: Delivery,
    pub(super) routing: Routing,
    /// The top-level `affinity` switch.
    pub(super) affinity: bool,
    pub(super) env: Env<'e>,
}

pub(super) fn check_source(ctx: &SourceCtx, v: &Value, d: &mut Diags) -> Option<Source> {
    let (i, delivery) = (ctx.index, ctx.delivery);
    let Some(obj) = v.as_object() else {
        d.push(&Scope::SourceAt(i), "not_an_object", "must be an object");
        return None;
    };
    let id = match obj.get("id") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            d.push(
                &Scope::SourceAt(i),
                "missing_id",
                "id is required and must be a string",
            );
            format!("#{i}")
        }
    };
    let scope = Scope::Source(id.clone());
    if obj.get("id").is_some_and(Value::is_string) && !source_id_ok(&id) {
        d.push(
            &scope,
            "bad_id",
            "id must match [A-Za-z0-9._-]{1,64} and not be \".\" or \"..\"",
        );
    }
    unknown_fields(
        obj,
        &[
            "id",
            "tenant",
            "tenants",
            "dedupe",
            "verify",
            "store_headers",
            "sinks",
            "affinity",
            "handshake",
            "event_type",
            "events",
            "form_json",
            "routing",
        ],
        &scope,
        d,
    );
    let tenant = match field(obj, "tenant") {
        None => DEFAULT_TENANT.to_owned(),
        Some(Value::String(t)) if tenant_ok(t) => t.clone(),
        Some(t) => {
            d.push(
                &scope,
                "bad_tenant",
                format!("tenant must match [A-Za-z0-9_-]{{1,64}}, got {t}"),
            );
            DEFAULT_TENANT.to_owned()
        }
    };
    let mut reads = Reads::default();
    let dedupe = field(obj, "dedupe")
        .and_then(|v| check_dedupe(v, &Scope::Dedupe(id.clone()), &mut reads, d));
    let store = check_store_headers(field(obj, "store_headers"), &scope, d);
    let mut lanes = Vec::new();
    let mut ordered = Ordered::default();
    match field(obj, "sinks") {
        None => {}
        Some(Value::Array(sinks)) => {
            if let Err(e) = within("sinks", MAX_SINKS, sinks.len()) {
                d.issue(&scope, e);
            }
            ordered.count = sinks.len();
            for (index, s) in sinks.iter().enumerate().take(MAX_SINKS) {
                if s.get("ordered") == Some(&Value::Bool(true)) {
                    ordered.ordered.push(index);
                }
                let ctx = SinkCtx {
                    id: &id,
                    index,
                    delivery,
                    store: &store,
                };
                if let Some(lane) = check_sink(&ctx, s, &mut reads, d) {
                    lanes.push(lane);
                }
            }
        }
        Some(_) => d.push(&scope, "not_a_list", "sinks must be a list"),
    }
    let routing = routing_of(field(obj, "routing"), &scope, d).unwrap_or(ctx.routing);
    let mut verify = field(obj, "verify")
        .and_then(|v| super::verify::check(v, &Scope::Verify(id.clone()), routing, ctx.env, d));
    let mut tenants = field(obj, "tenants").and_then(|v| check_tenants(v, &scope, routing, d));
    if let Some(crate::verify::Verify {
        secrets: crate::verify::Secrets::PerTenant(map),
        ..
    }) = &verify
    {
        let keyed: Vec<String> = map.iter().map(|(t, _)| t.clone()).collect();
        if tenants.as_ref().is_some_and(|t| *t != keyed) {
            d.push(
                &scope,
                "tenant_lists_differ",
                "tenants and per-tenant verify secrets name different tenants: give one of them",
            );
        }
        tenants = Some(keyed);
    }
    // A source of its own tenant is reached only as that tenant: a tenant
    // list without it leaves no route to the source.
    if let Some(list) = &tenants {
        if tenant != DEFAULT_TENANT && !list.contains(&tenant) {
            d.push(
                &scope,
                "unreachable",
                format!(
                    "tenant {tenant:?} is not among its tenants ({}): no route reaches the source",
                    list.join(", ")
                ),
            );
        }
    }
    // The event type: the source's own, or its preset's (the dedupe
    // preset's, else the scheme's).
    let preset = match field(obj, "dedupe") {
        Some(Value::String(p)) => Some(p.as_str()),
        Some(Value::Object(o)) => field(o, "preset").and_then(Value::as_str),
        _ => None,
    }
    .or_else(|| {
        field(obj, "verify")
            .and_then(|v| v.get("scheme"))
            .and_then(Value::as_str)
    });
    // A streamed signature holds no body: the preset's body type is not
    // inherited there.
    let holds_body = verify
        .as_ref()
        .is_some_and(|v| v.mode == crate::verify::Mode::Hold)
        || !reads.paths.is_empty()
        || !reads.forms.is_empty()
        || reads.body_hash;
    let event_type = super::events::event_type(obj, preset, holds_body, &mut reads, &scope, d);
    let events = field(obj, "events")
        .and_then(|v| super::events::events(v, event_type.is_some(), &scope, d));
    let form_json = match field(obj, "form_json") {
        None => None,
        Some(Value::String(f)) if !f.is_empty() => Some(f.clone()),
        Some(other) => {
            d.push(
                &scope,
                "bad_form_json",
                format!("form_json must be a form field name, got {other}"),
            );
            None
        }
    };
    // A form-encoded body is told from JSON by its content-type.
    let content_type = (!reads.forms.is_empty() || form_json.is_some())
        .then(|| match reads.header("content-type".to_owned()) {
            KeySource::Header(i) => Some(i),
            _ => None,
        })
        .flatten();
    if let Some(v) = &verify {
        unsigned_key_headers(v, dedupe.as_ref(), &lanes, &reads.headers, &id, d);
        // A type an events rule decides by is trusted as a key is.
        if let (Some(et), Some(_)) = (&event_type, &events) {
            unsigned_header(
                v,
                et,
                &reads.headers,
                Scope::Source(id.clone()),
                "the event type its events rule reads",
                d,
            );
        }
        let shared = matches!(v.secrets, crate::verify::Secrets::All(_));
        if shared && routing.tenant_path() && tenants.is_none() {
            d.warn(
                &Scope::Verify(id.clone()),
                "shared_secrets",
                "one secret list on a tenant_path route accepts a hook signed for one tenant as any \
                 other's (a new idempotency key each time): give per-tenant secrets or a tenants list",
            );
        }
    }
    let handshake = field(obj, "handshake")
        .and_then(|h| super::handshake::check(h, verify.as_ref(), &scope, ctx.env, d));
    // The CRC signs any token for anyone: no token-like body verifies.
    if let (Some(v), Some(crate::handshake::Handshake::Crc { .. })) = (verify.as_mut(), &handshake)
    {
        v.refuses_tokens = true;
    }
    // A streamed signature never holds the body: nothing may read it.
    if verify
        .as_ref()
        .is_some_and(|v| v.mode == crate::verify::Mode::Stream)
    {
        let mut reads_body = Vec::new();
        if !reads.paths.is_empty() || !reads.forms.is_empty() {
            reads_body.push("a key reads the body (json or form)");
        }
        if reads.body_hash {
            reads_body.push("a key is the body's sha256");
        }
        if handshake.as_ref().is_some_and(|h| !h.on_get()) {
            reads_body.push("its handshake reads the body");
        }
        if verify
            .as_ref()
            .is_some_and(|v| v.scheme == crate::verify::Scheme::Preset(SchemePreset::Twilio))
        {
            reads_body.push("twilio signs a form's sorted fields, which needs the whole body");
        }
        for what in reads_body {
            d.push(
                &Scope::Verify(id.clone()),
                "stream_reads_body",
                format!("mode \"stream\" never holds the body, but {what}: take the keys from headers, or use mode \"hold\""),
            );
        }
    }
    let affinity = super::affinity::check(
        field(obj, "affinity"),
        ctx.affinity,
        &lanes,
        &ordered,
        dedupe.is_some(),
        &scope,
        d,
    );
    Some(Source {
        id,
        tenant,
        dedupe,
        lanes,
        paths: reads.paths,
        headers: reads.headers,
        forms: reads.forms,
        form_json,
        content_type,
        verify,
        hashes_body: reads.body_hash,
        event_type,
        events,
        handshake,
        tenants,
        affinity,
        routing,
    })
}

/// A tenant allow-list: only on a `tenant_path` route.
pub(super) fn check_tenants(
    v: &Value,
    scope: &Scope,
    routing: Routing,
    d: &mut Diags,
) -> Option<Vec<String>> {
    if !routing.tenant_path() {
        d.push(
            scope,
            "needs_tenant_path",
            "tenants needs \"routing\": \"tenant_path\"",
        );
        return None;
    }
    let list = match v.as_array() {
        Some(l) if !l.is_empty() => l,
        _ => {
            d.push(
                scope,
                "bad_tenants",
                format!("tenants must be a non-empty list of tenants, got {v}"),
            );
            return None;
        }
    };
    if let Err(e) = within("tenants", MAX_TENANTS, list.len()) {
        d.issue(scope, e);
        return None;
    }
    let mut out = Vec::new();
    for t in list {
        match t.as_str() {
            Some(t) if tenant_ok(t) => out.push(t.to_owned()),
            _ => d.push(
                scope,
                "not_a_tenant",
                format!("tenants: {t} is not a tenant ([A-Za-z0-9_-]{{1,64}})"),
            ),
        }
    }
    Some(out)
}

pub(super) fn check_store_headers(v: Option<&Value>, scope: &Scope, d: &mut Diags) -> StoreHeaders {
    match v {
        None => StoreHeaders::All,
        Some(Value::String(s)) if s == "all" => StoreHeaders::All,
        Some(Value::String(s)) if s == "none" => StoreHeaders::None,
        Some(Value::Array(list)) => {
            let mut names = Vec::new();
            for h in list {
                match h.as_str() {
                    Some(s) if !s.is_empty() => names.push(s.to_ascii_lowercase()),
                    _ => d.push(
                        scope,
                        "bad_store_headers",
                        format!("store_headers entries must be non-empty header names, got {h}"),
                    ),
                }
            }
            StoreHeaders::Only(names)
        }
        Some(other) => {
            d.push(
                scope,
                "bad_store_headers",
                format!(
                    "store_headers must be \"all\", \"none\" or a list of header names, got {other}"
                ),
            );
            StoreHeaders::All
        }
    }
}

pub(super) fn check_dedupe(
    v: &Value,
    scope: &Scope,
    reads: &mut Reads,
    d: &mut Diags,
) -> Option<Dedupe> {
    let ctx = KeyCtx {
        integers: true,
        header_ok: &|_| Ok(()),
    };
    let (key, ttl_ms) = match v {
        Value::String(p) => (preset(p, reads).map_err(Issues::from), DEFAULT_TTL_MS),
        Value::Object(o) => {
            let mut ttl_ms = DEFAULT_TTL_MS;
            if let Some(t) = field(o, "ttl_ms") {
                match t.as_u64() {
                    Some(n) if n > 0 => ttl_ms = n,
                    _ => d.push(
                        scope,
                        "bad_ttl",
                        format!("ttl_ms must be a positive integer, got {t}"),
                    ),
                }
            }
            let key = match field(o, "preset") {
                Some(Value::String(_))
                    if o.keys().any(|k| super::keys::KINDS.contains(&k.as_str())) =>
                {
                    Err(Issue::new("bad_dedupe", "takes a preset or a key, not both").into())
                }
                Some(Value::String(p)) => {
                    unknown_fields(o, &["preset", "ttl_ms"], scope, d);
                    preset(p, reads).map_err(Issues::from)
                }
                Some(other) => Err(Issue::new(
                    "bad_dedupe",
                    format!("preset must be a string, got {other}"),
                )
                .into()),
                None if o.keys().all(|k| k == "ttl_ms") => Err(Issue::new(
                    "bad_dedupe",
                    format!("needs a preset or a key: {}", super::keys::FORMS),
                )
                .into()),
                None => {
                    let mut warned = Vec::new();
                    let k = super::keys::expr(o, &["ttl_ms"], &ctx, reads, &mut warned);
                    for w in warned {
                        d.warn(scope, "never_matches", w);
                    }
                    k
                }
            };
            (key, ttl_ms)
        }
        _ => (
            Err(Issue::new("bad_dedupe", "must be a preset name or an object").into()),
            DEFAULT_TTL_MS,
        ),
    };
    match key {
        Ok(k) => Some(Dedupe::new(k, ttl_ms)),
        Err(Issues(problems)) => {
            for e in problems {
                d.issue(scope, e);
            }
            None
        }
    }
}

/// A dedupe preset's key.
/// Warns of each key a verified source reads from a header its signature
/// does not cover: a captured delivery replays, verified, with any value of
/// it (a fresh dedupe key each time, or a chosen lane).
fn unsigned_key_headers(
    v: &crate::verify::Verify,
    dedupe: Option<&Dedupe>,
    lanes: &[crate::lanes::Lane],
    headers: &[String],
    id: &str,
    d: &mut Diags,
) {
    let mut warn =
        |k: &KeySource, scope: Scope, what: &str| unsigned_header(v, k, headers, scope, what, d);
    if let Some(dd) = dedupe {
        warn(&dd.key, Scope::Dedupe(id.to_owned()), "the dedupe key");
    }
    for lane in lanes {
        if let Some(k) = &lane.key {
            let scope = Scope::Sink {
                source: id.to_owned(),
                index: usize::from(lane.sink),
                kind: None,
            };
            warn(k, scope, "the ordering key");
        }
    }
}

/// Warns of each header `k` reads that `v`'s signature does not cover.
fn unsigned_header(
    v: &crate::verify::Verify,
    k: &KeySource,
    headers: &[String],
    scope: Scope,
    what: &str,
    d: &mut Diags,
) {
    let signed = v.signed_headers();
    for h in k.headers() {
        let Some(name) = headers.get(h) else { continue };
        if !signed.contains(name) {
            d.warn(
                &scope,
                "unsigned_key_header",
                format!(
                    "{what} is read from header {name}, which the signature does not cover: \
                     a captured delivery replays, verified, with any value of it (see docs/security.md)"
                ),
            );
        }
    }
}

pub(super) fn preset(p: &str, reads: &mut Reads) -> Result<KeySource, Issue> {
    match dedupe::preset(p) {
        Some(EventId::Headers(hs)) => {
            let mut alts: Vec<KeySource> =
                hs.iter().map(|h| reads.header((*h).to_owned())).collect();
            Ok(if alts.len() == 1 {
                alts.remove(0)
            } else {
                KeySource::First(alts)
            })
        }
        Some(EventId::Json(j)) => Ok(reads.path(j.split('.').map(str::to_owned).collect(), true)),
        None => Err(Issue::new(
            "unknown_preset",
            format!(
                "unknown preset {p:?}{} (known: {})",
                super::fields::did_you_mean(p, &dedupe::names()),
                dedupe::names().join(", ")
            ),
        )),
    }
}
