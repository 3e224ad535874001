//! The opt-in `transactions` table (`[sync] transactions = true`): for a batch about to be committed, the
//! blocks that have its logs, and only those, are read with their full transactions
//! (`eth_getBlockByNumber(n, true)`, in JSON-RPC batches within the request rate, [`Node::blocks_with_transactions`]),
//! and each transaction that emitted one of the batch's logs becomes a row, in the batch's own database
//! transaction. With `transaction_receipts` the rows' receipts are read by block (`eth_getBlockReceipts`)
//! where the node serves it, as `fetch::receipts` learnt, else by transaction.
//!
//! Like the header reads of the timestamps stage (`enrich`), a block read here must be the block the logs
//! came from: a block the node does not know, another hash at that height, or a transaction whose hash is
//! not the logs' is [`Error::NotYet`] (the chain moved under the read; reading again later gives consistent
//! answers). [`rows`] is pure; [`fill`] is the I/O around it. Nothing here decodes or writes.

use std::collections::BTreeMap;

use alloy_primitives::{B256, U256};

use crate::primitives::{BlockNumber, Log};
use crate::rpc::BlockTransactions;
use crate::rpc::Receipt;
use crate::sink::{Batch, TransactionRow, Transactions};

use super::{Error, Node};

/// What a batch's logs need: per block, its hash, and per transaction index the transaction's hash.
type Needed = BTreeMap<BlockNumber, (B256, BTreeMap<u64, B256>)>;

/// The blocks and transactions of `logs`, once each. Pure.
fn needed(logs: &[Log]) -> Needed {
    let mut needed = Needed::new();
    for log in logs {
        needed
            .entry(log.block_number)
            .or_insert_with(|| (log.block_hash, BTreeMap::new()))
            .1
            .insert(log.transaction_index, log.transaction_hash);
    }
    needed
}

/// The rows of the transactions `needed` names, from the blocks read (in `needed`'s order). Pure.
///
/// # Errors
/// [`Error::NotYet`] when a block is missing, has another hash than the logs, or lacks one of the
/// transactions (or has another one at its index).
fn rows(
    needed: &Needed,
    blocks: Vec<Option<BlockTransactions>>,
) -> Result<Vec<TransactionRow>, Error> {
    let mut rows = Vec::new();
    for ((&number, (hash, txs)), block) in needed.iter().zip(blocks) {
        let Some(block) = block else {
            return Err(Error::NotYet(format!(
                "the node does not know block {number}, whose logs it returned (a lagging backend); run again later"
            )));
        };
        if block.hash != *hash || block.number != number {
            return Err(Error::NotYet(format!(
                "block {number} changed while it was read: its logs carry hash {hash} and the block read {}; \
                 run again later",
                block.hash
            )));
        }
        for (&tx_index, &tx_hash) in txs {
            let tx = usize::try_from(tx_index)
                .ok()
                .and_then(|idx| block.transactions.get(idx))
                .filter(|tx| tx.hash == tx_hash && tx.transaction_index == tx_index)
                .ok_or_else(|| {
                    Error::NotYet(format!(
                        "block {number} as read has no transaction {tx_hash} at index {tx_index}, where its \
                         logs say it is; run again later"
                    ))
                })?;
            rows.push(TransactionRow {
                block_number: number,
                block_hash: block.hash,
                block_timestamp: block.timestamp,
                transaction_index: tx_index,
                transaction_hash: tx.hash,
                from: tx.from,
                to: tx.to,
                value: tx.value,
                gas: tx.gas,
                gas_price: tx.gas_price,
                max_fee_per_gas: tx.max_fee_per_gas,
                max_priority_fee_per_gas: tx.max_priority_fee_per_gas,
                nonce: tx.nonce,
                tx_type: tx.tx_type.unwrap_or(U256::ZERO).saturating_to::<u64>(),
                input: tx.input.clone(),
                status: None,
                gas_used: None,
            });
        }
    }
    Ok(rows)
}

/// Adds `status` and `gas_used` to `rows` from their receipts (in `rows`' order). Pure.
///
/// # Errors
/// [`Error::NotYet`] when a receipt is missing or of another block or transaction (the block was replaced
/// since its logs were read).
fn add_receipts(rows: &mut [TransactionRow], receipts: Vec<Option<Receipt>>) -> Result<(), Error> {
    for (row, receipt) in rows.iter_mut().zip(receipts) {
        let receipt = receipt
            .filter(|r| r.block_hash == row.block_hash && r.transaction_hash == row.transaction_hash)
            .ok_or_else(|| {
                Error::NotYet(format!(
                    "the node has no receipt of transaction {} in block {} ({}), whose logs it returned; \
                     run again later",
                    row.transaction_hash, row.block_number, row.block_hash
                ))
            })?;
        row.status = receipt.status.map(|status| !status.is_zero());
        row.gas_used = Some(receipt.gas_used);
    }
    Ok(())
}

/// [`add_receipts`] from whole blocks' receipts (`eth_getBlockReceipts`): `blocks` are the rows' blocks in
/// order, `receipts` each block's. Pure.
///
/// # Errors
/// [`Error::NotYet`] as [`add_receipts`].
fn add_block_receipts(
    rows: &mut [TransactionRow],
    blocks: &[BlockNumber],
    receipts: Vec<Option<Vec<Receipt>>>,
) -> Result<(), Error> {
    let mut by_block: BTreeMap<BlockNumber, Vec<Option<Receipt>>> = BTreeMap::new();
    for (&number, receipts) in blocks.iter().zip(receipts) {
        let receipts = receipts.unwrap_or_default().into_iter().map(Some).collect();
        by_block.insert(number, receipts);
    }
    // Taken, not cloned: a block's receipts carry every log of the block, and a row is one transaction.
    let picked = rows
        .iter()
        .map(|row| {
            let receipts = by_block.get_mut(&row.block_number)?;
            receipts
                .get_mut(usize::try_from(row.transaction_index).ok()?)?
                .take()
        })
        .collect();
    add_receipts(rows, picked)
}

/// Reads the transactions of `batch`'s logs (and with [`Transactions::WithReceipts`] their receipts) and puts
/// their rows in the batch.
///
/// # Errors
/// [`Error::Node`] when a read fails for good; [`Error::NotYet`] as [`rows`]; [`Error::Interrupted`].
pub(super) async fn fill(node: &Node, batch: &mut Batch, mode: Transactions) -> Result<(), Error> {
    let needed = needed(&batch.logs);
    if needed.is_empty() || mode == Transactions::Omitted {
        return Ok(());
    }
    let numbers: Vec<BlockNumber> = needed.keys().copied().collect();
    let blocks = node.blocks_with_transactions(&numbers).await?;
    let mut rows = rows(&needed, blocks)?;
    if mode == Transactions::WithReceipts {
        // One eth_getBlockReceipts per block where the node serves it (as for blocks over the cap), one
        // eth_getTransactionReceipt per row otherwise.
        match node.block_receipts(&numbers).await? {
            Some(receipts) => add_block_receipts(&mut rows, &numbers, receipts)?,
            None => {
                let hashes: Vec<B256> = rows.iter().map(|row| row.transaction_hash).collect();
                let receipts = node.receipts(&hashes).await?;
                add_receipts(&mut rows, receipts)?;
            }
        }
    }
    batch.transactions = rows;
    Ok(())
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, Bytes};

    use super::*;
    use crate::rpc::Transaction;

    fn log(block: BlockNumber, tx_index: u64, log_index: u64) -> Log {
        Log {
            block_hash: B256::with_last_byte(block as u8),
            transaction_hash: B256::with_last_byte(100 + tx_index as u8),
            transaction_index: tx_index,
            ..Log::blank(block, log_index)
        }
    }

    fn block(number: BlockNumber, hash_byte: u8, n_txs: u64) -> BlockTransactions {
        BlockTransactions {
            number,
            hash: B256::with_last_byte(hash_byte),
            timestamp: number * 12,
            transactions: (0..n_txs)
                .map(|idx| Transaction {
                    hash: B256::with_last_byte(100 + idx as u8),
                    transaction_index: idx,
                    from: Address::ZERO,
                    to: None,
                    value: U256::MAX,
                    gas: U256::from(21_000),
                    gas_price: None,
                    max_fee_per_gas: None,
                    max_priority_fee_per_gas: None,
                    nonce: U256::ZERO,
                    tx_type: None,
                    input: Bytes::new(),
                })
                .collect(),
        }
    }

    #[test]
    fn one_row_per_transaction_with_logs_and_one_read_per_block() {
        let logs = [log(5, 0, 0), log(5, 0, 1), log(5, 2, 2), log(7, 1, 0)];
        let needed = needed(&logs);
        assert_eq!(needed.keys().copied().collect::<Vec<_>>(), [5, 7]);
        let rows = rows(&needed, vec![Some(block(5, 5, 3)), Some(block(7, 7, 2))]).expect("rows");
        let keys: Vec<_> = rows
            .iter()
            .map(|r| (r.block_number, r.transaction_index))
            .collect();
        assert_eq!(keys, [(5, 0), (5, 2), (7, 1)]);
        assert_eq!(rows[0].value, U256::MAX);
        assert_eq!(rows[2].block_timestamp, 84);
    }

    fn receipt(row: &TransactionRow, gas_used: u64) -> Receipt {
        Receipt {
            transaction_hash: row.transaction_hash,
            transaction_index: row.transaction_index,
            block_hash: row.block_hash,
            block_number: row.block_number,
            status: Some(U256::from(1)),
            gas_used: U256::from(gas_used),
            logs: Vec::new(),
        }
    }

    #[test]
    fn block_receipts_give_each_row_its_own_and_a_replaced_block_is_read_again() {
        let logs = [log(5, 0, 0), log(5, 2, 1), log(7, 1, 0)];
        let needed = needed(&logs);
        let blocks = [5, 7];
        let read = || rows(&needed, vec![Some(block(5, 5, 3)), Some(block(7, 7, 2))]);
        let mut rows = read().expect("rows");
        let all_of = |number: u64, n_txs: u64, rows: &[TransactionRow]| {
            (0..n_txs)
                .map(|idx| {
                    let mut row = rows[0].clone();
                    row.block_number = number;
                    row.block_hash = B256::with_last_byte(number as u8);
                    row.transaction_index = idx;
                    row.transaction_hash = B256::with_last_byte(100 + idx as u8);
                    receipt(&row, 1_000 * number + idx)
                })
                .collect::<Vec<_>>()
        };
        let receipts = vec![Some(all_of(5, 3, &rows)), Some(all_of(7, 2, &rows))];
        add_block_receipts(&mut rows, &blocks, receipts.clone()).expect("receipts");
        let gas: Vec<_> = rows.iter().map(|r| r.gas_used).collect();
        assert_eq!(gas, [5_000, 5_002, 7_001].map(|g| Some(U256::from(g))));
        // A block the node no longer knows, or whose receipts are of another hash: read again later.
        let mut other = receipts.clone();
        other[1] = None;
        let mut replaced = receipts;
        replaced[0].as_mut().expect("block 5")[2].block_hash = B256::with_last_byte(9);
        for receipts in [other, replaced] {
            let mut rows = read().expect("rows");
            let err =
                add_block_receipts(&mut rows, &blocks, receipts).expect_err("not the block's");
            assert!(matches!(err, Error::NotYet(_)), "{err}");
        }
    }

    #[test]
    fn a_block_that_changed_or_lacks_a_transaction_is_read_again_later() {
        let needed = needed(&[log(5, 2, 0)]);
        for blocks in [
            vec![None],
            vec![Some(block(5, 6, 3))],
            vec![Some(block(5, 5, 2))],
        ] {
            let err = rows(&needed, blocks).expect_err("inconsistent");
            assert!(matches!(err, Error::NotYet(_)), "{err}");
        }
    }
}
