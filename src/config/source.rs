//! One source's check: its id, tenant and tenants, routing, store_headers,
//! dedupe (`dedupe`), sinks, signature and what its body holds, then the
//! checks across those parts: the headers its signature leaves unsigned,
//! lane groups that tenants share, its handshake, a streamed body, and
//! affinity.

use super::bounds::{bounded, within, MAX_SINKS, MAX_TENANTS};
use super::diag::{Diags, Scope};
use super::fields::{field, nonempty_string, routing_of, unknown_fields, Env};
use super::reads::{Ordered, Reads, StoreHeaders};
use super::sink::{check_sink, SinkCtx};
use super::{source_id_ok, tenant_ok, Delivery, Routing, Source, DEFAULT_TENANT};
use crate::handshake::Handshake;
use crate::key::KeySource;
use crate::lanes::{GroupScope, Lane};
use crate::providers::SchemePreset;
use crate::verify::{Mode, Secrets, Verify};
use serde_json::{Map, Value};

/// What a source's check needs from the top level.
pub(super) struct SourceCtx<'e> {
    pub(super) delivery: Delivery,
    pub(super) routing: Routing,
    /// The top-level `affinity` switch.
    pub(super) affinity: bool,
    pub(super) env: Env<'e>,
}

/// The fields a source takes.
const SOURCE_FIELDS: &[&str] = &[
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
];

/// Checks source `index` of the list.
pub(super) fn check_source(
    ctx: &SourceCtx,
    index: usize,
    v: &Value,
    d: &mut Diags,
) -> Option<Source> {
    let Some(obj) = v.as_object() else {
        d.push(
            &Scope::SourceAt(index),
            "not_an_object",
            "must be an object",
        );
        return None;
    };
    let id = source_id(obj, index, d);
    let scope = Scope::Source(id.clone());
    unknown_fields(obj, SOURCE_FIELDS, &scope, d);
    let (mut source, ordered) = source_parts(ctx, obj, id, &scope, d);
    // The checks across its parts, once each part is read.
    signature_warnings(&source, d);
    tenant_group_warnings(&source, obj, d);
    source.handshake = source_handshake(obj, source.verify.as_mut(), &scope, ctx.env, d);
    stream_reads_body(&source, d);
    source.affinity = super::affinity::check(
        field(obj, "affinity"),
        ctx.affinity,
        &source.lanes,
        &ordered,
        source.dedupe.is_some(),
        &scope,
        d,
    );
    Some(source)
}

/// The source's id; without one, errors name it by its place (`#index`).
fn source_id(obj: &Map<String, Value>, index: usize, d: &mut Diags) -> String {
    let Some(Value::String(id)) = obj.get("id") else {
        d.push(
            &Scope::SourceAt(index),
            "missing_id",
            "id is required and must be a string",
        );
        return format!("#{index}");
    };
    if !source_id_ok(id) {
        d.push(
            &Scope::Source(id.clone()),
            "bad_id",
            "id must match [A-Za-z0-9._-]{1,64} and not be \".\" or \"..\"",
        );
    }
    id.clone()
}

/// The source's own parts, each checked in its turn, and which of its sinks
/// are ordered (for affinity). Its handshake and affinity are left to the
/// checks across its parts.
fn source_parts(
    ctx: &SourceCtx,
    obj: &Map<String, Value>,
    id: String,
    scope: &Scope,
    d: &mut Diags,
) -> (Source, Ordered) {
    let tenant = source_tenant(obj, scope, d);
    let mut reads = Reads::default();
    let dedupe = field(obj, "dedupe")
        .and_then(|v| super::dedupe::check(v, &Scope::Dedupe(id.clone()), &mut reads, d));
    let store = check_store_headers(field(obj, "store_headers"), scope, d);
    let sinks = SinkCtx {
        id: &id,
        delivery: ctx.delivery,
        store: &store,
    };
    let (lanes, ordered) = source_sinks(&sinks, field(obj, "sinks"), &mut reads, scope, d);
    let routing = routing_of(field(obj, "routing"), scope, d).unwrap_or(ctx.routing);
    let verify = field(obj, "verify")
        .and_then(|v| super::verify::check(v, &Scope::Verify(id.clone()), routing, ctx.env, d));
    let tenants = source_tenants(obj, &tenant, verify.as_ref(), routing, scope, d);
    let holds_body = holds_body(verify.as_ref(), &reads);
    let preset = inherited_preset(obj);
    let event_type = super::events::event_type(obj, preset, holds_body, &mut reads, scope, d);
    let events =
        field(obj, "events").and_then(|v| super::events::events(v, event_type.is_some(), scope, d));
    let form_json = nonempty_string(
        obj,
        "form_json",
        "bad_form_json",
        "a form field name",
        scope,
        d,
    )
    .map(str::to_owned);
    let content_type = content_type(&mut reads, form_json.is_some());
    let idempotency_prefix = crate::stamps::encode_joined(&[tenant.as_bytes(), id.as_bytes(), b""]);
    let source = Source {
        id,
        tenant,
        dedupe,
        idempotency_prefix,
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
        handshake: None,
        tenants,
        affinity: None,
        routing,
    };
    (source, ordered)
}

/// The source's own tenant, else the default one.
fn source_tenant(obj: &Map<String, Value>, scope: &Scope, d: &mut Diags) -> String {
    match field(obj, "tenant") {
        None => DEFAULT_TENANT.to_owned(),
        Some(Value::String(t)) if tenant_ok(t) => t.clone(),
        Some(t) => {
            d.push(
                scope,
                "bad_tenant",
                format!("tenant must match [A-Za-z0-9_-]{{1,64}}, got {t}"),
            );
            DEFAULT_TENANT.to_owned()
        }
    }
}

/// The source's lanes (its ordered sinks that passed), and which sinks are
/// ordered, whether or not their lane did.
fn source_sinks(
    ctx: &SinkCtx,
    v: Option<&Value>,
    reads: &mut Reads,
    scope: &Scope,
    d: &mut Diags,
) -> (Vec<Lane>, Ordered) {
    let mut lanes = Vec::new();
    let mut ordered = Ordered::default();
    let sinks = match v {
        None => return (lanes, ordered),
        Some(Value::Array(sinks)) => sinks,
        Some(_) => {
            d.push(scope, "not_a_list", "sinks must be a list");
            return (lanes, ordered);
        }
    };
    ordered.count = sinks.len();
    for (index, s) in bounded(sinks, "sinks", MAX_SINKS, scope, d)
        .iter()
        .enumerate()
    {
        if s.get("ordered") == Some(&Value::Bool(true)) {
            ordered.ordered.push(index);
        }
        if let Some(lane) = check_sink(ctx, index, s, reads, d) {
            lanes.push(lane);
        }
    }
    (lanes, ordered)
}

/// The tenants a source accepts: its `tenants`, or its per-tenant secrets'
/// (which must then name the same); and its own tenant must be among them.
fn source_tenants(
    obj: &Map<String, Value>,
    tenant: &str,
    verify: Option<&Verify>,
    routing: Routing,
    scope: &Scope,
    d: &mut Diags,
) -> Option<Vec<String>> {
    let mut tenants = field(obj, "tenants").and_then(|v| check_tenants(v, scope, routing, d));
    if let Some(Verify {
        secrets: Secrets::PerTenant(map),
        ..
    }) = verify
    {
        let keyed: Vec<String> = map.iter().map(|(t, _)| t.clone()).collect();
        if tenants.as_ref().is_some_and(|t| *t != keyed) {
            d.push(
                scope,
                "tenant_lists_differ",
                "tenants and per-tenant verify secrets name different tenants: give one of them",
            );
        }
        tenants = Some(keyed);
    }
    // A source of its own tenant is reached only as that tenant: a tenant
    // list without it leaves no route to the source.
    if let Some(list) = &tenants {
        if tenant != DEFAULT_TENANT && !list.iter().any(|t| t == tenant) {
            d.push(
                scope,
                "unreachable",
                format!(
                    "tenant {tenant:?} is not among its tenants ({}): no route reaches the source",
                    list.join(", ")
                ),
            );
        }
    }
    tenants
}

/// The preset whose event type a source inherits: its dedupe preset's,
/// else its signature scheme's.
fn inherited_preset(obj: &Map<String, Value>) -> Option<&str> {
    match field(obj, "dedupe") {
        Some(Value::String(p)) => Some(p.as_str()),
        Some(Value::Object(o)) => field(o, "preset").and_then(Value::as_str),
        _ => None,
    }
    .or_else(|| {
        field(obj, "verify")
            .and_then(|v| v.get("scheme"))
            .and_then(Value::as_str)
    })
}

/// Whether the source holds its body anyway: a held signature, or a key
/// that reads it. A streamed signature holds no body: the preset's body
/// type is not inherited there.
fn holds_body(verify: Option<&Verify>, reads: &Reads) -> bool {
    verify.is_some_and(|v| v.mode == Mode::Hold)
        || !reads.paths.is_empty()
        || !reads.forms.is_empty()
        || reads.body_hash
}

/// A form-encoded body is told from JSON by its content-type: that
/// header's place among those read, where the body may be a form.
fn content_type(reads: &mut Reads, form_json: bool) -> Option<usize> {
    if reads.forms.is_empty() && !form_json {
        return None;
    }
    match reads.header("content-type".to_owned()) {
        KeySource::Header(i) => Some(i),
        _ => None,
    }
}

/// What the source trusts that its signature does not cover: headers its
/// keys and its events rule read, and one secret list for every tenant.
fn signature_warnings(s: &Source, d: &mut Diags) {
    let Some(v) = &s.verify else { return };
    unsigned_key_headers(v, s, d);
    // A type an events rule decides by is trusted as a key is.
    if let (Some(et), Some(_)) = (&s.event_type, &s.events) {
        unsigned_header(
            v,
            et,
            &s.headers,
            Scope::Source(s.id.clone()),
            "the event type its events rule reads",
            d,
        );
    }
    let shared = matches!(v.secrets, Secrets::All(_));
    if shared && s.routing.tenant_path() && s.tenants.is_none() {
        d.warn(
            &Scope::Verify(s.id.clone()),
            "shared_secrets",
            "one secret list on a tenant_path route accepts a hook signed for one tenant as any \
             other's (a new idempotency key each time): give per-tenant secrets or a tenants list",
        );
    }
}

/// Whether the source is reached as more than one tenant: only by a
/// tenant_path route, and only a source of the default tenant (another is
/// reached as its own), as any tenant its `tenants` (or per-tenant secrets)
/// name, every tenant without them.
fn takes_many_tenants(s: &Source) -> bool {
    if !s.routing.tenant_path() || s.tenant != DEFAULT_TENANT {
        return false;
    }
    s.tenants
        .as_ref()
        .is_none_or(|ts| ts.iter().any(|t| Some(t) != ts.first()))
}

/// Warns of each ordered sink of a source of many tenants whose groups are
/// not namespaced by tenant: on a broker queue the tenants share, two
/// tenants' equal keys share a group, and a key may be another tenant's
/// keyless group. A sink that says `"group_scope": "key"` chose it (a
/// queue per tenant): not warned of.
fn tenant_group_warnings(s: &Source, obj: &Map<String, Value>, d: &mut Diags) {
    if !takes_many_tenants(s) {
        return;
    }
    let sinks = field(obj, "sinks").and_then(Value::as_array);
    let chosen = |i: u16| {
        sinks
            .and_then(|l| l.get(usize::from(i)))
            .and_then(|k| k.get("group_scope"))
            .is_some()
    };
    for lane in s
        .lanes
        .iter()
        .filter(|l| l.group_scope != GroupScope::Tenant && !chosen(l.sink))
    {
        let scope = Scope::Sink {
            source: s.id.clone(),
            index: usize::from(lane.sink),
            kind: None,
        };
        d.warn(
            &scope,
            "groups_across_tenants",
            "the source takes more than one tenant (by its tenant_path route), and this ordered sink's \
             groups are its keys alone: on a broker queue the tenants share, two tenants' equal keys share \
             a FIFO group, and a key such as \"acme/stripe\" shares that tenant's keyless group; set \
             \"group_scope\": \"tenant\", or \"key\" where each tenant has a queue of its own (see docs/keys.md)",
        );
    }
}

/// The source's handshake, checked against its signature.
fn source_handshake(
    obj: &Map<String, Value>,
    verify: Option<&mut Verify>,
    scope: &Scope,
    env: Env,
    d: &mut Diags,
) -> Option<Handshake> {
    let handshake = field(obj, "handshake")
        .and_then(|h| super::handshake::check(h, verify.as_deref(), scope, env, d));
    // The CRC signs any token for anyone: no token-like body verifies.
    if let (Some(v), Some(Handshake::Crc { .. })) = (verify, &handshake) {
        v.refuses_tokens = true;
    }
    handshake
}

/// A streamed signature never holds the body: nothing may read it.
fn stream_reads_body(s: &Source, d: &mut Diags) {
    let Some(v) = s.verify.as_ref().filter(|v| v.mode == Mode::Stream) else {
        return;
    };
    let mut reads_body = Vec::new();
    if !s.paths.is_empty() || !s.forms.is_empty() {
        reads_body.push("a key reads the body (json or form)");
    }
    if s.hashes_body {
        reads_body.push("a key is the body's sha256");
    }
    if s.handshake.as_ref().is_some_and(|h| !h.on_get()) {
        reads_body.push("its handshake reads the body");
    }
    if v.scheme == crate::verify::Scheme::Preset(SchemePreset::Twilio) {
        reads_body.push("twilio signs a form's sorted fields, which needs the whole body");
    }
    for what in reads_body {
        d.push(
            &Scope::Verify(s.id.clone()),
            "stream_reads_body",
            format!("mode \"stream\" never holds the body, but {what}: take the keys from headers, or use mode \"hold\""),
        );
    }
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

/// Warns of each key a verified source reads from a header its signature
/// does not cover: a captured delivery replays, verified, with any value of
/// it (a fresh dedupe key each time, or a chosen lane).
fn unsigned_key_headers(v: &Verify, s: &Source, d: &mut Diags) {
    let mut warn =
        |k: &KeySource, scope: Scope, what: &str| unsigned_header(v, k, &s.headers, scope, what, d);
    if let Some(dd) = &s.dedupe {
        warn(&dd.key, Scope::Dedupe(s.id.clone()), "the dedupe key");
    }
    for lane in &s.lanes {
        if let Some(k) = &lane.key {
            let scope = Scope::Sink {
                source: s.id.clone(),
                index: usize::from(lane.sink),
                kind: None,
            };
            warn(k, scope, "the ordering key");
        }
    }
}

/// Warns of each header `k` reads that `v`'s signature does not cover.
fn unsigned_header(
    v: &Verify,
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
