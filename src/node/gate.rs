//! The gate every request passes: it picks a provider by what each can take now (rate, free concurrency,
//! breaker, head), waits for that provider's permit and rate, sends, and learns from the answer; transient
//! failures are retried with exponential backoff and full jitter (a provider's `Retry-After` wins when it
//! is longer), on another provider when there is one. Every wait (permit, rate, backoff) and the request
//! itself end with [`Error::Interrupted`] as soon as the job's cancellation token fires.
//!
//! It does not decide what an answer means (that is [`rpc::Error::class`]) and never splits a request: a
//! batch larger than any provider admits now comes back as [`Error::Oversized`] ([`super::Batches`] sends
//! it in parts).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::primitives::BlockNumber;
use crate::rpc::{self, Class, Client};

use super::attempts::Attempts;
use super::breaker::Verdict;
use super::{Error, Provider};

/// What to do when the provider says "ask for less".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSplit {
    /// Hand the answer back: the caller narrows the request (`eth_getLogs`).
    Return,
    /// Treat it as transient (a call that has no range to narrow).
    Retry,
}

/// One request as the gate sees it.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// The JSON-RPC method.
    pub method: &'static str,
    /// Calls it carries (a batch: more than one).
    pub calls: usize,
    /// What a "narrower request" answer means.
    pub on_split: OnSplit,
    /// The highest block it needs: a provider whose head is below is not asked.
    pub up_to: Option<BlockNumber>,
}

impl Call {
    /// One call of `method`, retried on a split answer, needing no particular block.
    pub fn new(method: &'static str) -> Self {
        Self {
            method,
            calls: 1,
            on_split: OnSplit::Retry,
            up_to: None,
        }
    }

    /// With `on_split`.
    #[must_use]
    pub fn on_split(self, on_split: OnSplit) -> Self {
        Self { on_split, ..self }
    }

    /// A batch of `calls`.
    #[must_use]
    pub fn calls(self, calls: usize) -> Self {
        Self { calls, ..self }
    }

    /// Needing blocks up to `block`.
    #[must_use]
    pub fn up_to(self, block: BlockNumber) -> Self {
        Self {
            up_to: Some(block),
            ..self
        }
    }
}

/// Counters of what the gate saw over every provider, for `bench` and `status`.
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
    /// Of them, refusals for the rate.
    pub rate_limited: AtomicU64,
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

/// Where the next attempt goes.
enum Pick {
    /// To this provider, under this verdict of its breaker.
    Send(usize, Verdict),
    /// Every provider left is set aside: wait, then probe this one.
    Wait(usize, Instant),
    /// Every provider spent its retries for this request.
    Spent,
}

/// The providers of one chain, and the retry policy in front of them, stopped by one cancellation token.
pub struct Gate {
    providers: Vec<Provider>,
    /// The job's token: fired, every wait and request in the gate ends with [`Error::Interrupted`].
    cancel: CancellationToken,
    /// What the gate saw.
    pub stats: GateStats,
}

impl Gate {
    /// A gate in front of `providers` (at least one), interrupted by `cancel`.
    pub fn new(providers: Vec<Provider>, cancel: CancellationToken) -> Self {
        assert!(!providers.is_empty(), "a gate needs a provider");
        Self {
            providers,
            cancel,
            stats: GateStats::default(),
        }
    }

    /// The providers, in config order.
    pub fn providers(&self) -> &[Provider] {
        &self.providers
    }

    /// Requests in flight at once over every provider.
    pub fn max_concurrency(&self) -> usize {
        self.providers
            .iter()
            .map(|p| p.limits.max_concurrency.max(1))
            .sum()
    }

    /// The most calls of `method` one request may carry now: what the provider admitting most admits
    /// (a batch costs one unit of the rate per call, or that call's credits).
    pub fn max_calls_per_request(&self, method: &str) -> usize {
        self.providers
            .iter()
            .map(|p| p.admits(method))
            .max()
            .unwrap_or(1)
    }

    /// Runs `request` (one JSON-RPC call) until it succeeds, cannot succeed, or the retries are spent.
    ///
    /// # Errors
    /// As [`Gate::send`].
    pub async fn run<T, F, Fut>(
        &self,
        method: &'static str,
        on_split: OnSplit,
        request: F,
    ) -> Result<T, Error>
    where
        F: FnMut(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        self.send(Call::new(method).on_split(on_split), request)
            .await
    }

    /// Sends `call` through `request` (given the chosen provider's client) until it succeeds, cannot
    /// succeed, or every provider has spent its retries on it.
    ///
    /// # Errors
    /// [`Error::Split`] (with [`OnSplit::Return`]), [`Error::Rejected`] (every provider rejected its key),
    /// [`Error::Fatal`], [`Error::UnknownBlock`], [`Error::Exhausted`] carrying the last error,
    /// [`Error::Oversized`], or [`Error::Interrupted`] once the token fires.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped, it sends nothing more; a request in flight is abandoned.
    pub async fn send<T, F, Fut>(&self, call: Call, request: F) -> Result<T, Error>
    where
        F: FnMut(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        self.send_with(call, None, false, request).await
    }

    /// [`Gate::send`] to the provider of index `index` alone, once (`once`) or within its retries.
    ///
    /// # Errors
    /// As [`Gate::send`].
    pub async fn send_to<T, F, Fut>(
        &self,
        call: Call,
        index: usize,
        once: bool,
        request: F,
    ) -> Result<T, Error>
    where
        F: FnMut(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        self.send_with(call, Some(index), once, request).await
    }

    async fn send_with<T, F, Fut>(
        &self,
        call: Call,
        only: Option<usize>,
        once: bool,
        mut request: F,
    ) -> Result<T, Error>
    where
        F: FnMut(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        let mut attempt = Attempts::new(self, only, once);
        loop {
            // Again at every attempt: a refusal for the rate lowers what a batch may carry.
            let admits = match only {
                Some(index) => self.providers[index].admits(call.method),
                None => self.max_calls_per_request(call.method),
            };
            if call.calls > admits {
                return Err(Error::Oversized {
                    calls: call.calls,
                    admits,
                });
            }
            let (index, verdict) = match self.pick(&call, &attempt) {
                Pick::Send(index, verdict) => (index, verdict),
                Pick::Wait(index, until) => {
                    self.sleep_until(until).await?;
                    (index, Verdict::Probe)
                }
                Pick::Spent => return Err(attempt.exhausted(self, call.method)),
            };
            let provider = &self.providers[index];
            provider.breaker().sending(verdict, Instant::now());
            let (sent, result) = self.attempt(provider, &call, &mut request).await?;
            let err = match result {
                Ok(value) => {
                    provider.breaker().answered();
                    let cost = provider.cost(call.method, call.calls);
                    provider.rate.succeeded(cost);
                    return Ok(value);
                }
                Err(err) => err,
            };
            self.failed(index, &call, sent, err, &mut attempt).await?;
        }
    }

    /// One attempt at `provider`: its permit, its rate, the request; cancelled by the token.
    async fn attempt<T, F, Fut>(
        &self,
        provider: &Provider,
        call: &Call,
        request: &mut F,
    ) -> Result<(Instant, Result<T, rpc::Error>), Error>
    where
        F: FnMut(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        let cost = provider.cost(call.method, call.calls);
        let sending = async {
            let _permit = provider
                .permits
                .acquire()
                .await
                .expect("the semaphore is never closed");
            let sent = provider.rate.admit(cost).await;
            self.count_sent(provider, call);
            provider.in_flight.fetch_add(1, Relaxed);
            let result = request(provider.client.clone()).await;
            provider.in_flight.fetch_sub(1, Relaxed);
            (sent, result)
        };
        // One-shot select (no loop): the permit and rate waits need not be cancel safe, they are dropped.
        let (sent, result) = tokio::select! {
            biased;
            () = self.cancel.cancelled() => return Err(Error::Interrupted),
            outcome = sending => outcome,
        };
        crate::observe::record_request(
            &provider.name,
            call.method,
            result.as_ref().err().map(rpc::Error::class).as_ref(),
        );
        Ok((sent, result))
    }

    fn count_sent(&self, provider: &Provider, call: &Call) {
        self.stats.requests.fetch_add(1, Relaxed);
        provider.stats.requests.fetch_add(1, Relaxed);
        match call.method {
            "eth_getLogs" => {
                self.stats.log_requests.fetch_add(1, Relaxed);
            }
            "eth_getBlockByNumber" => {
                let calls = u64::try_from(call.calls.max(1)).unwrap_or(u64::MAX);
                self.stats.header_calls.fetch_add(calls, Relaxed);
            }
            _ => {}
        }
    }

    /// Learns from the failed attempt at provider `index` and returns when the next attempt may go, or the
    /// error that ends the request.
    async fn failed(
        &self,
        index: usize,
        call: &Call,
        sent: Instant,
        err: rpc::Error,
        attempt: &mut Attempts,
    ) -> Result<(), Error> {
        let provider = &self.providers[index];
        let name = || provider.name.clone();
        let method = call.method;
        self.stats.errors.fetch_add(1, Relaxed);
        provider.stats.errors.fetch_add(1, Relaxed);
        let class = err.class();
        let hint = match class {
            Class::Split { .. } if call.on_split == OnSplit::Return => {
                provider.breaker().answered();
                self.stats.splits.fetch_add(1, Relaxed);
                crate::observe::record_split();
                return Err(Error::Split {
                    provider: name(),
                    source: err,
                });
            }
            Class::Retry { after } if err.is_rate_limit() => {
                provider.breaker().answered();
                if self.rate_refused(provider, call, sent, after, &err) && attempt.free_refusal() {
                    attempt.last = Some((index, err));
                    return Ok(());
                }
                after
            }
            Class::Split { .. } => {
                provider.breaker().answered();
                None
            }
            Class::Retry { after } => {
                self.unwell(provider, &err);
                after
            }
            Class::Unreachable => {
                self.unwell(provider, &err);
                None
            }
            Class::Rejected if self.providers.len() > 1 => {
                tracing::warn!(provider = %provider.name, method, cause = %err, "the provider rejected its API key; asking the others");
                if provider.breaker().set_aside(Instant::now()) {
                    provider.stats.set_aside.fetch_add(1, Relaxed);
                }
                attempt.reject(index);
                attempt.last = Some((index, err));
                return if attempt.all_rejected() {
                    Err(attempt.rejected(self, method))
                } else {
                    Ok(())
                };
            }
            Class::Rejected => {
                return Err(Error::Rejected {
                    provider: name(),
                    method,
                    source: err,
                })
            }
            Class::Fatal => {
                return Err(Error::Fatal {
                    provider: name(),
                    method,
                    source: err,
                })
            }
            Class::UnknownBlock => {
                return Err(Error::UnknownBlock {
                    provider: name(),
                    method,
                    source: err,
                })
            }
        };
        attempt.tried(index);
        let delay = attempt.delay(hint);
        tracing::debug!(provider = %provider.name, method, attempt = attempt.total, cause = %err, delay_ms = delay.as_millis() as u64, "retrying");
        attempt.last = Some((index, err));
        self.stats.retries.fetch_add(1, Relaxed);
        crate::observe::record_retry();
        // Another provider that can take it now: no backoff (this one's breaker and rate already learnt).
        if matches!(self.pick(call, attempt), Pick::Send(other, _) if other != index) {
            return Ok(());
        }
        self.sleep_until(Instant::now() + delay).await
    }

    /// A refusal for the rate at `provider`: lower its rate, honour `after`. Returns whether the refusal is
    /// explained by a rate above what the provider takes (then retrying costs no attempt).
    fn rate_refused(
        &self,
        provider: &Provider,
        call: &Call,
        sent: Instant,
        after: Option<std::time::Duration>,
        err: &rpc::Error,
    ) -> bool {
        let now = Instant::now();
        self.stats.rate_limited.fetch_add(1, Relaxed);
        provider.stats.rate_limited.fetch_add(1, Relaxed);
        if let Some(after) = after {
            provider.rate.pause_until(now + after);
        }
        let before = provider.rate.learned().per_window();
        let explained = provider.rate.refused(
            sent,
            provider.cost(call.method, call.calls),
            after.is_some(),
        );
        let learned = provider.rate.learned();
        if learned.per_window() < before {
            tracing::info!(provider = %provider.name, cause = %err, rate = learned.per_window(), ceiling = learned.ceiling(), "the provider refused for its rate: lowering it");
        }
        explained
    }

    /// A failure saying `provider` is unwell: its breaker counts it (with several providers).
    fn unwell(&self, provider: &Provider, err: &rpc::Error) {
        if self.providers.len() < 2 {
            return;
        }
        if provider.breaker().failed(Instant::now()) {
            provider.stats.set_aside.fetch_add(1, Relaxed);
            tracing::warn!(provider = %provider.name, cause = %err, "provider set aside; its requests go to the others until it answers again");
        }
    }

    /// Sleeps until `until`, or ends with [`Error::Interrupted`].
    async fn sleep_until(&self, until: Instant) -> Result<(), Error> {
        tokio::select! {
            biased;
            () = self.cancel.cancelled() => Err(Error::Interrupted),
            () = tokio::time::sleep_until(until) => Ok(()),
        }
    }

    /// Where the next attempt of `call` goes: the provider that can start it soonest (its rate window and a
    /// free permit) among those whose breaker lets it, that have the block, and have retries left for it.
    fn pick(&self, call: &Call, attempt: &Attempts) -> Pick {
        let now = Instant::now();
        let mut best: Option<(Instant, usize, usize, Verdict)> = None;
        let mut set_aside: Option<(Instant, usize)> = None;
        let mut lacking_block: Option<(u64, usize)> = None;
        let several = self.providers.len() > 1;
        // A provider whose chain id is not checked yet serves nothing while another one is.
        let any_checked = self.providers.iter().any(|p| p.chain_checked.load(Relaxed));
        for (index, provider) in self.providers.iter().enumerate() {
            if !attempt.may_use(index) {
                continue;
            }
            if several
                && any_checked
                && !provider.chain_checked.load(Relaxed)
                && attempt.only.is_none()
            {
                continue;
            }
            if let (Some(up_to), Some(head)) = (call.up_to, provider.head()) {
                if head < up_to && attempt.only.is_none() {
                    if lacking_block.is_none_or(|(best_head, _)| head > best_head) {
                        lacking_block = Some((head, index));
                    }
                    continue;
                }
            }
            let verdict = if several {
                provider.breaker().verdict(now)
            } else {
                Verdict::Send
            };
            if let Verdict::Wait(until) = verdict {
                if set_aside.is_none_or(|(soonest, _)| until < soonest) {
                    set_aside = Some((until, index));
                }
                continue;
            }
            if provider.admits(call.method) < call.calls {
                continue;
            }
            let ready = provider.ready_at(provider.cost(call.method, call.calls));
            let load =
                provider.in_flight.load(Relaxed) * 1000 / provider.limits.max_concurrency.max(1);
            if best.is_none_or(|(r, l, _, _)| (ready, load) < (r, l)) {
                best = Some((ready, load, index, verdict));
            }
        }
        match (best, set_aside, lacking_block) {
            (Some((_, _, index, verdict)), _, _) => Pick::Send(index, verdict),
            (None, Some((until, index)), _) => Pick::Wait(index, until),
            // Every provider is behind the block: the most advanced one may have it by now.
            (None, None, Some((_, index))) => Pick::Send(index, Verdict::Send),
            (None, None, None) => Pick::Spent,
        }
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
