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
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

mod head;
use head::HeadRead;

use crate::config::{Config, DatabaseUrl, Endpoint, Finality, NodeConfig, Transport};
use crate::decode::EventDecoder;
use crate::devnode::{DevNode, DevNodeConfig};
use crate::fetch::{self, Fetched, Gate, GateConfig, OnSplit, Selection};
use crate::follow;
use crate::observe::{self, Observer};
use crate::planner::{Planner, PlannerConfig};
use crate::primitives::{BlockNumber, BlockRange};
use crate::rpc::{self, BlockTag, Client, ClientOptions};
use crate::sink::{
    self, Batch, Checkpoint, ContractSpec, PostgresSink, Sink, SqliteSink, TableSpec, TrackedBlock,
    TypedRow,
};

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
    /// The node does not (consistently) have the target yet: a later run should succeed.
    #[error("{0}")]
    NotYet(String),
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
    /// Of them, `eth_getLogs` requests.
    pub log_requests: u64,
    /// Error answers.
    pub errors: u64,
    /// Retries.
    pub retries: u64,
    /// Split answers.
    pub splits: u64,
    /// Wall time.
    pub elapsed: Duration,
}

impl SyncReport {
    /// Counts a committed batch.
    fn committed(&mut self, batch: &Batch) {
        self.batches += 1;
        self.logs += batch.logs.len() as u64;
        self.typed_rows += batch.typed.len() as u64;
    }
}

/// A connected node: the client, its gate, and the in-process devnode behind `sim://`, kept alive.
pub struct Node {
    /// The client.
    pub client: Arc<Client>,
    /// The gate every request passes.
    pub gate: Arc<Gate>,
    /// Redacted, for messages.
    pub display: String,
    /// Whether to read headers in batches: HTTP, until the node refuses one (the spec does not say whether
    /// it takes batches; mainstream nodes do).
    batches: std::sync::atomic::AtomicBool,
    _devnode: Option<DevNode>,
}

impl Node {
    /// Connects to the configured node, starting the built-in one for `sim://`. Sends nothing yet. Once
    /// `cancel` fires, every request through the node's gate (waiting, retrying or in flight) ends with
    /// [`Error::Interrupted`].
    ///
    /// # Errors
    /// [`Error::Config`] for a bad `sim://` option; [`Error::Node`] when no client can be built.
    pub async fn connect(config: &NodeConfig, cancel: &CancellationToken) -> Result<Self, Error> {
        let options = ClientOptions {
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
            max_idle_connections: config.max_concurrency,
        };
        let gate = Arc::new(Gate::new(
            GateConfig {
                max_concurrency: config.max_concurrency,
                requests_per_second: config.requests_per_second,
                max_retries: config.max_retries,
                initial_backoff: config.initial_backoff,
                max_backoff: config.max_backoff,
            },
            cancel.clone(),
        ));
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
            batches: std::sync::atomic::AtomicBool::new(client.supports_batches()),
            client: Arc::new(client),
            gate,
            display,
            _devnode: devnode,
        })
    }

    /// The headers of `numbers`, in order (`None` where the node does not know the block): in batches of at
    /// most a second's worth of the rate (a batch of n calls costs n), or, from the first batch the node
    /// refuses as such, one request each (`max_concurrency` at a time).
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::Interrupted`].
    async fn headers(&self, numbers: &[BlockNumber]) -> Result<Vec<Option<rpc::Header>>, Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut headers = Vec::with_capacity(numbers.len());
        let per_batch = self.gate.max_calls_per_request().max(1);
        let mut rest = numbers;
        while !rest.is_empty() && self.batches.load(Relaxed) {
            let (batch, after) = rest.split_at(per_batch.min(rest.len()));
            match self
                .gate
                .run_calls("eth_getBlockByNumber", batch.len(), OnSplit::Retry, || {
                    self.client.headers(batch)
                })
                .await
            {
                Ok(answers) => {
                    headers.extend(answers);
                    rest = after;
                }
                // Only a refusal of batches as such turns them off (`rpc` tells it apart); a 429, a 5xx or
                // a timeout was retried by the gate like any request, and is this read's error once the
                // retries are spent.
                Err(fetch::Error::Fatal {
                    source: source @ rpc::Error::BatchRefused { .. },
                    ..
                }) => {
                    tracing::info!(cause = %source, "reading headers one by one from now on");
                    self.batches.store(false, Relaxed);
                }
                Err(err) => return Err(self.error()(err)),
            }
        }
        let per_round = self.gate.config().max_concurrency.max(1);
        for chunk in rest.chunks(per_round) {
            let answers =
                futures::future::join_all(chunk.iter().map(|&n| self.header(BlockTag::Number(n))))
                    .await;
            for answer in answers {
                headers.push(answer?);
            }
        }
        Ok(headers)
    }

    /// `eth_getBlockByNumber(tag, false)` through the gate: `None` when the node does not know the block.
    ///
    /// # Errors
    /// [`Error::Node`].
    async fn header(&self, tag: BlockTag) -> Result<Option<rpc::Header>, Error> {
        self.gate
            .run("eth_getBlockByNumber", OnSplit::Retry, || {
                self.client.header(tag)
            })
            .await
            .map_err(self.error())
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
        report.log_requests = stats.log_requests.load(Relaxed);
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

    /// The node's finalized block (0 when it has none yet).
    ///
    /// # Errors
    /// [`Error::Node`].
    async fn finalized(&self) -> Result<BlockNumber, Error> {
        let header = self.header(BlockTag::Finalized).await?;
        Ok(header.map_or(0, |h| h.number))
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
            let sink = SqliteSink::open(path)
                .await
                .map_err(|source| Error::Database {
                    database: display.clone(),
                    source,
                })?;
            Ok((Sink::Sqlite(sink), display))
        }
        DatabaseUrl::Postgres(url) => {
            // `SecretUrl`'s Display is redacted: the password never reaches a message.
            let display = match &config.database.schema {
                Some(schema) => format!("{url} (schema {schema})"),
                None => url.to_string(),
            };
            let sink = PostgresSink::open(url, config.database.schema.as_deref())
                .await
                .map_err(|source| Error::Database {
                    database: display.clone(),
                    source,
                })?
                .with_max_retries(config.database.max_retries);
            Ok((Sink::Postgres(sink), display))
        }
    }
}

/// One configured contract at run time.
#[derive(Debug, Clone)]
struct Contract {
    name: String,
    addresses: Vec<Address>,
    /// Its configured first block.
    start_block: BlockNumber,
    /// First block not yet committed.
    next: BlockNumber,
    /// Indexes into `decoders`.
    tables: Vec<usize>,
    /// topic0 of each non-anonymous event; `None` if an anonymous event forbids a topic0 filter.
    selectors: Option<Vec<B256>>,
    /// topic0 of each non-anonymous event, even when an anonymous one forbids filtering by them.
    event_topics: Vec<B256>,
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
            let mut event_topics = Vec::new();
            let mut events = Vec::new();
            for event in &contract.events {
                let decoder = EventDecoder::new(&event.event).map_err(|e| {
                    Error::Config(format!(
                        "{}: contracts.{}: {e}",
                        config.source.display(),
                        contract.name
                    ))
                })?;
                event_topics.extend(decoder.selector());
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
                start_block: contract.start_block,
                next: contract.start_block,
                tables: table_idxs,
                selectors,
                event_topics,
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
        self.reload(sink).await
    }

    /// Sets every contract's next block from the checkpoints (after a commit elsewhere or a rollback).
    async fn reload(&mut self, sink: &Sink) -> Result<(), sink::Error> {
        let checkpoints = sink.checkpoints().await?;
        for contract in Arc::make_mut(&mut self.contracts) {
            contract.next = checkpoints
                .get(&contract.name)
                .map_or(contract.start_block, |&cp| contract.start_block.max(cp + 1));
        }
        Ok(())
    }

    /// Records that every contract that had joined by `end` is committed up to it.
    fn advance(&mut self, end: BlockNumber) {
        for contract in Arc::make_mut(&mut self.contracts) {
            if contract.next <= end {
                contract.next = end + 1;
            }
        }
    }

    /// What the bloom check looks for.
    fn interests(&self) -> Vec<follow::Interest> {
        self.contracts
            .iter()
            .flat_map(|c| {
                c.addresses.iter().map(|a| follow::Interest {
                    address: *a,
                    topic0: c.selectors.clone(),
                })
            })
            .collect()
    }

    /// The first block any contract still needs, if it is at or below `target`.
    fn start(&self, target: BlockNumber) -> Option<BlockNumber> {
        self.contracts
            .iter()
            .map(|c| c.next)
            .filter(|&n| n <= target)
            .min()
    }

    /// The blocks of the next step near the head, up to `end`: from the first block any contract still
    /// needs, up to the block before a contract that joins inside (the step after includes it, as the
    /// planner's boundaries do for backfill; otherwise its checkpoint would move past logs never asked for).
    fn head_span(&self, end: BlockNumber) -> Option<BlockRange> {
        head_span(self.contracts.iter().map(|c| c.next), end)
    }

    /// [`Job::head_span`] once a backfill has committed every contract up to `backfilled`.
    fn head_span_after(&self, backfilled: BlockNumber, end: BlockNumber) -> Option<BlockRange> {
        let nexts = self
            .contracts
            .iter()
            .map(|c| c.next.max(backfilled.saturating_add(1)));
        head_span(nexts, end)
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

/// Opens the configured database and prepares `config`'s job in it (tables created, checkpoints read),
/// after checking `chain_id` against the database (or recording it) when given.
async fn open_job(config: &Config, chain_id: Option<u64>) -> Result<(Sink, String, Job), Error> {
    let (mut sink, db) = open_sink(config).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
    if let Some(chain_id) = chain_id {
        sink.check_chain_id(chain_id).await.map_err(db_error)?;
    }
    let mut job = Job::new(config)?;
    job.prepare(&mut sink).await.map_err(db_error)?;
    Ok((sink, db, job))
}

/// An open job: node, database and what to index.
struct Ctx<'a> {
    config: &'a Config,
    /// Progress bar or lines, metrics, and the clock `/health` reads.
    observer: &'a Observer,
    node: Arc<Node>,
    sink: Sink,
    db: String,
    job: Job,
    /// The lowest checkpoint of all contracts, published after every commit and rollback (tests and
    /// observers wait on it instead of sleeping).
    progress: watch::Sender<Option<BlockNumber>>,
}

/// What one step near the head achieved.
enum Step {
    /// Committed up to this block (or nothing to do).
    Done,
    /// The node's answers did not agree with each other (a lagging or changing backend): read again.
    Retry(String),
}

impl<'a> Ctx<'a> {
    async fn open(
        config: &'a Config,
        observer: &'a Observer,
        cancel: &CancellationToken,
    ) -> Result<Ctx<'a>, Error> {
        let node = Node::connect(&config.node, cancel).await?;
        let chain_id = node.chain_id().await?;
        Self::attach(config, observer, node, chain_id).await
    }

    /// Opens the database for `node`, which serves chain `chain_id`, and prepares the job.
    async fn attach(
        config: &'a Config,
        observer: &'a Observer,
        node: Node,
        chain_id: u64,
    ) -> Result<Ctx<'a>, Error> {
        let (sink, db, job) = open_job(config, Some(chain_id)).await?;
        let progress = watch::Sender::new(None);
        Ok(Ctx {
            config,
            observer,
            node: Arc::new(node),
            sink,
            db,
            job,
            progress,
        })
    }

    fn publish(&self) {
        let lowest = self
            .job
            .contracts
            .iter()
            .map(|c| c.next)
            .min()
            .and_then(|next| next.checked_sub(1));
        self.progress.send_replace(lowest);
    }

    fn db_error(&self) -> impl Fn(sink::Error) -> Error + '_ {
        |source| Error::Database {
            database: self.db.clone(),
            source,
        }
    }

    async fn header(&self, tag: BlockTag) -> Result<Option<rpc::Header>, Error> {
        self.node.header(tag).await
    }

    /// The highest block that cannot be reorganised any more (`sync.finality`), never above `head`.
    async fn finalized(&self, head: BlockNumber) -> Result<BlockNumber, Error> {
        match self.config.sync.finality {
            Finality::Confirmations(n) => Ok(head.saturating_sub(n)),
            Finality::Finalized => Ok(self.node.finalized().await?.min(head)),
        }
    }

    /// Compares the newest remembered block with the node; on a mismatch, rolls back to the common
    /// ancestor. This is how a reorg that happened while logslice was down is repaired at start.
    async fn reconcile(&mut self) -> Result<(), Error> {
        let tracked = self.sink.tracked_blocks().await.map_err(self.db_error())?;
        let Some(top) = tracked.values().next_back().copied() else {
            return Ok(());
        };
        match self.header(BlockTag::Number(top.number)).await? {
            Some(header) if header.hash != top.hash => self.rollback_to_ancestor().await,
            // Same hash: nothing happened. Unknown to the node: it lags behind us; wait for it.
            _ => Ok(()),
        }
    }

    /// Walks back through the remembered blocks to the newest one the node still has, and rolls back to it.
    async fn rollback_to_ancestor(&mut self) -> Result<(), Error> {
        let tracked = self.sink.tracked_blocks().await.map_err(self.db_error())?;
        let top = tracked.values().next_back().map_or(0, |b| b.number);
        for candidate in follow::ancestor_candidates(&tracked) {
            let header = self.header(BlockTag::Number(candidate.number)).await?;
            if header.is_some_and(|h| h.hash == candidate.hash) {
                let depth = top - candidate.number;
                let note = format!(
                    "rolled back {depth} blocks to {} ({})",
                    candidate.number, candidate.hash
                );
                let removed = self
                    .sink
                    .rollback(candidate.number, &note)
                    .await
                    .map_err(self.db_error())?;
                tracing::info!(
                    depth,
                    ancestor = candidate.number,
                    logs = removed.logs,
                    typed_rows = removed.typed_rows,
                    "reorg: rolled back"
                );
                observe::record_reorg(depth);
                self.job.reload(&self.sink).await.map_err(self.db_error())?;
                self.publish();
                return Ok(());
            }
        }
        let (low, high) = (tracked.keys().next().copied().unwrap_or(0), top);
        Err(Error::NodeData(format!(
            "reorg deeper than the tracked window: none of the {} remembered blocks {low}..={high} is on the node's chain any more \
             (a block at or below finality changed, or the reorg is deeper than sync.max_reorg_depth = {}); \
             re-index into a new database, or raise sync.max_reorg_depth",
            tracked.len(),
            self.config.sync.max_reorg_depth
        )))
    }

    /// Indexes every contract up to `end` (at or below finality) through the concurrent range pipeline.
    async fn backfill(
        &mut self,
        end: BlockNumber,
        cancel: &CancellationToken,
        report: &mut SyncReport,
    ) -> Result<(), Error> {
        let Some(start) = self.job.start(end) else {
            return Ok(());
        };
        let plan = BlockRange::new(start, end).expect("start <= end");
        tracing::info!(%plan, node = %self.node.display, database = %self.db, "backfilling");
        self.observer.start(plan);
        let config = self.config;
        // `max_queued_batches` counts what waits for the writer: ranges in this channel and the decoded batch.
        let (tx, mut rx) =
            mpsc::channel::<Fetched>(config.sync.max_queued_batches.saturating_sub(1).max(1));
        let fetch_cancel = cancel.child_token();
        let fetcher = tokio::spawn(fetch::run(
            self.node.client.clone(),
            self.node.gate.clone(),
            self.job.planner(config, plan),
            self.job.selector(),
            tx,
            fetch_cancel.clone(),
        ));
        let (job, sink, db, observer) = (&self.job, &mut self.sink, &self.db, self.observer);
        // The next batch is decoded while this one commits: the commit's statements run on the database's
        // own thread (SQLite) or server (Postgres), so decoding and encoding here overlap them. Measured on
        // the default chain: decoding is about a tenth of the writer's time. One decoded batch waits at most,
        // and the next is gathered only once its place is free, so no more is held than before this stage.
        let (decoded_tx, mut decoded_rx) = mpsc::channel::<Batch>(1);
        let decoding = async move {
            let mut decode_report = SyncReport::default();
            let outcome = loop {
                let Ok(place) = decoded_tx.reserve().await else {
                    break Ok(()); // the writer stopped; its error is the one to report
                };
                let first = tokio::select! {
                    _ = cancel.cancelled() => break Err(Error::Interrupted),
                    first = rx.recv() => first,
                };
                let Some(first) = first else { break Ok(()) };
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
                let batch = match job.build_batch(fetched, &mut decode_report) {
                    Ok(batch) => batch,
                    Err(err) => break Err(err),
                };
                place.send(batch);
            };
            (outcome, decode_report.undecodable)
        };
        let writing = async {
            loop {
                let batch = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => return Err(Error::Interrupted),
                    batch = decoded_rx.recv() => batch,
                };
                let Some(batch) = batch else { return Ok(()) };
                let committing = Instant::now();
                sink.commit(&batch)
                    .await
                    .map_err(|source| Error::Database {
                        database: db.clone(),
                        source,
                    })?;
                report.committed(&batch);
                // Logs a `progress` line or draws the bar; moves the clock `/health` reads.
                observer.committed(
                    batch.range,
                    batch.logs.len() as u64,
                    batch.typed.len() as u64,
                    committing.elapsed(),
                );
                tracing::debug!(
                    range = %batch.range.map(|r| r.to_string()).unwrap_or_default(),
                    logs = batch.logs.len(),
                    ms = committing.elapsed().as_millis() as u64,
                    "committed"
                );
                drop(batch);
                release_freed_memory();
            }
        };
        let (written, undecodable) = {
            let (mut decoding, mut writing) = (std::pin::pin!(decoding), std::pin::pin!(writing));
            let mut decoded = None;
            let written = loop {
                tokio::select! {
                    outcome = &mut decoding, if decoded.is_none() => decoded = Some(outcome),
                    written = &mut writing => break written,
                }
            };
            // A failed writer stops the decoding where it is (it may be waiting for a fetcher in backoff).
            // A writer that ended well saw the decoding's channel close: the decoding is done.
            match (written, decoded) {
                (Err(err), _) => (Err(err), 0),
                (Ok(()), Some(decoded)) => decoded,
                (Ok(()), None) => decoding.await,
            }
        };
        report.undecodable += undecodable;
        // Stop the fetcher whatever happened, then prefer its error (the writer only saw the channel close).
        fetch_cancel.cancel();
        let fetched = fetcher.await.expect("the fetch task does not panic");
        match (written, fetched) {
            (Err(err), _) => Err(err),
            (Ok(()), Err(err)) => Err(self.node.error()(err)),
            (Ok(()), Ok(())) => {
                self.job.advance(end);
                self.publish();
                Ok(())
            }
        }
    }

    /// The node's answers for `span` above finality ([`head::read`]), owning what it needs, so that it can
    /// also run as a task of its own.
    fn read_head(
        &self,
        span: BlockRange,
    ) -> impl std::future::Future<Output = Result<HeadRead, Error>> + Send + use<> {
        head::read(
            self.node.clone(),
            self.job.selector(),
            self.job.interests(),
            span,
        )
    }

    /// Indexes blocks above finality up to `end`, remembering their hashes: headers first (they must link
    /// to what the database holds, or it is a reorg), then the logs, which are committed only if their block
    /// hashes are those headers' and no block whose bloom promises a log came back empty. `prefetched` is a
    /// read of the node made earlier (while the backfill committed); it is used if it covers this step.
    async fn near_head(
        &mut self,
        end: BlockNumber,
        prefetched: Option<HeadRead>,
        report: &mut SyncReport,
    ) -> Result<Step, Error> {
        let Some(span) = self.job.head_span(end) else {
            return Ok(Step::Done);
        };
        let read = match prefetched.filter(|read| read.span == span) {
            Some(read) => read,
            None => self.read_head(span).await?,
        };
        let start = span.start();
        let tracked = self.sink.tracked_blocks().await.map_err(self.db_error())?;
        // Below what we track the block before the span is final, so the node's answer is the truth.
        let anchor = match start.checked_sub(1) {
            None => None,
            Some(before) => tracked.get(&before).map(|b| b.hash).or(read.before),
        };
        let headers = read.headers;
        let Some(last) = headers.last().map(|h| h.number) else {
            return Ok(Step::Retry(format!(
                "the node does not know block {start} yet"
            )));
        };
        match follow::check_headers(anchor, &headers) {
            follow::Decision::Extend => {}
            follow::Decision::Reorg => {
                self.rollback_to_ancestor().await?;
                return Ok(Step::Retry("reorg".into()));
            }
            follow::Decision::Retry => {
                return Ok(Step::Retry(
                    "headers do not link (the node changed while read)".into(),
                ))
            }
        }
        let logs = match read.logs {
            Ok(logs) => logs,
            Err(why) => return Ok(Step::Retry(why)),
        };
        let range = BlockRange::new(start, last).expect("start <= last");
        let mut batch = self.job.build_batch(
            vec![Fetched {
                range,
                logs: logs.kept,
            }],
            report,
        )?;
        batch.blocks = headers
            .iter()
            .map(|h| TrackedBlock {
                number: h.number,
                hash: h.hash,
                parent_hash: h.parent_hash,
            })
            .collect();
        batch.forget_blocks_below = Some(last.saturating_sub(self.config.sync.max_reorg_depth));
        batch.removed = logs.removed;
        let committing = Instant::now();
        self.sink.commit(&batch).await.map_err(self.db_error())?;
        self.observer.committed(
            batch.range,
            batch.logs.len() as u64,
            batch.typed.len() as u64,
            committing.elapsed(),
        );
        report.committed(&batch);
        self.job.advance(last);
        self.publish();
        Ok(Step::Done)
    }

    /// Backfills to finality, then steps near the head up to `end`, retrying a bounded number of times.
    /// `finalized` is the node's finalized block when the caller has read it already.
    async fn catch_up(
        &mut self,
        end: BlockNumber,
        finalized: Option<BlockNumber>,
        attempts: u32,
        cancel: &CancellationToken,
        report: &mut SyncReport,
    ) -> Result<(), Error> {
        let finalized = match finalized {
            Some(finalized) => finalized.min(end),
            None => self.finalized(end).await?,
        };
        // The blocks above finality are read while the backfill commits: with a slow node, these round trips
        // would otherwise come after the last commit. The step checks the read against the database first.
        // Dropped unused (an error, a shutdown), the read is aborted.
        let mut prefetch = self
            .job
            .head_span_after(finalized, end)
            .map(|span| AbortOnDropHandle::new(tokio::spawn(self.read_head(span))));
        self.backfill(finalized, cancel, report).await?;
        let mut last_problem = String::new();
        // Only a step that had to read again counts as an attempt; a committed step (one per contract that
        // joins above finality, at most) is progress.
        let mut retries = 0;
        while retries < attempts {
            if cancel.is_cancelled() {
                return Err(Error::Interrupted);
            }
            if self.job.start(end).is_none() {
                return Ok(());
            }
            let prefetched = match prefetch.take() {
                Some(read) => Some(read.await.expect("reading the head does not panic")?),
                None => None,
            };
            match self.near_head(end, prefetched, report).await? {
                Step::Done => {}
                Step::Retry(why) => {
                    retries += 1;
                    tracing::debug!(%why, "reading the head again");
                    last_problem = why;
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(Error::Interrupted),
                        _ = tokio::time::sleep(self.config.node.initial_backoff) => {}
                    }
                }
            }
        }
        if self.job.start(end).is_none() {
            Ok(())
        } else {
            Err(Error::NotYet(format!(
                "node {}: could not reach block {end} consistently: {last_problem} (the node may not have it yet, \
                 or lags or reorganises; run again later)",
                self.node.display
            )))
        }
    }
}

/// `logslice sync`: indexes every configured contract up to `target`, committing as it goes. Blocks above
/// finality get the same reorg protection as in `run`.
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
    let node = Node::connect(&config.node, &cancel).await?;
    // The first questions to the node do not depend on each other: one round trip instead of three. The
    // answers are looked at in the order they were asked in before, so a failure reports as it did.
    let finalized = async {
        match config.sync.finality {
            Finality::Finalized => node.finalized().await.map(Some),
            Finality::Confirmations(_) => Ok(None),
        }
    };
    let (chain_id, target, finalized) =
        tokio::join!(node.chain_id(), node.resolve(target), finalized);
    let mut ctx = Ctx::attach(config, observer, node, chain_id?).await?;
    ctx.reconcile().await?;
    let target = target?;
    let mut report = SyncReport {
        target,
        ..SyncReport::default()
    };
    ctx.catch_up(target, finalized?, 16, &cancel, &mut report)
        .await?;
    ctx.node.add_stats(&mut report);
    report.elapsed = started.elapsed();
    tracing::info!(
        target,
        logs = report.logs,
        secs = report.elapsed.as_secs_f64(),
        "synced"
    );
    ctx.sink.close().await;
    Ok(report)
}

/// `logslice run`: backfills, then follows the head every `sync.poll_interval`, rolling back reorgs, until
/// `cancel` fires.
///
/// # Errors
/// [`Error::Interrupted`] on shutdown (everything committed before it is intact), or any other [`Error`].
pub async fn run(config: &Config, cancel: CancellationToken) -> Result<SyncReport, Error> {
    run_watched(
        config,
        cancel,
        watch::Sender::new(None),
        &Observer::default(),
    )
    .await
}

/// [`run`], publishing the lowest committed checkpoint on `progress` after every commit and rollback, and
/// reporting progress and metrics to `observer`.
///
/// # Errors
/// As [`run`].
pub async fn run_watched(
    config: &Config,
    cancel: CancellationToken,
    progress: watch::Sender<Option<BlockNumber>>,
    observer: &Observer,
) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let mut ctx = Ctx::open(config, observer, &cancel).await?;
    ctx.progress = progress;
    ctx.publish();
    let mut report = SyncReport::default();
    let mut caught_up = false;
    loop {
        ctx.reconcile().await?;
        let head = ctx.node.resolve(Target::Latest).await?;
        // A node whose head went backwards (a lagging replica) gives nothing to do until it catches up.
        if ctx.job.start(head).is_some() {
            match ctx.catch_up(head, None, 1, &cancel, &mut report).await {
                Ok(()) => {
                    report.target = head;
                    // At the head and consistent: healthy, even when no block came.
                    observer.clock().advanced();
                    if !caught_up {
                        caught_up = true;
                        tracing::info!(
                            head,
                            secs = started.elapsed().as_secs_f64(),
                            "caught up; following the head"
                        );
                    }
                }
                // A head that could not be read consistently this time is read again next poll.
                Err(Error::NotYet(why)) => tracing::debug!(%why, "head not consistent yet"),
                Err(err) => return Err(err),
            }
        }
        ctx.node.add_stats(&mut report);
        report.elapsed = started.elapsed();
        tokio::select! {
            _ = cancel.cancelled() => {
                ctx.sink.close().await;
                return Err(Error::Interrupted);
            }
            _ = tokio::time::sleep(config.sync.poll_interval) => {}
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
    let node = Node::connect(&config.node, &CancellationToken::new()).await?;
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
    let (mut sink, db, job) = open_job(config, None).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
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
            let committing = Instant::now();
            sink.commit(&batch).await.map_err(db_error)?;
            busy += started.elapsed();
            tracing::debug!(
                range = %batch.range.map(|r| r.to_string()).unwrap_or_default(),
                logs = batch.logs.len(),
                ms = committing.elapsed().as_millis() as u64,
                "committed"
            );
            report.committed(&batch);
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
    let node = Node::connect(&config.node, &CancellationToken::new()).await?;
    let (mut sink, db, job) = open_job(config, None).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
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
                report.committed(&batch);
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
                        fetch::FirstRequest::Halves,
                    )
                    .await
                    .map_err(node.error())?;
                    let batch = job.build_batch(vec![Fetched { range, logs }], &mut report)?;
                    sink.commit(&batch).await.map_err(db_error)?;
                    report.committed(&batch);
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

/// See [`Job::head_span`]; `nexts` are the contracts' next blocks.
fn head_span(
    nexts: impl Iterator<Item = BlockNumber> + Clone,
    end: BlockNumber,
) -> Option<BlockRange> {
    let start = nexts.clone().filter(|&next| next <= end).min()?;
    let end = match nexts.filter(|&next| next > start).min() {
        Some(joins) => end.min(joins - 1),
        None => end,
    };
    BlockRange::new(start, end)
}

/// The filter for a range: every contract that has joined by its start.
fn selection(contracts: &[Contract], range: BlockRange) -> Selection {
    let mut addresses: Vec<Address> = Vec::new();
    let mut topic0: Option<Vec<B256>> = Some(Vec::new());
    let mut pairs: Vec<(Address, B256)> = Vec::new();
    for contract in contracts.iter().filter(|c| c.next <= range.start()) {
        addresses.extend(&contract.addresses);
        for &address in &contract.addresses {
            pairs.extend(contract.event_topics.iter().map(|&t| (address, t)));
        }
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
    pairs.sort();
    pairs.dedup();
    Selection {
        addresses,
        topic0,
        pairs,
    }
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

/// Hands the pages of freed allocations back to the kernel, once per committed batch. A batch frees tens of
/// thousands of small allocations (topics, data, rows) interleaved with the next batch's; glibc only returns
/// memory from the top of its heaps, so without this the resident set crept up by about 15 MB over the
/// first third of a long backfill and stayed there (docs/BENCHMARKS.md, memory at 10x). Its cost did not
/// show in the benchmark's throughput.
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free pages of the allocator's own heaps; it is thread-safe (it
    // takes each arena's lock) and leaves every live allocation where it is.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod node_tests;

#[cfg(test)]
mod send_check {
    fn assert_send<T: Send>(_: T) {}

    /// `sync` and `run` must stay spawnable: sqlx's `fetch_*` on `&mut *tx` and `raw_sql` inside a
    /// transaction make a future fail rustc's higher-ranked `Send` check (rust-lang/rust#102211). This does
    /// not compile if that comes back.
    #[allow(dead_code)]
    fn jobs_are_send(config: &super::Config) {
        assert_send(super::sync(
            config,
            super::Target::Latest,
            Default::default(),
        ));
        assert_send(super::run(config, Default::default()));
    }
}

#[cfg(test)]
mod head_span_tests {
    use std::path::Path;

    use super::{head_span, Job};
    use crate::primitives::BlockRange;

    fn span(start: u64, end: u64) -> Option<BlockRange> {
        BlockRange::new(start, end)
    }

    #[test]
    fn a_step_near_the_head_starts_at_the_first_block_needed_and_stops_before_a_contract_joins() {
        assert_eq!(head_span([100, 150].into_iter(), 200), span(100, 149));
        assert_eq!(head_span([150, 100, 150].into_iter(), 120), span(100, 120));
        assert_eq!(head_span([150, 150].into_iter(), 200), span(150, 200));
        assert_eq!(head_span([201, 300].into_iter(), 200), None);
    }

    #[test]
    fn the_span_after_a_backfill_is_the_one_the_step_will_compute() {
        let contract = |name: &str, address: u8, start: u64| {
            format!(
                "[[contracts]]\nname = \"{name}\"\naddress = \"0x{address:040x}\"\nstart_block = {start}\n\
                 events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]\n"
            )
        };
        let text = format!(
            "[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n{}{}{}",
            contract("early", 1, 0),
            contract("caught_up", 2, 960),
            contract("late", 3, 1030),
        );
        let config = crate::config::load_str(Path::new("config.toml"), &text, &|_| None)
            .expect("a valid config");
        let mut job = Job::new(&config).expect("the events resolve");
        // Finalized 999, head 1064: the backfill takes `early` and `caught_up` to 999; `late` joins at 1030.
        let predicted = job.head_span_after(999, 1064);
        assert_eq!(predicted, span(1000, 1029));
        job.advance(999);
        assert_eq!(job.head_span(1064), predicted);
        // Nothing to backfill: the prediction is the span as it stands.
        assert_eq!(job.head_span_after(900, 1064), job.head_span(1064));
        job.advance(1029);
        assert_eq!(job.head_span(1064), span(1030, 1064));
    }
}
