//! Ground truth of transactions and receipts, for tests: the same values the node serves, as typed fields.
//!
//! Built from the same draws as the node's answers (`txs`), so a test compares the served JSON, and the
//! database an indexer filled from it, field by field with these.

use alloy_primitives::{Address, Bytes, B256, U256};

use super::txs::{Fees, Tx};
use super::{GroundTruth, TruthLog};

/// A canonical transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthTransaction {
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: B256,
    /// Block timestamp.
    pub block_timestamp: u64,
    /// Transaction hash.
    pub hash: B256,
    /// Position in the block.
    pub transaction_index: u64,
    /// Sender.
    pub from: Address,
    /// Receiver; `None` for a contract creation.
    pub to: Option<Address>,
    /// Wei transferred.
    pub value: U256,
    /// Sender's nonce.
    pub nonce: u64,
    /// Gas provided.
    pub gas: u64,
    /// The price paid per gas (for type 2, base fee plus the tip paid).
    pub gas_price: u64,
    /// Type 2 only.
    pub max_fee_per_gas: Option<u64>,
    /// Type 2 only.
    pub max_priority_fee_per_gas: Option<u64>,
    /// 0 (legacy) or 2 (EIP-1559).
    pub tx_type: u64,
    /// Call data or init code.
    pub input: Bytes,
}

/// A canonical transaction's receipt.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthReceipt {
    /// Transaction hash.
    pub transaction_hash: B256,
    /// Position in the block.
    pub transaction_index: u64,
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: B256,
    /// Sender.
    pub from: Address,
    /// Receiver; `None` for a contract creation.
    pub to: Option<Address>,
    /// The created contract, for a creation.
    pub contract_address: Option<Address>,
    /// Success (a failed transaction has no logs).
    pub status: bool,
    /// Gas used by this transaction.
    pub gas_used: u64,
    /// Gas used by the block up to and including this transaction.
    pub cumulative_gas_used: u64,
    /// Price paid per gas.
    pub effective_gas_price: u64,
    /// 0 or 2.
    pub tx_type: u64,
    /// Its logs, with the block's log indexes.
    pub logs: Vec<TruthLog>,
}

impl GroundTruth {
    /// Every transaction of canonical block `number`, in order (empty beyond the head).
    pub fn transactions(&self, number: u64) -> Vec<TruthTransaction> {
        let state = self.chain.read();
        if number > state.head {
            return Vec::new();
        }
        let header = self.chain.header(&state, number);
        let plan = self.chain.plan(number, header.gen, &state);
        self.chain
            .transactions(&header, &plan)
            .iter()
            .map(|tx| TruthTransaction {
                block_number: number,
                block_hash: header.hash,
                block_timestamp: header.timestamp,
                hash: tx.hash,
                transaction_index: u64::from(tx.index),
                from: tx.from,
                to: tx.to,
                value: tx.value,
                nonce: tx.nonce,
                gas: tx.gas,
                gas_price: tx.gas_price,
                max_fee_per_gas: max_fee(tx),
                max_priority_fee_per_gas: max_priority_fee(tx),
                tx_type: tx.kind(),
                input: Bytes::from(tx.input.clone()),
            })
            .collect()
    }

    /// Every receipt of canonical block `number`, in order (empty beyond the head).
    pub fn receipts(&self, number: u64) -> Vec<TruthReceipt> {
        let state = self.chain.read();
        if number > state.head {
            return Vec::new();
        }
        let header = self.chain.header(&state, number);
        let plan = self.chain.plan(number, header.gen, &state);
        self.chain
            .transactions(&header, &plan)
            .iter()
            .map(|tx| TruthReceipt {
                transaction_hash: tx.hash,
                transaction_index: u64::from(tx.index),
                block_number: number,
                block_hash: header.hash,
                from: tx.from,
                to: tx.to,
                contract_address: tx.contract_address,
                status: tx.status,
                gas_used: tx.gas_used,
                cumulative_gas_used: tx.cumulative_gas_used,
                effective_gas_price: tx.gas_price,
                tx_type: tx.kind(),
                logs: self
                    .chain
                    .tx_logs(&header, &plan, tx)
                    .into_iter()
                    .map(TruthLog::from_log)
                    .collect(),
            })
            .collect()
    }

    /// The heights of the opt-in blocks where one contract alone is over the result cap
    /// ([`ChainConfig::overcap`](super::ChainConfig::overcap)), whether mined yet or not.
    pub fn overcap_blocks(&self) -> Vec<u64> {
        self.chain.params.overcap.heights()
    }
}

fn max_fee(tx: &Tx) -> Option<u64> {
    match tx.fees {
        Fees::Legacy => None,
        Fees::Dynamic { max_fee, .. } => Some(max_fee),
    }
}

fn max_priority_fee(tx: &Tx) -> Option<u64> {
    match tx.fees {
        Fees::Legacy => None,
        Fees::Dynamic {
            max_priority_fee, ..
        } => Some(max_priority_fee),
    }
}
