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
        receipts_reorged: Default::default(),
        reorg_after_header: Default::default(),
    };
    let started = Instant::now();
    let (mut n_bytes, mut n_requests) = (0u64, 0u64);
    for (seq, (from, to)) in ranges(cfg.chain.blocks, step).enumerate() {
        let lag = super::view::Lag {
            behind: cfg.faults.lag_blocks,
            backend: 0,
        };
        let answer = service.handle_body(&get_logs_body(from, to), seq as u64, lag);
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
    // reqwest is built with rustls and no default crypto provider: without one installed it panics.
    let _ = rustls::crypto::ring::default_provider().install_default();
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

/// Serialisation alone, two ways, over the canonical logs of `from..=to`: the hand-rolled writer the devnode
/// uses, and `serde_json` over a `#[derive(Serialize)]` struct of alloy types (hex quantities as strings).
/// Returns `(hand_rolled, serde)`; both produce the same JSON up to field order.
pub fn measure_log_serialisation(
    cfg: &DevNodeConfig,
    from: u64,
    to: u64,
) -> (ServeRate, ServeRate) {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct SerdeLog<'a> {
        address: alloy_primitives::Address,
        topics: &'a [alloy_primitives::B256],
        data: alloy_primitives::Bytes,
        block_number: String,
        transaction_hash: alloy_primitives::B256,
        transaction_index: String,
        block_hash: alloy_primitives::B256,
        log_index: String,
        removed: bool,
    }
    let chain = Chain::new(chain_params(cfg));
    let logs = {
        let state = chain.read();
        chain.canonical_logs(&state, from, to, state.head)
    };
    let n_logs = logs.len() as u64;

    let started = Instant::now();
    let mut out = Vec::with_capacity(logs.len() * 700);
    out.push(b'[');
    for (log_idx, log) in logs.iter().enumerate() {
        if log_idx > 0 {
            out.push(b',');
        }
        super::json::log(&mut out, log, false, None);
    }
    out.push(b']');
    let hand_rolled = ServeRate {
        n_logs,
        n_bytes: out.len() as u64,
        n_requests: 1,
        elapsed: started.elapsed(),
    };

    let started = Instant::now();
    let serde_logs: Vec<SerdeLog<'_>> = logs
        .iter()
        .map(|log| SerdeLog {
            address: log.address,
            topics: &log.topics,
            data: alloy_primitives::Bytes::copy_from_slice(&log.data),
            block_number: format!("{:#x}", log.block_number),
            transaction_hash: log.tx_hash,
            transaction_index: format!("{:#x}", log.tx_index),
            block_hash: log.block_hash,
            log_index: format!("{:#x}", log.log_index),
            removed: false,
        })
        .collect();
    let n_bytes = serde_json::to_vec(&serde_logs).map_or(0, |bytes| bytes.len() as u64);
    let serde = ServeRate {
        n_logs,
        n_bytes,
        n_requests: 1,
        elapsed: started.elapsed(),
    };
    (hand_rolled, serde)
}
