//! The attempts of one request over the providers: how many each has made against its `max_retries`,
//! which rejected their key, the backoff between attempts, and the last failure.

use std::time::Duration;

use backon::BackoffBuilder;

use crate::rpc;

use super::{Error, Gate};

/// Refusals for the rate that lowered it, per request, that do not count as attempts: a ceiling far
/// above the provider's limit takes a few decreases to come down, and those must not spend the request's
/// retries. Past this, they count like any transient failure.
const FREE_RATE_REFUSALS: u32 = 16;

/// The attempts of one request: how many each provider has made, and the last failure.
pub(super) struct Attempts {
    /// Failed attempts per provider that count against its `max_retries`.
    tries: Vec<u32>,
    /// Each provider's attempts allowed (`max_retries + 1`).
    allowed: Vec<u32>,
    /// Providers that rejected their key.
    rejected: Vec<bool>,
    pub(super) only: Option<usize>,
    pub(super) total: u32,
    free_refusals: u32,
    backoff: backon::ExponentialBackoff,
    max_backoff: Duration,
    pub(super) last: Option<(usize, rpc::Error)>,
}

impl Attempts {
    /// The attempts of a request to any provider, or to `only`; `once`: one attempt only.
    pub(super) fn new(gate: &Gate, only: Option<usize>, once: bool) -> Self {
        let providers = &gate.providers();
        let initial = providers
            .iter()
            .map(|p| p.limits.initial_backoff)
            .min()
            .unwrap_or_default();
        let max_backoff = providers
            .iter()
            .map(|p| p.limits.max_backoff)
            .max()
            .unwrap_or_default();
        Self {
            tries: vec![0; providers.len()],
            allowed: providers
                .iter()
                .map(|p| if once { 1 } else { p.limits.max_retries + 1 })
                .collect(),
            rejected: vec![false; providers.len()],
            only,
            total: 0,
            free_refusals: 0,
            backoff: backon::ExponentialBuilder::default()
                .with_min_delay(initial)
                .with_max_delay(max_backoff)
                .with_factor(2.0)
                .without_max_times()
                .build(),
            max_backoff,
            last: None,
        }
    }

    pub(super) fn may_use(&self, index: usize) -> bool {
        self.only.is_none_or(|only| only == index)
            && !self.rejected[index]
            && self.tries[index] < self.allowed[index]
    }

    pub(super) fn tried(&mut self, index: usize) {
        self.tries[index] += 1;
        self.total += 1;
    }

    /// Whether a refusal that lowered the rate may be retried without counting.
    pub(super) fn free_refusal(&mut self) -> bool {
        self.free_refusals += 1;
        self.free_refusals <= FREE_RATE_REFUSALS
    }

    pub(super) fn reject(&mut self, index: usize) {
        self.rejected[index] = true;
        self.total += 1;
    }

    pub(super) fn all_rejected(&self) -> bool {
        self.rejected.iter().all(|r| *r)
    }

    /// The backoff before the next attempt: full jitter (anywhere in [0, backoff], so many workers hit by
    /// one 429 don't return in step), at least the provider's hint.
    pub(super) fn delay(&mut self, hint: Option<Duration>) -> Duration {
        let backoff = self.backoff.next().unwrap_or(self.max_backoff);
        let jittered = backoff.mul_f64(fastrand::f64());
        hint.map_or(jittered, |after| after.max(jittered))
            .min(self.max_backoff.max(hint.unwrap_or_default()))
    }

    pub(super) fn exhausted(self, gate: &Gate, method: &'static str) -> Error {
        match self.last {
            Some((index, source)) if self.rejected.iter().all(|r| *r) => Error::Rejected {
                provider: gate.providers()[index].name.clone(),
                method,
                source,
            },
            Some((index, source)) => Error::Exhausted {
                provider: gate.providers()[index].name.clone(),
                method,
                attempts: self.total.max(1),
                source,
            },
            None => Error::Exhausted {
                provider: gate.providers()[0].name.clone(),
                method,
                attempts: 0,
                source: rpc::Error::Timeout(Duration::ZERO),
            },
        }
    }

    pub(super) fn rejected(&mut self, gate: &Gate, method: &'static str) -> Error {
        let (index, source) = self.last.take().expect("a rejection was recorded");
        Error::Rejected {
            provider: gate.providers()[index].name.clone(),
            method,
            source,
        }
    }
}
