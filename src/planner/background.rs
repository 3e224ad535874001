//! Logs the probe does not account for. The survey's estimate scales the probe's hits by its share of the
//! answers, which assumes the other logs rise and fall with the probe's. Where another contract logs at its
//! own steady pace (factory children beside a contract that bursts), the probe's share is high in its
//! bursts and a tenth of that between them, so the share alone estimates a quiet stretch at a tenth of its
//! logs, and its ranges are refused one after another (on the `factory` preset, most of its refusals).
//!
//! So each answer of `n` logs over `b` blocks with `k` probe logs is fitted as `n ≈ α·k + β·b`: `α` the logs
//! that come with each probe log, `β` the logs per block that come regardless (weighted least squares,
//! each answer by `1 / n`, as a count's variance grows with it). A fit is used only where the background
//! carries a tenth of the recent logs or more; otherwise the share alone estimates. The sums decay
//! by [`DECAY`] per answer, so the fit follows a background that grows along the chain. With factories, a
//! second fit counts each block once per address asked for there (`super::addresses`), and [`Fits`] uses
//! it unless the fit by blocks forecast the answers clearly better. Pure arithmetic.
//!
//! What the fit saves on the `factory` preset, and what it costs the chains whose contracts rise and fall
//! together, is measured in docs/planner.md.

use super::addresses::Extent;

/// Answers to see before a fit is trusted.
const MIN_ANSWERS: u64 = 6;
/// Share of the recent logs that the background must carry for the fit to be used.
const MIN_BACKGROUND_SHARE: f64 = 0.1;
/// Each answer counted scales the sums before it by this: the background where children multiply grows
/// along the chain, and a fit over all answers lags it by half.
const DECAY: f64 = 0.8;
/// The fit by blocks is used only where its miss is under this share of the fit by addresses': a factory's
/// children are the likelier background, and where they add nothing the two fits are the same.
pub(super) const BLOCKS_MISS_RATIO: f64 = 0.5;
/// Standard deviations under its count that a fitted coefficient is taken at (as the share's).
const SIGMAS: f64 = 2.0;

/// The sums of the fit, per candidate probe.
#[derive(Debug, Clone, Default)]
pub(super) struct Fit {
    kk: f64,
    kb: f64,
    bb: f64,
    nk: f64,
    nb: f64,
    /// Logs, probe logs and blocks of all answers counted.
    n: f64,
    k: f64,
    b: f64,
    answers: u64,
}

/// A usable fit: estimated logs are `per_hit · hits + per_block · blocks`, each coefficient taken high by
/// its sampling error.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Background {
    pub per_hit: f64,
    pub per_block: f64,
}

impl Fit {
    /// Counts an answer of `logs` logs over `blocks` blocks, `probe_logs` of them the probe's.
    pub(super) fn add(&mut self, blocks: u64, probe_logs: u64, logs: u64) {
        let (n, k, b) = (logs as f64, probe_logs as f64, blocks as f64);
        let w = 1.0 / n.max(1.0);
        for sum in [
            &mut self.kk,
            &mut self.kb,
            &mut self.bb,
            &mut self.nk,
            &mut self.nb,
            &mut self.n,
            &mut self.k,
            &mut self.b,
        ] {
            *sum *= DECAY;
        }
        self.kk += w * k * k;
        self.kb += w * k * b;
        self.bb += w * b * b;
        self.nk += w * n * k;
        self.nb += w * n * b;
        self.n += n;
        self.k += k;
        self.b += b;
        self.answers += 1;
    }

    /// The fit, if enough answers were seen and the background carries at least
    /// [`MIN_BACKGROUND_SHARE`] of their logs.
    pub(super) fn background(&self) -> Option<Background> {
        if self.answers < MIN_ANSWERS || self.n <= 0.0 {
            return None;
        }
        let det = self.kk * self.bb - self.kb * self.kb;
        if det <= 1e-9 * self.kk * self.bb {
            return None;
        }
        let alpha = (self.nk * self.bb - self.nb * self.kb) / det;
        let beta = (self.kk * self.nb - self.kb * self.nk) / det;
        let (alpha, beta) = if alpha < 0.0 {
            (0.0, self.nb / self.bb)
        } else {
            (alpha, beta)
        };
        let background_logs = beta * self.b;
        if beta.is_nan() || beta <= 0.0 || background_logs < MIN_BACKGROUND_SHARE * self.n {
            return None;
        }
        let high = |coefficient: f64, count: f64| {
            coefficient / (1.0 - SIGMAS / count.max(1.0).sqrt()).max(0.5)
        };
        Some(Background {
            per_hit: high(alpha, self.k),
            per_block: high(beta, background_logs),
        })
    }
}

/// The fit by blocks and the fit by addresses (`super::addresses`), and how far each missed the answers it
/// forecast: the estimate uses the fit by addresses unless the one by blocks missed under
/// [`BLOCKS_MISS_RATIO`] of it. A factory's children make most of the background where they are busy, and
/// then it grows with them; where they are quiet, the background is the configured contracts', and weighing
/// it by children that multiply would cut ranges short by as much as it once cut them long. Without
/// factories the two fits are the same.
#[derive(Debug, Clone, Default)]
pub(super) struct Fits {
    by_blocks: Fit,
    by_addresses: Fit,
    /// Per fit, its decayed sum of squared log-ratios of forecast to answer.
    miss: [f64; 2],
}

impl Fits {
    /// Counts an answer of `logs` logs over `extent`, `probe_logs` of them the probe's; first scores each
    /// fit's forecast of it.
    pub(super) fn add(&mut self, extent: Extent, probe_logs: u64, logs: u64) {
        let fits = [
            (&mut self.by_blocks, extent.blocks),
            (&mut self.by_addresses, extent.weight),
        ];
        for (miss, (fit, measure)) in self.miss.iter_mut().zip(fits) {
            if let Some(background) = fit.background() {
                let forecast = background.estimate(probe_logs, measure, 0.0).max(1.0);
                let ratio = (forecast / logs.max(1) as f64).ln();
                *miss = *miss * DECAY + ratio * ratio;
            }
            fit.add(measure, probe_logs, logs);
        }
    }

    /// Estimated logs of `hits` probe hits over `extent` by the fit chosen, plus `sigmas` standard
    /// deviations; `None` where that fit found no background.
    pub(super) fn estimate(&self, hits: u64, extent: Extent, sigmas: f64) -> Option<f64> {
        let measure = if self.by_addresses_chosen() {
            extent.weight
        } else {
            extent.blocks
        };
        Some(self.chosen().background()?.estimate(hits, measure, sigmas))
    }

    /// Whether the fit used found a background.
    pub(super) fn has_background(&self) -> bool {
        self.chosen().background().is_some()
    }

    fn by_addresses_chosen(&self) -> bool {
        self.miss[0] >= BLOCKS_MISS_RATIO * self.miss[1]
    }

    fn chosen(&self) -> &Fit {
        if self.by_addresses_chosen() {
            &self.by_addresses
        } else {
            &self.by_blocks
        }
    }
}

impl Background {
    /// Estimated logs of `hits` probe hits over `blocks` blocks, plus `sigmas` standard deviations of the
    /// Poisson error of both parts.
    pub(super) fn estimate(&self, hits: u64, blocks: u64, sigmas: f64) -> f64 {
        let (h, b) = (hits as f64, blocks as f64 * self.per_block);
        self.per_hit * (h + sigmas * (h + 1.0).sqrt()) + b + sigmas * b.sqrt()
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{range, range_after_quiet_surveys, CONFIG};
    use super::super::{Outcome, Planner};
    use super::*;
    use crate::primitives::BlockRange;

    /// Answers of a chain where a bursting probe carries 4% of a burst's logs and other contracts log 8 a
    /// block throughout.
    fn mixed() -> Fit {
        let mut fit = Fit::default();
        for _ in 0..4 {
            // A burst: 27 blocks, 260 probe logs, 24 logs with each, plus the background.
            fit.add(27, 260, 260 * 25 + 27 * 8);
            // A quiet stretch: 900 blocks, 50 probe logs.
            fit.add(900, 50, 50 * 25 + 900 * 8);
        }
        fit
    }

    #[test]
    fn a_steady_background_is_fitted_beside_the_probe() {
        let fit = mixed()
            .background()
            .expect("the background is most of the quiet logs");
        // Taken high by two standard deviations of the (decayed) count of probe logs behind it.
        assert!((25.0..28.0).contains(&fit.per_hit), "{fit:?}");
        assert!((8.0..8.3).contains(&fit.per_block), "{fit:?}");
        let quiet = fit.estimate(50, 900, 0.0);
        assert!((8_450.0..8_900.0).contains(&quiet), "{quiet}");
    }

    #[test]
    fn logs_that_follow_the_probe_leave_the_share_alone() {
        let mut fit = Fit::default();
        for (blocks, probe) in [
            (27, 260),
            (900, 50),
            (300, 120),
            (60, 400),
            (2_000, 30),
            (500, 90),
        ] {
            fit.add(blocks, probe, probe * 30);
        }
        assert_eq!(fit.background(), None);
    }

    /// The stretch ahead in the tests of [`Fits`]: 1,000 blocks, 150 addresses in each.
    const AHEAD: Extent = Extent {
        blocks: 1_000,
        weight: 150_000,
    };

    /// Answers over extents whose addresses grow tenfold, each with `probe` probe logs, 24 other logs with
    /// each, and `background(extent)` more: the `Fits` they leave.
    fn fits_of(background: impl Fn(Extent) -> u64) -> Fits {
        let mut fits = Fits::default();
        for step in 1..=12u64 {
            for (blocks, probe) in [(30, 200), (600, 20)] {
                let extent = Extent {
                    blocks,
                    weight: blocks * 10 * step,
                };
                fits.add(extent, probe, probe * 25 + background(extent));
            }
        }
        fits
    }

    #[test]
    fn a_background_that_grows_with_the_addresses_is_fitted_by_them() {
        // 0.2 logs a block per address: ahead, 150 addresses over 1,000 blocks hold 30,000.
        let fits = fits_of(|extent| extent.weight / 5);
        let estimate = fits.estimate(0, AHEAD, 0.0).expect("a background");
        assert!((28_000.0..33_000.0).contains(&estimate), "{estimate}");
    }

    #[test]
    fn a_steady_background_beside_multiplying_addresses_is_fitted_by_blocks() {
        // The configured contracts' 8 logs a block, the children quiet: ahead, 8,000 in 1,000 blocks.
        let fits = fits_of(|extent| extent.blocks * 8);
        let estimate = fits.estimate(0, AHEAD, 0.0).expect("a background");
        assert!((7_500.0..8_800.0).contains(&estimate), "{estimate}");
    }

    #[test]
    fn few_answers_are_not_fitted() {
        let mut fit = Fit::default();
        for _ in 0..MIN_ANSWERS - 1 {
            fit.add(900, 50, 8_000);
        }
        assert_eq!(fit.background(), None);
    }

    #[test]
    fn empty_answers_count_against_a_background() {
        let mut fit = mixed();
        for _ in 0..8 {
            fit.add(100_000, 0, 0);
        }
        assert_eq!(
            fit.background(),
            None,
            "a stretch without logs has no background"
        );
    }

    /// A planner that has counted four bursts of the probe (candidate 0) and four quiet stretches, with
    /// `background` more logs a block throughout, then answered its first range, and surveyed the blocks
    /// after it: one probe hit every 100 blocks, a quiet stretch. Returns the range it cuts there.
    fn range_after_quiet_survey(background: u64) -> BlockRange {
        let mut planner = Planner::new(CONFIG, range(0, 1_000_000), []);
        let first = planner.next_range().unwrap();
        for _ in 0..4 {
            // A burst: 30 blocks, 150 probe logs and 9 other logs with each.
            let n = 1_500 + 30 * background;
            planner.observe_mix(range(0, 29), n, &[150, n - 150]);
            // A quiet stretch: 1,000 blocks, 10 probe logs.
            let n = 100 + 1_000 * background;
            planner.observe_mix(range(0, 999), n, &[10, n - 10]);
        }
        planner.report(first, Outcome::Logs { n: 100 });
        range_after_quiet_surveys(&mut planner)
    }

    #[test]
    fn a_quiet_stretch_beside_a_steady_background_is_cut_by_its_blocks() {
        // 2 logs a block beside the probe: 5,000 logs in about 2,300 blocks with the probe's hits; the
        // probe's share alone (4%) put them in 10,000, the longest range.
        let cut = range_after_quiet_survey(2);
        assert!((1_800..=2_500).contains(&cut.len()), "{cut}");
        let alone = range_after_quiet_survey(0);
        assert_eq!(alone.len(), CONFIG.max_span, "{alone}");
    }
}
