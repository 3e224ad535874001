//! Narrowing a refused range one probe at a time, so that no range known to overflow is asked for whole.
//!
//! The spec's node answers "more than 10,000 results" with nothing else: where the logs are, the planner must
//! find out. Halving hands both halves out at once, and on a stretch whose excess sits in one place (a block
//! over the cap, a burst of a contract the survey does not see) every level costs two requests, one refused,
//! and the pieces left over go out one by one, each smaller than the last. Here a refused range is narrowed
//! from its start instead: only its first part (the *probe*) goes out, the rest is *held*. The probe's answer
//! says where to look next:
//! - refused: the excess is in the probe; it is narrowed in turn, and the rest stays held behind it;
//! - answered with `n` logs: what is left of the refused blocks still holds at least the refused count minus
//!   `n`. While that is half a target or more, the next probe is the start of the rest; below that the rest
//!   is released as one piece, cut by the span the probe's answer taught, unless the refused blocks left
//!   hold more than the probe's density puts in them: then they go out whole, and the rest waits for them;
//! - a single block over the cap: that block is the excess; the rest is released, at a span aimed by the
//!   density of the probes answered around it (the span the narrowing began with when no probe had logs).
//!
//! Once the suspect blocks are down to one while half a target or more is unexplained, that block holds it
//! alone: it is marked heavy, and the fetcher reads it by narrower filters at once
//! ([`Planner::expects_overflow`]) instead of asking for it whole, which a block over the cap refuses.
//!
//! A node that suggests a range with its refusal (Infura, Alchemy, reth) has said where the cap is crossed:
//! the suggested range goes out whole as the probe, and the rest waits behind it as behind a probe whose
//! excess lies in the block right after it ([`Planner::take_suggestion`]).
//!
//! The held blocks are contiguous (whatever the narrowing has not yet looked at, up to the refused range's end
//! and anything held behind it), so once the excess is found they go out as few ranges as the span allows
//! instead of one per level. The cost is latency, not requests: a narrowing takes as many round trips in a row
//! as halving would, while the other workers fetch elsewhere.

use crate::primitives::{BlockNumber, BlockRange};

use super::{Planner, SURPRISE};

/// What a probe left behind it: the rest of a refused range, handed out once the probe is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Held {
    /// The blocks after the probe, not yet handed out.
    pub(super) rest: BlockRange,
    /// The last block of the refused range that holds the excess; blocks of `rest` above it merely wait
    /// to go out with the rest.
    suspect_end: BlockNumber,
    /// Logs the probe and `rest` up to `suspect_end` hold at least, by the node's refusal.
    at_least: u64,
    /// The span before the narrowing began: the span after a heavy block when no probe had logs.
    span_before: u64,
    /// Blocks and logs of the narrowing's answered probes: the density around the excess.
    seen: (u64, u64),
}

impl Planner {
    /// Narrows the refused range `first` + `rest`: `first` goes out as the probe, `rest` waits for it.
    /// A probe that is itself refused keeps what was held behind it, joined to its own rest.
    pub(super) fn narrow(&mut self, first: BlockRange, rest: BlockRange, span_before: u64) {
        self.hold_behind(first, rest, rest.end(), span_before);
        self.pieces.insert(first.start(), first);
    }

    /// Holds `rest` behind the probe `first` of a refused range whose excess lies in `first` and `rest` up
    /// to `suspect_end`, joined to what was held behind `first` itself (the probe of an outer narrowing).
    fn hold_behind(
        &mut self,
        first: BlockRange,
        rest: BlockRange,
        suspect_end: BlockNumber,
        span_before: u64,
    ) {
        let behind = self.held.remove(&first.start());
        let held = Held {
            rest: match behind {
                Some(outer) => join(rest, outer.rest),
                None => rest,
            },
            suspect_end,
            // The node's cap is at least the target: the refused blocks hold more than that.
            at_least: self.config.target_logs,
            span_before: behind.map_or(span_before, |outer| outer.span_before),
            seen: behind.map_or((0, 0), |outer| outer.seen),
        };
        self.held.insert(first.start(), held);
    }

    /// The piece starting at `piece_start` was handed out shorter than it was: when it is a probe, what was
    /// cut off joins its held rest (it still lies before the excess, or holds it); where no survey covers
    /// the piece (it was cut by a learned span), what was cut off waits for the piece's answer, which says
    /// how dense it is (`Planner::span_at`); else it waits as a piece of its own.
    pub(super) fn put_back(&mut self, piece_start: BlockNumber, cut_off: BlockRange) {
        match self.held.get_mut(&piece_start) {
            Some(held) => held.rest = join(cut_off, held.rest),
            None if !self.survey.covers(piece_start) => {
                // Cut by a span learned elsewhere: the answer for the blocks before it says better.
                self.wait_behind(piece_start, cut_off, self.span, (0, 0));
            }
            None => self.release(cut_off),
        }
    }

    /// `range`, which blocks wait behind, was answered with `n` logs, far more than the survey estimated
    /// for it: the probe is blind there (a burst of a contract it does not see), so the blocks waiting
    /// behind it, the rest of the range refused with it, are cut by the answer's density
    /// ([`Planner::span_at`]) instead of by the survey's hits. Otherwise a burst met by a suggested range
    /// would be asked for in the survey's long ranges and refused once per suggestion.
    pub(super) fn distrust_behind_if_blind(&mut self, range: BlockRange, n: u64) {
        let Some(held) = self.held.get(&range.start()) else {
            return;
        };
        if !self.surveyed(range) || (n as f64) < SURPRISE * self.config.target_logs as f64 {
            return;
        }
        let whole = BlockRange::new(range.start(), held.rest.end()).expect("held after range");
        self.distrust_if_surprised(range, n as f64, whole);
    }

    /// The probe `range` was answered with `n` logs: narrows further or releases the rest.
    pub(super) fn probe_answered(&mut self, range: BlockRange, n: u64) {
        let Some(held) = self.held.remove(&range.start()) else {
            return;
        };
        let seen = (held.seen.0 + range.len(), held.seen.1 + n);
        let at_least = held.at_least.saturating_sub(n);
        // Empty when the last probe was the last suspect block.
        let suspect = BlockRange::new(held.rest.start(), held.suspect_end);
        let Some(suspect) = suspect.filter(|_| 2 * at_least >= self.config.target_logs) else {
            // What the refusal left unexplained may fit one range now. Where the refused blocks left hold
            // more than the probe's density puts in them, the excess is still there: they go out whole, and
            // the blocks merely held behind them wait for their answer. Otherwise the rest goes out as one
            // piece cut by the span this probe's answer taught (`Planner::span_at`): cut at the refused
            // blocks' end, their last few took a request of their own.
            let unexplained = held
                .rest
                .split_after(held.suspect_end)
                .filter(|(suspect, _)| {
                    suspect.len() as f64 * n as f64 / range.len() as f64 <= at_least as f64
                });
            match unexplained {
                Some((suspect, behind)) => {
                    self.release_whole(suspect);
                    self.wait_behind(suspect.start(), behind, held.span_before, seen);
                }
                None => self.release(held.rest),
            }
            return;
        };
        let last = self.narrowing_cut(suspect);
        if suspect.len() == 1 {
            // The last suspect block holds the refusal's excess alone: half a target or more.
            self.heavy.insert(suspect.start());
        }
        // When the probe is the last suspect block, the rest still waits: if that block is over the cap, the
        // rest goes out at the span the density around it allows, not at the narrowing's last small one.
        match held.rest.split_after(last) {
            Some((probe, rest)) => {
                self.pieces.insert(probe.start(), probe);
                self.held.insert(
                    probe.start(),
                    Held {
                        rest,
                        suspect_end: held.suspect_end,
                        at_least,
                        span_before: held.span_before,
                        seen,
                    },
                );
            }
            None => self.release(held.rest),
        }
    }

    /// The probe at `start` was a single block over the cap: it explains the refusal, so the rest is released
    /// at [`Self::span_after`]. Blocks over the cap come in runs: where the rest is refused in turn without a
    /// suggested range, the block right after this one is narrowed to first, alone (`Planner::judge`).
    /// Halved from its start instead, the rest would cost a refusal per halving for each block of a run
    /// (twelve per block on the `overcap` preset).
    pub(super) fn heavy_block_found(&mut self, start: BlockNumber) {
        let Some(held) = self.held.remove(&start) else {
            return;
        };
        self.span = self.clamp(self.span.max(self.span_after(&held)));
        self.after_heavy.insert(held.rest.start());
        self.release(held.rest);
    }

    /// Releases what waits behind the range at `start`, if anything: the node answered it in a way that says
    /// nothing more of where the excess is (a suggested range, a timeout, a span limit).
    pub(super) fn release_held(&mut self, start: BlockNumber) {
        if let Some(held) = self.held.remove(&start) {
            self.release(held.rest);
        }
    }

    /// The span after a narrowing that found a block over the cap: aimed by the density of its answered
    /// probes (the blocks around the heavy one), with the learned aim's room for error. Not capped by the
    /// span the narrowing began with: that is the planner's span at the refusal, which a narrowing elsewhere
    /// may have shrunk to a few blocks, so that the rest would go out in crumbs (as on a factory chain whose
    /// over-cap blocks are spread across pairs).
    fn span_after(&self, held: &Held) -> u64 {
        let (blocks, logs) = held.seen;
        if logs == 0 {
            return held.span_before;
        }
        let aim = self.config.target_logs as f64 * self.learned_aim();
        (blocks as f64 * aim / logs as f64) as u64
    }

    /// Where the next probe of `suspect` ends: at its surveyed midpoint, else halfway or a learned span in,
    /// whichever is shorter.
    fn narrowing_cut(&self, suspect: BlockRange) -> BlockNumber {
        if suspect.len() == 1 {
            return suspect.start();
        }
        if let Some(midpoint) = self.surveyed_midpoint(suspect) {
            return midpoint;
        }
        let cut = (suspect.len() / 2)
            .min(self.span_at(suspect.start()))
            .max(1);
        suspect.start() + cut - 1
    }

    /// Blocks held behind probes (they are still to fetch).
    pub(super) fn held_ranges(&self) -> impl Iterator<Item = BlockRange> + '_ {
        self.held.values().map(|held| held.rest)
    }

    fn release(&mut self, rest: BlockRange) {
        self.pieces.insert(rest.start(), rest);
    }

    /// Holds `rest`, which no refusal points at, until the piece starting at `piece_start` is answered: it
    /// is then released as one piece, cut by the span that answer taught. It is held as a narrowing whose
    /// excess is already explained, so a refusal of the piece narrows on into it like any other held rest.
    fn wait_behind(
        &mut self,
        piece_start: BlockNumber,
        rest: BlockRange,
        span_before: u64,
        seen: (u64, u64),
    ) {
        self.held.insert(
            piece_start,
            Held {
                rest,
                suspect_end: piece_start,
                at_least: 0,
                span_before,
                seen,
            },
        );
    }

    /// The node suggested `first`, the start of a refused range, as fitting its cap: `first` goes out whole,
    /// and the rest (with whatever waited behind the refused range) waits for its answer as behind a probe
    /// whose excess lies in the block right after it, the block that took the refused range over the cap
    /// (the suggestion ends right before it). So the rest is cut by the span `first`'s answer taught; sent at
    /// once, the rest of a range refused inside a burst would be refused in its turn, once per suggestion.
    /// And a block that holds most of the refused logs goes out alone: asked for with the rest, a block over
    /// the cap costs one more refusal.
    ///
    /// A suggestion of the refused range's first block alone says that block, or it and the next, is over
    /// the cap: it is read by narrower filters at once, as is the block after a suggested range that held
    /// half a target or less, which holds the rest of the refusal's excess alone.
    pub(super) fn take_suggestion(&mut self, first: BlockRange, rest: BlockRange) {
        self.hold_behind(first, rest, rest.start(), self.span);
        if first.len() == 1 {
            self.heavy.insert(first.start());
        }
        self.release_whole(first);
    }

    /// Releases `rest` as one range, never cut.
    fn release_whole(&mut self, rest: BlockRange) {
        self.whole.insert(rest.start());
        self.release(rest);
    }
}

/// Two adjacent ranges as one.
fn join(first: BlockRange, second: BlockRange) -> BlockRange {
    debug_assert_eq!(first.end() + 1, second.start());
    BlockRange::new(first.start(), second.end()).expect("adjacent ranges")
}
