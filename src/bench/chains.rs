//! The two-chain phases of `logslice bench --chains`: the bench's chain and a second one of another seed and
//! density (chain ids 1337 and 1338), each synced alone into a fresh database (`chain-a-alone`,
//! `chain-b-alone`), then both from one config into one database (`two-chains`). The line that compares them
//! says how the logs/s of both together stand against each alone and against their sum.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use devnode::{contracts, DevNode, DevNodeConfig};
use logslice::config;
use logslice::observe::Observer;
use logslice::pipeline::{self, SyncReport, Target};

use super::{measure, BenchArgs, Error, Phase, BACKOFF};

/// The phases, each with a fresh database, and the line that compares them.
///
/// # Errors
/// [`Error`] when a phase fails.
pub(super) async fn phases(
    dir: &Path,
    args: &BenchArgs,
    node_config: &DevNodeConfig,
    phase_no: &mut usize,
) -> Result<(Vec<Phase>, String), Error> {
    let mut second = node_config.clone();
    second.seed = node_config.seed.wrapping_add(1);
    second.chain.chain_id = node_config.chain.chain_id + 1;
    second.chain.density = node_config.chain.density * 0.6;
    let nodes = [start(node_config.clone()).await?, start(second).await?];
    let chains = [("a", &nodes[0]), ("b", &nodes[1])];
    let mut phases = Vec::new();
    for (name, (chain, node)) in ["chain-a-alone", "chain-b-alone"].into_iter().zip(chains) {
        *phase_no += 1;
        let config = load(dir, args, name, *phase_no, &[(chain, node)])?;
        let blocks = node.truth().head() + 1;
        let job = pipeline::sync(&config, Target::Latest, CancellationToken::new());
        phases.push(measure(name, blocks, job).await?);
    }
    *phase_no += 1;
    let config = load(dir, args, "two-chains", *phase_no, &chains)?;
    let blocks = nodes.iter().map(|n| n.truth().head() + 1).sum();
    phases.push(measure("two-chains", blocks, both(config)).await?);
    for node in nodes {
        node.shutdown().await;
    }
    let line = compare(&phases);
    Ok((phases, line))
}

/// Every chain of `config` at once, as one report: counts summed, the time of the two together.
async fn both(config: config::Config) -> Result<SyncReport, pipeline::Error> {
    let started = Instant::now();
    let views = pipeline::chains::views(&config, &[]).map_err(pipeline::Error::Config)?;
    let outcomes = pipeline::chains::sync(views, Target::Latest, &CancellationToken::new(), |_| {
        Observer::default()
    })
    .await;
    let mut total = SyncReport::default();
    for outcome in outcomes {
        let report = outcome.result?;
        total.target = total.target.max(report.target);
        total.logs += report.logs;
        total.typed_rows += report.typed_rows;
        total.batches += report.batches;
        total.requests += report.requests;
        total.log_requests += report.log_requests;
        total.errors += report.errors;
        total.retries += report.retries;
        total.splits += report.splits;
    }
    total.elapsed = started.elapsed();
    Ok(total)
}

/// A config of `chains` (name, node), each with the bench's four contracts, into the phase's database.
fn load(
    dir: &Path,
    args: &BenchArgs,
    phase: &str,
    phase_no: usize,
    chains: &[(&str, &DevNode)],
) -> Result<config::Config, Error> {
    let mut text = String::new();
    for (chain, node) in chains {
        let _ = write!(
            text,
            "[chains.{chain}]\nurl = \"{}\"\nrequests_per_second = 100000\nmax_concurrency = {}\n{BACKOFF}\n",
            node.http_url(),
            args.max_concurrency
        );
    }
    let database = match args.postgres_url() {
        Some(url) => format!(
            "url = \"{url}\"\nschema = \"bench_{}_{phase_no}_{}\"",
            std::process::id(),
            phase.replace('-', "_")
        ),
        None => format!(
            "url = \"sqlite://{}\"",
            dir.join(format!("{phase}.db")).display()
        ),
    };
    let _ = write!(text, "[database]\n{database}\n\n[sync]\n");
    for (chain, _) in chains {
        for (name, address, abi) in [
            ("token_a", contracts::TOKEN_A, "erc20"),
            ("token_b", contracts::TOKEN_B, "erc20"),
            ("pair", contracts::PAIR, "uniswap_v2_pair"),
            ("misc", contracts::MISC, "misc"),
        ] {
            let _ = write!(
                text,
                "\n[[contracts]]\nname = \"{name}\"\nchain = \"{chain}\"\naddress = \"{address:#x}\"\nabi = \"abis/{abi}.json\"\n"
            );
        }
    }
    let path = dir.join(format!("{phase}.toml"));
    let mut config = config::load_str(&path, &text, &|k| std::env::var(k).ok())
        .map_err(|e| Error::Setup(e.to_string()))?;
    config.sync.block_timestamps = !args.no_timestamps;
    Ok(config)
}

async fn start(config: DevNodeConfig) -> Result<DevNode, Error> {
    DevNode::start(config)
        .await
        .map_err(|e| Error::Setup(format!("devnode: {e}")))
}

/// Both chains together against each alone and against the sum of the two alone.
fn compare(phases: &[Phase]) -> String {
    let find = |name: &str| phases.iter().find(|p| p.name == name);
    let (Some(a), Some(b), Some(both)) = (
        find("chain-a-alone"),
        find("chain-b-alone"),
        find("two-chains"),
    ) else {
        return String::new();
    };
    let secs = |p: &Phase| p.report.elapsed.as_secs_f64().max(1e-9);
    format!(
        "two-chains: {:.0} logs/s against {:.0} (a alone) and {:.0} (b alone); {:.2}s together against {:.2}s one after the other ({:.2}x)\n",
        both.logs_per_s(),
        a.logs_per_s(),
        b.logs_per_s(),
        secs(both),
        secs(a) + secs(b),
        (secs(a) + secs(b)) / secs(both)
    )
}
