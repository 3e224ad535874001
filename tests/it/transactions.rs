//! The opt-in `transactions` table end to end (`[sync] transactions = true`), on both backends: one row per
//! transaction that emitted a stored log, equal to the node's ground truth field by field (exact values above
//! 2^64 and 2^128, NULL `to_address` for creations, NULL max fees for legacy transactions); full blocks read
//! only for blocks with logs, none when off; a reorg replaces the rows of the orphaned blocks; switching it
//! on for a database that holds logs is refused naming `--reindex`; with `transaction_receipts = true` also
//! `status` and `gas_used`: one `eth_getBlockReceipts` per block where the node serves it, else one receipt
//! read per row.

use std::collections::BTreeSet;

use alloy_primitives::U256;
use devnode::{DevNode, GroundTruth};
use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{self, all_contracts, assert_db_matches_truth, node_config, Backend, Workdir};

const BLOCKS: u64 = 2_000;
const TARGET: u64 = 1_500;

/// Whether the rows carry their receipts' `status` and `gas_used`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Receipts {
    With,
    Without,
}

fn block_reads(node: &DevNode) -> u64 {
    node.stats().calls("eth_getBlockByNumber")
}

/// The `transactions` rows the database must hold up to `to`, as `|`-joined text, in key order; `status`
/// and `gas_used` from the receipts `With` them, NULL otherwise.
fn expected_rows(truth: &GroundTruth, to: u64, receipts: Receipts) -> Vec<String> {
    let keys: BTreeSet<(u64, u64)> = support::expected_logs(truth, &all_contracts(), to)
        .iter()
        .map(|(log, _)| (log.block_number, log.transaction_index))
        .collect();
    let blocks: BTreeSet<u64> = keys.iter().map(|(block, _)| *block).collect();
    let hx = |bytes: &[u8]| alloy_primitives::hex::encode_prefixed(bytes);
    let opt = |n: Option<u64>| n.map_or("NULL".to_owned(), |n| n.to_string());
    let mut rows = Vec::new();
    for number in blocks {
        let block_receipts = truth.receipts(number);
        for tx in truth.transactions(number) {
            if !keys.contains(&(number, tx.transaction_index)) {
                continue;
            }
            let receipt = &block_receipts[tx.transaction_index as usize];
            assert_eq!(receipt.transaction_hash, tx.hash);
            let (status, gas_used) = match receipts {
                Receipts::With => (
                    u64::from(receipt.status).to_string(),
                    receipt.gas_used.to_string(),
                ),
                Receipts::Without => ("NULL".to_owned(), "NULL".to_owned()),
            };
            rows.push(
                [
                    number.to_string(),
                    tx.transaction_index.to_string(),
                    hx(tx.hash.as_slice()),
                    hx(tx.block_hash.as_slice()),
                    tx.block_timestamp.to_string(),
                    hx(tx.from.as_slice()),
                    tx.to.map_or("NULL".to_owned(), |to| hx(to.as_slice())),
                    tx.value.to_string(),
                    tx.gas.to_string(),
                    tx.gas_price.to_string(),
                    opt(tx.max_fee_per_gas),
                    opt(tx.max_priority_fee_per_gas),
                    tx.nonce.to_string(),
                    tx.tx_type.to_string(),
                    hx(&tx.input),
                    status,
                    gas_used,
                ]
                .join("|"),
            );
        }
    }
    rows
}

async fn db_rows(work: &Workdir) -> Vec<String> {
    let text = |column: &str| format!("coalesce(CAST({column} AS TEXT), 'NULL')");
    let columns = [
        "block_number",
        "transaction_index",
        "transaction_hash",
        "block_hash",
        "block_timestamp",
        "from_address",
        "to_address",
        "value",
        "gas",
        "gas_price",
        "max_fee_per_gas",
        "max_priority_fee_per_gas",
        "nonce",
        "type",
        "input",
        "status",
        "gas_used",
    ];
    let select: Vec<String> = columns.iter().map(|c| text(c)).collect();
    let sql = format!(
        "SELECT {} FROM transactions ORDER BY block_number, transaction_index",
        select.join(", ")
    );
    support::query_texts(work, &sql)
        .await
        .into_iter()
        .map(|row| row.join("|"))
        .collect()
}

/// Asserts the table equals the ground truth row by row, and that the rows compared hold the shapes that
/// matter (values above 2^64 and 2^128, a creation, a legacy transaction).
pub(crate) async fn assert_transactions_match(
    work: &Workdir,
    truth: &GroundTruth,
    to: u64,
    receipts: Receipts,
) {
    let expected = expected_rows(truth, to, receipts);
    let actual = db_rows(work).await;
    assert_eq!(actual.len(), expected.len());
    for (actual, expected) in actual.iter().zip(&expected) {
        assert_eq!(actual, expected);
    }
}

async fn synced(node: &DevNode, backend: Backend, sync_extra: &str, to: Target) -> (Workdir, u64) {
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", sync_extra);
    let before = block_reads(node);
    support::sync(&path, to).await.expect("sync succeeds");
    (work, block_reads(node) - before)
}

/// Goal: the table equals the ground truth, exact, and costs one block read per block with stored logs (none
/// when off). Method: two syncs of one chain whose logs carry `blockTimestamp` (so no header is read), off and
/// on; rows compared as text with the ground truth's, and the shapes checked to be among them.
async fn transactions_equal_the_ground_truth_and_cost_one_read_per_block_with_logs(
    backend: Backend,
) {
    let node = support::start(node_config(BLOCKS)).await;
    let truth = node.truth();
    let (off, off_reads) = synced(&node, backend, "", Target::Number(TARGET)).await;
    assert!(
        support::columns(&off, "transactions").await.is_empty(),
        "off by default: no transactions table (docs/schema.md)"
    );
    let (on, on_reads) = synced(
        &node,
        backend,
        "transactions = true",
        Target::Number(TARGET),
    )
    .await;
    assert_db_matches_truth(&on, &truth, &all_contracts(), TARGET).await;
    assert_transactions_match(&on, &truth, TARGET, Receipts::Without).await;
    let blocks: BTreeSet<u64> = support::expected_logs(&truth, &all_contracts(), TARGET)
        .iter()
        .map(|(log, _)| log.block_number)
        .collect();
    assert_eq!(
        on_reads - off_reads,
        blocks.len() as u64,
        "one read per block with logs"
    );
    // The comparison covered what exactness and NULLs are about.
    let txs: Vec<_> = blocks.iter().flat_map(|n| truth.transactions(*n)).collect();
    let rows = expected_rows(&truth, TARGET, Receipts::Without);
    let two_128 = U256::from(1u8) << 128;
    let in_rows = |pred: &dyn Fn(&devnode::TruthTransaction) -> bool| {
        txs.iter().any(|tx| {
            pred(tx)
                && rows
                    .iter()
                    .any(|row| row.contains(&alloy_primitives::hex::encode_prefixed(tx.hash)))
        })
    };
    assert!(in_rows(&|tx| tx.value > two_128), "a value above 2^128");
    assert!(in_rows(&|tx| tx.to.is_none()), "a creation");
    assert!(in_rows(&|tx| tx.tx_type == 0), "a legacy transaction");

    // With receipts: one receipt per row more, and status and gas_used equal to the receipts'.
    let receipts_before = node.stats().calls("eth_getTransactionReceipt");
    let (with, _) = synced(
        &node,
        backend,
        "transactions = true\ntransaction_receipts = true",
        Target::Number(TARGET),
    )
    .await;
    assert_transactions_match(&with, &truth, TARGET, Receipts::With).await;
    assert_eq!(
        node.stats().calls("eth_getTransactionReceipt") - receipts_before,
        rows.len() as u64,
        "one receipt per row"
    );
}
both_backends!(transactions_equal_the_ground_truth_and_cost_one_read_per_block_with_logs);

/// Goal: a reorg replaces the rows of the orphaned blocks and nothing of them remains. Method: sync to the
/// head (tracked by hash), reorg 5 blocks, mine 2, sync again; the table equals the new ground truth.
async fn a_reorg_replaces_the_transactions_of_orphaned_blocks(backend: Backend) {
    let mut config = node_config(BLOCKS);
    config.chain.density = 5.0;
    let node = support::start(config).await;
    let truth = node.truth();
    let sync_extra = "transactions = true\ntransaction_receipts = true";
    let (work, _) = synced(&node, backend, sync_extra, Target::Latest).await;
    assert_transactions_match(&work, &truth, BLOCKS, Receipts::With).await;
    let old: Vec<String> = db_rows(&work)
        .await
        .into_iter()
        .filter(|row| row.split('|').next().and_then(|n| n.parse::<u64>().ok()) > Some(BLOCKS - 5))
        .collect();
    assert!(
        !old.is_empty(),
        "the blocks to be replaced hold transactions"
    );
    node.reorg(5);
    let head = node.mine(2);
    let path = work.dir.path().join("config.toml");
    support::sync(&path, Target::Latest)
        .await
        .expect("sync succeeds");
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    assert_transactions_match(&work, &truth, head, Receipts::With).await;
    let now = db_rows(&work).await;
    assert!(
        old.iter().all(|row| !now.contains(row)),
        "no orphaned row remains"
    );
}
both_backends!(a_reorg_replaces_the_transactions_of_orphaned_blocks);

/// Goal: with `transaction_receipts = true` on a node serving `eth_getBlockReceipts`, receipts are read one
/// block at a time (no `eth_getTransactionReceipt` at all) and the table equals the ground truth, also after
/// a reorg replaced blocks. Method: sync to the head, reorg 5 blocks, mine 2, sync again; count the calls.
async fn receipts_come_from_block_receipts_where_the_node_serves_them(backend: Backend) {
    let mut config = node_config(BLOCKS);
    config.chain.density = 5.0;
    config.chain.block_receipts = true;
    let node = support::start(config).await;
    let truth = node.truth();
    let sync_extra = "transactions = true\ntransaction_receipts = true";
    let (work, _) = synced(&node, backend, sync_extra, Target::Latest).await;
    assert_db_matches_truth(&work, &truth, &all_contracts(), BLOCKS).await;
    assert_transactions_match(&work, &truth, BLOCKS, Receipts::With).await;
    let blocks: BTreeSet<u64> = support::expected_logs(&truth, &all_contracts(), BLOCKS)
        .iter()
        .map(|(log, _)| log.block_number)
        .collect();
    let stats = node.stats();
    assert_eq!(
        stats.ok("eth_getBlockReceipts"),
        blocks.len() as u64,
        "one eth_getBlockReceipts per block with logs: {}",
        stats.summary()
    );
    assert_eq!(
        stats.calls("eth_getTransactionReceipt"),
        0,
        "{}",
        stats.summary()
    );
    node.reorg(5);
    let head = node.mine(2);
    let path = work.dir.path().join("config.toml");
    support::sync(&path, Target::Latest)
        .await
        .expect("sync succeeds");
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    assert_transactions_match(&work, &truth, head, Receipts::With).await;
    assert_eq!(node.stats().calls("eth_getTransactionReceipt"), 0);
}
both_backends!(receipts_come_from_block_receipts_where_the_node_serves_them);

/// Switching the table (or its receipt columns) on for a database whose logs were indexed without it is
/// refused naming `--reindex`; receipts without the table are a config error.
async fn switching_transactions_on_for_a_database_with_logs_is_refused(backend: Backend) {
    let node = support::start(node_config(BLOCKS)).await;
    let (work, _) = synced(&node, backend, "", Target::Number(500)).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "transactions = true",
    );
    let err = support::sync(&path, Target::Number(600))
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("--reindex"), "{err}");
    assert_eq!(logslice::exit::code(&err), 78);
    assert!(support::columns(&work, "transactions").await.is_empty());
    // Receipts on top of a table filled without them: its rows would have NULL status.
    let (without, _) = synced(&node, backend, "transactions = true", Target::Number(500)).await;
    let extra = "transactions = true\ntransaction_receipts = true";
    let path = without.write_config(&node.http_url(), &all_contracts(), "", extra);
    let err = support::sync(&path, Target::Number(600))
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("--reindex"), "{err}");
    // And receipts without the table are a config error.
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "transaction_receipts = true",
    );
    let err = logslice::config::load(&path).expect_err("needs transactions");
    assert!(err.to_string().contains("transactions = true"), "{err}");
}
both_backends!(switching_transactions_on_for_a_database_with_logs_is_refused);

/// Goal: the table exists only with `[sync] transactions = true` (docs/schema.md): a database opened with it off
/// has none, and switching it on while no log is stored creates it and fills it exactly. Method: a sync to
/// block 0 (no logs) with it off, then a sync with it on, compared with the truth.
async fn the_table_exists_only_while_it_is_wanted(backend: Backend) {
    let node = support::start(node_config(BLOCKS)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let off = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&off, Target::Number(0)).await.expect("sync");
    assert!(support::columns(&work, "transactions").await.is_empty());
    let on = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "transactions = true",
    );
    support::sync(&on, Target::Number(TARGET))
        .await
        .expect("sync");
    assert!(!support::columns(&work, "transactions").await.is_empty());
    assert_transactions_match(&work, &truth, TARGET, Receipts::Without).await;
}
both_backends!(the_table_exists_only_while_it_is_wanted);
