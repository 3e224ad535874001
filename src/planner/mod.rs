//! The adaptive range planner: a pure state machine that hands out block ranges and learns from the node's
//! answers. No tokio, no I/O, no `rpc` types: its inputs are [`Outcome`]s, its outputs [`BlockRange`]s.
//!
//! It splits a range when the node answers "too many results", "timeout" or "range too wide", takes a range
//! the node suggests when it is usable, and grows the span where logs are sparse, aiming at
//! `target_logs_per_request` results per request. Split pieces are handed out before new ranges, lowest
//! first, so that whoever commits in block order is never kept waiting long.
//!
//! Invariant: the ranges reported [`Verdict::Done`] (plus those reported [`Verdict::SingleBlockOverflow`],
//! which the caller completes by other means) tile `[start, end]` exactly: no gap, no overlap.

use std::collections::{BTreeMap, BTreeSet};

use crate::primitives::{BlockNumber, BlockRange};

/// Limits of the planner (from `[sync]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannerConfig {
    /// The span of the first range.
    pub initial_span: u64,
    /// The span never grows above this.
    pub max_span: u64,
    /// Growth aims at this many results per request.
    pub target_logs: u64,
}

/// What the node answered for a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// `n` logs.
    Logs {
        /// How many.
        n: u64,
    },
    /// More results than the node returns, optionally with the node's suggested range.
    TooManyResults {
        /// `(from, to)` as the node gave it; ignored unless it starts at the range's start and ends inside it.
        suggested: Option<(u64, u64)>,
    },
    /// The query took too long.
    Timeout,
    /// The node limits the span in blocks.
    RangeTooWide {
        /// The limit it stated.
        max_blocks: Option<u64>,
    },
}

/// What the planner made of an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The range is fetched; the caller commits it.
    Done,
    /// The range was split; its pieces will be handed out again.
    Split,
    /// A single block with more results than the node returns: the caller must fetch it by narrower
    /// filters (it counts as covered once it does).
    SingleBlockOverflow,
}

/// The planner.
#[derive(Debug, Clone)]
pub struct Planner {
    config: PlannerConfig,
    /// The next block never handed out.
    next: BlockNumber,
    /// The last block to plan (inclusive); `None` when everything up to it was handed out.
    end: BlockNumber,
    /// Blocks at which a range must start (a contract joins there), above `next`.
    boundaries: BTreeSet<BlockNumber>,
    /// Split pieces waiting to be handed out again, by start.
    pieces: BTreeMap<BlockNumber, BlockRange>,
    /// The span of the next new range.
    span: u64,
    /// A hard span limit the node stated (`RangeTooWide`).
    node_cap: Option<u64>,
    /// True once `next` passed `end`.
    exhausted: bool,
}

impl Planner {
    /// Plans `range`, never letting a range straddle one of `boundaries`.
    pub fn new(
        config: PlannerConfig,
        range: BlockRange,
        boundaries: impl IntoIterator<Item = BlockNumber>,
    ) -> Self {
        assert!(
            config.initial_span >= 1
                && config.max_span >= config.initial_span
                && config.target_logs >= 1
        );
        Self {
            config,
            next: range.start(),
            end: range.end(),
            boundaries: boundaries
                .into_iter()
                .filter(|b| *b > range.start() && *b <= range.end())
                .collect(),
            pieces: BTreeMap::new(),
            span: config.initial_span,
            node_cap: None,
            exhausted: false,
        }
    }

    /// Extends the plan to a new last block (the head moved).
    pub fn extend_to(&mut self, end: BlockNumber) {
        if end > self.end {
            if self.exhausted {
                self.exhausted = false;
                self.next = self.end + 1;
            }
            self.end = end;
        }
    }

    /// The span a new range would get now.
    pub fn span(&self) -> u64 {
        self.span
    }

    /// Whether split pieces are waiting (they are behind every new range, so they unblock in-order commits).
    pub fn has_pieces(&self) -> bool {
        !self.pieces.is_empty()
    }

    /// The next range to fetch: a waiting piece, lowest first, else a new range; `None` when all are out.
    pub fn next_range(&mut self) -> Option<BlockRange> {
        if let Some((_, piece)) = self.pieces.pop_first() {
            // A piece wider than what the density now suggests would likely fail again: hand out a span's
            // worth and keep the rest waiting.
            if let Some((first, rest)) =
                piece.split_after(piece.start().saturating_add(self.span - 1))
            {
                self.pieces.insert(rest.start(), rest);
                return Some(first);
            }
            return Some(piece);
        }
        if self.exhausted {
            return None;
        }
        let start = self.next;
        let mut last = start.saturating_add(self.span - 1).min(self.end);
        if let Some(boundary) = self.boundaries.range(start + 1..).next() {
            last = last.min(boundary - 1);
        }
        let range = BlockRange::new(start, last).expect("start <= last by construction");
        if last == self.end {
            self.exhausted = true;
        } else {
            self.next = last + 1;
        }
        Some(range)
    }

    /// Learns from the node's answer for `range` (a range this planner handed out).
    pub fn report(&mut self, range: BlockRange, outcome: Outcome) -> Verdict {
        match outcome {
            Outcome::Logs { n } => {
                self.learn_density(range, n);
                Verdict::Done
            }
            Outcome::TooManyResults { suggested } => {
                let usable = suggested
                    .filter(|&(from, to)| from == range.start() && to < range.end() && to >= from);
                // Without a suggestion, halve; but where the learned span is already smaller (a dense burst
                // met by a range planned before the density was known), cut there and skip the halvings.
                let cut = (range.len() / 2).min(self.span).max(1);
                match usable
                    .and_then(|(_, to)| range.split_after(to))
                    .or_else(|| range.split_after(range.start() + cut - 1))
                {
                    Some((first, rest)) => {
                        // A suggested range fits the node's cap: the node knows the density better than we do.
                        self.span = self.clamp(first.len());
                        self.requeue(first, rest);
                        Verdict::Split
                    }
                    None => Verdict::SingleBlockOverflow,
                }
            }
            Outcome::Timeout => match range.halve() {
                Some((first, rest)) => {
                    self.span = self.clamp(first.len());
                    self.requeue(first, rest);
                    Verdict::Split
                }
                None => Verdict::SingleBlockOverflow,
            },
            Outcome::RangeTooWide { max_blocks } => {
                let cap = max_blocks
                    .filter(|&m| m >= 1 && m < range.len())
                    .unwrap_or(range.len().div_ceil(2).max(1));
                self.node_cap = Some(self.node_cap.map_or(cap, |c| c.min(cap)));
                self.span = self.clamp(self.span);
                let mut pieces = Vec::new();
                let mut start = range.start();
                while start <= range.end() {
                    let last = start.saturating_add(cap - 1).min(range.end());
                    pieces.push(BlockRange::new(start, last).expect("start <= last"));
                    start = last + 1;
                }
                if pieces.len() == 1 {
                    // A one-block range "too wide" cannot be narrowed by blocks.
                    return Verdict::SingleBlockOverflow;
                }
                for piece in pieces {
                    self.pieces.insert(piece.start(), piece);
                }
                Verdict::Split
            }
        }
    }

    fn requeue(&mut self, first: BlockRange, rest: BlockRange) {
        self.pieces.insert(first.start(), first);
        self.pieces.insert(rest.start(), rest);
    }

    /// Grows the span towards `target_logs` per request, or shrinks it at once where logs are dense.
    /// Growth is at most 8x the length of the range answered: an answer about a few blocks says little
    /// about thousands, but creeping up by doubling after a dense stretch cost hundreds of tiny requests
    /// on the simulated chain (docs/BENCHMARKS.md); a split costs one.
    fn learn_density(&mut self, range: BlockRange, n: u64) {
        let ideal = if n == 0 {
            u64::MAX
        } else {
            (u128::from(range.len()) * u128::from(self.config.target_logs) / u128::from(n))
                .min(u128::from(u64::MAX)) as u64
        };
        let ceiling = range.len().saturating_mul(8).max(self.span);
        self.span = self.clamp(ideal.min(ceiling));
    }

    fn clamp(&self, span: u64) -> u64 {
        let max = self
            .node_cap
            .map_or(self.config.max_span, |c| c.min(self.config.max_span));
        span.clamp(1, max.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CONFIG: PlannerConfig = PlannerConfig {
        initial_span: 100,
        max_span: 10_000,
        target_logs: 5000,
    };

    fn range(a: u64, b: u64) -> BlockRange {
        BlockRange::new(a, b).unwrap()
    }

    #[test]
    fn grows_the_span_where_logs_are_sparse() {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        let first = planner.next_range().unwrap();
        assert_eq!(first, range(0, 99));
        assert_eq!(planner.report(first, Outcome::Logs { n: 0 }), Verdict::Done);
        // Up to 8x the answered range at once.
        assert_eq!(planner.next_range().unwrap(), range(100, 899));
    }

    #[test]
    fn aims_at_the_target_number_of_logs() {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        let first = planner.next_range().unwrap();
        planner.report(first, Outcome::Logs { n: 10_000 });
        assert_eq!(planner.span(), 50);
    }

    #[test]
    fn splits_the_range_when_the_node_answers_too_many_results() {
        let mut planner = Planner::new(CONFIG, range(0, 99), []);
        let first = planner.next_range().unwrap();
        assert_eq!(
            planner.report(first, Outcome::TooManyResults { suggested: None }),
            Verdict::Split
        );
        assert_eq!(planner.next_range(), Some(range(0, 49)));
        assert_eq!(planner.next_range(), Some(range(50, 99)));
        assert_eq!(planner.next_range(), None);
    }

    #[test]
    fn uses_the_range_the_node_suggests_when_it_fits() {
        let mut planner = Planner::new(CONFIG, range(0, 99), []);
        let first = planner.next_range().unwrap();
        planner.report(
            first,
            Outcome::TooManyResults {
                suggested: Some((0, 9)),
            },
        );
        assert_eq!(planner.next_range(), Some(range(0, 9)));
        assert_eq!(
            planner.next_range(),
            Some(range(10, 19)),
            "the rest goes out a learned span at a time"
        );
    }

    #[test]
    fn ignores_a_suggestion_that_is_inverted_or_outside_the_range() {
        for bad in [(5, 2), (1, 9), (0, 99), (0, 500)] {
            let mut planner = Planner::new(CONFIG, range(0, 99), []);
            let first = planner.next_range().unwrap();
            planner.report(
                first,
                Outcome::TooManyResults {
                    suggested: Some(bad),
                },
            );
            assert_eq!(planner.next_range(), Some(range(0, 49)), "{bad:?}");
        }
    }

    #[test]
    fn a_single_block_over_the_cap_is_handed_back_to_the_caller() {
        let mut planner = Planner::new(CONFIG, range(7, 7), []);
        let only = planner.next_range().unwrap();
        assert_eq!(
            planner.report(only, Outcome::TooManyResults { suggested: None }),
            Verdict::SingleBlockOverflow
        );
        assert_eq!(planner.next_range(), None);
    }

    #[test]
    fn respects_a_block_limit_the_node_states() {
        let mut planner = Planner::new(CONFIG, range(0, 9_999), []);
        let first = planner.next_range().unwrap();
        planner.report(first, Outcome::Logs { n: 0 });
        let second = planner.next_range().unwrap();
        assert_eq!(second, range(100, 899));
        planner.report(
            second,
            Outcome::RangeTooWide {
                max_blocks: Some(64),
            },
        );
        assert_eq!(planner.next_range(), Some(range(100, 163)));
        assert!(planner.span() <= 64);
    }

    #[test]
    fn never_straddles_a_boundary() {
        let mut planner = Planner::new(CONFIG, range(0, 1000), [150, 151, 5000]);
        assert_eq!(planner.next_range(), Some(range(0, 99)));
        assert_eq!(planner.next_range(), Some(range(100, 149)));
        assert_eq!(planner.next_range(), Some(range(150, 150)));
        assert_eq!(planner.next_range(), Some(range(151, 250)));
    }

    #[test]
    fn extending_the_plan_continues_after_the_old_end() {
        let mut planner = Planner::new(CONFIG, range(0, 10), []);
        assert_eq!(planner.next_range(), Some(range(0, 10)));
        assert_eq!(planner.next_range(), None);
        planner.extend_to(20);
        assert_eq!(planner.next_range(), Some(range(11, 20)));
    }

    #[derive(Debug, Clone)]
    enum Answer {
        Logs(u64),
        TooMany(Option<(u64, u64)>),
        Timeout,
        TooWide(Option<u64>),
    }

    fn answer() -> impl Strategy<Value = Answer> {
        prop_oneof![
            4 => (0u64..20_000).prop_map(Answer::Logs),
            2 => proptest::option::of((0u64..2_000, 0u64..2_000)).prop_map(Answer::TooMany),
            1 => Just(Answer::Timeout),
            1 => proptest::option::of(0u64..300).prop_map(Answer::TooWide),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]

        /// For any sequence of node answers (and any interleaving of outstanding ranges), the ranges the
        /// planner declares done tile `[start, end]` exactly, each within bounds, and it terminates.
        #[test]
        fn done_ranges_tile_the_plan_with_no_gap_or_overlap(
            start in 0u64..1_000,
            len in 1u64..5_000,
            initial in 1u64..500,
            answers in proptest::collection::vec(answer(), 1..64),
            boundaries in proptest::collection::vec(0u64..6_000, 0..4),
            in_flight in 1usize..6,
        ) {
            let config = PlannerConfig { initial_span: initial, max_span: 2_000.max(initial), target_logs: 5000 };
            let plan = range(start, start + len - 1);
            let mut planner = Planner::new(config, plan, boundaries);
            let mut done = Vec::new();
            let mut outstanding: Vec<BlockRange> = Vec::new();
            let mut step = 0usize;
            loop {
                while outstanding.len() < in_flight {
                    match planner.next_range() {
                        Some(r) => {
                            prop_assert!(r.start() >= plan.start() && r.end() <= plan.end());
                            prop_assert!(r.len() <= config.max_span);
                            outstanding.push(r);
                        }
                        None => break,
                    }
                }
                if outstanding.is_empty() { break; }
                // Answer the outstanding ranges in a scrambled order.
                let r = outstanding.remove(step % outstanding.len());
                // After the scripted answers, the node answers with logs so that the run ends.
                let outcome = match answers.get(step).cloned().unwrap_or(Answer::Logs(1)) {
                    Answer::Logs(n) => Outcome::Logs { n },
                    Answer::TooMany(s) => Outcome::TooManyResults { suggested: s.map(|(a, b)| (r.start() + a % r.len(), r.start() + b % (r.len() + 5))) },
                    Answer::Timeout => Outcome::Timeout,
                    Answer::TooWide(m) => Outcome::RangeTooWide { max_blocks: m },
                };
                step += 1;
                prop_assert!(step < 100_000, "no progress");
                match planner.report(r, outcome) {
                    Verdict::Done | Verdict::SingleBlockOverflow => done.push(r),
                    Verdict::Split => {}
                }
            }
            done.sort();
            let mut expected_next = plan.start();
            for r in &done {
                prop_assert_eq!(r.start(), expected_next, "gap or overlap at {}", r);
                expected_next = r.end() + 1;
            }
            prop_assert_eq!(expected_next, plan.end() + 1);
        }
    }
}
