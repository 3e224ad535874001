//! Block timestamps end to end (`[sync] block_timestamps`): every `logs` row and every typed row carries its
//! block header's timestamp in the node (`support::assert_db_matches_truth` compares them wherever the
//! column exists), whether the node sends `blockTimestamp` in its logs or the headers are read; header
//! requests are made only for blocks with logs, and none when the logs carry the timestamp or the column is
//! off; 429s on header batches and reorgs of stamped blocks still end exact; a database is never left with
//! some rows stamped and some not.

use devnode::{contracts, DevNode, DevNodeConfig};
use logslice::pipeline::{self, Target};

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, Backend, Contract, Workdir,
};

/// The chain's head; the target is below its finalized block (head - 64), so the sync is all backfill.
const BLOCKS: u64 = 2_000;
const TARGET: u64 = 1_500;

fn header_calls(node: &DevNode) -> u64 {
    node.stats().calls("eth_getBlockByNumber")
}

/// The blocks up to `to` that hold a log the database keeps.
fn blocks_with_logs(node: &DevNode, contracts: &[Contract], to: u64) -> u64 {
    let mut blocks: Vec<u64> = support::expected_logs(&node.truth(), contracts, to)
        .iter()
        .map(|(log, _)| log.block_number)
        .collect();
    blocks.dedup();
    blocks.len() as u64
}

/// Syncs `all_contracts()` into a fresh database of `backend` with `sync_extra` in `[sync]`; returns the
/// workdir and the `eth_getBlockByNumber` calls the node served meanwhile.
async fn synced(node: &DevNode, backend: Backend, sync_extra: &str, to: Target) -> (Workdir, u64) {
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", sync_extra);
    let before = header_calls(node);
    support::sync(&path, to).await.expect("sync succeeds");
    (work, header_calls(node) - before)
}

async fn has_timestamps(work: &Workdir, table: &str) -> bool {
    support::columns(work, table)
        .await
        .iter()
        .any(|c| c == "block_timestamp")
}

/// A node whose logs lack `blockTimestamp`, as the spec's log object does.
fn spec_node_config(blocks: u64) -> DevNodeConfig {
    let mut config = node_config(blocks);
    config.chain.log_timestamps = false;
    config
}

/// Goal: without `blockTimestamp` in the logs (the spec's log object), timestamps come from headers, one per
/// block with logs and no more; `block_timestamps = false` has no column and reads no header. Method: two
/// syncs of one chain, off and on; the difference in header calls is the number of blocks with logs; every
/// row equals the ground truth, timestamps included.
async fn timestamps_come_from_the_headers_of_blocks_with_logs_only(backend: Backend) {
    let node = support::start(spec_node_config(BLOCKS)).await;
    let (off, off_calls) = synced(
        &node,
        backend,
        "block_timestamps = false",
        Target::Number(TARGET),
    )
    .await;
    assert!(
        !has_timestamps(&off, "logs").await,
        "false drops the column"
    );
    assert!(!has_timestamps(&off, "token_a_transfer").await);
    assert!(
        off_calls <= 1,
        "only the finalized tag is read: {off_calls} header calls"
    );
    assert_db_matches_truth(&off, &node.truth(), &all_contracts(), TARGET).await;

    let (on, on_calls) = synced(&node, backend, "", Target::Number(TARGET)).await;
    assert!(has_timestamps(&on, "logs").await && has_timestamps(&on, "pair_swap").await);
    let n_blocks = blocks_with_logs(&node, &all_contracts(), TARGET);
    assert!(n_blocks > 300 && n_blocks < TARGET, "{n_blocks}");
    assert_eq!(
        on_calls - off_calls,
        n_blocks,
        "one header per block with logs, none for the others"
    );
    assert_db_matches_truth(&on, &node.truth(), &all_contracts(), TARGET).await;
}
both_backends!(timestamps_come_from_the_headers_of_blocks_with_logs_only);

/// Goal: a node that sends `blockTimestamp` costs no header request below the head. Method: the devnode's
/// `log_timestamps`; the header calls of a sync with timestamps equal those of one without.
async fn timestamps_in_the_logs_cost_no_header_request(backend: Backend) {
    let node = support::start(node_config(BLOCKS)).await;
    let (_, off_calls) = synced(
        &node,
        backend,
        "block_timestamps = false",
        Target::Number(TARGET),
    )
    .await;
    let (on, on_calls) = synced(&node, backend, "", Target::Number(TARGET)).await;
    assert_eq!(on_calls, off_calls, "no header read for timestamps");
    assert_db_matches_truth(&on, &node.truth(), &all_contracts(), TARGET).await;
}
both_backends!(timestamps_in_the_logs_cost_no_header_request);

/// Goal: header batches answered 429 are retried after `Retry-After` and the result is still exact.
/// Method: a node answering 429 to a quarter of all requests, a rate of 100 calls per second (header
/// batches of 100), a sync with timestamps from headers.
async fn header_batches_under_429_still_end_exact(backend: Backend) {
    let mut config = spec_node_config(800);
    config.faults.http_429 = 0.25;
    config.faults.retry_after_secs = 0;
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let text = std::fs::read_to_string(&path).expect("config");
    std::fs::write(
        &path,
        text.replace("requests_per_second = 10000", "requests_per_second = 100"),
    )
    .expect("config");
    let target = 700;
    support::sync(&path, Target::Number(target))
        .await
        .expect("sync succeeds");
    let stats = node.stats();
    assert!(stats.rate_limited > 0, "the fault fired: {stats:?}");
    assert!(
        stats.largest_batch > 1,
        "headers went in batches: {stats:?}"
    );
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), target).await;
}
both_backends!(header_batches_under_429_still_end_exact);

/// Goal: a stamped block replaced by a reorg takes its replacement's timestamp. Method: sync to the head
/// (the top blocks are tracked by hash), reorg 5 blocks (the devnode's replacements come a second or more
/// later), mine 2, sync again; the replaced blocks' rows hold the new timestamps (the ground truth's).
async fn a_reorged_block_takes_its_replacements_timestamp(backend: Backend) {
    let node = support::start(spec_node_config(BLOCKS)).await;
    let truth = node.truth();
    let (work, _) = synced(&node, backend, "", Target::Latest).await;
    assert_db_matches_truth(&work, &truth, &all_contracts(), BLOCKS).await;
    let old: Vec<u64> = (BLOCKS - 4..=BLOCKS)
        .map(|n| truth.block(n).expect("canonical").timestamp)
        .collect();
    let first = node.reorg(5);
    let head = node.mine(2);
    let new: Vec<u64> = (first..=BLOCKS)
        .map(|n| truth.block(n).expect("canonical").timestamp)
        .collect();
    assert_eq!(first, BLOCKS - 4);
    assert!(
        old.iter().zip(&new).all(|(o, n)| o != n),
        "the replacements' timestamps differ: {old:?} {new:?}"
    );
    assert!(
        support::expected_logs(&truth, &all_contracts(), head)
            .iter()
            .any(|(log, _)| log.block_number >= first && log.block_number <= BLOCKS),
        "the replaced blocks hold logs"
    );
    let path = work.dir.path().join("config.toml");
    support::sync(&path, Target::Latest)
        .await
        .expect("sync succeeds");
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
}
both_backends!(a_reorged_block_takes_its_replacements_timestamp);

/// Goal: a database is never half stamped. Switching `block_timestamps` on a database with rows is refused
/// naming the fixes, and so are rows of a version before timestamps while they are wanted; such a database
/// keeps working with `block_timestamps = false`. Method: sync, then sync again with the other setting; then
/// stage an earlier version's database (rows, typed table without the column, no record of the choice) and
/// sync with and without timestamps.
async fn switching_timestamps_on_a_database_with_rows_is_refused(backend: Backend) {
    let node = support::start(spec_node_config(BLOCKS)).await;
    let contracts = [all_contracts().remove(1)];
    assert_eq!(contracts[0].name, "token_b");
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &contracts, "", "");
    let config_text = std::fs::read_to_string(&path).expect("config");
    let configure = |sync_extra: &str| {
        let text = config_text.replace("[sync]\n", &format!("[sync]\n{sync_extra}\n"));
        std::fs::write(&path, text).expect("config");
    };
    support::sync(&path, Target::Number(400))
        .await
        .expect("sync succeeds");

    configure("block_timestamps = false");
    let refused = support::sync(&path, Target::Number(500)).await.unwrap_err();
    let message = format!("{refused:#}");
    assert!(
        matches!(refused, pipeline::Error::Database { .. }) && message.contains("--reindex"),
        "{message}"
    );
    assert!(message.contains("set it back to true"), "{message}");
    assert_eq!(
        support::checkpoint(&work, "token_b").await,
        Some(400),
        "nothing moved"
    );

    // An earlier version's database: its rows, its typed table without the column, no record of the choice.
    support::execute(&work, "DELETE FROM meta WHERE key = 'block_timestamps'").await;
    support::execute(
        &work,
        "ALTER TABLE token_b_transfer DROP COLUMN block_timestamp",
    )
    .await;
    support::execute(&work, "UPDATE logs SET block_timestamp = NULL").await;
    configure("");
    let refused = support::sync(&path, Target::Number(500)).await.unwrap_err();
    let message = format!("{refused:#}");
    assert!(
        message.contains("without block timestamps")
            && message.contains("block_timestamps = false")
            && message.contains("--reindex"),
        "{message}"
    );
    assert_eq!(
        support::checkpoint(&work, "token_b").await,
        Some(400),
        "nothing moved"
    );

    // It keeps working without them: the column goes, nothing is mixed.
    configure("block_timestamps = false");
    support::sync(&path, Target::Number(500))
        .await
        .expect("sync succeeds");
    assert!(!has_timestamps(&work, "logs").await);
    assert_db_matches_truth(&work, &node.truth(), &contracts, 500).await;
}
both_backends!(switching_timestamps_on_a_database_with_rows_is_refused);

/// The devnode's default log objects stay byte for byte what they were (the spec's, without
/// `blockTimestamp`); `log_timestamps` adds `blockTimestamp` after `blockHash`, equal to the header's.
/// (Once changed on purpose: transaction hashes carry their block and index in their last 12 bytes, so
/// `eth_getTransactionByHash` can find them.)
#[tokio::test]
async fn the_default_chains_logs_are_unchanged_and_log_timestamps_adds_the_header_timestamp() {
    const PINNED: &str = r#"{"jsonrpc":"2.0","id":1,"result":[{"address":"0xa0a0c0ffee000000000000000000000000000001","topics":["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef","0x00000000000000000000000044850f7117856ca9efa98042706bd6227185834d","0x000000000000000000000000e833649b56c6f24ab1f8b2ef96778a6144d75b2e"],"data":"0x00000000000000000000000000000000000000000000000000000003a4943dce","blockNumber":"0x6a","transactionHash":"0xc795b2b4370792cf13d1b4078b5fbc99e95964d006ab446be6dd05864609c1b1","transactionIndex":"0x0","blockHash":"0xf834dc3c59d95785aa9a2a26fcd0400e5dd94124b2c7f77b6a840f0a15302886","logIndex":"0x0","removed":false}]}"#;
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"eth_getLogs","params":[{{"fromBlock":"0x6a","toBlock":"0x6b","address":"{:#x}"}}]}}"#,
        contracts::TOKEN_A
    );
    let answer = |log_timestamps: bool| {
        let request = request.clone();
        async move {
            let mut config = DevNodeConfig {
                key: "demo".into(),
                ..DevNodeConfig::default()
            };
            config.chain.blocks = 3_000;
            config.chain.log_timestamps = log_timestamps;
            let node = support::start(config).await;
            let _ = rustls::crypto::ring::default_provider().install_default();
            let text = reqwest::Client::new()
                .post(node.http_url())
                .header("content-type", "application/json")
                .body(request)
                .send()
                .await
                .expect("the node answers")
                .text()
                .await
                .expect("a body");
            (text, node.truth().block(0x6a).expect("block").timestamp)
        }
    };
    let (plain, _) = answer(false).await;
    assert_eq!(plain, PINNED);
    let (stamped, timestamp) = answer(true).await;
    let with_timestamp = PINNED.replace(
        r#""logIndex""#,
        &format!(r#""blockTimestamp":"{timestamp:#x}","logIndex""#),
    );
    assert_eq!(stamped, with_timestamp);
}

/// Goal: a user whose node sends no `blockTimestamp` is told once why the backfill reads headers and how to
/// read none, and a user whose node sends it is told nothing. Method: the binary synced against both nodes;
/// its log (the default level) is searched for the notice. The database equals the truth both times.
#[tokio::test]
async fn header_reads_for_timestamps_are_announced_once() {
    for (log_timestamps, told) in [(false, 1), (true, 0)] {
        let mut config = spec_node_config(BLOCKS);
        config.chain.log_timestamps = log_timestamps;
        let node = support::start(config).await;
        let work = Workdir::with(Backend::Sqlite).await;
        let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
        let support::Run { code, stderr } =
            support::run(&["sync", "--to", &TARGET.to_string()], &path).await;
        assert_eq!(code, Some(0), "{stderr}");
        let notices = stderr.matches("logs carry no blockTimestamp").count();
        assert_eq!(
            notices, told,
            "log_timestamps = {log_timestamps}:\n{stderr}"
        );
        assert!(
            stderr.contains("block_timestamps = false") == (told == 1),
            "{stderr}"
        );
        assert_db_matches_truth(&work, &node.truth(), &all_contracts(), TARGET).await;
    }
}
