//! The log object (spec: "Log object") read from an answer's bytes: the hot path of every backfill, since a
//! 10,000-log answer is 7-9 MB of JSON.
//!
//! Serde's derive reads each field name and each hex string as `str`, which `serde_json` checks for valid
//! UTF-8 first, then hands to alloy's visitors. Here names and values are read as raw bytes
//! (`deserialize_bytes`: the string as it stands in the answer, escapes resolved, not checked for UTF-8),
//! names matched as bytes and hex decoded straight into the fixed-size values. What is accepted is what the
//! derive accepted: fields in any order, unknown fields ignored (real nodes send more than the spec shows),
//! `null` or a missing field for the positional ones (then refused as a pending log by the caller), hex with
//! or without `0x` in either case for hashes and data, `0x`-prefixed hex for quantities; a duplicate field
//! is an error.

use std::fmt;

use alloy_primitives::{hex, Address, Bytes, B256};
use bytes::BytesMut;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::types::parse_quantity_bytes;
use crate::primitives::Topics;

/// A log object's fields as they came, before the caller checks that the positional ones are there.
#[derive(Debug, Default)]
pub(super) struct WireLog {
    pub removed: bool,
    pub log_index: Option<u64>,
    pub transaction_index: Option<u64>,
    pub transaction_hash: Option<B256>,
    pub block_hash: Option<B256>,
    pub block_number: Option<u64>,
    pub address: Option<Address>,
    pub data: Option<Bytes>,
    pub topics: Option<Topics>,
    /// Not in the spec's log object, but sent by geth, reth, Erigon and most providers.
    pub block_timestamp: Option<u64>,
}

impl<'de> de::Deserialize<'de> for WireLog {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(LogVisitor { arena: None })
    }
}

/// A log object whose data is decoded into `DataArena` (the logs of one answer).
pub(super) struct LogSeed<'a>(pub &'a mut DataArena);

impl<'de> DeserializeSeed<'de> for LogSeed<'_> {
    type Value = WireLog;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<WireLog, D::Error> {
        deserializer.deserialize_map(LogVisitor {
            arena: Some(self.0),
        })
    }
}

/// Where the data of an answer's logs is decoded: chunks, each shared by the logs whose data it holds
/// (every log's `Bytes` a counted view of one), instead of one allocation per log, a million per million
/// logs. A chunk is freed with the last of its logs; the logs of one answer travel and are dropped
/// together (one range, one batch), so a chunk outlives its answer only as long as one of them is kept.
pub(super) struct DataArena {
    /// The size of a new chunk: an eighth of the answer's length (its data's hex is at most half of it, so
    /// an answer of small logs does not hold a large chunk), at most [`DataArena::MAX_CHUNK`].
    chunk: usize,
    /// The rest of the current chunk.
    free: BytesMut,
}

impl DataArena {
    /// Bounds what a chunk can hold that no log uses yet.
    const MAX_CHUNK: usize = 64 * 1024;

    /// For the logs of an answer of `answer_len` bytes.
    pub(super) fn new(answer_len: usize) -> Self {
        Self {
            chunk: (answer_len / 8).clamp(64, Self::MAX_CHUNK),
            free: BytesMut::new(),
        }
    }

    /// `raw`, hex with or without `0x`, decoded into the current chunk (a new one when it is full).
    fn decode(&mut self, raw: &[u8]) -> Result<Bytes, String> {
        let digits = raw.strip_prefix(b"0x").unwrap_or(raw);
        if digits.len() % 2 != 0 {
            return Err(format!("log data: {}", hex::FromHexError::OddLength));
        }
        let len = digits.len() / 2;
        if len == 0 {
            return Ok(Bytes::new());
        }
        if self.free.capacity() < len {
            self.free = BytesMut::with_capacity(len.max(self.chunk));
        }
        self.free.resize(len, 0);
        // Given `raw`, it strips the one prefix `hex::decode` would, so errors read the same.
        if let Err(e) = hex::decode_to_slice(raw, &mut self.free) {
            self.free.clear();
            return Err(format!("log data: {e}"));
        }
        Ok(Bytes::from(self.free.split().freeze()))
    }
}

struct LogVisitor<'a> {
    arena: Option<&'a mut DataArena>,
}

impl<'de> Visitor<'de> for LogVisitor<'_> {
    type Value = WireLog;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a log object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<WireLog, A::Error> {
        let mut log = WireLog::default();
        let mut seen = 0u16;
        while let Some(field) = map.next_key_seed(Read(FieldName))? {
            let Some(field) = field else {
                map.next_value::<IgnoredAny>()?;
                continue;
            };
            let bit = 1u16 << field as u16;
            if seen & bit != 0 {
                return Err(de::Error::custom(format_args!(
                    "duplicate field `{}`",
                    field.name()
                )));
            }
            seen |= bit;
            match field {
                Field::Removed => log.removed = map.next_value()?,
                Field::LogIndex => log.log_index = map.next_value_seed(Nullable(Quantity))?,
                Field::TransactionIndex => {
                    log.transaction_index = map.next_value_seed(Nullable(Quantity))?;
                }
                Field::TransactionHash => {
                    log.transaction_hash =
                        map.next_value_seed(Nullable(Fixed::<32>))?.map(B256::from);
                }
                Field::BlockHash => {
                    log.block_hash = map.next_value_seed(Nullable(Fixed::<32>))?.map(B256::from);
                }
                Field::BlockNumber => log.block_number = map.next_value_seed(Nullable(Quantity))?,
                Field::Address => {
                    log.address = Some(map.next_value_seed(Read(Fixed::<20>))?.into());
                }
                Field::Data => {
                    log.data = Some(match self.arena.as_deref_mut() {
                        Some(arena) => map.next_value_seed(Read(InArena(arena)))?,
                        None => map.next_value_seed(Read(Data))?,
                    });
                }
                Field::Topics => log.topics = Some(map.next_value_seed(TopicsSeed)?),
                Field::BlockTimestamp => {
                    log.block_timestamp = map.next_value_seed(Nullable(Quantity))?;
                }
            }
        }
        // Which fields must be there is the caller's to say (`types.rs`), with the rest of its checks.
        Ok(log)
    }
}

#[derive(Debug, Clone, Copy)]
enum Field {
    Removed,
    LogIndex,
    TransactionIndex,
    TransactionHash,
    BlockHash,
    BlockNumber,
    Address,
    Data,
    Topics,
    BlockTimestamp,
}

impl Field {
    const ALL: [Field; 10] = [
        Field::Removed,
        Field::LogIndex,
        Field::TransactionIndex,
        Field::TransactionHash,
        Field::BlockHash,
        Field::BlockNumber,
        Field::Address,
        Field::Data,
        Field::Topics,
        Field::BlockTimestamp,
    ];

    fn name(self) -> &'static str {
        match self {
            Field::Removed => "removed",
            Field::LogIndex => "logIndex",
            Field::TransactionIndex => "transactionIndex",
            Field::TransactionHash => "transactionHash",
            Field::BlockHash => "blockHash",
            Field::BlockNumber => "blockNumber",
            Field::Address => "address",
            Field::Data => "data",
            Field::Topics => "topics",
            Field::BlockTimestamp => "blockTimestamp",
        }
    }
}

/// What a string's raw bytes become.
trait FromRaw {
    type Value;
    const EXPECTING: &'static str;
    fn parse(self, raw: &[u8]) -> Result<Self::Value, String>;
}

/// A field name: `None` for one the indexer does not read.
#[derive(Clone, Copy)]
struct FieldName;

impl FromRaw for FieldName {
    type Value = Option<Field>;
    const EXPECTING: &'static str = "a field name";
    fn parse(self, raw: &[u8]) -> Result<Option<Field>, String> {
        Ok(Field::ALL.into_iter().find(|f| f.name().as_bytes() == raw))
    }
}

/// A `0x`-prefixed hex quantity.
#[derive(Clone, Copy)]
struct Quantity;

impl FromRaw for Quantity {
    type Value = u64;
    const EXPECTING: &'static str = "a hex quantity";
    fn parse(self, raw: &[u8]) -> Result<u64, String> {
        parse_quantity_bytes(raw)
    }
}

/// `N` bytes in hex: a hash or topic (32), an address (20).
#[derive(Clone, Copy)]
struct Fixed<const N: usize>;

impl<const N: usize> FromRaw for Fixed<N> {
    type Value = [u8; N];
    const EXPECTING: &'static str = "a hash, topic or address in hex";
    fn parse(self, raw: &[u8]) -> Result<[u8; N], String> {
        hex::decode_to_array(raw).map_err(|e| format!("{N} bytes in hex: {e}"))
    }
}

/// Bytes of any length in hex.
#[derive(Clone, Copy)]
struct Data;

impl FromRaw for Data {
    type Value = Bytes;
    const EXPECTING: &'static str = "bytes in hex";
    fn parse(self, raw: &[u8]) -> Result<Bytes, String> {
        hex::decode(raw)
            .map(Bytes::from)
            .map_err(|e| format!("log data: {e}"))
    }
}

/// Bytes of any length in hex, decoded into an answer's [`DataArena`].
struct InArena<'a>(&'a mut DataArena);

impl FromRaw for InArena<'_> {
    type Value = Bytes;
    const EXPECTING: &'static str = "bytes in hex";
    fn parse(self, raw: &[u8]) -> Result<Bytes, String> {
        self.0.decode(raw)
    }
}

/// Reads a JSON string as raw bytes and converts them with `T`.
#[derive(Clone, Copy)]
struct Read<T>(T);

impl<'de, T: FromRaw> DeserializeSeed<'de> for Read<T> {
    type Value = T::Value;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<T::Value, D::Error> {
        deserializer.deserialize_bytes(self)
    }
}

impl<T: FromRaw> Visitor<'_> for Read<T> {
    type Value = T::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_bytes<E: de::Error>(self, raw: &[u8]) -> Result<T::Value, E> {
        self.0.parse(raw).map_err(E::custom)
    }

    // Formats that hand strings over as `str` (a `serde_json::Value`, for one).
    fn visit_str<E: de::Error>(self, text: &str) -> Result<T::Value, E> {
        self.visit_bytes(text.as_bytes())
    }
}

/// `null`, or what `T` reads.
#[derive(Clone, Copy)]
struct Nullable<T>(T);

impl<'de, T: FromRaw> DeserializeSeed<'de> for Nullable<T> {
    type Value = Option<T::Value>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, T: FromRaw> Visitor<'de> for Nullable<T> {
    type Value = Option<T::Value>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "null or {}", T::EXPECTING)
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        Read(self.0).deserialize(deserializer).map(Some)
    }
}

/// The `topics` array.
struct TopicsSeed;

impl<'de> DeserializeSeed<'de> for TopicsSeed {
    type Value = Topics;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Topics, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TopicsSeed {
    type Value = Topics;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of at most 4 topics")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Topics, A::Error> {
        let mut topics = Topics::default();
        let mut n = 0;
        while let Some(topic) = seq.next_element_seed(Read(Fixed::<32>))? {
            n += 1;
            if !topics.push(B256::from(topic)) {
                // Read on to say how many: the log is refused whole.
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                return Err(de::Error::custom(format!(
                    "log with {n} topics (at most {})",
                    Topics::MAX
                )));
            }
        }
        Ok(topics)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use crate::primitives::Log;

    fn hex_of(bytes: &[u8], upper: bool, prefix: bool) -> String {
        let digits = if upper {
            alloy_primitives::hex::encode_upper(bytes)
        } else {
            alloy_primitives::hex::encode(bytes)
        };
        if prefix {
            format!("0x{digits}")
        } else {
            digits
        }
    }

    fn spec_log() -> Value {
        json!({
            "removed": false, "logIndex": "0x1", "transactionIndex": "0x0",
            "transactionHash": format!("0x{}", "01".repeat(32)),
            "blockHash": format!("0x{}", "02".repeat(32)),
            "blockNumber": "0x10", "address": "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
            "data": "0x",
            "topics": ["0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"]
        })
    }

    fn parse(value: &Value) -> Result<Log, String> {
        serde_json::from_slice::<Log>(value.to_string().as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_duplicate_field_is_an_error() {
        let text = spec_log()
            .to_string()
            .replacen('{', r#"{"blockNumber":"0x11","#, 1);
        let err = serde_json::from_str::<Log>(&text).unwrap_err().to_string();
        assert!(err.contains("duplicate field `blockNumber`"), "{err}");
    }

    #[test]
    fn a_missing_or_malformed_field_is_named() {
        for field in ["address", "data", "topics"] {
            let mut log = spec_log();
            log.as_object_mut().unwrap().remove(field);
            let err = parse(&log).unwrap_err();
            assert!(err.contains(&format!("missing field `{field}`")), "{err}");
        }
        let mut log = spec_log();
        log["address"] = json!("0xa0b8");
        assert!(parse(&log).unwrap_err().contains("20 bytes in hex"));
        log = spec_log();
        log["logIndex"] = json!("0x1g");
        assert!(parse(&log).unwrap_err().contains("invalid digit"));
        log = spec_log();
        log["topics"] = json!(["0x12"]);
        assert!(parse(&log).unwrap_err().contains("32 bytes in hex"));
        log = spec_log();
        log["blockNumber"] = json!(16);
        assert!(parse(&log).is_err(), "a quantity is a hex string");
    }

    #[test]
    fn a_log_of_more_than_four_topics_is_refused_and_four_are_kept() {
        let topic = |n: u8| format!("0x{}", format!("{n:02x}").repeat(32));
        let mut log = spec_log();
        log["topics"] = json!((1..=5).map(topic).collect::<Vec<_>>());
        let err = parse(&log).unwrap_err();
        assert!(err.contains("log with 5 topics (at most 4)"), "{err}");
        log["topics"] = json!((1..=4).map(topic).collect::<Vec<_>>());
        let topics = parse(&log).unwrap().topics;
        assert_eq!(topics.len(), 4);
        assert_eq!(topics[3], alloy_primitives::B256::repeat_byte(4));
        log["topics"] = json!([]);
        assert!(parse(&log).unwrap().topics.is_empty());
    }

    #[test]
    fn escaped_strings_and_values_already_parsed_read_the_same() {
        let log = spec_log();
        let escaped = log
            .to_string()
            .replace(r#""0x10""#, r#""\u0030x10""#)
            .replace(r#""address""#, r#""addr\u0065ss""#);
        assert!(escaped.contains(r"\u0030x10") && escaped.contains(r"addr\u0065ss"));
        let from_escaped = serde_json::from_str::<Log>(&escaped).unwrap();
        assert_eq!(from_escaped, parse(&log).unwrap());
        assert_eq!(
            serde_json::from_value::<Log>(log.clone()).unwrap(),
            from_escaped
        );
    }

    #[test]
    fn removed_is_read() {
        let mut log = spec_log();
        log["removed"] = json!(true);
        assert!(parse(&log).unwrap().removed);
    }

    proptest! {
        /// Whatever the field order, the case of the hex, the `0x` of hashes and data, and the unknown
        /// fields a node adds, the log read is the log written.
        #[test]
        fn a_log_object_reads_back_exactly(
            block_number in any::<u64>(),
            log_index in any::<u64>(),
            transaction_index in any::<u64>(),
            hashes in any::<([u8; 32], [u8; 32])>(),
            address in any::<[u8; 20]>(),
            topics in proptest::collection::vec(any::<[u8; 32]>(), 0..=4),
            data in proptest::collection::vec(any::<u8>(), 0..200),
            timestamp in proptest::option::of(any::<u64>()),
            removed in any::<bool>(),
            upper in any::<bool>(),
            prefix in any::<bool>(),
            extra in proptest::collection::vec((0usize..4, "[a-zA-Z]{1,12}"), 0..4),
            reversed in any::<bool>(),
        ) {
            let hex = |bytes: &[u8]| hex_of(bytes, upper, prefix);
            let mut fields: Vec<(String, Value)> = vec![
                ("removed".into(), json!(removed)),
                ("logIndex".into(), json!(format!("{log_index:#x}"))),
                ("transactionIndex".into(), json!(format!("{transaction_index:#x}"))),
                ("transactionHash".into(), json!(hex(&hashes.0))),
                ("blockHash".into(), json!(hex(&hashes.1))),
                ("blockNumber".into(), json!(format!("{block_number:#x}"))),
                ("address".into(), json!(hex(&address))),
                ("data".into(), json!(hex(&data))),
                ("topics".into(), Value::Array(topics.iter().map(|t| json!(hex(t))).collect())),
                ("blockTimestamp".into(), timestamp.map_or(Value::Null, |t| json!(format!("{t:#x}")))),
            ];
            for (kind, name) in extra {
                let value = match kind {
                    0 => json!({"nested": [1, {"blockNumber": "0x1"}]}),
                    1 => json!([null, true, "0xzz"]),
                    2 => json!(-1.5e300),
                    _ => json!("text with \"quotes\" and \\ \u{e9}"),
                };
                fields.push((format!("x{name}"), value));
            }
            if reversed {
                fields.reverse();
            }
            let body: Vec<String> = fields
                .iter()
                .map(|(name, value)| format!("{} : {value}", json!(name)))
                .collect();
            let text = format!("{{ {} }}", body.join(" ,\n "));
            let log: Log = serde_json::from_str(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
            // An answer of logs reads its data into a shared chunk: the same log.
            let answer = format!(r#"{{"jsonrpc":"2.0","id":1,"result":[{text}, {text}]}}"#);
            let read = super::super::answer::parse_logs("eth_getLogs", answer.as_bytes())
                .map_err(|e| TestCaseError::fail(format!("{e}: {answer}")))?;
            prop_assert_eq!(&read, &vec![log.clone(), log.clone()]);
            prop_assert_eq!(log, Log {
                block_number,
                block_hash: hashes.1.into(),
                transaction_hash: hashes.0.into(),
                transaction_index,
                log_index,
                address: address.into(),
                topics: topics.into_iter().map(Into::into).collect(),
                data: data.into(),
                removed,
                block_timestamp: timestamp,
            });
        }
    }
}
