//! A provider's rate: the ceiling the config sets, the rate in use learned below it from the provider's
//! refusals (additive increase, multiplicative decrease, as TCP learns a path's capacity), and the window
//! that holds what is sent to it within that rate.
//!
//! A provider over its limit refuses everything past it until its window turns: refusals come in a row
//! (every request in flight then, and each sent before the window turns). A refusal now and then among
//! answers (a provider shedding load, an injected fault) says nothing about the rate, and lowering on each
//! would drive the rate to its floor. So the rate is lowered after [`REFUSALS_IN_A_ROW`] refusals with no
//! answer between, when refusals are half of the last window, or a tenth of a small one, and climbs only
//! through windows without a refusal.
//!
//! Costs are in the provider's own unit: calls (`requests_per_second`, a batch item counting one) or credits
//! (`credits_per_second`, each call weighed by `method_credits`).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// How much longer than a second the window is. The provider counts calls when they arrive, and two calls
/// sent exactly a second apart can arrive closer together when the first one's trip took longer (a new
/// connection, a busy runtime on either side, the network). A second and a tenth keeps the provider's
/// count within the rate for any second, as long as trips vary by less than 100 ms, for 9% of the peak
/// rate: cheaper than one 429 with its `Retry-After`.
pub(super) const WINDOW_MARGIN: Duration = Duration::from_millis(100);

/// The window's length.
pub(super) const WINDOW: Duration = Duration::from_secs(1).saturating_add(WINDOW_MARGIN);

/// The rate after a refusal, as a share of the rate that was refused, at most: a halving (TCP's) leaves a
/// key limited below its ceiling at three quarters of its real limit on average; 0.7 at about 85%, for one
/// more refusal per cycle.
const DECREASE: f64 = 0.7;

/// The rate after a refusal, as a share of the rate that was refused, at least. Between the two, the rate
/// becomes what the provider answered in the last window: a ceiling three times the key's limit comes down
/// in one step instead of three, and the refusals of the steps between are saved.
const MAX_DECREASE: f64 = 0.3;

/// Refusals with no answer between that lower the rate: a provider over its limit refuses the requests
/// in flight together (eight, at the default concurrency); three in a row by chance, at 5% of refusals
/// without a limit behind them (the fault tests), is one request in 8,000.
const REFUSALS_IN_A_ROW: u32 = 3;

/// Or: refusals at least half of the last window's cost, of at least this much (a batch refused whole,
/// a provider asked little).
const MIN_WINDOW_COST: u32 = 4;

/// Or: refusals at least a tenth of a window of at most this much cost. A key limited to a few calls a
/// second, one call over, meets one refusal a window and never three in a row; in a window this small a
/// refusal by chance is rare, and windows without one (where the rate climbs back) are common.
const SMALL_WINDOW_COST: u32 = 50;

/// A refusal never lowers the rate below this share of what the provider has shown it answers in a
/// window (the most it answered in one, recently): refusals that come whatever the rate (a provider
/// shedding a quarter of its requests) would otherwise lower it window after window to its floor, while a
/// real limit keeps what it answers at the limit, so the floor sits just under it.
const DEMONSTRATED_SHARE: f64 = 0.9;

/// What the provider answered in its best window counts for less by this share per window since. Slow on
/// purpose: under refusals that come whatever the rate, what is answered shrinks with the rate, so a fast
/// decay would follow the rate down (measured: 0.99 lost half the rate in a minute under a quarter of
/// requests refused); a provider whose limit really dropped is followed down in about ten minutes (0.999
/// per 1.1 s window halves in ~13), its refusals retried meanwhile.
const DEMONSTRATED_DECAY: f64 = 0.999;

/// Below this share of the last refused rate the rate climbs back fast (it was lowered past what the
/// provider takes); above it, slowly (it is near the provider's limit).
const KNEE: f64 = 0.9;

/// Climb per window's worth of successful cost, as a share of the rate: below the knee.
const FAST_CLIMB: f64 = 0.10;

/// Climb per window's worth of successful cost, as a share of the rate: above the knee. 2% reaches the
/// refused rate again in about five windows from the knee, so a provider that keeps its limit sees one
/// burst of refusals every eight seconds or so.
const SLOW_CLIMB: f64 = 0.02;

/// What the provider has shown of its limit: the rate in use, between 1 and the ceiling.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Learned {
    ceiling: f64,
    current: f64,
    /// The provider's limit as the last refusal showed it: what it answered in the window before.
    refused_at: Option<f64>,
    /// When the rate was last lowered: refusals of requests sent before it are of the old rate.
    lowered_at: Option<Instant>,
    /// The most the provider answered in one window, and when, decaying by [`DEMONSTRATED_DECAY`].
    demonstrated: Option<(f64, Instant)>,
}

impl Learned {
    /// Starts at the ceiling.
    pub(super) fn new(ceiling: u32) -> Self {
        let ceiling = f64::from(ceiling.max(1));
        Self {
            ceiling,
            current: ceiling,
            refused_at: None,
            lowered_at: None,
            demonstrated: None,
        }
    }

    /// What the provider has shown it answers in a window, at `now`.
    fn demonstrated(&self, now: Instant) -> f64 {
        self.demonstrated.map_or(0.0, |(answered, at)| {
            let windows = now.saturating_duration_since(at).as_secs_f64() / WINDOW.as_secs_f64();
            answered * DEMONSTRATED_DECAY.powf(windows)
        })
    }

    /// The provider answered `answered` (cost) in the window up to `now`.
    pub(super) fn answered_in_window(&mut self, answered: u32, now: Instant) {
        let answered = f64::from(answered);
        if answered >= self.demonstrated(now) {
            self.demonstrated = Some((answered, now));
        }
    }

    /// The cost admitted per window now (at least 1).
    pub(super) fn per_window(&self) -> u32 {
        // Truncation: the rate is within [1, u32::MAX].
        self.current.floor().max(1.0) as u32
    }

    /// The configured ceiling.
    pub(super) fn ceiling(&self) -> u32 {
        self.ceiling as u32
    }

    /// The provider refused a request sent at `sent` for its rate; `seen` is the last window, this refusal
    /// included. When the refusals say the rate is above the provider's limit (in a row, or half the
    /// window), the rate comes down towards what was answered, once per burst (the requests in flight when
    /// the limit was crossed are refused together, and each says the same). Returns whether the refusal
    /// is explained by a rate above what the provider takes (lowered now, or already lowered since the
    /// request was sent): then its retry costs no attempt.
    pub(super) fn refused(&mut self, sent: Instant, now: Instant, seen: Seen) -> bool {
        if self.lowered_at.is_some_and(|at| sent <= at) {
            return true;
        }
        let total = seen.answered.saturating_add(seen.refused);
        let over = seen.in_a_row >= REFUSALS_IN_A_ROW
            || (total >= MIN_WINDOW_COST && seen.refused.saturating_mul(2) >= total)
            || (total <= SMALL_WINDOW_COST && seen.refused.saturating_mul(10) >= total);
        if self.at_floor() || !over {
            return false;
        }
        let answered = f64::from(seen.recent);
        let floor = self.demonstrated(now) * DEMONSTRATED_SHARE;
        let lowered = answered
            .clamp(self.current * MAX_DECREASE, self.current * DECREASE)
            .max(floor);
        if lowered >= self.current {
            return false;
        }
        self.refused_at = Some(answered.max(lowered));
        self.current = lowered.max(1.0);
        self.lowered_at = Some(now);
        true
    }

    /// A request of `cost` succeeded: climb towards the ceiling, by a share of the rate per window's worth
    /// of cost, unless the last window held a refusal (`clean` false: the rate is at the provider's limit).
    pub(super) fn succeeded(&mut self, cost: u32, clean: bool) {
        if self.current >= self.ceiling || !clean {
            return;
        }
        let near_limit = self
            .refused_at
            .is_some_and(|refused| self.current >= refused * KNEE);
        let share = if near_limit { SLOW_CLIMB } else { FAST_CLIMB };
        // A window's worth of cost (`current`) climbs by `share * current`: each unit by `share`.
        self.current = (self.current + share * f64::from(cost)).min(self.ceiling);
    }

    /// Whether the rate is as low as it goes.
    pub(super) fn at_floor(&self) -> bool {
        self.current <= 1.0
    }
}

/// The learned rate and the window that holds what is sent within it: at most `per_window` of cost starts
/// in any window of length [`WINDOW`], a log of the admissions still inside it, so the bound holds for every
/// window, not only aligned ones. (A token bucket such as governor's GCRA starts full: a burst of the whole
/// budget, then the budget again within the same second, twice the rate a provider counting "per second"
/// allows.) Memory: at most `per_window` entries.
#[derive(Debug)]
pub(super) struct Rate {
    learned: Mutex<Learned>,
    /// Admissions inside the window, oldest first, with their cost; and the sum of those costs.
    admitted: Mutex<(VecDeque<(Instant, u32)>, u32)>,
    /// No admission before this (a provider's `Retry-After`).
    paused_until: Mutex<Option<Instant>>,
    /// Waiters take turns in arrival order (tokio's `Mutex` is fair), so a batch is not starved by single
    /// calls slipping in whenever one unit frees up.
    turn: tokio::sync::Mutex<()>,
    /// The cost of the requests waiting for admission: what a new one waits behind.
    waiting: AtomicU32,
    /// Answers and refusals for the rate inside the last window, with their cost (`true`: answered).
    outcomes: Mutex<Outcomes>,
}

/// What the last window showed: cost answered and refused for the rate, refusals since the last answer,
/// and what the provider answered in one stretch of its own window (`recent`, see [`Outcomes`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Seen {
    pub(super) answered: u32,
    pub(super) refused: u32,
    pub(super) in_a_row: u32,
    pub(super) recent: u32,
}

/// Answers and refusals for the rate inside the last window.
///
/// A provider counting fixed seconds refuses everything from the moment its second is full until the
/// next one opens, then answers its limit again: a window of ours that holds such a refusal holds the end
/// of one of its seconds and the start of the next, up to twice its limit answered. So what it answers is
/// measured (`recent`) since the last boundary of its seconds inside the window, and a row of refusals is
/// judged by what was answered between the boundary before it and its own. A boundary is a refusal with a
/// `Retry-After` (the provider said when its count opens again: what follows the pause is counted anew),
/// or the [`REFUSALS_IN_A_ROW`]th refusal of a row without one (a refusal alone, without `Retry-After`,
/// may be a provider shedding load: taking each for a boundary would measure what it answers between two
/// of them, a fraction of its limit).
#[derive(Debug, Default)]
struct Outcomes {
    log: VecDeque<(Instant, u32, bool)>,
    seen: Seen,
    /// When the last boundary was, and the cost answered since it.
    boundary: Option<(Instant, u32)>,
    /// What was answered between the current row's boundary and the boundary before it.
    before_boundary: u32,
    /// Whether the current row of refusals has marked its boundary.
    marked: bool,
}

impl Outcomes {
    /// Adds one at `now` (a refusal `paused` when it came with a `Retry-After`) and forgets those out of
    /// the window.
    fn add(&mut self, now: Instant, cost: u32, answered: bool, paused: bool) {
        while let Some(&(at, old, was_answered)) = self.log.front() {
            if at + WINDOW > now {
                break;
            }
            self.log.pop_front();
            match was_answered {
                true => self.seen.answered -= old,
                false => self.seen.refused -= old,
            }
        }
        self.log.push_back((now, cost, answered));
        if self.boundary.is_some_and(|(at, _)| at + WINDOW <= now) {
            self.boundary = None;
        }
        if answered {
            self.seen.answered += cost;
            self.seen.in_a_row = 0;
            self.marked = false;
            if let Some((_, since)) = &mut self.boundary {
                *since += cost;
            }
        } else {
            self.seen.refused += cost;
            self.seen.in_a_row += 1;
            if !self.marked && (paused || self.seen.in_a_row >= REFUSALS_IN_A_ROW) {
                self.before_boundary = self.since_boundary();
                self.boundary = Some((now, 0));
                self.marked = true;
            }
        }
        self.seen.recent = match self.marked {
            true => self.before_boundary,
            false => self.since_boundary(),
        };
    }

    /// What was answered since the last boundary in the window, or in the whole window.
    fn since_boundary(&self) -> u32 {
        self.boundary.map_or(self.seen.answered, |(_, since)| {
            since.min(self.seen.answered)
        })
    }
}

/// Counts a request's cost as waiting until it is admitted or given up.
struct Waiting<'a>(&'a AtomicU32, u32);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(self.1, Ordering::Relaxed);
    }
}

impl Rate {
    pub(super) fn new(ceiling: u32) -> Self {
        Self {
            learned: Mutex::new(Learned::new(ceiling)),
            admitted: Mutex::new((VecDeque::new(), 0)),
            paused_until: Mutex::new(None),
            turn: tokio::sync::Mutex::new(()),
            waiting: AtomicU32::new(0),
            outcomes: Mutex::new(Outcomes::default()),
        }
    }

    /// What has been learnt.
    pub(super) fn learned(&self) -> Learned {
        self.learned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Changes what has been learnt with `f`.
    pub(super) fn learn<T>(&self, f: impl FnOnce(&mut Learned) -> T) -> T {
        f(&mut self.learned.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// A request of `cost` was answered: climb if the window held no refusal.
    pub(super) fn succeeded(&self, cost: u32) {
        let now = Instant::now();
        let seen = {
            let mut outcomes = self.outcomes.lock().unwrap_or_else(PoisonError::into_inner);
            outcomes.add(now, cost, true, false);
            outcomes.seen
        };
        self.learn(|learned| {
            learned.answered_in_window(seen.recent, now);
            learned.succeeded(cost, seen.refused == 0);
        });
    }

    /// A request of `cost` sent at `sent` was refused for the rate (`paused`: with a `Retry-After`):
    /// lower it when the window says so (see [`Learned::refused`]).
    pub(super) fn refused(&self, sent: Instant, cost: u32, paused: bool) -> bool {
        let now = Instant::now();
        let seen = {
            let mut outcomes = self.outcomes.lock().unwrap_or_else(PoisonError::into_inner);
            outcomes.add(now, cost, false, paused);
            outcomes.seen
        };
        self.learn(|learned| learned.refused(sent, now, seen))
    }

    /// No admission before `until`.
    pub(super) fn pause_until(&self, until: Instant) {
        let mut paused = self
            .paused_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *paused = Some(paused.map_or(until, |at| at.max(until)));
    }

    /// When `cost` could be admitted at the earliest, as things stand (for choosing a provider): after the
    /// window has room for it, and after the requests already waiting, at the rate now.
    pub(super) fn ready_at(&self, cost: u32) -> Instant {
        let per_window = self.learned().per_window();
        let now = Instant::now();
        let paused = self
            .paused_until
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .unwrap_or(now);
        let waiting = self.waiting.load(Ordering::Relaxed);
        let behind = now + WINDOW.mul_f64(f64::from(waiting) / f64::from(per_window));
        let guard = self.admitted.lock().unwrap_or_else(PoisonError::into_inner);
        ready_at(&guard.0, guard.1, cost.min(per_window), per_window, now)
            .max(paused)
            .max(behind)
    }

    /// Waits until `cost` more fits in the window at the rate now, and counts it; returns when it was
    /// admitted. A cost above the rate waits for an empty window (the caller should have split it).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is counted until it returns.
    pub(super) async fn admit(&self, cost: u32) -> Instant {
        self.waiting.fetch_add(cost, Ordering::Relaxed);
        let _waiting = Waiting(&self.waiting, cost);
        let _turn = self.turn.lock().await;
        loop {
            let paused = *self
                .paused_until
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(until) = paused.filter(|until| *until > Instant::now()) {
                tokio::time::sleep_until(until).await;
                continue;
            }
            let per_window = self.learned().per_window();
            let ready = {
                let mut guard = self.admitted.lock().unwrap_or_else(PoisonError::into_inner);
                let (admitted, in_window) = &mut *guard;
                let now = Instant::now();
                while let Some(&(at, spent)) = admitted.front() {
                    if at + WINDOW > now {
                        break;
                    }
                    admitted.pop_front();
                    *in_window -= spent;
                }
                let ready = ready_at(admitted, *in_window, cost.min(per_window), per_window, now);
                if ready <= now {
                    admitted.push_back((now, cost));
                    *in_window += cost;
                    return now;
                }
                ready
            };
            tokio::time::sleep_until(ready).await;
        }
    }
}

/// When `cost` fits under `per_window` given the admissions still in the window (`in_window` their sum):
/// `now` if it fits already, else when enough of the oldest have left.
fn ready_at(
    admitted: &VecDeque<(Instant, u32)>,
    in_window: u32,
    cost: u32,
    per_window: u32,
    now: Instant,
) -> Instant {
    let mut still_in = in_window;
    let mut ready = now;
    for &(at, spent) in admitted {
        if still_in + cost <= per_window {
            break;
        }
        still_in -= spent;
        ready = ready.max(at + WINDOW);
    }
    ready
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_refusals_lowers_the_rate_once() {
        let start = Instant::now();
        let seen = |answered, refused, in_a_row| Seen {
            answered,
            refused,
            in_a_row,
            recent: answered,
        };
        let mut learned = Learned::new(25);
        // Refusals among 60 answers, two in a row at most: noise, not the rate.
        assert!(!learned.refused(start, start, seen(60, 1, 1)));
        assert!(!learned.refused(start, start, seen(60, 3, 2)));
        assert_eq!(learned.per_window(), 25);
        // Three in a row: the rate drops to at most 0.7 of 25.
        assert!(learned.refused(start, start, seen(60, 4, 3)));
        assert_eq!(learned.per_window(), 17);
        // Sent before the rate was lowered: the same burst, explained, not lowered again.
        assert!(learned.refused(start, start + Duration::from_millis(5), seen(0, 5, 4)));
        assert_eq!(learned.per_window(), 17);
        // Sent after: the lower rate is refused too, having answered 8: down to 8.
        let later = start + Duration::from_secs(1);
        assert!(learned.refused(later, later, seen(8, 3, 3)));
        assert_eq!(learned.per_window(), 8);
        // A batch of 5 refused whole, nothing answered: half the window, at most a decrease to 0.3.
        let again = later + Duration::from_secs(1);
        assert!(learned.refused(again, again, seen(0, 5, 1)));
        assert_eq!(learned.per_window(), 2);
    }

    #[test]
    fn the_rate_never_drops_below_one_nor_climbs_past_the_ceiling() {
        let mut learned = Learned::new(3);
        let mut now = Instant::now();
        for _ in 0..10 {
            now += Duration::from_secs(1);
            learned.refused(
                now,
                now,
                Seen {
                    answered: 0,
                    recent: 0,
                    refused: 4,
                    in_a_row: 4,
                },
            );
        }
        assert_eq!(learned.per_window(), 1);
        assert!(learned.at_floor());
        // While the window holds a refusal, no climb.
        learned.succeeded(1, false);
        assert_eq!(learned.per_window(), 1);
        for _ in 0..1000 {
            learned.succeeded(1, true);
        }
        assert_eq!(learned.per_window(), 3);
    }

    #[test]
    fn refusals_whatever_the_rate_stop_lowering_it_under_what_the_provider_answers() {
        let mut learned = Learned::new(100);
        let mut now = Instant::now();
        learned.answered_in_window(75, now);
        // A quarter refused whatever the rate, every window, three in a row each time: what is answered
        // shrinks with the rate.
        for _ in 0..50 {
            now += WINDOW;
            let rate = learned.per_window();
            learned.answered_in_window(rate * 3 / 4, now);
            let seen = Seen {
                answered: rate * 3 / 4,
                recent: rate * 3 / 4,
                refused: rate / 4,
                in_a_row: 3,
            };
            learned.refused(now, now, seen);
        }
        // Fifty windows later, still at least 0.6 of the 75 it answered at first.
        assert!(learned.per_window() >= 45, "{}", learned.per_window());
    }

    #[test]
    fn a_refusal_now_and_then_among_answers_keeps_the_rate() {
        let mut learned = Learned::new(100);
        let mut now = Instant::now();
        // One refusal in twenty, every window, for a minute.
        for _ in 0..60 {
            now += WINDOW;
            for _ in 0..19 {
                learned.succeeded(1, false);
            }
            let seen = Seen {
                answered: 95,
                recent: 95,
                refused: 5,
                in_a_row: 1,
            };
            assert!(!learned.refused(now, now, seen));
        }
        assert_eq!(learned.per_window(), 100);
    }

    /// A provider whose real limit is `limit` per window, refusing what a window holds over it: the rate
    /// learned from a ceiling three times higher settles near the limit, with refusals a small share of
    /// calls.
    #[test]
    fn a_rate_learned_from_refusals_settles_near_the_real_limit() {
        let limit = 8;
        let mut learned = Learned::new(24);
        let (mut sent, mut refused, mut admitted) = (0u32, 0u32, 0u32);
        let mut now = Instant::now();
        let mut refused_before = false;
        for _ in 0..600 {
            let rate = learned.per_window();
            sent += rate;
            admitted += rate.min(limit);
            for _ in 0..rate.min(limit) {
                learned.succeeded(1, !refused_before);
            }
            refused_before = rate > limit;
            if rate > limit {
                refused += rate - limit;
                let seen = Seen {
                    answered: limit,
                    recent: limit,
                    refused: rate - limit,
                    in_a_row: rate - limit,
                };
                learned.refused(now, now + Duration::from_millis(1), seen);
            }
            now += WINDOW;
        }
        let share_refused = f64::from(refused) / f64::from(sent);
        let mean_admitted = f64::from(admitted) / 600.0;
        assert!(share_refused < 0.1, "{share_refused} of calls refused");
        assert!(
            mean_admitted > 0.75 * f64::from(limit),
            "{mean_admitted} admitted per window of {limit}"
        );
    }

    /// A provider counting fixed seconds of 10 calls: our window holding the end of one of its seconds
    /// and the start of the next sees 20 answered; what a row of refusals is judged by is the 10 answered
    /// since the row before.
    #[test]
    fn a_row_of_refusals_is_judged_by_what_was_answered_since_the_row_before() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut outcomes = Outcomes::default();
        let mut outcome = |ms: u64, answered: bool| {
            outcomes.add(at(ms), 1, answered, false);
            outcomes.seen
        };
        for ms in 0..10 {
            outcome(ms * 10, true);
        }
        for ms in [500, 510] {
            outcome(ms, false);
        }
        // The first row: the whole window, 10.
        assert_eq!(outcome(520, false).recent, 10);
        for ms in 0..10 {
            outcome(600 + ms * 10, true);
        }
        let seen = outcome(700, true);
        assert_eq!((seen.answered, seen.recent), (21, 11));
        for ms in [800, 810] {
            outcome(ms, false);
        }
        let seen = outcome(820, false);
        assert_eq!((seen.answered, seen.recent, seen.in_a_row), (21, 11, 3));
        // Refusals of the same row: still judged by the stretch before it.
        assert_eq!(outcome(830, false).recent, 11);
        // Once the rows are out of the window, the window again.
        assert_eq!(outcome(2_000, true).recent, 1);
    }

    /// A refusal with a `Retry-After` is a boundary of the provider's seconds by itself; one without is
    /// not (it may be load shed at random).
    #[test]
    fn a_refusal_with_retry_after_marks_a_boundary_alone() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut outcomes = Outcomes::default();
        for ms in 0..10 {
            outcomes.add(at(ms * 10), 1, true, false);
        }
        outcomes.add(at(100), 1, false, false);
        outcomes.add(at(110), 1, true, false);
        assert_eq!(outcomes.seen.recent, 11);
        outcomes.add(at(120), 1, false, true);
        assert_eq!(outcomes.seen.recent, 11);
        for ms in 0..4 {
            outcomes.add(at(200 + ms * 10), 1, true, false);
        }
        assert_eq!((outcomes.seen.answered, outcomes.seen.recent), (15, 4));
    }

    #[tokio::test(start_paused = true)]
    async fn a_pause_holds_every_admission_until_it_ends() {
        let rate = Rate::new(10);
        let start = Instant::now();
        rate.pause_until(start + Duration::from_secs(2));
        assert_eq!(rate.ready_at(1), start + Duration::from_secs(2));
        assert_eq!(rate.admit(1).await, start + Duration::from_secs(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lower_rate_admits_less_per_window() {
        let rate = Rate::new(4);
        let start = Instant::now();
        assert!(rate.refused(start, 4, false));
        // A batch of 4 refused whole, nothing answered: the largest decrease, to 0.3 of 4 (at least 1).
        assert_eq!(rate.learned().per_window(), 1);
        assert_eq!(rate.admit(1).await, start);
        assert_eq!(rate.admit(1).await, start + WINDOW);
    }
}
