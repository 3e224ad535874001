//! A batch far larger than `max_batch_logs` (here a block of 11,000 logs read from its receipts) is encoded
//! and written in parts of one transaction, so it is never held whole in three forms: end to end on SQLite
//! and Postgres, the database ends equal to the ground truth, logs, typed rows and transactions alike, in
//! the backfill and at the head under `run`; and a `logslice` process killed with SIGKILL between the parts
//! of a batch leaves nothing of that batch committed, and a rerun ends exact.
//!
//! Method: `max_batch_logs = 1000`, so every batch over 4,000 logs is written in parts of 1,000 (each over-cap
//! block's batch is, whatever else is in the chain); the kill lands where a streamed batch holds after its
//! first part (`LOGSLICE_TEST_HOLD_PARTS`), seen from the test's own connection.

use logslice::pipeline::Target;
use logslice::sink::{HOLD_PARTS_ENV, HOLD_PARTS_MESSAGE};

use crate::both_backends;
use crate::receipts::{head_under_run, overcap_chain};
use crate::support::{
    self, all_contracts, assert_db_matches_truth, query_texts, Backend, Held, Workdir,
};
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

/// Goal: at the head under `run` (the head path decodes and writes in parts too), over-cap blocks above
/// finality, newly mined ones and a reorg that replaces one leave the database equal to the canonical chain,
/// each block counted once as read from receipts (`receipts::head_under_run`).
async fn over_cap_blocks_at_the_head_written_in_parts(backend: Backend) {
    head_under_run(backend, PARTS).await;
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
    let held = Held::sync(&path, 2_900, HOLD_PARTS_ENV, HOLD_PARTS_MESSAGE).await;
    // Held with a part written in the batch's open transaction: no other connection sees it.
    let (high, above) = committed(&work).await;
    assert!(high < 2_900, "held before the end (checkpoint {high})");
    assert_eq!(above, 0, "nothing of the held batch is visible");
    held.kill();
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
