//! A node that delivers logs twice: every log of an `eth_getLogs` answer repeated (the whole list served
//! again after itself, as a node repeating a range would) is the same log and is stored once, on both
//! backends, below finality and above it; two different logs claiming one `(block_number, log_index)` stop
//! the sync with exit 65 naming the block, before either reaches the database.

use devnode::DevNode;
use logslice::pipeline::Target;

use crate::both_backends;
use crate::follow::start_daemon;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, Backend, Contract, Workdir,
};

/// A short chain: 1,000 blocks, 64 of them above finality (the node's `finalized_depth`), so `--to latest`
/// reads logs through the backfill and through the near-head path.
const BLOCKS: u64 = 1_000;

/// Goal: a node repeating every answer's logs leaves the database exactly the ground truth. Method: every
/// `eth_getLogs` answer (surveys, ranges, the span above finality) carries its list twice; `sync --to
/// latest`, then the database compared with the ground truth log by log, raw and typed.
async fn every_log_delivered_twice_is_stored_once(backend: Backend) {
    let mut config = node_config(BLOCKS);
    config.faults.repeated_logs = 1.0;
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let report = support::sync(&path, Target::Latest)
        .await
        .unwrap_or_else(|err| panic!("a repeated log is not an error: {err}"));
    assert_eq!(report.target, truth.head());
    assert!(
        truth.head() > truth.finalized(),
        "blocks above finality are read by the near-head path"
    );
    let n_logs = assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
    assert_eq!(report.logs, n_logs as u64, "each log committed once");
    assert!(
        report.repeated_logs >= n_logs as u64,
        "every stored log came twice and was counted: {} repeats for {n_logs} logs",
        report.repeated_logs
    );
}
both_backends!(every_log_delivered_twice_is_stored_once);

/// Goal: `logslice run`'s code path (backfill, then following the head as blocks are mined) stores repeated
/// logs once. Method: the daemon in-process on a node repeating every answer; it catches up, the node mines
/// blocks, and once the daemon's checkpoint reaches the new head the database equals the ground truth.
async fn the_daemon_stores_repeated_logs_once(backend: Backend) {
    let mut config = node_config(BLOCKS);
    config.faults.repeated_logs = 1.0;
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "poll_interval = \"20ms\"",
    );
    let mut daemon = start_daemon(&path);
    daemon.reaches(truth.head()).await;
    let head = node.mine(5);
    daemon.reaches(head).await;
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    let stopped = daemon.stop().await;
    assert!(
        matches!(stopped, Err(logslice::pipeline::Error::Interrupted)),
        "{stopped:?}"
    );
}
both_backends!(the_daemon_stores_repeated_logs_once);

/// Goal: two different logs at one position are the node's error, exit 65 naming the block and log index,
/// and neither is stored, below finality and above it. Method: every answer's first log is followed by
/// another at its block and log index with other data; a sync of the whole chain, and one whose contracts
/// start above finality (only the near-head path reads logs), must each fail with 65, the position named
/// must be a log of the chain that was asked for, and whatever was committed before must be exactly the
/// ground truth up to the checkpoint.
async fn a_conflicting_duplicate_stops_the_sync_with_exit_65_naming_the_block(backend: Backend) {
    let mut config = node_config(BLOCKS);
    config.faults.conflicting_log = 1.0;
    let node = support::start(config).await;
    let above_finality: Vec<Contract> = all_contracts()
        .into_iter()
        .map(|contract| Contract {
            start_block: node.truth().finalized() + 1,
            ..contract
        })
        .collect();
    for contracts in [all_contracts(), above_finality] {
        conflict_stops_the_sync(&node, &contracts, backend).await;
    }
}
both_backends!(a_conflicting_duplicate_stops_the_sync_with_exit_65_naming_the_block);

async fn conflict_stops_the_sync(node: &DevNode, contracts: &[Contract], backend: Backend) {
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), contracts, "", "");
    let err = support::sync(&path, Target::Latest)
        .await
        .expect_err("two logs at one position cannot be right");
    assert_eq!(logslice::exit::code(&err), 65, "{err}");
    let message = err.to_string();
    let (block, log_index) = named_position(&message)
        .unwrap_or_else(|| panic!("the error names no block and log index: {message}"));
    assert!(
        block >= contracts[0].start_block
            && truth
                .logs(block, block)
                .iter()
                .any(|log| log.log_index == log_index),
        "block {block} has no log {log_index} asked for: {message}"
    );
    let committed = support::checkpoint(&work, "token_a").await;
    if let Some(checkpoint) = committed.filter(|&cp| cp >= 0) {
        let checkpoint = u64::try_from(checkpoint).expect("non-negative");
        assert!(
            checkpoint < block,
            "the conflicting block was not committed"
        );
        assert_db_matches_truth(&work, &truth, contracts, checkpoint).await;
    }
}

/// The `(block, log index)` an error message names as "block N log index I".
fn named_position(message: &str) -> Option<(u64, u64)> {
    let number_after = |text: &str, word: &str| -> Option<(u64, usize)> {
        let at = text.find(word)? + word.len();
        let digits: String = text[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        Some((digits.parse().ok()?, at + digits.len()))
    };
    let (block, end) = number_after(message, "block ")?;
    let (log_index, _) = number_after(&message[end..], " log index ")?;
    Some((block, log_index))
}
