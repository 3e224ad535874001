//! The gate every request passes: a concurrency permit, the request-rate limiter, and the retry loop with
//! exponential backoff and full jitter (the node's `Retry-After` wins when it is longer).

use std::future::Future;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use backon::BackoffBuilder;
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tokio::sync::Semaphore;

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

/// Semaphore + rate limiter + retry policy in front of every request.
pub struct Gate {
    config: GateConfig,
    permits: Semaphore,
    limiter: DefaultDirectRateLimiter,
    /// What the gate saw.
    pub stats: GateStats,
}

impl Gate {
    /// A gate with these limits.
    pub fn new(config: GateConfig) -> Self {
        let rate = NonZeroU32::new(config.requests_per_second.max(1)).expect("max(1) is non-zero");
        Self {
            config,
            permits: Semaphore::new(config.max_concurrency.max(1)),
            limiter: RateLimiter::direct(Quota::per_second(rate)),
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
    /// [`Error::Split`] (with [`OnSplit::Return`]), [`Error::Rejected`], [`Error::Fatal`], or
    /// [`Error::Exhausted`] carrying the last error.
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
            let result = {
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
            tokio::time::sleep(delay).await;
        }
        unreachable!("the last attempt returns")
    }
}
