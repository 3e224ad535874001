//! `logslice devnode`: the command-line face of the simulated node.
//!
//! Flags map one to one onto [`DevNodeConfig`] options (the same names as `sim://?name=value`, with dashes).
//! `run` serves until the shutdown token fires, then prints what it served. Parsing `main`'s arguments and
//! installing signal handlers is `main`'s job, not this module's.

use std::net::SocketAddr;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{DevNode, DevNodeConfig};

/// Why `logslice devnode` could not run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A flag value was rejected.
    #[error("devnode: {0}")]
    Option(String),
    /// The listen address could not be bound.
    #[error("devnode: cannot listen on {addr} (is another devnode running? pick another --addr)")]
    Bind {
        /// The requested address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

fn duration(text: &str) -> Result<Duration, String> {
    if text == "0" || text == "off" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(text).map_err(|err| err.to_string())
}

fn probability(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if (0.0..=1.0).contains(&p) => Ok(p),
        _ => Err(format!("{text:?} is not a probability from 0 to 1")),
    }
}

/// `logslice devnode` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct DevnodeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8545")]
    pub addr: SocketAddr,
    /// Seed of the chain and of every fault decision.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// The API key accepted in /v3/KEY and /ws/v3/KEY.
    #[arg(long, default_value = "demo")]
    pub key: String,
    /// Chain id answered by eth_chainId.
    #[arg(long, default_value_t = super::DEFAULT_CHAIN_ID)]
    pub chain_id: u64,
    /// Initial head block number (the default chain has ~1,000,000 logs).
    #[arg(long, default_value_t = super::DEFAULT_BLOCKS)]
    pub blocks: u64,
    /// Multiplies the log count of ordinary blocks (the >10,000-log blocks stay).
    #[arg(long, default_value_t = 1.0)]
    pub density: f64,
    /// Produce a block this often ("0" or "off" = only the initial chain).
    #[arg(long, default_value = "2s", value_parser = duration)]
    pub block_time: Duration,
    /// Distance from the head to the finalized block.
    #[arg(long, default_value_t = super::DEFAULT_FINALIZED_DEPTH)]
    pub finalized_depth: u64,
    /// What the "finalized" and "safe" tags are answered with: block (the finalized block; "safe" refused
    /// by eth_getBlockByNumber, as the spec says), null (a node that knows no finality: both blocks null,
    /// eth_getLogs with either tag a -32000 "finalized header not found" error), or error (geth before the
    /// merge: -32000 "finalized block not found" / "safe block not found"; eth_getLogs as with null).
    #[arg(long, default_value = "block", value_parser = super::Finality::parse)]
    pub finality: super::Finality,
    /// Reorg whenever the head reaches a multiple of N.
    #[arg(long, value_name = "N")]
    pub reorg_every: Option<u64>,
    /// Depth of the scripted reorgs.
    #[arg(long, default_value_t = super::config::DEFAULT_REORG_DEPTH)]
    pub reorg_depth: u64,
    /// Also emit from the contract at 0xa404c0ffee000000000000000000000000000005 (abis/anon.json), whose
    /// anonymous events share topic counts and data layouts with its named ones. Changes every contract's
    /// logs: the default chain is the one without it.
    #[arg(long)]
    pub anon_contract: bool,
    /// Also run a Uniswap V2 factory at 0xfac7c0ffee000000000000000000000000000006
    /// (abis/uniswap_v2_factory.json) creating N pairs (abis/uniswap_v2_pair.json) by the initial head, more
    /// as the chain goes on. Its transactions follow each block's others: the other contracts' logs stay.
    #[arg(long, value_name = "N")]
    pub factory_children: Option<u64>,
    /// With --factory-children: blocks where the pairs' logs together exceed 10,000.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub factory_bursts: u32,
    /// Put `blockTimestamp` in log objects, as geth and most providers do (the spec's log object lacks it).
    #[arg(long)]
    pub log_timestamps: bool,
    /// A block whose logs are numbered from --log-index-base instead of 0, in eth_getLogs and receipts
    /// alike (some chains number logs past 2^31).
    #[arg(long, value_name = "N")]
    pub high_log_indexes: Option<u64>,
    /// The first log index of that block: decimal, or 0x and hex digits.
    #[arg(long, value_name = "N", default_value = "0xffffffe2", value_parser = super::log_indexes::parse_base)]
    pub log_index_base: u64,
    /// Serve `eth_getBlockReceipts` (without it the node answers -32601, as one that lacks it).
    #[arg(long)]
    pub block_receipts: bool,
    /// Blocks where the first token alone emits more logs than the result cap, comma-separated heights.
    #[arg(long, value_name = "N,N,...", default_value = "")]
    pub overcap_blocks: String,
    /// A run of consecutive such blocks: FIRST:COUNT.
    #[arg(long, value_name = "FIRST:COUNT")]
    pub overcap_run: Option<String>,
    /// Logs of the one contract in each such block.
    #[arg(long, value_name = "N", default_value_t = super::DEFAULT_OVERCAP_LOGS)]
    pub overcap_logs: u64,
    /// A shape of real chains, NAME=VALUE, repeatable: bursts=FIRST:LEN:PER_BLOCK,..., growth=FACTOR,
    /// hot=LOGS_PER_BLOCK, huge_runs=FIRST:COUNT,..., empty_runs=FIRST:LEN,...
    #[arg(long, value_name = "NAME=VALUE")]
    pub shape: Vec<String>,
    /// Wording of the too-many-results error: plain, infura, alchemy, reth, reth-32000.
    #[arg(long, default_value = "plain", value_parser = super::TooManyStyle::parse)]
    pub too_many_style: super::TooManyStyle,
    /// Most logs one eth_getLogs may return.
    #[arg(long, default_value_t = super::DEFAULT_MAX_RESULTS)]
    pub max_results: usize,
    /// Modelled query time allowed before "query timeout exceeded".
    #[arg(long, default_value = "10s", value_parser = duration)]
    pub query_budget: Duration,
    /// Modelled time per block scanned.
    #[arg(long, default_value = "5us", value_parser = duration)]
    pub block_cost: Duration,
    /// Modelled time per log matched.
    #[arg(long, default_value = "100us", value_parser = duration)]
    pub log_cost: Duration,
    /// Probability of HTTP 429 with Retry-After.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_429: f64,
    /// Retry-After seconds of every 429.
    #[arg(long, default_value_t = super::config::DEFAULT_RETRY_AFTER_SECS)]
    pub retry_after: u64,
    /// Probability of HTTP 500/502/503.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_5xx: f64,
    /// Fixed latency added to every request.
    #[arg(long, default_value = "0", value_parser = duration)]
    pub latency: Duration,
    /// Up to this much more latency per request.
    #[arg(long, default_value = "0", value_parser = duration)]
    pub jitter: Duration,
    /// Probability of a connection dropped mid-response.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_drop: f64,
    /// Probability (per call) of a -32603 internal error.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_internal: f64,
    /// Probability (per call) of Infura's -32005 "project ID request rate exceeded".
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_rate_limit: f64,
    /// Probability of a request served by a lagging backend.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_lag: f64,
    /// How many blocks a lagging backend is behind.
    #[arg(long, default_value_t = super::config::DEFAULT_LAG_DEPTH)]
    pub lag_depth: u64,
    /// Probability (per eth_getLogs) that orphaned logs are served with removed: true.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_stale_replica: f64,
    /// Probability (per eth_getLogs) that the answer's logs are sent twice (the whole list, then again).
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_repeated_logs: f64,
    /// Probability (per eth_getLogs) that the answer's first log is followed by another log at the same
    /// block and log index with other data.
    #[arg(long, default_value_t = 0.0, value_parser = probability)]
    pub fault_conflicting_log: f64,
    /// Calls per second (each batch item counted) above which requests get HTTP 429; a batch over what is
    /// left of the second is refused whole.
    #[arg(long)]
    pub max_rps: Option<u32>,
    /// Credits per second (see --method-credits; a batch costs the sum of its calls) above which requests
    /// get HTTP 429.
    #[arg(long)]
    pub max_cps: Option<u32>,
    /// What each method costs against --max-cps, METHOD:CREDITS,...,default:N (replaces the whole default
    /// table: eth_getLogs 75, eth_getBlockByNumber 16, eth_getBlockReceipts 500, eth_getTransactionReceipt
    /// 15, eth_blockNumber 10, eth_chainId 0, default 26).
    #[arg(long, value_name = "METHOD:N,...", value_parser = super::MethodCredits::parse)]
    pub method_credits: Option<super::MethodCredits>,
    /// Serve as a node this many blocks behind the head (head, latest, finalized and safe lower; blocks
    /// above it null; eth_getLogs cut at it).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub lag_blocks: u64,
}

impl DevnodeArgs {
    /// The node configuration these flags describe.
    ///
    /// # Errors
    /// When a value is out of range.
    pub fn to_config(&self) -> Result<DevNodeConfig, Error> {
        if !(self.density >= 0.0 && self.density.is_finite()) {
            return Err(Error::Option(format!(
                "--density {} is not a non-negative factor",
                self.density
            )));
        }
        let mut cfg = DevNodeConfig {
            addr: self.addr,
            key: self.key.clone(),
            seed: self.seed,
            ..Default::default()
        };
        cfg.chain.chain_id = self.chain_id;
        cfg.chain.blocks = self.blocks;
        cfg.chain.density = self.density;
        cfg.chain.block_time = (!self.block_time.is_zero()).then_some(self.block_time);
        cfg.chain.finalized_depth = self.finalized_depth;
        cfg.chain.finality = self.finality;
        cfg.chain.reorg_every = self.reorg_every.filter(|every| *every > 0);
        cfg.chain.reorg_depth = self.reorg_depth;
        cfg.chain.anon_contract = self.anon_contract;
        cfg.chain.factory =
            self.factory_children
                .filter(|children| *children > 0)
                .map(|children| super::FactoryConfig {
                    children,
                    bursts: self.factory_bursts,
                });
        cfg.chain.log_timestamps = self.log_timestamps;
        cfg.chain.block_receipts = self.block_receipts;
        cfg.chain.high_log_indexes = self.high_log_indexes;
        cfg.chain.log_index_base = self.log_index_base;
        let overcap = [
            ("overcap_blocks", Some(self.overcap_blocks.clone())),
            ("overcap_run", self.overcap_run.clone()),
            ("overcap_logs", Some(self.overcap_logs.to_string())),
        ];
        for (name, value) in overcap {
            if let Some(value) = value {
                cfg.chain
                    .overcap
                    .set_option(name, &value)
                    .map_err(|reason| {
                        Error::Option(format!("--{}: {reason}", name.replace('_', "-")))
                    })?;
            }
        }
        for shape in &self.shape {
            let (name, value) = shape
                .split_once('=')
                .ok_or_else(|| Error::Option(format!("--shape {shape:?}: use NAME=VALUE")))?;
            cfg.chain
                .shapes
                .set_option(name.trim(), value.trim())
                .map_err(|reason| Error::Option(format!("--shape {shape:?}: {reason}")))?;
        }
        cfg.limits.too_many_style = self.too_many_style;
        cfg.limits.max_results = self.max_results;
        cfg.limits.query_budget = self.query_budget;
        cfg.limits.block_cost = self.block_cost;
        cfg.limits.log_cost = self.log_cost;
        cfg.faults.http_429 = self.fault_429;
        cfg.faults.retry_after_secs = self.retry_after;
        cfg.faults.http_5xx = self.fault_5xx;
        cfg.faults.latency = self.latency;
        cfg.faults.jitter = self.jitter;
        cfg.faults.drop = self.fault_drop;
        cfg.faults.internal_error = self.fault_internal;
        cfg.faults.rate_limit_error = self.fault_rate_limit;
        cfg.faults.lag = self.fault_lag;
        cfg.faults.lag_depth = self.lag_depth;
        cfg.faults.stale_replica = self.fault_stale_replica;
        cfg.faults.repeated_logs = self.fault_repeated_logs;
        cfg.faults.conflicting_log = self.fault_conflicting_log;
        cfg.faults.max_rps = self.max_rps.filter(|rps| *rps > 0);
        cfg.faults.max_cps = self.max_cps.filter(|cps| *cps > 0);
        if let Some(method_credits) = &self.method_credits {
            cfg.faults.method_credits = method_credits.clone();
        }
        cfg.faults.lag_blocks = self.lag_blocks;
        Ok(cfg)
    }
}

/// Serves until `shutdown` fires, then prints the served counts to stderr.
///
/// # Errors
/// A bad flag value, or an address that cannot be bound.
pub async fn run(args: DevnodeArgs, shutdown: CancellationToken) -> Result<(), Error> {
    let cfg = args.to_config()?;
    let node = DevNode::start(cfg).await.map_err(|source| Error::Bind {
        addr: args.addr,
        source,
    })?;
    let truth = node.truth();
    eprintln!(
        "devnode: chain {} at head {} (seed {}), serving {} and {}",
        truth.chain_id(),
        truth.head(),
        args.seed,
        node.http_url(),
        node.ws_url()
    );
    shutdown.cancelled().await;
    let stats = node.stats();
    node.shutdown().await;
    eprintln!("{}", stats.summary());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: DevnodeArgs,
    }

    #[test]
    fn the_flags_are_well_formed() {
        use clap::CommandFactory;
        Wrapper::command().debug_assert();
    }

    #[test]
    fn flags_map_onto_the_config() {
        let parsed = Wrapper::try_parse_from([
            "devnode",
            "--seed",
            "9",
            "--blocks",
            "100",
            "--block-time",
            "off",
            "--fault-429",
            "0.5",
            "--too-many-style",
            "alchemy",
            "--latency",
            "10ms",
            "--max-rps",
            "5",
            "--anon-contract",
            "--log-timestamps",
            "--finality",
            "error",
            "--factory-children",
            "30",
            "--factory-bursts",
            "1",
            "--high-log-indexes",
            "40",
            "--max-cps",
            "330",
            "--method-credits",
            "eth_getLogs:75,default:20",
            "--lag-blocks",
            "3",
        ])
        .expect("valid flags");
        let cfg = parsed.args.to_config().expect("valid config");
        assert_eq!(cfg.seed, 9);
        assert_eq!(cfg.chain.blocks, 100);
        assert_eq!(cfg.chain.block_time, None);
        assert_eq!(cfg.faults.http_429, 0.5);
        assert_eq!(cfg.faults.latency, Duration::from_millis(10));
        assert_eq!(cfg.faults.max_rps, Some(5));
        assert_eq!(cfg.faults.max_cps, Some(330));
        assert_eq!(cfg.faults.method_credits.of(Some("eth_getLogs")), 75);
        assert_eq!(cfg.faults.method_credits.of(Some("eth_chainId")), 20);
        assert_eq!(cfg.faults.lag_blocks, 3);
        assert!(cfg.chain.anon_contract);
        assert_eq!(
            cfg.chain.factory,
            Some(super::super::FactoryConfig {
                children: 30,
                bursts: 1
            })
        );
        assert!(cfg.chain.log_timestamps);
        assert_eq!(cfg.chain.high_log_indexes, Some(40));
        assert_eq!(cfg.chain.log_index_base, 0xffff_ffe2);
        assert_eq!(cfg.chain.finality, super::super::Finality::Error);
        assert_eq!(
            cfg.limits.too_many_style,
            super::super::TooManyStyle::Alchemy
        );
        assert!(Wrapper::try_parse_from(["devnode", "--fault-5xx", "1.5"]).is_err());
        assert!(Wrapper::try_parse_from(["devnode", "--finality", "maybe"]).is_err());
        assert!(Wrapper::try_parse_from(["devnode", "--method-credits", "eth_getLogs"]).is_err());
    }

    #[test]
    fn without_flags_the_node_is_the_default_chain_with_finality() {
        let parsed = Wrapper::try_parse_from(["devnode"]).expect("no flags");
        let cfg = parsed.args.to_config().expect("valid config");
        assert!(!cfg.chain.anon_contract);
        assert_eq!(cfg.chain.factory, None);
        assert!(!cfg.chain.anon_contract && !cfg.chain.log_timestamps);
        assert_eq!(cfg.chain.finality, super::super::Finality::Block);
        assert_eq!(cfg.faults, super::super::FaultConfig::default());
    }
}
