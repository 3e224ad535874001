//! A provider's circuit breaker: after [`TRIP_AFTER`] failures in a row that say the provider is unwell
//! (refused connections, timeouts, 5xx), it is set aside for a cooldown, then one request probes it; a
//! success takes it back, a failure sets it aside for twice as long (up to [`MAX_COOLDOWN`]). Pure: the
//! caller passes the time.

use std::time::Duration;

use tokio::time::Instant;

/// Failures in a row that set a provider aside: one is noise (a dropped connection), three in a row is a
/// provider in trouble, and each costs a retry elsewhere, not a job.
pub(super) const TRIP_AFTER: u32 = 3;

/// The first cooldown: long enough for a restarting provider not to be hammered, short enough that a blip
/// costs little of its share.
const FIRST_COOLDOWN: Duration = Duration::from_secs(2);

/// The longest cooldown: a provider down for hours is probed once a minute.
const MAX_COOLDOWN: Duration = Duration::from_secs(60);

/// Whether a provider takes requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// It does.
    Up,
    /// Set aside until then.
    Down {
        /// When it may be probed.
        until: Instant,
    },
    /// One request is probing it; another may probe from then (the first one was given up).
    Probing {
        /// When another request may probe.
        until: Instant,
    },
}

/// What the breaker says about sending a request now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Send it.
    Send,
    /// Send it as the probe: its outcome decides.
    Probe,
    /// Not before then.
    Wait(Instant),
}

/// The breaker of one provider.
#[derive(Debug, Clone)]
pub(super) struct Breaker {
    state: State,
    failures_in_a_row: u32,
    cooldown: Duration,
}

impl Default for Breaker {
    fn default() -> Self {
        Self {
            state: State::Up,
            failures_in_a_row: 0,
            cooldown: FIRST_COOLDOWN,
        }
    }
}

impl Breaker {
    /// The state now.
    pub(super) fn state(&self) -> State {
        self.state
    }

    /// Whether a request may be sent at `now`; a probe is handed out once.
    pub(super) fn verdict(&self, now: Instant) -> Verdict {
        match self.state {
            State::Up => Verdict::Send,
            State::Down { until } | State::Probing { until } if until <= now => Verdict::Probe,
            // Set aside, or the probe is out: the others wait for its outcome.
            State::Down { until } | State::Probing { until } => Verdict::Wait(until),
        }
    }

    /// A request is sent under `verdict` at `now`.
    pub(super) fn sending(&mut self, verdict: Verdict, now: Instant) {
        if verdict == Verdict::Probe {
            self.state = State::Probing {
                until: now + self.cooldown,
            };
        }
    }

    /// An answer came (any answer but one saying the provider is unwell).
    pub(super) fn answered(&mut self) {
        self.state = State::Up;
        self.failures_in_a_row = 0;
        self.cooldown = FIRST_COOLDOWN;
    }

    /// Sets the provider aside at `now` whatever came before (a rejected key); returns whether it was up.
    pub(super) fn set_aside(&mut self, now: Instant) -> bool {
        let was_up = self.state == State::Up;
        self.failures_in_a_row = self.failures_in_a_row.max(TRIP_AFTER);
        if !matches!(self.state, State::Down { .. }) {
            self.state = State::Down {
                until: now + self.cooldown,
            };
        }
        was_up
    }

    /// A failure saying the provider is unwell, at `now`. Returns whether it set the provider aside.
    pub(super) fn failed(&mut self, now: Instant) -> bool {
        self.failures_in_a_row += 1;
        match self.state {
            State::Probing { .. } => {
                self.cooldown = (self.cooldown * 2).min(MAX_COOLDOWN);
                self.state = State::Down {
                    until: now + self.cooldown,
                };
                true
            }
            State::Up if self.failures_in_a_row >= TRIP_AFTER => {
                self.state = State::Down {
                    until: now + self.cooldown,
                };
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_failures_in_a_row_set_a_provider_aside_and_an_answer_resets_them() {
        let now = Instant::now();
        let mut breaker = Breaker::default();
        assert!(!breaker.failed(now));
        assert!(!breaker.failed(now));
        breaker.answered();
        assert!(!breaker.failed(now));
        assert!(!breaker.failed(now));
        assert!(breaker.failed(now));
        assert_eq!(breaker.verdict(now), Verdict::Wait(now + FIRST_COOLDOWN));
    }

    #[test]
    fn after_the_cooldown_one_probe_decides() {
        let now = Instant::now();
        let mut breaker = Breaker::default();
        for _ in 0..TRIP_AFTER {
            breaker.failed(now);
        }
        let later = now + FIRST_COOLDOWN;
        assert_eq!(breaker.verdict(later), Verdict::Probe);
        breaker.sending(Verdict::Probe, later);
        assert!(matches!(breaker.verdict(later), Verdict::Wait(_)));
        // The probe fails: twice as long.
        assert!(breaker.failed(later));
        assert_eq!(
            breaker.verdict(later),
            Verdict::Wait(later + FIRST_COOLDOWN * 2)
        );
        let again = later + FIRST_COOLDOWN * 2;
        breaker.sending(breaker.verdict(again), again);
        breaker.answered();
        assert_eq!(breaker.state(), State::Up);
        assert_eq!(breaker.verdict(again), Verdict::Send);
    }

    #[test]
    fn the_cooldown_stops_growing_at_a_minute() {
        let mut now = Instant::now();
        let mut breaker = Breaker::default();
        for _ in 0..TRIP_AFTER {
            breaker.failed(now);
        }
        for _ in 0..20 {
            let State::Down { until } = breaker.state() else {
                panic!("{:?}", breaker.state())
            };
            now = until;
            breaker.sending(breaker.verdict(now), now);
            breaker.failed(now);
        }
        assert_eq!(breaker.verdict(now), Verdict::Wait(now + MAX_COOLDOWN));
    }
}
