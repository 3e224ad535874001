//! The reorder buffer: ranges fetched ahead of the next one to send, bounded in logs; pure.
//!
//! Ranges finish in any order and are sent on strictly in block order, so a range that finished early waits
//! here. What waits, with the requests in flight counted at the target each, is held to `max_concurrency`
//! target-sized ranges: with nothing waiting, every worker can be busy, and memory depends on that budget,
//! never on the chain's length.
//!
//! One kind of request may go out over the budget: a piece of a refused range that lies before every range
//! waiting here, since those ranges wait for it and the buffer could not drain without it. A piece after the
//! first waiting range waits for room like any range. Letting every piece through would let the
//! narrowings of several bursts at once fill the buffer with ranges that cannot be sent yet: on the
//! `bursts` preset, 175,000 logs against a budget of 76,000 (docs/planner.md).

use std::collections::BTreeMap;

use super::Fetched;
use crate::primitives::{BlockNumber, BlockRange};

/// Ranges waiting, at most, however few logs they hold: a sanity bound on the bookkeeping, far above what
/// the log budget lets through in a dense stretch.
const MAX_READY_RANGES: usize = 256;

/// Fetched ranges waiting to be sent in block order, and the budget they count against.
#[derive(Debug)]
pub(super) struct Ready {
    ranges: BTreeMap<BlockNumber, Fetched>,
    logs: usize,
    /// The first block of the next range to send, once a range was handed out.
    next: Option<BlockNumber>,
    /// Logs a request in flight counts for: the planner's target.
    target: usize,
    /// `max_concurrency` requests' worth of logs.
    budget: usize,
}

impl Ready {
    /// An empty buffer for `max_concurrency` requests of `target` logs each.
    pub(super) fn new(max_concurrency: usize, target: usize) -> Self {
        Self {
            ranges: BTreeMap::new(),
            logs: 0,
            next: None,
            target,
            budget: max_concurrency.saturating_mul(target),
        }
    }

    /// Whether one more request may go out with `in_flight` requests out and `kept` logs held for split
    /// ranges' pieces: what waits, plus a target's worth per request in flight, stays under the budget.
    /// Surveys count like ranges: a survey answer is a body of up to a range's size, and one arriving on top
    /// of a full budget raises the peak RSS at 10x the chain (docs/bench-log/2026-11-24.md).
    pub(super) fn has_room(&self, kept: usize, in_flight: usize) -> bool {
        self.ranges.len() < MAX_READY_RANGES
            && self
                .logs
                .saturating_add(kept)
                .saturating_add(in_flight.saturating_mul(self.target))
                < self.budget
    }

    /// Whether the split piece starting at `start` may go out over the budget: every range waiting lies
    /// after it, so none of them can be sent before it is fetched.
    pub(super) fn waits_for(&self, start: BlockNumber) -> bool {
        self.ranges
            .first_key_value()
            .is_none_or(|(&first, _)| start < first)
    }

    /// Notes a range handed out: the first one starts the order.
    pub(super) fn handed_out(&mut self, start: BlockNumber) {
        self.next.get_or_insert(start);
    }

    /// Takes in a fetched range.
    pub(super) fn insert(&mut self, fetched: Fetched) {
        self.logs += fetched.logs.len();
        self.ranges.insert(fetched.range.start(), fetched);
    }

    /// Whether the next range in block order is here.
    pub(super) fn sendable(&self) -> bool {
        self.next
            .is_some_and(|next| self.ranges.contains_key(&next))
    }

    /// The next range in block order, if it is here; the one after it is next.
    pub(super) fn take_next(&mut self) -> Option<Fetched> {
        let fetched = self.ranges.remove(&self.next?)?;
        self.logs -= fetched.logs.len();
        self.next = Some(fetched.range.end() + 1);
        Some(fetched)
    }

    /// Logs waiting.
    pub(super) fn logs(&self) -> usize {
        self.logs
    }

    /// The ranges waiting, in block order.
    pub(super) fn waiting(&self) -> Vec<BlockRange> {
        self.ranges.values().map(|fetched| fetched.range).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitives::Log;

    fn fetched(start: BlockNumber, end: BlockNumber, n_logs: usize) -> Fetched {
        let logs = (0..n_logs as u64)
            .map(|log_index| Log::blank(start, log_index))
            .collect();
        Fetched::from_get_logs(BlockRange::new(start, end).unwrap(), logs)
    }

    #[test]
    fn requests_in_flight_and_ranges_waiting_share_the_budget() {
        let mut ready = Ready::new(4, 100);
        assert!(ready.has_room(0, 3), "3 x 100 < 400");
        assert!(!ready.has_room(0, 4), "4 requests in flight fill it");
        ready.handed_out(0);
        ready.insert(fetched(10, 19, 150));
        assert!(ready.has_room(0, 2), "150 + 200 < 400");
        assert!(!ready.has_room(50, 2), "kept logs count too");
        assert!(!ready.has_room(0, 3));
    }

    #[test]
    fn a_piece_goes_out_over_the_budget_only_before_every_waiting_range() {
        let mut ready = Ready::new(2, 100);
        assert!(
            ready.waits_for(500),
            "nothing waits: nothing is held up either"
        );
        ready.handed_out(0);
        ready.insert(fetched(100, 199, 250));
        assert!(!ready.has_room(0, 0), "over the budget");
        assert!(
            ready.waits_for(0),
            "the range waiting needs blocks 0-99 first"
        );
        assert!(ready.waits_for(99));
        assert!(!ready.waits_for(100));
        assert!(!ready.waits_for(300), "a piece after it can wait for room");
    }

    #[test]
    fn ranges_leave_in_block_order_whatever_order_they_arrive_in() {
        let mut ready = Ready::new(8, 100);
        assert!(!ready.sendable(), "nothing handed out yet");
        ready.handed_out(0);
        ready.handed_out(50); // not the first: the order starts at 0
        ready.insert(fetched(50, 99, 7));
        assert!(!ready.sendable(), "blocks 0-49 are not here yet");
        assert!(ready.take_next().is_none());
        ready.insert(fetched(0, 49, 3));
        assert_eq!(ready.logs(), 10);
        let first = ready.take_next().expect("0-49 is next");
        assert_eq!(first.range, BlockRange::new(0, 49).unwrap());
        assert_eq!(ready.logs(), 7);
        assert!(ready.sendable());
        assert_eq!(ready.take_next().unwrap().range.start(), 50);
        assert!(ready.waiting().is_empty() && ready.logs() == 0 && !ready.sendable());
    }

    #[test]
    fn names_the_ranges_still_waiting_in_block_order() {
        let mut ready = Ready::new(8, 100);
        ready.handed_out(0);
        ready.insert(fetched(70, 99, 1));
        ready.insert(fetched(30, 49, 1));
        assert_eq!(
            ready.waiting(),
            [
                BlockRange::new(30, 49).unwrap(),
                BlockRange::new(70, 99).unwrap()
            ]
        );
    }
}
