//! `logslice run` rides out what providers and databases do: a node that answers JSON-RPC errors, 429s,
//! 502s, hangs or refuses connections for a while, and a Postgres whose connections are killed, never end
//! the daemon; it reports itself unhealthy meanwhile, and once the trouble is over the database is exact.

use std::time::Duration;

use devnode::{DevNode, Down};
use logslice::observe::{Observer, StallClock};
use logslice::pipeline;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::both_backends;
use crate::support::{self, all_contracts, assert_db_matches_truth, node_config, Backend, Workdir};

/// How long a test waits for a state before failing (a guard, not a synchronisation).
const PATIENCE: Duration = Duration::from_secs(120);

/// The daemon's calls per second during the test: a ceiling the node checks.
const RATE: u64 = 200;

/// `run` in a task of this process, with the clock `/health` reads.
pub(crate) struct Daemon {
    task: JoinHandle<Result<pipeline::SyncReport, pipeline::Error>>,
    cancel: CancellationToken,
    progress: watch::Receiver<Option<u64>>,
    clock: StallClock,
}

impl Daemon {
    pub(crate) fn start(config_path: &std::path::Path) -> Self {
        let config = logslice::config::load(config_path).expect("config");
        let cancel = CancellationToken::new();
        let (sender, progress) = watch::channel(None);
        let clock = StallClock::new();
        let observer = Observer::new(Default::default(), clock.clone());
        let task = tokio::spawn({
            let cancel = cancel.clone();
            async move { pipeline::run_watched(&config, cancel, sender, &observer).await }
        });
        Self {
            task,
            cancel,
            progress,
            clock,
        }
    }

    pub(crate) async fn reaches(&mut self, head: u64) {
        let reached = matches!(
            tokio::time::timeout(
                PATIENCE,
                self.progress.wait_for(|cp| cp.is_some_and(|cp| cp >= head)),
            )
            .await,
            Ok(Ok(_))
        );
        assert!(
            reached,
            "the daemon did not reach block {head} (at {:?}; finished: {})",
            *self.progress.borrow(),
            self.task.is_finished()
        );
    }

    /// Waits until the daemon says it is riding out a failure whose description contains `what`.
    async fn reports_failing(&self, what: &str) {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            assert!(
                !self.task.is_finished(),
                "the daemon ended during the outage: {:?}",
                self.task
            );
            if let Some(failing) = self.clock.failure() {
                if failing.what.contains(what) {
                    return;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the daemon never reported {what:?} (it reports {:?})",
                self.clock.failure()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub(crate) async fn stop(self) {
        self.cancel.cancel();
        let stopped = self.task.await.expect("the daemon task does not panic");
        assert!(
            matches!(stopped, Err(pipeline::Error::Interrupted)),
            "{stopped:?}"
        );
    }
}

/// A config that gives up on a request fast (two attempts, short backoff and timeout), so that every
/// outage below outlasts the gate's retries and only the daemon's own riding out can carry it through.
fn write_config(work: &Workdir, node: &DevNode) -> std::path::PathBuf {
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "poll_interval = \"20ms\"",
    );
    let text = std::fs::read_to_string(&path).expect("config");
    let text = text
        .replace(
            "requests_per_second = 10000",
            &format!("requests_per_second = {RATE}"),
        )
        .replace("max_retries = 12", "max_retries = 1")
        .replace("max_backoff = \"50ms\"", "max_backoff = \"100ms\"")
        .replace("request_timeout = \"5s\"", "request_timeout = \"300ms\"");
    std::fs::write(&path, text).expect("config");
    path
}

/// Goal: no kind of node outage ends `run`, each is reported (the clock `/health` reads says unhealthy
/// while it lasts), and the daemon indexes the blocks mined meanwhile exactly once the node heals.
/// Method: per outage, blocks are mined, the node fails every request until the daemon reports the
/// outage (its gate's two attempts spent, at least), then heals; the daemon must reach the new head, and
/// the database equals the ground truth. The node's calls per second stay under the configured rate.
async fn the_daemon_rides_out_every_kind_of_node_outage(backend: Backend) {
    let node = support::start(node_config(3_000)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let mut daemon = Daemon::start(&write_config(&work, &node));
    daemon.reaches(truth.head()).await;
    for down in [
        Down::RpcErrors,
        Down::Status(429),
        Down::Status(502),
        Down::Hang,
        Down::Refuse,
    ] {
        node.set_down(down);
        let head = node.mine(3);
        daemon.reports_failing("the node is failing").await;
        let (code, text) = logslice::observe::health(
            daemon.clock.since(),
            Duration::from_secs(300),
            daemon
                .clock
                .failure()
                .as_ref()
                .map(|f| (f.since.elapsed(), f.what.as_str())),
        );
        assert_eq!(code.as_u16(), 503, "{down:?}: {text}");
        node.set_down(Down::Up);
        daemon.reaches(head).await;
        assert_eq!(daemon.clock.failure(), None, "{down:?}: healthy again");
    }
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
    let stats = node.stats();
    assert!(
        stats.max_calls_per_second <= RATE,
        "{} calls in one second, over the rate of {RATE}",
        stats.max_calls_per_second
    );
    daemon.stop().await;
}
both_backends!(the_daemon_rides_out_every_kind_of_node_outage);

/// Goal: Postgres connections lost under `run` (killed, as a server restart kills them) never end it; the
/// batch in flight is rolled back and done again, and the database ends exact. Method: while blocks are
/// mined, every connection of the daemon is killed again and again until it reports the lost database;
/// then the killing stops, and the daemon must reach the head with the ground truth's rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_rides_out_lost_postgres_connections() {
    use sqlx::Connection;
    let node = support::start(node_config(3_000)).await;
    let truth = node.truth();
    let work = Workdir::with(Backend::Postgres).await;
    let application = work.schema.as_ref().expect("Postgres").name.clone();
    let mut daemon = Daemon::start(&write_config(&work, &node));
    daemon.reaches(truth.head()).await;
    let mut admin = sqlx::PgConnection::connect(crate::pg::url().as_str())
        .await
        .expect("admin connection");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut head = truth.head();
    while !daemon
        .clock
        .failure()
        .is_some_and(|f| f.what.contains("the database connection is lost"))
    {
        assert!(
            !daemon.task.is_finished(),
            "the daemon ended: {:?}",
            daemon.task
        );
        assert!(
            tokio::time::Instant::now() < deadline,
            "the daemon never reported the lost database"
        );
        head = node.mine(1);
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        )
        .bind(&application)
        .execute(&mut admin)
        .await
        .expect("terminate");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    daemon.reaches(head).await;
    assert_eq!(daemon.clock.failure(), None, "healthy again");
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    daemon.stop().await;
}
