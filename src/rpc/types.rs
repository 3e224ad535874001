//! Typed values at the JSON-RPC boundary: hex is parsed here, once, by serde.
//!
//! A pending log (null `blockNumber`, `blockHash` or `logIndex`) is a typed error, never an `unwrap()`.

use std::borrow::Cow;

use alloy_primitives::{Address, Bloom, B256};
use serde::{de::Error as _, Deserialize, Deserializer};

use crate::primitives::{BlockNumber, BlockRange, Log};

use super::wire_log::WireLog;

impl<'de> Deserialize<'de> for Log {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        WireLog::deserialize(deserializer)?.into_log()
    }
}

impl WireLog {
    /// The log, when every field a log of a block range has is there.
    pub(super) fn into_log<E: serde::de::Error>(self) -> Result<Log, E> {
        let pending = |field| {
            E::custom(format!(
                "log without {field} (a pending log in a block range query)"
            ))
        };
        Ok(Log {
            block_number: self.block_number.ok_or_else(|| pending("blockNumber"))?,
            block_hash: self.block_hash.ok_or_else(|| pending("blockHash"))?,
            transaction_hash: self
                .transaction_hash
                .ok_or_else(|| pending("transactionHash"))?,
            transaction_index: self
                .transaction_index
                .ok_or_else(|| pending("transactionIndex"))?,
            log_index: self.log_index.ok_or_else(|| pending("logIndex"))?,
            address: self.address.ok_or_else(|| E::missing_field("address"))?,
            topics: self.topics.ok_or_else(|| E::missing_field("topics"))?,
            data: self.data.ok_or_else(|| E::missing_field("data"))?,
            removed: self.removed,
            block_timestamp: self.block_timestamp,
        })
    }
}

/// The parts of a block header the indexer needs.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Header {
    /// Number.
    #[serde(deserialize_with = "quantity")]
    pub number: BlockNumber,
    /// Hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
    /// Unix timestamp.
    #[serde(deserialize_with = "quantity")]
    pub timestamp: u64,
    /// Bloom filter of the block's logs.
    pub logs_bloom: Bloom,
}

/// A block parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockTag {
    /// A number.
    Number(BlockNumber),
    /// `latest`.
    Latest,
    /// `safe` (the spec's getBlockByNumber refuses it; callers fall back to `finalized`).
    Safe,
    /// `finalized`.
    Finalized,
}

impl BlockTag {
    pub(crate) fn to_param(self) -> String {
        match self {
            BlockTag::Number(n) => format!("0x{n:x}"),
            BlockTag::Latest => "latest".into(),
            BlockTag::Safe => "safe".into(),
            BlockTag::Finalized => "finalized".into(),
        }
    }
}

/// Which blocks an `eth_getLogs` covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks {
    /// `fromBlock`/`toBlock`.
    Range(BlockRange),
    /// `blockHash`: one block, pinned by hash (immune to a reorg between the call and the answer).
    Hash(B256),
}

/// An `eth_getLogs` filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogFilter {
    /// Blocks.
    pub blocks: Blocks,
    /// Emitting contracts; none: any (a topic-only request).
    pub addresses: Vec<Address>,
    /// Alternatives for topic0; `None` matches any topic0 (needed for anonymous events).
    pub topic0: Option<Vec<B256>>,
    /// Alternatives for topics 1, 2 and 3 (an event's indexed parameters); `None` matches any.
    pub indexed: [Option<Vec<B256>>; 3],
}

impl LogFilter {
    /// The filter object as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::{json, Map, Value};
        let mut filter = Map::new();
        match self.blocks {
            Blocks::Range(range) => {
                filter.insert("fromBlock".into(), json!(format!("0x{:x}", range.start())));
                filter.insert("toBlock".into(), json!(format!("0x{:x}", range.end())));
            }
            Blocks::Hash(hash) => {
                filter.insert("blockHash".into(), json!(hash));
            }
        }
        match self.addresses.as_slice() {
            [] => {}
            [one] => {
                filter.insert("address".into(), json!(one));
            }
            many => {
                filter.insert("address".into(), json!(many));
            }
        }
        // spec: topics are positional OR lists, null where any value matches; trailing nulls are left out.
        let mut topics: Vec<Value> = std::iter::once(&self.topic0)
            .chain(&self.indexed)
            .map(|alternatives| json!(alternatives))
            .collect();
        while topics.last().is_some_and(Value::is_null) {
            topics.pop();
        }
        if !topics.is_empty() {
            filter.insert("topics".into(), Value::Array(topics));
        }
        Value::Object(filter)
    }
}

/// Parses a hex quantity (`0x1a`); the spec's encoding of numbers.
pub fn parse_quantity(s: &str) -> Result<u64, String> {
    parse_quantity_bytes(s.as_bytes())
}

/// [`parse_quantity`] of a string's raw bytes, as `wire_log` reads them.
pub(super) fn parse_quantity_bytes(raw: &[u8]) -> Result<u64, String> {
    let shown = || String::from_utf8_lossy(raw);
    let digits = raw
        .strip_prefix(b"0x")
        .ok_or_else(|| format!("quantity {:?} lacks 0x", shown()))?;
    if digits.is_empty() || digits.len() > 16 {
        return Err(format!("quantity {:?} is not a 64-bit hex number", shown()));
    }
    digits.iter().try_fold(0u64, |n, &c| {
        let digit = char::from(c)
            .to_digit(16)
            .ok_or_else(|| format!("quantity {:?}: invalid digit", shown()))?;
        Ok((n << 4) | u64::from(digit))
    })
}

pub(super) fn quantity<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    let s = Cow::<str>::deserialize(deserializer)?;
    parse_quantity(&s).map_err(D::Error::custom)
}

/// Deserializes a bare quantity result (`eth_blockNumber`, `eth_chainId`).
#[derive(Debug, Clone, Copy)]
pub struct Quantity(pub u64);

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        quantity(deserializer).map(Quantity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Topics are positional OR lists with null where any value matches, trailing nulls left out.
    #[test]
    fn a_log_filter_sends_its_topics_by_position() {
        let (t1, t2) = (B256::repeat_byte(1), B256::repeat_byte(2));
        let filter = |topic0: Option<Vec<B256>>, indexed: [Option<Vec<B256>>; 3]| {
            LogFilter {
                blocks: Blocks::Range(BlockRange::new(16, 17).unwrap()),
                addresses: vec![Address::repeat_byte(0xaa)],
                topic0,
                indexed,
            }
            .to_json()
        };
        let address = "0xaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
        assert_eq!(
            filter(None, Default::default()),
            serde_json::json!({"fromBlock": "0x10", "toBlock": "0x11", "address": address})
        );
        assert_eq!(
            filter(Some(vec![t1]), Default::default())["topics"],
            serde_json::json!([[t1]])
        );
        assert_eq!(
            filter(Some(vec![t1]), [None, Some(vec![t1, t2]), None])["topics"],
            serde_json::json!([[t1], null, [t1, t2]])
        );
        assert_eq!(
            filter(None, [None, None, Some(vec![t2])])["topics"],
            serde_json::json!([null, null, null, [t2]])
        );
    }

    #[test]
    fn parses_the_spec_log_object_exactly() {
        let json = r#"{"removed":false,"logIndex":"0x1","transactionIndex":"0x0",
            "transactionHash":"0x0101010101010101010101010101010101010101010101010101010101010101",
            "blockHash":"0x0202020202020202020202020202020202020202020202020202020202020202",
            "blockNumber":"0x10","address":"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48","data":"0x",
            "topics":["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"]}"#;
        let log: Log = serde_json::from_str(json).unwrap();
        assert_eq!(
            (log.block_number, log.log_index, log.transaction_index),
            (16, 1, 0)
        );
        assert_eq!(log.topics.len(), 1);
        assert!(log.data.is_empty() && !log.removed);
    }

    #[test]
    fn reads_block_timestamp_when_the_node_sends_it() {
        let with = |extra: &str| {
            format!(
                r#"{{"logIndex":"0x1","transactionIndex":"0x0",
                "transactionHash":"0x0101010101010101010101010101010101010101010101010101010101010101",
                "blockHash":"0x0202020202020202020202020202020202020202020202020202020202020202",
                "blockNumber":"0x10","address":"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48","data":"0x",
                "topics":[]{extra}}}"#
            )
        };
        let parse = |json: String| serde_json::from_str::<Log>(&json).map(|l| l.block_timestamp);
        assert_eq!(
            parse(with(r#","blockTimestamp":"0x6553f100""#)).unwrap(),
            Some(1_700_000_000)
        );
        assert_eq!(parse(with("")).unwrap(), None);
        assert_eq!(parse(with(r#","blockTimestamp":null"#)).unwrap(), None);
        assert!(parse(with(r#","blockTimestamp":"12""#)).is_err());
    }

    #[test]
    fn refuses_a_pending_log() {
        let json = r#"{"logIndex":null,"transactionIndex":null,"transactionHash":null,"blockHash":null,
            "blockNumber":null,"address":"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48","data":"0x","topics":[]}"#;
        let err = serde_json::from_str::<Log>(json).unwrap_err().to_string();
        assert!(err.contains("pending"), "{err}");
    }

    #[test]
    fn quantities_must_be_hex_with_prefix() {
        assert_eq!(parse_quantity("0x0"), Ok(0));
        assert_eq!(parse_quantity("0xffffffffffffffff"), Ok(u64::MAX));
        assert!(parse_quantity("12").is_err());
        assert!(parse_quantity("0x").is_err());
        assert!(parse_quantity("0x1ffffffffffffffff").is_err());
    }
}
