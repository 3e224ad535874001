//! The planner's side of the density survey: counting answers to choose a probe, asking for surveys (a
//! spot survey of a refused range first, else the lookahead), and taking their counts in. What a survey
//! estimates, and how a range is cut from it, is [`super::survey`].

use crate::primitives::{BlockNumber, BlockRange};

use super::addresses::Extent;
use super::{survey, Outcome, Planner, SurveyRequest, LOOKAHEAD_RANGES, MIN_SPOT_BLOCKS};

impl Planner {
    /// Counts a full answer for `range` of `n_logs` logs, `per_candidate[i]` of which match candidate probe
    /// `i`. Once enough logs were seen, the planner picks the probe whose share suits a survey.
    pub fn observe_mix(&mut self, range: BlockRange, n_logs: u64, per_candidate: &[u64]) {
        if range.start() >= self.sampling_from {
            // Counted, a burst of logs the probe does not see would lower its share everywhere: on the
            // `bursts` preset every quiet stretch after one would be cut several times too short. The first
            // part of a refused range (a suggested range, a narrowing's probe) is weighed as a burst too:
            // the refusal already said the survey was short there.
            let extent = self.addresses.extent(range.start(), range.end());
            let refused_here = self.held.contains_key(&range.start());
            if self
                .survey
                .is_blind_burst(range, n_logs, extent, refused_here)
            {
                return;
            }
            let remaining = self.end.saturating_sub(self.next) + 1;
            self.survey.observe(
                extent,
                n_logs,
                per_candidate,
                remaining,
                self.config.target_logs,
                !self.addresses.grow(),
            );
        }
    }

    /// The next survey to run, if one is due: first a spot survey of a refused range that no survey
    /// covers, else the lookahead, one at a time, each continuing where the last ended, no further ahead
    /// than the in-flight window needs.
    ///
    /// The spot survey is what makes the first refusals cheap: before any survey, a range over the cap is
    /// halved blind, and a dense burst around one heavy block takes a dozen round trips in a row to narrow
    /// down, with the writer idle. Once the first answers have chosen a probe, one spot survey of the
    /// refused blocks lets the planner cut them where their logs are and send a heavy block straight to
    /// narrower filters.
    pub fn next_survey(&mut self) -> Option<SurveyRequest> {
        let probe = self.survey.probe?;
        while let Some((_, due)) = self.spots_due.pop_first() {
            if self.survey.disabled {
                break;
            }
            if let Some(range) = self.unsurveyed_part(due) {
                self.survey.spots_in_flight.insert(range.start(), range);
                return Some(SurveyRequest {
                    range,
                    probe,
                    spot: true,
                });
            }
        }
        if self.survey.in_flight.is_some() || !self.survey_pending() {
            return None;
        }
        let cursor = self.survey_start();
        let last = cursor
            .saturating_add(self.clamp(self.survey.span) - 1)
            .min(self.end);
        let range = BlockRange::new(cursor, last).expect("cursor <= last");
        self.survey.in_flight = Some(range);
        Some(SurveyRequest {
            range,
            probe,
            spot: false,
        })
    }

    /// The blocks of `range` from its start up to the first block surveyed or being surveyed; `None` when
    /// its start is (or the rest is too short to be worth a request). The lookahead never goes below
    /// `next`, and every refused range lies below it, so a spot survey never counts a block twice.
    fn unsurveyed_part(&self, range: BlockRange) -> Option<BlockRange> {
        // Only what is still to fetch: the refusal may be old news by the time a probe is chosen.
        let outstanding = || {
            self.pieces
                .values()
                .chain(self.handed_out.values())
                .copied()
                .chain(self.held_ranges())
                .filter(|r| r.end() >= range.start() && r.start() <= range.end())
        };
        let first = outstanding().map(|r| r.start()).min()?;
        let last = outstanding().map(|r| r.end()).max()?;
        let range = BlockRange::new(first.max(range.start()), last.min(range.end()))?;
        if range.start() < self.sampling_from {
            return None;
        }
        let mut last = range.end();
        let surveyed = [self.survey.covered, self.survey.in_flight]
            .into_iter()
            .flatten()
            .chain(self.survey.spots.values().copied())
            .chain(self.survey.spots_in_flight.values().copied());
        for s in surveyed {
            if s.contains(range.start()) {
                return None;
            }
            if s.start() > range.start() {
                last = last.min(s.start() - 1);
            }
        }
        BlockRange::new(range.start(), last).filter(|r| r.len() >= MIN_SPOT_BLOCKS)
    }

    /// Where the next survey starts: where the last ended, unless the fetching overtook it (it started late,
    /// or ranges ran ahead of it), then at the front.
    fn survey_start(&self) -> BlockNumber {
        self.survey_cursor.max(self.next).max(self.sampling_from)
    }

    /// Whether a survey is in flight, or one will be handed out as soon as a request slot is free.
    pub(super) fn survey_pending(&self) -> bool {
        if self.survey.in_flight.is_some() {
            return true;
        }
        if self.survey.probe.is_none() || self.survey.disabled || !self.survey.lookahead {
            return false;
        }
        self.survey_start() <= self.end
            && self.survey.estimate(
                self.survey.hits_from(self.next),
                match self.survey_start().checked_sub(1) {
                    Some(last) => self.addresses.extent(self.next, last),
                    None => Extent::default(),
                },
            ) < LOOKAHEAD_RANGES * self.config.target_logs as f64
    }

    /// Learns from a survey's answer: the block number of every probe log, or why the node refused.
    pub fn report_survey(
        &mut self,
        request: SurveyRequest,
        answer: Result<&[BlockNumber], Outcome>,
    ) {
        let range = request.range;
        if request.spot {
            let surveyed = self.survey.spots_in_flight.remove(&range.start());
            debug_assert_eq!(surveyed, Some(range));
            // A refused spot survey says nothing the lookahead needs: the ranges are halved blind. Hits
            // of a probe the lookahead replaced meanwhile would be scaled by the wrong share.
            if let Some(blocks) = answer
                .ok()
                .filter(|_| Some(request.probe) == self.survey.probe)
            {
                self.survey.record_spot(range, blocks);
            }
            return;
        }
        debug_assert_eq!(self.survey.in_flight, Some(range));
        self.survey.in_flight = None;
        match answer {
            Ok(blocks) => {
                self.survey.record(range, blocks);
                self.survey_cursor = range.end() + 1;
                let ideal = if blocks.is_empty() {
                    u64::MAX
                } else {
                    (u128::from(range.len()) * u128::from(survey::SURVEY_HITS)
                        / blocks.len() as u128)
                        .min(u128::from(u64::MAX)) as u64
                };
                let span = ideal.min(range.len().saturating_mul(8));
                let span = self
                    .survey
                    .short_of_overflow(range, blocks.len() as u64, span);
                self.survey.span = self.clamp(span);
            }
            Err(Outcome::RangeTooWide { max_blocks }) => {
                let cap = max_blocks
                    .filter(|&m| m >= 1 && m < range.len())
                    .unwrap_or(range.len().div_ceil(2).max(1));
                self.node_cap = Some(self.node_cap.map_or(cap, |c| c.min(cap)));
                self.survey.span = self.clamp(cap);
                self.span = self.clamp(self.span);
            }
            Err(Outcome::TooManyResults { suggested }) => {
                let suggested = suggested
                    .filter(|&(from, to)| from == range.start() && to < range.end() && to >= from);
                self.survey.refused(range, self.config.target_logs);
                // A quarter, not a half: an overflowing survey met a dense cluster, and a survey cut short
                // costs less than another overflow.
                self.survey.span = match suggested {
                    Some((from, to)) => to - from + 1,
                    None => range.len() / 4,
                };
            }
            Err(Outcome::Timeout | Outcome::Logs { .. } | Outcome::ReadByFilters { .. }) => {
                self.survey.span = range.len() / 2;
            }
        }
        if self.survey.span == 0 {
            // One block with more probe logs than the node returns: the survey cannot say more than the
            // ranges' own answers. Cut by learned span from here on.
            self.survey.disabled = true;
        }
    }
}
