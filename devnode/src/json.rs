//! A hand-rolled JSON writer for the hot objects (logs, blocks) and the JSON-RPC envelope.
//!
//! Logs are written straight into one pre-sized `Vec<u8>` while the chain is scanned: no intermediate
//! `serde_json::Value`, no per-field allocation. Field names and encodings follow the service's tables
//! (`docs/node-service.md`)
//! (hex quantities without leading zeros, 32-byte hashes and addresses in lowercase hex). Strings that can hold
//! anything (ids, error messages) go through `serde_json`.

use alloy_primitives::hex;
use serde_json::Value;

use super::chain::{Chain, FullBlock, Header, Log, GAS_LIMIT};
use super::txs::{bloom_of, Fees, Tx};

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Writes `"0x…"` for a quantity: lowercase hex, no leading zeros, `0x0` for zero.
pub(crate) fn quantity(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(b"\"0x");
    if n == 0 {
        out.push(b'0');
    } else {
        let n_digits = (64 - n.leading_zeros() as usize).div_ceil(4);
        for digit_idx in (0..n_digits).rev() {
            out.push(HEX_DIGITS[((n >> (digit_idx * 4)) & 0xf) as usize]);
        }
    }
    out.push(b'"');
}

/// Writes `"0x…"` for a byte string (`"0x"` when empty).
pub(crate) fn bytes(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(b"\"0x");
    let start = out.len();
    out.resize(start + data.len() * 2, 0);
    // The slice is exactly twice the input long, the one condition `encode_to_slice` checks.
    let _ = hex::encode_to_slice(data, &mut out[start..]);
    out.push(b'"');
}

/// Writes any JSON value (ids, error data) with `serde_json`.
pub(crate) fn value(out: &mut Vec<u8>, value: &Value) {
    // Writing a `Value` to a `Vec` cannot fail: no I/O, and every `Value` is serialisable.
    let _ = serde_json::to_writer(&mut *out, value);
}

/// Writes a JSON string with `serde_json`'s escaping.
pub(crate) fn string(out: &mut Vec<u8>, text: &str) {
    let _ = serde_json::to_writer(&mut *out, text);
}

/// Writes one log object (the spec's "Log object"), geth's field order; with `block_timestamp`, also the
/// `blockTimestamp` that geth and most providers add (not in the spec; off unless `log_timestamps`).
pub(crate) fn log(out: &mut Vec<u8>, log: &Log, removed: bool, block_timestamp: Option<u64>) {
    out.extend_from_slice(b"{\"address\":");
    bytes(out, log.address.as_slice());
    out.extend_from_slice(b",\"topics\":[");
    for (topic_idx, topic) in log.topics.iter().enumerate() {
        if topic_idx > 0 {
            out.push(b',');
        }
        bytes(out, topic.as_slice());
    }
    out.extend_from_slice(b"],\"data\":");
    bytes(out, &log.data);
    out.extend_from_slice(b",\"blockNumber\":");
    quantity(out, log.block_number);
    out.extend_from_slice(b",\"transactionHash\":");
    bytes(out, log.tx_hash.as_slice());
    out.extend_from_slice(b",\"transactionIndex\":");
    quantity(out, u64::from(log.tx_index));
    out.extend_from_slice(b",\"blockHash\":");
    bytes(out, log.block_hash.as_slice());
    if let Some(timestamp) = block_timestamp {
        out.extend_from_slice(b",\"blockTimestamp\":");
        quantity(out, timestamp);
    }
    out.extend_from_slice(b",\"logIndex\":");
    quantity(out, log.log_index);
    out.extend_from_slice(if removed {
        b",\"removed\":true}"
    } else {
        b",\"removed\":false}"
    });
}

/// Whether a block object describes a mined block or the pending one (whose identity fields are `null`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockKind {
    Mined,
    Pending,
}

/// Whether a block object lists transaction hashes or full transaction objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxDetail {
    Hashes,
    Full,
}

fn field(out: &mut Vec<u8>, name: &str) {
    out.extend_from_slice(b",\"");
    out.extend_from_slice(name.as_bytes());
    out.extend_from_slice(b"\":");
}

/// A 32-byte word derived from a hash, for the roots the simulation does not compute.
fn derived(tag: &[u8], from: &[u8]) -> alloy_primitives::B256 {
    alloy_primitives::keccak256([tag, from].concat())
}

/// Writes one block object with the spec's fields; with `full`, its transactions as objects (the block's
/// transactions, in order), otherwise their hashes.
pub(crate) fn block(
    out: &mut Vec<u8>,
    chain: &Chain,
    block: &FullBlock,
    kind: BlockKind,
    full: Option<&[Tx]>,
) {
    let header = &block.header;
    let pending = kind == BlockKind::Pending;
    let n_txs = block.tx_hashes.len() as u64;
    let gas_used = block.gas_used;
    out.extend_from_slice(b"{\"number\":");
    if pending {
        out.extend_from_slice(b"null");
    } else {
        quantity(out, header.number);
    }
    field(out, "hash");
    if pending {
        out.extend_from_slice(b"null");
    } else {
        bytes(out, header.hash.as_slice());
    }
    field(out, "parentHash");
    bytes(out, header.parent_hash.as_slice());
    field(out, "nonce");
    if pending {
        out.extend_from_slice(b"null");
    } else {
        bytes(out, &[0u8; 8]);
    }
    field(out, "sha3Uncles");
    // keccak256(rlp([])): a block without uncles.
    bytes(out, alloy_primitives::keccak256([0xc0u8]).as_slice());
    field(out, "logsBloom");
    if pending {
        out.extend_from_slice(b"null");
    } else {
        bytes(out, block.bloom.as_slice());
    }
    field(out, "transactionsRoot");
    if block.tx_hashes.is_empty() {
        // keccak256(rlp("")): the empty trie root.
        bytes(out, alloy_primitives::keccak256([0x80u8]).as_slice());
    } else {
        bytes(
            out,
            derived(b"dn/txroot", header.hash.as_slice()).as_slice(),
        );
    }
    field(out, "stateRoot");
    bytes(
        out,
        derived(b"dn/stateroot", header.hash.as_slice()).as_slice(),
    );
    field(out, "receiptsRoot");
    bytes(
        out,
        derived(b"dn/receiptsroot", header.hash.as_slice()).as_slice(),
    );
    field(out, "miner");
    bytes(out, chain.miner().as_slice());
    field(out, "difficulty");
    quantity(out, 0);
    field(out, "totalDifficulty");
    quantity(out, 0);
    field(out, "extraData");
    bytes(out, b"logslice devnode");
    field(out, "size");
    quantity(out, 620 + n_txs * 110);
    field(out, "gasLimit");
    // An over-cap block uses more gas than a real block could; its limit follows rather than lie about it.
    quantity(out, GAS_LIMIT.max(gas_used));
    field(out, "gasUsed");
    quantity(out, gas_used);
    field(out, "timestamp");
    quantity(out, header.timestamp);
    field(out, "transactions");
    out.push(b'[');
    match full {
        None => {
            for (tx_idx, tx_hash) in block.tx_hashes.iter().enumerate() {
                if tx_idx > 0 {
                    out.push(b',');
                }
                bytes(out, tx_hash.as_slice());
            }
        }
        Some(txs) => {
            let at = (!pending).then_some(header);
            for (tx_idx, tx) in txs.iter().enumerate() {
                if tx_idx > 0 {
                    out.push(b',');
                }
                transaction(out, chain.params.chain_id, tx, at);
            }
        }
    }
    out.push(b']');
    field(out, "uncles");
    out.extend_from_slice(b"[]");
    field(out, "mixHash");
    bytes(out, derived(b"dn/mix", header.hash.as_slice()).as_slice());
    out.push(b'}');
}

/// Writes a 256-bit quantity: lowercase hex without leading zeros.
pub(crate) fn quantity_u256(out: &mut Vec<u8>, n: &alloy_primitives::U256) {
    out.extend_from_slice(format!("\"{n:#x}\"").as_bytes());
}

fn null_or_quantity(out: &mut Vec<u8>, n: Option<u64>) {
    match n {
        Some(n) => quantity(out, n),
        None => out.extend_from_slice(b"null"),
    }
}

fn null_or_bytes(out: &mut Vec<u8>, data: Option<&[u8]>) {
    match data {
        Some(data) => bytes(out, data),
        None => out.extend_from_slice(b"null"),
    }
}

/// Writes one transaction object (the spec's table, geth's field order) of the block `at` (`None` for the
/// pending block: block fields and index null). A legacy transaction has neither `maxFeePerGas` nor
/// `maxPriorityFeePerGas`, and (spec: "returned only for EIP-1559 transactions") no `chainId`; its `v` is
/// EIP-155's.
pub(crate) fn transaction(out: &mut Vec<u8>, chain_id: u64, tx: &Tx, at: Option<&Header>) {
    out.extend_from_slice(b"{\"blockHash\":");
    null_or_bytes(out, at.map(|header| header.hash.as_slice()));
    field(out, "blockNumber");
    null_or_quantity(out, at.map(|header| header.number));
    field(out, "from");
    bytes(out, tx.from.as_slice());
    field(out, "gas");
    quantity(out, tx.gas);
    field(out, "gasPrice");
    quantity(out, tx.gas_price);
    if let Fees::Dynamic {
        max_fee,
        max_priority_fee,
    } = tx.fees
    {
        field(out, "maxFeePerGas");
        quantity(out, max_fee);
        field(out, "maxPriorityFeePerGas");
        quantity(out, max_priority_fee);
    }
    field(out, "hash");
    bytes(out, tx.hash.as_slice());
    field(out, "input");
    bytes(out, &tx.input);
    field(out, "nonce");
    quantity(out, tx.nonce);
    field(out, "to");
    null_or_bytes(out, tx.to.as_ref().map(|to| to.as_slice()));
    field(out, "transactionIndex");
    null_or_quantity(out, at.map(|_| u64::from(tx.index)));
    field(out, "value");
    quantity_u256(out, &tx.value);
    field(out, "type");
    quantity(out, tx.kind());
    match tx.fees {
        Fees::Legacy => {
            field(out, "v");
            quantity(out, chain_id * 2 + 35 + tx.y_parity);
        }
        Fees::Dynamic { .. } => {
            field(out, "accessList");
            out.extend_from_slice(b"[]");
            field(out, "chainId");
            quantity(out, chain_id);
            field(out, "v");
            quantity(out, tx.y_parity);
        }
    }
    field(out, "r");
    bytes(out, tx.r.as_slice());
    field(out, "s");
    bytes(out, tx.s.as_slice());
    if tx.kind() == 2 {
        field(out, "yParity");
        quantity(out, tx.y_parity);
    }
    out.push(b'}');
}

/// Writes one receipt object (the spec's table, geth's field order) of transaction `tx` of block `header`,
/// whose logs are `logs`, written exactly as `eth_getLogs` writes them.
pub(crate) fn receipt(
    out: &mut Vec<u8>,
    tx: &Tx,
    header: &Header,
    logs: &[Log],
    log_timestamps: bool,
) {
    out.extend_from_slice(b"{\"blockHash\":");
    bytes(out, header.hash.as_slice());
    field(out, "blockNumber");
    quantity(out, header.number);
    field(out, "contractAddress");
    null_or_bytes(out, tx.contract_address.as_ref().map(|a| a.as_slice()));
    field(out, "cumulativeGasUsed");
    quantity(out, tx.cumulative_gas_used);
    field(out, "effectiveGasPrice");
    quantity(out, tx.gas_price);
    field(out, "from");
    bytes(out, tx.from.as_slice());
    field(out, "gasUsed");
    quantity(out, tx.gas_used);
    field(out, "logs");
    out.push(b'[');
    for (log_idx, one) in logs.iter().enumerate() {
        if log_idx > 0 {
            out.push(b',');
        }
        log(out, one, false, log_timestamps.then_some(header.timestamp));
    }
    out.push(b']');
    field(out, "logsBloom");
    bytes(out, bloom_of(logs).as_slice());
    field(out, "status");
    quantity(out, u64::from(tx.status));
    field(out, "to");
    null_or_bytes(out, tx.to.as_ref().map(|to| to.as_slice()));
    field(out, "transactionHash");
    bytes(out, tx.hash.as_slice());
    field(out, "transactionIndex");
    quantity(out, u64::from(tx.index));
    field(out, "type");
    quantity(out, tx.kind());
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_quantity(n: u64, expected: &str) {
        let mut out = Vec::new();
        quantity(&mut out, n);
        assert_eq!(String::from_utf8_lossy(&out), expected);
    }

    #[test]
    fn quantities_have_no_leading_zeros() {
        check_quantity(0, "\"0x0\"");
        check_quantity(1, "\"0x1\"");
        check_quantity(0x10, "\"0x10\"");
        check_quantity(0xabc, "\"0xabc\"");
        check_quantity(u64::MAX, "\"0xffffffffffffffff\"");
    }

    #[test]
    fn bytes_are_lowercase_hex_and_empty_is_0x() {
        let mut out = Vec::new();
        bytes(&mut out, &[]);
        bytes(&mut out, &[0xAB, 0x01]);
        assert_eq!(String::from_utf8_lossy(&out), "\"0x\"\"0xab01\"");
    }
}
