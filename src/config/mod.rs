//! `config.toml` -> a validated [`Config`]: every limit with its default, secrets in redacting types.
//!
//! Two steps: the file is read into serde types that declare its shape (`raw`, every value with its span;
//! unknown keys collected by `unknown`), then one validation pass types and checks each value (`providers`,
//! `sections`, `contracts`, `events`, `factory`, `filters`, with the tools of `check`). Both collect every error, each
//! with file, line, field and fix, so `logslice check` reports them all. Nothing here does I/O beyond
//! reading the config file and the ABI files it names. docs/config.md lists every key.
//!
//! Rules:
//! - `${VAR}` is replaced in every string value; an unset variable is an error. Messages quote the value as
//!   written (with `${VAR}`), URLs only in redacted form, so no interpolated secret reaches a message.
//! - `[node]` is one chain, named [`DEFAULT_CHAIN`]; several are `[chains.NAME]` tables, each with every key
//!   of `[node]` and its own `chain_id`, `finality`, `max_reorg_depth`, `poll_interval` and `start_block`
//!   over `[sync]`'s (see `config::chains`). `[node]` and `[chains]` exclude each other; two chains never
//!   declare one `chain_id`. The pipeline reads one chain at a time, through [`Config::for_chain`].
//! - A chain's table (`[node]` or `[chains.NAME]`) is one provider (`url`) or the defaults of each
//!   `providers` entry (see `config::providers`); provider names are unique within the chain.
//! - A contract's `chain` names one of the chains, and is required when there are several. Names are unique
//!   on a chain; the same name on two chains shares its tables, so both entries declare the same events. A
//!   factory is an entry of its child's chain, and filtered addresses are checked against that chain's
//!   entries only.
//! - `node.transport` defaults to `ws` when `node.url` is `ws(s)://`, else `http`. With `ws` and no `ws_url`,
//!   the WebSocket URL is derived from `url` (http -> ws, https -> wss, `/v3/` -> `/ws/v3/`); for `sim://` it
//!   stays `None` (the pipeline starts the built-in node and knows its address).
//! - `node.max_retries = 0` is allowed (each request tried once); every other limit is at least 1 and every
//!   duration above zero; `initial_block_range <= max_block_range`, `initial_backoff <= max_backoff`.
//! - `database.schema` is a plain identifier (at most 63 bytes) and only applies to Postgres.
//! - Contract names are snake-cased (`name = "USDC"` is `usdc`) and unique after that; addresses are
//!   deduplicated. With `abi` and no `events`, every event of the ABI is indexed, in name order.
//! - Table names are `<contract>_<event>`; overloads of one event name get `_2`, `_3`, ... in ABI order (or
//!   `events` order without an ABI), counted over the whole ABI so that selecting a subset renames nothing.
//!   Two contracts whose tables would share a name (`token_a` + `Transfer`, `token` + `ATransfer`) are an error.
//! - `filters` (see `config::filters`) name configured events and their indexed parameters; a filter on an
//!   overloaded name applies to each overload. A filtered contract selects no anonymous event and shares no
//!   address with another entry: either would let logs the filter excludes into its tables.
//! - Two anonymous events of one contract with the same number of indexed parameters are an error: with no
//!   selector topic, nothing in a log tells them apart.

mod chains;
mod check;
mod contracts;
mod endpoint;
mod events;
mod factory;
mod filters;
mod providers;
mod raw;
mod secret;
mod sections;
mod unknown;

pub use filters::{record as filters_record, EventFilter};
pub use secret::SecretUrl;
pub use sections::*;

use std::path::{Path, PathBuf};
use std::time::Duration;

use alloy_json_abi::Event;
use alloy_primitives::{Address, B256};

/// The name of the one chain of a config with `[node]` (no `[chains]`).
pub const DEFAULT_CHAIN: &str = "default";

/// A fully validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file this was read from (used in messages).
    pub source: PathBuf,
    /// The first chain's providers: with one chain (`[node]`, or one view of [`Config::for_chain`]) the
    /// chain's. With several, read each chain's through [`Config::for_chain`].
    pub node: NodeConfig,
    /// `[node]` as the chain [`DEFAULT_CHAIN`], or the `[chains.NAME]` tables in file order; never empty.
    pub chains: Vec<ChainConfig>,
    /// `[database]`.
    pub database: DatabaseConfig,
    /// `[sync]`.
    pub sync: SyncConfig,
    /// `[[contracts]]`, in file order.
    pub contracts: Vec<ContractConfig>,
    /// `[metrics]`: absent, no metrics or health endpoint is served.
    pub metrics: Option<MetricsConfig>,
}

impl Config {
    /// Whether the config names several chains (then each runs through [`Config::for_chain`]).
    pub fn is_multichain(&self) -> bool {
        self.chains.len() > 1
    }

    /// The chains' names, in file order.
    pub fn chain_names(&self) -> Vec<&str> {
        self.chains.iter().map(|c| c.name.as_str()).collect()
    }

    /// The config as one chain sees it: that chain's providers in `node`, its finality, reorg window and
    /// poll interval in `sync`, its contracts only, and itself as the only chain. `None` for a name that is
    /// not a chain of the config.
    pub fn for_chain(&self, name: &str) -> Option<Config> {
        let chain = self.chains.iter().find(|c| c.name == name)?;
        let mut view = self.clone();
        view.node = chain.node.clone();
        view.sync.finality = chain.finality;
        view.sync.max_reorg_depth = chain.max_reorg_depth;
        view.sync.poll_interval = chain.poll_interval;
        view.sync.start_block = chain.start_block;
        view.contracts.retain(|c| c.chain == name);
        view.chains = vec![chain.clone()];
        Some(view)
    }
}

/// One chain: `[node]` (named [`DEFAULT_CHAIN`]) or a `[chains.NAME]` table, its `[sync]` overrides
/// resolved.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    /// The table's name (`default` for `[node]`): shown in logs, `status`, metrics (`chain` label) and
    /// recorded in the database beside the chain id.
    pub name: String,
    /// `chain_id`: the `eth_chainId` its providers must answer; absent, whatever they agree on.
    pub chain_id: Option<u64>,
    /// Its providers.
    pub node: NodeConfig,
    /// `finality`, default `sync.finality`.
    pub finality: Finality,
    /// `max_reorg_depth`, default `sync.max_reorg_depth`.
    pub max_reorg_depth: u64,
    /// `poll_interval`, default `sync.poll_interval`.
    pub poll_interval: Duration,
    /// `start_block`, default `sync.start_block`: for its contracts without their own.
    pub start_block: u64,
}

/// `[metrics]`: where Prometheus text (`/metrics`) and the health check (`/health`) are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsConfig {
    /// `addr`, required in the section, e.g. `127.0.0.1:9090`.
    pub addr: std::net::SocketAddr,
    /// `max_stall`, default 5m ([`DEFAULT_MAX_STALL`]): `/health` answers 503 when the checkpoint has not
    /// advanced for longer.
    pub max_stall: Duration,
}

/// Where the JSON-RPC service is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `sim://`: start the built-in simulated node in-process (query string: devnode options).
    Sim(String),
    /// A real `http(s)://` or `ws(s)://` URL; the key in its path is redacted when shown.
    Url(SecretUrl),
}

/// Which transport carries JSON-RPC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// HTTP POST.
    Http,
    /// One WebSocket connection.
    Ws,
}

/// `[node]`: the providers of the chain, each with its limits (keys set in `[node]` are every provider's
/// defaults).
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// `node.url` as one provider, or `[[node.providers]]` in file order; never empty.
    pub providers: Vec<ProviderConfig>,
}

impl NodeConfig {
    /// The longest `max_backoff` of the providers: how long the daemon waits at most between attempts.
    pub fn max_backoff(&self) -> Duration {
        self.providers
            .iter()
            .map(|p| p.max_backoff)
            .max()
            .unwrap_or(DEFAULT_MAX_BACKOFF)
    }

    /// The shortest `initial_backoff` of the providers: the daemon's first wait.
    pub fn initial_backoff(&self) -> Duration {
        self.providers
            .iter()
            .map(|p| p.initial_backoff)
            .min()
            .unwrap_or(DEFAULT_INITIAL_BACKOFF)
    }
}

/// One provider of a chain: `[node]` itself (with `node.url`) or one `[[node.providers]]` entry.
#[derive(Debug, Clone)]
pub struct ProviderConfig {
    /// `name`, default the URL's host (`sim` for `sim://`): shown in logs, errors, status and metrics.
    pub name: String,
    /// `url`.
    pub endpoint: Endpoint,
    /// `ws_url`; when absent and `transport = "ws"`, derived from `url` (`/v3/` -> `/ws/v3/`, http -> ws).
    pub ws_endpoint: Option<Endpoint>,
    /// `transport`, default http.
    pub transport: Transport,
    /// `requests_per_second`, default 25 ([`DEFAULT_REQUESTS_PER_SECOND`]): a ceiling; the rate used is
    /// learned below it.
    pub requests_per_second: u32,
    /// `credits_per_second`: absent, calls are not metered by credits.
    pub credits_per_second: Option<u32>,
    /// `method_credits`: what each call costs against `credits_per_second`.
    pub method_credits: MethodCredits,
    /// `max_concurrency`, default 8.
    pub max_concurrency: usize,
    /// `request_timeout`, default 15s.
    pub request_timeout: Duration,
    /// `max_retries`, default 8.
    pub max_retries: u32,
    /// `initial_backoff`, default 250ms.
    pub initial_backoff: Duration,
    /// `max_backoff`, default 30s.
    pub max_backoff: Duration,
    /// `max_response_bytes`, default 32 MiB.
    pub max_response_bytes: usize,
}

/// `method_credits`: credits per call of a method, and for every other method.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MethodCredits {
    /// Method name to credits.
    pub methods: std::collections::BTreeMap<String, u32>,
    /// `default`: any method not named.
    pub default: u32,
}

impl Default for MethodCredits {
    /// A large provider's compute units (interface.md): `eth_getLogs` 75, `eth_getBlockByNumber` 16,
    /// `eth_getBlockReceipts` 500, anything else 26.
    fn default() -> Self {
        let methods = [
            ("eth_getLogs", 75),
            ("eth_getBlockByNumber", 16),
            ("eth_getBlockReceipts", 500),
        ]
        .into_iter()
        .map(|(method, credits)| (method.to_owned(), credits))
        .collect();
        Self {
            methods,
            default: 26,
        }
    }
}

impl MethodCredits {
    /// What one call of `method` costs.
    pub fn of(&self, method: &str) -> u32 {
        self.methods.get(method).copied().unwrap_or(self.default)
    }
}

/// `[database]`.
#[derive(Debug, Clone)]
pub struct DatabaseConfig {
    /// `url`.
    pub url: DatabaseUrl,
    /// `schema` (Postgres only): put every table in this schema.
    pub schema: Option<String>,
    /// `max_retries`, default 5: a batch whose connection is lost (server restart, killed connection) is
    /// retried this many times on a fresh connection before the job exits 74 (Postgres).
    pub max_retries: u32,
}

/// A database location.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseUrl {
    /// `sqlite://path` (relative paths are relative to the working directory), or `sqlite::memory:`.
    Sqlite(PathBuf),
    /// `postgres://...`; the password is redacted when shown.
    Postgres(SecretUrl),
}

/// How far below the head a block is final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finality {
    /// The node's `finalized` tag.
    Finalized,
    /// `head - n`.
    Confirmations(u64),
}

/// `[sync]`.
#[derive(Debug, Clone)]
pub struct SyncConfig {
    /// `start_block`, default 0: for contracts without their own.
    pub start_block: u64,
    /// `finality`, default `finalized`.
    pub finality: Finality,
    /// `initial_block_range`, default 2000.
    pub initial_block_range: u64,
    /// `max_block_range`, default 100000.
    pub max_block_range: u64,
    /// `target_logs_per_request`, default 9500.
    pub target_logs_per_request: u64,
    /// `max_batch_logs`, default 5000: rows per committed transaction (soft; a range is never split across batches).
    pub max_batch_logs: usize,
    /// `max_queued_batches`, default 4.
    pub max_queued_batches: usize,
    /// `max_reorg_depth`, default 128.
    pub max_reorg_depth: u64,
    /// `defer_indexes_min_blocks`, default 10000: a backfill of at least this many blocks, and of at least
    /// as many as the database already covers, drops the secondary indexes and builds them once it reaches
    /// its target, instead of maintaining them row by row.
    pub defer_indexes_min_blocks: u64,
    /// `poll_interval`, default 1s.
    pub poll_interval: Duration,
    /// `shutdown_grace`, default 10s.
    pub shutdown_grace: Duration,
    /// `strict`, default false: a log matching an event's topic0 that does not decode stops with exit 65
    /// instead of being kept raw-only with a warning.
    pub strict: bool,
    /// `block_timestamps`, default true: `block_timestamp` (unix seconds) in `logs` and every typed table,
    /// from the logs' `blockTimestamp` or else from the headers of blocks with logs.
    pub block_timestamps: bool,
    /// `transactions`, default false: the `transactions` table, one row per transaction that emitted an
    /// indexed log, read from the blocks that have logs (`eth_getBlockByNumber(n, true)`).
    pub transactions: bool,
    /// `transaction_receipts`, default false (needs `transactions`): `status` and `gas_used` in
    /// `transactions`, from each transaction's receipt.
    pub transaction_receipts: bool,
}

/// One `[[contracts]]` entry.
#[derive(Debug, Clone)]
pub struct ContractConfig {
    /// `name`, validated as `[a-z][a-z0-9_]*` after snake-casing; unique on its chain (the same name on
    /// several chains shares its tables, so it has the same events on each).
    pub name: String,
    /// `chain`: the name of the chain it is on (the only chain's when there is one).
    pub chain: String,
    /// `address` or `addresses`, at least one, deduplicated.
    pub addresses: Vec<Address>,
    /// `start_block`, or `sync.start_block`.
    pub start_block: u64,
    /// The selected events (all of the ABI's events when `events` is absent).
    pub events: Vec<EventConfig>,
    /// topic0 of every non-anonymous event the contract declares: the whole ABI, selected or not (the
    /// `events` signatures when there is no ABI file). A log with one of these topic0s is that event's, so
    /// it never goes to an anonymous event's table.
    pub named_selectors: Vec<B256>,
    /// `factory`: the contract's addresses are the children this factory announces (then `addresses` is
    /// empty and `start_block` is the factory contract's).
    pub factory: Option<FactoryConfig>,
    /// `filters`: per filtered event, the topics the node is asked for; empty when unfiltered.
    pub filters: Vec<EventFilter>,
}

/// Where a factory-created contract's addresses come from: a parameter of an event of another contract.
#[derive(Debug, Clone)]
pub struct FactoryConfig {
    /// The factory's `[[contracts]]` name (snake case).
    pub contract: String,
    /// The event that announces a child (one of the factory's indexed events).
    pub event: Event,
    /// The parameter that holds the child's address.
    pub parameter: String,
    /// Its position among the event's inputs.
    pub parameter_index: usize,
}

/// One event of a contract.
#[derive(Debug, Clone)]
pub struct EventConfig {
    /// The parsed event.
    pub event: Event,
    /// `<contract>_<event>` in snake case.
    pub table: String,
}

/// One problem found in a config, located and with a fix: `config.toml:12: contracts[2].address: "0x12" is
/// not a 20-byte address (write 0x and 40 hex digits)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file the problem is in (the config, or an ABI file it names).
    pub file: String,
    /// The line of `file` it is on; `None` for what no line holds (a missing section) and in an ABI file
    /// (its parser's message says where).
    pub line: Option<usize>,
    /// Dotted path of the field, e.g. `contracts[2].address`.
    pub field: String,
    /// What is wrong.
    pub problem: String,
    /// How to fix it.
    pub fix: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        write!(f, ": {}: {} ({})", self.field, self.problem, self.fix)
    }
}

impl std::error::Error for ConfigError {}

/// Every problem found in a config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl std::fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Reads, interpolates (`${VAR}` from the process environment) and validates a config file.
///
/// # Errors
/// Every problem found, each naming file, field and fix.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    match std::fs::read_to_string(path) {
        Ok(text) => load_str(path, &text, &|name| std::env::var(name).ok()),
        Err(err) => Err(ConfigErrors(vec![ConfigError {
            file: path.display().to_string(),
            line: None,
            field: "(file)".to_owned(),
            problem: format!("cannot read it: {err}"),
            fix: "check the path, or pass --config".to_owned(),
        }])),
    }
}

/// Like [`load`], from text, with an explicit environment (for tests). ABI paths are relative to
/// `path`'s directory.
///
/// # Errors
/// Every problem found, each naming file, field and fix.
pub fn load_str(
    path: &Path,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, ConfigErrors> {
    let mut checker = check::Checker::new(path.display().to_string(), text, env);
    let mut ignored = Vec::new();
    let parsed = toml::de::Deserializer::parse(text).and_then(|deserializer| {
        serde_ignored::deserialize(deserializer, |path| {
            ignored.push(unknown::segments(&path));
        })
    });
    let root: raw::RawConfig = match parsed {
        Ok(root) => root,
        Err(err) => {
            // toml's own Display quotes the offending line, which may hold a secret: give position and
            // message only.
            let (line, column) = err
                .span()
                .map_or((0, 0), |span| line_column(text, span.start));
            checker.error(
                None,
                &format!("line {line}, column {column}"),
                err.message().trim_end().to_owned(),
                "fix the TOML syntax",
            );
            return Err(ConfigErrors(checker.errors));
        }
    };
    unknown::report(&mut checker, text, &ignored);
    let config = validate(&mut checker, path, &root);
    if !checker.errors.is_empty() {
        return Err(ConfigErrors(checker.errors));
    }
    Ok(config)
}

/// The validation pass: every section of `root` typed and checked, every problem recorded in `checker`.
fn validate(checker: &mut check::Checker<'_>, path: &Path, root: &raw::RawConfig) -> Config {
    const DATABASE_FIX: &str = "add a [database] section with url = \"sqlite://logslice.db\"";
    // A chain's defaults are `[sync]`'s, but messages keep the sections' order: the node's first.
    let before_sync = checker.errors.len();
    let sync = checker.table(root.sync.as_ref(), "sync", "write it as a [sync] section");
    let sync = sections::sync(checker, sync.map_or(&raw::RawSync::default(), |(t, _)| t));
    let sync_errors = checker.errors.split_off(before_sync);
    let chains = chains::chains(checker, root, &sync);
    if root.database.is_none() {
        checker.error(None, "database", "is missing", DATABASE_FIX);
    }
    let database = checker.table(
        root.database.as_ref(),
        "database",
        "write it as a [database] section",
    );
    let database = match database {
        Some((table, span)) => sections::database(checker, table, Some(&span)),
        None => sections::database(checker, &raw::RawDatabase::default(), None),
    };
    checker.errors.extend(sync_errors);
    let base_dir = path.parent().unwrap_or(Path::new(""));
    let contracts = contracts::contracts(checker, root.contracts.as_ref(), base_dir, &chains);
    let metrics = checker
        .table(
            root.metrics.as_ref(),
            "metrics",
            "write it as a [metrics] section",
        )
        .and_then(|(table, span)| sections::metrics(checker, table, &span));
    Config {
        source: path.to_path_buf(),
        node: chains[0].node.clone(),
        chains,
        database,
        sync,
        contracts,
        metrics,
    }
}

/// 1-based line and column of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
#[path = "lines_tests.rs"]
mod lines_tests;

#[cfg(test)]
#[path = "providers_tests.rs"]
mod providers_tests;

#[cfg(test)]
#[path = "chains_tests.rs"]
mod chains_tests;
