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
use crate::budget::{self, MAX_REPLIES_PER_CALL};
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
        // Nothing held, nothing late: the clock is not read (in the .wasm
        // a read is a host call, and most ticks find nothing held).
        if holds.requests.is_empty() {
            return false;
        }
        // Nothing is held of a plugin that is gone: a held request keeps
        // its plugin.
        let Some(plugin) = self.plugin() else {
            return false;
        };
        let now = host.now_ms();
        let answers = due(&holds, now, &plugin.config);
        let reached = !answers.is_empty();
        for (serial, why) in answers {
            let Some(w) = holds.release(serial) else {
                continue;
            };
            let Some(mut stream) = host.stream(w.key) else {
                continue;
            };
            match why {
                Due::Late => body_timeout(&mut stream, &w),
                Due::Slow => too_slow(&mut stream, &w),
            };
        }
        reached
    }
}

/// Why the tick answers a request: its body is late (past its deadline),
/// or slow (answered to make room).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    Late,
    Slow,
}

/// What the tick answers, the stalest first: at most MAX_REPLIES_PER_CALL.
/// Held requests: late (past their deadline), or slow (held past
/// slow_body_ms while the budget is over `budget::trim_to`, until it is
/// not). Requests held for their body share max_hold_ms, so the stalest is
/// also the one held longest: the pass stops at the first that is neither.
/// Streamed requests after them (`streams_due`).
fn due<K>(holds: &Holds<K>, now: u64, cfg: &Config) -> Vec<(u64, Due)> {
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
            out.push((serial, Due::Late));
        } else if over > 0 && now.saturating_sub(w.started_ms) >= cfg.slow_body_ms {
            over = over.saturating_sub(w.charged);
            out.push((serial, Due::Slow));
        } else {
            break;
        }
    }
    streams_due(holds, now, cfg, &mut out);
    out
}

/// How many streamed requests the tick looks at for a trim: bounded work
/// whatever the number open.
const STREAMS_SCANNED: usize = 4 * MAX_REPLIES_PER_CALL;

/// Near max_streams, a stream past slow_body_ms is trimmed when it came
/// slower on average than this many times min_stream_rate: a provider's
/// delivery comes far faster, a forgery that holds a slot must pay this
/// much for it.
const TRIM_RATE_FACTOR: u64 = 8;

/// The streamed requests the tick answers: those past their deadline, in
/// their own order (the soonest of idle, too long, and too slow for
/// min_stream_rate), slow where their rate fell below min_stream_rate; then
/// the trim (`trim_streams`).
fn streams_due<K>(holds: &Holds<K>, now: u64, cfg: &Config, out: &mut Vec<(u64, Due)>) {
    let mut due = 0;
    for (deadline, serial) in holds.streamed.stalest() {
        if out.len() >= MAX_REPLIES_PER_CALL || deadline >= now {
            break;
        }
        let Some(w) = holds.requests.get(&serial) else {
            continue;
        };
        let why = if w.rate_deadline() <= now {
            Due::Slow
        } else {
            Due::Late
        };
        out.push((serial, why));
        due += 1;
    }
    let keep = cfg.max_streams - cfg.max_streams / 4;
    let over = holds.streams().saturating_sub(due).saturating_sub(keep);
    if over > 0 {
        trim_streams(holds, now, cfg, over, out);
    }
}

/// While more than three quarters of max_streams are open, down to three
/// quarters, the slowest by rate credit first: a trickle (below
/// min_stream_rate a tenth of slow_body_ms in: a delivery's body comes at
/// once), or a stream past slow_body_ms slower than TRIM_RATE_FACTOR times
/// min_stream_rate. A fast stream is never trimmed, however old.
fn trim_streams<K>(
    holds: &Holds<K>,
    now: u64,
    cfg: &Config,
    over: usize,
    out: &mut Vec<(u64, Due)>,
) {
    let mut over = over;
    for (_, serial) in holds.by_rate.iter().take(STREAMS_SCANNED) {
        if over == 0 || out.len() >= MAX_REPLIES_PER_CALL {
            break;
        }
        let Some(w) = holds.requests.get(serial) else {
            continue;
        };
        if out.iter().any(|(s, _)| s == serial) {
            continue;
        }
        let rate = cfg.min_stream_rate;
        let trickles = w.credit(cfg.slow_body_ms / 10, rate) <= now;
        let slow = now.saturating_sub(w.started_ms) >= cfg.slow_body_ms
            && w.credit(cfg.slow_body_ms, rate.saturating_mul(TRIM_RATE_FACTOR)) <= now;
        if trickles || slow {
            out.push((*serial, Due::Slow));
            over -= 1;
        }
    }
}

/// A request past its deadline, answered in its own callback: 408, slow
/// where it is a stream whose rate fell below min_stream_rate, else late.
pub(super) fn overdue<K>(host: &mut impl StreamHost, w: &Held<K>, now: u64) -> HeadersStatus {
    if w.streaming && w.rate_deadline() <= now {
        too_slow(host, w)
    } else {
        body_timeout(host, w)
    }
}

/// 408: a slow body, answered to make room (or a stream below
/// min_stream_rate).
fn too_slow<K>(host: &mut impl StreamHost, w: &Held<K>) -> HeadersStatus {
    let m = w.plugin.metrics.source(w.source).and_then(|m| m.evicted);
    bump(host, m, 1);
    send(host, &reply::SLOW_BODY)
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
