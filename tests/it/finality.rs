//! A node without finality (it answers `null` for `finalized`, or refuses the tag with -32000, as geth did
//! before the merge): logslice falls back to the reorg window instead of walking the chain block by block,
//! and ends exact, with about the requests of a node that has finality.

use devnode::Finality;
use logslice::pipeline::Target;

use crate::support::{self, all_contracts, assert_db_matches_truth, node_config, Backend, Workdir};

/// Syncs a 100,000-block chain (sparse, so the test stays short; its >10,000-log blocks stay) to the head
/// on a node with `finality`, checks the database against the node's ground truth log by log, and returns
/// the requests the node counted.
async fn sync_to_head(finality: Finality, backend: Backend) -> (u64, String) {
    let mut config = node_config(100_000);
    config.chain.density = 0.02;
    config.chain.finality = finality;
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    // One request at a time: the planner then sees its answers in one order, so the request counts of the
    // three runs differ only by what finality changes (with 8 in flight they moved by a fifth from run to
    // run on this chain, finality or not).
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "max_concurrency = 1",
        "",
    );
    let report = support::sync(&path, Target::Latest)
        .await
        .unwrap_or_else(|err| panic!("{finality:?}: {err}"));
    assert_eq!(report.target, truth.head(), "{finality:?}");
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
    let stats = node.stats();
    // Headers above finality: the reorg window at most, never the chain.
    let header_calls = stats.calls("eth_getBlockByNumber");
    assert!(
        header_calls <= 128 + 3,
        "{finality:?}: {header_calls} header calls"
    );
    (stats.http_requests, stats.summary())
}

/// Goal: without finality the same chain syncs exact with at most 1.2x the requests of a node that has it,
/// whether the node answers `null` or an error. Method: three syncs of one seeded chain, one per mode, one
/// request at a time, each compared with ground truth; the node's own request counters give the ratio.
async fn a_node_without_finality_syncs_exact_with_about_the_same_requests(backend: Backend) {
    let (with, with_summary) = sync_to_head(Finality::Block, backend).await;
    for finality in [Finality::Null, Finality::Error] {
        let (without, summary) = sync_to_head(finality, backend).await;
        assert!(
            without * 10 <= with * 12,
            "{finality:?}: {without} requests against {with} with finality\n{summary}\nwith finality:\n{with_summary}"
        );
    }
}

mod a_node_without_finality_syncs_exact_with_about_the_same_requests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sqlite() {
        super::a_node_without_finality_syncs_exact_with_about_the_same_requests(Backend::Sqlite)
            .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn postgres() {
        super::a_node_without_finality_syncs_exact_with_about_the_same_requests(Backend::Postgres)
            .await;
    }
}

/// `--to finalized` on a node without finality syncs to `max_reorg_depth` blocks below the head (a warning
/// says so) instead of failing; the daemon-style step above it still tracks the window by hash.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn to_finalized_without_finality_stops_the_reorg_window_below_the_head() {
    let mut config = node_config(5_000);
    config.chain.finality = Finality::Null;
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::new();
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "max_reorg_depth = 100",
    );
    let report = support::sync(&path, Target::Finalized)
        .await
        .expect("a node without finality still syncs");
    assert_eq!(report.target, truth.head() - 100);
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head() - 100).await;
}

/// `finality = N` above `max_reorg_depth` is refused before anything is asked: the `logslice` binary exits
/// 78 naming the field and the fix, and the node sees no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirmations_beyond_the_reorg_window_are_a_config_error() {
    let node = support::start(node_config(1_000)).await;
    let work = Workdir::new();
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "finality = 500\nmax_reorg_depth = 128",
    );
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
            .args(["sync", "--to", "latest", "--config"])
            .arg(&path)
            .output()
    })
    .await
    .expect("join")
    .expect("run logslice");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("sync.finality: 500 confirmations is more than sync.max_reorg_depth (128)")
            && stderr.contains("raise sync.max_reorg_depth to at least 500"),
        "{stderr}"
    );
    assert_eq!(node.stats().http_requests, 0);
}

/// Goal: a node whose `finalized` block is its head (a devnet, some L2 endpoints, a provider misreporting
/// the tag) does not make logslice trust it blindly: the last `max_reorg_depth` blocks are tracked by hash
/// anyway, a reorg of blocks the node had called final is rolled back like any other, and the rollback is
/// reported as under finality (the note `status` shows). Method: sync to the head, reorg the top blocks,
/// sync again; the database must equal the ground truth, and the recorded reorg must say so.
async fn a_reorg_under_a_finalized_head_is_rolled_back_and_reported(backend: Backend) {
    let mut config = node_config(2_000);
    config.chain.finalized_depth = 0;
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&path, Target::Latest)
        .await
        .expect("first sync");
    assert_eq!(
        truth.finalized(),
        truth.head(),
        "the node calls its head final"
    );
    node.reorg(6);
    let head = node.mine(1);
    let report = support::sync(&path, Target::Latest)
        .await
        .expect("the sync after the reorg");
    assert_eq!(report.target, head);
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    let note = support::query_texts(
        &work,
        "SELECT last_reorg FROM chains WHERE name = 'default'",
    )
    .await;
    let note = note.concat().concat();
    assert!(
        note.contains("rolled back 6 blocks") && note.contains("under the final block"),
        "{note}"
    );
}
crate::both_backends!(a_reorg_under_a_finalized_head_is_rolled_back_and_reported);

/// Goal: a block hash reorged away between the header read and the logs read (so the logs answered are
/// another branch's) is a reorg signal, in `sync` and under `run`: nothing of the orphaned branch is kept.
/// Method: the node reorganises right after answering the header of the newest block; `sync` to the head
/// must end exact, then a daemon meets the same when a new block comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hash_reorged_away_between_the_header_and_the_logs_read_is_a_reorg() {
    let node = support::start(node_config(2_000)).await;
    let truth = node.truth();
    let work = Workdir::with(Backend::Sqlite).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "poll_interval = \"20ms\"",
    );
    node.reorg_after_header(truth.head(), 3);
    let report = support::sync(&path, Target::Latest)
        .await
        .expect("the sync through the reorg");
    assert_eq!(report.target, truth.head());
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
    let mut daemon = crate::follow::start_daemon(&path);
    daemon.reaches(truth.head()).await;
    for round in 0..3 {
        let head = node.mine(2);
        node.reorg_after_header(head, 1 + round);
        daemon.reaches(head).await;
        let reorged = node.mine(1);
        daemon.reaches(reorged).await;
        assert_db_matches_truth(&work, &truth, &all_contracts(), reorged).await;
    }
    assert!(daemon.stop().await.is_err(), "stopped by its token");
}
