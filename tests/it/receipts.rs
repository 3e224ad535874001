//! Blocks where one contract alone has more logs than the node's 10,000-result cap, end to end: no
//! `eth_getLogs` filter can carry such a block, so logslice reads it from its receipts (`eth_getBlockReceipts`
//! when served, else one `eth_getTransactionReceipt` per transaction), and the database must equal the
//! ground truth on SQLite and on Postgres: alone, in a run, at the head under `run` and through a reorg that
//! replaces one. A node that serves no receipts stops the sync with exit 65 and nothing partial committed.
//! `logslice status` counts the stored blocks read from receipts, and a rollback forgets the orphaned ones.

use std::path::Path;

use devnode::{DevNodeConfig, GroundTruth, OvercapConfig, StatsSnapshot};
use logslice::pipeline::{self, Target};

use logslice::sink::ReindexSpec;

use crate::both_backends;
use crate::follow::start_daemon;
use crate::postgres_sink::{batch, contract, everything_table, prepared, Backend as PgBackend};
use crate::support::{self, all_contracts, assert_db_matches_truth, node_config, Backend, Workdir};

/// A chain of `blocks` blocks with single over-cap blocks at `singles` and a run of `run`, each 11,000
/// `Transfer` logs of `token_a` beside the block's usual logs; `block_receipts` says whether the node serves
/// `eth_getBlockReceipts`.
pub(crate) fn overcap_chain(
    blocks: u64,
    singles: &[u64],
    run: Option<(u64, u64)>,
    block_receipts: bool,
) -> DevNodeConfig {
    let mut config = node_config(blocks);
    config.chain.overcap = OvercapConfig {
        blocks: singles.to_vec(),
        run,
        ..OvercapConfig::default()
    };
    config.chain.block_receipts = block_receipts;
    config
}

/// What `logslice status` reports as stored blocks read from receipts (JSON `receipt_blocks`), checking the
/// text form says the same.
async fn status_receipt_blocks(path: &Path) -> u64 {
    let config = logslice::config::load(path).expect("config");
    let report = logslice::status::gather(&config, ToString::to_string)
        .await
        .expect("status");
    let json = serde_json::to_value(&report).expect("json");
    let n_blocks = json["receipt_blocks"].as_u64().expect("receipt_blocks");
    let text = report.to_string();
    assert!(
        text.contains(&format!("receipts    {n_blocks} block")),
        "{text}"
    );
    n_blocks
}

/// Syncs every example contract to `target` and compares every table with the truth, one receipts read per
/// over-cap block; returns what the node served.
async fn sync_exact(config: DevNodeConfig, backend: Backend, target: u64) -> StatsSnapshot {
    let node = support::start(config).await;
    let truth = node.truth();
    let over = truth.overcap_blocks();
    assert!(
        over.iter().all(|&b| truth.log_count(b) > 10_000),
        "over-cap blocks {over:?}"
    );
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let report = support::sync(&path, Target::Number(target))
        .await
        .expect("sync");
    assert_db_matches_truth(&work, &truth, &all_contracts(), target).await;
    let in_range = over.iter().filter(|&&b| b <= target).count() as u64;
    assert_eq!(
        report.receipt_blocks, in_range,
        "one receipts read per over-cap block"
    );
    assert_eq!(status_receipt_blocks(&path).await, in_range);
    node.stats()
}

/// Goal: over-cap blocks, alone and in a run, are read whole from `eth_getBlockReceipts`.
async fn over_cap_blocks_come_from_block_receipts(backend: Backend) {
    let config = overcap_chain(3_000, &[700, 1_900], Some((1_200, 3)), true);
    sync_exact(config, backend, 2_900).await;
}
both_backends!(over_cap_blocks_come_from_block_receipts);

/// Goal: behind a node that suggests a range with its refusals (Infura's wording), a block over the cap is
/// read by narrower filters as soon as a refusal shows it holds the excess alone, never asked for whole on
/// its own to be refused again. Method: single over-cap blocks and a run, each met by a range the planner
/// could not foresee; the refusals the node answered are counted: about one per over-cap block (the range
/// that met it), and those of the first block's narrower filters before the node is known to serve
/// `eth_getBlockReceipts`. When each block was asked for alone first, this sync had 19 refusals in 53 HTTP
/// requests; now 10 in 42-43.
async fn over_cap_blocks_behind_a_suggesting_node_are_not_asked_for_alone(backend: Backend) {
    let mut config = overcap_chain(6_000, &[700, 1_900, 3_100, 4_300], Some((5_000, 3)), true);
    config.limits.too_many_style = devnode::TooManyStyle::Infura;
    let stats = sync_exact(config, backend, 5_900).await;
    let refused = stats.errors_with(-32005);
    assert!(refused <= 10, "{refused} refusals: {}", stats.summary());
}
both_backends!(over_cap_blocks_behind_a_suggesting_node_are_not_asked_for_alone);

/// Goal: a node without `eth_getBlockReceipts` (`-32601`) has its over-cap blocks read one transaction receipt
/// at a time, in batches; the method is asked for once per run, not once per block.
async fn over_cap_blocks_come_from_transaction_receipts_without_block_receipts(backend: Backend) {
    let config = overcap_chain(3_000, &[700, 1_900], Some((1_200, 3)), false);
    let truth = GroundTruth::detached(&config);
    let stats = sync_exact(config, backend, 2_900).await;
    assert_eq!(
        stats.calls("eth_getBlockReceipts"),
        1,
        "{}",
        stats.summary()
    );
    let transactions: usize = truth
        .overcap_blocks()
        .iter()
        .map(|&b| truth.transactions(b).len())
        .sum();
    assert!(
        stats.ok("eth_getTransactionReceipt") >= transactions as u64,
        "{}",
        stats.summary()
    );
}
both_backends!(over_cap_blocks_come_from_transaction_receipts_without_block_receipts);

/// Goal: a node that serves no receipts at all stops the sync with exit 65 naming the block and the methods,
/// and nothing of that block or after it is committed. Method: both receipts methods refused with `-32601`.
async fn a_node_without_receipts_stops_with_exit_65_and_nothing_partial(backend: Backend) {
    let mut config = overcap_chain(3_000, &[1_500], None, false);
    config.chain.no_tx_receipts = true;
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let err = support::sync(&path, Target::Number(2_900))
        .await
        .expect_err("no receipts, no sync past block 1,500");
    assert_eq!(logslice::exit::code(&err), 65, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("block 1500") && message.contains("eth_getTransactionReceipt"),
        "{message}"
    );
    let committed = support::checkpoint(&work, "token_a")
        .await
        .expect("a checkpoint below the block");
    assert!(committed < 1_500, "checkpoint {committed}");
    let above = support::query_texts(
        &work,
        "SELECT CAST(count(*) AS TEXT) FROM logs WHERE block_number >= 1500",
    )
    .await;
    assert_eq!(above, vec![vec!["0".to_string()]]);
    assert_db_matches_truth(&work, &truth, &all_contracts(), committed as u64).await;
    assert_eq!(status_receipt_blocks(&path).await, 0);
}
both_backends!(a_node_without_receipts_stops_with_exit_65_and_nothing_partial);

/// Goal: over-cap blocks above finality (read by the head path) under `run`, newly mined ones, and one a
/// reorg replaces: after each step the database equals the canonical chain, nothing of the orphaned block
/// left. Method: over-cap blocks in the top 64 blocks and just above the head, then mining and a reorg
/// five blocks deep over the newest.
async fn over_cap_blocks_at_the_head_under_run(backend: Backend) {
    head_under_run(backend, "").await;
}
both_backends!(over_cap_blocks_at_the_head_under_run);

/// [`over_cap_blocks_at_the_head_under_run`] with `sync_extra` in the config's `[sync]`.
pub(crate) async fn head_under_run(backend: Backend, sync_extra: &str) {
    let node = support::start(overcap_chain(
        2_000,
        &[1_960, 2_003],
        Some((1_990, 2)),
        true,
    ))
    .await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        &format!("poll_interval = \"20ms\"\n{sync_extra}"),
    );
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
    // The orphaned 2,003 no longer counts, its replacement (over the cap too) does: once each.
    let over_cap = truth
        .overcap_blocks()
        .iter()
        .filter(|&&b| b <= head)
        .count() as u64;
    assert_eq!(status_receipt_blocks(&path).await, over_cap);
    let stopped = daemon.stop().await;
    assert!(
        matches!(stopped, Err(pipeline::Error::Interrupted)),
        "{stopped:?}"
    );
}

/// Goal: a block that changes while its receipts are being read is read again, and nothing of the old block
/// is committed. Method: an over-cap block above finality whose first `eth_getBlockReceipts` finds the chain
/// reorganised from that block up (the devnode's `overcap_reorg` fault): the receipts no longer match the
/// block's transactions just read, so the block is read again; the database ends equal to the new chain.
async fn a_block_reorganised_while_its_receipts_are_read_is_read_again(backend: Backend) {
    let mut config = overcap_chain(2_000, &[1_990], None, true);
    config.chain.overcap.reorg_on_receipts = Some(1_990);
    let node = support::start(config).await;
    let truth = node.truth();
    let before = truth.block(1_990).expect("block 1990").hash;
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let report = support::sync(&path, Target::Number(2_000))
        .await
        .expect("sync");
    assert_ne!(
        truth.block(1_990).expect("block 1990").hash,
        before,
        "the fault fired"
    );
    assert!(report.receipt_blocks >= 1);
    assert_db_matches_truth(&work, &truth, &all_contracts(), 2_000).await;
    let orphaned = support::query_texts(
        &work,
        &format!(
            "SELECT CAST(count(*) AS TEXT) FROM logs WHERE {} = '{before:#x}'",
            support::raw_hex_text(backend, "block_hash")
        ),
    )
    .await;
    assert_eq!(orphaned, vec![vec!["0".to_string()]]);
}
both_backends!(a_block_reorganised_while_its_receipts_are_read_is_read_again);

/// Goal: the count of blocks read from receipts follows the logs: written in their batch's transaction, a
/// rollback forgets the blocks above the ancestor (a replacement that is not over the cap must not count),
/// a reindex the blocks left without a stored log. Method: the sink alone, batches naming blocks 12 and 18.
async fn a_rollback_forgets_orphaned_blocks_read_from_receipts(backend: PgBackend) {
    let mut db = prepared(backend).await;
    let mut first = batch(10..=20);
    first.receipt_blocks = vec![12, 18];
    db.sink.commit(&first).await.expect("commit");
    assert_eq!(db.sink.receipt_blocks().await.expect("count"), 2);
    // Committing the same blocks again (a batch retried) counts them once.
    db.sink.commit(&first).await.expect("commit again");
    assert_eq!(db.sink.receipt_blocks().await.expect("count"), 2);
    let rolled = db.sink.rollback(15, "test").await.expect("rollback");
    assert_eq!(rolled.receipt_blocks, 1);
    assert_eq!(db.sink.receipt_blocks().await.expect("count"), 1);
    // The replacement of 16..=20 came from eth_getLogs.
    db.sink.commit(&batch(16..=20)).await.expect("commit");
    assert_eq!(db.sink.receipt_blocks().await.expect("count"), 1);
    db.sink
        .reindex(&[ReindexSpec {
            name: contract().name,
            addresses: contract().addresses,
            tables: vec![everything_table().name],
        }])
        .await
        .expect("reindex");
    assert_eq!(db.sink.receipt_blocks().await.expect("count"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_forgets_orphaned_blocks_read_from_receipts_in_sqlite() {
    a_rollback_forgets_orphaned_blocks_read_from_receipts(PgBackend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_forgets_orphaned_blocks_read_from_receipts_in_postgres() {
    a_rollback_forgets_orphaned_blocks_read_from_receipts(PgBackend::Postgres).await;
}
