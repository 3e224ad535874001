//! The adaptive range planner: a pure state machine that hands out block ranges and learns from the node's
//! answers. No tokio, no I/O, no `rpc` types: its inputs are [`Outcome`]s, its outputs [`BlockRange`]s.
//!
//! Ranges are cut two ways. Ahead of the ranges it hands out, the planner asks for a density *survey* (see
//! `survey`): the same blocks under a narrow filter that matches a few percent of the logs; from those
//! hits it cuts each range where the estimated logs, plus their sampling error, reach
//! `target_logs_per_request`. Where no survey is possible (too few logs yet, no suitable narrow filter, or
//! below the last block where a contract joins and the selection changes), it falls back to a span learned
//! from the last answer, aiming at a fraction of the target because a neighbour's density is a weaker guess.
//!
//! It splits a range when the node answers "too many results", "timeout" or "range too wide" (at the
//! surveyed midpoint of the logs where it can, else by blocks), takes a range the node suggests when it is
//! usable (the rest waits for its answer: `narrowing`), and hands split pieces out before new ranges, lowest
//! first, so that whoever commits in block order is never kept waiting long.
//!
//! Invariant: the ranges reported [`Verdict::Done`] (plus those reported [`Verdict::SingleBlockOverflow`],
//! which the caller completes by other means) tile `[start, end]` exactly: no gap, no overlap. Surveys
//! never complete a range; they only inform where ranges are cut.
//!
//! `docs/planner.md` describes the model as a whole, and lists every tuning constant of this module and of
//! `fetch` with the measurement behind its value; the comments here say what each bounds and why.

mod addresses;
mod background;
mod cutting;
mod learning;
mod narrowing;
mod survey;
mod surveying;

use std::collections::{BTreeMap, BTreeSet};

use crate::primitives::{BlockNumber, BlockRange};

use addresses::Addresses;
use cutting::{Cut, Waiting};
pub use learning::Tail;
use learning::{Learned, Running};
use narrowing::Held;
use survey::Survey;

/// A single block estimated above this multiple of the target is fetched by narrower filters at once: above
/// the survey's error for one block, below the cap (9,500 x 1.15 is under 11,000).
const OVERFLOW_MARGIN: f64 = 1.15;
/// Survey no further ahead than this many target-sized ranges: enough for the in-flight window, and it
/// bounds the memory the hits take.
const LOOKAHEAD_RANGES: f64 = 24.0;
/// A refused range no survey covers gets a spot survey from this many blocks on: halving blind would take
/// three round trips or more to find where its logs are.
const MIN_SPOT_BLOCKS: u64 = 8;

/// A refused range whose surveyed estimate was under this fraction of the target tells that the survey is
/// wrong there, not merely unlucky.
const SURPRISE: f64 = 0.7;

/// Limits of the planner (from `[sync]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlannerConfig {
    /// The span of the first range.
    pub initial_span: u64,
    /// The span never grows above this.
    pub max_span: u64,
    /// Ranges are cut to carry at most this many logs by the estimate (including its error).
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
    /// `n` logs, more than one request returns, read by narrower filters after the range was refused
    /// (`fetch::quarters`): the range is done, and its excess is no guide to its neighbours' density.
    ReadByFilters {
        /// How many.
        n: u64,
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

/// A density survey to run: fetch `range` with the narrow filter of candidate `probe` (an index into the
/// candidates whose counts the caller passes to [`Planner::observe_mix`]) and report the block number of
/// every log that comes back with [`Planner::report_survey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SurveyRequest {
    /// The blocks.
    pub range: BlockRange,
    /// Which candidate filter.
    pub probe: usize,
    /// A spot survey of a refused range, not the lookahead.
    spot: bool,
}

/// The planner.
#[derive(Debug, Clone)]
pub struct Planner {
    config: PlannerConfig,
    /// The next block never handed out.
    next: BlockNumber,
    /// The last block to plan (inclusive).
    end: BlockNumber,
    /// Blocks at which a range must start (a contract joins there), above `next`.
    boundaries: BTreeSet<BlockNumber>,
    /// Split pieces waiting to be handed out again, by start.
    pieces: BTreeMap<BlockNumber, BlockRange>,
    /// Starts of pieces handed out whole, never cut (see [`narrowing`]).
    whole: BTreeSet<BlockNumber>,
    /// Ranges handed out and not yet reported, by start (the survey forgets blocks below them all).
    handed_out: BTreeMap<BlockNumber, BlockRange>,
    /// The rests of refused ranges being narrowed, by the start of the probe they wait for (see
    /// [`narrowing`]).
    held: BTreeMap<BlockNumber, Held>,
    /// Single blocks a refusal showed to hold over half the target on their own, to be read by narrower
    /// filters at once (see [`narrowing`]): asked for whole, one over the cap cost a refusal of its own.
    heavy: BTreeSet<BlockNumber>,
    /// Blocks right after a block over the cap that a narrowing found (see [`narrowing`]): a refused range
    /// starting there is narrowed from that block alone, whose answer then teaches no span.
    after_heavy: BTreeSet<BlockNumber>,
    /// The span of the next new range when no survey covers it.
    span: u64,
    /// What the answer for the range ending at each key taught: a range starting right after it is cut by
    /// that rather than by `span`, which the answers of stretches far away also move (see [`learning`]).
    local: BTreeMap<BlockNumber, Learned>,
    /// The tail of the answer about to be reported (see [`Planner::observe_tail`]).
    tail: Option<(BlockRange, Tail)>,
    /// A hard span limit the node stated (`RangeTooWide`).
    node_cap: Option<u64>,
    /// True once the node suggested a usable range with a refusal: an overshoot then costs one request,
    /// so the span after an answer may grow further (see [`learning`]).
    suggests: bool,
    /// The densities of the last answer and how well they foretell the next (see [`learning`]).
    running: Running,
    /// True once `next` passed `end`.
    exhausted: bool,
    /// From here on the selection no longer changes (no contract joins above), so a probe's share holds.
    sampling_from: BlockNumber,
    /// The next block to survey.
    survey_cursor: BlockNumber,
    /// Refused ranges to survey on their own, by start.
    spots_due: BTreeMap<BlockNumber, BlockRange>,
    survey: Survey,
    /// What a block weighs in the survey's background (see [`addresses`]).
    addresses: Addresses,
    /// Tests only: no new range from this block on is handed out ([`Planner::hold_back`]).
    #[cfg(test)]
    held_back: Option<BlockNumber>,
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
        let boundaries: BTreeSet<BlockNumber> = boundaries
            .into_iter()
            .filter(|b| *b > range.start() && *b <= range.end())
            .collect();
        let sampling_from = boundaries.last().copied().unwrap_or(range.start());
        Self {
            config,
            next: range.start(),
            end: range.end(),
            boundaries,
            pieces: BTreeMap::new(),
            whole: BTreeSet::new(),
            handed_out: BTreeMap::new(),
            held: BTreeMap::new(),
            heavy: BTreeSet::new(),
            after_heavy: BTreeSet::new(),
            span: config.initial_span,
            local: BTreeMap::new(),
            tail: None,
            suggests: false,
            node_cap: None,
            running: Running::default(),
            exhausted: false,
            sampling_from,
            survey_cursor: sampling_from,
            spots_due: BTreeMap::new(),
            survey: Survey::new(config.initial_span),
            addresses: Addresses::default(),
            #[cfg(test)]
            held_back: None,
        }
    }

    /// Tests only: never hands out a new range from block `start` on, as a planner with a bug that loses
    /// ranges would; what a caller does with such a plan is what is tested.
    #[cfg(test)]
    pub(crate) fn hold_back(&mut self, start: BlockNumber) {
        self.held_back = Some(start);
    }

    /// Weighs each block by the addresses the requests carry there, `joins` being the block each joins at
    /// (a factory's children included), for the logs that come regardless of the probe (see `addresses`).
    pub fn weigh_by_addresses(&mut self, joins: Vec<BlockNumber>) {
        self.addresses = Addresses::joining_at(joins);
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

    /// The logs a range is cut to carry at most, by the estimate.
    pub fn target_logs(&self) -> u64 {
        self.config.target_logs
    }

    /// The span a new range would get now, where no survey covers it.
    pub fn span(&self) -> u64 {
        self.span
    }

    /// The first block of the first split piece waiting to go out, if any: [`Self::next_range`] hands it
    /// out before any new range.
    pub fn first_piece_start(&self) -> Option<BlockNumber> {
        self.pieces.first_key_value().map(|(&start, _)| start)
    }

    /// The first block of the stretch where surveys can run: the caller offers probe candidates from the
    /// selection there, and counts them in answers for ranges starting at or above it.
    pub fn sampling_start(&self) -> BlockNumber {
        self.sampling_from
    }

    /// The next range to fetch: a waiting piece, lowest first, else a new range; `None` when all are out, or
    /// for now while a survey the next range needs is in flight.
    pub fn next_range(&mut self) -> Option<BlockRange> {
        if let Some((_, piece)) = self.pieces.pop_first() {
            if self.whole.remove(&piece.start()) {
                return Some(self.hand_out(piece));
            }
            let Cut::At(last) = self.cut(piece.start(), piece.end(), Waiting::Never) else {
                unreachable!("a piece never waits");
            };
            if let Some((first, rest)) = piece.split_after(last) {
                self.put_back(piece.start(), rest);
                return Some(self.hand_out(first));
            }
            return Some(self.hand_out(piece));
        }
        if self.exhausted {
            return None;
        }
        #[cfg(test)]
        if self.held_back.is_some_and(|start| self.next >= start) {
            return None;
        }
        if self.next >= self.sampling_from
            && self.survey.is_learning()
            && !self.handed_out.is_empty()
        {
            // Until the first answers show the mix of logs, one range at a time: ranges planned blind would
            // be cut by guesswork where a survey will soon know better.
            return None;
        }
        let start = self.next;
        let mut hard_last = start
            .saturating_add(self.clamp(self.config.max_span) - 1)
            .min(self.end);
        if let Some(boundary) = self.boundaries.range(start + 1..).next() {
            hard_last = hard_last.min(boundary - 1);
        }
        let last = match self.cut(start, hard_last, Waiting::Allowed) {
            Cut::At(last) => last,
            Cut::Wait => return None,
        };
        let range = BlockRange::new(start, last).expect("start <= last by construction");
        if last == self.end {
            self.exhausted = true;
        } else {
            self.next = last + 1;
        }
        Some(self.hand_out(range))
    }

    /// Whether `range` is a single block the survey estimates over the node's cap (with `OVERFLOW_MARGIN`),
    /// or one a refusal showed to hold over half the target: the caller should fetch it by narrower filters
    /// straight away instead of asking for it whole.
    pub fn expects_overflow(&self, range: BlockRange) -> bool {
        let block = range.start();
        range.len() == 1
            && (self.heavy.contains(&block)
                || self.survey.covers(block)
                    && self.survey.estimate(
                        self.survey.hits_within(range),
                        self.addresses.extent(block, block),
                    ) > self.config.target_logs as f64 * OVERFLOW_MARGIN)
    }

    /// Whether a survey covers every block of `range`, so that the planner had an estimate of its logs.
    pub fn surveyed(&self, range: BlockRange) -> bool {
        !self.survey.disabled
            && self.survey.covers(range.start())
            && self.survey.covers(range.end())
    }

    /// Whether every block was handed out and reported done.
    pub fn is_finished(&self) -> bool {
        self.exhausted
            && self.pieces.is_empty()
            && self.handed_out.is_empty()
            && self.held.is_empty()
    }

    /// The blocks not yet reported done, as ranges in block order (adjacent ones joined): handed out and not
    /// answered, split pieces waiting, rests held behind a narrowing's probe, and what was never handed out.
    /// Empty exactly when [`Self::is_finished`]: what a caller that stops early names as left undone.
    pub fn unfinished(&self) -> Vec<BlockRange> {
        let never_handed_out = (!self.exhausted)
            .then(|| BlockRange::new(self.next, self.end))
            .flatten();
        let mut ranges: Vec<BlockRange> = self
            .handed_out
            .values()
            .chain(self.pieces.values())
            .copied()
            .chain(self.held.values().map(|held| held.rest))
            .chain(never_handed_out)
            .collect();
        ranges.sort_by_key(|range| range.start());
        let mut joined: Vec<BlockRange> = Vec::with_capacity(ranges.len());
        for range in ranges {
            match joined.last_mut() {
                Some(last) if range.start() <= last.end().saturating_add(1) => {
                    *last = BlockRange::new(last.start(), last.end().max(range.end()))
                        .expect("start <= end");
                }
                _ => joined.push(range),
            }
        }
        joined
    }

    fn hand_out(&mut self, range: BlockRange) -> BlockRange {
        self.handed_out.insert(range.start(), range);
        range
    }

    /// Learns from the node's answer for `range` (a range this planner handed out).
    pub fn report(&mut self, range: BlockRange, outcome: Outcome) -> Verdict {
        self.handed_out.remove(&range.start());
        self.heavy.remove(&range.start());
        let verdict = self.judge(range, outcome);
        let lowest = [
            self.handed_out.keys().next(),
            self.pieces.keys().next(),
            Some(&self.next),
        ]
        .into_iter()
        .flatten()
        .min()
        .copied()
        .unwrap_or(self.next);
        self.survey.prune_below(lowest);
        self.after_heavy = self.after_heavy.split_off(&lowest);
        self.forget_learned_below(lowest);
        verdict
    }

    fn judge(&mut self, range: BlockRange, outcome: Outcome) -> Verdict {
        match outcome {
            Outcome::Logs { n } => {
                // A block over the cap, read by other means, says nothing of its neighbours' density.
                let heavy = range.len() == 1 && n > self.config.target_logs;
                // One block asked for alone says nothing of the thousands after it.
                let alone = self.after_heavy.remove(&range.start()) && range.len() == 1;
                let quiet_end = self
                    .tail
                    .filter(|(of, _)| *of == range)
                    .map(|(_, tail)| tail.quiet_end(range, n));
                if !heavy && !alone {
                    self.learn_density(range, n);
                }
                self.distrust_behind_if_blind(range, n);
                if heavy {
                    // Read by narrower filters as a block expected over the cap: the excess is found.
                    self.heavy_block_found(range.start());
                } else {
                    let extent = self.addresses.extent(range.start(), range.end());
                    self.survey.weigh_distrusted(range, n, extent);
                    // A node that suggests ranges finds where a burst ends by its own suggestion.
                    if let Some((end, logs)) = quiet_end.filter(|_| !self.suggests) {
                        let extent = self.addresses.extent(end.start(), end.end());
                        self.survey.weigh_burst_end(range, end, logs, extent);
                    }
                    self.probe_answered(range, n);
                }
                Verdict::Done
            }
            Outcome::ReadByFilters { n } => {
                self.probe_answered(range, n);
                Verdict::Done
            }
            Outcome::TooManyResults { suggested } => {
                // The surveyed midpoint still says where the logs are when the survey misjudged how many;
                // the pieces are cut without it where the misjudgement was gross.
                self.distrust_if_surprised(range, self.config.target_logs as f64, range);
                let midpoint = self.surveyed_midpoint(range);
                let usable = suggested
                    .filter(|&(from, to)| from == range.start() && to < range.end() && to >= from);
                // Without a suggestion, cut where the surveyed logs are halved; failing a survey, halve;
                // but where the learned span is already smaller (a dense burst met by a range planned before
                // the density was known), cut there and skip the halvings.
                // Right after a block over the cap, the next one of a run is the likeliest excess: its block
                // alone goes first (`Planner::heavy_block_found`).
                let alone = self.after_heavy.contains(&range.start());
                let cut = if alone {
                    1
                } else {
                    (range.len() / 2).min(self.span_at(range.start())).max(1)
                };
                let midpoint = midpoint.filter(|_| !alone);
                match usable
                    .and_then(|(_, to)| range.split_after(to))
                    .or_else(|| midpoint.and_then(|m| range.split_after(m)))
                    .or_else(|| range.split_after(range.start() + cut - 1))
                {
                    Some((first, rest)) => {
                        if usable.is_none() && range.len() >= MIN_SPOT_BLOCKS {
                            // A refusal of a part of a refused range (the same start) keeps the whole
                            // due: the rest of it is still to fetch and no more surveyed than the part.
                            keep_longest(&mut self.spots_due, range);
                        }
                        if usable.is_some() {
                            self.suggests = true;
                            // A suggested range fits the node's cap: the node knows the density better than
                            // we do. What follows waits for its answer, which says how dense it is.
                            self.take_suggestion(first, rest);
                        } else {
                            let span_before = self.span;
                            if !alone {
                                self.span = self.clamp(self.span.min(first.len()));
                            }
                            self.narrow(first, rest, span_before);
                        }
                        Verdict::Split
                    }
                    None => {
                        self.heavy_block_found(range.start());
                        Verdict::SingleBlockOverflow
                    }
                }
            }
            Outcome::Timeout => match range.halve() {
                Some((first, rest)) => {
                    self.release_held(range.start());
                    self.span = self.clamp(first.len());
                    self.requeue(first, rest);
                    Verdict::Split
                }
                None => {
                    self.release_held(range.start());
                    Verdict::SingleBlockOverflow
                }
            },
            Outcome::RangeTooWide { max_blocks } => {
                self.release_held(range.start());
                let cap = max_blocks
                    .filter(|&m| m >= 1 && m < range.len())
                    .unwrap_or(range.len().div_ceil(2).max(1));
                self.node_cap = Some(self.node_cap.map_or(cap, |c| c.min(cap)));
                self.span = self.clamp(self.span);
                self.survey.span = self.clamp(self.survey.span);
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

    /// Distrusts the survey over `distrusted` when it put the surveyed `measured` far under the `logs` the
    /// node showed it holds (a refusal: more than the cap; an answer: its count). The probe's share does not
    /// hold there, and cutting by its hits would have the pieces refused again and again (16 refusals for
    /// one burst of a contract the probe does not see, on the `bursts` preset).
    fn distrust_if_surprised(&mut self, measured: BlockRange, logs: f64, distrusted: BlockRange) {
        if self.survey.covers(measured.start())
            && self.survey.covers(measured.end())
            && self.survey.estimate(
                self.survey.hits_within(measured),
                self.addresses.extent(measured.start(), measured.end()),
            ) < SURPRISE * logs
        {
            self.survey.distrust(distrusted);
        }
    }

    /// The block after which half of `range`'s surveyed hits lie, if the survey covers it and found any
    /// (the survey undercounted it, but it still says where the logs are).
    fn surveyed_midpoint(&self, range: BlockRange) -> Option<BlockNumber> {
        if !(self.survey.covers(range.start()) && self.survey.covers(range.end())) {
            return None;
        }
        let total = self.survey.hits_within(range);
        if total == 0 {
            return None;
        }
        let mut seen = 0;
        for (block, n) in self.survey.hits_in(range.start(), range.end()) {
            seen += n;
            if 2 * seen >= total {
                // Keep the heavy block in the first half unless it is the last one.
                return Some(if block < range.end() {
                    block
                } else {
                    block - 1
                });
            }
        }
        None
    }

    fn requeue(&mut self, first: BlockRange, rest: BlockRange) {
        self.pieces.insert(first.start(), first);
        self.pieces.insert(rest.start(), rest);
    }

    fn clamp(&self, span: u64) -> u64 {
        let max = self
            .node_cap
            .map_or(self.config.max_span, |c| c.min(self.config.max_span));
        span.clamp(1, max.max(1))
    }
}

/// Records `range` in `by_start` under its start, keeping the longer where one is there already: a
/// refused range and the refused parts of it share a start, and the whole is what matters.
fn keep_longest(by_start: &mut BTreeMap<BlockNumber, BlockRange>, range: BlockRange) {
    let kept = by_start.entry(range.start()).or_insert(range);
    if range.len() > kept.len() {
        *kept = range;
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod unfinished_tests;
