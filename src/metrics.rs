//! The filter's metrics. Labels ride in the name as `.source=<id>;` and
//! `.sink=<n>;`, which the bootstrap's stats_tags turn into Prometheus
//! labels; a key is never part of a name.

use crate::config::{Config, Source};
use crate::decide::Stamped;
use crate::host::{ConfigHost, HostResult, Level, MetricKind, StreamHost};
use crate::key::Missing;
use crate::verify::Reason;

/// A metric id; `None` when the host refused to define it (logged once,
/// then the metric is simply not counted).
pub type Id = Option<u32>;

pub struct Metrics {
    pub unknown_source: Id,
    pub method_not_allowed: Id,
    pub spoofed_unrouted: Id,
    pub spoofed_trailers: Id,
    pub internal_errors: Id,
    /// Panics its adapter caught and answered (the dynamic module's
    /// barrier: `define_panics`); `None` in the .wasm, where a panic fails
    /// the VM and Envoy's failure policy answers.
    pub panics: Id,
    pub sources: Vec<SourceMetrics>,
    /// Each gauge and its value (fixed by the configuration).
    gauges: Vec<(u32, u64)>,
}

pub struct SourceMetrics {
    pub stamped: Id,
    /// By reason (`key::Missing`), for a source with dedupe.
    pub dedupe_key_missing: Vec<(Missing, Id)>,
    pub body_over_limit: Id,
    pub spoofed: Id,
    /// 503: the held-bytes budget was full.
    pub busy: Id,
    /// 408: the body did not arrive within max_hold_ms.
    pub body_timeout: Id,
    /// ... and not one body callback came for it.
    pub body_never_seen: Id,
    /// 408: a slow body answered to make room in a full budget.
    pub evicted: Id,
    /// Each keyed lane's sink index, and its counter for each reason.
    pub lane_key_missing: Vec<(u16, Vec<(Missing, Id)>)>,
    /// Sources with `verify`: signatures that verified.
    pub verified: Id,
    /// ... and those that did not, by reason.
    pub verify_failed: Vec<(Reason, Id)>,
    /// Sources with a handshake: those the filter answered.
    pub handshakes: Id,
    /// Sources with an `events` rule: events it dropped.
    pub events_dropped: Id,
    /// Sources with an event type: events without one, by reason.
    pub event_type_missing: Vec<(Missing, Id)>,
}

impl SourceMetrics {
    pub fn verify_failed(&self, reason: Reason) -> Id {
        self.verify_failed
            .iter()
            .find(|(r, _)| *r == reason)
            .and_then(|(_, id)| *id)
    }
}

/// A counter for each reason a key is missing (a bounded label:
/// `Missing::ALL`), named `<name><tag>.reason=<reason>;`.
fn missing(host: &mut impl ConfigHost, name: &str, tag: &str) -> Vec<(Missing, Id)> {
    Missing::ALL
        .iter()
        .map(|r| {
            let n = format!("{name}{tag}.reason={};", r.as_str());
            (*r, define(host, MetricKind::Counter, &n))
        })
        .collect()
}

/// The counter of a reason.
fn by_reason(ids: &[(Missing, Id)], why: Missing) -> Id {
    ids.iter().find(|(r, _)| *r == why).and_then(|(_, id)| *id)
}

fn define(host: &mut impl ConfigHost, kind: MetricKind, name: &str) -> Id {
    match host.define_metric(kind, name) {
        Ok(id) => Some(id),
        Err(e) => {
            host.log(Level::Warn, &format!("cannot define metric {name}: {e}"));
            None
        }
    }
}

/// Adds `by` to a counter; no host call for nothing, and a failed
/// increment is not worth failing a request over.
pub fn bump(host: &mut impl StreamHost, id: Id, by: usize) {
    if let Some(id) = id.filter(|_| by > 0) {
        let _ = host.increment_metric(id, u64::try_from(by).unwrap_or(u64::MAX));
    }
}

impl SourceMetrics {
    /// A source's metrics, labelled with its id; its fixed gauges are added
    /// to `gauges`.
    fn define(host: &mut impl ConfigHost, s: &Source, gauges: &mut Vec<(u32, u64)>) -> Self {
        let counter = |host: &mut _, name: &str| define(host, MetricKind::Counter, name);
        let tag = format!(".source={};", s.id);
        let named = |host: &mut _, what: &str| counter(host, &format!("hookstamp_{what}{tag}"));
        let mut m = SourceMetrics {
            stamped: named(host, "requests_stamped_total"),
            dedupe_key_missing: Vec::new(),
            body_over_limit: named(host, "body_over_limit_total"),
            spoofed: named(host, "spoofed_headers_stripped_total"),
            busy: named(host, "busy_total"),
            body_timeout: named(host, "body_timeout_total"),
            body_never_seen: named(host, "body_never_seen_total"),
            evicted: named(host, "body_too_slow_total"),
            lane_key_missing: Vec::new(),
            verified: None,
            verify_failed: Vec::new(),
            handshakes: None,
            events_dropped: None,
            event_type_missing: Vec::new(),
        };
        if s.events.is_some() {
            m.events_dropped = named(host, "events_dropped_total");
        }
        if s.event_type.is_some() {
            m.event_type_missing = missing(host, "hookstamp_event_type_missing_total", &tag);
        }
        if s.handshake.is_some() {
            m.handshakes = named(host, "handshakes_total");
        }
        if s.verify.is_some() {
            m.verified = named(host, "signatures_verified_total");
            for r in Reason::ALL {
                let name = format!(
                    "hookstamp_signature_failures_total{tag}.reason={};",
                    r.as_str()
                );
                m.verify_failed.push((r, counter(host, &name)));
            }
        }
        // A bounded reason label: Missing::ALL.
        if s.dedupe.is_some() {
            m.dedupe_key_missing = missing(host, "hookstamp_dedupe_key_missing_total", &tag);
        }
        for l in s.lanes.iter().filter(|l| l.key.is_some()) {
            let lane = format!("{tag}.sink={};", l.sink);
            let ids = missing(host, "hookstamp_lane_key_missing_total", &lane);
            m.lane_key_missing.push((l.sink, ids));
        }
        // 1 for a source whose provider never redelivers by itself: the
        // alert rules page on every event such a source loses.
        if s.never_redelivered() {
            let name = format!("hookstamp_never_redelivered{tag}");
            if let Some(g) = define(host, MetricKind::Gauge, &name) {
                gauges.push((g, 1));
            }
        }
        m
    }
}

impl Metrics {
    pub fn define(host: &mut impl ConfigHost, cfg: &Config) -> Self {
        let mut gauges = Vec::new();
        let counter = |host: &mut _, name: &str| define(host, MetricKind::Counter, name);
        let mut sources = Vec::with_capacity(cfg.sources.len());
        for s in &cfg.sources {
            sources.push(SourceMetrics::define(host, s, &mut gauges));
        }
        if let Some(g) = define(host, MetricKind::Gauge, "hookstamp_sources_without_dedupe") {
            gauges.push((g, cfg.undeduped().count() as u64));
        }
        // The module's version, as a label of a gauge that is always 1.
        let info = format!(
            "hookstamp_build_info.version={};",
            env!("CARGO_PKG_VERSION")
        );
        if let Some(g) = define(host, MetricKind::Gauge, &info) {
            gauges.push((g, 1));
        }
        Metrics {
            unknown_source: counter(host, "hookstamp_requests_rejected_total"),
            method_not_allowed: counter(host, "hookstamp_method_not_allowed_total"),
            spoofed_unrouted: counter(host, "hookstamp_spoofed_headers_stripped_unrouted_total"),
            spoofed_trailers: counter(host, "hookstamp_spoofed_trailers_stripped_total"),
            internal_errors: counter(host, "hookstamp_internal_errors_total"),
            panics: None,
            sources,
            gauges,
        }
    }

    /// Defines the counter of caught panics, for an adapter that catches
    /// them (the dynamic module).
    pub fn define_panics(&mut self, host: &mut impl ConfigHost) {
        self.panics = define(host, MetricKind::Counter, "hookstamp_panics_total");
    }

    /// Sets every gauge to its value, which is fixed by the configuration;
    /// false when the host refused one (a host that sets gauges only
    /// through a stream: its first stream sets them again).
    pub fn set_gauges(&self, mut set: impl FnMut(u32, u64) -> HostResult<()>) -> bool {
        self.gauges.iter().all(|&(id, v)| set(id, v).is_ok())
    }

    /// Counts a stamped request of source `source`.
    pub fn stamped(&self, host: &mut impl StreamHost, source: usize, spoofed: usize, s: &Stamped) {
        let Some(m) = self.sources.get(source) else {
            return;
        };
        bump(host, m.stamped, 1);
        bump(host, m.spoofed, spoofed);
        if let Some(why) = s.dedupe_key_missing {
            bump(host, by_reason(&m.dedupe_key_missing, why), 1);
        }
        if let Some(why) = s.event_type_missing {
            bump(host, by_reason(&m.event_type_missing, why), 1);
        }
        bump(host, m.body_over_limit, usize::from(s.body_over_limit));
        for (sink, why) in &s.lane_keys_missing {
            let lane = m.lane_key_missing.iter().find(|(k, _)| k == sink);
            bump(host, lane.and_then(|(_, ids)| by_reason(ids, *why)), 1);
        }
    }

    pub fn source(&self, source: usize) -> Option<&SourceMetrics> {
        self.sources.get(source)
    }
}
