//! A hand-rolled JSON writer for the hot objects (logs, blocks) and the JSON-RPC envelope.
//!
//! Logs are written straight into one pre-sized `Vec<u8>` while the chain is scanned: no intermediate
//! `serde_json::Value`, no per-field allocation. Field names and encodings follow `service-spec.md`'s tables
//! (hex quantities without leading zeros, 32-byte hashes and addresses in lowercase hex). Strings that can hold
//! anything (ids, error messages) go through `serde_json`.

use alloy_primitives::hex;
use serde_json::Value;

use super::chain::{Chain, FullBlock, Log, GAS_LIMIT};

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
    quantity(out, u64::from(log.log_index));
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

/// Writes one block object with the spec's fields.
pub(crate) fn block(
    out: &mut Vec<u8>,
    chain: &Chain,
    block: &FullBlock,
    kind: BlockKind,
    detail: TxDetail,
) {
    let header = &block.header;
    let pending = kind == BlockKind::Pending;
    let n_txs = block.tx_hashes.len() as u64;
    let gas_used = (n_txs * 21_000 + block.n_logs as u64 * 1_500).min(GAS_LIMIT);
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
    quantity(out, GAS_LIMIT);
    field(out, "gasUsed");
    quantity(out, gas_used);
    field(out, "timestamp");
    quantity(out, header.timestamp);
    field(out, "transactions");
    out.push(b'[');
    for (tx_idx, tx_hash) in block.tx_hashes.iter().enumerate() {
        if tx_idx > 0 {
            out.push(b',');
        }
        match detail {
            TxDetail::Hashes => bytes(out, tx_hash.as_slice()),
            TxDetail::Full => transaction(out, chain, block, tx_idx, kind),
        }
    }
    out.push(b']');
    field(out, "uncles");
    out.extend_from_slice(b"[]");
    field(out, "mixHash");
    bytes(out, derived(b"dn/mix", header.hash.as_slice()).as_slice());
    out.push(b'}');
}

/// Writes a minimal, plausible EIP-1559 transaction object.
fn transaction(
    out: &mut Vec<u8>,
    chain: &Chain,
    block: &FullBlock,
    tx_idx: usize,
    kind: BlockKind,
) {
    let tx_hash = &block.tx_hashes[tx_idx];
    let pending = kind == BlockKind::Pending;
    out.extend_from_slice(b"{\"blockHash\":");
    if pending {
        out.extend_from_slice(b"null");
    } else {
        bytes(out, block.header.hash.as_slice());
    }
    field(out, "blockNumber");
    if pending {
        out.extend_from_slice(b"null");
    } else {
        quantity(out, block.header.number);
    }
    field(out, "chainId");
    quantity(out, chain.params.chain_id);
    field(out, "from");
    bytes(out, block.senders[tx_idx].as_slice());
    field(out, "gas");
    quantity(out, 250_000);
    field(out, "gasPrice");
    quantity(out, 1_000_000_007);
    field(out, "hash");
    bytes(out, tx_hash.as_slice());
    field(out, "input");
    bytes(out, &tx_hash[..4]);
    field(out, "maxFeePerGas");
    quantity(out, 2_000_000_000);
    field(out, "maxPriorityFeePerGas");
    quantity(out, 7);
    field(out, "nonce");
    quantity(out, u64::from(tx_hash[4]));
    field(out, "r");
    bytes(out, derived(b"dn/r", tx_hash.as_slice()).as_slice());
    field(out, "s");
    bytes(out, derived(b"dn/s", tx_hash.as_slice()).as_slice());
    field(out, "to");
    bytes(out, block.receivers[tx_idx].as_slice());
    field(out, "transactionIndex");
    if pending {
        out.extend_from_slice(b"null");
    } else {
        quantity(out, tx_idx as u64);
    }
    field(out, "type");
    quantity(out, 2);
    field(out, "v");
    quantity(out, u64::from(tx_hash[5] & 1));
    field(out, "value");
    quantity(out, 0);
    field(out, "yParity");
    quantity(out, u64::from(tx_hash[5] & 1));
    field(out, "accessList");
    out.extend_from_slice(b"[]}");
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
