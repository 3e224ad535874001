//! The simulated node's opt-in factory over real sockets: its `PairCreated` logs, its children's logs under
//! address and topic filters, block blooms, and reorgs, each compared with the ground truth
//! (`GroundTruth::factory_children`, `GroundTruth::logs`) or a brute-force filter of it.

use std::collections::{BTreeSet, HashMap};

use alloy_primitives::{keccak256, Address, B256};
use devnode::contracts::FACTORY;
use devnode::{DevNode, DevNodeConfig, FactoryConfig, TruthChild, TruthLog};
use serde_json::{json, Value};

use crate::serve::{assert_logs_are, hex, reference_matches, result, start, to_hex};

fn topic0(signature: &str) -> B256 {
    keccak256(signature.as_bytes())
}

/// A node of `blocks` blocks whose factory creates `children` pairs by its head.
async fn factory_node(blocks: u64, children: u64) -> DevNode {
    start(|cfg: &mut DevNodeConfig| {
        cfg.chain.blocks = blocks;
        cfg.chain.factory = Some(FactoryConfig {
            children,
            bursts: 0,
        });
    })
    .await
}

fn address_list(addresses: &[Address]) -> Value {
    json!(addresses
        .iter()
        .map(|a| to_hex(a.as_slice()))
        .collect::<Vec<_>>())
}

/// The logs of `from..=to` matching `addresses` and `topics`, by the brute-force reference.
fn expected(
    node: &DevNode,
    from: u64,
    to: u64,
    addresses: &[Address],
    topics: &[Option<Vec<B256>>],
) -> Vec<TruthLog> {
    node.truth()
        .logs(from, to)
        .into_iter()
        .filter(|log| reference_matches(log, addresses, topics))
        .collect()
}

/// Goal: `GroundTruth::factory_children` is exactly what the served `PairCreated` logs say, position by
/// position, and children multiply: more are created in the second half of the chain than in the first.
#[tokio::test]
async fn factory_children_are_the_served_pair_created_logs() {
    let node = factory_node(3_000, 150).await;
    let truth = node.truth();
    let children = truth.factory_children(0, 3_000);
    assert_eq!(children.len(), 150);
    let pair_created = topic0("PairCreated(address,address,address,uint256)");
    let filter = json!([{"fromBlock": "0x0", "toBlock": hex(3_000),
        "address": to_hex(FACTORY.as_slice()), "topics": [to_hex(pair_created.as_slice())]}]);
    let served = result(&node, "eth_getLogs", filter).await;
    assert_logs_are(
        &served,
        &expected(&node, 0, 3_000, &[FACTORY], &[Some(vec![pair_created])]),
    );
    let served = served.as_array().expect("an array");
    assert_eq!(served.len(), children.len());
    for (log, child) in served.iter().zip(&children) {
        assert_eq!(log["address"], to_hex(child.factory.as_slice()));
        assert_eq!(log["blockNumber"], hex(child.block_number));
        assert_eq!(log["blockHash"], to_hex(child.block_hash.as_slice()));
        assert_eq!(
            log["transactionHash"],
            to_hex(child.transaction_hash.as_slice())
        );
        assert_eq!(log["logIndex"], hex(child.log_index));
        // data: the pair (an address word), then the pair count.
        let data = log["data"].as_str().expect("data");
        assert_eq!(
            &data[2 + 24..2 + 64],
            &to_hex(child.address.as_slice())[2..]
        );
    }
    assert!(children
        .windows(2)
        .all(|w| (w[0].block_number, w[0].log_index) < (w[1].block_number, w[1].log_index)));
    let first_half = children.iter().filter(|c| c.block_number <= 1_500).count();
    assert!(first_half * 2 < children.len() - first_half, "{first_half}");
    // A sub-range is the matching slice.
    let middle: Vec<TruthChild> = children
        .iter()
        .filter(|c| (1_000..=2_000).contains(&c.block_number))
        .copied()
        .collect();
    assert_eq!(truth.factory_children(1_000, 2_000), middle);
    node.shutdown().await;
}

/// Goal: a filter listing many children (and an address that is none), with and without topic OR-lists,
/// returns exactly the brute-force reference; the pairs emit every event of their ABI.
#[tokio::test]
async fn a_list_of_children_filters_like_the_reference() {
    let node = factory_node(3_000, 150).await;
    let truth = node.truth();
    let mut addresses: Vec<Address> = truth
        .factory_children(0, 3_000)
        .iter()
        .step_by(2)
        .map(|child| child.address)
        .collect();
    addresses.push(Address::repeat_byte(0x99));
    let swap_or_sync = vec![
        topic0("Swap(address,uint256,uint256,uint256,uint256,address)"),
        topic0("Sync(uint112,uint112)"),
    ];
    for topics in [vec![], vec![Some(swap_or_sync.clone())]] {
        let mut filter = json!({"fromBlock": "0x0", "toBlock": hex(3_000),
            "address": address_list(&addresses)});
        if !topics.is_empty() {
            filter["topics"] = json!([swap_or_sync
                .iter()
                .map(|t| to_hex(t.as_slice()))
                .collect::<Vec<_>>()]);
        }
        let want = expected(&node, 0, 3_000, &addresses, &topics);
        assert!(want.len() > 100, "{} logs", want.len());
        assert_logs_are(&result(&node, "eth_getLogs", json!([filter])).await, &want);
    }
    let events: BTreeSet<&str> = truth
        .logs(0, 3_000)
        .iter()
        .filter(|log| addresses.contains(&log.address))
        .map(|log| log.event)
        .collect();
    assert_eq!(
        events,
        BTreeSet::from(["Approval", "Burn", "Mint", "Swap", "Sync", "Transfer"])
    );
    node.shutdown().await;
}

/// Goal: the block bloom covers the factory's and its children's logs, and is the one served.
#[tokio::test]
async fn blooms_cover_the_factory_and_its_children() {
    let node = factory_node(3_000, 150).await;
    let truth = node.truth();
    let children = truth.factory_children(2_000, 3_000);
    let numbers: BTreeSet<u64> = children.iter().map(|c| c.block_number).take(10).collect();
    for number in numbers {
        let block = truth.block(number).expect("block");
        for log in truth.logs(number, number) {
            assert!(block.bloom_may_contain(log.address.as_slice()));
            for topic in &log.topics {
                assert!(block.bloom_may_contain(topic.as_slice()));
            }
        }
        assert!(block.bloom_may_contain(FACTORY.as_slice()));
        let served = result(&node, "eth_getBlockByNumber", json!([hex(number), false])).await;
        assert_eq!(served["logsBloom"], to_hex(block.logs_bloom.as_slice()));
        assert_eq!(
            served["transactions"].as_array().map(Vec::len),
            Some(block.transactions.len())
        );
    }
    node.shutdown().await;
}

/// Goal: a reorg regenerates the factory's blocks: children created in orphaned blocks vanish or are
/// created again at their height or a few blocks later, the served logs follow the new fork, and no child emits without a
/// canonical creation before it. Method: a chain creating about a pair per block at its head, reorged 21
/// deep; served `eth_getLogs` for the factory and for the old children's addresses against the truth.
#[tokio::test]
async fn a_reorg_regenerates_children_and_their_logs() {
    let node = factory_node(2_000, 1_000).await;
    let truth = node.truth();
    let (from, to) = (1_980, 2_000);
    let before = truth.factory_children(from, to);
    assert!(before.len() > 10, "{} children", before.len());
    assert_eq!(node.reorg(21), from);
    let after = truth.factory_children(from, to);
    assert_ne!(before, after);
    let old: Vec<Address> = before.iter().map(|c| c.address).collect();
    assert!(after.iter().all(|c| old.contains(&c.address)));
    assert!(after.len() < before.len(), "some children vanished");
    // A pair comes back at its height or a few blocks later, in a block of the new fork.
    let mut moved = 0;
    for child in &after {
        let old = before
            .iter()
            .find(|b| b.address == child.address)
            .expect("created before");
        assert!((old.block_number..=old.block_number + 3).contains(&child.block_number));
        assert_ne!(old.block_hash, child.block_hash);
        moved += usize::from(old.block_number != child.block_number);
    }
    assert!(moved > 0, "no child was created again elsewhere");
    let factory_filter = json!([{"fromBlock": hex(from), "toBlock": hex(to),
        "address": to_hex(FACTORY.as_slice())}]);
    assert_logs_are(
        &result(&node, "eth_getLogs", factory_filter).await,
        &expected(&node, from, to, &[FACTORY], &[]),
    );
    let children_filter = json!([{"fromBlock": hex(from), "toBlock": hex(to),
        "address": address_list(&old)}]);
    let served = result(&node, "eth_getLogs", children_filter).await;
    let want = expected(&node, from, to, &old, &[]);
    assert_logs_are(&served, &want);
    let created: HashMap<Address, &TruthChild> = after.iter().map(|c| (c.address, c)).collect();
    for log in &want {
        let child = created
            .get(&log.address)
            .unwrap_or_else(|| panic!("a log of {} after its creation vanished", log.address));
        assert!(
            (log.block_number, log.log_index) > (child.block_number, child.log_index)
                || log.transaction_hash == child.transaction_hash,
            "{log:?} before {child:?}"
        );
    }
    node.shutdown().await;
}
