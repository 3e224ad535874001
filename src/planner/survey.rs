//! The density survey: a cheap look ahead at where the logs are, so that ranges can be cut close to the
//! node's result cap instead of guessed from the last answer.
//!
//! A survey asks the node for the same blocks with a *narrow* filter, one (address, topic0) pair of the
//! selection (the "probe") that carries a few percent of the logs, and keeps only the block numbers of what
//! comes back. Scaled by the probe's share of the full answers seen so far, those hits estimate how many logs
//! each stretch of blocks holds, with a Poisson error the planner allows for. One survey request covers the
//! ground of some twenty full requests, so the survey costs a few percent of the requests and turns dense
//! bursts, single huge blocks and sparse gaps into known quantities before a range is cut.
//!
//! This module only keeps the numbers: which probe, its share, the hits per block, how far the survey got.
//! It sends nothing; [`super::Planner`] decides when to survey and how to cut.

use std::collections::BTreeMap;

use crate::primitives::{BlockNumber, BlockRange};

use super::addresses::Extent;
use super::background::Fits;

/// Full-answer logs to see before a probe is chosen. Few are enough: the share is taken two standard
/// deviations low and sharpens with every answer, while each answer awaited without a probe is a range
/// planned blind and, on a slow node, a round trip with the writer idle. At 100 the first answer of the
/// sparse chains (100-150 logs before a dense burst) chooses the probe (docs/planner.md).
const MIN_MIX_LOGS: u64 = 100;
/// Answers awaited one at a time for a probe to be chosen.
const MAX_LEARNING_ANSWERS: u64 = 4;
/// The probe share aimed at: large enough for about 240 hits per 8,000-log range (a 6.5% error), small
/// enough that one survey covers about twenty ranges and rarely overflows in a dense stretch.
const PROBE_SHARE_AIM: f64 = 0.03;
/// Shares outside this band make a poor probe: too few hits to estimate from, or too little saved.
const PROBE_SHARE_BAND: (f64, f64) = (0.005, 0.15);
/// No lookahead for a job whose remaining logs, at the density seen so far, fill fewer ranges than this: its
/// surveys would cost more requests than their estimates save. A spot survey of a refused range needs only
/// the probe: one request where narrowing the range blind takes several.
const MIN_SURVEYED_RANGES: f64 = 8.0;
/// Hits one survey aims at: 60% of the cap, as the survey span is itself a guess; fewer cost more surveys,
/// more cost refusals (docs/planner.md).
pub(super) const SURVEY_HITS: u64 = 6_000;
/// Standard deviations of Poisson error allowed for when cutting a range by estimate. With the target at
/// 95% of the cap this leaves about two standard deviations between an estimate and a refusal; a wider
/// margin costs requests for no fewer refusals (docs/planner.md).
pub(super) const SIGMAS: f64 = 1.0;
/// Standard deviations of Poisson error beyond which an answer in a distrusted stretch is a burst the probe
/// does not see ([`Survey::weigh_distrusted`]): wide, as a few dozen logs carry one or two probe hits.
const AGREE_SIGMAS: f64 = 3.0;
/// Standard deviations under its count that the probe's share is taken at: an error there skews every
/// estimate the same way, so it gets the wider margin.
const SHARE_SIGMAS: f64 = 2.0;

/// A stretch where the survey is not trusted, and the last block of the answers in it that held far more
/// logs than the survey put there (the burst that made it wrong), if any yet.
#[derive(Debug, Clone, Copy)]
struct Distrusted {
    blocks: BlockRange,
    burst_end: Option<BlockNumber>,
}

/// What the survey knows.
#[derive(Debug, Clone)]
pub(super) struct Survey {
    /// Full-answer logs counted towards the probe share.
    n_logs: u64,
    /// Blocks those answers covered.
    n_blocks: u64,
    /// How many answers were counted.
    n_answers: u64,
    /// Per candidate probe, its logs among them.
    per_candidate: Vec<u64>,
    /// Per candidate probe, the answers fitted to its logs and their blocks (`super::background`).
    fits: Vec<Fits>,
    /// The chosen probe (an index into the candidates the fetcher offered).
    pub(super) probe: Option<usize>,
    /// No usable probe: the planner cuts by learned span only.
    pub(super) disabled: bool,
    /// Whether the lookahead runs: once the blocks left, at the density seen, hold enough ranges for its
    /// requests to pay ([`MIN_SURVEYED_RANGES`]). Without it a probe still serves spot surveys of refused
    /// ranges, which pay for themselves on any chain.
    pub(super) lookahead: bool,
    /// Probe hits per block inside `covered`; blocks without hits are absent.
    hits: BTreeMap<BlockNumber, u32>,
    /// The contiguous blocks surveyed so far (pruned from below as ranges are done).
    pub(super) covered: Option<BlockRange>,
    /// Blocks of refused ranges surveyed on their own ("spot" surveys) by start, disjoint from each other
    /// and from `covered`, pruned likewise.
    pub(super) spots: BTreeMap<BlockNumber, BlockRange>,
    /// Spot surveys in flight, by start.
    pub(super) spots_in_flight: BTreeMap<BlockNumber, BlockRange>,
    /// Stretches, by start, where the node refused a range the survey put far under the cap: there the
    /// probe's share does not hold (a contract the probe does not see burst, or the mix changed), so the
    /// planner cuts them as if they were not surveyed. Disjoint; pruned like the rest.
    distrusted: BTreeMap<BlockNumber, Distrusted>,
    /// The span of the next survey request.
    pub(super) span: u64,
    /// The last block of the last lookahead survey the node refused for too many results, and how many of
    /// its probe logs the surveys since (below that block) have not found: while that is a good part of an
    /// answer, the blocks from the cursor up to it are known to hold about that many more.
    pub(super) overflow: Option<(BlockNumber, u64)>,
    /// The survey request in flight, if any (one at a time: each continues where the last ended).
    pub(super) in_flight: Option<BlockRange>,
}

impl Survey {
    pub(super) fn new(initial_span: u64) -> Self {
        Self {
            n_logs: 0,
            n_blocks: 0,
            n_answers: 0,
            per_candidate: Vec::new(),
            fits: Vec::new(),
            probe: None,
            disabled: false,
            lookahead: false,
            hits: BTreeMap::new(),
            covered: None,
            spots: BTreeMap::new(),
            spots_in_flight: BTreeMap::new(),
            distrusted: BTreeMap::new(),
            span: initial_span,
            overflow: None,
            in_flight: None,
        }
    }

    /// Counts a full answer over `extent` holding `n_logs` logs, `per_candidate[i]` of them matching
    /// candidate probe `i`. Starts the lookahead, with the probe nearest the aim, once enough logs were seen
    /// and `remaining_blocks` at the density seen hold enough logs of `target_logs`-sized ranges for it to
    /// pay; until then, if `spot_probe`, chooses a probe for spot surveys of refused ranges.
    pub(super) fn observe(
        &mut self,
        extent: Extent,
        n_logs: u64,
        per_candidate: &[u64],
        remaining_blocks: u64,
        target_logs: u64,
        spot_probe: bool,
    ) {
        if self.disabled {
            return;
        }
        if self.per_candidate.len() < per_candidate.len() {
            self.per_candidate.resize(per_candidate.len(), 0);
            self.fits.resize(per_candidate.len(), Fits::default());
        }
        for ((total, fit), &n) in self
            .per_candidate
            .iter_mut()
            .zip(&mut self.fits)
            .zip(per_candidate)
        {
            *total += n;
            fit.add(extent, n, n_logs);
        }
        self.n_logs += n_logs;
        self.n_blocks += extent.blocks;
        self.n_answers += 1;
        if self.lookahead || self.n_logs < MIN_MIX_LOGS {
            return;
        }
        let remaining_logs =
            self.n_logs as f64 / self.n_blocks.max(1) as f64 * remaining_blocks as f64;
        if remaining_logs < MIN_SURVEYED_RANGES * target_logs as f64 {
            // Too few logs left for the lookahead to pay, so far: a probe for spot surveys only, kept
            // while it lasts so that their hits stay comparable. Not where a factory's children join:
            // the first answers, with few children, say little of their share later, and on the
            // `factory` preset at 20,000 blocks spot surveys by them took 50-63 requests instead of 42.
            if self.probe.is_none() && spot_probe {
                self.probe = self.best_candidate();
            }
            return;
        }
        // The lookahead's probe, chosen from every answer so far (the spot surveys' probe was chosen from
        // the first ones, and may be a contract that bursts).
        let Some(probe) = self.best_candidate() else {
            self.probe = None;
            self.disabled = true;
            return;
        };
        if self.probe != Some(probe) {
            // Before the lookahead every hit is a spot survey's, of the old probe.
            self.hits.clear();
            self.spots.clear();
        }
        self.probe = Some(probe);
        self.lookahead = true;
        // First survey span: aim at SURVEY_HITS at the probe density seen so far.
        let per_block = self.per_candidate[probe] as f64 / self.n_blocks.max(1) as f64;
        self.span = (SURVEY_HITS as f64 / per_block.max(1e-9)).min(u64::MAX as f64) as u64;
    }

    /// The candidate whose share of the answers so far is nearest [`PROBE_SHARE_AIM`] within
    /// [`PROBE_SHARE_BAND`], if any.
    fn best_candidate(&self) -> Option<usize> {
        let share = |n: u64| n as f64 / self.n_logs as f64;
        self.per_candidate
            .iter()
            .enumerate()
            .filter(|(_, &n)| {
                let s = share(n);
                s >= PROBE_SHARE_BAND.0 && s <= PROBE_SHARE_BAND.1
            })
            .min_by(|(_, &a), (_, &b)| {
                let distance = |n: u64| (share(n) / PROBE_SHARE_AIM).ln().abs();
                distance(a).total_cmp(&distance(b))
            })
            .map(|(idx, _)| idx)
    }

    /// Whether the first answers are still being awaited to start the lookahead: [`MAX_LEARNING_ANSWERS`] at
    /// most, so that a chain too sparse to show its mix soon is not fetched one range at a time throughout.
    pub(super) fn is_learning(&self) -> bool {
        !self.lookahead && !self.disabled && self.n_answers < MAX_LEARNING_ANSWERS
    }

    /// The probe's share of full answers, on the low side (two standard deviations under the count), so that
    /// estimates err towards more logs: a range cut a little short costs less than one that overflows.
    fn share(&self) -> Option<f64> {
        let probe = self.probe?;
        let k = self.per_candidate[probe] as f64;
        let low = (k - SHARE_SIGMAS * k.sqrt()).max(1.0);
        Some(low / self.n_logs.max(1) as f64)
    }

    /// Records the hits of a survey of `range` (one entry per probe log) and extends the covered blocks.
    pub(super) fn record(&mut self, range: BlockRange, blocks: &[BlockNumber]) {
        self.count_hits(range, blocks);
        self.covered = Some(match self.covered {
            Some(covered) if covered.end() + 1 == range.start() => {
                BlockRange::new(covered.start(), range.end()).expect("start <= end")
            }
            _ => range,
        });
    }

    /// Remembers that the node refused the lookahead survey of `range` for too many results: more probe logs
    /// than an answer carries, at least `cap` (the target stands for the node's cap).
    pub(super) fn refused(&mut self, range: BlockRange, cap: u64) {
        self.overflow = Some((range.end(), cap));
    }

    /// The span of the survey after the lookahead survey of `answered`, which found `hits` probe logs, at
    /// most `span`: short of a refused survey's end (see `overflow`), while the hits found since leave
    /// half a survey's aim or more of its excess unexplained, no more of the blocks up to that end than
    /// would carry [`SURVEY_HITS`] of them spread evenly, instead of all of them again (which a dense
    /// stretch at their end refuses every time).
    pub(super) fn short_of_overflow(&mut self, answered: BlockRange, hits: u64, span: u64) -> u64 {
        self.overflow = self.overflow.and_then(|(end, unexplained)| {
            let unexplained = unexplained.saturating_sub(hits);
            (end > answered.end() && unexplained >= SURVEY_HITS / 2).then_some((end, unexplained))
        });
        match self.overflow {
            Some((end, unexplained)) => {
                let even = u128::from(end - answered.end()) * u128::from(SURVEY_HITS)
                    / u128::from(unexplained);
                span.min(even.max(1) as u64)
            }
            None => span,
        }
    }

    /// Records the hits of a spot survey of `range`, which lies below every block the lookahead surveys
    /// will reach, so no block is counted twice.
    pub(super) fn record_spot(&mut self, range: BlockRange, blocks: &[BlockNumber]) {
        self.count_hits(range, blocks);
        self.spots.insert(range.start(), range);
    }

    /// One hit per probe log of a survey of `range`.
    fn count_hits(&mut self, range: BlockRange, blocks: &[BlockNumber]) {
        for &block in blocks {
            debug_assert!(range.contains(block), "the fetcher checks survey answers");
            *self.hits.entry(block).or_default() += 1;
        }
    }

    /// Forgets everything below `block` (those blocks are planned and reported).
    pub(super) fn prune_below(&mut self, block: BlockNumber) {
        self.hits = self.hits.split_off(&block);
        let prune = |surveyed: Option<BlockRange>| {
            surveyed.and_then(|s| {
                if s.end() < block {
                    None
                } else {
                    BlockRange::new(s.start().max(block), s.end())
                }
            })
        };
        self.covered = prune(self.covered);
        let above = self.distrusted.split_off(&block);
        let straddling = self
            .distrusted
            .pop_last()
            .and_then(|(_, d)| prune(Some(d.blocks)).map(|blocks| Distrusted { blocks, ..d }));
        self.distrusted = above;
        if let Some(d) = straddling {
            self.distrusted.insert(d.blocks.start(), d);
        }
        let above = self.spots.split_off(&block);
        let straddling = self.spots.pop_last().and_then(|(_, s)| prune(Some(s)));
        self.spots = above;
        if let Some(s) = straddling {
            self.spots.insert(s.start(), s);
        }
    }

    /// Stops trusting the survey's hits in `range` (see `distrusted`), joined with the stretches it overlaps.
    pub(super) fn distrust(&mut self, range: BlockRange) {
        let mut joined = Distrusted {
            blocks: range,
            burst_end: None,
        };
        let overlapping: Vec<BlockNumber> = self
            .distrusted
            .range(..=range.end())
            .filter(|(_, d)| d.blocks.end() >= range.start())
            .map(|(&start, _)| start)
            .collect();
        for start in overlapping {
            let d = self.distrusted.remove(&start).expect("listed above");
            joined.blocks = BlockRange::new(
                d.blocks.start().min(joined.blocks.start()),
                d.blocks.end().max(joined.blocks.end()),
            )
            .expect("start <= end");
            joined.burst_end = joined.burst_end.max(d.burst_end);
        }
        self.distrusted.insert(joined.blocks.start(), joined);
    }

    /// The start of the distrusted stretch `block` lies in, if any.
    fn distrusted_start(&self, block: BlockNumber) -> Option<BlockNumber> {
        self.distrusted
            .range(..=block)
            .next_back()
            .filter(|(_, d)| d.blocks.contains(block))
            .map(|(&start, _)| start)
    }

    /// Whether `block` lies in a distrusted stretch.
    fn is_distrusted(&self, block: BlockNumber) -> bool {
        self.distrusted_start(block).is_some()
    }

    /// Weighs the answer of `n` logs for `range` against the survey, where `range` starts in a distrusted
    /// stretch: an answer over the survey's count by more than [`AGREE_SIGMAS`] is the burst that made the
    /// survey wrong there; one within it, after such a burst, says the burst is over, and the survey is
    /// trusted again after `range`. Otherwise the blocks after a burst of a contract the probe does not see
    /// would be cut by spans regrown from the burst's few dozen blocks, three or four answers of a few
    /// hundred logs each up to the refused range's end, though the survey is right there.
    pub(super) fn weigh_distrusted(&mut self, range: BlockRange, n: u64, extent: Extent) {
        let Some(start) = self
            .distrusted_start(range.start())
            .filter(|_| !self.disabled && self.was_surveyed(range))
        else {
            return;
        };
        let burst = self.exceeds(range, n, extent);
        let stretch = self
            .distrusted
            .get_mut(&start)
            .expect("the stretch just found");
        if burst {
            stretch.burst_end = stretch.burst_end.max(Some(range.end()));
        } else if stretch.burst_end.is_some_and(|end| end < range.start())
            && range.end() < stretch.blocks.end()
        {
            stretch.blocks =
                BlockRange::new(stretch.blocks.start(), range.end()).expect("range starts in it");
        }
    }

    /// The answer for `range`, weighed a burst in a distrusted stretch ([`Self::weigh_distrusted`]), ended
    /// with the blocks `end` holding `logs`: where the survey's hits account for those, the burst ended
    /// inside `range`, and the survey is trusted again after it. Otherwise the blocks after the burst would
    /// wait for an answer that agrees with the survey, cut by the burst's own span: a request of a few dozen
    /// logs after each burst.
    pub(super) fn weigh_burst_end(
        &mut self,
        range: BlockRange,
        end: BlockRange,
        logs: u64,
        extent: Extent,
    ) {
        let Some(start) = self.distrusted_start(range.start()).filter(|_| {
            !self.disabled && self.was_surveyed(end) && !self.exceeds(end, logs, extent)
        }) else {
            return;
        };
        let stretch = self
            .distrusted
            .get_mut(&start)
            .expect("the stretch just found");
        if stretch.burst_end == Some(range.end()) && range.end() < stretch.blocks.end() {
            stretch.blocks =
                BlockRange::new(stretch.blocks.start(), range.end()).expect("range starts in it");
        }
    }

    /// Whether an answer of `n` logs for `range`, which starts in a distrusted stretch or is the first part
    /// of a refused range (`refused_here`), is a burst there ([`Self::weigh_distrusted`]): not a sample of
    /// the mix the probe's share stands for.
    pub(super) fn is_blind_burst(
        &self,
        range: BlockRange,
        n: u64,
        extent: Extent,
        refused_here: bool,
    ) -> bool {
        !self.disabled
            && (refused_here || self.is_distrusted(range.start()))
            && self.was_surveyed(range)
            && self.exceeds(range, n, extent)
    }

    /// Whether `n` logs for `range` are more than its hits estimate with [`AGREE_SIGMAS`] of error.
    fn exceeds(&self, range: BlockRange, n: u64, extent: Extent) -> bool {
        n as f64 > self.estimate_with(self.hits_within(range), extent, AGREE_SIGMAS)
    }

    /// Whether every block of `range` was surveyed, trusted or not.
    fn was_surveyed(&self, range: BlockRange) -> bool {
        let holds = |s: &BlockRange| s.contains(range.start()) && s.contains(range.end());
        self.covered.as_ref().is_some_and(holds)
            || self
                .spots
                .range(..=range.start())
                .next_back()
                .is_some_and(|(_, s)| holds(s))
    }

    /// The surveyed stretch `block` lies in, if any (none where the survey is distrusted).
    pub(super) fn coverage(&self, block: BlockNumber) -> Option<BlockRange> {
        if self.is_distrusted(block) {
            return None;
        }
        let spot = self.spots.range(..=block).next_back().map(|(_, s)| *s);
        [spot, self.covered]
            .into_iter()
            .flatten()
            .find(|s| s.contains(block))
    }

    /// Whether `block` was surveyed.
    pub(super) fn covers(&self, block: BlockNumber) -> bool {
        self.coverage(block).is_some()
    }

    /// The fits of the probe's answers.
    fn fits(&self) -> Option<&Fits> {
        self.fits.get(self.probe?)
    }

    /// Estimated logs of `hits` probe hits over `extent`, plus [`SIGMAS`] standard deviations of their
    /// Poisson error: by the fitted background where there is one, else by the probe's share.
    pub(super) fn upper_estimate(&self, hits: u64, extent: Extent) -> f64 {
        self.estimate_with(hits, extent, SIGMAS)
    }

    /// Estimated logs of `hits` probe hits over `extent`, plus `sigmas` standard deviations of their error.
    fn estimate_with(&self, hits: u64, extent: Extent, sigmas: f64) -> f64 {
        if let Some(estimate) = self.fits().and_then(|f| f.estimate(hits, extent, sigmas)) {
            return estimate;
        }
        let Some(share) = self.share() else {
            return f64::INFINITY;
        };
        (hits as f64 + sigmas * (hits as f64 + 1.0).sqrt()) / share
    }

    /// Estimated logs of `hits` probe hits over `extent`, as [`Self::upper_estimate`] without the error.
    pub(super) fn estimate(&self, hits: u64, extent: Extent) -> f64 {
        if let Some(estimate) = self.fits().and_then(|f| f.estimate(hits, extent, 0.0)) {
            return estimate;
        }
        self.share()
            .map_or(f64::INFINITY, |share| hits as f64 / share)
    }

    /// Whether the estimate grows with blocks as well as with hits.
    pub(super) fn has_background(&self) -> bool {
        self.fits().is_some_and(Fits::has_background)
    }

    /// Probe hits in `range`, all told.
    pub(super) fn hits_within(&self, range: BlockRange) -> u64 {
        self.hits_in(range.start(), range.end())
            .map(|(_, n)| n)
            .sum()
    }

    /// Probe hits per block in `from..=to`, in block order.
    pub(super) fn hits_in(
        &self,
        from: BlockNumber,
        to: BlockNumber,
    ) -> impl Iterator<Item = (BlockNumber, u64)> + '_ {
        self.hits.range(from..=to).map(|(&b, &n)| (b, u64::from(n)))
    }

    /// Hits at or above `from` that are surveyed.
    pub(super) fn hits_from(&self, from: BlockNumber) -> u64 {
        self.hits.range(from..).map(|(_, &n)| u64::from(n)).sum()
    }
}
