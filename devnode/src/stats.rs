//! Counters of what the devnode served: per method and outcome, per HTTP status, drops, logs, and the most
//! calls that arrived within any one second.
//!
//! Tests wait on these instead of sleeping ([`super::DevNode::wait_for_stats`] wakes on every update), the
//! CLI prints them on exit and `GET /stats` serves them as JSON. Method names are bucketed to the known ones
//! so a client cannot grow the map without bound.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;
use tokio::time::Instant;

use super::credits::OverLimit;

/// The window of [`StatsSnapshot::max_calls_per_second`].
const SECOND: Duration = Duration::from_secs(1);

/// Methods counted under their own name; any other is counted as `"other"`.
const KNOWN_METHODS: &[&str] = &[
    "eth_chainId",
    "eth_blockNumber",
    "eth_getBlockByNumber",
    "eth_getBlockByHash",
    "eth_getLogs",
    "eth_getTransactionByHash",
    "eth_getTransactionByBlockHashAndIndex",
    "eth_getTransactionByBlockNumberAndIndex",
    "eth_getTransactionReceipt",
    "eth_getBlockReceipts",
    "net_version",
    "web3_clientVersion",
];

/// Outcomes of one method.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MethodStats {
    /// Calls answered with a result.
    pub ok: u64,
    /// Calls answered with an error, by JSON-RPC error code.
    pub errors: BTreeMap<i64, u64>,
}

/// A copy of the counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    /// HTTP requests received (including refused ones).
    pub http_requests: u64,
    /// WebSocket messages received.
    pub ws_messages: u64,
    /// HTTP responses by status (200, 401, 404, 405, 415, 429, 500, 502, 503).
    pub http_status: BTreeMap<u16, u64>,
    /// Requests answered with a 429 or a WebSocket rate-limit error because of `max_rps`, `max_cps`, the 429
    /// fault or `Down::Status(429)`.
    pub rate_limited: u64,
    /// Of those, the requests over `max_rps` (calls per second, each batch item counted).
    pub over_max_rps: u64,
    /// Of those, the requests over `max_cps` (credits per second) though within `max_rps`.
    pub over_max_cps: u64,
    /// Responses cut off mid-body (HTTP) or sockets closed instead of answering (WebSocket).
    pub dropped: u64,
    /// JSON-RPC calls by method (`"other"` for unknown names, `"invalid"` for malformed calls).
    pub methods: BTreeMap<String, MethodStats>,
    /// Logs returned by successful `eth_getLogs` calls (including `removed: true` ones).
    pub logs_served: u64,
    /// The lowest `fromBlock` (or block, for a `blockHash` filter) of any `eth_getLogs` answered with logs
    /// or none: tests check that a resumed job asks nothing at or below its checkpoint.
    pub lowest_log_block: Option<u64>,
    /// The most JSON-RPC calls that arrived within any window of one second (each call of a batch
    /// counted, rate-limited ones too): what a provider's per-second limit would have seen.
    pub max_calls_per_second: u64,
    /// The most calls in one batch request.
    pub largest_batch: u64,
    /// Requests whose connection was dropped because the node was down (`Down::Refuse`).
    pub refused_while_down: u64,
    /// Requests left unanswered because the node was down (`Down::Hang`).
    pub hung_while_down: u64,
    /// Requests answered with an error because the node was failing (`Down::Status`, `Down::RpcErrors`).
    pub failed_while_down: u64,
}

impl StatsSnapshot {
    /// Calls of `method`, whatever their outcome.
    pub fn calls(&self, method: &str) -> u64 {
        self.methods
            .get(method)
            .map_or(0, |m| m.ok + m.errors.values().sum::<u64>())
    }

    /// Successful calls of `method`.
    pub fn ok(&self, method: &str) -> u64 {
        self.methods.get(method).map_or(0, |m| m.ok)
    }

    /// Errors with `code`, over every method.
    pub fn errors_with(&self, code: i64) -> u64 {
        self.methods
            .values()
            .filter_map(|m| m.errors.get(&code))
            .sum()
    }

    /// HTTP responses with `status`.
    pub fn status(&self, status: u16) -> u64 {
        self.http_status.get(&status).copied().unwrap_or(0)
    }

    /// A multi-line human summary, for the CLI's exit.
    pub fn summary(&self) -> String {
        let mut lines = vec![format!(
            "devnode served {} HTTP requests, {} WebSocket messages, {} logs; {} rate-limited ({} over max_rps, \
             {} over max_cps), {} dropped; at most {} calls in one second",
            self.http_requests,
            self.ws_messages,
            self.logs_served,
            self.rate_limited,
            self.over_max_rps,
            self.over_max_cps,
            self.dropped,
            self.max_calls_per_second
        )];
        let statuses: Vec<String> = self
            .http_status
            .iter()
            .map(|(s, n)| format!("{s}: {n}"))
            .collect();
        if !statuses.is_empty() {
            lines.push(format!("  http status  {}", statuses.join(", ")));
        }
        for (method, m) in &self.methods {
            let errors: Vec<String> = m
                .errors
                .iter()
                .map(|(code, n)| format!("{code}: {n}"))
                .collect();
            lines.push(format!(
                "  {method:<22} ok {:>8}  errors {}",
                m.ok,
                if errors.is_empty() {
                    "none".to_owned()
                } else {
                    errors.join(", ")
                }
            ));
        }
        lines.join("\n")
    }
}

/// The JSON-RPC calls of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Calls {
    /// One call (or a body that is no batch).
    Single,
    /// A batch of this many calls.
    Batch(u64),
}

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    counters: Mutex<StatsSnapshot>,
    /// Calls that arrived within the last second, oldest first, and their sum: at most one entry per
    /// request of the last second.
    last_second: Mutex<(VecDeque<(Instant, u64)>, u64)>,
    /// Woken on every update.
    changed: Notify,
}

impl Stats {
    fn with(&self, update: impl FnOnce(&mut StatsSnapshot)) {
        // Every update is a few integer increments; a panic mid-update leaves counters merely stale.
        update(&mut self.counters.lock().unwrap_or_else(PoisonError::into_inner));
        self.changed.notify_waiters();
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        self.counters
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until `done` holds for the counters; returns them.
    pub(crate) async fn wait_for(&self, done: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
        loop {
            // Registered before looking, so an update between the look and the wait is not missed.
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let snapshot = self.snapshot();
            if done(&snapshot) {
                return snapshot;
            }
            changed.await;
        }
    }

    /// Records a request arriving now.
    pub(crate) fn arrived(&self, calls: Calls) {
        let n_calls = match calls {
            Calls::Single => 1,
            Calls::Batch(n) => n,
        };
        let now = Instant::now();
        let in_last_second = {
            let mut guard = self
                .last_second
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (arrived, sum) = &mut *guard;
            // A call that arrived exactly a second ago is outside the window (which holds [now - 1 s, now]
            // minus its start), as one that arrives exactly a second after another is in the next one.
            while let Some(&(at, n)) = arrived.front() {
                if at + SECOND > now {
                    break;
                }
                arrived.pop_front();
                *sum -= n;
            }
            arrived.push_back((now, n_calls));
            *sum += n_calls;
            *sum
        };
        self.with(|s| {
            s.max_calls_per_second = s.max_calls_per_second.max(in_last_second);
            if let Calls::Batch(n) = calls {
                s.largest_batch = s.largest_batch.max(n);
            }
        });
    }

    pub(crate) fn refused_while_down(&self) {
        self.with(|s| s.refused_while_down += 1);
    }

    pub(crate) fn failed_while_down(&self) {
        self.with(|s| s.failed_while_down += 1);
    }

    pub(crate) fn hung_while_down(&self) {
        self.with(|s| s.hung_while_down += 1);
    }

    pub(crate) fn http_request(&self) {
        self.with(|s| s.http_requests += 1);
    }

    pub(crate) fn ws_message(&self) {
        self.with(|s| s.ws_messages += 1);
    }

    pub(crate) fn status(&self, status: u16) {
        self.with(|s| *s.http_status.entry(status).or_default() += 1);
    }

    pub(crate) fn rate_limited(&self) {
        self.with(|s| s.rate_limited += 1);
    }

    /// Records a request refused by `max_rps` or `max_cps` (the 429 itself is counted by its answer).
    pub(crate) fn over_limit(&self, over: OverLimit) {
        self.with(|s| match over {
            OverLimit::Calls => s.over_max_rps += 1,
            OverLimit::Credits => s.over_max_cps += 1,
        });
    }

    pub(crate) fn dropped(&self) {
        self.with(|s| s.dropped += 1);
    }

    /// Records the first block of an answered `eth_getLogs`.
    pub(crate) fn logs_from(&self, block: u64) {
        self.with(|s| {
            s.lowest_log_block = Some(s.lowest_log_block.map_or(block, |b| b.min(block)))
        });
    }

    /// Records one call: `Ok(n_logs)` or `Err(code)`.
    pub(crate) fn call(&self, method: Option<&str>, outcome: Result<u64, i64>) {
        let bucket = match method {
            None => "invalid",
            Some(name) => KNOWN_METHODS
                .iter()
                .copied()
                .find(|known| *known == name)
                .unwrap_or("other"),
        };
        self.with(|s| {
            let entry = s.methods.entry(bucket.to_owned()).or_default();
            match outcome {
                Ok(n_logs) => {
                    entry.ok += 1;
                    s.logs_served += n_logs;
                }
                Err(code) => *entry.errors.entry(code).or_default() += 1,
            }
        });
    }
}

impl super::DevNode {
    /// Waits until `done` holds for the counters of what was served (woken by every update, no polling);
    /// returns them. Wrap it in a timeout as a failure guard.
    pub async fn wait_for_stats(&self, done: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
        self.shared.service.stats.wait_for(done).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_most_calls_in_any_second_counts_batch_items_and_every_window() {
        let stats = Stats::default();
        let ms = |n| tokio::time::advance(Duration::from_millis(n));
        stats.arrived(Calls::Batch(5));
        ms(600).await;
        stats.arrived(Calls::Single);
        stats.arrived(Calls::Batch(3));
        assert_eq!(stats.snapshot().max_calls_per_second, 9);
        // At 1.0 s the first batch leaves the window; at 1.5 s the rest still count.
        ms(400).await;
        stats.arrived(Calls::Batch(2));
        assert_eq!(stats.snapshot().max_calls_per_second, 9);
        ms(500).await;
        stats.arrived(Calls::Batch(4));
        let snapshot = stats.snapshot();
        assert_eq!(
            snapshot.max_calls_per_second, 10,
            "4 + 2 + 3 + 1 since 0.6 s"
        );
        assert_eq!(snapshot.largest_batch, 5);
    }
}
