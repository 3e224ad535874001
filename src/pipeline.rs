//! Wires the stages: config -> rpc client -> planner -> fetch -> decode -> sink, with bounded channels and
//! one cancellation token. The only module that knows every stage.
//!
//! Contracts are indexed together: each range asks for the addresses of every contract whose next block
//! is at or below the range's start (a contract "joins" at its own next block, which the planner treats as a
//! boundary), and each committed batch moves the checkpoint of every contract it covered, in the same
//! transaction as its rows. A contract added later is therefore backfilled from its own start while the
//! others wait at their checkpoints, and nobody refetches what is committed.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy_primitives::{Address, B256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, DatabaseUrl, Endpoint, NodeConfig, Transport};
use crate::decode::EventDecoder;
use crate::devnode::{DevNode, DevNodeConfig};
use crate::fetch::{self, Fetched, Gate, GateConfig, OnSplit, Selection};
use crate::observe::Observer;
use crate::planner::{Planner, PlannerConfig};
use crate::primitives::{BlockNumber, BlockRange};
use crate::rpc::{BlockTag, Client, ClientOptions};
use crate::sink::{self, Batch, Checkpoint, ContractSpec, Sink, SqliteSink, TableSpec, TypedRow};

/// How far `sync` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// A block number.
    Number(BlockNumber),
    /// The node's head.
    Latest,
    /// The node's safe head (the spec's nodes refuse `safe`; then `finalized` is used).
    Safe,
    /// The node's finalized block.
    Finalized,
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "latest" => Ok(Target::Latest),
            "safe" => Ok(Target::Safe),
            "finalized" => Ok(Target::Finalized),
            n => n
                .replace('_', "")
                .parse()
                .map(Target::Number)
                .map_err(|_| format!("{n:?} is not a block number, latest, safe or finalized")),
        }
    }
}

/// Why a job stopped. [`crate::exit::code`] maps each to an exit code of `interface.md`.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot work (beyond what `config` validates alone).
    #[error("{0}")]
    Config(String),
    /// The node failed or answered something unusable.
    #[error("node {node}: {source}")]
    Node {
        /// The node, redacted.
        node: String,
        /// What happened.
        #[source]
        source: fetch::Error,
    },
    /// The node's data cannot be right.
    #[error("{0}")]
    NodeData(String),
    /// The database failed.
    #[error("database {database}: {source}")]
    Database {
        /// The database, redacted.
        database: String,
        /// What happened.
        #[source]
        source: sink::Error,
    },
    /// SIGINT/SIGTERM.
    #[error("interrupted; everything committed before the signal is intact")]
    Interrupted,
}

/// What a `sync` did.
#[derive(Debug, Clone, Default)]
pub struct SyncReport {
    /// The block synced to.
    pub target: BlockNumber,
    /// Raw logs committed in this run (including re-commits of an interrupted batch).
    pub logs: u64,
    /// Typed rows committed in this run.
    pub typed_rows: u64,
    /// Batches committed.
    pub batches: u64,
    /// Logs that matched an event's topic0 but did not decode (kept raw only; `sync.strict` stops instead).
    pub undecodable: u64,
    /// Requests sent, errors seen, retries, splits.
    pub requests: u64,
    /// Error answers.
    pub errors: u64,
    /// Retries.
    pub retries: u64,
    /// Split answers.
    pub splits: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// A connected node: the client, its gate, and the in-process devnode behind `sim://`, kept alive.
pub struct Node {
    /// The client.
    pub client: Arc<Client>,
    /// The gate every request passes.
    pub gate: Arc<Gate>,
    /// Redacted, for messages.
    pub display: String,
    _devnode: Option<DevNode>,
}

impl Node {
    /// Connects to the configured node, starting the built-in one for `sim://`. Sends nothing yet.
    ///
    /// # Errors
    /// [`Error::Config`] for a bad `sim://` option; [`Error::Node`] when no client can be built.
    pub async fn connect(config: &NodeConfig) -> Result<Self, Error> {
        let options = ClientOptions {
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
            max_idle_connections: config.max_concurrency,
        };
        let gate = Arc::new(Gate::new(GateConfig {
            max_concurrency: config.max_concurrency,
            requests_per_second: config.requests_per_second,
            max_retries: config.max_retries,
            initial_backoff: config.initial_backoff,
            max_backoff: config.max_backoff,
        }));
        let endpoint = match config.transport {
            Transport::Ws => config.ws_endpoint.as_ref().unwrap_or(&config.endpoint),
            Transport::Http => &config.endpoint,
        };
        let (url, devnode) = match endpoint {
            Endpoint::Url(url) => (url.clone(), None),
            Endpoint::Sim(sim) => {
                let devnode_config = DevNodeConfig::from_sim_url(sim)
                    .map_err(|e| Error::Config(format!("node.url: {e}")))?;
                let devnode = DevNode::start(devnode_config).await.map_err(|e| {
                    Error::Config(format!("node.url: cannot start the built-in node: {e}"))
                })?;
                let raw = match config.transport {
                    Transport::Http => devnode.http_url(),
                    Transport::Ws => devnode.ws_url(),
                };
                let url = url::Url::parse(&raw)
                    .map_err(|e| Error::Config(format!("node.url: built-in node address: {e}")))?;
                (crate::config::SecretUrl::new(url), Some(devnode))
            }
        };
        let display = url.to_string();
        let client = match config.transport {
            Transport::Http => Client::http(&url, options).map_err(|e| Error::Node {
                node: display.clone(),
                source: fetch::Error::Fatal {
                    method: "connect",
                    source: e,
                },
            })?,
            Transport::Ws => Client::ws(&url, options),
        };
        Ok(Self {
            client: Arc::new(client),
            gate,
            display,
            _devnode: devnode,
        })
    }

    fn error(&self) -> impl Fn(fetch::Error) -> Error + '_ {
        |source| match source {
            fetch::Error::Interrupted => Error::Interrupted,
            source => Error::Node {
                node: self.display.clone(),
                source,
            },
        }
    }

    fn add_stats(&self, report: &mut SyncReport) {
        use std::sync::atomic::Ordering::Relaxed;
        let stats = &self.gate.stats;
        report.requests = stats.requests.load(Relaxed);
        report.errors = stats.errors.load(Relaxed);
        report.retries = stats.retries.load(Relaxed);
        report.splits = stats.splits.load(Relaxed);
    }

    /// `eth_chainId`, through the gate.
    ///
    /// # Errors
    /// [`Error::Node`].
    pub async fn chain_id(&self) -> Result<u64, Error> {
        self.gate
            .run("eth_chainId", OnSplit::Retry, || self.client.chain_id())
            .await
            .map_err(self.error())
    }

    /// Resolves a target to a block number.
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::NodeData`] when the node does not know its own tagged block.
    pub async fn resolve(&self, target: Target) -> Result<BlockNumber, Error> {
        let tag = match target {
            Target::Number(n) => return Ok(n),
            Target::Latest => {
                return self
                    .gate
                    .run("eth_blockNumber", OnSplit::Retry, || {
                        self.client.block_number()
                    })
                    .await
                    .map_err(self.error())
            }
            Target::Safe => BlockTag::Safe,
            Target::Finalized => BlockTag::Finalized,
        };
        let header = match self
            .gate
            .run("eth_getBlockByNumber", OnSplit::Retry, || {
                self.client.header(tag)
            })
            .await
        {
            // spec: getBlockByNumber does not support `safe`; `finalized` is to be used instead.
            Err(fetch::Error::Fatal { .. }) if tag == BlockTag::Safe => {
                tracing::warn!("the node refuses the `safe` tag; syncing to `finalized` instead");
                self.gate
                    .run("eth_getBlockByNumber", OnSplit::Retry, || {
                        self.client.header(BlockTag::Finalized)
                    })
                    .await
            }
            other => other,
        }
        .map_err(self.error())?;
        header.map(|h| h.number).ok_or_else(|| {
            Error::NodeData(format!(
                "node {}: it answered null for its own {tag:?} block",
                self.display
            ))
        })
    }
}

/// Opens the configured database.
///
/// # Errors
/// [`Error::Database`].
pub async fn open_sink(config: &Config) -> Result<(Sink, String), Error> {
    match &config.database.url {
        DatabaseUrl::Sqlite(path) => {
            let display = format!("sqlite://{}", path.display());
            let sink = SqliteSink::open(path).await.map_err(|source| Error::Database { database: display.clone(), source })?;
            Ok((Sink::Sqlite(sink), display))
        }
        DatabaseUrl::Postgres(url) => Err(Error::Config(format!(
            "{}: database.url: {url}: the Postgres backend is not available in this build yet (use sqlite://PATH)",
            config.source.display()
        ))),
    }
}

/// One configured contract at run time.
struct Contract {
    name: String,
    addresses: Vec<Address>,
    /// First block not yet committed.
    next: BlockNumber,
    /// Indexes into `decoders`.
    tables: Vec<usize>,
    /// topic0 of each non-anonymous event; `None` if an anonymous event forbids a topic0 filter.
    selectors: Option<Vec<B256>>,
}

/// What a config asks to index, resolved: decoders, tables, and contracts with their next blocks.
pub struct Job {
    contracts: Arc<Vec<Contract>>,
    decoders: Vec<EventDecoder>,
    tables: Vec<TableSpec>,
    specs: Vec<ContractSpec>,
    by_address: HashMap<Address, Vec<usize>>,
    strict: bool,
}

impl Job {
    /// Resolves every configured event into a decoder and a table.
    ///
    /// # Errors
    /// [`Error::Config`] when an event does not resolve.
    pub fn new(config: &Config) -> Result<Self, Error> {
        let mut decoders = Vec::new();
        let mut tables = Vec::new();
        let mut contracts = Vec::new();
        let mut specs = Vec::new();
        for contract in &config.contracts {
            let mut table_idxs = Vec::new();
            let mut selectors = Some(Vec::new());
            let mut events = Vec::new();
            for event in &contract.events {
                let decoder = EventDecoder::new(&event.event).map_err(|e| {
                    Error::Config(format!(
                        "{}: contracts.{}: {e}",
                        config.source.display(),
                        contract.name
                    ))
                })?;
                match (decoder.selector(), selectors.as_mut()) {
                    (Some(selector), Some(list)) => list.push(selector),
                    (None, _) => selectors = None,
                    (Some(_), None) => {}
                }
                events.push(format!("{} -> {}", decoder.signature(), event.table));
                tables.push(TableSpec {
                    name: event.table.clone(),
                    columns: decoder.columns().to_vec(),
                });
                table_idxs.push(decoders.len());
                decoders.push(decoder);
            }
            contracts.push(Contract {
                name: contract.name.clone(),
                addresses: contract.addresses.clone(),
                next: contract.start_block,
                tables: table_idxs,
                selectors,
            });
            specs.push(ContractSpec {
                name: contract.name.clone(),
                addresses: contract.addresses.clone(),
                events,
                start_block: contract.start_block,
            });
        }
        let mut by_address: HashMap<Address, Vec<usize>> = HashMap::new();
        for (idx, contract) in contracts.iter().enumerate() {
            for address in &contract.addresses {
                by_address.entry(*address).or_default().push(idx);
            }
        }
        Ok(Self {
            contracts: Arc::new(contracts),
            decoders,
            tables,
            specs,
            by_address,
            strict: config.sync.strict,
        })
    }

    /// Creates the tables and moves every contract's next block past its checkpoint.
    async fn prepare(&mut self, sink: &mut Sink) -> Result<(), sink::Error> {
        sink.prepare(&self.tables, &self.specs).await?;
        let checkpoints = sink.checkpoints().await?;
        let contracts = Arc::get_mut(&mut self.contracts).expect("not shared before planning");
        for contract in contracts {
            if let Some(&cp) = checkpoints.get(&contract.name) {
                contract.next = contract.next.max(cp + 1);
            }
        }
        Ok(())
    }

    /// The first block any contract still needs, if it is at or below `target`.
    fn start(&self, target: BlockNumber) -> Option<BlockNumber> {
        self.contracts
            .iter()
            .map(|c| c.next)
            .filter(|&n| n <= target)
            .min()
    }

    fn planner(&self, config: &Config, plan: BlockRange) -> Planner {
        Planner::new(
            PlannerConfig {
                initial_span: config.sync.initial_block_range,
                max_span: config.sync.max_block_range,
                target_logs: config.sync.target_logs_per_request,
            },
            plan,
            self.contracts.iter().map(|c| c.next),
        )
    }

    fn selector(&self) -> Arc<dyn Fn(BlockRange) -> Selection + Send + Sync> {
        let contracts = self.contracts.clone();
        Arc::new(move |range: BlockRange| selection(&contracts, range))
    }
}

/// `logslice sync`: indexes every configured contract up to `target`, committing as it goes.
///
/// # Errors
/// Any [`Error`]; what was committed before stays committed.
pub async fn sync(
    config: &Config,
    target: Target,
    cancel: CancellationToken,
) -> Result<SyncReport, Error> {
    sync_observed(config, target, cancel, &Observer::default()).await
}

/// [`sync`], reporting progress and metrics to `observer`.
///
/// # Errors
/// Any [`Error`]; what was committed before stays committed.
pub async fn sync_observed(
    config: &Config,
    target: Target,
    cancel: CancellationToken,
    observer: &Observer,
) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let node = Node::connect(&config.node).await?;
    let chain_id = node.chain_id().await?;
    let (mut sink, db) = open_sink(config).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
    sink.check_chain_id(chain_id).await.map_err(db_error)?;
    let mut job = Job::new(config)?;
    job.prepare(&mut sink).await.map_err(db_error)?;

    let target = node.resolve(target).await?;
    let mut report = SyncReport {
        target,
        ..SyncReport::default()
    };
    let Some(start) = job.start(target) else {
        tracing::info!(target, "every contract is already at or beyond the target");
        sink.close().await;
        report.elapsed = started.elapsed();
        return Ok(report);
    };
    let plan = BlockRange::new(start, target).expect("start <= target");
    tracing::info!(%plan, node = %node.display, database = %db, "syncing");
    observer.start(plan);

    let (tx, mut rx) = mpsc::channel::<Fetched>(config.sync.max_queued_batches.max(1));
    let fetch_cancel = cancel.child_token();
    let fetcher = tokio::spawn(fetch::run(
        node.client.clone(),
        node.gate.clone(),
        job.planner(config, plan),
        job.selector(),
        tx,
        fetch_cancel.clone(),
    ));

    let written = async {
        loop {
            let first = tokio::select! {
                _ = cancel.cancelled() => return Err(Error::Interrupted),
                first = rx.recv() => first,
            };
            let Some(first) = first else { return Ok(()) };
            // Gather what is already waiting, up to max_batch_logs, into one transaction.
            let mut fetched = vec![first];
            let mut n_logs = fetched[0].logs.len();
            while n_logs < config.sync.max_batch_logs {
                match rx.try_recv() {
                    Ok(more) => {
                        n_logs += more.logs.len();
                        fetched.push(more);
                    }
                    Err(_) => break,
                }
            }
            if let Some(last) = fetched.last() {
                observer.fetched(last.range);
            }
            let batch = job.build_batch(fetched, &mut report)?;
            let committing = Instant::now();
            sink.commit(&batch).await.map_err(db_error)?;
            report.batches += 1;
            report.logs += batch.logs.len() as u64;
            report.typed_rows += batch.typed.len() as u64;
            // Logs a `progress` line or draws the bar.
            observer.committed(
                batch.range,
                batch.logs.len() as u64,
                batch.typed.len() as u64,
                committing.elapsed(),
            );
        }
    }
    .await;
    // Stop the fetcher whatever happened, then prefer its error (the writer only saw the channel close).
    fetch_cancel.cancel();
    let fetched = fetcher.await.expect("the fetch task does not panic");
    node.add_stats(&mut report);
    report.elapsed = started.elapsed();
    match (written, fetched) {
        (Err(Error::Interrupted), _) => Err(Error::Interrupted),
        (Err(err), _) => Err(err),
        (Ok(()), Err(err)) => Err(node.error()(err)),
        (Ok(()), Ok(())) => {
            sink.close().await;
            tracing::info!(
                target,
                logs = report.logs,
                secs = report.elapsed.as_secs_f64(),
                "synced"
            );
            Ok(report)
        }
    }
}

/// The fetch-only ceiling for `bench`: the same requests as [`sync`] from every contract's start block,
/// answers parsed and dropped, nothing stored.
///
/// # Errors
/// Any [`Error`].
pub async fn fetch_only(config: &Config, target: Target) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let node = Node::connect(&config.node).await?;
    let job = Job::new(config)?;
    let target = node.resolve(target).await?;
    let mut report = SyncReport {
        target,
        ..SyncReport::default()
    };
    if let Some(start) = job.start(target) {
        let plan = BlockRange::new(start, target).expect("start <= target");
        let (tx, mut rx) = mpsc::channel::<Fetched>(config.sync.max_queued_batches.max(1));
        let fetcher = tokio::spawn(fetch::run(
            node.client.clone(),
            node.gate.clone(),
            job.planner(config, plan),
            job.selector(),
            tx,
            CancellationToken::new(),
        ));
        while let Some(fetched) = rx.recv().await {
            report.logs += fetched.logs.len() as u64;
            report.batches += 1;
        }
        fetcher
            .await
            .expect("the fetch task does not panic")
            .map_err(node.error())?;
    }
    node.add_stats(&mut report);
    report.elapsed = started.elapsed();
    Ok(report)
}

/// The store-only ceiling for `bench`: decodes and commits the given ranges with no network, batched as
/// [`sync`] batches them.
///
/// # Errors
/// [`Error::Database`], or a decoding error under `sync.strict`.
pub async fn store_only(
    config: &Config,
    chunks: impl Iterator<Item = Fetched>,
) -> Result<SyncReport, Error> {
    let (mut sink, db) = open_sink(config).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
    let mut job = Job::new(config)?;
    job.prepare(&mut sink).await.map_err(db_error)?;
    let mut report = SyncReport::default();
    let mut pending: Vec<Fetched> = Vec::new();
    let mut n_logs = 0;
    let mut chunks = chunks.peekable();
    // Only decoding and committing are timed, not producing the chunks.
    let mut busy = Duration::ZERO;
    while let Some(chunk) = chunks.next() {
        n_logs += chunk.logs.len();
        report.target = chunk.range.end();
        pending.push(chunk);
        if n_logs >= config.sync.max_batch_logs || chunks.peek().is_none() {
            let started = Instant::now();
            let batch = job.build_batch(std::mem::take(&mut pending), &mut report)?;
            sink.commit(&batch).await.map_err(db_error)?;
            busy += started.elapsed();
            report.batches += 1;
            report.logs += batch.logs.len() as u64;
            report.typed_rows += batch.typed.len() as u64;
            n_logs = 0;
        }
    }
    sink.close().await;
    report.elapsed = busy;
    Ok(report)
}

/// The naive baseline for `bench`: one request at a time over fixed `span`-block ranges (halved only when
/// the node refuses), each range committed on its own, as a first script would do it.
///
/// # Errors
/// Any [`Error`].
pub async fn naive_sync(config: &Config, target: Target, span: u64) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let node = Node::connect(&config.node).await?;
    let (mut sink, db) = open_sink(config).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
    let mut job = Job::new(config)?;
    job.prepare(&mut sink).await.map_err(db_error)?;
    let target = node.resolve(target).await?;
    let mut report = SyncReport {
        target,
        ..SyncReport::default()
    };
    let Some(mut next) = job.start(target) else {
        return Ok(report);
    };
    let selection = job.selector()(BlockRange::new(next, target).expect("start <= target"));
    let mut todo: Vec<BlockRange> = Vec::new();
    while next <= target || !todo.is_empty() {
        let range = todo.pop().unwrap_or_else(|| {
            let range = BlockRange::new(next, next.saturating_add(span - 1).min(target))
                .expect("next <= end");
            next = range.end() + 1;
            range
        });
        let filter = crate::rpc::LogFilter {
            blocks: crate::rpc::Blocks::Range(range),
            addresses: selection.addresses.clone(),
            topic0: selection.topic0.clone(),
        };
        match node
            .gate
            .run("eth_getLogs", OnSplit::Return, || {
                node.client.get_logs(&filter)
            })
            .await
        {
            Ok(logs) => {
                let batch = job.build_batch(vec![Fetched { range, logs }], &mut report)?;
                sink.commit(&batch).await.map_err(db_error)?;
                report.logs += batch.logs.len() as u64;
                report.batches += 1;
            }
            Err(fetch::Error::Split(_)) => {
                if let Some((first, rest)) = range.halve() {
                    todo.push(rest);
                    todo.push(first);
                } else {
                    let logs = fetch::fetch_block_by_filters(
                        &node.client,
                        &node.gate,
                        range.start(),
                        selection.clone(),
                    )
                    .await
                    .map_err(node.error())?;
                    let batch = job.build_batch(vec![Fetched { range, logs }], &mut report)?;
                    sink.commit(&batch).await.map_err(db_error)?;
                    report.logs += batch.logs.len() as u64;
                    report.batches += 1;
                }
            }
            Err(err) => return Err(node.error()(err)),
        }
    }
    sink.close().await;
    node.add_stats(&mut report);
    report.elapsed = started.elapsed();
    Ok(report)
}

/// The filter for a range: every contract that has joined by its start.
fn selection(contracts: &[Contract], range: BlockRange) -> Selection {
    let mut addresses: Vec<Address> = Vec::new();
    let mut topic0: Option<Vec<B256>> = Some(Vec::new());
    for contract in contracts.iter().filter(|c| c.next <= range.start()) {
        addresses.extend(&contract.addresses);
        match (&contract.selectors, topic0.as_mut()) {
            (Some(selectors), Some(all)) => all.extend(selectors),
            (None, _) => topic0 = None,
            (Some(_), None) => {}
        }
    }
    addresses.sort();
    addresses.dedup();
    if let Some(all) = topic0.as_mut() {
        all.sort();
        all.dedup();
    }
    Selection { addresses, topic0 }
}

/// Decodes fetched ranges into one batch: the raw logs that match a configured event of a contract that has
/// joined by their block, their typed rows, and the checkpoints the batch moves.
impl Job {
    fn build_batch(&self, fetched: Vec<Fetched>, report: &mut SyncReport) -> Result<Batch, Error> {
        let (contracts, by_address, decoders, strict) = (
            &self.contracts,
            &self.by_address,
            &self.decoders,
            self.strict,
        );
        let first = fetched
            .first()
            .map(|f| f.range.start())
            .expect("a batch has at least one range");
        let last = fetched
            .last()
            .map(|f| f.range.end())
            .expect("a batch has at least one range");
        let mut batch = Batch {
            range: BlockRange::new(first, last),
            ..Batch::default()
        };
        for log in fetched.into_iter().flat_map(|f| f.logs) {
            if log.removed {
                // A stale replica's copy of an orphaned block's log: never stored.
                continue;
            }
            let log_idx = batch.logs.len();
            let mut matched = false;
            for &contract_idx in by_address.get(&log.address).into_iter().flatten() {
                let contract = &contracts[contract_idx];
                if contract.next > log.block_number {
                    continue;
                }
                for &table in &contract.tables {
                    let decoder = &decoders[table];
                    if !decoder.matches(&log.topics) {
                        continue;
                    }
                    matched = true;
                    match decoder.decode(&log.topics, &log.data) {
                    Ok(values) => batch.typed.push(TypedRow { table, log: log_idx, values }),
                    Err(err) if strict => {
                        return Err(Error::NodeData(format!(
                            "block {} log {} of {}: {err} (sync.strict is on; set it to false to keep such logs raw only)",
                            log.block_number, log.log_index, contract.name
                        )))
                    }
                    Err(err) => {
                        report.undecodable += 1;
                        tracing::warn!(block = log.block_number, log_index = log.log_index, contract = %contract.name, cause = %err, "kept raw only");
                    }
                }
                }
            }
            if matched {
                batch.logs.push(log);
            }
        }
        batch.checkpoints = contracts
            .iter()
            .filter(|c| c.next <= last)
            .map(|c| Checkpoint {
                contract: c.name.clone(),
                block: last,
            })
            .collect();
        Ok(batch)
    }
}
