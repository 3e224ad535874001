//! The span learned from answers, for ranges no survey covers: how many blocks the next range gets, from
//! the density of an answer and how well one answer's density has foretold the next.
//!
//! Two spans are kept. Each answer leaves a [`Learned`] span for the range that starts right after it, and
//! such a range is cut by that one ([`Planner::span_at`]). Anywhere else (the next new range when the
//! blocks before it are still in flight) the planner falls back to its one running span, the last learned
//! anywhere. With eight ranges in flight, answers of stretches far apart arrive interleaved: on the
//! `bursts` preset a span learned inside a burst of one contract cut the quiet blocks after another burst
//! into crumbs of forty blocks, and the running miss, fed by every burst's edge, held every range inside
//! a burst at 0.6 of the target (docs/BENCHMARKS.md, "Spans learned where they apply").

use crate::primitives::{BlockNumber, BlockRange};

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
/// Weight of the newest answer in the running miss.
const MISS_ALPHA: f64 = 0.2;
/// An answer grows the span to at most this many times its own length: an answer about a few blocks says
/// little about thousands, but creeping up by doubling after a dense stretch cost hundreds of tiny requests
/// on the simulated chain (docs/BENCHMARKS.md); a split costs one. (Tried at 16 and 32 for the span after
/// an answer: `bursts` 4 and 7 requests fewer, `growth` 3 more, sparse seeds up to 4 more.)
const MAX_GROWTH: u64 = 8;

/// What one answer taught about the blocks after it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Learned {
    /// The span it suggests for the range after it.
    span: u64,
    /// Its logs per block.
    density: f64,
}

/// The fraction of the target to aim at when a density that misses by `miss` foretells a range.
fn aim_of(miss: f64) -> f64 {
    (1.0 / (1.0 + MISS_WEIGHT * miss)).clamp(MIN_LEARNED_AIM, MAX_LEARNED_AIM)
}

impl Planner {
    /// Learns from an answer of `n` logs for `range`: the running span and miss, and the span for the range
    /// right after it, aimed by how well the answer before it (when there is one) foretold this one.
    /// Either span shrinks at once where logs are dense and grows at most [`MAX_GROWTH`] times the range.
    pub(super) fn learn_density(&mut self, range: BlockRange, n: u64) {
        let density = n as f64 / range.len() as f64;
        let miss_of = |foretold: f64| {
            let foretold = foretold * range.len() as f64;
            ((n as f64 + 1.0) / (foretold + 1.0)).ln().abs()
        };
        if let Some(foretold) = self.density {
            self.miss = (1.0 - MISS_ALPHA) * self.miss + MISS_ALPHA * miss_of(foretold);
        }
        self.density = Some(density);
        let local_miss = self
            .learned_before(range.start())
            .map_or(self.miss, |before| miss_of(before.density));
        let ideal = |miss: f64| {
            let aim = (self.config.target_logs as f64 * aim_of(miss)).max(1.0);
            if n == 0 {
                u64::MAX
            } else {
                (range.len() as f64 * aim / n as f64).min(u64::MAX as f64) as u64
            }
        };
        let growth = range.len().saturating_mul(MAX_GROWTH);
        self.span = self.clamp(ideal(self.miss).min(growth.max(self.span)));
        let span = self.clamp(ideal(local_miss).min(growth));
        self.local.insert(range.end(), Learned { span, density });
    }

    /// The span of a range starting at `start` where no survey covers it: the one learned from the answer
    /// just before it, else the last learned anywhere.
    pub(super) fn span_at(&self, start: BlockNumber) -> u64 {
        self.learned_before(start)
            .map_or(self.span, |learned| self.clamp(learned.span))
    }

    /// The fraction of the target a range cut by the running span aims at.
    pub(super) fn learned_aim(&self) -> f64 {
        aim_of(self.miss)
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
