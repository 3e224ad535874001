//! What a devnode is started with: chain shape, limits, faults, and the `sim://?key=value` option syntax.
//!
//! Every option has one name used by both `sim://` URLs and (with dashes) the `logslice devnode` flags, a
//! default as a `const`, and validation that names the option and the fix. Nothing here starts anything.

use std::net::SocketAddr;
use std::time::Duration;

use super::credits::MethodCredits;
use super::log_indexes::{parse_base, DEFAULT_LOG_INDEX_BASE};
use super::overcap::{OvercapConfig, OVERCAP_OPTION_NAMES};
use super::shapes::{ShapeConfig, SHAPE_OPTION_NAMES};

/// Default chain id.
pub const DEFAULT_CHAIN_ID: u64 = 1337;
/// Default initial head: the default chain has about 200,000 blocks and 1,000,000 logs.
pub const DEFAULT_BLOCKS: u64 = 200_000;
/// Default timestamp of block 0 (2023-11-14T22:13:20Z); block `n` is 12 s later per block.
pub const DEFAULT_GENESIS_TIMESTAMP: u64 = 1_700_000_000;
/// Default distance from the head to the `finalized` block.
pub const DEFAULT_FINALIZED_DEPTH: u64 = 64;
/// Default distance from the head to the `safe` block.
pub const DEFAULT_SAFE_DEPTH: u64 = 32;
/// Default depth of a scripted reorg.
pub const DEFAULT_REORG_DEPTH: u64 = 3;
/// spec: `eth_getLogs` returns at most 10,000 results.
pub const DEFAULT_MAX_RESULTS: usize = 10_000;
/// spec: at most 5,000 parameters in one `eth_getLogs` request.
pub const DEFAULT_MAX_PARAMS: usize = 5_000;
/// spec: an `eth_getLogs` query may take at most 10 seconds.
pub const DEFAULT_QUERY_BUDGET: Duration = Duration::from_secs(10);
/// Modelled cost of scanning one block: 5 µs, so 2,000,000 blocks alone exceed the 10 s budget.
pub const DEFAULT_BLOCK_COST: Duration = Duration::from_micros(5);
/// Modelled cost of one matched log: 100 µs, so 10,000 logs take 1 s.
pub const DEFAULT_LOG_COST: Duration = Duration::from_micros(100);
/// geth's limit on the number of calls in one batch.
pub const DEFAULT_MAX_BATCH: usize = 1_000;
/// Default `Retry-After` of a 429, in seconds.
pub const DEFAULT_RETRY_AFTER_SECS: u64 = 1;
/// Default lag of a lagging backend, in blocks.
pub const DEFAULT_LAG_DEPTH: u64 = 5;

/// Pairs the opt-in factory creates by the initial head when switched on without a count.
pub const DEFAULT_FACTORY_CHILDREN: u64 = 200;

/// The opt-in Uniswap V2 factory ([`contracts::FACTORY`](super::contracts::FACTORY)) and its children.
///
/// Pairs are created at a rate growing with the height (children multiply as the chain goes on), each at an
/// address derived from the seed; a few are busy, most quiet. Some emit in their creating transaction before
/// the `PairCreated` log, some again later in the same block; none before its creating transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactoryConfig {
    /// Pairs created by the initial head ([`ChainConfig::blocks`]); more follow as blocks are produced.
    pub children: u64,
    /// Blocks in the second half of the initial chain where the pairs' logs together exceed 10,000 (no pair
    /// alone comes near).
    pub bursts: u32,
}

impl Default for FactoryConfig {
    fn default() -> Self {
        Self {
            children: DEFAULT_FACTORY_CHILDREN,
            bursts: 0,
        }
    }
}

/// The shape and motion of the simulated chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainConfig {
    /// `eth_chainId`.
    pub chain_id: u64,
    /// The head at start.
    pub blocks: u64,
    /// Multiplies the log count of ordinary blocks (1.0 = default density; the >10,000-log blocks stay).
    pub density: f64,
    /// Timestamp of block 0.
    pub genesis_timestamp: u64,
    /// A new block every this often; `None` = only on [`DevNode::mine`](super::DevNode::mine).
    pub block_time: Option<Duration>,
    /// `finalized` = head minus this.
    pub finalized_depth: u64,
    /// `safe` (accepted by `eth_getLogs` only) = head minus this.
    pub safe_depth: u64,
    /// Reorg whenever the head reaches a multiple of this.
    pub reorg_every: Option<u64>,
    /// Depth of the scripted reorgs.
    pub reorg_depth: u64,
    /// Also emit from [`contracts::ANON`](super::contracts::ANON), whose anonymous events collide with its
    /// named ones. Off by default: with it off the chain is byte for byte the default chain; with it on every
    /// contract's logs are drawn anew (the emitters share one random stream).
    pub anon_contract: bool,
    /// The opt-in factory and its children; `None` (the default) leaves the chain byte for byte the default
    /// chain. Its transactions follow each block's others, so the other contracts' logs stay as they are.
    pub factory: Option<FactoryConfig>,
    /// What the node answers for the `finalized` and `safe` tags (default: a block, as the spec's service).
    pub finality: Finality,
    /// Put `blockTimestamp` in log objects, as geth and most providers do. Off by default: the spec's log
    /// object has no such field, and the default chain's answers stay byte for byte the same.
    pub log_timestamps: bool,
    /// Serve `eth_getBlockReceipts` (off: `-32601`, as a node without it answers).
    pub block_receipts: bool,
    /// Refuse `eth_getTransactionReceipt` with `-32601` (`tx_receipts=off`): a node that serves no receipts
    /// at all once `block_receipts` is off too.
    pub no_tx_receipts: bool,
    /// Blocks where one contract alone is over the result cap (none by default).
    pub overcap: OvercapConfig,
    /// Shapes of real chains the default chain lacks (none by default).
    pub shapes: ShapeConfig,
    /// A block whose logs are numbered from [`ChainConfig::log_index_base`] instead of 0
    /// (`high_log_indexes=N`; none by default).
    pub high_log_indexes: Option<u64>,
    /// The first log index of that block (`log_index_base=N`, decimal or `0x` hex; default
    /// [`DEFAULT_LOG_INDEX_BASE`], 0xffffffe2); its other logs follow one by one.
    pub log_index_base: u64,
}

impl Default for ChainConfig {
    fn default() -> Self {
        Self {
            chain_id: DEFAULT_CHAIN_ID,
            blocks: DEFAULT_BLOCKS,
            density: 1.0,
            genesis_timestamp: DEFAULT_GENESIS_TIMESTAMP,
            block_time: None,
            finalized_depth: DEFAULT_FINALIZED_DEPTH,
            safe_depth: DEFAULT_SAFE_DEPTH,
            reorg_every: None,
            reorg_depth: DEFAULT_REORG_DEPTH,
            anon_contract: false,
            factory: None,
            finality: Finality::Block,
            log_timestamps: false,
            block_receipts: false,
            no_tx_receipts: false,
            overcap: OvercapConfig::default(),
            shapes: ShapeConfig::default(),
            high_log_indexes: None,
            log_index_base: DEFAULT_LOG_INDEX_BASE,
        }
    }
}

/// What a node answers for the `finalized` and `safe` block tags: nodes without a finality gadget, or clients
/// that never learn one, do not answer a block (`docs/node-service.md`, "Block tags").
///
/// | mode | `eth_getBlockByNumber("finalized")` | `eth_getBlockByNumber("safe")` | `eth_getLogs` with either tag |
/// |---|---|---|---|
/// | `Block` | the finalized block | `-32602` (spec: `safe` is not supported) | head minus the depth |
/// | `Null` | `null` | `null` | `-32000` "finalized header not found" / "safe header not found" |
/// | `Error` | `-32000` "finalized block not found" | `-32000` "safe block not found" | as `Null` |
///
/// `Null` and `Error` model clients other than the spec's service, which accept `safe` in
/// `eth_getBlockByNumber` as geth does. For `eth_getLogs` both use geth's filter wording: geth resolves a
/// tag it has no header for to that error, never to an empty answer, and so do other mainstream nodes;
/// a `null` block cannot bound a range. Every other tag and number is answered as in `Block`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Finality {
    /// A block: head minus [`ChainConfig::finalized_depth`] (the spec's service, and mainnet today).
    #[default]
    Block,
    /// `null`: the tags are known but no block is finalized or safe (a fresh devnet, a client that never
    /// sets them).
    Null,
    /// `-32000` "finalized block not found" / "safe block not found" (geth before the merge).
    Error,
}

impl Finality {
    /// Parses `block`, `null`, `error`.
    ///
    /// # Errors
    /// The accepted names, when `text` is none of them.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "block" => Ok(Self::Block),
            "null" => Ok(Self::Null),
            "error" => Ok(Self::Error),
            other => Err(format!(
                "{other:?} is not a finality answer (use block, null or error)"
            )),
        }
    }
}

/// How a too-many-results error is worded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TooManyStyle {
    /// The spec's: `-32005` "query returned more than 10000 results", no suggestion.
    #[default]
    Plain,
    /// Infura's: `-32005`, the message ends "Try with this block range [0xSTART, 0xEND].", `data` has
    /// `from`/`to`.
    Infura,
    /// Alchemy's: `-32602` "Log response size exceeded. ... this block range should work: [0xSTART, 0xEND]".
    Alchemy,
    /// reth's: `-32602` "query exceeds max results 10000, retry with the range START-END" (decimal).
    Reth,
    /// reth's wording under `-32000`, as some reth-based providers answer.
    RethServerError,
}

impl TooManyStyle {
    /// Parses `plain`, `infura`, `alchemy`, `reth`, `reth-32000`.
    ///
    /// # Errors
    /// The accepted names, when `text` is none of them.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "plain" | "spec" => Ok(Self::Plain),
            "infura" => Ok(Self::Infura),
            "alchemy" => Ok(Self::Alchemy),
            "reth" => Ok(Self::Reth),
            "reth-32000" | "reth_32000" => Ok(Self::RethServerError),
            other => Err(format!(
                "{other:?} is not a wording (use plain, infura, alchemy, reth or reth-32000)"
            )),
        }
    }
}

/// The spec's limits and how query time is modelled.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitConfig {
    /// Most logs one `eth_getLogs` may return.
    pub max_results: usize,
    /// Most addresses plus topic entries in one filter.
    pub max_params: usize,
    /// Modelled query time allowed before "query timeout exceeded".
    pub query_budget: Duration,
    /// Modelled time per block scanned.
    pub block_cost: Duration,
    /// Modelled time per log matched.
    pub log_cost: Duration,
    /// Wording of the too-many-results error.
    pub too_many_style: TooManyStyle,
    /// Most calls in one batch.
    pub max_batch: usize,
}

impl Default for LimitConfig {
    fn default() -> Self {
        Self {
            max_results: DEFAULT_MAX_RESULTS,
            max_params: DEFAULT_MAX_PARAMS,
            query_budget: DEFAULT_QUERY_BUDGET,
            block_cost: DEFAULT_BLOCK_COST,
            log_cost: DEFAULT_LOG_COST,
            too_many_style: TooManyStyle::Plain,
            max_batch: DEFAULT_MAX_BATCH,
        }
    }
}

/// Injected faults. Probabilities are per request (HTTP request or WebSocket message) unless said otherwise,
/// decided from `hash(seed, request counter)`.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultConfig {
    /// HTTP 429 with `Retry-After` (over WebSocket: a `-32005` rate-limit error).
    pub http_429: f64,
    /// `Retry-After` seconds of every 429.
    pub retry_after_secs: u64,
    /// HTTP 500, 502 or 503 (over WebSocket: a `-32603` error).
    pub http_5xx: f64,
    /// Fixed latency added to every request.
    pub latency: Duration,
    /// Up to this much more latency, drawn per request.
    pub jitter: Duration,
    /// Connection dropped after part of the response (over WebSocket: the socket is closed).
    pub drop: f64,
    /// Per call: `-32603` internal error.
    pub internal_error: f64,
    /// Per call: Infura's rate-limit wording, `-32005` "project ID request rate exceeded".
    pub rate_limit_error: f64,
    /// The request is served by a backend `lag_depth` blocks behind.
    pub lag: f64,
    /// How far behind a lagging backend is.
    pub lag_depth: u64,
    /// Per `eth_getLogs` call: a stale replica adds the orphaned logs of the range with `removed: true`.
    pub stale_replica: f64,
    /// Per `eth_getLogs` call: the answer's list of logs is sent twice, the second copy after the first
    /// (every log delivered twice, identical: a node repeating a range).
    pub repeated_logs: f64,
    /// Per `eth_getLogs` call: the answer's first log is followed by another log at the same block and log
    /// index with other data (a conflicting duplicate). Decided before `repeated_logs`.
    pub conflicting_log: f64,
    /// Calls per second (each item of a batch is a call) above which requests get HTTP 429, a batch over
    /// what is left of the second refused whole; `None` = unlimited.
    pub max_rps: Option<u32>,
    /// Credits per second ([`Self::method_credits`], a batch costing the sum of its calls) above which
    /// requests get HTTP 429; `None` = unlimited.
    pub max_cps: Option<u32>,
    /// What each method costs against `max_cps`.
    pub method_credits: MethodCredits,
    /// Every request is served as by a node this many blocks behind the true head (finality too).
    pub lag_blocks: u64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        Self {
            http_429: 0.0,
            retry_after_secs: DEFAULT_RETRY_AFTER_SECS,
            http_5xx: 0.0,
            latency: Duration::ZERO,
            jitter: Duration::ZERO,
            drop: 0.0,
            internal_error: 0.0,
            rate_limit_error: 0.0,
            lag: 0.0,
            lag_depth: DEFAULT_LAG_DEPTH,
            stale_replica: 0.0,
            repeated_logs: 0.0,
            conflicting_log: 0.0,
            max_rps: None,
            max_cps: None,
            method_credits: MethodCredits::default(),
            lag_blocks: 0,
        }
    }
}

/// Everything a devnode is started with.
#[derive(Debug, Clone, PartialEq)]
pub struct DevNodeConfig {
    /// Listen address; port 0 picks a free one.
    pub addr: SocketAddr,
    /// The only API key accepted.
    pub key: String,
    /// Seed of the chain and of every fault decision.
    pub seed: u64,
    /// Chain shape and motion.
    pub chain: ChainConfig,
    /// Limits of `eth_getLogs` and batches.
    pub limits: LimitConfig,
    /// Injected faults (all off by default).
    pub faults: FaultConfig,
}

impl Default for DevNodeConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            key: "demo".into(),
            seed: 7,
            chain: ChainConfig::default(),
            limits: LimitConfig::default(),
            faults: FaultConfig::default(),
        }
    }
}

/// Every option name `set_option` accepts, for error messages.
pub const OPTION_NAMES: &[&str] = &[
    "addr",
    "key",
    "seed",
    "preset",
    "chain_id",
    "blocks",
    "density",
    "genesis_timestamp",
    "block_time",
    "finalized_depth",
    "safe_depth",
    "reorg_every",
    "reorg_depth",
    "anon_contract",
    "factory",
    "factory_children",
    "factory_bursts",
    "finality",
    "log_timestamps",
    "high_log_indexes",
    "log_index_base",
    "max_results",
    "max_params",
    "query_budget",
    "block_cost",
    "log_cost",
    "too_many_style",
    "max_batch",
    "fault_429",
    "retry_after",
    "fault_5xx",
    "latency",
    "jitter",
    "fault_drop",
    "fault_internal",
    "fault_rate_limit",
    "fault_lag",
    "lag_depth",
    "fault_stale_replica",
    "fault_repeated_logs",
    "fault_conflicting_log",
    "max_rps",
    "max_cps",
    "method_credits",
    "lag_blocks",
];

fn parse_num<T: std::str::FromStr>(value: &str) -> Result<T, String> {
    value
        .parse()
        .map_err(|_| format!("{value:?} is not a number"))
}

fn parse_probability(value: &str) -> Result<f64, String> {
    let p: f64 = parse_num(value)?;
    if (0.0..=1.0).contains(&p) {
        Ok(p)
    } else {
        Err(format!(
            "{value} is not a probability (use a number from 0 to 1)"
        ))
    }
}

fn parse_switch(value: &str) -> Result<bool, String> {
    match value {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        other => Err(format!("{other:?} is not a switch (use on or off)")),
    }
}

fn parse_duration(value: &str) -> Result<Duration, String> {
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    humantime::parse_duration(value)
        .map_err(|err| format!("{value:?} is not a duration like \"2s\" or \"150ms\": {err}"))
}

fn parse_optional<T: std::str::FromStr + PartialEq + Default>(
    value: &str,
) -> Result<Option<T>, String> {
    if value == "off" || value == "none" {
        return Ok(None);
    }
    let n: T = parse_num(value)?;
    Ok((n != T::default()).then_some(n))
}

impl DevNodeConfig {
    /// Builds a config from a `sim://` URL; its query string may set any option of [`OPTION_NAMES`]
    /// (`sim://?seed=7&blocks=5000&fault_429=0.1`; dashes work as underscores). `sim://` alone = defaults.
    ///
    /// # Errors
    /// A message naming the bad option and what it accepts.
    pub fn from_sim_url(url: &str) -> Result<Self, String> {
        let Some(rest) = url.strip_prefix("sim://") else {
            return Err(format!("{url:?} is not a sim:// URL"));
        };
        let query = match rest.split_once('?') {
            Some((path, query)) if path.is_empty() || path == "/" => query,
            None if rest.is_empty() || rest == "/" => "",
            _ => {
                return Err(format!(
                    "{url:?}: a sim:// URL has no host or path, only ?options"
                ))
            }
        };
        let mut cfg = Self::default();
        for (name, value) in url::form_urlencoded::parse(query.as_bytes()) {
            cfg.set_option(&name, &value)?;
        }
        Ok(cfg)
    }

    /// Sets one option by name (see [`OPTION_NAMES`]).
    ///
    /// # Errors
    /// A message naming the option, when it is unknown or `value` does not parse.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<(), String> {
        let name = name.replace('-', "_");
        let result = match name.as_str() {
            "addr" => value
                .parse()
                .map(|addr| self.addr = addr)
                .map_err(|_| format!("{value:?} is not host:port")),
            "key" => {
                self.key = value.to_owned();
                Ok(())
            }
            "seed" => parse_num(value).map(|v| self.seed = v),
            // The whole chain shape: options after it refine it (`sim://?preset=factory&blocks=20000`).
            "preset" => ChainConfig::preset(value).map(|chain| self.chain = chain),
            "chain_id" => parse_num(value).map(|v| self.chain.chain_id = v),
            "blocks" => parse_num(value).map(|v| self.chain.blocks = v),
            "density" => parse_num::<f64>(value).and_then(|v| {
                if v >= 0.0 && v.is_finite() {
                    self.chain.density = v;
                    Ok(())
                } else {
                    Err(format!("{value} is not a non-negative factor"))
                }
            }),
            "genesis_timestamp" => parse_num(value).map(|v| self.chain.genesis_timestamp = v),
            "block_time" => {
                if value == "off" || value == "none" {
                    self.chain.block_time = None;
                    Ok(())
                } else {
                    parse_duration(value)
                        .map(|d| self.chain.block_time = (!d.is_zero()).then_some(d))
                }
            }
            "finalized_depth" => parse_num(value).map(|v| self.chain.finalized_depth = v),
            "safe_depth" => parse_num(value).map(|v| self.chain.safe_depth = v),
            "reorg_every" => parse_optional(value).map(|v| self.chain.reorg_every = v),
            "reorg_depth" => parse_num(value).map(|v| self.chain.reorg_depth = v),
            "anon_contract" => parse_switch(value).map(|v| self.chain.anon_contract = v),
            "factory" => parse_switch(value).map(|on| {
                self.chain.factory = on.then(|| self.chain.factory.unwrap_or_default());
            }),
            "factory_children" => parse_num::<u64>(value).map(|children| {
                let bursts = self.chain.factory.map_or(0, |factory| factory.bursts);
                self.chain.factory = (children > 0).then_some(FactoryConfig { children, bursts });
            }),
            "factory_bursts" => parse_num(value).map(|bursts| {
                let factory = self
                    .chain
                    .factory
                    .get_or_insert_with(FactoryConfig::default);
                factory.bursts = bursts;
            }),
            "finality" => Finality::parse(value).map(|v| self.chain.finality = v),
            "log_timestamps" => parse_switch(value).map(|v| self.chain.log_timestamps = v),
            "block_receipts" => parse_switch(value).map(|v| self.chain.block_receipts = v),
            "tx_receipts" => parse_switch(value).map(|v| self.chain.no_tx_receipts = !v),
            "high_log_indexes" => parse_optional(value).map(|v| self.chain.high_log_indexes = v),
            "log_index_base" => parse_base(value).map(|v| self.chain.log_index_base = v),
            name if OVERCAP_OPTION_NAMES.contains(&name) => {
                self.chain.overcap.set_option(name, value)
            }
            name if SHAPE_OPTION_NAMES.contains(&name) => self.chain.shapes.set_option(name, value),
            "max_results" => parse_num(value).map(|v| self.limits.max_results = v),
            "max_params" => parse_num(value).map(|v| self.limits.max_params = v),
            "query_budget" => parse_duration(value).map(|v| self.limits.query_budget = v),
            "block_cost" => parse_duration(value).map(|v| self.limits.block_cost = v),
            "log_cost" => parse_duration(value).map(|v| self.limits.log_cost = v),
            "too_many_style" => TooManyStyle::parse(value).map(|v| self.limits.too_many_style = v),
            "max_batch" => parse_num(value).map(|v| self.limits.max_batch = v),
            "fault_429" => parse_probability(value).map(|v| self.faults.http_429 = v),
            "retry_after" => parse_num(value).map(|v| self.faults.retry_after_secs = v),
            "fault_5xx" => parse_probability(value).map(|v| self.faults.http_5xx = v),
            "latency" => parse_duration(value).map(|v| self.faults.latency = v),
            "jitter" => parse_duration(value).map(|v| self.faults.jitter = v),
            "fault_drop" => parse_probability(value).map(|v| self.faults.drop = v),
            "fault_internal" => parse_probability(value).map(|v| self.faults.internal_error = v),
            "fault_rate_limit" => {
                parse_probability(value).map(|v| self.faults.rate_limit_error = v)
            }
            "fault_lag" => parse_probability(value).map(|v| self.faults.lag = v),
            "lag_depth" => parse_num(value).map(|v| self.faults.lag_depth = v),
            "fault_stale_replica" => {
                parse_probability(value).map(|v| self.faults.stale_replica = v)
            }
            "fault_repeated_logs" => {
                parse_probability(value).map(|v| self.faults.repeated_logs = v)
            }
            "fault_conflicting_log" => {
                parse_probability(value).map(|v| self.faults.conflicting_log = v)
            }
            "max_rps" => parse_optional(value).map(|v| self.faults.max_rps = v),
            "max_cps" => parse_optional(value).map(|v| self.faults.max_cps = v),
            "method_credits" => MethodCredits::parse(value).map(|v| self.faults.method_credits = v),
            "lag_blocks" => parse_num(value).map(|v| self.faults.lag_blocks = v),
            _ => {
                let nearest = OPTION_NAMES
                    .iter()
                    .chain(OVERCAP_OPTION_NAMES)
                    .chain(SHAPE_OPTION_NAMES)
                    .map(|candidate| (strsim::levenshtein(candidate, &name), candidate))
                    .min()
                    .filter(|(distance, _)| *distance <= 3)
                    .map(|(_, candidate)| format!(" (did you mean {candidate:?}?)"))
                    .unwrap_or_default();
                return Err(format!("unknown devnode option {name:?}{nearest}"));
            }
        };
        result.map_err(|reason| format!("devnode option {name}: {reason}"))
    }
}

#[cfg(test)]
mod tests;
