//! The providers' phases of `logslice bench --provider-rate N`, on the bench's chain with `blockTimestamp` in
//! its logs (so that requests are `eth_getLogs`, not one header per block):
//!
//! - `exact-rate`: a key limited to N calls a second, configured at N;
//! - `learned-rate`: the same key configured at 3N, its rate learned from its 429s (the target: within
//!   1.3x of `exact-rate`'s time, with few refusals);
//! - `1-provider` / `3-providers`: providers limited to N calls a second each, over one chain, one of them
//!   against all three (requests spread by what each takes).

use std::fmt::Write as _;
use std::path::Path;

use tokio_util::sync::CancellationToken;

use devnode::{DevNode, DevNodeConfig, ProviderOptions};
use logslice::pipeline::{self, Target};

use super::{load_config_with, measure, BenchArgs, Error, Phase, BACKOFF};

/// The phases, each with a fresh database, and lines that compare them.
///
/// # Errors
/// [`Error`] when a phase fails.
pub(super) async fn phases(
    dir: &Path,
    args: &BenchArgs,
    node_config: &DevNodeConfig,
    rate: u32,
    phase_no: &mut usize,
) -> Result<(Vec<Phase>, String), Error> {
    let mut config = node_config.clone();
    config.chain.log_timestamps = true;
    config.faults.max_rps = Some(rate);
    let blocks = config.chain.blocks + 1;
    let limited = start(config.clone()).await?;
    let url = limited.http_url();
    let mut phases = Vec::new();
    for (name, configured) in [("exact-rate", rate), ("learned-rate", 3 * rate)] {
        let node = format!(
            "[node]\nurl = \"{url}\"\nrequests_per_second = {configured}\nmax_concurrency = {}\n{BACKOFF}",
            args.max_concurrency
        );
        phases.push(sync_phase(dir, &node, args, name, phase_no, blocks).await?);
    }
    limited.shutdown().await;
    config.faults.max_rps = None;
    let shared = start(config).await?;
    let mut providers = Vec::new();
    for _ in 0..3 {
        let options = ProviderOptions {
            max_rps: Some(rate),
            ..ProviderOptions::default()
        };
        providers.push(
            shared
                .add_provider(options)
                .await
                .map_err(|e| Error::Setup(format!("devnode provider: {e}")))?,
        );
    }
    for (name, n) in [("1-provider", 1), ("3-providers", 3)] {
        let mut node = format!(
            "[node]\nrequests_per_second = {rate}\nmax_concurrency = {}\n{BACKOFF}",
            args.max_concurrency
        );
        for (index, provider) in providers.iter().take(n).enumerate() {
            let _ = write!(
                node,
                "\n[[node.providers]]\nname = \"p{index}\"\nurl = \"{}\"\n",
                provider.http_url()
            );
        }
        phases.push(sync_phase(dir, &node, args, name, phase_no, blocks).await?);
    }
    for provider in providers {
        provider.shutdown().await;
    }
    shared.shutdown().await;
    let lines = compare(&phases, rate);
    Ok((phases, lines))
}

/// One phase: `sync --to latest` with `node` as the config's `[node]`, into a fresh database.
async fn sync_phase(
    dir: &Path,
    node: &str,
    args: &BenchArgs,
    name: &'static str,
    phase_no: &mut usize,
    blocks: u64,
) -> Result<Phase, Error> {
    *phase_no += 1;
    let config = load_config_with(dir, node, args, name, *phase_no)?;
    measure(
        name,
        blocks,
        pipeline::sync(&config, Target::Latest, CancellationToken::new()),
    )
    .await
}

async fn start(config: DevNodeConfig) -> Result<DevNode, Error> {
    DevNode::start(config)
        .await
        .map_err(|e| Error::Setup(format!("devnode: {e}")))
}

/// The learned rate against the exact one, three providers against one, and each provider's share.
fn compare(phases: &[Phase], rate: u32) -> String {
    let mut out = String::new();
    let find = |name: &str| phases.iter().find(|p| p.name == name);
    let secs = |p: &Phase| p.report.elapsed.as_secs_f64().max(1e-9);
    if let (Some(exact), Some(learned)) = (find("exact-rate"), find("learned-rate")) {
        let _ = writeln!(
            out,
            "learned-rate (configured {}/s, the key takes {rate}/s) / exact-rate = {:.2}x the time; {} of {} requests refused for the rate ({:.1}%)",
            3 * rate,
            secs(learned) / secs(exact),
            learned.report.rate_limited,
            learned.report.requests,
            learned.report.rate_limited as f64 * 100.0 / learned.report.requests.max(1) as f64
        );
    }
    if let (Some(one), Some(three)) = (find("1-provider"), find("3-providers")) {
        let shares: Vec<String> = three
            .report
            .providers
            .iter()
            .map(|p| format!("{} {}", p.name, p.requests))
            .collect();
        let _ = writeln!(
            out,
            "3-providers / 1-provider = {:.2}x the logs/s (each limited to {rate}/s); requests per provider: {}",
            three.logs_per_s() / one.logs_per_s(),
            shares.join(", ")
        );
    }
    out
}
