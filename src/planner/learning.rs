//! The span learned from answers, for ranges no survey covers: how many blocks the next range gets, from
//! the density of an answer and how well one answer's density has foretold the next.
//!
//! Two spans are kept. Each answer leaves a [`Learned`] span for the range that starts right after it, and
//! such a range is cut by that one ([`Planner::span_at`]). Anywhere else (the next new range when the
//! blocks before it are still in flight) the planner falls back to its one running span, the last learned
//! anywhere. With eight ranges in flight, answers of stretches far apart arrive interleaved: with one span
//! only, a span learned inside a burst of one contract would cut the quiet blocks after another burst into
//! crumbs of forty blocks, and the running miss, fed by every burst's edge, would hold every range inside a
//! burst at 0.6 of the target (the `bursts` preset; docs/planner.md).
//!
//! Where a factory's children join as the blocks go (`super::addresses`), each answer also teaches its logs
//! per block and address asked for there, and where that has foretold the answers better (the survey's fit
//! chooses the same way, `super::background`), a range ends where the children known to exist ahead fill
//! it: on a chain of 300 pairs that multiply as the square of the height, with no probe to survey by, ranges
//! cut by the logs per block of the stretches behind are refused five at a time.

use crate::primitives::{BlockNumber, BlockRange};

use super::background::BLOCKS_MISS_RATIO;
use super::Planner;

/// Where only a learned span is known, aim at a fraction of the target that shrinks with how badly one
/// answer's density has foretold the next (`miss`): on the default chain a neighbouring range misjudges the
/// next by a quarter or more, so the aim starts at 0.6 there; where the density is even (one busy contract)
/// it rises towards `MAX_LEARNED_AIM`, and an overflow costs a request.
const MAX_LEARNED_AIM: f64 = 0.95;
/// The aim never falls below this: on bursty chains a lower one only made more, smaller requests.
const MIN_LEARNED_AIM: f64 = 0.6;
/// How much a miss (|ln(actual / foretold)|) lowers the aim: `aim = 1 / (1 + MISS_WEIGHT * miss)`.
const MISS_WEIGHT: f64 = 1.3;
/// The miss assumed before any answer: with `MISS_WEIGHT` it gives the 0.6 that suited the default chain.
pub(super) const INITIAL_MISS: f64 = 0.5;
/// Weight of the newest answer in the running miss from the fifth forecast on (`1 / MISS_ALPHA -
/// PRIOR_ANSWERS`); before that the running miss is the mean of the forecasts' misses and the assumed
/// [`INITIAL_MISS`], which counts as [`PRIOR_ANSWERS`] answers.
const MISS_ALPHA: f64 = 0.2;
/// How many answers the assumed [`INITIAL_MISS`] weighs against the misses seen: half of one, so that three
/// forecasts that hit within 5% raise the aim near its ceiling (decayed by a fifth an answer from the first
/// instead, the assumption would still make half the running miss there, and ranges would go out at
/// 0.65-0.8 of the target). Both running misses learn alike, so that neither is preferred for merely
/// learning faster (docs/planner.md).
const PRIOR_ANSWERS: f64 = 0.5;
/// An answer grows the span to at most this many times its own length: an answer about a few blocks says
/// little about thousands, but creeping up by doubling after a dense stretch costs hundreds of tiny
/// requests, where a split costs one. Once the node has suggested a range with a refusal, the span right
/// after an answer is not held to it: there an overshoot costs one refusal whose suggested range is a full
/// answer of its own (docs/planner.md).
const MAX_GROWTH: u64 = 8;

/// An answer of fewer logs than this foretells nothing: its own count errs by a quarter or more, and a
/// forecast from an empty answer (a contract's first blocks) missed the next by a factor of hundreds, which
/// held the aim at its lowest for the rest of a short chain.
const MIN_FORECAST_LOGS: u64 = 16;
/// The fewest blocks at the end of an answer that, quiet, say a burst ended inside it.
const MIN_QUIET_BLOCKS: u64 = 4;
/// A tail holding fewer logs than this says too little to foretell with: the whole answer does.
const MIN_TAIL_LOGS: u64 = 64;
/// The tail's density replaces the whole answer's only where it differs from it by more than this factor
/// (a burst beginning or ending in the answer): elsewhere it holds half the logs, so it errs more.
const TAIL_CHANGE: f64 = 2.0;
/// The miss a tail's forecast is aimed with (an aim of 0.79). How well the answer before foretold this one
/// says nothing of the tail (the tail is used because this answer changed), and aimed with that miss the
/// first range inside every burst would go out at 0.6 of the target (docs/planner.md).
const TAIL_MISS: f64 = 0.2;

/// What one answer taught about the blocks after it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Learned {
    /// The span it suggests for the range after it.
    span: u64,
    /// The logs per block it foretells for the range after it.
    density: f64,
    /// Where a factory's children join as the blocks go: the logs per block and address it foretells.
    weighed: Option<f64>,
    /// Where that foretells better than [`Self::density`]: the weight (blocks times addresses) the range
    /// after it may hold.
    budget: Option<f64>,
    /// Whether the answer held enough logs to foretell with ([`MIN_FORECAST_LOGS`]).
    foretells: bool,
}

/// The densities of the last answer anywhere, and how well each has foretold the next answer.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Running {
    /// Logs per block.
    density: Option<f64>,
    /// The running miss of that density as a forecast of the next answer (see `MAX_LEARNED_AIM`).
    miss: Miss,
    /// Where a factory's children join as the blocks go (`super::addresses`): logs per block and address
    /// asked for there, and its running miss.
    weighed: Option<f64>,
    weighed_miss: Miss,
    /// Where that foretells better: the weight a range cut by the running span may hold.
    budget: Option<f64>,
    /// Whether the last answer held enough logs to foretell with ([`MIN_FORECAST_LOGS`]).
    foretells: bool,
}

impl Running {
    /// Whether the density by addresses foretells better: the fit by blocks must miss under
    /// [`BLOCKS_MISS_RATIO`] of it to be used (as the survey's background chooses, `super::background`).
    fn by_addresses(&self) -> bool {
        self.weighed.is_some() && self.miss.value >= BLOCKS_MISS_RATIO * self.weighed_miss.value
    }

    /// The running miss of the density in use ([`Self::by_addresses`]).
    fn in_use_miss(&self) -> f64 {
        if self.by_addresses() {
            self.weighed_miss.value
        } else {
            self.miss.value
        }
    }
}

/// A running miss (|ln(actual / foretold)|) and the forecasts counted into it: the mean of their misses and
/// the assumed [`INITIAL_MISS`] while few are seen, then decayed by [`MISS_ALPHA`] a forecast.
#[derive(Debug, Clone, Copy)]
struct Miss {
    value: f64,
    seen: u32,
}

impl Default for Miss {
    fn default() -> Self {
        Self {
            value: INITIAL_MISS,
            seen: 0,
        }
    }
}

impl Miss {
    /// Counts one more forecast's miss.
    fn add(&mut self, miss: f64) {
        self.seen = self.seen.saturating_add(1);
        let alpha = (1.0 / (PRIOR_ANSWERS + f64::from(self.seen))).max(MISS_ALPHA);
        self.value = (1.0 - alpha) * self.value + alpha * miss;
    }
}

/// The last blocks of an answer that hold half its logs: from the block of its middle log to its end.
/// For the range right after the answer they foretell better than the whole answer: a range that ends a
/// few dozen blocks into a burst holds thousands of quiet blocks too, and its average would put the next
/// range hundreds of blocks deep into the burst, to be refused (`bursts`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tail {
    /// The blocks, up to the answer's end.
    blocks: u64,
    /// The share of the answer's logs they hold.
    share: f64,
    /// The last quarter of the answer's blocks, and the share of its logs they hold: where the node
    /// suggests ranges, a burst ending inside the answer (half its logs still lie in the burst, so the
    /// tail above does not show the end).
    end_blocks: u64,
    end_share: f64,
    /// The last eighth of the answer's blocks (at least [`MIN_QUIET_BLOCKS`]), and the share of its logs
    /// they hold: whether a burst ended inside the answer, so that the survey is trusted again after it
    /// (`Survey::weigh_burst_end`). An eighth, not a quarter: the last piece of a burst holds a few of its
    /// blocks in its last quarter more often than not (`bursts`, end to end).
    quiet_blocks: u64,
    quiet_share: f64,
}

impl Tail {
    /// The tail of an answer for `range` whose logs lie in `blocks` (one entry per log, in any order);
    /// `None` when the answer holds too few logs to say.
    pub fn of(range: BlockRange, mut blocks: Vec<BlockNumber>) -> Option<Self> {
        let n = blocks.len();
        if (n as u64) < 2 * MIN_TAIL_LOGS {
            return None;
        }
        let (_, &mut middle, _) = blocks.select_nth_unstable(n / 2);
        if !range.contains(middle) {
            return None;
        }
        // The share of the answer's logs in its last `blocks_at_end` blocks.
        let share_of_last = |blocks_at_end: u64| {
            let from = range.end() + 1 - blocks_at_end;
            blocks.iter().filter(|&&b| b >= from).count() as f64 / n as f64
        };
        let end_blocks = (range.len() / 4).max(1);
        let quiet_blocks = (range.len() / 8).max(MIN_QUIET_BLOCKS).min(range.len());
        let tail_blocks = range.end() - middle + 1;
        Some(Self {
            blocks: tail_blocks,
            share: share_of_last(tail_blocks),
            end_blocks,
            end_share: share_of_last(end_blocks),
            quiet_blocks,
            quiet_share: share_of_last(quiet_blocks),
        })
    }

    /// The last eighth of the answer for `range` of `n` logs, and the logs it holds.
    pub(super) fn quiet_end(&self, range: BlockRange, n: u64) -> (BlockRange, u64) {
        let end = BlockRange::new(range.end() + 1 - self.quiet_blocks, range.end())
            .expect("the last eighth lies in the range");
        (end, (self.quiet_share * n as f64).round() as u64)
    }
}

/// The fraction of the target to aim at when a density that misses by `miss` foretells a range.
fn aim_of(miss: f64) -> f64 {
    (1.0 / (1.0 + MISS_WEIGHT * miss)).clamp(MIN_LEARNED_AIM, MAX_LEARNED_AIM)
}

impl Planner {
    /// The answer about to be reported for `range` ends with `tail`: the range right after it is cut by
    /// the tail's density where that differs from the whole answer's by more than `TAIL_CHANGE` (2x), else,
    /// once the node has suggested a range, by its last quarter's where that is over 2x sparser (a burst
    /// ending inside it).
    pub fn observe_tail(&mut self, range: BlockRange, tail: Tail) {
        self.tail = Some((range, tail));
    }

    /// Learns from an answer of `n` logs for `range`: the running span and miss, and the span for the range
    /// right after it, aimed by how well the answer before it (when there is one) foretold this one and
    /// cut by the density of the answer's tail where [`Self::observe_tail`] gave one.
    /// Either span shrinks at once where logs are dense and grows at most [`MAX_GROWTH`] times the range
    /// (the span after the answer without that bound once the node has suggested a range).
    /// Where a factory's children join as the blocks go, the same is learned per block and address too, and
    /// used where it foretells better: the children known to exist ahead then cut the range there.
    pub(super) fn learn_density(&mut self, range: BlockRange, n: u64) {
        let logs = n as f64;
        let extent = self.addresses.extent(range.start(), range.end());
        let density = logs / range.len() as f64;
        // The part of the answer that foretells the blocks after it, as (its blocks, its share of the logs).
        let by_tail = match self.tail.take() {
            Some((of, tail)) if of == range && range.len() > 1 => {
                let per_block = |(blocks, share): (u64, f64)| logs * share / blocks as f64;
                Some((tail.blocks, tail.share))
                    .filter(|&part| (per_block(part) / density).ln().abs() > TAIL_CHANGE.ln())
                    .or_else(|| {
                        Some((tail.end_blocks, tail.end_share)).filter(|&part| {
                            self.suggests && per_block(part) * TAIL_CHANGE < density
                        })
                    })
            }
            _ => None,
        };
        let ahead = by_tail.map_or(density, |(blocks, share)| logs * share / blocks as f64);
        let weighed = self.addresses.grow().then(|| {
            let (blocks, share) = by_tail.unwrap_or((range.len(), 1.0));
            let weight = self.addresses.extent(range.end() + 1 - blocks, range.end());
            (
                logs / extent.weight as f64,
                logs * share / weight.weight as f64,
            )
        });
        let miss_of = |foretold: f64| ((logs + 1.0) / (foretold + 1.0)).ln().abs();
        let foretells = n >= MIN_FORECAST_LOGS;
        let running = &mut self.running;
        if running.foretells {
            if let Some(foretold) = running.density {
                running.miss.add(miss_of(foretold * range.len() as f64));
            }
            if let (Some(foretold), Some(_)) = (running.weighed, weighed) {
                running
                    .weighed_miss
                    .add(miss_of(foretold * extent.weight as f64));
            }
        }
        running.foretells = foretells;
        running.density = Some(density);
        running.weighed = weighed.map(|(all, _)| all);
        let by_addresses = running.by_addresses();
        let running_miss = running.in_use_miss();
        let local_miss = match by_tail {
            Some(_) => TAIL_MISS,
            None => self
                .learned_before(range.start())
                .filter(|before| before.foretells)
                .map_or(running_miss, |before| match before.weighed {
                    Some(foretold) if by_addresses => miss_of(foretold * extent.weight as f64),
                    _ => miss_of(before.density * range.len() as f64),
                }),
        };

        let aim = |miss: f64| (self.config.target_logs as f64 * aim_of(miss)).max(1.0);
        let ideal = |miss: f64, density: f64| {
            if density <= 0.0 {
                u64::MAX
            } else {
                (aim(miss) / density).min(u64::MAX as f64) as u64
            }
        };
        // The weight a range may hold, by the logs per block and address (none where there are none).
        let budget = |miss: f64, weighed: f64| {
            by_addresses.then(|| aim(miss) / weighed.max(f64::MIN_POSITIVE))
        };
        let growth = range.len().saturating_mul(MAX_GROWTH);
        self.span = self.clamp(ideal(running_miss, density).min(growth.max(self.span)));
        self.running.budget = weighed.and_then(|(all, _)| budget(running_miss, all));
        // Where the node suggests ranges, an overshoot costs one refusal whose suggested range is itself a
        // full answer; held to `MAX_GROWTH`, the quiet blocks after a burst would go out in crumbs.
        let local_growth = if self.suggests { u64::MAX } else { growth };
        let span = self.clamp(ideal(local_miss, ahead).min(local_growth));
        self.local.insert(
            range.end(),
            Learned {
                span,
                density: ahead,
                weighed: weighed.map(|(_, ahead)| ahead),
                budget: weighed.and_then(|(_, ahead)| budget(local_miss, ahead)),
                foretells,
            },
        );
    }

    /// The span of a range starting at `start` where no survey covers it: the one learned from the answer
    /// just before it, else the last learned anywhere; where a budget of weight was learned with it, no
    /// longer than the blocks from `start` that stay within it.
    pub(super) fn span_at(&self, start: BlockNumber) -> u64 {
        let (span, budget) = self
            .learned_before(start)
            .map_or((self.span, self.running.budget), |learned| {
                (learned.span, learned.budget)
            });
        let span = self.clamp(span);
        budget.map_or(span, |budget| {
            self.addresses.blocks_within(start, budget, span)
        })
    }

    /// The fraction of the target a range cut by the running span aims at.
    pub(super) fn learned_aim(&self) -> f64 {
        aim_of(self.running.in_use_miss())
    }

    /// What the answer for the blocks ending right before `start` taught, if it came.
    fn learned_before(&self, start: BlockNumber) -> Option<Learned> {
        start
            .checked_sub(1)
            .and_then(|before| self.local.get(&before))
            .copied()
    }

    /// Forgets what answers below `block` taught, but for the one right before it.
    pub(super) fn forget_learned_below(&mut self, block: BlockNumber) {
        self.local = self.local.split_off(&block.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::tests::{range, CONFIG};
    use crate::planner::Outcome;

    /// `per_block` logs in each block of `blocks`.
    fn logs_in(blocks: BlockRange, per_block: usize) -> Vec<BlockNumber> {
        (blocks.start()..=blocks.end())
            .flat_map(|b| std::iter::repeat_n(b, per_block))
            .collect()
    }

    #[test]
    fn a_tail_holds_half_the_logs_up_to_the_answers_end() {
        let even = Tail::of(range(0, 99), logs_in(range(0, 99), 10)).unwrap();
        assert_eq!(even.blocks, 50);
        assert!((even.share - 0.5).abs() < 0.01, "{even:?}");
        // A burst in the last 20 blocks: the tail lies in it, whatever order the logs came in.
        let mut burst = logs_in(range(0, 79), 1);
        burst.extend(logs_in(range(80, 99), 150));
        burst.reverse();
        let tail = Tail::of(range(0, 99), burst).unwrap();
        assert_eq!(tail.blocks, 11, "from the block of log 1,540 of 3,080");
        assert!(tail.share >= 0.5, "{tail:?}");
        assert_eq!(Tail::of(range(0, 99), logs_in(range(0, 99), 1)), None);
    }

    /// The next range after an answer for blocks 0-99 of `n` logs whose tail is `tail`, if given.
    fn next_after(n: u64, tail: Option<Vec<BlockNumber>>) -> BlockRange {
        next_after_on(false, n, tail)
    }

    /// As [`next_after`], from a node that has suggested a range with a refusal when `suggests`.
    fn next_after_on(suggests: bool, n: u64, tail: Option<Vec<BlockNumber>>) -> BlockRange {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        planner.suggests = suggests;
        let first = planner.next_range().unwrap();
        assert_eq!(first, range(0, 99));
        if let Some(tail) = tail.and_then(|blocks| Tail::of(first, blocks)) {
            planner.observe_tail(first, tail);
        }
        planner.report(first, Outcome::Logs { n });
        planner.next_range().unwrap()
    }

    /// An empty answer (a contract's first blocks) foretells nothing: after it and four answers of an even
    /// density, the aim of ranges cut by the running span has risen from the 0.61 of no history. Counted as
    /// a forecast, its miss of a factor of 4,000 would hold the aim at its lowest, 0.6, through all of them.
    #[test]
    fn an_empty_answer_does_not_lower_the_aim_of_the_ranges_after_it() {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        let first = planner.next_range().unwrap();
        planner.report(first, Outcome::Logs { n: 0 });
        for _ in 0..5 {
            let next = planner.next_range().unwrap();
            planner.report(next, Outcome::Logs { n: 5 * next.len() });
        }
        let aim = planner.learned_aim();
        assert!(aim > 0.7, "aim {aim}");
    }

    /// An even density is trusted within a few answers: after four answers of one pace (three forecasts
    /// that hit), the aim of ranges cut by the running span is near its ceiling (the assumed miss decayed by
    /// a fifth an answer would hold it at 0.75 there).
    #[test]
    fn an_even_pace_raises_the_aim_within_a_few_answers() {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        assert!((planner.learned_aim() - aim_of(INITIAL_MISS)).abs() < 1e-9);
        for _ in 0..4 {
            let next = planner.next_range().unwrap();
            planner.report(next, Outcome::Logs { n: 20 * next.len() });
        }
        let aim = planner.learned_aim();
        assert!(aim > 0.85, "aim {aim}");
        // A forecast that misses by half lowers it again at once.
        let next = planner.next_range().unwrap();
        planner.report(next, Outcome::Logs { n: 10 * next.len() });
        let after_miss = planner.learned_aim();
        assert!(after_miss < aim - 0.05, "aim {aim} -> {after_miss}");
    }

    /// A burst that begins in the last blocks of an answer: the next range is cut by the burst's density,
    /// not by the answer's average, which put it five times too deep into the burst.
    #[test]
    fn the_range_after_an_answer_ending_in_a_burst_is_cut_by_the_bursts_density() {
        let mut blocks = logs_in(range(0, 79), 1);
        blocks.extend(logs_in(range(80, 99), 146));
        let n = blocks.len() as u64;
        assert_eq!(n, 3_000);
        let averaged = next_after(n, None);
        assert_eq!(averaged.len(), 101, "0.606 of 5,000 logs at 30 a block");
        let by_tail = next_after(n, Some(blocks));
        assert!(
            by_tail.len() * 146 <= 5000,
            "{by_tail}: over the target at the burst's density"
        );
        // Aimed with the tail's own miss, not the 0.6 that the answer's surprise would give.
        assert!(
            by_tail.len() * 146 >= 3_500,
            "{by_tail}: aimed at under 0.7 of the target"
        );
    }

    /// Where the tail is about as dense as the whole answer, it holds half the logs and errs more: the
    /// whole answer cuts the next range.
    #[test]
    fn an_even_answer_cuts_the_next_range_by_its_average() {
        let mut blocks = logs_in(range(0, 49), 25);
        blocks.extend(logs_in(range(50, 99), 35));
        let n = blocks.len() as u64;
        assert_eq!(next_after(n, Some(blocks)), next_after(n, None));
    }

    /// From a node that suggests ranges, a burst that ends in the first blocks of an answer (most of its
    /// logs still in the burst, so the half-of-the-logs tail lies in it too): the next range is cut by the
    /// quiet last quarter of the answer, past the eightfold growth a plain node's ranges are held to.
    #[test]
    fn with_a_suggesting_node_the_range_after_a_burst_ending_is_cut_by_the_quiet_end() {
        let mut blocks = logs_in(range(0, 29), 150);
        blocks.extend((30..100).step_by(4));
        let n = blocks.len() as u64;
        let plain = next_after_on(false, n, Some(blocks.clone()));
        assert!(
            plain.len() <= 800,
            "{plain}: a plain node's range grows 8x at most"
        );
        let suggesting = next_after_on(true, n, Some(blocks.clone()));
        assert_eq!(
            suggesting.len(),
            CONFIG.max_span,
            "{suggesting}: a quarter of a log a block, so the longest range"
        );
        // An answer whose end is as dense as the rest says nothing new: the same range as on a plain node.
        let even = logs_in(range(0, 99), 45);
        assert_eq!(
            next_after_on(true, 4_500, Some(even.clone())),
            next_after_on(false, 4_500, Some(even))
        );
    }
}
