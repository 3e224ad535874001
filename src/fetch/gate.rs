//! The gate every request passes: a concurrency permit, the request-rate limiter, and the retry loop with
//! exponential backoff and full jitter (the node's `Retry-After` wins when it is longer). Every wait in it
//! (permit, rate, backoff) and the request itself end with [`Error::Interrupted`] as soon as the job's
//! cancellation token fires, so a shutdown never waits for a node that is down or rate-limiting.

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::BackoffBuilder;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::rpc::{self, Class};

use super::Error;

/// Retry and rate limits of a gate (from `[node]`).
#[derive(Debug, Clone, Copy)]
pub struct GateConfig {
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Requests started per second.
    pub requests_per_second: u32,
    /// Attempts after the first.
    pub max_retries: u32,
    /// The first backoff.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
}

/// What to do when the node says "ask for less".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSplit {
    /// Hand the answer back: the caller narrows the request (`eth_getLogs`).
    Return,
    /// Treat it as transient (a call that has no range to narrow).
    Retry,
}

/// Counters of what the gate saw, for `bench` and `status`.
#[derive(Debug, Default)]
pub struct GateStats {
    /// Requests sent.
    pub requests: AtomicU64,
    /// Of them, `eth_getLogs` requests (the rest read heads and headers).
    pub log_requests: AtomicU64,
    /// Answers that were errors of any kind.
    pub errors: AtomicU64,
    /// Retries made.
    pub retries: AtomicU64,
    /// Answers that asked for a narrower request.
    pub splits: AtomicU64,
}

/// Semaphore + rate limiter + retry policy in front of every request, stopped by one cancellation token.
pub struct Gate {
    config: GateConfig,
    permits: Semaphore,
    limiter: DefaultDirectRateLimiter,
    /// The job's token: fired, every wait and request in the gate ends with [`Error::Interrupted`].
    cancel: CancellationToken,
    /// What the gate saw.
    pub stats: GateStats,
}

impl Gate {
    /// A gate with these limits, interrupted by `cancel`.
    pub fn new(config: GateConfig, cancel: CancellationToken) -> Self {
        let rate = NonZeroU32::new(config.requests_per_second.max(1)).expect("max(1) is non-zero");
        Self {
            config,
            permits: Semaphore::new(config.max_concurrency.max(1)),
            limiter: RateLimiter::direct(Quota::per_second(rate)),
            cancel,
            stats: GateStats::default(),
        }
    }

    /// The limits.
    pub fn config(&self) -> GateConfig {
        self.config
    }

    /// Runs `call` until it succeeds, cannot succeed, or the retries are spent.
    ///
    /// # Errors
    /// [`Error::Split`] (with [`OnSplit::Return`]), [`Error::Rejected`], [`Error::Fatal`],
    /// [`Error::Exhausted`] carrying the last error, or [`Error::Interrupted`] once the token fires.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, it sends nothing more; a request in flight is abandoned.
    pub async fn run<T, F, Fut>(
        &self,
        method: &'static str,
        on_split: OnSplit,
        mut call: F,
    ) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        let mut delays = backon::ExponentialBuilder::default()
            .with_min_delay(self.config.initial_backoff)
            .with_max_delay(self.config.max_backoff)
            .with_factor(2.0)
            .without_max_times()
            .build();
        let attempts = self.config.max_retries + 1;
        for attempt in 1..=attempts {
            let sending = async {
                let _permit = self
                    .permits
                    .acquire()
                    .await
                    .expect("the semaphore is never closed");
                self.limiter.until_ready().await;
                self.stats.requests.fetch_add(1, Ordering::Relaxed);
                if method == "eth_getLogs" {
                    self.stats.log_requests.fetch_add(1, Ordering::Relaxed);
                }
                call().await
            };
            // One-shot select (no loop): the permit and rate waits need not be cancel safe, they are dropped.
            let result = tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(Error::Interrupted),
                result = sending => result,
            };
            crate::observe::record_request(
                method,
                result.as_ref().err().map(|e| e.class()).as_ref(),
            );
            let err = match result {
                Ok(value) => return Ok(value),
                Err(err) => err,
            };
            self.stats.errors.fetch_add(1, Ordering::Relaxed);
            let hint = match err.class() {
                Class::Split { .. } if on_split == OnSplit::Return => {
                    self.stats.splits.fetch_add(1, Ordering::Relaxed);
                    crate::observe::record_split();
                    return Err(Error::Split(err));
                }
                Class::Split { .. } | Class::Unreachable => None,
                Class::Retry { after } => after,
                Class::Rejected => {
                    return Err(Error::Rejected {
                        method,
                        source: err,
                    })
                }
                Class::Fatal => {
                    return Err(Error::Fatal {
                        method,
                        source: err,
                    })
                }
            };
            if attempt == attempts {
                return Err(Error::Exhausted {
                    method,
                    attempts,
                    source: err,
                });
            }
            // Full jitter: anywhere in [0, backoff], so many workers hit by one 429 don't return in step.
            let backoff = delays.next().unwrap_or(self.config.max_backoff);
            let jittered = backoff.mul_f64(fastrand::f64());
            let delay = hint
                .map_or(jittered, |after| after.max(jittered))
                .min(self.config.max_backoff.max(hint.unwrap_or_default()));
            tracing::debug!(method, attempt, cause = %err, delay_ms = delay.as_millis() as u64, "retrying");
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            crate::observe::record_retry();
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => return Err(Error::Interrupted),
                () = tokio::time::sleep(delay) => {}
            }
        }
        unreachable!("the last attempt returns")
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::time::Instant;

    use super::*;

    fn config(requests_per_second: u32) -> GateConfig {
        GateConfig {
            max_concurrency: 4,
            requests_per_second,
            max_retries: 3,
            initial_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(60),
        }
    }

    fn transient() -> rpc::Error {
        rpc::Error::Http {
            status: 503,
            retry_after: None,
        }
    }

    /// Runs `gate.run` in the background and fires `cancel` once the gate is in the wait under test, then
    /// asserts the run ended with `Interrupted` without time moving on.
    async fn assert_interrupted_promptly(
        gate: Arc<Gate>,
        cancel: CancellationToken,
        request: impl Fn() -> Result<(), rpc::Error> + Send + Sync + 'static,
        waiting: impl Future<Output = ()>,
    ) {
        let running = tokio::spawn(async move {
            gate.run("eth_blockNumber", OnSplit::Retry, || {
                let answer = request();
                async move { answer }
            })
            .await
        });
        waiting.await;
        let fired_at = Instant::now();
        cancel.cancel();
        let result = running.await.expect("the run does not panic");
        assert!(
            matches!(result, Err(Error::Interrupted)),
            "{result:?} instead of Interrupted"
        );
        assert_eq!(
            Instant::now(),
            fired_at,
            "the gate waited on after the token fired"
        );
    }

    /// Lets every task that can run, run (time is paused, so nothing advances the clock meanwhile).
    async fn settle() {
        for _ in 0..16 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_ends_a_backoff_sleep_at_once() {
        let cancel = CancellationToken::new();
        let gate = Arc::new(Gate::new(config(100), cancel.clone()));
        let stats_gate = gate.clone();
        assert_interrupted_promptly(gate, cancel, || Err(transient()), async move {
            // The first attempt failed and the gate sleeps (up to 5 s) before the second.
            while stats_gate.stats.retries.load(Ordering::Relaxed) == 0 {
                settle().await;
            }
            settle().await;
        })
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_ends_the_wait_for_a_permit_at_once() {
        let cancel = CancellationToken::new();
        let mut gate_config = config(100);
        gate_config.max_concurrency = 1;
        let gate = Arc::new(Gate::new(gate_config, cancel.clone()));
        // The only permit is held by a request that never ends.
        let holder = gate.clone();
        let _hanging = tokio::spawn(async move {
            holder
                .run("eth_getLogs", OnSplit::Return, || {
                    std::future::pending::<Result<(), rpc::Error>>()
                })
                .await
        });
        settle().await;
        assert_eq!(gate.permits.available_permits(), 0);
        assert_interrupted_promptly(gate, cancel, || Ok(()), settle()).await;
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_ends_the_wait_for_the_rate_at_once() {
        let cancel = CancellationToken::new();
        let gate = Arc::new(Gate::new(config(2), cancel.clone()));
        // Two calls take the whole second's budget; the third waits for the window to move.
        for _ in 0..2 {
            gate.run("eth_chainId", OnSplit::Retry, || async { Ok(()) })
                .await
                .expect("within the rate");
        }
        assert_interrupted_promptly(gate.clone(), cancel, || Ok(()), settle()).await;
        assert_eq!(gate.stats.requests.load(Ordering::Relaxed), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_abandons_a_request_in_flight() {
        let cancel = CancellationToken::new();
        let gate = Arc::new(Gate::new(config(100), cancel.clone()));
        let running = tokio::spawn({
            let gate = gate.clone();
            async move {
                gate.run("eth_getLogs", OnSplit::Return, || {
                    std::future::pending::<Result<(), rpc::Error>>()
                })
                .await
            }
        });
        settle().await;
        cancel.cancel();
        let result = running.await.expect("no panic");
        assert!(matches!(result, Err(Error::Interrupted)), "{result:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_token_fired_before_the_call_sends_nothing() {
        let cancel = CancellationToken::new();
        cancel.cancel();
        let gate = Gate::new(config(100), cancel);
        let result = gate
            .run("eth_chainId", OnSplit::Retry, || async { Ok(()) })
            .await;
        assert!(matches!(result, Err(Error::Interrupted)), "{result:?}");
        assert_eq!(gate.stats.requests.load(Ordering::Relaxed), 0);
    }
}
