//! Contracts created by a factory, end to end: the devnode's opt-in Uniswap V2 factory creates pairs as the
//! chain grows (some emitting in their creating transaction before `PairCreated`, some again later in the
//! block), and the database must equal the ground truth: `logs`, every typed table of the factory and of the
//! pairs, and `factory_children`, on SQLite and on Postgres, through restarts, reorgs and a factory contract
//! added to an existing database.

use devnode::{contracts, GroundTruth, TruthChild};
use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{self, assert_db_matches_truth, node_config, Backend, Contract, Workdir};

pub(crate) fn factory_contract() -> Contract {
    Contract {
        name: "uniswap_v2_factory",
        address: contracts::FACTORY,
        abi: "uniswap_v2_factory.json",
        events: &[],
        start_block: 0,
    }
}

pub(crate) fn token_a() -> Contract {
    support::all_contracts().remove(0)
}

/// A node config of `blocks` blocks whose factory creates `children` pairs by the head, no faults.
pub(crate) fn factory_chain(blocks: u64, children: u64) -> devnode::DevNodeConfig {
    let mut config = node_config(blocks);
    config.chain.factory = Some(devnode::FactoryConfig {
        children,
        bursts: 0,
    });
    config
}

/// As [`factory_chain`], with `bursts` blocks where the pairs' logs together are over the cap.
fn factory_chain_with_bursts(blocks: u64, children: u64, bursts: u32) -> devnode::DevNodeConfig {
    let mut config = factory_chain(blocks, children);
    if let Some(factory) = config.chain.factory.as_mut() {
        factory.bursts = bursts;
    }
    config
}

/// The `[[contracts]]` entry of the pairs, appended to a config `write_config` wrote.
pub(crate) fn add_pairs(config: &std::path::Path) {
    add_children(config, "pair");
}

/// The `[[contracts]]` entry of the pairs as contract `name`, appended to a config `write_config` wrote.
fn add_children(config: &std::path::Path, name: &str) {
    let abi = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("abis/uniswap_v2_pair.json");
    let entry = format!(
        "\n[[contracts]]\nname = \"{name}\"\nabi = \"{}\"\n\
         factory = {{ contract = \"uniswap_v2_factory\", event = \"PairCreated\", parameter = \"pair\" }}\n",
        abi.display()
    );
    let mut text = std::fs::read_to_string(config).expect("config");
    text.push_str(&entry);
    std::fs::write(config, text).expect("config");
}

/// The config of `work` indexing only the factory and its pairs on `node`; `sync_extra` goes in `[sync]`.
fn pairs_config(node: &devnode::DevNode, work: &Workdir, sync_extra: &str) -> std::path::PathBuf {
    let path = work.write_config(&node.http_url(), &[factory_contract()], "", sync_extra);
    add_pairs(&path);
    path
}

/// What the harness compares: the configured contracts, and each child as the `pair` contract at its own
/// address from the block of its creating log.
fn expected(children: &[TruthChild], configured: &[Contract]) -> Vec<Contract> {
    expected_as(children, configured, "pair")
}

/// As [`expected`], the children's contract named `name`.
fn expected_as(
    children: &[TruthChild],
    configured: &[Contract],
    name: &'static str,
) -> Vec<Contract> {
    let mut all = configured.to_vec();
    all.extend(children.iter().map(|child| Contract {
        name,
        address: child.address,
        abi: "uniswap_v2_pair.json",
        events: &[],
        start_block: child.block_number,
    }));
    all
}

/// `factory_children` as text rows, in creation order.
async fn children_rows(work: &Workdir) -> Vec<Vec<String>> {
    support::query_texts(
        work,
        "SELECT contract, address, CAST(block_number AS TEXT), block_hash, CAST(log_index AS TEXT), \
         factory_address FROM factory_children \
         ORDER BY factory_children.block_number, factory_children.log_index",
    )
    .await
}

fn truth_rows(children: &[TruthChild]) -> Vec<Vec<String>> {
    children
        .iter()
        .map(|c| {
            vec![
                "pair".to_owned(),
                format!("{:#x}", c.address),
                c.block_number.to_string(),
                format!("{:#x}", c.block_hash),
                c.log_index.to_string(),
                format!("{:#x}", c.factory),
            ]
        })
        .collect()
}

/// Every table against the truth up to `target`; returns the children compared.
pub(crate) async fn assert_exact(
    work: &Workdir,
    truth: &GroundTruth,
    configured: &[Contract],
    target: u64,
) -> usize {
    let children = truth.factory_children(0, target);
    assert_eq!(
        children_rows(work).await,
        truth_rows(&children),
        "factory_children"
    );
    assert_db_matches_truth(work, truth, &expected(&children, configured), target).await;
    children.len()
}

/// Goal: pairs are indexed from the block of their creating log, their logs emitted before `PairCreated` in
/// the same transaction included, whatever range the creation falls in, while ranges are fetched
/// concurrently ahead of the decoding; `factory_children` and every table equal the truth. Method: a chain
/// of a few hundred pairs with small ranges (many creations land in ranges fetched before the pair was
/// known), synced in two steps (a restart in the middle reloads the children from the database), then the
/// whole database against the ground truth.
async fn children_are_indexed_from_their_creating_log(backend: Backend) {
    let node = support::start(factory_chain(6_000, 300)).await;
    let truth = node.truth();
    let children = truth.factory_children(0, 5_000);
    assert!(children.len() > 100, "{} children", children.len());
    // The shapes the rule is about are on the chain.
    let logs = truth.logs(0, 5_000);
    let before_creation = children.iter().any(|c| {
        logs.iter().any(|l| {
            l.address == c.address && l.block_number == c.block_number && l.log_index < c.log_index
        })
    });
    assert!(before_creation, "some pair emits before its PairCreated");

    let work = Workdir::with(backend).await;
    let configured = [token_a(), factory_contract()];
    let path = work.write_config(
        &node.http_url(),
        &configured,
        "max_concurrency = 8",
        "initial_block_range = 50\nmax_block_range = 200",
    );
    add_pairs(&path);
    support::sync(&path, Target::Number(2_500))
        .await
        .expect("first sync");
    let n = assert_exact(&work, &truth, &configured, 2_500).await;
    assert!(n > 10, "{n} children by block 2,500");
    support::sync(&path, Target::Number(5_000))
        .await
        .expect("second sync");
    assert_exact(&work, &truth, &configured, 5_000).await;
}
both_backends!(children_are_indexed_from_their_creating_log);

/// Goal: a factory contract added to a database that already indexes the factory discovers the children of
/// the blocks committed before (the factory's own rows are not written twice). Method: sync the factory
/// alone, add the pairs, sync further; everything equals the truth.
async fn pairs_added_later_find_the_children_of_committed_blocks(backend: Backend) {
    let node = support::start(factory_chain(4_000, 120)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let configured = [factory_contract()];
    let path = work.write_config(
        &node.http_url(),
        &configured,
        "",
        "initial_block_range = 200",
    );
    support::sync(&path, Target::Number(3_000))
        .await
        .expect("factory alone");
    add_pairs(&path);
    support::sync(&path, Target::Number(3_500))
        .await
        .expect("with pairs");
    assert_exact(&work, &truth, &configured, 3_500).await;
}
both_backends!(pairs_added_later_find_the_children_of_committed_blocks);

/// Goal: a reorg that orphans a creating log removes the child, its `factory_children` row and its rows,
/// and the replacement chain's children are indexed. Method: sync to the head (the top blocks above
/// finality are tracked), reorg the node deeper than several creations, sync again, compare.
async fn a_reorg_that_orphans_a_creating_log_removes_the_child(backend: Backend) {
    let node = support::start(factory_chain(3_000, 400)).await;
    let work = Workdir::with(backend).await;
    let configured = [factory_contract()];
    let path = pairs_config(&node, &work, "");
    support::sync(&path, Target::Latest)
        .await
        .expect("first sync");
    let before = node.truth();
    let head = before.head();
    let orphaned: Vec<TruthChild> = before
        .factory_children(head - 20, head)
        .into_iter()
        .collect();
    assert!(
        !orphaned.is_empty(),
        "children are created in the blocks the reorg replaces"
    );
    node.reorg(20);
    let after = node.truth();
    support::sync(&path, Target::Number(head))
        .await
        .expect("sync after the reorg");
    let rows = children_rows(&work).await;
    for child in &orphaned {
        let gone = !after
            .factory_children(0, head)
            .iter()
            .any(|c| c.address == child.address && c.block_hash == child.block_hash);
        if gone {
            assert!(
                !rows
                    .iter()
                    .any(|r| r[3] == format!("{:#x}", child.block_hash)),
                "orphaned child {:#x} still recorded",
                child.address
            );
        }
    }
    assert_exact(&work, &after, &configured, head).await;
}
both_backends!(a_reorg_that_orphans_a_creating_log_removes_the_child);

/// Goal: thousands of children never make a request the node refuses for its parameter count, nor one request
/// per child. Method: a node that refuses filters of more than 1,500 addresses and topics (real ones refuse
/// over 5,000) and 2,000 pairs, so every range past the 1,500th child needs its address list cut in requests
/// of at most 1,000; the sync succeeds, `eth_getLogs` stays far below one request per child, and the
/// database equals the truth.
async fn thousands_of_children_go_out_in_chunks_under_the_parameter_limit(backend: Backend) {
    let mut config = factory_chain(3_000, 2_000);
    config.limits.max_params = 1_500;
    let node = support::start(config).await;
    let truth = node.truth();
    let target = 2_990;
    assert!(
        truth.factory_children(0, target).len() > 1_600,
        "enough children to need chunks"
    );
    let work = Workdir::with(backend).await;
    let configured = [factory_contract()];
    let path = pairs_config(&node, &work, "");
    let report = support::sync(&path, Target::Number(target))
        .await
        .expect("no request over the node's parameter limit");
    assert!(
        report.log_requests < 200,
        "{} eth_getLogs requests for 2,000 children",
        report.log_requests
    );
    assert_exact(&work, &truth, &configured, target).await;
}
both_backends!(thousands_of_children_go_out_in_chunks_under_the_parameter_limit);

/// Goal: children's logs get their block's timestamp from headers when the node sends no `blockTimestamp`,
/// also those filled in after the range was fetched. Method: a node without `blockTimestamp`, a first range
/// as long as the plan (a plan the first range covers is not read ahead, so the children found in it are
/// filled in: at least one filling is asserted), then every table (timestamps included) against the truth.
async fn children_are_stamped_from_headers_without_block_timestamp(backend: Backend) {
    let mut config = factory_chain(3_000, 150);
    config.chain.log_timestamps = false;
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let configured = [factory_contract()];
    let path = pairs_config(
        &node,
        &work,
        "initial_block_range = 3000\nmax_block_range = 3000",
    );
    let report = support::sync(&path, Target::Number(2_500))
        .await
        .expect("sync");
    assert!(report.children_filled > 0, "nothing filled in: {report:?}");
    assert_exact(&work, &truth, &configured, 2_500).await;
}
both_backends!(children_are_stamped_from_headers_without_block_timestamp);

/// Goal: when children are many and busy, a range is asked for by its topics alone (one request instead of
/// one per 1,000 addresses), and the logs of other contracts on the same events are dropped here, never
/// stored. Method: 2,000 pairs while the node's own tokens and pair (not configured) emit the same
/// `Transfer`, `Approval`, `Swap` and `Sync` events; the sync must send topic-only requests, drop foreign
/// logs, and end with every table equal to the truth (a foreign log kept would be a row too many, and the
/// answer check refuses a log of an address not asked for). The children are read ahead, so every range
/// past the 1,000th child carries over 1,000; one request at a time, so the first such range's chunked
/// answer measures the density before the next is sent, and the next goes out by topic.
async fn busy_children_are_asked_for_by_topic_and_other_contracts_logs_dropped(backend: Backend) {
    let mut config = factory_chain(3_000, 2_000);
    // The other contracts quiet, so that a topic-only answer (theirs included) stays under the cap.
    config.chain.density = 0.1;
    let node = support::start(config).await;
    let truth = node.truth();
    let target = 2_990;
    let work = Workdir::with(backend).await;
    let configured = [factory_contract()];
    let path = work.write_config(
        &node.http_url(),
        &configured,
        "max_concurrency = 1",
        "initial_block_range = 50\nmax_block_range = 200",
    );
    add_pairs(&path);
    let report = support::sync(&path, Target::Number(target))
        .await
        .expect("sync");
    assert!(report.topic_only > 0, "no topic-only request: {report:?}");
    assert!(
        report.foreign_logs > 0,
        "no foreign log dropped: {report:?}"
    );
    assert_exact(&work, &truth, &configured, target).await;
}
both_backends!(busy_children_are_asked_for_by_topic_and_other_contracts_logs_dropped);

/// Goal: the children a backfill will meet are read ahead from the factory's logs, so every range is asked
/// for with the children created by its end and none is filled in afterwards, even where children multiply
/// fastest and the fetcher runs furthest ahead of the decoding; a block where the pairs' logs together are
/// over the cap (no pair alone near it) is indexed whole. Method: 2,000 pairs over 3,000 blocks with one
/// such block, small ranges, a target below finality (all of it backfilled); `children_filled` is 0 and
/// every table equals the truth.
async fn children_read_ahead_leave_no_range_to_fill_in(backend: Backend) {
    let node = support::start(factory_chain_with_bursts(3_000, 2_000, 1)).await;
    let truth = node.truth();
    let target = 2_500;
    let work = Workdir::with(backend).await;
    let configured = [factory_contract()];
    let path = pairs_config(
        &node,
        &work,
        "initial_block_range = 50\nmax_block_range = 200",
    );
    let report = support::sync(&path, Target::Number(target))
        .await
        .expect("sync");
    assert_eq!(report.children_filled, 0, "{report:?}");
    let n_children = assert_exact(&work, &truth, &configured, target).await;
    assert!(n_children > 1_000, "{n_children} children");
}
both_backends!(children_read_ahead_leave_no_range_to_fill_in);

/// Goal: `bench`'s factory shape is indexed exactly: the default contracts (one of them a pair with the
/// children's events, so topic-only answers carry it) beside a factory whose 1,500 pairs multiply, with two
/// blocks where the pairs' logs together are over the cap; the children are read ahead up to the head, so
/// not even the head read (selected while the backfill runs) is filled in. Method: the `factory` preset's
/// chain cut to 20,000 blocks, synced to the head; every table against the truth, no filling.
async fn the_factory_preset_shape_is_exact(backend: Backend) {
    let work = Workdir::with(backend).await;
    let (node, path, configured) = factory_preset_shape(20_000, &work, "").await;
    let truth = node.truth();
    let report = support::sync(&path, Target::Latest).await.expect("sync");
    let target = report.target;
    let children = truth.factory_children(0, target);
    let stored = assert_db_matches_truth(
        &work,
        &truth,
        &expected_as(&children, &configured, "v2_pair"),
        target,
    )
    .await;
    assert_eq!(report.logs, stored as u64, "logs reported as stored");
    assert_eq!(
        report.children_filled, 0,
        "the head read is selected after the reading ahead too: {report:?}"
    );
}
both_backends!(the_factory_preset_shape_is_exact);

/// A node of `blocks` blocks shaped like the `factory` preset, and the config in `work` of the default
/// contracts, the factory and its pairs (as `v2_pair`), with `node_extra` in `[node]`: the node, the
/// config's path and the contracts configured before the pairs.
async fn factory_preset_shape(
    blocks: u64,
    work: &Workdir,
    node_extra: &str,
) -> (devnode::DevNode, std::path::PathBuf, Vec<Contract>) {
    let mut chain = factory_chain_with_bursts(blocks, 1_500, 2);
    chain.chain.factory = devnode::ChainConfig::factory_preset().factory;
    let node = support::start(chain).await;
    let mut configured = support::all_contracts();
    configured.push(factory_contract());
    let path = work.write_config(&node.http_url(), &configured, node_extra, "");
    add_children(&path, "v2_pair");
    (node, path, configured)
}

/// Syncs the factory and its pairs on a node of `chain` to `target`, one request at a time (so the requests
/// counted are the same on every run); asserts every table equals the truth, and returns the sync's report.
async fn sync_pairs_one_request_at_a_time(
    backend: Backend,
    chain: devnode::DevNodeConfig,
    target: u64,
) -> logslice::pipeline::SyncReport {
    let node = support::start(chain).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let configured = [factory_contract()];
    let path = work.write_config(&node.http_url(), &configured, "max_concurrency = 1", "");
    add_pairs(&path);
    let report = support::sync(&path, Target::Number(target))
        .await
        .expect("sync");
    assert_exact(&work, &truth, &configured, target).await;
    report
}

/// Goal: a range asked for in chunks of addresses may carry two requests' worth of logs, since the cap bounds
/// each request and not their sum. Method: 4,000 pairs over 12,000 blocks, so from block 6,000 on every range
/// goes out as two to four chunks, one request at a time. Ranges sized by their sum took 63 `eth_getLogs`
/// requests here (with the chunks dealt evenly, as now), sized by their largest answer 51: the sync must stay
/// under the midpoint, and the database must equal the truth.
async fn a_range_in_chunks_carries_each_chunks_share_of_the_cap(backend: Backend) {
    let report =
        sync_pairs_one_request_at_a_time(backend, factory_chain(12_000, 4_000), 11_990).await;
    assert!(
        report.log_requests <= 57,
        "{} eth_getLogs requests for {} logs: ranges sized by the sum of their chunks?",
        report.log_requests,
        report.logs
    );
}
both_backends!(a_range_in_chunks_carries_each_chunks_share_of_the_cap);

/// Goal: a block where the pairs' logs together are over the cap, in a range no survey covers (children
/// join all the time), is read without halving the range down to it. Method: the shape the outside
/// measurement found 6.1x the fewest requests on (300 pairs, one block of 10,500-12,000 pair logs spread over
/// them), the factory and its pairs only, one request at a time. Halving by blocks took 12 refusals and 25
/// requests here; asking a piece refused again by address halves and quarters (`fetch::quarters`) takes 3
/// and 14. The database must equal the truth.
async fn a_block_of_pair_logs_over_the_cap_is_read_by_addresses(backend: Backend) {
    let chain = factory_chain_with_bursts(20_000, 300, 1);
    let report = sync_pairs_one_request_at_a_time(backend, chain, 19_990).await;
    assert!(
        report.splits <= 4 && report.log_requests <= 18,
        "{} refusals and {} eth_getLogs requests: the block found by halving?",
        report.splits,
        report.log_requests
    );
}
both_backends!(a_block_of_pair_logs_over_the_cap_is_read_by_addresses);

/// Goal: the children are read ahead in ranges of `max_block_range` from the first: the announcing event of a
/// few factory addresses is sparse, and ramping up from `initial_block_range` (2,000, then 16,000, then the
/// rest) cost two requests more on every run. Method: 300 pairs over 40,000 blocks and no block over the
/// cap, the factory and its pairs only, one request at a time: the reading ahead is one request (the plan is
/// under `max_block_range`), so the sync takes 13 `eth_getLogs` (15 with the ramp); the database must equal
/// the truth.
async fn children_are_read_ahead_in_the_longest_ranges(backend: Backend) {
    let report =
        sync_pairs_one_request_at_a_time(backend, factory_chain(40_000, 300), 39_990).await;
    assert!(
        report.log_requests <= 13,
        "{} eth_getLogs requests: the reading ahead ramped up from initial_block_range?",
        report.log_requests
    );
}
both_backends!(children_are_read_ahead_in_the_longest_ranges);

/// Goal: where a factory's children multiply, ranges are cut by the children asked for there, not by the
/// logs per block of the stretches behind (`planner::addresses`). Method: the `factory` preset's shape over
/// 40,000 blocks, so its 1,500 pairs multiply as the square of the height, fetched without a store (the
/// planner's requests are what is measured), one request at a time so the count is the same on every run.
/// With every block weighed alike it took 22 refusals and 91 `eth_getLogs` requests for its 382,170 logs;
/// weighed by the addresses, 7 and 70: the fetch must stay under the midpoints.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranges_are_cut_by_the_children_asked_for() {
    let work = Workdir::new();
    let (_node, path, _) = factory_preset_shape(40_000, &work, "max_concurrency = 1").await;
    let config = logslice::config::load(&path).expect("config");
    let report = logslice::pipeline::fetch_only(&config, Target::Number(39_990))
        .await
        .expect("fetch");
    assert!(
        report.splits <= 14 && report.log_requests <= 80,
        "{} refusals and {} eth_getLogs requests for {} logs: every block weighed alike?",
        report.splits,
        report.log_requests,
        report.logs
    );
}
