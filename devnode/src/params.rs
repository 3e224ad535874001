//! Parsing of JSON-RPC parameters as a strict node does: quantities, block tags, hashes, addresses, filters.
//!
//! Hex is parsed by hand-written rules only where the rule is the point (a quantity must have `0x` and no leading
//! zero digit, as geth's `hexutil` demands); byte strings go through `alloy_primitives`. Errors are plain
//! messages; the caller wraps them as `-32602 invalid argument N: ...`.

use alloy_primitives::{Address, B256};
use serde_json::Value;

use super::filter::LogFilter;

/// A block parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BlockTag {
    Number(u64),
    Latest,
    Earliest,
    Pending,
    Safe,
    Finalized,
}

/// Which blocks an `eth_getLogs` filter covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogRange {
    /// `fromBlock`/`toBlock`, each defaulting to `latest`.
    Range { from: BlockTag, to: BlockTag },
    /// `blockHash`.
    Hash(B256),
}

/// A parsed `eth_getLogs` filter object.
#[derive(Debug, Clone)]
pub(crate) struct FilterRequest {
    pub(crate) range: LogRange,
    pub(crate) filter: LogFilter,
    /// Addresses plus topic entries, the spec's "parameters in one request".
    pub(crate) n_params: usize,
}

/// Parses a hex quantity: `0x` then 1 to 16 hex digits, no leading zero (except `0x0`).
pub(crate) fn quantity(text: &str) -> Result<u64, String> {
    let Some(digits) = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) else {
        return Err(format!("hex string without 0x prefix: {text:?}"));
    };
    if digits.is_empty() {
        return Err("hex string \"0x\"".to_owned());
    }
    if digits.len() > 1 && digits.starts_with('0') {
        return Err(format!("hex number with leading zero digits: {text:?}"));
    }
    if digits.len() > 16 {
        return Err(format!("hex number > 64 bits: {text:?}"));
    }
    u64::from_str_radix(digits, 16).map_err(|_| format!("invalid hex string: {text:?}"))
}

/// Parses a block parameter; `safe` only when `allow_safe`.
pub(crate) fn block_tag(value: &Value, allow_safe: bool) -> Result<BlockTag, String> {
    let Some(text) = value.as_str() else {
        return Err(format!(
            "block parameter must be a hex number or a tag, got {value}"
        ));
    };
    match text {
        "latest" => Ok(BlockTag::Latest),
        "earliest" => Ok(BlockTag::Earliest),
        "pending" => Ok(BlockTag::Pending),
        "finalized" => Ok(BlockTag::Finalized),
        // spec: eth_getBlockByNumber does not support `safe`; `finalized` is to be used instead.
        "safe" if allow_safe => Ok(BlockTag::Safe),
        "safe" => Err("block tag \"safe\" is not supported, use \"finalized\"".to_owned()),
        other => quantity(other).map(BlockTag::Number),
    }
}

/// Parses a 32-byte hash.
pub(crate) fn hash(value: &Value) -> Result<B256, String> {
    let text = value
        .as_str()
        .ok_or_else(|| format!("hash must be a hex string, got {value}"))?;
    if !text.starts_with("0x") || text.len() != 66 {
        return Err(format!(
            "hex string has length {}, want 64 for a 32-byte hash",
            text.len().saturating_sub(2)
        ));
    }
    text.parse::<B256>()
        .map_err(|_| format!("invalid hex string: {text:?}"))
}

/// Parses a 20-byte address (any case).
pub(crate) fn address(value: &Value) -> Result<Address, String> {
    let text = value
        .as_str()
        .ok_or_else(|| format!("address must be a hex string, got {value}"))?;
    if !text.starts_with("0x") || text.len() != 42 {
        return Err(format!(
            "hex string has length {}, want 40 for an address",
            text.len().saturating_sub(2)
        ));
    }
    // Parse the bytes, not the checksum: nodes accept any case.
    alloy_primitives::hex::decode(&text[2..])
        .ok()
        .filter(|bytes| bytes.len() == 20)
        .map(|bytes| Address::from_slice(&bytes))
        .ok_or_else(|| format!("invalid hex string: {text:?}"))
}

/// Parses the filter object of `eth_getLogs`.
pub(crate) fn filter_request(value: &Value) -> Result<FilterRequest, String> {
    let Some(object) = value.as_object() else {
        return Err(format!("filter must be an object, got {value}"));
    };
    let field = |name: &str| object.get(name).filter(|v| !v.is_null());
    let mut addresses = Vec::new();
    match field("address") {
        None => {}
        Some(Value::Array(items)) => {
            for item in items {
                addresses.push(address(item)?);
            }
        }
        Some(single) => addresses.push(address(single)?),
    }
    let mut topics: Vec<Vec<B256>> = Vec::new();
    let mut n_topic_entries = 0;
    match field("topics") {
        None => {}
        Some(Value::Array(positions)) => {
            if positions.len() > 4 {
                return Err("exceed max topics".to_owned());
            }
            for position in positions {
                let alternatives = match position {
                    Value::Null => Vec::new(),
                    Value::Array(items) => {
                        let mut alternatives = Vec::with_capacity(items.len());
                        for item in items {
                            // A null inside an OR-list is a wildcard for the whole position, as geth reads it.
                            if item.is_null() {
                                alternatives.clear();
                                break;
                            }
                            alternatives.push(hash(item)?);
                        }
                        n_topic_entries += items.len();
                        alternatives
                    }
                    single => {
                        n_topic_entries += 1;
                        vec![hash(single)?]
                    }
                };
                topics.push(alternatives);
            }
        }
        Some(other) => return Err(format!("topics must be an array, got {other}")),
    }
    let block_hash = field("blockHash").or_else(|| field("blockhash"));
    let (from, to) = (field("fromBlock"), field("toBlock"));
    let range = match block_hash {
        Some(hash_value) => {
            if from.is_some() || to.is_some() {
                return Err(
                    "cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other"
                        .to_owned(),
                );
            }
            LogRange::Hash(hash(hash_value)?)
        }
        None => LogRange::Range {
            from: from
                .map(|v| block_tag(v, true))
                .transpose()?
                .unwrap_or(BlockTag::Latest),
            to: to
                .map(|v| block_tag(v, true))
                .transpose()?
                .unwrap_or(BlockTag::Latest),
        },
    };
    let n_params = addresses.len() + n_topic_entries;
    Ok(FilterRequest {
        range,
        filter: LogFilter::new(addresses, topics),
        n_params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check_quantity(text: &str, expected: Result<u64, &str>) {
        let got = quantity(text);
        match expected {
            Ok(n) => assert_eq!(got, Ok(n), "{text}"),
            Err(fragment) => {
                let err = got.expect_err(text);
                assert!(err.contains(fragment), "{text}: {err}");
            }
        }
    }

    #[test]
    fn quantities_follow_the_strict_hex_rules() {
        check_quantity("0x0", Ok(0));
        check_quantity("0x1f", Ok(31));
        check_quantity("0xffffffffffffffff", Ok(u64::MAX));
        check_quantity("1f", Err("without 0x"));
        check_quantity("0x", Err("\"0x\""));
        check_quantity("0x01", Err("leading zero"));
        check_quantity("0x10000000000000000", Err("> 64 bits"));
        check_quantity("0xzz", Err("invalid hex"));
    }

    #[test]
    fn safe_is_a_tag_for_logs_but_not_for_blocks() {
        assert_eq!(block_tag(&json!("safe"), true), Ok(BlockTag::Safe));
        assert!(block_tag(&json!("safe"), false).is_err());
        assert_eq!(block_tag(&json!("0x10"), false), Ok(BlockTag::Number(16)));
        assert!(block_tag(&json!(16), false).is_err());
    }

    #[test]
    fn a_filter_with_both_a_hash_and_a_range_is_refused() {
        let hash = format!("0x{}", "11".repeat(32));
        let err =
            filter_request(&json!({"blockHash": hash, "fromBlock": "0x1"})).expect_err("both");
        assert!(err.contains("cannot specify both"));
    }

    #[test]
    fn a_filter_counts_its_addresses_and_topic_entries() {
        let t = format!("0x{}", "22".repeat(32));
        let a = format!("0x{}", "AB".repeat(20));
        let request = filter_request(&json!({"address": [a, a], "topics": [t, null, [t, t]]}))
            .expect("valid filter");
        assert_eq!(request.n_params, 5);
        assert_eq!(
            request.range,
            LogRange::Range {
                from: BlockTag::Latest,
                to: BlockTag::Latest
            }
        );
    }
}
