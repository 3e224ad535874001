//! The sink refuses a batch that would move a checkpoint past blocks no batch committed, on both backends
//! and through each way a batch is written (whole, in turn, in parts): the batch starts above the contract's
//! next block, or its ranges leave a gap. Nothing of a refused batch is written, the checkpoint stays, and
//! the job's error exits 70. Batches are written by hand through the sink's API.

use logslice::exit;
use logslice::pipeline;
use logslice::primitives::BlockRange;
use logslice::sink::{self, Batch};

use crate::both_backends;
use crate::postgres_sink::{self, batch, prepared, Db};
use crate::support::Backend;

fn sink_backend(backend: Backend) -> postgres_sink::Backend {
    match backend {
        Backend::Sqlite => postgres_sink::Backend::Sqlite,
        Backend::Postgres => postgres_sink::Backend::Postgres,
    }
}

/// `demo`'s checkpoint and the raw rows stored.
async fn state(db: &Db) -> (Option<u64>, i64) {
    let checkpoint = db
        .sink
        .checkpoints()
        .await
        .expect("checkpoints")
        .get("demo")
        .copied();
    (checkpoint, db.count("logs").await)
}

/// Asserts `err` is a refusal of a batch skipping blocks after `expected - 1`, starting at `first`, and
/// that the job's error for it exits 70.
fn assert_skipped(err: sink::Error, expected: u64, first: u64) {
    assert!(
        matches!(&err, sink::Error::Skipped { contract, expected: e, first: f }
            if contract == "demo" && *e == expected && *f == first),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(&format!("starting at block {first}"))
            && message.contains(&format!("next block to commit is {expected}"))
            && message.contains("\"demo\""),
        "{message}"
    );
    let job_error = pipeline::Error::Database {
        database: "test".to_owned(),
        source: err,
    };
    assert_eq!(exit::code(&job_error), exit::SOFTWARE);
}

/// Goal: a batch that starts above a contract's next block is refused whole, whether committed alone, in
/// turn or in parts, and whether the next block comes from a checkpoint or from the start block; a batch
/// from the next block on (or overlapping what is committed) is taken. Method: contract `demo` starts at
/// block 100; batches of three logs a block, written by hand.
async fn refuses_a_batch_that_would_skip_blocks(backend: Backend) {
    let mut db = prepared(sink_backend(backend)).await;
    // Before any checkpoint the start block is the next block.
    let err = db.sink.commit(&batch(101..=102)).await.unwrap_err();
    assert_skipped(err, 100, 101);
    assert_eq!(state(&db).await, (None, 0));
    db.sink
        .commit(&batch(100..=101))
        .await
        .expect("from the start block");
    assert_eq!(state(&db).await, (Some(101), 6));

    // Committed whole: blocks 102 would be skipped.
    let err = db.sink.commit(&batch(103..=104)).await.unwrap_err();
    assert_skipped(err, 102, 103);
    assert_eq!(
        state(&db).await,
        (Some(101), 6),
        "a refused batch wrote nothing"
    );

    // In turn (on Postgres, the path that writes two batches at once).
    let mut in_turn = sink::InTurn::default();
    let skipping = batch(103..=104);
    let encoded = db.sink.encoder().encode(&skipping).expect("encodes");
    let err = in_turn
        .submit(&mut db.sink, skipping, encoded)
        .await
        .unwrap_err();
    assert_skipped(err, 102, 103);
    assert!(in_turn.drain().await.expect("nothing in flight").is_empty());
    assert_eq!(state(&db).await, (Some(101), 6));

    // In parts: the last part, which carries the checkpoint, is refused; the open transaction rolls back.
    let mut skipping = batch(103..=104);
    let first_part = skipping.split_part(3);
    let encoder = db.sink.encoder();
    let mut open = db.sink.begin_batch().await.expect("begins");
    let encoded = encoder.encode(&first_part).expect("encodes");
    open.write(&mut db.sink, &first_part, encoded)
        .await
        .expect("a part without bookkeeping");
    let encoded = encoder.encode(&skipping).expect("encodes");
    let err = open
        .write(&mut db.sink, &skipping, encoded)
        .await
        .unwrap_err();
    assert_skipped(err, 102, 103);
    drop(open);
    assert_eq!(state(&db).await, (Some(101), 6));

    // Overlapping what is committed, and then from the next block: taken.
    db.sink
        .commit(&batch(101..=102))
        .await
        .expect("an overlap is taken");
    db.sink
        .commit(&batch(103..=104))
        .await
        .expect("from the next block");
    assert_eq!(state(&db).await, (Some(104), 15));
    db.sink.close().await;
}
both_backends!(refuses_a_batch_that_would_skip_blocks);

/// Goal: a batch whose ranges leave a gap, or that would move a checkpoint beyond its last block, is
/// refused before anything of it is written, with exit 70. Method: hand-made batches with two ranges around
/// a missing block, and with a checkpoint past the range.
async fn refuses_a_batch_whose_ranges_leave_a_gap(backend: Backend) {
    let mut db = prepared(sink_backend(backend)).await;
    db.sink.commit(&batch(100..=101)).await.expect("commits");
    let gapped = Batch {
        ranges: vec![
            BlockRange::new(102, 102).unwrap(),
            BlockRange::new(104, 104).unwrap(),
        ],
        ..batch(102..=104)
    };
    let mut beyond = batch(102..=103);
    beyond.checkpoints[0].block = 110;
    for (bad, wanted) in [
        (gapped, "[102, 102] is followed by [104, 104]"),
        (beyond, "covers blocks 102 to 103 but would move the checkpoint of contract \"demo\" to block 110"),
    ] {
        let err = db.sink.commit(&bad).await.unwrap_err();
        assert!(matches!(&err, sink::Error::Gap(why) if why.contains(wanted)), "{err:?}");
        let job_error = pipeline::Error::Database {
            database: "test".to_owned(),
            source: err,
        };
        assert_eq!(exit::code(&job_error), exit::SOFTWARE);
        assert_eq!(state(&db).await, (Some(101), 6));
    }
    db.sink.close().await;
}
both_backends!(refuses_a_batch_whose_ranges_leave_a_gap);

/// Goal: a rollback moves the next block back with the checkpoint, so the blocks above the ancestor are
/// committed again from it and not skipped. Method: commit to 105, roll back to 102, then a batch from 104
/// (refused: 103 is gone) and one from 103 (taken).
async fn after_a_rollback_batches_start_above_the_ancestor(backend: Backend) {
    let mut db = prepared(sink_backend(backend)).await;
    db.sink.commit(&batch(100..=105)).await.expect("commits");
    db.sink.rollback(102, "test").await.expect("rolls back");
    assert_eq!(state(&db).await, (Some(102), 9));
    let err = db.sink.commit(&batch(104..=105)).await.unwrap_err();
    assert_skipped(err, 103, 104);
    db.sink
        .commit(&batch(103..=105))
        .await
        .expect("from the ancestor's next block");
    assert_eq!(state(&db).await, (Some(105), 18));
    db.sink.close().await;
}
both_backends!(after_a_rollback_batches_start_above_the_ancestor);
