//! `logslice bench`: measures the indexer against the simulated node, in one run, as ratios that survive a
//! noisy shared machine: end-to-end against a fetch-only and a store-only ceiling, requests per 10,000 logs
//! against the fewest the result cap allows, a run with failing requests, and a naive baseline.
//!
//! Timings live here and in `docs/BENCHMARKS.md`, never in pass/fail tests.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;

use devnode::{contracts, ChainConfig, DevNode, DevNodeConfig};
use logslice::config::{self, Config};
use logslice::pipeline::{self, SyncReport, Target};
mod chains;
mod providers;
mod truth;

pub use truth::truth_chunks;

/// A simulated chain to benchmark on (`devnode`'s presets of the same names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Preset {
    /// 200,001 blocks, about 1,040,000 logs: dense bursts, medium and sparse stretches, 4 blocks over the cap.
    Default,
    /// The default chain ten times longer (2,000,001 blocks, about 9,300,000 logs): memory must not grow.
    Long,
    /// 2,000,001 blocks at a twentieth of the density: about 750,000 logs in dense bursts and 40 blocks over
    /// the cap, separated by long empty stretches, where fixed ranges waste requests.
    Sparse,
    /// 100,001 blocks of the default chain plus a Uniswap V2 factory whose pairs multiply to about 1,500
    /// (most quiet, a few busy), indexed as factory children, with two blocks where the pairs' logs together
    /// are over the cap while no pair alone is.
    Factory,
    /// 100,001 blocks of the default chain plus 15 blocks where the first token alone emits 11,000 more logs
    /// (ten spread over the chain, a run of five): indexable only from receipts.
    Overcap,
    /// 100,001 blocks at a fifth of the density, where the quiet `misc` contract bursts to about 150 logs per
    /// block for 300 blocks, eight times.
    Bursts,
    /// 200,001 blocks whose density grows twentyfold, from a tenth of the default to twice it.
    Growth,
    /// 40,001 blocks where `token_b` emits about 25 logs per block and the rest a twentieth of the default:
    /// one contract over a thousand times denser than its neighbours.
    Hot,
    /// 100,001 blocks of the default chain with three runs of four blocks over the cap, each spread across
    /// every contract (none alone near the cap).
    HugeRuns,
    /// 500,001 blocks of the default density, 380,000 of them in two stretches without a log.
    Empty,
    /// 20,001 blocks of the default chain's shapes at 4.8 times its density, about 500,000 logs: as short and
    /// dense as the outside measurement's chain (`--density 14.4` gives its 1.5M-log one).
    Dense,
}

impl Preset {
    /// The devnode preset's name.
    fn chain_name(self) -> &'static str {
        match self {
            Preset::Default => "default",
            Preset::Long => "long",
            Preset::Sparse => "sparse",
            Preset::Factory => "factory",
            Preset::Overcap => "overcap",
            Preset::Bursts => "bursts",
            Preset::Growth => "growth",
            Preset::Hot => "hot",
            Preset::HugeRuns => "huge_runs",
            Preset::Empty => "empty",
            Preset::Dense => "dense",
        }
    }

    /// The devnode's chain: the preset's, with `--blocks` and `--density` applied.
    fn chain(self, blocks: Option<u64>, density: Option<f64>) -> Result<ChainConfig, Error> {
        let mut chain = ChainConfig::preset(self.chain_name()).map_err(Error::Setup)?;
        chain.blocks = blocks.unwrap_or(chain.blocks);
        chain.density = density.unwrap_or(chain.density);
        if self == Preset::Overcap {
            chain.overcap = devnode::OvercapConfig::spread(chain.blocks);
        }
        Ok(chain)
    }
}

/// `logslice bench` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BenchArgs {
    /// The simulated chain.
    #[arg(long, value_enum, default_value_t = Preset::Default)]
    pub preset: Preset,
    /// Blocks of the simulated chain (overrides the preset's).
    #[arg(long)]
    pub blocks: Option<u64>,
    /// Seed of the simulated chain.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// Log density multiplier of the simulated chain (overrides the preset's).
    #[arg(long)]
    pub density: Option<f64>,
    /// Added to every request of the in-process node, as the round trip to a hosted provider would be
    /// (e.g. 100ms); every phase that talks to the node pays it.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    pub latency: std::time::Duration,
    /// Benchmark a running node at this URL instead (end-to-end and fetch-only only).
    #[arg(long)]
    pub url: Option<String>,
    /// Database URL (default: fresh SQLite files in a temp dir). For Postgres each phase gets its own schema.
    #[arg(long)]
    pub database: Option<String>,
    /// Requests in flight.
    #[arg(long, default_value_t = 8)]
    pub max_concurrency: usize,
    /// Also sync with this fraction of requests failing (half 429, half 5xx), e.g. 0.05.
    #[arg(long)]
    pub fault_rate: Option<f64>,
    /// Also run a naive fixed-range sequential fetcher on the same chain.
    #[arg(long)]
    pub baseline: bool,
    /// Block span of the naive baseline's requests.
    #[arg(long, default_value_t = 2000)]
    pub baseline_range: u64,
    /// The in-process node puts `blockTimestamp` in its logs, as geth and most providers do, so block
    /// timestamps need no header reads.
    #[arg(long)]
    pub log_timestamps: bool,
    /// The in-process node serves `eth_getBlockReceipts` (otherwise receipts are read one per transaction).
    #[arg(long)]
    pub block_receipts: bool,
    /// Index without block timestamps (`[sync] block_timestamps = false`) in every phase.
    #[arg(long, conflicts_with = "timestamps_cost")]
    pub no_timestamps: bool,
    /// Also sync with `block_timestamps = false`, and print what the timestamps cost.
    #[arg(long)]
    pub timestamps_cost: bool,
    /// Add the `transactions` table (`[sync] transactions = true`) in every phase that reads the node
    /// (store-only reads none: its table stays empty).
    #[arg(long)]
    pub transactions: bool,
    /// With --transactions: also `transaction_receipts = true` (a receipt read per row).
    #[arg(long, requires = "transactions")]
    pub transaction_receipts: bool,
    /// Maintain the secondary indexes row by row in every phase, instead of building them after the
    /// backfill (`[sync] defer_indexes_min_blocks` above the chain's length).
    #[arg(long)]
    pub maintained_indexes: bool,
    /// Also run the providers' phases, each key limited to this many calls a second: `exact-rate` and
    /// `learned-rate` (configured at three times the key's limit), `1-provider` and `3-providers`.
    #[arg(long)]
    pub provider_rate: Option<u32>,
    /// Also run the two-chain phases: the chain alone, a second chain (another seed and density) alone, then
    /// both from one config into one database at once.
    #[arg(long)]
    pub chains: bool,
}

/// Why a benchmark failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A phase failed.
    #[error("{phase}: {source}")]
    Phase {
        /// Which.
        phase: &'static str,
        /// Why.
        #[source]
        source: Box<pipeline::Error>,
    },
    /// Setting up failed.
    #[error("{0}")]
    Setup(String),
}

/// One measured phase.
#[derive(Debug, Clone)]
pub struct Phase {
    /// Name.
    pub name: &'static str,
    /// What it did.
    pub report: SyncReport,
    /// Blocks covered.
    pub blocks: u64,
    /// Peak resident set during the phase, in bytes (0 when unknown).
    pub peak_rss: u64,
}

impl Phase {
    fn logs_per_s(&self) -> f64 {
        self.report.logs as f64 / self.report.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs the benchmark and returns the printed report. On Postgres the schemas of its phases are dropped
/// afterwards, whatever the outcome.
///
/// # Errors
/// [`Error`] when a phase fails.
pub async fn run(args: &BenchArgs) -> Result<String, Error> {
    let outcome = run_phases(args).await;
    if let Some(url) = args.postgres_url() {
        drop_schemas(url).await;
    }
    outcome
}

impl BenchArgs {
    /// `--database` when it names Postgres (each phase then gets a schema of its own); `None` for the
    /// default SQLite files or a `sqlite:` URL.
    pub fn postgres_url(&self) -> Option<&str> {
        self.database
            .as_deref()
            .filter(|url| !url.starts_with("sqlite:"))
    }
}

/// Drops the schemas this process's phases created (`bench_<pid>_<n>_<phase>`, [`load_config`]). Each
/// holds a phase's whole database, about a gigabyte per million logs: kept, they filled the disk here
/// after a day of runs (67 schemas, 72 GB) and a phase then failed with "No space left on device".
/// Best effort: a failure is logged, not reported as the run's.
async fn drop_schemas(url: &str) {
    use sqlx::{ConnectOptions, Executor};
    let prefix = format!("bench_{}_", std::process::id());
    let dropped = async {
        // Dropping a phase's schema takes seconds by design: not worth a warning.
        let options = url
            .parse::<sqlx::postgres::PgConnectOptions>()?
            .log_slow_statements(log::LevelFilter::Debug, std::time::Duration::from_secs(1));
        let mut conn = options.connect().await?;
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT nspname::text FROM pg_namespace WHERE starts_with(nspname, $1)",
        )
        .bind(&prefix)
        .fetch_all(&mut conn)
        .await?;
        for name in &names {
            conn.execute(format!("DROP SCHEMA \"{name}\" CASCADE").as_str())
                .await?;
        }
        sqlx::Connection::close(conn).await?;
        Ok::<_, sqlx::Error>(names.len())
    };
    match dropped.await {
        Ok(n) => tracing::debug!(schemas = n, "dropped the bench's schemas"),
        Err(err) => tracing::warn!(
            database = %redact_db(url),
            prefix,
            error = %err,
            "could not drop the bench's schemas; drop them by hand"
        ),
    }
}

async fn run_phases(args: &BenchArgs) -> Result<String, Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::Setup(format!("temp dir: {e}")))?;
    write_abis(dir.path())?;
    let mut node_config = DevNodeConfig {
        seed: args.seed,
        ..DevNodeConfig::default()
    };
    node_config.chain = args.preset.chain(args.blocks, args.density)?;
    let blocks = node_config.chain.blocks;
    node_config.faults.latency = args.latency;
    node_config.chain.log_timestamps = args.log_timestamps;
    node_config.chain.block_receipts = args.block_receipts;
    let (node, url) = match &args.url {
        Some(url) => (None, url.clone()),
        None => {
            let node = DevNode::start(node_config.clone())
                .await
                .map_err(|e| Error::Setup(format!("devnode: {e}")))?;
            let url = node.http_url();
            (Some(node), url)
        }
    };
    let truth = node.as_ref().map(DevNode::truth);
    // Against --url the chain is the node's: its length is known once the first phase synced it.
    let mut head_blocks = truth.as_ref().map_or(blocks, |t| t.head() + 1);
    let mut phases = Vec::new();
    let mut phase_no = 0;
    let mut config_for = |name: &str, url: &str| {
        phase_no += 1;
        load_config(dir.path(), url, args, name, phase_no)
    };

    let e2e_config = config_for("e2e", &url)?;
    let e2e = measure(
        "end-to-end",
        head_blocks,
        pipeline::sync(&e2e_config, Target::Latest, CancellationToken::new()),
    )
    .await?;
    if truth.is_none() {
        head_blocks = e2e.report.target + 1;
    }
    phases.push(Phase {
        blocks: head_blocks,
        ..e2e
    });
    let fetch_config = config_for("fetch", &url)?;
    phases.push(
        measure(
            "fetch-only",
            head_blocks,
            pipeline::fetch_only(&fetch_config, Target::Latest),
        )
        .await?,
    );
    if let (Some(rate), None) = (args.fault_rate, &args.url) {
        let mut faulty = node_config.clone();
        faulty.faults.http_429 = rate / 2.0;
        faulty.faults.http_5xx = rate / 2.0;
        faulty.faults.retry_after_secs = 0;
        let faulty_node = DevNode::start(faulty)
            .await
            .map_err(|e| Error::Setup(format!("devnode: {e}")))?;
        let fault_config = config_for("faults", &faulty_node.http_url())?;
        phases.push(
            measure(
                "faults",
                head_blocks,
                pipeline::sync(&fault_config, Target::Latest, CancellationToken::new()),
            )
            .await?,
        );
        faulty_node.shutdown().await;
    }
    if args.timestamps_cost {
        let mut plain_config = config_for("plain", &url)?;
        plain_config.sync.block_timestamps = false;
        phases.push(
            measure(
                "no-stamps",
                head_blocks,
                pipeline::sync(&plain_config, Target::Latest, CancellationToken::new()),
            )
            .await?,
        );
    }
    if args.baseline {
        let baseline_config = config_for("baseline", &url)?;
        phases.push(
            measure(
                "naive",
                head_blocks,
                pipeline::naive_sync(&baseline_config, Target::Latest, args.baseline_range.max(1)),
            )
            .await?,
        );
    }
    let mut compared = String::new();
    if let (Some(rate), None) = (args.provider_rate, &args.url) {
        // Numbered apart from the phases above, whose numbering the closure holds.
        let mut provider_no = 100;
        let (provider_phases, lines) = providers::phases(
            dir.path(),
            args,
            &node_config,
            rate.max(1),
            &mut provider_no,
        )
        .await?;
        phases.extend(provider_phases);
        compared = lines;
    }
    if args.chains && args.url.is_none() {
        let mut chain_no = 200;
        let (chain_phases, line) =
            chains::phases(dir.path(), args, &node_config, &mut chain_no).await?;
        phases.extend(chain_phases);
        compared.push_str(&line);
    }
    // Store-only last: it generates the ground truth in memory, and what the allocator keeps of that would
    // count towards the next phase's peak.
    if let Some(truth) = &truth {
        let store_config = config_for("store", &url)?;
        let head = truth.head();
        phases.push(
            measure(
                "store-only",
                head_blocks,
                pipeline::store_only(
                    &store_config,
                    head,
                    truth_chunks(
                        truth.clone(),
                        head,
                        store_config.sync.target_logs_per_request,
                    ),
                ),
            )
            .await?,
        );
    }
    let lower_bound = truth
        .as_ref()
        .map(|t| t.fewest_requests(e2e_config.sync.max_block_range));
    if let Some(node) = node {
        node.shutdown().await;
    }
    Ok(render(args, &phases, lower_bound, head_blocks) + &compared)
}

async fn measure(
    name: &'static str,
    blocks: u64,
    work: impl std::future::Future<Output = Result<SyncReport, pipeline::Error>>,
) -> Result<Phase, Error> {
    reset_peak_rss();
    tracing::info!(phase = name, "bench phase starting");
    let report = work.await.map_err(|source| Error::Phase {
        phase: name,
        source: Box::new(source),
    })?;
    Ok(Phase {
        name,
        report,
        blocks,
        peak_rss: peak_rss(),
    })
}

fn write_abis(dir: &Path) -> Result<(), Error> {
    let abis = dir.join("abis");
    std::fs::create_dir_all(&abis).map_err(|e| Error::Setup(format!("{}: {e}", abis.display())))?;
    for (file, text) in [
        ("erc20.json", contracts::ERC20_ABI_JSON),
        ("uniswap_v2_pair.json", contracts::UNISWAP_V2_PAIR_ABI_JSON),
        ("misc.json", contracts::MISC_ABI_JSON),
        (
            "uniswap_v2_factory.json",
            contracts::UNISWAP_V2_FACTORY_ABI_JSON,
        ),
    ] {
        std::fs::write(abis.join(file), text).map_err(|e| Error::Setup(format!("{file}: {e}")))?;
    }
    Ok(())
}

/// The backoff of every phase's `[node]`: a bench measures the indexer, not its waits.
const BACKOFF: &str = "initial_backoff = \"10ms\"\nmax_backoff = \"500ms\"\n";

/// A config indexing every simulated contract and event against `url`, with a fresh database for `phase`.
fn load_config(
    dir: &Path,
    url: &str,
    args: &BenchArgs,
    phase: &str,
    phase_no: usize,
) -> Result<Config, Error> {
    let node = format!(
        "[node]\nurl = \"{url}\"\nrequests_per_second = 100000\nmax_concurrency = {}\n{BACKOFF}",
        args.max_concurrency
    );
    load_config_with(dir, &node, args, phase, phase_no)
}

/// [`load_config`] with `node` as the `[node]` section (and its providers).
fn load_config_with(
    dir: &Path,
    node: &str,
    args: &BenchArgs,
    phase: &str,
    phase_no: usize,
) -> Result<Config, Error> {
    let database = match (args.postgres_url(), args.database.as_deref()) {
        (Some(url), _) => format!(
            "url = \"{url}\"\nschema = \"bench_{}_{phase_no}_{phase}\"",
            std::process::id()
        ),
        (None, Some(sqlite)) => format!("url = \"{sqlite}.{phase}\""),
        (None, None) => format!(
            "url = \"sqlite://{}\"",
            dir.join(format!("{phase}.db")).display()
        ),
    };
    let text = format!(
        "{node}\n\
         [database]\n{database}\n\n[sync]\n\n\
         [[contracts]]\nname = \"token_a\"\naddress = \"{:#x}\"\nabi = \"abis/erc20.json\"\n\n\
         [[contracts]]\nname = \"token_b\"\naddress = \"{:#x}\"\nabi = \"abis/erc20.json\"\n\n\
         [[contracts]]\nname = \"pair\"\naddress = \"{:#x}\"\nabi = \"abis/uniswap_v2_pair.json\"\n\n\
         [[contracts]]\nname = \"misc\"\naddress = \"{:#x}\"\nabi = \"abis/misc.json\"\n",
        contracts::TOKEN_A,
        contracts::TOKEN_B,
        contracts::PAIR,
        contracts::MISC,
    );
    let mut text = text;
    if args.preset == Preset::Factory {
        text.push_str(&format!(
            "\n[[contracts]]\nname = \"v2_factory\"\naddress = \"{:#x}\"\nabi = \"abis/uniswap_v2_factory.json\"\n\n\
             [[contracts]]\nname = \"v2_pair\"\nabi = \"abis/uniswap_v2_pair.json\"\n\
             factory = {{ contract = \"v2_factory\", event = \"PairCreated\", parameter = \"pair\" }}\n",
            contracts::FACTORY
        ));
    }
    let path: PathBuf = dir.join(format!("{phase}.toml"));
    let mut config = config::load_str(&path, &text, &|k| std::env::var(k).ok())
        .map_err(|e| Error::Setup(e.to_string()))?;
    config.sync.block_timestamps = !args.no_timestamps;
    config.sync.transactions = args.transactions;
    config.sync.transaction_receipts = args.transaction_receipts;
    if args.maintained_indexes {
        config.sync.defer_indexes_min_blocks = u64::MAX;
    }
    Ok(config)
}

/// Linux: writing 5 to `clear_refs` resets the peak RSS (`VmHWM`) of the process.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn render(args: &BenchArgs, phases: &[Phase], lower_bound: Option<u64>, blocks: u64) -> String {
    let mut out = String::new();
    let logs = phases.first().map_or(0, |p| p.report.logs);
    let latency = if args.url.is_some() {
        "the node's own".to_owned()
    } else {
        humantime::format_duration(args.latency).to_string()
    };
    let _ = writeln!(
        out,
        "logslice bench: {blocks} blocks, {logs} logs (preset {:?}, seed {}, density {}), latency {latency}, max_concurrency {}, database {}, block timestamps {}, transactions table {}, secondary indexes {}",
        args.preset,
        args.seed,
        args.preset
            .chain(args.blocks, args.density)
            .map_or(f64::NAN, |chain| chain.density),
        args.max_concurrency,
        args.database.as_deref().map_or("sqlite (temp)".into(), redact_db),
        match (args.no_timestamps, args.log_timestamps) {
            (true, _) => "off",
            (false, true) => "from the logs' blockTimestamp",
            (false, false) => "from headers",
        },
        match (args.transactions, args.transaction_receipts) {
            (false, _) => "off",
            (true, false) => "on",
            (true, true) => "on, with receipts",
        },
        if args.maintained_indexes {
            "maintained row by row"
        } else {
            "built after the backfill"
        },
    );
    let _ = writeln!(
        out,
        "{:<11} {:>10} {:>10} {:>8} {:>9} {:>8} {:>9} {:>9} {:>7} {:>7} {:>9}",
        "phase",
        "logs/s",
        "blocks/s",
        "secs",
        "requests",
        "getLogs",
        "req/10k",
        "hdr/10k",
        "errors",
        "splits",
        "peak RSS"
    );
    for p in phases {
        let secs = p.report.elapsed.as_secs_f64().max(1e-9);
        let per_10k = |n: u64| {
            if p.report.logs > 0 {
                n as f64 * 10_000.0 / p.report.logs as f64
            } else {
                0.0
            }
        };
        let _ = writeln!(
            out,
            "{:<11} {:>10.0} {:>10.0} {:>8.2} {:>9} {:>8} {:>9.2} {:>9.2} {:>7} {:>7} {:>6.1} MB",
            p.name,
            p.logs_per_s(),
            p.blocks as f64 / secs,
            secs,
            p.report.requests,
            p.report.log_requests,
            per_10k(p.report.log_requests),
            per_10k(p.report.header_calls),
            p.report.errors,
            p.report.splits,
            p.peak_rss as f64 / 1e6
        );
    }
    let find = |name: &str| phases.iter().find(|p| p.name == name);
    if let (Some(bound), Some(e2e)) = (lower_bound, find("end-to-end")) {
        let bound_per_10k = bound as f64 * 10_000.0 / e2e.report.logs.max(1) as f64;
        let _ = writeln!(
            out,
            "lower bound: {bound} eth_getLogs requests ({bound_per_10k:.2} per 10k logs); end-to-end used {} ({:.2}x the bound; \
             the other {} requests read the head, the headers above finality and any receipts)",
            e2e.report.log_requests,
            e2e.report.log_requests as f64 / bound.max(1) as f64,
            e2e.report.requests - e2e.report.log_requests,
        );
    }
    for p in phases.iter().filter(|p| p.report.receipt_blocks > 0) {
        let _ = writeln!(
            out,
            "{}: {} blocks over the result cap read from their receipts",
            p.name, p.report.receipt_blocks
        );
    }
    for p in phases.iter().filter(|p| p.report.topic_only > 0) {
        let _ = writeln!(
            out,
            "{}: {} of the eth_getLogs requests by topic only (more addresses than one request takes), \
             {} logs of other contracts dropped",
            p.name, p.report.topic_only, p.report.foreign_logs
        );
    }
    for p in phases.iter().filter(|p| p.report.children_filled > 0) {
        let _ = writeln!(
            out,
            "{}: {} fillings of factory children found after their ranges were asked for",
            p.name, p.report.children_filled
        );
    }
    if let Some(e2e) = find("end-to-end") {
        if let (Some(fetch), Some(store)) = (find("fetch-only"), find("store-only")) {
            let ceiling = fetch.logs_per_s().min(store.logs_per_s());
            let _ = writeln!(
                out,
                "end-to-end / min(fetch-only, store-only) = {:.2}",
                e2e.logs_per_s() / ceiling
            );
        }
        if let Some(faults) = find("faults") {
            let _ = writeln!(
                out,
                "with {:.0}% failing requests / clean = {:.2}",
                args.fault_rate.unwrap_or(0.0) * 100.0,
                faults.logs_per_s() / e2e.logs_per_s()
            );
        }
        if let Some(plain) = find("no-stamps") {
            let _ = writeln!(
                out,
                "end-to-end / without block timestamps = {:.2} (timestamps cost {:.1}% of throughput)",
                e2e.logs_per_s() / plain.logs_per_s(),
                (1.0 - e2e.logs_per_s() / plain.logs_per_s()) * 100.0
            );
        }
        if let Some(naive) = find("naive") {
            let speedup =
                naive.report.elapsed.as_secs_f64() / e2e.report.elapsed.as_secs_f64().max(1e-9);
            let _ = writeln!(
                out,
                "end-to-end / naive baseline ({}-block ranges, sequential) = {speedup:.1}x",
                args.baseline_range
            );
        }
    }
    out
}

fn redact_db(url: &str) -> String {
    url::Url::parse(url)
        .map(|u| config::SecretUrl::new(u).to_string())
        .unwrap_or_else(|_| "(unparseable URL)".into())
}
