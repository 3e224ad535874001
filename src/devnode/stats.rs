//! Counters of what the devnode served: per method and outcome, per HTTP status, drops, logs.
//!
//! Tests wait on these instead of sleeping, the CLI prints them on exit and `GET /stats` serves them as JSON.
//! Method names are bucketed to the known ones so a client cannot grow the map without bound.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use serde::Serialize;

/// Methods counted under their own name; any other is counted as `"other"`.
const KNOWN_METHODS: &[&str] = &[
    "eth_chainId",
    "eth_blockNumber",
    "eth_getBlockByNumber",
    "eth_getBlockByHash",
    "eth_getLogs",
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
    /// Requests answered with a 429 or a WebSocket rate-limit error because of `max_rps` or the 429 fault.
    pub rate_limited: u64,
    /// Responses cut off mid-body (HTTP) or sockets closed instead of answering (WebSocket).
    pub dropped: u64,
    /// JSON-RPC calls by method (`"other"` for unknown names, `"invalid"` for malformed calls).
    pub methods: BTreeMap<String, MethodStats>,
    /// Logs returned by successful `eth_getLogs` calls (including `removed: true` ones).
    pub logs_served: u64,
    /// The lowest `fromBlock` (or block, for a `blockHash` filter) of any `eth_getLogs` answered with logs
    /// or none: tests check that a resumed job asks nothing at or below its checkpoint.
    pub lowest_log_block: Option<u64>,
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
            "devnode served {} HTTP requests, {} WebSocket messages, {} logs; {} rate-limited, {} dropped",
            self.http_requests, self.ws_messages, self.logs_served, self.rate_limited, self.dropped
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

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Stats(Mutex<StatsSnapshot>);

impl Stats {
    fn with(&self, update: impl FnOnce(&mut StatsSnapshot)) {
        // Every update is a few integer increments; a panic mid-update leaves counters merely stale.
        update(&mut self.0.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
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
