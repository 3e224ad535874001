//! Blocks weighed by the addresses a request carries there. Where a factory's children multiply, the logs
//! that come regardless of the probe (`super::background`) are mostly theirs, and grow with their number:
//! on the `factory` preset, as the square of the height. A fit per block lags that growth, and ranges cut
//! by it over a quiet stretch of the probe are refused one after another (there a range estimated under
//! 9,500 logs holds 22,700). Counted per address and block instead, the children's logs are steady, and
//! the ranges ahead are cut by the children known to exist there (read ahead of the backfill,
//! `pipeline::foresight`). The span learned from answers where no survey covers a range is weighed the same
//! way (`super::learning`). Without factories every block weighs one. Pure arithmetic.

use std::sync::Arc;

use crate::primitives::BlockNumber;

/// A stretch of blocks as the survey's background counts it: its blocks, and their weight in addresses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Extent {
    /// Blocks.
    pub blocks: u64,
    /// Blocks times the addresses asked for in each ([`Addresses::weighted`]).
    pub weight: u64,
}

/// Per block, how many addresses the requests carry: none given, every block weighs one.
#[derive(Debug, Clone, Default)]
pub(super) struct Addresses {
    /// The block at which each address joins, sorted.
    joins: Option<Arc<[BlockNumber]>>,
}

impl Addresses {
    /// Addresses joining at `joins` (any order, one entry per address).
    pub(super) fn joining_at(mut joins: Vec<BlockNumber>) -> Self {
        joins.sort_unstable();
        Self {
            joins: Some(joins.into()),
        }
    }

    /// Whether addresses join as the blocks go (a factory's children).
    pub(super) fn grow(&self) -> bool {
        self.joins.is_some()
    }

    /// Addresses that have joined by `block`, at least one.
    fn at(joins: &[BlockNumber], block: BlockNumber) -> u64 {
        (joins.partition_point(|&join| join <= block) as u64).max(1)
    }

    /// `from..=to` as the survey's background counts it.
    pub(super) fn extent(&self, from: BlockNumber, to: BlockNumber) -> Extent {
        Extent {
            blocks: (to + 1).saturating_sub(from),
            weight: self.weighted(from, to),
        }
    }

    /// The most blocks from `from` on, `max` at most and one at least, whose weight stays within `budget`.
    pub(super) fn blocks_within(&self, from: BlockNumber, budget: f64, max: u64) -> u64 {
        let fits =
            |blocks: u64| self.weighted(from, from.saturating_add(blocks - 1)) as f64 <= budget;
        if fits(max) {
            return max;
        }
        // `low` fits (or is the one block a range takes at least), `high` does not.
        let (mut low, mut high) = (1, max);
        while low + 1 < high {
            let mid = low + (high - low) / 2;
            if fits(mid) {
                low = mid;
            } else {
                high = mid;
            }
        }
        low
    }

    /// The weight of `from..=to`: its blocks, each times the addresses there (the mean of its ends', as
    /// addresses only join); its blocks when no addresses were given.
    fn weighted(&self, from: BlockNumber, to: BlockNumber) -> u64 {
        let blocks = (to + 1).saturating_sub(from);
        match &self.joins {
            None => blocks,
            Some(joins) => {
                let ends = Self::at(joins, from) + Self::at(joins, to);
                (blocks.saturating_mul(ends) / 2).max(blocks)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{range, range_after_quiet_surveys, CONFIG};
    use super::super::{Outcome, Planner};
    use super::*;
    use crate::primitives::BlockRange;

    /// Addresses asked for at `block` in [`range_where_children_multiply`]: 10 contracts, then a child
    /// joining at each block up to 90.
    fn addresses_at(block: u64) -> u64 {
        10 + block.min(90)
    }

    /// A planner that has counted, four times over, two bursts of the probe (candidate 0, 9 other logs with
    /// each probe log) and two quiet stretches below block 90, each address logging 0.2 a block beside
    /// the probe as children join; then surveyed the blocks from 100 on: a quiet stretch, one probe hit
    /// every 100 blocks, 100 addresses. Returns the range it cuts at 100, with the blocks weighed by
    /// addresses or not.
    fn range_where_children_multiply(weighed: bool) -> BlockRange {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        if weighed {
            let mut joins = vec![0; 10];
            joins.extend(1..=90);
            planner.weigh_by_addresses(joins);
        }
        let first = planner.next_range().unwrap();
        assert_eq!(first, range(0, 99));
        let background =
            |from: u64, to: u64| -> u64 { (from..=to).map(addresses_at).sum::<u64>() / 5 };
        for _ in 0..4 {
            for (from, to, probe) in [(0, 29, 150), (0, 89, 2), (60, 89, 150), (30, 59, 1)] {
                let others = 9 * probe + background(from, to);
                planner.observe_mix(range(from, to), probe + others, &[probe, others]);
            }
        }
        planner.report(first, Outcome::Logs { n: 1_000 });
        range_after_quiet_surveys(&mut planner)
    }

    #[test]
    fn where_children_multiply_a_range_is_cut_by_them() {
        // From block 100, 20 logs a block beside the probe's 0.1: 5,000 logs in about 250 blocks.
        let weighed = range_where_children_multiply(true);
        assert_eq!(weighed.start(), 100);
        assert!((180..=250).contains(&weighed.len()), "{weighed}");
        // Blocks counted alike, the answers averaged 4-17 logs a block, the newest the most.
        let alike = range_where_children_multiply(false);
        assert!(alike.len() > 350, "{alike}");
    }

    /// Ten contracts from block 0, then a child joining at every block from 100 on.
    fn children_from_block_100() -> Vec<BlockNumber> {
        let mut joins = vec![0; 10];
        joins.extend(100..20_000);
        joins
    }

    /// A planner weighing blocks by `joins` that has answered its ranges one at a time with `logs_of`
    /// each, no survey covering any; returns the ranges it handed out.
    fn answered_in_turn(
        joins: Option<Vec<BlockNumber>>,
        answers: usize,
        logs_of: impl Fn(BlockRange) -> u64,
    ) -> Vec<BlockRange> {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        if let Some(joins) = joins {
            planner.weigh_by_addresses(joins);
        }
        let mut ranges = Vec::new();
        for _ in 0..answers {
            let next = planner.next_range().expect("a range");
            planner.report(next, Outcome::Logs { n: logs_of(next) });
            ranges.push(next);
        }
        ranges.push(planner.next_range().expect("a range"));
        ranges
    }

    /// Without a survey, the span learned from an answer is cut by the children known to join ahead: 1,000
    /// logs over blocks 0-99 of ten contracts foretell one log per address and block, so from block 100,
    /// where a child joins at each block, about 68 blocks hold the 0.61 of the target aimed at (303 with
    /// blocks weighed alike, at ten logs a block).
    #[test]
    fn where_children_multiply_the_span_an_answer_teaches_is_cut_by_them() {
        let weighed = answered_in_turn(Some(children_from_block_100()), 1, |_| 1_000);
        assert_eq!(weighed[1].start(), 100);
        assert!((60..=75).contains(&weighed[1].len()), "{}", weighed[1]);
        let alike = answered_in_turn(None, 1, |_| 1_000);
        assert_eq!(alike[1].len(), 303);
    }

    /// Where the logs keep a steady pace by blocks while children join, the density by blocks foretells
    /// the answers, the one by addresses misses more each time, and the blocks cut the ranges again.
    #[test]
    fn a_steady_pace_beside_multiplying_children_is_learned_by_blocks() {
        let steady = |r: BlockRange| 10 * r.len();
        let weighed = answered_in_turn(Some(children_from_block_100()), 8, steady);
        let alike = answered_in_turn(None, 8, steady);
        // The first ranges after block 100 are cut by the children, and come back at half their forecast.
        assert!(weighed[1].len() < alike[1].len() / 2, "{weighed:?}");
        let last = |ranges: &[BlockRange]| ranges.last().map(BlockRange::len);
        assert_eq!(last(&weighed), last(&alike), "{weighed:?}");
    }

    #[test]
    fn blocks_within_a_budget_of_weight() {
        // Two contracts, then a child at each block from 100: blocks 100-109 weigh 3 + 4 + ... + 12.
        let mut joins = vec![0, 0];
        joins.extend(100..1_000);
        let addresses = Addresses::joining_at(joins);
        assert_eq!(addresses.blocks_within(0, 200.0, 1_000), 100);
        assert_eq!(addresses.weighted(100, 109), 10 * (3 + 12) / 2);
        assert_eq!(addresses.blocks_within(100, 75.0, 1_000), 10);
        assert_eq!(addresses.blocks_within(100, 74.0, 1_000), 9);
        assert_eq!(
            addresses.blocks_within(100, 0.0, 1_000),
            1,
            "a block at least"
        );
        assert_eq!(
            addresses.blocks_within(100, 1e12, 40),
            40,
            "the span at most"
        );
    }

    #[test]
    fn without_addresses_a_block_weighs_one() {
        assert_eq!(Addresses::default().weighted(10, 19), 10);
        assert_eq!(Addresses::default().weighted(5, 4), 0);
    }

    #[test]
    fn blocks_weigh_the_addresses_joined_by_them() {
        // Two contracts from block 0, children at 100, 100 and 200.
        let addresses = Addresses::joining_at(vec![200, 0, 100, 0, 100]);
        assert_eq!(addresses.weighted(0, 99), 200);
        assert_eq!(addresses.weighted(100, 199), 400);
        assert_eq!(addresses.weighted(200, 200), 5);
        // Across a join: the mean of its ends.
        assert_eq!(addresses.weighted(150, 249), 100 * (4 + 5) / 2);
    }

    #[test]
    fn blocks_before_every_join_weigh_one() {
        let addresses = Addresses::joining_at(vec![1_000]);
        assert_eq!(addresses.weighted(0, 9), 10);
    }
}
