//! A batch far larger than `max_batch_logs` (here a block of 11,000 logs read from its receipts) is encoded
//! and written in parts of one transaction, so it is never held whole in three forms: end to end on SQLite
//! and Postgres, the database ends equal to the ground truth, logs, typed rows and transactions alike, in
//! the backfill and at the head under `run`; and a `logslice` process killed with SIGKILL between the parts
//! of a batch leaves nothing of that batch committed, and a rerun ends exact.
//!
//! Method: `max_batch_logs = 1000`, so every batch over 4,000 logs is written in parts of 1,000 (each over-cap
//! block's batch is, whatever else is in the chain); the kill lands where a streamed batch holds after its
//! first part (`LOGSLICE_TEST_HOLD_PARTS`), seen from the test's own connection.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use logslice::pipeline::{self, Target};
use logslice::sink::{HOLD_PARTS_ENV, HOLD_PARTS_MESSAGE};

use crate::both_backends;
use crate::follow::start_daemon;
use crate::receipts::overcap_chain;
use crate::support::{self, all_contracts, assert_db_matches_truth, query_texts, Backend, Workdir};
use crate::transactions::{assert_transactions_match, Receipts};

/// Parts of this many logs; a batch of more than four times as many is written in parts.
const PARTS: &str = "max_batch_logs = 1000";

/// Goal: over-cap blocks (alone and in a run) whose batches are written in parts end exact, with their
/// transactions (and receipts' fields), and each counts once as read from receipts.
async fn over_cap_blocks_written_in_parts_end_exact(backend: Backend) {
    let node = support::start(overcap_chain(3_000, &[700], Some((1_200, 3)), true)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let sync = format!("{PARTS}\ntransactions = true\ntransaction_receipts = true");
    let path = work.write_config(&node.http_url(), &all_contracts(), "", &sync);
    let report = support::sync(&path, Target::Number(2_900))
        .await
        .expect("sync");
    assert_db_matches_truth(&work, &truth, &all_contracts(), 2_900).await;
    assert_transactions_match(&work, &truth, 2_900, Receipts::With).await;
    assert_eq!(report.receipt_blocks, 4);
    assert!(
        report.streamed_batches >= 4,
        "each over-cap block's batch is written in parts: {report:?}"
    );
    assert!(report.batches > report.streamed_batches);
}
both_backends!(over_cap_blocks_written_in_parts_end_exact);

/// Goal: at the head under `run` (the head path commits in parts too), over-cap blocks above finality and a
/// reorg that replaces one leave the database equal to the canonical chain.
async fn over_cap_blocks_at_the_head_written_in_parts(backend: Backend) {
    let node = support::start(overcap_chain(
        2_000,
        &[1_960, 2_003],
        Some((1_990, 2)),
        true,
    ))
    .await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let sync = format!("{PARTS}\npoll_interval = \"20ms\"");
    let path = work.write_config(&node.http_url(), &all_contracts(), "", &sync);
    let mut daemon = start_daemon(&path);
    daemon.reaches(truth.head()).await;
    assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
    let head = node.mine(5);
    daemon.reaches(head).await;
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    let orphaned = truth.block(2_003).expect("block 2003").hash;
    node.reorg(4);
    let head = node.mine(2);
    daemon.reaches(head).await;
    assert_ne!(truth.block(2_003).expect("block 2003").hash, orphaned);
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    let stopped = daemon.stop().await;
    assert!(
        matches!(stopped, Err(pipeline::Error::Interrupted)),
        "{stopped:?}"
    );
}
both_backends!(over_cap_blocks_at_the_head_written_in_parts);

/// The highest checkpoint of any contract, and the number of raw logs above it, as another connection
/// sees them.
async fn committed(work: &Workdir) -> (i64, i64) {
    let rows = query_texts(
        work,
        "SELECT CAST(COALESCE(MAX(block_number), -1) AS TEXT) FROM checkpoints",
    )
    .await;
    let high: i64 = rows[0][0].parse().expect("a number");
    let above = query_texts(
        work,
        &format!("SELECT CAST(count(*) AS TEXT) FROM logs WHERE block_number > {high}"),
    )
    .await;
    (high, above[0][0].parse().expect("a number"))
}

/// Goal: SIGKILL between the parts of a batch commits nothing of it: no row above the checkpoints, and the
/// rerun ends exact with each over-cap block counted once.
async fn a_batch_killed_between_its_parts_commits_nothing_of_it(backend: Backend) {
    let node = support::start(overcap_chain(3_000, &[700], Some((1_200, 3)), true)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", PARTS);
    let mut child = Command::new(env!("CARGO_BIN_EXE_logslice"))
        .args(["sync", "--to", "2900", "--config"])
        .arg(&path)
        .env_remove("RUST_LOG")
        .env(HOLD_PARTS_ENV, "1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn logslice");
    // The child says when it holds; its stderr is read on a thread of its own until then.
    let stderr = child.stderr.take().expect("piped stderr");
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if line.contains(HOLD_PARTS_MESSAGE) {
                let _ = held_tx.send(());
            }
            seen.push(line);
        }
        seen
    });
    let held = tokio::task::spawn_blocking(move || held_rx.recv_timeout(Duration::from_secs(120)))
        .await
        .expect("join");
    if held.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "the child never held a batch between its parts:\n{}",
            reader.join().expect("reader").join("\n")
        );
    }
    // Held with a part written in the batch's open transaction: no other connection sees it.
    let (high, above) = committed(&work).await;
    assert!(high < 2_900, "held before the end (checkpoint {high})");
    assert_eq!(above, 0, "nothing of the held batch is visible");
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    reader.join().expect("reader");
    let (after_kill, above) = committed(&work).await;
    assert_eq!((after_kill, above), (high, 0), "nothing of it landed");

    let report = support::sync(&path, Target::Number(2_900))
        .await
        .expect("rerun");
    assert_db_matches_truth(&work, &truth, &all_contracts(), 2_900).await;
    assert!(report.streamed_batches >= 1, "{report:?}");
    let counted = query_texts(&work, "SELECT CAST(count(*) AS TEXT) FROM receipt_blocks").await;
    assert_eq!(counted, vec![vec!["4".to_string()]]);
}
both_backends!(a_batch_killed_between_its_parts_commits_nothing_of_it);
