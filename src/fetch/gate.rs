//! The gate every request passes: a concurrency permit, the request-rate window, and the retry loop with
//! exponential backoff and full jitter (the node's `Retry-After` wins when it is longer). Every wait in it
//! (permit, rate, backoff) and the request itself end with [`Error::Interrupted`] as soon as the job's
//! cancellation token fires, so a shutdown never waits for a node that is down or rate-limiting.
//!
//! It does not decide what an answer means (that is [`rpc::Error::class`]) and never splits a request: a
//! caller with a batch of calls sizes it with [`Gate::max_calls_per_request`].

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use backon::BackoffBuilder;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::rpc::{self, Class};

use super::Error;

/// How much longer than a second the rate window is. The node counts our calls when they arrive, and two
/// calls sent exactly a second apart can arrive closer together when the first one's trip took longer (a
/// new connection, a busy runtime on either side, the network). A second and a tenth keeps the node's count
/// within `requests_per_second` for any second, as long as trips vary by less than 100 ms, for 9% of the
/// peak rate: cheaper than one 429 with its `Retry-After`.
const WINDOW_MARGIN: Duration = Duration::from_millis(100);

/// Retry and rate limits of a gate (from `[node]`).
#[derive(Debug, Clone, Copy)]
pub struct GateConfig {
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Calls started per second, batch items counted one by one: never more in any window of a second
    /// (plus `WINDOW_MARGIN`).
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
    /// Requests sent (a batch is one request).
    pub requests: AtomicU64,
    /// Of them, `eth_getLogs` requests (the rest read heads and headers).
    pub log_requests: AtomicU64,
    /// `eth_getBlockByNumber` calls sent, each call of a batch counted (head, finality, headers above
    /// finality and for block timestamps).
    pub header_calls: AtomicU64,
    /// Answers that were errors of any kind.
    pub errors: AtomicU64,
    /// Retries made.
    pub retries: AtomicU64,
    /// Answers that asked for a narrower request.
    pub splits: AtomicU64,
    /// `eth_getLogs` requests sent without their addresses (`fetch::wide`).
    pub topic_only: AtomicU64,
    /// Logs of other contracts those answers carried, dropped.
    pub foreign_logs: AtomicU64,
    /// Logs an answer delivered twice (or more), kept once (`fetch::answer`).
    pub repeated_logs: AtomicU64,
    /// Blocks read from their receipts (over the cap for one address and topic0).
    pub receipt_blocks: AtomicU64,
    /// Fillings: the logs of factory children found after a range was asked for without them, fetched for
    /// it (`pipeline::discover`; each planned like a range, so one or more `eth_getLogs` requests).
    pub children_filled: AtomicU64,
}

/// Semaphore + rate window + retry policy in front of every request, stopped by one cancellation token.
pub struct Gate {
    config: GateConfig,
    permits: Semaphore,
    rate: RateWindow,
    /// The job's token: fired, every wait and request in the gate ends with [`Error::Interrupted`].
    cancel: CancellationToken,
    /// What the gate saw.
    pub stats: GateStats,
    /// What answers for long address lists have shown, for choosing how to ask for them.
    pub(super) densities: super::wide::Densities,
    /// Which receipts methods the node serves (`fetch::receipts`).
    pub(super) receipts_served: super::receipts::Served,
}

impl Gate {
    /// A gate with these limits, interrupted by `cancel`.
    pub fn new(config: GateConfig, cancel: CancellationToken) -> Self {
        let per_window = config.requests_per_second.max(1);
        Self {
            config,
            permits: Semaphore::new(config.max_concurrency.max(1)),
            rate: RateWindow::new(per_window, Duration::from_secs(1) + WINDOW_MARGIN),
            cancel,
            stats: GateStats::default(),
            densities: super::wide::Densities::default(),
            receipts_served: super::receipts::Served::default(),
        }
    }

    /// The limits.
    pub fn config(&self) -> GateConfig {
        self.config
    }

    /// The most calls one request may carry: a batch costs one unit of `requests_per_second` per call, so
    /// a larger one could never be sent within the rate.
    pub fn max_calls_per_request(&self) -> usize {
        usize::try_from(self.rate.per_window).unwrap_or(usize::MAX)
    }

    /// Runs `call` (one JSON-RPC call) until it succeeds, cannot succeed, or the retries are spent.
    ///
    /// # Errors
    /// As [`Gate::run_calls`].
    pub async fn run<T, F, Fut>(
        &self,
        method: &'static str,
        on_split: OnSplit,
        call: F,
    ) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        self.run_calls(method, 1, on_split, call).await
    }

    /// Runs `request`, which carries `n_calls` JSON-RPC calls (a batch), until it succeeds, cannot succeed,
    /// or the retries are spent. Each attempt costs `n_calls` of the rate; `n_calls` must be at most
    /// [`Gate::max_calls_per_request`] (a larger one waits for a window with nothing else in it).
    ///
    /// # Errors
    /// [`Error::Split`] (with [`OnSplit::Return`]), [`Error::Rejected`], [`Error::Fatal`],
    /// [`Error::Exhausted`] carrying the last error, or [`Error::Interrupted`] once the token fires.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, it sends nothing more; a request in flight is abandoned.
    pub async fn run_calls<T, F, Fut>(
        &self,
        method: &'static str,
        n_calls: usize,
        on_split: OnSplit,
        mut request: F,
    ) -> Result<T, Error>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        debug_assert!(
            n_calls <= self.max_calls_per_request(),
            "a request of {n_calls} calls exceeds the rate of {} calls per second: split it",
            self.rate.per_window
        );
        let n_calls = u32::try_from(n_calls.max(1)).unwrap_or(u32::MAX);
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
                self.rate.admit(n_calls).await;
                self.stats.requests.fetch_add(1, Ordering::Relaxed);
                if method == "eth_getLogs" {
                    self.stats.log_requests.fetch_add(1, Ordering::Relaxed);
                }
                if method == "eth_getBlockByNumber" {
                    self.stats
                        .header_calls
                        .fetch_add(u64::from(n_calls), Ordering::Relaxed);
                }
                request().await
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
                Class::UnknownBlock => {
                    return Err(Error::UnknownBlock {
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

/// At most `per_window` calls start in any window of length `window`: a log of the admissions still
/// inside the window, so the bound holds for every window, not only aligned ones. (A token bucket such as
/// governor's GCRA starts full: a burst of the whole budget, then the budget again within the same second,
/// twice the rate a node counting "per second" allows.) Memory: at most `per_window` entries.
#[derive(Debug)]
struct RateWindow {
    per_window: u32,
    window: Duration,
    /// Admissions inside the window, oldest first, with their calls; and the sum of those calls.
    admitted: Mutex<(VecDeque<(Instant, u32)>, u32)>,
    /// Waiters take turns in arrival order (tokio's `Mutex` is fair), so a batch is not starved by single
    /// calls slipping in whenever one unit frees up.
    turn: tokio::sync::Mutex<()>,
}

impl RateWindow {
    fn new(per_window: u32, window: Duration) -> Self {
        Self {
            per_window,
            window,
            admitted: Mutex::new((VecDeque::new(), 0)),
            turn: tokio::sync::Mutex::new(()),
        }
    }

    /// Waits until `n_calls` more fit in the window, and counts them. More than `per_window` calls wait for
    /// an empty window (the caller should have split them).
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is counted until it returns.
    async fn admit(&self, n_calls: u32) {
        let cost = n_calls.min(self.per_window);
        let _turn = self.turn.lock().await;
        loop {
            let ready_at = {
                let mut guard = self.admitted.lock().unwrap_or_else(PoisonError::into_inner);
                let (admitted, in_window) = &mut *guard;
                let now = Instant::now();
                while let Some(&(at, calls)) = admitted.front() {
                    if at + self.window > now {
                        break;
                    }
                    admitted.pop_front();
                    *in_window -= calls;
                }
                if *in_window + cost <= self.per_window {
                    admitted.push_back((now, n_calls));
                    *in_window += n_calls;
                    return;
                }
                // The oldest admissions leave first: wait for the one after which enough room is free.
                let mut still_in = *in_window;
                let mut ready_at = now;
                for &(at, calls) in admitted.iter() {
                    still_in -= calls;
                    ready_at = at + self.window;
                    if still_in + cost <= self.per_window {
                        break;
                    }
                }
                ready_at
            };
            tokio::time::sleep_until(ready_at).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const SECOND: Duration = Duration::from_secs(1);

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

    /// The time each of `costs` (calls per request, sent one after the other) was let through, from the
    /// first, at `requests_per_second`.
    async fn admission_times(requests_per_second: u32, costs: &[usize]) -> Vec<Duration> {
        let gate = Gate::new(config(requests_per_second), CancellationToken::new());
        let start = Instant::now();
        let mut times = Vec::new();
        for &n_calls in costs {
            gate.run_calls("eth_getBlockByNumber", n_calls, OnSplit::Retry, || async {
                Ok(())
            })
            .await
            .expect("no error");
            times.push(Instant::now() - start);
        }
        times
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_of_n_calls_costs_n_of_the_rate() {
        let window = SECOND + WINDOW_MARGIN;
        // 5 per second: a batch of 5 takes the whole window, so the next single call waits for it to pass.
        assert_eq!(admission_times(5, &[5, 1]).await, [Duration::ZERO, window]);
        // 3 + 2 fit together; the third batch waits for the first to leave the window, then the next
        // single call waits for the second.
        assert_eq!(
            admission_times(5, &[3, 2, 3, 2]).await,
            [Duration::ZERO, Duration::ZERO, window, window]
        );
        // Single calls: five at once, then each as the oldest leaves.
        assert_eq!(
            admission_times(5, &[1, 1, 1, 1, 1, 1]).await,
            [Duration::ZERO; 5]
                .into_iter()
                .chain([window])
                .collect::<Vec<_>>()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn no_window_of_a_second_ever_holds_more_calls_than_the_rate() {
        let gate = Arc::new(Gate::new(config(7), CancellationToken::new()));
        let sent: Arc<Mutex<Vec<(Instant, usize)>>> = Arc::default();
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..12usize {
            let (gate, sent) = (gate.clone(), sent.clone());
            tasks.spawn(async move {
                for round in 0..6 {
                    let n_calls = 1 + (task * 3 + round) % 7;
                    gate.run_calls("eth_getBlockByNumber", n_calls, OnSplit::Retry, || {
                        sent.lock().unwrap().push((Instant::now(), n_calls));
                        async { Ok(()) }
                    })
                    .await
                    .expect("no error");
                }
            });
        }
        while tasks.join_next().await.is_some() {}
        let sent = sent.lock().unwrap();
        for &(from, _) in sent.iter() {
            let in_window: usize = sent
                .iter()
                .filter(|(at, _)| *at >= from && *at < from + SECOND + WINDOW_MARGIN)
                .map(|(_, n)| n)
                .sum();
            assert!(
                in_window <= 7,
                "{in_window} calls in the window from {from:?}"
            );
        }
        assert_eq!(sent.len(), 72);
    }
}
