//! The counter increments a VM's callbacks make, kept and handed to the
//! proxy together at a tick (`Proxy::flush_counts`; when, `contexts`).
//!
//! Why: in the .wasm each increment is a call out of the VM into Envoy's
//! stats, some 1 000 instructions, and a request makes one to three. Kept,
//! a counter's increments between two hand-overs cost one call, and a
//! counter reaches Envoy within `budget::FLUSH_MS` of ticks. A VM runs one
//! thread; the module (`dynmod`) increments at once, where a call costs a
//! few dozen instructions.

/// The increments not yet handed over, by counter id, in the ids' order:
/// at most one entry a counter the configurations define, so an
/// increment's search is a binary one, and a flush is bounded by them.
#[derive(Default)]
pub struct Pending {
    by_id: Vec<(u32, u64)>,
}

impl Pending {
    pub fn add(&mut self, id: u32, by: u64) {
        match self.by_id.binary_search_by_key(&id, |&(id, _)| id) {
            Ok(i) => {
                if let Some((_, n)) = self.by_id.get_mut(i) {
                    *n = n.saturating_add(by);
                }
            }
            Err(i) => self.by_id.insert(i, (id, by)),
        }
    }

    /// Hands each counter's sum to `send`, and forgets it.
    pub fn drain(&mut self, mut send: impl FnMut(u32, u64)) {
        for (id, n) in self.by_id.drain(..) {
            send(id, n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_counters_increments_are_one_sum_handed_over_once() {
        let mut p = Pending::default();
        p.add(4, 1);
        p.add(8, 2);
        p.add(4, 3);
        p.add(12, u64::MAX);
        p.add(12, 1);
        let mut sent = Vec::new();
        p.drain(|id, n| sent.push((id, n)));
        sent.sort();
        assert_eq!(sent, [(4, 4), (8, 2), (12, u64::MAX)]);
        p.drain(|id, n| panic!("sent again: {id} {n}"));
    }
}
