//! Measuring how fast the devnode serves `eth_getLogs` results, for `docs/BENCHMARKS.md` and `logslice bench`.
//!
//! Two figures: the in-process rate (scan, generate, encode and serialise, no sockets) and the end-to-end rate
//! over HTTP from one client. Not a test: nothing here asserts a timing.

use std::time::{Duration, Instant};

use serde_json::json;

use super::chain::Chain;
use super::rpc::Service;
use super::stats::Stats;
use super::{chain_params, DevNode, DevNodeConfig};

/// What a measurement found.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeRate {
    /// Logs returned.
    pub n_logs: u64,
    /// Response bytes produced.
    pub n_bytes: u64,
    /// Requests made.
    pub n_requests: u64,
    /// Wall time taken.
    pub elapsed: Duration,
}

impl ServeRate {
    /// Logs per second.
    pub fn logs_per_sec(&self) -> f64 {
        self.n_logs as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn get_logs_body(from: u64, to: u64) -> Vec<u8> {
    let request = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getLogs",
        "params": [{"fromBlock": format!("{from:#x}"), "toBlock": format!("{to:#x}")}]});
    request.to_string().into_bytes()
}

/// The ranges of `step` blocks covering `0..=head`.
fn ranges(head: u64, step: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..=head)
        .step_by(step.max(1) as usize)
        .map(move |from| (from, (from + step - 1).min(head)))
}

/// Serves `eth_getLogs` over the whole chain of `cfg` in ranges of `step` blocks, in this thread, without
/// sockets; ranges answered with an error (over the result cap) are counted but return no logs.
pub fn measure_in_process(cfg: &DevNodeConfig, step: u64) -> ServeRate {
    let service = Service {
        cfg: cfg.clone(),
        chain: std::sync::Arc::new(Chain::new(chain_params(cfg))),
        stats: std::sync::Arc::new(Stats::default()),
    };
    let started = Instant::now();
    let (mut n_bytes, mut n_requests) = (0u64, 0u64);
    for (seq, (from, to)) in ranges(cfg.chain.blocks, step).enumerate() {
        let answer = service.handle_body(&get_logs_body(from, to), seq as u64, 0);
        n_bytes += answer.len() as u64;
        n_requests += 1;
    }
    ServeRate {
        n_logs: service.stats.snapshot().logs_served,
        n_bytes,
        n_requests,
        elapsed: started.elapsed(),
    }
}

/// Starts a devnode for `cfg` and fetches `eth_getLogs` over the whole chain in ranges of `step` blocks over
/// HTTP, one request at a time; the client reads the bodies without parsing them.
///
/// # Errors
/// When the node cannot start or a request fails.
pub async fn measure_serve_rate(cfg: DevNodeConfig, step: u64) -> Result<ServeRate, String> {
    let node = DevNode::start(cfg.clone())
        .await
        .map_err(|err| format!("devnode did not start: {err}"))?;
    let client = reqwest::Client::new();
    let url = node.http_url();
    let started = Instant::now();
    let (mut n_bytes, mut n_requests) = (0u64, 0u64);
    for (from, to) in ranges(cfg.chain.blocks, step) {
        let response = client
            .post(&url)
            .header("content-type", "application/json")
            .body(get_logs_body(from, to))
            .send()
            .await
            .map_err(|err| format!("request failed: {}", err.without_url()))?;
        let body = response
            .bytes()
            .await
            .map_err(|err| format!("body failed: {}", err.without_url()))?;
        n_bytes += body.len() as u64;
        n_requests += 1;
    }
    let elapsed = started.elapsed();
    let n_logs = node.stats().logs_served;
    node.shutdown().await;
    Ok(ServeRate {
        n_logs,
        n_bytes,
        n_requests,
        elapsed,
    })
}
