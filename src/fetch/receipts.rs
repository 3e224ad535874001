//! A block whose logs one request cannot carry even for one address and one topic0, read from its receipts
//! instead: `eth_getBlockReceipts` where the node serves it, otherwise `eth_getBlockByNumber(n, false)`
//! and one `eth_getTransactionReceipt` per transaction, in JSON-RPC batches no larger than the request rate
//! allows (each through the gate: 429s and retries as for every request). Which method the node serves is
//! learnt once per run ([`Served`]).
//!
//! The block is taken whole or not at all: every receipt's `blockHash` is the block's, there is exactly one
//! receipt per transaction in order, and log indexes run contiguously from 0 across the receipts
//! ([`check`], pure). A block that changed under the read (a reorg) is read again; then only the logs the
//! selection asks for are kept, exactly those `eth_getLogs` would have answered.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering::Relaxed};

use alloy_primitives::B256;

use crate::node::{Batches, Call};
use crate::primitives::{BlockNumber, BlockRange, Log};
use crate::rpc::{BlockTxHashes, Blocks, Receipt};

use super::{groups, Access, Error, OnSplit, Selection};

/// Reads of a block that may change under them before the block counts as moving too fast to read.
const MAX_READS: u32 = 5;

/// Receipts of one batch at most (besides the request rate): a receipt with its logs is small, a block may
/// hold thousands of transactions.
const MAX_RECEIPTS_PER_BATCH: usize = 200;

/// Which receipts methods the node serves, as far as this run knows, and whether it takes batches of them.
#[derive(Debug)]
pub struct Served {
    what: AtomicU8,
    batches: AtomicBool,
    /// Held while the first reads find out, so that blocks read at once ask once.
    probing: tokio::sync::Mutex<()>,
}

const UNKNOWN: u8 = 0;
const BLOCK_RECEIPTS: u8 = 1;
const TX_RECEIPTS_ONLY: u8 = 2;
const NONE: u8 = 3;

impl Default for Served {
    fn default() -> Self {
        Self {
            what: AtomicU8::new(UNKNOWN),
            batches: AtomicBool::new(true),
            probing: tokio::sync::Mutex::default(),
        }
    }
}

impl Served {
    fn get(&self) -> u8 {
        self.what.load(Relaxed)
    }

    /// Whether this run found that the node serves `eth_getBlockReceipts`: one request then reads a block
    /// whole, fewer than narrowing its filter takes.
    pub(super) fn block_receipts(&self) -> bool {
        self.get() == BLOCK_RECEIPTS
    }

    fn set(&self, what: u8) {
        if self.what.swap(what, Relaxed) != what {
            tracing::info!(
                serves = match what {
                    BLOCK_RECEIPTS => "eth_getBlockReceipts",
                    TX_RECEIPTS_ONLY => "eth_getTransactionReceipt only",
                    _ => "no receipts",
                },
                "blocks over the result cap are read from receipts"
            );
        }
    }
}

/// Why the receipts of a block do not make the block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    /// A receipt or log of another block: the block changed under the read.
    Reorged(String),
    /// The receipts are not the block's, whole: the node is inconsistent.
    Incomplete(String),
}

/// Checks that `receipts` are the whole of `block`'s: one per transaction in order, each of the block's hash
/// and number, with log indexes running from 0 without a gap.
///
/// # Errors
/// [`Mismatch`] saying what does not hold.
pub fn check(block: &BlockTxHashes, receipts: &[Receipt]) -> Result<(), Mismatch> {
    let mut next_log = 0;
    for receipt in receipts {
        if receipt.block_hash != block.hash || receipt.block_number != block.number {
            return Err(Mismatch::Reorged(format!(
                "receipt of {} is of block {} ({}), not {} ({})",
                receipt.transaction_hash,
                receipt.block_number,
                receipt.block_hash,
                block.number,
                block.hash
            )));
        }
        for log in &receipt.logs {
            if log.block_hash != block.hash || log.transaction_hash != receipt.transaction_hash {
                return Err(Mismatch::Reorged(format!(
                    "log {} of {} is of block {} and transaction {}",
                    log.log_index, receipt.transaction_hash, log.block_hash, log.transaction_hash
                )));
            }
            if log.log_index != next_log || log.transaction_index != receipt.transaction_index {
                return Err(Mismatch::Incomplete(format!(
                    "log index {} (transaction {}) where {next_log} (transaction {}) comes next",
                    log.log_index, log.transaction_index, receipt.transaction_index
                )));
            }
            next_log += 1;
        }
    }
    if receipts.len() != block.transactions.len() {
        return Err(Mismatch::Incomplete(format!(
            "{} receipts for {} transactions",
            receipts.len(),
            block.transactions.len()
        )));
    }
    for (index, (receipt, hash)) in receipts.iter().zip(&block.transactions).enumerate() {
        if receipt.transaction_hash != *hash || receipt.transaction_index != index as u64 {
            return Err(Mismatch::Incomplete(format!(
                "receipt {index} is of transaction {} (index {}), not {hash}",
                receipt.transaction_hash, receipt.transaction_index
            )));
        }
    }
    Ok(())
}

/// The logs of `receipts` that `selection` asks for, in log order.
pub fn selected(selection: &Selection, receipts: Vec<Receipt>, block: BlockNumber) -> Vec<Log> {
    let filters: Vec<_> = selection
        .groups
        .iter()
        .map(|group| group.filter(Blocks::Range(BlockRange::single(block))))
        .collect();
    receipts
        .into_iter()
        .flat_map(|receipt| receipt.logs)
        .filter(|log| filters.iter().any(|filter| groups::admits(filter, log)))
        .collect()
}

/// The logs `selection` asks for in `block`, read from the block's receipts.
///
/// # Errors
/// [`Error::NoReceipts`] when the node serves no receipts method, or the block keeps changing under the
/// read; [`Error::Inconsistent`] when the receipts are not the block's, whole; any other [`Error`].
pub(crate) async fn read_block(
    access: &Access,
    block: BlockNumber,
    selection: &Selection,
) -> Result<Vec<Log>, Error> {
    let unavailable = |why: String| Error::NoReceipts { block, why };
    let mut last = String::new();
    for _ in 0..MAX_READS {
        let Some(header) = access
            .send(
                Call::new("eth_getBlockByNumber").up_to(block),
                |client| async move { client.block_tx_hashes(block).await },
            )
            .await?
        else {
            last = "the node does not know the block (now)".into();
            continue;
        };
        let receipts = match receipts_of(access, &header).await? {
            Read::Receipts(receipts) => receipts,
            Read::Gone(why) => {
                last = why;
                continue;
            }
            Read::Unserved(why) => return Err(unavailable(why)),
        };
        match check(&header, &receipts) {
            Ok(()) => {
                access.gate.stats.receipt_blocks.fetch_add(1, Relaxed);
                crate::observe::record_receipt_block();
                return Ok(selected(selection, receipts, block));
            }
            Err(Mismatch::Reorged(why)) => last = why,
            Err(Mismatch::Incomplete(why)) => {
                return Err(Error::Inconsistent(format!(
                    "the receipts of block {block}: {why}"
                )))
            }
        }
        tracing::info!(block, cause = %last, "the block changed while its receipts were read; reading it again");
    }
    Err(unavailable(format!(
        "it changed under {MAX_READS} reads (last: {last})"
    )))
}

/// What one read of a block's receipts found.
enum Read {
    Receipts(Vec<Receipt>),
    /// The block or a transaction is gone (a reorg).
    Gone(String),
    /// Neither method is served.
    Unserved(String),
}

async fn receipts_of(access: &Access, block: &BlockTxHashes) -> Result<Read, Error> {
    let served = &access.receipts_served;
    let probing = match served.get() {
        UNKNOWN => Some(served.probing.lock().await),
        _ => None,
    };
    if matches!(served.get(), UNKNOWN | BLOCK_RECEIPTS) {
        let number = block.number;
        match access
            .send(
                Call::new("eth_getBlockReceipts")
                    .on_split(OnSplit::Return)
                    .up_to(number),
                |client| async move { client.block_receipts(number).await },
            )
            .await
        {
            Ok(Some(receipts)) => {
                served.set(BLOCK_RECEIPTS);
                return Ok(Read::Receipts(receipts));
            }
            Ok(None) => return Ok(Read::Gone("eth_getBlockReceipts: no such block".into())),
            Err(Error::UnknownBlock { source, .. }) => {
                return Ok(Read::Gone(format!("eth_getBlockReceipts: {source}")))
            }
            Err(Error::Fatal { source, .. }) if source.is_method_unavailable() => {
                served.set(TX_RECEIPTS_ONLY);
            }
            // Too large an answer for one response: this block goes by transaction.
            Err(Error::Split(_)) => {}
            Err(err) => return Err(err),
        }
    }
    drop(probing);
    if served.get() == NONE {
        return Ok(Read::Unserved(
            "the node serves neither eth_getBlockReceipts nor eth_getTransactionReceipt".into(),
        ));
    }
    match by_transaction(access, &block.transactions).await {
        Ok(receipts) => {
            let mut all = Vec::with_capacity(receipts.len());
            for (receipt, hash) in receipts.into_iter().zip(&block.transactions) {
                match receipt {
                    Some(receipt) => all.push(receipt),
                    None => {
                        return Ok(Read::Gone(format!(
                            "eth_getTransactionReceipt: no receipt for {hash}"
                        )))
                    }
                }
            }
            Ok(Read::Receipts(all))
        }
        Err(Error::UnknownBlock { source, .. }) => {
            Ok(Read::Gone(format!("eth_getTransactionReceipt: {source}")))
        }
        Err(Error::Fatal { source, .. }) if source.is_method_unavailable() => {
            served.set(NONE);
            Ok(Read::Unserved(format!(
                "the node serves neither eth_getBlockReceipts nor eth_getTransactionReceipt ({source})"
            )))
        }
        Err(err) => Err(err),
    }
}

/// Blocks' receipts of one batch at most (besides the request rate): a block's receipts carry all its logs.
const MAX_BLOCKS_PER_BATCH: usize = 10;

/// The receipts of each of `numbers` (`None` where the node does not know the block), by
/// `eth_getBlockReceipts` in batches, when the node serves it: one call per block instead of one per
/// transaction. `None` when it does not (learnt here or by an earlier read, [`Served`]), or when the first
/// block's receipts are too large for one answer: the caller then reads receipts by transaction.
///
/// # Errors
/// Any [`Error`] but a method the node does not serve.
pub(crate) async fn of_blocks(
    access: &Access,
    numbers: &[BlockNumber],
) -> Result<Option<Vec<Option<Vec<Receipt>>>>, Error> {
    let served = &access.receipts_served;
    let Some((&first, rest)) = numbers.split_first() else {
        return Ok(Some(Vec::new()));
    };
    let mut answers = Vec::with_capacity(numbers.len());
    let rest = match served.get() {
        BLOCK_RECEIPTS => numbers,
        UNKNOWN => {
            let _probing = served.probing.lock().await;
            match served.get() {
                BLOCK_RECEIPTS => numbers,
                UNKNOWN => {
                    match access
                        .send(
                            Call::new("eth_getBlockReceipts")
                                .on_split(OnSplit::Return)
                                .up_to(first),
                            |client| async move { client.block_receipts(first).await },
                        )
                        .await
                    {
                        Ok(receipts) => {
                            served.set(BLOCK_RECEIPTS);
                            answers.push(receipts);
                            rest
                        }
                        Err(Error::Fatal { source, .. }) if source.is_method_unavailable() => {
                            served.set(TX_RECEIPTS_ONLY);
                            return Ok(None);
                        }
                        Err(Error::Split(_)) => return Ok(None),
                        Err(err) => return Err(err),
                    }
                }
                _ => return Ok(None),
            }
        }
        _ => return Ok(None),
    };
    let batches = Batches {
        gate: &access.gate,
        allowed: &served.batches,
    };
    match batches
        .run(
            "eth_getBlockReceipts",
            rest,
            MAX_BLOCKS_PER_BATCH,
            rest.iter().max().copied(),
            |client, batch: Vec<BlockNumber>| async move { client.blocks_receipts(&batch).await },
            |client, number| async move { client.block_receipts(number).await },
        )
        .await
        .map_err(Error::from)
    {
        Ok(rest) => {
            answers.extend(rest);
            Ok(Some(answers))
        }
        // Served a moment ago, refused now (a load balancer over mixed backends): by transaction.
        Err(Error::Fatal { source, .. }) if source.is_method_unavailable() => {
            served.set(TX_RECEIPTS_ONLY);
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// One receipt per hash, in batches while the node takes them ([`super::Batches`]).
async fn by_transaction(access: &Access, hashes: &[B256]) -> Result<Vec<Option<Receipt>>, Error> {
    let batches = Batches {
        gate: &access.gate,
        allowed: &access.receipts_served.batches,
    };
    batches
        .run(
            "eth_getTransactionReceipt",
            hashes,
            MAX_RECEIPTS_PER_BATCH,
            None,
            |client, batch: Vec<B256>| async move { client.receipts(&batch).await },
            |client, hash| async move { client.receipt(hash).await },
        )
        .await
        .map_err(Error::from)
}

#[cfg(test)]
mod tests;
