//! A body callback of a held request: the new chunk charged, copied where
//! body keys need it and fed to the signature check; at the end of the
//! body, the request finished. A streamed request's chunks pass on.

use super::finish::{self, Kept};
use super::headers::busy;
use super::held::{Check, Held};
use super::tick::overdue;
use super::{answer_internal, data, send, Holds};
use crate::budget;
use crate::host::{DataStatus, StreamHost};

/// `w` was released from `holds` for the callback: held again unless it
/// ends here.
pub(super) fn on_body<K>(
    host: &mut impl StreamHost,
    holds: &mut Holds<K>,
    serial: u64,
    mut w: Box<Held<K>>,
    size: usize,
    end_of_stream: bool,
) -> DataStatus {
    w.seen_body = true;
    let now = host.now_ms();
    if now > w.deadline_ms {
        return data(overdue(host, &w, now));
    }
    let plugin = w.plugin.clone();
    if w.streaming {
        let bytes = match host.request_body(size) {
            Ok(bytes) => bytes,
            Err(e) => return data(answer_internal(host, Some(&plugin), &e.to_string())),
        };
        let chunk = Streamed {
            bytes,
            size,
            end_of_stream,
            now,
        };
        return stream_body(host, holds, serial, w, chunk);
    }
    let cfg = &plugin.config;
    let seen = w.seen_bytes;
    if seen.saturating_add(size) > cfg.max_json_bytes {
        return data(finish::finish(host, *w, Kept::OverLimit));
    }
    let keeps = w.keeps_body;
    let cap = w
        .declared
        .map_or(cfg.max_json_bytes, |d| d.min(cfg.max_json_bytes));
    let (len, capacity) = (w.body.len(), w.body.capacity());
    let growth = budget::growth(keeps, len, capacity, size, cap);
    // `w` is released: its charge is out of the pool, its bytes are not.
    let need = w.charged.saturating_add(growth.extra);
    if !holds.fits(need, cfg.max_held_bytes) {
        return data(busy(host, &w));
    }
    // A body that arrives whole in one chunk is kept as the host handed it
    // over, not copied again.
    let whole = keeps && end_of_stream && len == 0;
    if !whole {
        w.body.reserve_exact(growth.capacity - len);
    }
    let chunk = match host.request_body(size) {
        Ok(chunk) => chunk,
        Err(e) => return data(answer_internal(host, Some(&plugin), &e.to_string())),
    };
    if let Check::Running(p) = &mut w.check {
        p.update(&chunk);
    }
    if let Some(h) = &mut w.digest {
        h.update(&chunk);
    }
    w.seen_bytes = seen + chunk.len();
    if whole {
        w.body = chunk;
    } else if keeps {
        w.body.extend_from_slice(&chunk);
    }
    if end_of_stream {
        return data(finish::finish(host, *w, Kept::Whole));
    }
    holds.hold(serial, w);
    DataStatus::StopAndWatermark
}

/// A streamed request's new body bytes, as the callback read them.
struct Streamed {
    bytes: Vec<u8>,
    /// How many bytes the callback was handed (what a rewrite replaces).
    size: usize,
    end_of_stream: bool,
    now: u64,
}

/// A streamed request's body chunk: fed to its signature check and let
/// through, but for its last byte where the request declared a length
/// (which would complete the upstream request before the verdict); at the
/// end, the verdict: the held byte let go, or 401 and the upstream request
/// reset. Every chunk moves its deadline (an idle timeout).
fn stream_body<K>(
    host: &mut impl StreamHost,
    holds: &mut Holds<K>,
    serial: u64,
    mut w: Box<Held<K>>,
    chunk: Streamed,
) -> DataStatus {
    let Streamed {
        bytes: chunk,
        size,
        end_of_stream,
        now,
    } = chunk;
    let plugin = w.plugin.clone();
    if let Check::Running(p) = &mut w.check {
        p.update(&chunk);
    }
    w.seen_bytes = w.seen_bytes.saturating_add(chunk.len());
    if w.seen_bytes as u64 > plugin.config.max_stream_bytes {
        return data(finish::stream_over_limit(host, &w));
    }
    // What this callback lets through: the byte held back before, then the
    // chunk (the chunk itself, not a copy, where nothing was held).
    let mut out = chunk;
    let tail_before = match w.tail.take() {
        Some(b) => {
            out.insert(0, b);
            true
        }
        None => false,
    };
    if end_of_stream {
        return match finish::stream_verdict(host, &mut w) {
            Ok(_) if !tail_before => DataStatus::Continue,
            Ok(_) => match host.set_request_body(size, &out) {
                Ok(()) => DataStatus::Continue,
                Err(e) => data(answer_internal(host, Some(&plugin), &e.to_string())),
            },
            Err(r) => data(send(host, &r)),
        };
    }
    if w.declared.is_some() {
        w.tail = out.pop();
    }
    if tail_before || w.tail.is_some() {
        if let Err(e) = host.set_request_body(size, &out) {
            return data(answer_internal(host, Some(&plugin), &e.to_string()));
        }
    }
    // A stream keeps an upstream request open, which a forgery must not do
    // for long: idle, too slow, or too long in all, it is answered.
    w.deadline_ms = w.stream_deadline(now);
    holds.hold(serial, w);
    DataStatus::Continue
}
