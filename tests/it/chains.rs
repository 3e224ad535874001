//! Many chains in one database, at the sink: two sinks bound to two chain ids on one database (SQLite: two
//! connections to one WAL file; Postgres: two pools on one schema) write into the same tables, told apart by
//! `chain_id`; a rollback or a reindex of one chain leaves every row of the other as it was; a sink not bound
//! to a chain refuses chain data with an error, never a panic.

use logslice::primitives::Address;
use logslice::sink::{self, Batch, ChildRow, ReindexSpec, Sink, TrackedBlock};

use crate::postgres_sink::{batch, contract, everything_table, prepared, word, Backend, Db};

/// Chain 1 (`default`, bound by [`prepared`]) and chain 5.
const OTHER: (&str, u64) = ("other", 5);

/// [`batch`] of `blocks` with each block remembered and a factory child created in its first block.
fn full_batch(blocks: std::ops::RangeInclusive<u64>) -> Batch {
    let first = *blocks.start();
    let mut batch = batch(blocks.clone());
    batch.blocks = blocks
        .map(|number| TrackedBlock {
            number,
            hash: word(number * 1_000 + 7),
            parent_hash: word((number - 1) * 1_000 + 7),
        })
        .collect();
    batch.children = vec![ChildRow {
        contract: "demo".to_owned(),
        address: Address::repeat_byte(0xcd),
        block_number: first,
        block_hash: word(first * 1_000 + 7),
        log_index: 0,
        factory_address: Address::repeat_byte(0xab),
    }];
    batch
}

/// Rows of chain `chain_id` in `table`.
async fn rows_of(db: &Db, table: &str, chain_id: u64) -> i64 {
    let sql = format!("SELECT count(*) FROM \"{table}\" WHERE chain_id = {chain_id}");
    match &db.sink {
        Sink::Sqlite(s) => sqlx::query_scalar(&sql).fetch_one(s.pool()).await,
        Sink::Postgres(s) => sqlx::query_scalar(&sql).fetch_one(s.pool()).await,
    }
    .expect("counting rows")
}

/// What `sink` holds of its chain: checkpoints, remembered blocks, children.
async fn records(sink: &Sink) -> (Vec<(String, u64)>, Vec<u64>, Vec<ChildRow>) {
    let mut checkpoints: Vec<_> = sink.checkpoints().await.unwrap().into_iter().collect();
    checkpoints.sort();
    let blocks = sink.tracked_blocks().await.unwrap().into_keys().collect();
    (checkpoints, blocks, sink.factory_children().await.unwrap())
}

async fn two_chains_share_one_database(backend: Backend) {
    let mut a = prepared(backend).await;
    let mut b = a.reopen().await;
    b.bind_chain(OTHER.0, OTHER.1).await.expect("bind chain 5");
    b.prepare(&[everything_table()], &[contract()])
        .await
        .expect("the same tables for the same contract on another chain");
    // Both commit at once, each on a task of its own (SQLite's writer waits for the lock on its thread):
    // they wait for each other's locks, nothing more.
    let other = tokio::spawn(async move {
        let done = b.commit(&full_batch(100..=101)).await;
        (b, done)
    });
    a.sink
        .commit(&full_batch(100..=103))
        .await
        .expect("chain 1 commits");
    let (b, done_b) = other.await.expect("join");
    done_b.expect("chain 5 commits");
    for (table, rows_a, rows_b) in [
        ("logs", 12, 6),
        ("demo_everything", 12, 6),
        ("block_hashes", 4, 2),
        ("factory_children", 1, 1),
        ("checkpoints", 1, 1),
        ("contracts", 1, 1),
    ] {
        assert_eq!(rows_of(&a, table, 1).await, rows_a, "{table} of chain 1");
        assert_eq!(rows_of(&a, table, 5).await, rows_b, "{table} of chain 5");
    }
    let other_before = records(&b).await;
    assert_eq!(other_before.0, [("demo".to_owned(), 101)]);
    assert_eq!(other_before.1, [100, 101]);

    // A rollback of chain 1 to block 100 leaves chain 5's blocks 100 and 101 alone.
    let report = a
        .sink
        .rollback(99, "test: rollback of chain 1")
        .await
        .unwrap();
    assert_eq!(report.logs, 12);
    assert_eq!(report.typed_rows, 12);
    assert_eq!(report.blocks, 4);
    assert_eq!(report.children, 1);
    assert_eq!(records(&b).await, other_before, "chain 5 untouched");
    for (table, rows_b) in [("logs", 6), ("demo_everything", 6), ("block_hashes", 2)] {
        assert_eq!(rows_of(&a, table, 1).await, 0, "{table} of chain 1");
        assert_eq!(rows_of(&a, table, 5).await, rows_b, "{table} of chain 5");
    }
    assert_eq!(
        a.sink.last_reorg().await.unwrap().as_deref(),
        Some("test: rollback of chain 1")
    );
    assert_eq!(b.last_reorg().await.unwrap(), None, "per chain");
    assert_eq!(
        a.sink.checkpoints().await.unwrap().get("demo"),
        Some(&99),
        "moved back"
    );

    // Chain 1 again, then a reindex of it: the shared table keeps chain 5's rows.
    a.sink.commit(&full_batch(100..=102)).await.unwrap();
    let reindexed = a
        .sink
        .reindex(&[ReindexSpec {
            name: "demo".to_owned(),
            addresses: contract().addresses,
            tables: vec![everything_table().name],
        }])
        .await
        .unwrap();
    assert_eq!(reindexed.raw_rows, 9);
    for table in [
        "logs",
        "demo_everything",
        "checkpoints",
        "contracts",
        "factory_children",
    ] {
        assert_eq!(rows_of(&a, table, 1).await, 0, "{table} of chain 1");
    }
    assert_eq!(records(&b).await, other_before, "chain 5 untouched");
    assert_eq!(rows_of(&a, "demo_everything", 5).await, 6);
    b.close().await;
    a.sink.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_chains_share_one_database_in_sqlite() {
    two_chains_share_one_database(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_chains_share_one_database_in_postgres() {
    two_chains_share_one_database(Backend::Postgres).await;
}

/// Goal: chain data asked of a sink bound to no chain is an error naming what was asked, not a panic and
/// not another chain's rows.
async fn an_unbound_sink_refuses_chain_data(backend: Backend) {
    let db = prepared(backend).await;
    let mut unbound = db.reopen().await;
    assert_eq!(unbound.bound_chain(), None);
    assert_eq!(
        unbound.chain_id().await.unwrap(),
        Some(1),
        "the default chain's"
    );
    let unbound_err = |err: sink::Error| {
        assert!(matches!(err, sink::Error::Unbound(_)), "{err:?}");
    };
    unbound_err(unbound.checkpoints().await.unwrap_err());
    unbound_err(unbound.tracked_blocks().await.unwrap_err());
    unbound_err(unbound.factory_children().await.unwrap_err());
    unbound_err(unbound.status().await.unwrap_err());
    unbound_err(unbound.commit(&batch(100..=100)).await.unwrap_err());
    unbound_err(unbound.rollback(50, "x").await.unwrap_err());
    unbound_err(
        unbound
            .prepare(&[everything_table()], &[contract()])
            .await
            .unwrap_err(),
    );
    assert_eq!(unbound.bind_recorded("default").await.unwrap(), Some(1));
    assert!(unbound.checkpoints().await.unwrap().is_empty());
    unbound.close().await;
    db.sink.close().await;
}

#[tokio::test]
async fn an_unbound_sink_refuses_chain_data_in_sqlite() {
    an_unbound_sink_refuses_chain_data(Backend::Sqlite).await;
}

#[tokio::test]
async fn an_unbound_sink_refuses_chain_data_in_postgres() {
    an_unbound_sink_refuses_chain_data(Backend::Postgres).await;
}
