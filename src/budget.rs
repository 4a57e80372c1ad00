//! The held-bytes budget of one plugin in one VM (one Envoy worker): the
//! bytes its held requests make the VM and Envoy keep, and those requests
//! in the order the tick answers them in: the stalest first (by deadline,
//! which is by start: one plugin's requests share max_hold_ms), the late
//! ones, then, while the budget is fuller than `trim_to`, the slow ones.
//!
//! What a held request is charged (`lifecycle` computes it): its own state,
//! the body bytes Envoy buffers while the filter holds the request (every
//! byte it has been handed: a verified source's body too), and the VM's
//! copy of the body for sources with body keys. Nothing is reserved ahead
//! of the bytes: a declared length only caps how far a buffer grows.

use std::collections::BTreeSet;

/// How many times max_json_bytes one body counts at its peak: Envoy's
/// buffered bytes, the VM's old and new buffer while it regrows, and the
/// chunk being copied into the VM (`Growth::peak`). The config check makes
/// max_held_bytes at least this many times max_json_bytes, so that one
/// body of the largest size always fits an empty budget.
pub const PEAK_FACTOR: u64 = 4;

/// What one held request costs besides its own struct and the bytes it
/// holds: its slot in the context map and in the two orders.
pub const PER_REQUEST: usize = 128;

/// At most this many local replies in one VM call. Envoy runs the replies a
/// call sends after it returns, each stream's `proxy_on_delete` running the
/// next one inside itself: the nesting grows with their number, and V8 ran
/// out of stack (failing the VM for good) at about 270 of them in Envoy
/// 1.40. Twenty-five keeps a tenfold margin; the rest wait for the next
/// tick.
pub const MAX_REPLIES_PER_CALL: usize = 25;

/// The tick of a plugin with body sources: late bodies are answered within
/// a tick of their deadline, and a backlog of them (more than
/// MAX_REPLIES_PER_CALL at once) drains at 5 000 replies a second per
/// worker. A tick with nothing held reads no clock; one that holds a
/// request, one read.
pub const TICK_MS: u32 = 5;

/// How much of the ticks' time passes between two hand-overs of the
/// .wasm's counts (`filter::counts`): a counter reaches Envoy within 100 ms
/// of its increment where the worker's ticks come on time (Envoy runs a
/// 5 ms tick every 5 to 8 ms), later only while its event loop is busy. A
/// plugin without body sources ticks at this period for them alone. A tick
/// that answers a held request hands its answers' counts over at once.
pub const FLUSH_MS: u32 = 50;

/// What the tick trims a budget down to, by answering slow bodies, once it
/// is fuller: three quarters of it. The last quarter is room for deliveries
/// that arrive at once; to keep it full, slow uploads must refill it within
/// every tick.
pub fn trim_to(limit: usize) -> usize {
    limit / 4 * 3
}

/// One plugin instance's held requests (by their serial number) and their bytes.
#[derive(Default)]
pub struct Pool {
    held: usize,
    by_deadline: BTreeSet<(u64, u64)>,
}

impl Pool {
    /// The bytes charged now.
    pub fn held(&self) -> usize {
        self.held
    }

    /// How many requests are held.
    pub fn len(&self) -> usize {
        self.by_deadline.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_deadline.is_empty()
    }

    /// Whether `more` bytes fit under `limit` now.
    pub fn fits(&self, more: usize, limit: usize) -> bool {
        self.held.saturating_add(more) <= limit
    }

    pub fn insert(&mut self, serial: u64, deadline_ms: u64, charge: usize) {
        self.held = self.held.saturating_add(charge);
        self.by_deadline.insert((deadline_ms, serial));
    }

    pub fn remove(&mut self, serial: u64, deadline_ms: u64, charge: usize) {
        self.held = self.held.saturating_sub(charge);
        self.by_deadline.remove(&(deadline_ms, serial));
    }

    /// The held requests, the stalest first (the earliest deadline), with
    /// their deadlines.
    pub fn stalest(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.by_deadline.iter().copied()
    }
}

/// A body buffer's next size, and what making it costs at its peak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Growth {
    /// The buffer's capacity once the chunk is in.
    pub capacity: usize,
    /// The bytes held for this request at the peak of taking the chunk,
    /// beyond what it is charged now: the new buffer (when it regrows), the
    /// chunk's copy in the VM, and the chunk in Envoy's buffer.
    pub extra: usize,
}

/// How a buffer of `len` bytes in `capacity` grows to take a `chunk`:
/// doubling (so that many small chunks do not copy the body each), never
/// past `cap` (max_json_bytes, or the declared length when smaller), never
/// below what it must hold. `keeps`: whether the VM copies the body at
/// all (a verified source without body keys only counts Envoy's bytes).
pub fn growth(keeps: bool, len: usize, capacity: usize, chunk: usize, cap: usize) -> Growth {
    let need = len.saturating_add(chunk);
    let next = if !keeps || need <= capacity {
        capacity
    } else {
        capacity.saturating_mul(2).min(cap).max(need)
    };
    let fresh = if next > capacity { next } else { 0 };
    let copied = if keeps { chunk } else { 0 };
    Growth {
        capacity: next,
        extra: fresh.saturating_add(copied).saturating_add(chunk),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stalest_is_the_earliest_deadline_first() {
        let mut p = Pool::default();
        for c in 1..=100u64 {
            p.insert(c, 1000 - c, 10);
        }
        assert_eq!(p.held(), 1000);
        let first: Vec<u64> = p.stalest().take(3).map(|(_, c)| c).collect();
        assert_eq!(first, vec![100, 99, 98]);
        assert_eq!(p.stalest().next(), Some((900, 100)));
        p.remove(100, 900, 10);
        let first: Vec<u64> = p.stalest().take(3).map(|(_, c)| c).collect();
        assert_eq!(first, vec![99, 98, 97]);
        assert_eq!(p.held(), 990);
        assert_eq!(p.len(), 99);
    }

    #[test]
    fn fits_and_stalest_first() {
        let mut p = Pool::default();
        p.insert(7, 30, 300);
        p.insert(3, 10, 900);
        p.insert(5, 20, 300);
        let order: Vec<u64> = p.stalest().map(|(_, c)| c).collect();
        assert_eq!(order, vec![3, 5, 7]);
        assert!(p.fits(8500, 10_000) && !p.fits(8501, 10_000));
    }

    /// The peak of any growth never passes PEAK_FACTOR × the cap, however
    /// the chunks fall: the rule the config check relies on.
    #[test]
    fn a_bodys_peak_is_within_the_factor() {
        let cap = 1000usize;
        for first in [1usize, 7, 100, 499, 500, 999, 1000] {
            for step in [1usize, 3, 64, 333, 1000] {
                let (mut len, mut capacity) = (0usize, 0usize);
                let mut chunk = first;
                while len < cap {
                    chunk = chunk.min(cap - len);
                    let g = growth(true, len, capacity, chunk, cap);
                    // Charged now: Envoy's bytes (len) and the buffer.
                    let peak = len + capacity + g.extra;
                    assert!(peak <= PEAK_FACTOR as usize * cap, "{first} {step}: {peak}");
                    len += chunk;
                    capacity = g.capacity;
                    assert!(capacity >= len && capacity <= cap);
                    chunk = step;
                }
            }
        }
    }

    #[test]
    fn a_source_that_keeps_no_body_counts_only_envoys_bytes() {
        let g = growth(false, 500, 0, 100, 1000);
        assert_eq!(
            g,
            Growth {
                capacity: 0,
                extra: 100
            }
        );
    }
}
