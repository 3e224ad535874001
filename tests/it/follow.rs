//! `logslice run` and the reorg protection of `sync` near the head, against a devnode that mines and
//! reorganises on command: after every reorg the database must equal the canonical chain exactly.

use std::process::Stdio;
use std::time::Duration;

use devnode::DevNode;
use logslice::pipeline::{self, Target};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, assert_db_matches_truth_within, node_config,
    Backend, Workdir,
};

/// Seeded reorg depths (1 to 64) so a failure replays exactly.
const DEPTHS: [u64; 16] = [1, 7, 64, 3, 12, 2, 33, 1, 50, 5, 18, 64, 9, 1, 27, 4];

pub(crate) struct Daemon {
    task: JoinHandle<Result<pipeline::SyncReport, pipeline::Error>>,
    cancel: CancellationToken,
    progress: watch::Receiver<Option<u64>>,
}

pub(crate) fn start_daemon(config_path: &std::path::Path) -> Daemon {
    let config = logslice::config::load(config_path).expect("config");
    let cancel = CancellationToken::new();
    let (sender, progress) = watch::channel(None);
    let task = tokio::spawn({
        let cancel = cancel.clone();
        async move {
            pipeline::run_watched(
                &config,
                cancel,
                sender,
                &logslice::observe::Observer::default(),
            )
            .await
        }
    });
    Daemon {
        task,
        cancel,
        progress,
    }
}

impl Daemon {
    /// Waits (bounded) until every contract's checkpoint reaches `head`.
    pub(crate) async fn reaches(&mut self, head: u64) {
        let reached = matches!(
            tokio::time::timeout(
                Duration::from_secs(120),
                self.progress.wait_for(|cp| cp.is_some_and(|cp| cp >= head))
            )
            .await,
            Ok(Ok(_))
        );
        if !reached {
            let at = *self.progress.borrow();
            panic!(
                "the daemon did not reach block {head} (at {at:?}; finished: {})",
                self.task.is_finished()
            );
        }
    }

    pub(crate) async fn stop(self) -> Result<pipeline::SyncReport, pipeline::Error> {
        self.cancel.cancel();
        self.task.await.expect("the daemon task does not panic")
    }
}

/// Reorgs `depth` blocks deep, then mines `mined` blocks so the head moves past the fork.
fn reorg_and_mine(node: &DevNode, depth: u64, mined: u64) -> u64 {
    node.reorg(depth);
    node.mine(mined)
}

async fn follows_reorgs(node: DevNode, work: &Workdir) {
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "poll_interval = \"20ms\"",
    );
    let truth = node.truth();
    let mut daemon = start_daemon(&path);
    daemon.reaches(truth.head()).await;
    assert_db_matches_truth(work, &truth, &all_contracts(), truth.head()).await;
    for (round, depth) in DEPTHS.iter().enumerate() {
        let head = reorg_and_mine(&node, *depth, 1 + round as u64 % 3);
        daemon.reaches(head).await;
        // No row of an orphaned block survives the poll that saw the new branch. Every block a reorg
        // touched is compared each round, from twice the deepest reorg below the head; the whole database
        // (54k logs, 3 s a comparison) once at the end.
        let from = head.saturating_sub(2 * DEPTHS.iter().max().expect("depths"));
        assert_db_matches_truth_within(work, &truth, &all_contracts(), from, head).await;
    }
    assert_db_matches_truth(work, &truth, &all_contracts(), truth.head()).await;
    let stopped = daemon.stop().await;
    assert!(
        matches!(stopped, Err(pipeline::Error::Interrupted)),
        "{stopped:?}"
    );
}

/// The daemon follows a head that reorganises 1 to 64 blocks deep, many times in a row.
async fn the_daemon_rolls_back_every_reorg_to_the_common_ancestor(backend: Backend) {
    let node = support::start(node_config(3_000)).await;
    follows_reorgs(node, &Workdir::with(backend).await).await;
}
both_backends!(the_daemon_rolls_back_every_reorg_to_the_common_ancestor);

/// The same with a stale replica that serves orphaned logs with `removed: true` and a lagging backend
/// whose head is behind and whose newest blocks come back empty or null.
async fn the_daemon_stays_exact_with_removed_logs_and_a_lagging_backend(backend: Backend) {
    let mut config = node_config(3_000);
    config.faults.stale_replica = 0.5;
    config.faults.lag = 0.3;
    config.faults.lag_depth = 5;
    let node = support::start(config).await;
    follows_reorgs(node, &Workdir::with(backend).await).await;
}
both_backends!(the_daemon_stays_exact_with_removed_logs_and_a_lagging_backend);

/// A reorg that happened while logslice was not running is found from the stored hashes and repaired.
async fn a_reorg_while_logslice_was_down_is_repaired_at_start(backend: Backend) {
    let node = support::start(node_config(3_000)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&path, Target::Latest)
        .await
        .expect("first sync");
    node.reorg(20);
    support::sync(&path, Target::Latest)
        .await
        .expect("second sync");
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
}
both_backends!(a_reorg_while_logslice_was_down_is_repaired_at_start);

/// A reorg deeper than the remembered window stops with exit 65 and says what happened.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorg_deeper_than_the_tracked_window_stops_with_exit_65() {
    let node = support::start(node_config(3_000)).await;
    let work = Workdir::new();
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "finality = 4\nmax_reorg_depth = 4",
    );
    support::sync(&path, Target::Latest)
        .await
        .expect("first sync");
    reorg_and_mine(&node, 12, 1);
    let err = support::sync(&path, Target::Latest)
        .await
        .expect_err("a reorg deeper than the window");
    assert_eq!(logslice::exit::code(&err), 65, "{err}");
    assert!(
        err.to_string().contains("deeper than the tracked window"),
        "{err}"
    );
}

fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
}

/// `logslice run` killed with SIGKILL at arbitrary points while the node reorganises (some kills land in a
/// rollback), then restarted: the database ends exactly canonical.
async fn a_daemon_killed_during_reorgs_restarts_into_the_exact_chain(backend: Backend) {
    let node = support::start(node_config(3_000)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "poll_interval = \"5ms\"",
    );
    for (round, depth) in DEPTHS.iter().take(6).enumerate() {
        let mut child = binary()
            .args(["run", "--config"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let calls_before = node.stats().calls("eth_getBlockByNumber");
        reorg_and_mine(&node, *depth, 1);
        // Let it work for a varying number of requests, then kill it wherever it is.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while node.stats().calls("eth_getBlockByNumber") < calls_before + 3 + round as u64 * 7 {
            assert!(
                std::time::Instant::now() < deadline,
                "the daemon made no progress"
            );
            assert!(
                child.try_wait().expect("wait").is_none(),
                "the daemon exited early"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reap");
    }
    support::sync(&path, Target::Latest)
        .await
        .expect("final sync");
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
}
both_backends!(a_daemon_killed_during_reorgs_restarts_into_the_exact_chain);

/// SIGTERM stops the daemon with exit 130 after finishing (or dropping) the batch in flight; a restart
/// resumes exactly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_daemon_with_exit_130_and_a_restart_resumes_exactly() {
    let node = support::start(node_config(3_000)).await;
    let truth = node.truth();
    let work = Workdir::new();
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "poll_interval = \"10ms\"",
    );
    let mut child = binary()
        .args(["run", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while support::checkpoint(&work, "misc")
        .await
        .is_none_or(|cp| cp < truth.head() as i64)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon did not catch up"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the daemon exited early"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let status = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let exit = tokio::task::spawn_blocking(move || child.wait().expect("wait"))
        .await
        .expect("join");
    assert_eq!(exit.code(), Some(130));
    node.mine(5);
    support::sync(&path, Target::Latest).await.expect("restart");
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
}

/// A contract whose start block lies above finality joins inside the reorg-tracked stretch: its logs from
/// its start on are indexed, none skipped when the others are already further down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_starting_above_finality_is_indexed_from_its_start() {
    let node = support::start(node_config(3_000)).await;
    let truth = node.truth();
    let head = truth.head();
    let mut contracts = all_contracts();
    // Finality is 64 blocks behind the head: start two contracts inside that stretch.
    contracts[0].start_block = head - 40;
    contracts[2].start_block = head - 10;
    let work = Workdir::new();
    let path = work.write_config(&node.http_url(), &contracts, "", "");
    support::sync(&path, Target::Latest).await.expect("sync");
    assert_db_matches_truth(&work, &truth, &contracts, head).await;
}
