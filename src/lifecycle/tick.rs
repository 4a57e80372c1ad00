//! The tick: answers 408, the stalest first, to the requests whose body is
//! late, and, while the budget is fuller than `budget::trim_to`, to those
//! held longer than slow_body_ms; at most MAX_REPLIES_PER_CALL a tick (the
//! rest on the next ones). Only the tick answers a request other than the
//! one a callback is for: a local reply sets Envoy's "stop" for the whole
//! call, which would change the current request's own answer. Each answer
//! goes through the answered request's own stream, and is counted in its
//! own configuration's metrics.

use super::held::Held;
use super::{hint_once, send, Holds, Instance};
use crate::budget::{self, Pool, MAX_REPLIES_PER_CALL};
use crate::config::Config;
use crate::host::{HeadersStatus, Level, StreamHost, Streams};
use crate::metrics::bump;
use crate::reply;

impl<K: Copy> Instance<K> {
    /// The tick, on this instance's held requests; whether it reached one
    /// (a host with one current stream then has another current).
    pub fn on_tick<S: Streams<Key = K>>(&self, host: &mut S) -> bool {
        let Ok(mut holds) = self.holds.try_borrow_mut() else {
            // A callback runs: the next tick comes soon.
            return false;
        };
        for serial in std::mem::take(&mut *self.ended.borrow_mut()) {
            holds.release(serial);
        }
        let now = host.now_ms();
        let answers = due(&holds, now, &self.plugin.config);
        let reached = !answers.is_empty();
        for (serial, late) in answers {
            let Some(w) = holds.release(serial) else {
                continue;
            };
            let Some(mut stream) = host.stream(w.key) else {
                continue;
            };
            if late {
                body_timeout(&mut stream, &w);
            } else {
                let m = w.plugin.metrics.source(w.source).and_then(|m| m.evicted);
                bump(&mut stream, m, 1);
                send(&mut stream, &reply::SLOW_BODY);
            }
        }
        reached
    }
}

/// What the tick answers, the stalest first, each marked late (past its
/// deadline) or slow (held past slow_body_ms while the budget is over
/// `budget::trim_to`, until it is not): at most MAX_REPLIES_PER_CALL.
/// Requests held for their body share max_hold_ms, so the stalest is also
/// the one held longest: the pass stops at the first that is neither.
/// Streamed requests are only ever late (idle, or past max_stream_ms):
/// their own order, the stalest first.
fn due<K>(holds: &Holds<K>, now: u64, cfg: &Config) -> Vec<(u64, bool)> {
    let mut over = holds
        .held()
        .saturating_sub(budget::trim_to(cfg.max_held_bytes));
    let mut out = Vec::new();
    for (deadline, serial) in holds.pool.stalest() {
        if out.len() >= MAX_REPLIES_PER_CALL {
            break;
        }
        let Some(w) = holds.requests.get(&serial) else {
            continue;
        };
        if deadline < now {
            over = over.saturating_sub(w.charged);
            out.push((serial, true));
        } else if over > 0 && now.saturating_sub(w.started_ms) >= cfg.slow_body_ms {
            over = over.saturating_sub(w.charged);
            out.push((serial, false));
        } else {
            break;
        }
    }
    late(&holds.streamed, now, &mut out);
    out
}

/// The streamed requests past their deadline, the stalest first, while
/// there is room in this tick's replies.
fn late(streamed: &Pool, now: u64, out: &mut Vec<(u64, bool)>) {
    for (deadline, serial) in streamed.stalest() {
        if out.len() >= MAX_REPLIES_PER_CALL || deadline >= now {
            break;
        }
        out.push((serial, true));
    }
}

/// 408: the body did not arrive in time; said once per plugin where no
/// body callback came at all.
pub(super) fn body_timeout<K>(host: &mut impl StreamHost, w: &Held<K>) -> HeadersStatus {
    let m = w.plugin.metrics.source(w.source);
    bump(host, m.and_then(|m| m.body_timeout), 1);
    if !w.seen_body {
        bump(host, m.and_then(|m| m.body_never_seen), 1);
        if !hint_once(&w.plugin) {
            host.log(Level::Error, &never_seen(w));
        }
    }
    send(host, &reply::BODY_TIMEOUT)
}

/// Why a held request may never see its body.
fn never_seen<K>(w: &Held<K>) -> String {
    let id = w.source().map_or("?", |s| s.id.as_str());
    format!(
        "source '{id}': a request held for its body got none within max_hold_ms ({} ms) and was \
         answered 408; if every body-keyed request ends this way, the filter runs without \
         allow_on_headers_stop_iteration: true (Envoy then never hands it the body; Istio's \
         WasmPlugin cannot set it): use the EnvoyFilter form, or header-keyed sources only \
         (hookstamp_body_never_seen_total counts these)",
        w.plugin.config.max_hold_ms
    )
}
