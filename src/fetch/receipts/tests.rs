use alloy_primitives::{Address, Bytes, B256};

use super::*;
use crate::fetch::Group;

fn hash(n: u8) -> B256 {
    B256::repeat_byte(n)
}

fn log(block: &BlockTxHashes, tx: u64, index: u64, address: u8, topic0: u8) -> Log {
    Log {
        block_number: block.number,
        block_hash: block.hash,
        transaction_hash: block.transactions[tx as usize],
        transaction_index: tx,
        log_index: index,
        address: Address::repeat_byte(address),
        topics: [hash(topic0)].into(),
        data: Bytes::new(),
        removed: false,
        block_timestamp: None,
    }
}

/// A block of three transactions: 2 logs, none, 3 logs (indexes 0-4).
fn block_and_receipts() -> (BlockTxHashes, Vec<Receipt>) {
    let block = BlockTxHashes {
        number: 100,
        hash: hash(0xbb),
        transactions: vec![hash(1), hash(2), hash(3)],
    };
    let logs_of = |tx: u64, range: std::ops::Range<u64>| -> Vec<Log> {
        range
            .map(|i| log(&block, tx, i, if i % 2 == 0 { 0xa1 } else { 0xa2 }, 0xe1))
            .collect()
    };
    let receipt = |tx: u64, logs: Vec<Log>| Receipt {
        transaction_hash: block.transactions[tx as usize],
        transaction_index: tx,
        block_hash: block.hash,
        block_number: block.number,
        status: Some(alloy_primitives::U256::from(1)),
        gas_used: alloy_primitives::U256::from(21_000),
        logs,
    };
    let receipts = vec![
        receipt(0, logs_of(0, 0..2)),
        receipt(1, Vec::new()),
        receipt(2, logs_of(2, 2..5)),
    ];
    (block, receipts)
}

#[test]
fn the_whole_block_passes() {
    let (block, receipts) = block_and_receipts();
    assert_eq!(check(&block, &receipts), Ok(()));
}

#[test]
fn a_receipt_of_another_block_is_a_reorg() {
    let (block, mut receipts) = block_and_receipts();
    receipts[1].block_hash = hash(0xcc);
    assert!(matches!(
        check(&block, &receipts),
        Err(Mismatch::Reorged(_))
    ));
    let (block, mut receipts) = block_and_receipts();
    receipts[2].logs[1].block_hash = hash(0xcc);
    assert!(matches!(
        check(&block, &receipts),
        Err(Mismatch::Reorged(_))
    ));
}

#[test]
fn a_missing_receipt_a_gap_in_log_indexes_or_receipts_out_of_order_are_incomplete() {
    let (block, mut receipts) = block_and_receipts();
    receipts.remove(1);
    assert!(matches!(
        check(&block, &receipts),
        Err(Mismatch::Incomplete(_))
    ));

    let (block, mut receipts) = block_and_receipts();
    receipts[2].logs.remove(0);
    assert!(matches!(
        check(&block, &receipts),
        Err(Mismatch::Incomplete(_))
    ));

    let (block, mut receipts) = block_and_receipts();
    receipts.swap(0, 1);
    assert!(matches!(
        check(&block, &receipts),
        Err(Mismatch::Incomplete(_))
    ));

    let (block, mut receipts) = block_and_receipts();
    // Indexes restarting per receipt (as some old nodes did) are not the block's.
    for (i, log) in receipts[2].logs.iter_mut().enumerate() {
        log.log_index = i as u64;
    }
    assert!(matches!(
        check(&block, &receipts),
        Err(Mismatch::Incomplete(_))
    ));
}

#[test]
fn keeps_exactly_what_the_selection_asks_for() {
    let (_, receipts) = block_and_receipts();
    let selection = Selection {
        groups: vec![Group::unfiltered(
            vec![Address::repeat_byte(0xa1)],
            Some(vec![hash(0xe1)]),
        )],
        pairs: Vec::new(),
    };
    let kept = selected(&selection, receipts.clone(), 100);
    assert_eq!(
        kept.iter().map(|l| l.log_index).collect::<Vec<_>>(),
        vec![0, 2, 4]
    );
    let other_topic = Selection {
        groups: vec![Group::unfiltered(
            vec![Address::repeat_byte(0xa1)],
            Some(vec![hash(0xe2)]),
        )],
        pairs: Vec::new(),
    };
    assert!(selected(&other_topic, receipts, 100).is_empty());
}
