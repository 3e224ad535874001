//! Wires the stages: config -> rpc client -> planner -> fetch -> decode -> sink, with bounded channels and
//! one cancellation token. The only module that knows every stage.
//!
//! Contracts are indexed together: each range asks for the addresses of every contract whose next block
//! is at or below the range's start (a contract "joins" at its own next block, which the planner treats as a
//! boundary), and each committed batch moves the checkpoint of every contract it covered, in the same
//! transaction as its rows. A contract added later is therefore backfilled from its own start while the
//! others wait at their checkpoints, and nobody refetches what is committed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

mod backfill;
mod batch;
mod bench_modes;
pub mod chains;
mod daemon;
mod discover;
mod enrich;
mod finality;
mod foresight;
mod head;
mod indexes;
mod job;
mod near_head;
mod node;
pub mod simulator;
mod transactions;

pub use bench_modes::{fetch_only, naive_sync, store_only};
pub use daemon::{run, run_watched};
pub use job::Job;
pub use node::Node;

use crate::config::{Config, DatabaseUrl, Finality};
use crate::fetch;
use crate::observe::Observer;
use crate::primitives::BlockNumber;
use crate::rpc::{self, BlockTag};
use crate::sink::{self, PostgresSink, Sink, SqliteSink};

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

/// Why a job stopped. [`crate::exit::code`] maps each to an exit code of `docs/schema.md`.
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
    /// A task of ours panicked: a bug, reported with its message.
    #[error("internal error (a bug in logslice; please report it): {0}")]
    Internal(String),
}

/// A spawned task's result, its panic turned into [`Error::Internal`].
fn joined<T>(result: Result<T, tokio::task::JoinError>) -> Result<T, Error> {
    result.map_err(|err| Error::Internal(fetch::join_failure(err)))
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
    /// Of them, batches too large to encode whole, written in parts of one transaction
    /// (`sink::streams`).
    pub streamed_batches: u64,
    /// Logs that matched an event's topic0 but did not decode (kept raw only; `sync.strict` stops instead).
    pub undecodable: u64,
    /// Requests sent, errors seen, retries, splits.
    pub requests: u64,
    /// Of them, `eth_getLogs` requests.
    pub log_requests: u64,
    /// `eth_getBlockByNumber` calls, each call of a batch counted.
    pub header_calls: u64,
    /// Error answers.
    pub errors: u64,
    /// Of them, refusals for the rate (429, rate-limit errors).
    pub rate_limited: u64,
    /// Retries.
    pub retries: u64,
    /// Split answers.
    pub splits: u64,
    /// `eth_getLogs` requests sent without their addresses (many factory children).
    pub topic_only: u64,
    /// Logs of other contracts those answers carried, dropped.
    pub foreign_logs: u64,
    /// Logs an answer of the node delivered twice (or more), kept once.
    pub repeated_logs: u64,
    /// Blocks read from their receipts (over the cap for one address and topic0).
    pub receipt_blocks: u64,
    /// Times the logs of factory children found after their range was asked for were fetched for it.
    pub children_filled: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// Each provider as it stood at the end.
    pub providers: Vec<crate::node::ProviderSnapshot>,
}

impl SyncReport {
    /// Counts a committed batch.
    fn committed(&mut self, logs: u64, typed_rows: u64) {
        self.batches += 1;
        self.logs += logs;
        self.typed_rows += typed_rows;
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

/// Opens the configured database and prepares `config`'s job in it (tables created, checkpoints read),
/// after checking `chain_id` against the database (or recording it) when given.
async fn open_job(config: &Config, chain_id: Option<u64>) -> Result<(Sink, String, Job), Error> {
    // The chains of one process open their jobs one at a time: creating a schema or a typed table two
    // chains share at once races in Postgres's catalog (a unique violation, not "already exists").
    static OPENING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = OPENING.lock().await;
    let (mut sink, db) = open_sink(config).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
    let chain = config.chains[0].name.as_str();
    match chain_id {
        Some(chain_id) => {
            check_configured_chain_id(config, chain_id)?;
            sink.bind_chain(chain, chain_id).await.map_err(db_error)?;
        }
        // No node asked (the store-only bench): the chain recorded, or chain id 0 in a database that
        // records none yet.
        None => {
            if sink.bind_recorded(chain).await.map_err(db_error)?.is_none() {
                sink.bind_chain(chain, 0).await.map_err(db_error)?;
            }
        }
    }
    let mut job = Job::new(config)?;
    job.prepare(&mut sink).await.map_err(db_error)?;
    Ok((sink, db, job))
}

/// The chain's `chain_id`, when the config gives one, against the id its node serves.
///
/// # Errors
/// [`Error::Config`] naming the field and both ids.
fn check_configured_chain_id(config: &Config, served: u64) -> Result<(), Error> {
    let chain = &config.chains[0];
    match chain.chain_id {
        Some(expected) if expected != served => Err(Error::Config(format!(
            "{}: chains.{}.chain_id: {expected}, but its node serves chain {served} (correct chain_id, or point the chain's url at chain {expected})",
            config.source.display(),
            chain.name
        ))),
        _ => Ok(()),
    }
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

impl Ctx<'_> {
    /// Records how each provider stands (`meta.providers`) for `status` in another process; a failure to
    /// record it is logged, never the job's.
    async fn report_providers(&self) {
        let providers = self.node.providers();
        crate::observe::record_providers(&providers);
        let report = serde_json::json!({
            "at": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            "pid": std::process::id(),
            "providers": providers,
        });
        if let Err(err) = self
            .sink
            .set_meta(crate::sink::META_PROVIDERS, report.to_string())
            .await
        {
            tracing::warn!(database = %self.db, cause = %err, "could not record the providers' state for status");
        }
    }
}

/// What one step near the head achieved.
enum Step {
    /// Committed up to this block (or nothing to do).
    Done,
    /// The node's answers did not agree with each other (a lagging or changing backend): read again.
    Retry(String),
}

impl<'a> Ctx<'a> {
    /// Opens the database for `node`, which serves chain `chain_id`, and prepares the job.
    async fn attach(
        config: &'a Config,
        observer: &'a Observer,
        node: Arc<Node>,
        chain_id: u64,
    ) -> Result<Ctx<'a>, Error> {
        let (sink, db, job) = open_job(config, Some(chain_id)).await?;
        // A chain that has reorged makes a finalized block at the head suspect (`finality`).
        let reorged = sink.last_reorg().await.map_err(|source| Error::Database {
            database: db.clone(),
            source,
        })?;
        if reorged.is_some() {
            node.finality.saw_reorg();
        }
        let progress = watch::Sender::new(None);
        Ok(Ctx {
            config,
            observer,
            node,
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

    /// The highest block treated as final when the head is `head` ([`Node::final_block`]).
    async fn finalized(&self, head: BlockNumber) -> Result<BlockNumber, Error> {
        let sync = &self.config.sync;
        self.node
            .final_block(sync.finality, sync.max_reorg_depth, head)
            .await
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
    let window = config.sync.max_reorg_depth;
    let finalized = async {
        match config.sync.finality {
            Finality::Finalized => node.finalized().await.map(Some),
            Finality::Confirmations(_) => Ok(None),
        }
    };
    // The last `window` blocks below the head are tracked by hash whatever the node calls final: a target
    // other than the head needs the head too.
    let head = async {
        match target {
            Target::Latest => Ok(None),
            _ => node.resolve(Target::Latest, 0).await.map(Some),
        }
    };
    let (chain_id, target, head, finalized) = tokio::join!(
        node.chain_id(),
        node.resolve(target, window),
        head,
        finalized
    );
    let mut ctx = Ctx::attach(config, observer, Arc::new(node), chain_id?).await?;
    let target = target?;
    let head = head?.unwrap_or(target);
    ctx.node
        .note_finality(config.sync.finality, finalized?, head, window);
    // After finality was read: a reorg found here is reported against it.
    ctx.reconcile().await?;
    let finalized = Some(finality::final_block(target, head, window));
    let mut report = SyncReport {
        target,
        ..SyncReport::default()
    };
    let caught_up = ctx
        .catch_up(target, finalized, 16, &cancel, &mut report)
        .await;
    ctx.report_providers().await;
    caught_up?;
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

#[cfg(test)]
mod invariant_tests;
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
