//! Where a range ends: by the survey's estimate of its logs where a survey covers its start, else by the
//! span learned from answers (`super::learning`). Pure: it reads the planner's state and changes nothing.

use crate::primitives::BlockNumber;

use super::Planner;

/// A range cut by a learned span takes the blocks left before its hard end when they are under this share
/// of the span (a tenth: the aim is at most 0.95 of the target, so it stays under the cap).
const CRUMB_SHARE: u64 = 10;

/// A surveyed range of up to this many blocks is cut where its estimated logs, without their error, reach
/// the target: in a stretch of thousands of logs a block, a range one block shorter loses a third of a
/// request or more, more than the refusals the error risks cost (measured on the `dense` preset:
/// docs/planner.md).
const FEW_BLOCKS: u64 = 3;

/// Whether cutting a range may wait for the survey to get further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Waiting {
    /// A new range: better to wait one survey than to cut it blind.
    Allowed,
    /// A split piece: it is in the way of in-order commits, cut it now.
    Never,
}

/// How a range was cut.
pub(super) enum Cut {
    /// The range ends at this block.
    At(BlockNumber),
    /// Wait for the survey in flight.
    Wait,
}

impl Planner {
    /// Where a range starting at `start` and ending at `hard_last` at the latest should end.
    pub(super) fn cut(&self, start: BlockNumber, hard_last: BlockNumber, waiting: Waiting) -> Cut {
        let target = self.config.target_logs as f64;
        if let Some(surveyed) = self
            .survey
            .coverage(start)
            .filter(|_| !self.survey.disabled)
        {
            let limit = hard_last.min(surveyed.end());
            // Estimated logs of `start..=last` holding `hits` hits.
            let estimate = |hits: u64, last: BlockNumber| {
                let extent = self.addresses.extent(start, last);
                if extent.blocks <= FEW_BLOCKS {
                    self.survey.estimate(hits, extent)
                } else {
                    self.survey.upper_estimate(hits, extent)
                }
            };
            // A block that alone looks over the target still goes alone: the node decides.
            let cut_before =
                |block: BlockNumber| Cut::At(if block > start { block - 1 } else { block });
            let mut hits = 0;
            let mut from = start;
            for (block, n) in self.survey.hits_in(start, limit) {
                if block > from {
                    if let Some(over) = self.first_over(from, block - 1, hits, &estimate) {
                        return cut_before(over);
                    }
                }
                if estimate(hits + n, block) > target {
                    return cut_before(block);
                }
                hits += n;
                from = block + 1;
            }
            if from <= limit {
                if let Some(over) = self.first_over(from, limit, hits, &estimate) {
                    return cut_before(over);
                }
            }
            if limit == hard_last || waiting == Waiting::Never || !self.survey_pending() {
                return Cut::At(limit);
            }
            return Cut::Wait;
        }
        if waiting == Waiting::Allowed && self.survey.in_flight.is_some_and(|s| s.contains(start)) {
            return Cut::Wait;
        }
        let span = self.span_at(start);
        let last = start.saturating_add(span - 1).min(hard_last);
        // Blocks left before a hard end that a tenth of the span would hold go with this range: alone they
        // would be a request of a few logs (the plan's end, a contract joining).
        Cut::At(if hard_last - last <= span / CRUMB_SHARE {
            hard_last
        } else {
            last
        })
    }

    /// The first block of `from..=to`, none of which holds a hit, where the estimate of `hits` hits reaches
    /// the target by the blocks alone (only where the survey fitted a background to its probe).
    fn first_over(
        &self,
        from: BlockNumber,
        to: BlockNumber,
        hits: u64,
        estimate: &impl Fn(u64, BlockNumber) -> f64,
    ) -> Option<BlockNumber> {
        let target = self.config.target_logs as f64;
        if !self.survey.has_background() || estimate(hits, to) <= target {
            return None;
        }
        let (mut low, mut high) = (from, to);
        while low < high {
            let mid = low + (high - low) / 2;
            if estimate(hits, mid) > target {
                high = mid;
            } else {
                low = mid + 1;
            }
        }
        Some(low)
    }
}
