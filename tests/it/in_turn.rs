//! Batches committed in turn (`sink::InTurn`): on Postgres two batches are written at once and commit in
//! order; a batch that fails stops every batch after it, so no checkpoint ever passes rows that are not
//! there. A trigger that refuses the rows of some blocks makes a batch fail where the test wants it.

use logslice::pipeline::{self, Target};
use logslice::sink::{self, Sink};

use crate::both_backends;
use crate::postgres_sink::{batch, prepared, Backend as SinkBackend};
use crate::support::{self, all_contracts, assert_db_matches_truth, node_config, Backend, Workdir};

/// What the refusing trigger says, so the test knows its error.
const REFUSED: &str = "refused by the test";

/// A trigger refusing every raw log of `blocks` (an SQL condition on `NEW.block_number`), and the statement
/// that drops it.
fn refusing_trigger(backend: Backend, blocks: &str) -> (Vec<String>, String) {
    match backend {
        Backend::Sqlite => (
            vec![format!(
                "CREATE TRIGGER refuse BEFORE INSERT ON logs WHEN NEW.block_number {blocks} \
                 BEGIN SELECT RAISE(ABORT, '{REFUSED}'); END"
            )],
            "DROP TRIGGER refuse".to_owned(),
        ),
        Backend::Postgres => (
            vec![
                format!(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS \
                     $$ BEGIN RAISE EXCEPTION '{REFUSED}'; END $$"
                ),
                format!(
                    "CREATE TRIGGER refuse BEFORE INSERT ON logs FOR EACH ROW \
                     WHEN (NEW.block_number {blocks}) EXECUTE FUNCTION refuse()"
                ),
            ],
            "DROP TRIGGER refuse ON logs".to_owned(),
        ),
    }
}

/// The first block of each committed batch, in the order handed back.
fn firsts(committed: &[sink::Committed]) -> Vec<u64> {
    committed
        .iter()
        .map(|c| c.batch.logs[0].block_number)
        .collect()
}

/// Goal: batches submitted in turn commit in order, on Postgres two at a time, and one that fails stops those
/// after it. Method: four batches of two blocks each, the third refused by a trigger (only it); on Postgres
/// the fourth was written beside the third and must be abandoned, not committed.
async fn a_failed_batch_stops_the_batches_after_it(backend: SinkBackend) {
    let mut db = prepared(backend).await;
    let (create, _) = refusing_trigger(
        match backend {
            SinkBackend::Sqlite => Backend::Sqlite,
            SinkBackend::Postgres => Backend::Postgres,
        },
        "= 104",
    );
    for sql in &create {
        match &db.sink {
            Sink::Sqlite(s) => sqlx::query(sql).execute(s.pool()).await.map(|_| ()),
            Sink::Postgres(s) => sqlx::query(sql).execute(s.pool()).await.map(|_| ()),
        }
        .expect("creating the trigger");
    }
    let mut in_turn = sink::InTurn::default();
    let mut committed = Vec::new();
    let mut failed = None;
    for blocks in [100..=101, 102..=103, 104..=105, 106..=107] {
        let batch = batch(blocks);
        let encoded = db.sink.encoder().encode(&batch).expect("encodes");
        match in_turn.submit(&mut db.sink, batch, encoded).await {
            Ok(done) => committed.push(firsts(&done)),
            Err(err) => {
                failed = Some(err);
                break;
            }
        }
    }
    let failed = match failed {
        Some(err) => err,
        None => in_turn.drain().await.expect_err("the third batch fails"),
    };
    match backend {
        // Each batch commits as it is submitted; the third fails there.
        SinkBackend::Sqlite => assert_eq!(committed, vec![vec![100], vec![102]]),
        // Two in flight: the third waits for the first, the fourth for the second; the third fails in
        // `drain` and the fourth, written by then, is abandoned.
        SinkBackend::Postgres => {
            assert_eq!(committed, vec![vec![], vec![], vec![100], vec![102]])
        }
    }
    assert!(
        matches!(&failed, sink::Error::Query { .. }) && failed.to_string().contains(REFUSED),
        "{failed}"
    );
    // Postgres: the fourth batch, written beside the third, is never committed.
    let fourth = in_turn.next().await;
    match backend {
        SinkBackend::Sqlite => assert!(fourth.is_none(), "SQLite had a batch in flight"),
        SinkBackend::Postgres => assert!(
            matches!(fourth, Some(Err(sink::Error::Abandoned))),
            "the batch after a failed one: {fourth:?}"
        ),
    }
    assert_eq!(
        db.sink.checkpoints().await.unwrap().get("demo"),
        Some(&103),
        "the checkpoint passed a failed batch"
    );
    assert_eq!(db.count("logs").await, 12, "rows of blocks 104-107 landed");
    assert_eq!(db.count("demo_everything").await, 12);
    db.sink.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_stops_the_batches_after_it_in_postgres() {
    a_failed_batch_stops_the_batches_after_it(SinkBackend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_batch_stops_the_batches_after_it_in_sqlite() {
    a_failed_batch_stops_the_batches_after_it(SinkBackend::Sqlite).await;
}

/// Goal: a backfill whose batch fails mid-way (Postgres: with the next batch already written beside it)
/// leaves the database exact up to its checkpoint, and the next run completes it exactly. Method: a trigger
/// refuses the logs from block 20,000 on; `sync` to 30,000 fails, its checkpoint below the first block the
/// trigger refused; the database is compared with the truth up to the checkpoint; the trigger is dropped and `sync` runs again.
async fn a_backfill_stopped_by_a_failed_batch_resumes_exactly(backend: Backend) {
    let node = support::start(node_config(30_000)).await;
    let truth = node.truth();
    let contracts = all_contracts();
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &contracts,
        "",
        "max_batch_logs = 500\ninitial_block_range = 200\nmax_block_range = 400",
    );
    support::sync(&path, Target::Number(5_000))
        .await
        .expect("the first stretch syncs");
    let (create, drop) = refusing_trigger(backend, ">= 20000");
    for sql in &create {
        support::execute(&work, sql).await;
    }
    let err = support::sync(&path, Target::Number(30_000))
        .await
        .expect_err("the refused batch fails the sync");
    assert!(
        matches!(&err, pipeline::Error::Database { .. }) && format!("{err:?}").contains(REFUSED),
        "{err:?}"
    );
    let checkpoint = support::checkpoint(&work, "token_a")
        .await
        .expect("a checkpoint");
    let checkpoint = u64::try_from(checkpoint).expect("a block number");
    // The first block the trigger refuses a log of: the checkpoint stays below it.
    let refused = support::expected_logs(&truth, &contracts, 30_000)
        .iter()
        .map(|(log, _)| log.block_number)
        .find(|&block| block >= 20_000)
        .expect("logs from block 20,000 on");
    assert!(
        (5_000..refused).contains(&checkpoint),
        "checkpoint {checkpoint} beside a refusal at {refused}"
    );
    assert_db_matches_truth(&work, &truth, &contracts, checkpoint).await;

    support::execute(&work, &drop).await;
    support::sync(&path, Target::Number(30_000))
        .await
        .expect("the sync resumes");
    let n = assert_db_matches_truth(&work, &truth, &contracts, 30_000).await;
    assert!(n > 10_000, "only {n} logs compared");
}

both_backends!(a_backfill_stopped_by_a_failed_batch_resumes_exactly);
