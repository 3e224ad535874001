//! `logslice run`: backfill, then follow the head every `sync.poll_interval`, riding out what providers
//! and databases do.
//!
//! A failing node (unreachable, a rejected key, 429s, 5xx, JSON-RPC errors or timeouts past
//! `node.max_retries`) or a lost database connection (a server restart, killed connections, a pool that
//! timed out) never ends the daemon. The open job is dropped, so the transaction in flight rolls back whole;
//! the daemon waits a backoff (full jitter, doubling from `node.initial_backoff` up to `node.max_backoff`,
//! and never less than the node's `Retry-After`), then opens the database and the job afresh from what the
//! database holds, exactly as a restart would, and carries on. One warning when the trouble starts or
//! changes, one line when it is over, and `/health` answers 503 meanwhile ([`crate::observe::StallClock`]).
//!
//! Only what retrying cannot mend ends it: the configuration (78), a database error other than a lost
//! connection (74), data that cannot be right (65), a bug (70), a signal (130). `sync` is not here: it keeps
//! its exit codes after `node.max_retries` and `database.max_retries`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::fetch;
use crate::observe::Observer;
use crate::primitives::BlockNumber;
use crate::rpc::Class;

use super::{Ctx, Error, Node, SyncReport, Target};

/// What the daemon is riding out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trouble {
    /// The node failed past its retries, or rejected the key.
    Node,
    /// The database connection was lost.
    Database,
}

impl Trouble {
    fn describe(self) -> &'static str {
        match self {
            Trouble::Node => "the node is failing",
            Trouble::Database => "the database connection is lost",
        }
    }
}

/// Whether `run` rides `err` out (and which trouble it is), or ends with it.
pub(super) fn trouble(err: &Error) -> Option<Trouble> {
    match err {
        Error::Node {
            source:
                fetch::Error::Rejected { .. }
                | fetch::Error::Exhausted { .. }
                | fetch::Error::UnknownBlock { .. },
            ..
        }
        | Error::NotYet(_) => Some(Trouble::Node),
        Error::Database { source, .. } if source.is_connection_lost() => Some(Trouble::Database),
        _ => None,
    }
}

/// The node's own hint of how long to wait (`Retry-After`, `data.rate.backoff_seconds`), if the error
/// carries one.
fn hint(err: &Error) -> Option<Duration> {
    match err {
        Error::Node {
            source: fetch::Error::Exhausted { source, .. },
            ..
        } => match source.class() {
            Class::Retry { after } => after,
            _ => None,
        },
        _ => None,
    }
}

/// An outage being ridden out: its backoff and what was last said about it.
#[derive(Debug)]
struct Outage {
    initial_backoff: Duration,
    max_backoff: Duration,
    /// Failed attempts in a row.
    attempts: u32,
    /// When it began, and the trouble last warned about.
    current: Option<(Instant, Trouble)>,
}

impl Outage {
    fn new(config: &Config) -> Self {
        Self {
            initial_backoff: config.node.initial_backoff(),
            max_backoff: config.node.max_backoff(),
            attempts: 0,
            current: None,
        }
    }

    /// Records a failed attempt: warns when the trouble is new (not on every retry), marks `/health`
    /// unhealthy, and returns how long to wait before the next attempt.
    fn failed(&mut self, trouble: Trouble, err: &Error, observer: &Observer) -> Duration {
        self.attempts = self.attempts.saturating_add(1);
        let delay = self.backoff(hint(err));
        let what = format!("{}: {err}", trouble.describe());
        observer.clock().failing(what);
        let since = match self.current {
            Some((since, seen)) if seen == trouble => {
                tracing::debug!(cause = %err, attempt = self.attempts, delay_ms = delay.as_millis() as u64, "still failing");
                since
            }
            current => {
                tracing::warn!(
                    cause = %err,
                    retry_in_ms = delay.as_millis() as u64,
                    "{}; riding it out: retrying with backoff up to node.max_backoff, /health answers 503 meanwhile",
                    trouble.describe()
                );
                current.map_or_else(Instant::now, |(since, _)| since)
            }
        };
        self.current = Some((since, trouble));
        delay
    }

    /// An attempt got through: says once that the outage is over.
    fn recovered(&mut self) {
        self.attempts = 0;
        if let Some((since, trouble)) = self.current.take() {
            tracing::info!(
                after_secs = since.elapsed().as_secs_f64(),
                "recovered: {} no more",
                trouble.describe()
            );
        }
    }

    /// Full jitter over `initial_backoff * 2^(attempts - 1)`, capped at `max_backoff`; at least `hint`.
    fn backoff(&self, hint: Option<Duration>) -> Duration {
        let doublings = self.attempts.saturating_sub(1).min(16);
        let ceiling = self
            .initial_backoff
            .saturating_mul(1 << doublings)
            .min(self.max_backoff);
        let jittered = ceiling.mul_f64(fastrand::f64());
        hint.map_or(jittered, |after| after.max(jittered))
    }
}

/// `logslice run`: backfills, then follows the head every `sync.poll_interval`, rolling back reorgs and
/// riding out outages, until `cancel` fires.
///
/// # Errors
/// [`Error::Interrupted`] on shutdown (everything committed before it is intact), or an [`Error`] that
/// retrying cannot mend.
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
/// reporting progress, health and metrics to `observer`.
///
/// # Errors
/// As [`run`].
pub async fn run_watched(
    config: &Config,
    cancel: CancellationToken,
    progress: watch::Sender<Option<BlockNumber>>,
    observer: &Observer,
) -> Result<SyncReport, Error> {
    let mut daemon = Daemon {
        config,
        observer,
        cancel: &cancel,
        progress,
        started: Instant::now(),
        report: SyncReport::default(),
        outage: Outage::new(config),
        caught_up: false,
        providers_reported: None,
    };
    // The node is connected once (`sim://` starts its node here): what the run learns about it is kept
    // across outages.
    let node = loop {
        match Node::connect(&config.node, &cancel).await {
            Ok(node) => break Arc::new(node),
            Err(err) => daemon.wait_out(err).await?,
        }
    };
    loop {
        let err = daemon.attempt(&node).await;
        daemon.wait_out(err).await?;
    }
}

/// The state of one `run` across its attempts.
struct Daemon<'a> {
    config: &'a Config,
    observer: &'a Observer,
    cancel: &'a CancellationToken,
    progress: watch::Sender<Option<BlockNumber>>,
    started: Instant,
    report: SyncReport,
    outage: Outage,
    caught_up: bool,
    /// When `meta.providers` was last written.
    providers_reported: Option<Instant>,
}

impl Daemon<'_> {
    /// Waits out `err` when the daemon rides it out; otherwise (or on a signal) returns it.
    async fn wait_out(&mut self, err: Error) -> Result<(), Error> {
        let Some(trouble) = trouble(&err) else {
            return Err(err);
        };
        if let (Trouble::Node, Error::NotYet(why)) = (trouble, &err) {
            // The head could not be read consistently this time (a lagging backend, a reorg under the
            // read): read again next poll, as any poll does; not an outage.
            tracing::debug!(%why, "head not consistent yet");
            return self.poll_wait().await;
        }
        let delay = self.outage.failed(trouble, &err, self.observer);
        tokio::select! {
            _ = self.cancel.cancelled() => Err(Error::Interrupted),
            _ = tokio::time::sleep(delay) => Ok(()),
        }
    }

    async fn poll_wait(&self) -> Result<(), Error> {
        tokio::select! {
            _ = self.cancel.cancelled() => Err(Error::Interrupted),
            _ = tokio::time::sleep(self.config.sync.poll_interval) => Ok(()),
        }
    }

    /// Opens the database and the job from what it holds, then follows the head until something fails;
    /// the sink is closed before the failure is returned, so the next attempt opens it afresh.
    async fn attempt(&mut self, node: &Arc<Node>) -> Error {
        let chain_id = match node.chain_id().await {
            Ok(chain_id) => chain_id,
            Err(err) => return err,
        };
        let mut ctx = match Ctx::attach(self.config, self.observer, node.clone(), chain_id).await {
            Ok(ctx) => ctx,
            Err(err) => return err,
        };
        ctx.progress = self.progress.clone();
        ctx.publish();
        let err = self.follow(&mut ctx).await;
        ctx.sink.close().await;
        err
    }

    /// Catches up with the head, then polls it, until an error.
    async fn follow(&mut self, ctx: &mut Ctx<'_>) -> Error {
        loop {
            if let Err(err) = self.poll(ctx).await {
                return err;
            }
            ctx.node.add_stats(&mut self.report);
            self.report.elapsed = self.started.elapsed();
            if self
                .providers_reported
                .is_none_or(|at| at.elapsed() >= crate::observe::PROGRESS_LOG_INTERVAL)
            {
                ctx.report_providers().await;
                self.providers_reported = Some(Instant::now());
            }
            if let Err(err) = self.poll_wait().await {
                return err;
            }
        }
    }

    /// One poll: repairs a reorg, reads the head and catches up with it.
    async fn poll(&mut self, ctx: &mut Ctx<'_>) -> Result<(), Error> {
        let head = ctx.node.resolve(Target::Latest, 0).await?;
        // Finality is read before the first reconcile, so that a reorg found there is reported against
        // it, and then only when there is work: a poll that finds no new block costs two calls.
        if ctx.node.finality.reported().is_none() {
            ctx.finalized(head).await?;
        }
        ctx.reconcile().await?;
        // A node whose head went backwards (a lagging replica) gives nothing to do until it catches up.
        if ctx.job.start(head).is_some() {
            let caught_up = ctx
                .catch_up(head, None, 1, self.cancel, &mut self.report)
                .await;
            match caught_up {
                Ok(()) => self.report.target = head,
                // A head that could not be read consistently this time is read again next poll.
                Err(Error::NotYet(why)) => {
                    tracing::debug!(%why, "head not consistent yet");
                    return Ok(());
                }
                Err(err) => return Err(err),
            }
        }
        // At the head and consistent: healthy, even when no block came.
        self.observer.clock().advanced();
        self.outage.recovered();
        if !self.caught_up {
            self.caught_up = true;
            tracing::info!(
                head,
                secs = self.started.elapsed().as_secs_f64(),
                "caught up; following the head"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink;

    fn db_error(source: sink::Error) -> Error {
        Error::Database {
            database: "postgres://u@h/db".into(),
            source,
        }
    }

    /// What the daemon rides out and what ends it, by the error's class.
    #[test]
    fn rides_out_node_failures_and_lost_connections_and_nothing_else() {
        let exhausted = Error::Node {
            node: "n".into(),
            source: fetch::Error::Exhausted {
                provider: "p".into(),
                method: "eth_blockNumber",
                attempts: 9,
                source: crate::rpc::Error::Http {
                    status: 429,
                    retry_after: Some(Duration::from_secs(7)),
                },
            },
        };
        assert_eq!(trouble(&exhausted), Some(Trouble::Node));
        assert_eq!(hint(&exhausted), Some(Duration::from_secs(7)));
        let lost = db_error(sink::Error::Query {
            doing: "reading block hashes",
            source: sqlx::Error::PoolTimedOut,
        });
        assert_eq!(trouble(&lost), Some(Trouble::Database));
        let constraint = db_error(sink::Error::Malformed("x".into()));
        assert_eq!(trouble(&constraint), None);
        assert_eq!(trouble(&Error::NodeData("bad".into())), None);
        assert_eq!(trouble(&Error::Config("bad".into())), None);
        assert_eq!(trouble(&Error::Interrupted), None);
        let fatal = Error::Node {
            node: "n".into(),
            source: fetch::Error::Inconsistent("x".into()),
        };
        assert_eq!(trouble(&fatal), None);
    }

    /// The backoff doubles up to `max_backoff`, never exceeds it (unless the node asks for longer), and
    /// honours the node's hint.
    #[test]
    fn the_backoff_doubles_to_its_cap_and_honours_the_nodes_hint() {
        let mut outage = Outage {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            attempts: 0,
            current: None,
        };
        for attempt in 1..=20 {
            outage.attempts = attempt;
            let ceiling = Duration::from_millis(100 * (1 << (attempt - 1).min(16)))
                .min(Duration::from_secs(2));
            for _ in 0..50 {
                assert!(outage.backoff(None) <= ceiling);
            }
            assert!(outage.backoff(Some(Duration::from_secs(5))) >= Duration::from_secs(5));
        }
    }
}
