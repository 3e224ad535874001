use super::*;

fn chain(seed: u64) -> Chain {
    Chain::new(ChainParams {
        seed,
        chain_id: 1337,
        initial_head: 1000,
        density: 1.0,
        genesis_timestamp: 1_700_000_000,
        finalized_depth: 64,
        reorg_every: None,
        reorg_depth: 3,
        anon_contract: false,
        factory: None,
        overcap: OvercapConfig::default(),
        shapes: ShapeConfig::default(),
        high_log_indexes: None,
    })
}

#[test]
fn a_hash_maps_back_to_its_height_and_nothing_else_does() {
    let chain = chain(7);
    let state = chain.read();
    for number in [0, 1, 2, 999, 1000] {
        let hash = chain.header(&state, number).hash;
        assert_eq!(chain.number_of_hash(&state, &hash, 1000), Some(number));
    }
    assert_eq!(
        chain.number_of_hash(&state, &B256::repeat_byte(0x11), 1000),
        None
    );
    let future = chain.header(&state, 1001).hash;
    assert_eq!(chain.number_of_hash(&state, &future, 1000), None);
}

#[test]
fn a_reorg_replaces_the_top_blocks_and_keeps_the_parent_links() {
    let chain = chain(7);
    let before: Vec<Header> = (995..=1000)
        .map(|n| chain.header(&chain.read(), n))
        .collect();
    assert_eq!(chain.reorg(3), 998);
    let state = chain.read();
    let after: Vec<Header> = (995..=1000).map(|n| chain.header(&state, n)).collect();
    assert_eq!(before[..3], after[..3]);
    for (old, new) in before[3..].iter().zip(&after[3..]) {
        assert_ne!(old.hash, new.hash);
    }
    for pair in after.windows(2) {
        assert_eq!(pair[1].parent_hash, pair[0].hash);
    }
    let old_hash = before[5].hash;
    assert_eq!(chain.number_of_hash(&state, &old_hash, 1000), None);
    assert_eq!(
        state.orphans_in(0, 2000),
        vec![(998, 0), (999, 0), (1000, 0)]
    );
}

#[test]
fn log_indexes_are_contiguous_and_transactions_non_decreasing() {
    let chain = chain(3);
    let state = chain.read();
    let logs = chain.canonical_logs(&state, 0, 1000, 1000);
    assert!(!logs.is_empty());
    for block in logs.chunk_by(|a, b| a.block_number == b.block_number) {
        for (idx, log) in block.iter().enumerate() {
            assert_eq!(log.log_index as usize, idx);
        }
        assert!(block.windows(2).all(|w| w[0].tx_index <= w[1].tx_index));
    }
}

/// Goal: `high_log_indexes` renumbers one block's logs from the base, the same in its logs and its
/// receipts' logs, and changes nothing else. Method: the same seed with and without the option, block by
/// block around it.
#[test]
fn the_high_log_index_block_is_numbered_from_the_base_in_logs_and_receipts() {
    let plain = chain(3);
    let plain_state = plain.read();
    let busy = (500..1000)
        .find(|n| plain.canonical_logs(&plain_state, *n, *n, 1000).len() > 1)
        .expect("a block with logs");
    let base = crate::DEFAULT_LOG_INDEX_BASE;
    let high = Chain::new(ChainParams {
        high_log_indexes: Some((busy, base)),
        ..chain(3).params
    });
    let high_state = high.read();
    for number in busy - 1..=busy + 1 {
        let before = plain.canonical_logs(&plain_state, number, number, 1000);
        let after = high.canonical_logs(&high_state, number, number, 1000);
        assert_eq!(before.len(), after.len());
        for (position, (b, a)) in before.iter().zip(&after).enumerate() {
            let wanted = if number == busy {
                base + position as u64
            } else {
                position as u64
            };
            assert_eq!(a.log_index, wanted, "block {number}");
            assert_eq!(
                (a.tx_index, a.address, &a.topics, &a.data, a.tx_hash),
                (b.tx_index, b.address, &b.topics, &b.data, b.tx_hash)
            );
        }
        let header = high.header(&high_state, number);
        let plan = high.plan(number, header.gen, &high_state);
        let in_receipts: Vec<u64> = high
            .transactions(&header, &plan)
            .iter()
            .flat_map(|tx| high.tx_logs(&header, &plan, tx))
            .map(|log| log.log_index)
            .collect();
        let in_logs: Vec<u64> = after.iter().map(|log| log.log_index).collect();
        assert_eq!(in_receipts, in_logs, "block {number}");
    }
}

/// Keccak of everything the default chain (`DevNodeConfig::default()`, seed 7) says about blocks `0..=12_000`, its first dense segment
/// and its first block over 10,000 logs: every log's position, address, topics and data, and every 97th
/// block's transactions and bloom.
fn default_chain_digest() -> B256 {
    let chain = Chain::new(crate::chain_params(&crate::DevNodeConfig::default()));
    let state = chain.read();
    let dense = (0..)
        .map(|segment| segment * SEGMENT_LEN)
        .find(|start| chain.density_of(*start) == Density::Dense)
        .expect("a dense segment exists");
    let huge = chain.huge_block_near(0);
    let spans = [(0, 12_000), (dense, dense + SEGMENT_LEN - 1), (huge, huge)];
    let mut bytes = Vec::new();
    for (from, to) in spans {
        for log in chain.canonical_logs(&state, from, to, u64::MAX) {
            bytes.extend_from_slice(&log.block_number.to_be_bytes());
            bytes.extend_from_slice(log.block_hash.as_slice());
            bytes.extend_from_slice(log.tx_hash.as_slice());
            bytes.extend_from_slice(&log.tx_index.to_be_bytes());
            // Pinned when log indexes were u32: the same four bytes.
            let log_index = u32::try_from(log.log_index).expect("the default chain's are small");
            bytes.extend_from_slice(&log_index.to_be_bytes());
            bytes.extend_from_slice(log.address.as_slice());
            bytes.push(log.topics.len() as u8);
            for topic in &log.topics {
                bytes.extend_from_slice(topic.as_slice());
            }
            bytes.extend_from_slice(&(log.data.len() as u64).to_be_bytes());
            bytes.extend_from_slice(&log.data);
        }
        for number in (from..=to).step_by(97) {
            let block = chain.full_block(&state, number, 0);
            bytes.extend_from_slice(&(block.tx_hashes.len() as u64).to_be_bytes());
            bytes.extend_from_slice(block.bloom.as_slice());
        }
    }
    keccak256(&bytes)
}

/// Goal: options that are off leave the default chain byte for byte what it was, so existing tests,
/// benchmark figures and the README's output stay valid. Method: a digest of a stretch of the default
/// chain (sparse, medium, dense and huge blocks), pinned to the value computed before the opt-in
/// contracts existed. If this fails, the default chain changed: that must be a deliberate decision.
/// One was: transaction hashes now carry their block and index in their last 12 bytes (for
/// `eth_getTransactionByHash`); with the old hashes the digest was `0x09977f92…e36ff1b2`, and everything else
/// of the stretch is as it was.
#[test]
fn the_default_chain_is_pinned_byte_for_byte() {
    assert_eq!(
        default_chain_digest(),
        alloy_primitives::b256!("dadfe38633f8ff35851f58e77d489f56ebffd7248199b4642e1ccd2640bcf955")
    );
}

/// With the opt-in anon contract on, every one of its events is emitted within a short chain (enough
/// for an end-to-end test), beside the default contracts; with it off, none is.
#[test]
fn the_anon_contract_emits_each_of_its_events_only_when_switched_on() {
    let count_anon = |anon_contract: bool| {
        let chain = Chain::new(ChainParams {
            anon_contract,
            ..chain(7).params
        });
        let state = chain.read();
        let mut per_emitter = [0usize; contracts::N_WEIGHTED_EMITTERS];
        for log in chain.canonical_logs(&state, 0, 10_000, 10_000) {
            per_emitter[usize::from(log.emitter)] += 1;
        }
        per_emitter
    };
    let off = count_anon(false);
    assert!(off[contracts::N_DEFAULT_EMITTERS..].iter().all(|n| *n == 0));
    let on = count_anon(true);
    assert!(on[..contracts::N_DEFAULT_EMITTERS].iter().all(|n| *n > 100));
    for (idx, n) in on.iter().enumerate().skip(contracts::N_DEFAULT_EMITTERS) {
        assert!(*n > 100, "{}: {n} logs", EMITTERS[idx].event.name());
    }
}

#[test]
fn every_huge_period_has_one_block_over_ten_thousand_logs() {
    let chain = chain(7);
    let huge = chain.huge_block_near(HUGE_PERIOD + 5);
    assert!(chain.is_huge(huge));
    let plan = chain.plan(huge, 0, &chain.read());
    assert!(plan.logs.len() > 10_000);
    let mut per_emitter = [0usize; EMITTERS.len()];
    for planned in &plan.logs {
        per_emitter[usize::from(planned.emitter)] += 1;
    }
    assert!(per_emitter.iter().all(|n| *n < 10_000));
}
