//! The shape of `config.toml` as serde types: every section and key the file may hold, each value with its
//! span so a message can name its line.
//!
//! Deserializing these never fails on a value: leaves are [`Leaf`]s (the value as written, any TOML type)
//! and nested tables and arrays are [`TableOr`] / [`ArrayOr`], which keep a wrong type as its name instead
//! of stopping. So one pass reads the whole file, and the validation pass (`config::sections`,
//! `config::contracts`) types every value and reports every problem at once. Unknown keys are what serde
//! ignores, collected by `serde_ignored` (`config::unknown`).
//!
//! [`SECTIONS`] lists every table with the keys its type declares, from the derives themselves: the
//! unknown-key hints and the test that checks `docs/config.md` read it.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use toml::{Spanned, Value};

/// One value as written, with its span; typed by the validation pass.
pub(super) type Leaf = Spanned<Value>;

/// The whole file.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawConfig {
    /// `[node]`: where the JSON-RPC service is and how hard to use it (the one chain, `default`).
    pub node: Option<Spanned<TableOr<RawNode>>>,
    /// `[chains.NAME]`: several chains, each with the keys of `[node]` and its own overrides of `[sync]`.
    pub chains: Option<Spanned<TableOr<RawChains>>>,
    /// `[database]`: where the rows go.
    pub database: Option<Spanned<TableOr<RawDatabase>>>,
    /// `[sync]`: ranges, batches, finality and what is stored besides logs.
    pub sync: Option<Spanned<TableOr<RawSync>>>,
    /// `[[contracts]]`: what is indexed.
    pub contracts: Option<Spanned<ArrayOr<Spanned<TableOr<RawContract>>>>>,
    /// `[metrics]`: the Prometheus and health endpoint.
    pub metrics: Option<Spanned<TableOr<RawMetrics>>>,
}

/// `[chains]`: chain name -> its table.
pub(super) type RawChains = BTreeMap<String, Spanned<TableOr<RawNode>>>;

/// `[node]` or one `[chains.NAME]`: one provider (`url`), or the defaults of the `providers` entries. The
/// keys from `chain_id` on are a chain's own ([`CHAIN_KEYS`]): refused in `[node]`.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawNode {
    /// String, required without `providers`, refused with it: `sim://...`, `http(s)://...` or `ws(s)://...`.
    pub url: Option<Leaf>,
    /// String: `ws(s)://...`; refused with `providers`.
    pub ws_url: Option<Leaf>,
    /// String: `"http"` or `"ws"`.
    pub transport: Option<Leaf>,
    /// Integer, at least 1.
    pub requests_per_second: Option<Leaf>,
    /// Integer, at least 1.
    pub credits_per_second: Option<Leaf>,
    /// Inline table: method name (or `default`) -> integer, at least 1.
    pub method_credits: Option<Spanned<TableOr<RawMethodCredits>>>,
    /// Integer, at least 1.
    pub max_concurrency: Option<Leaf>,
    /// Duration string.
    pub request_timeout: Option<Leaf>,
    /// Integer, 0 or more.
    pub max_retries: Option<Leaf>,
    /// Duration string, at most `max_backoff`.
    pub initial_backoff: Option<Leaf>,
    /// Duration string.
    pub max_backoff: Option<Leaf>,
    /// Integer, at least 1.
    pub max_response_bytes: Option<Leaf>,
    /// `[[node.providers]]`: several providers of the chain, at least one.
    pub providers: Option<Spanned<ArrayOr<Spanned<TableOr<RawProvider>>>>>,
    /// Integer, at least 1: the `eth_chainId` the chain's providers must answer.
    pub chain_id: Option<Leaf>,
    /// Like `sync.finality`, for this chain.
    pub finality: Option<Leaf>,
    /// Like `sync.max_reorg_depth`, for this chain.
    pub max_reorg_depth: Option<Leaf>,
    /// Like `sync.poll_interval`, for this chain.
    pub poll_interval: Option<Leaf>,
    /// Like `sync.start_block`, for this chain's contracts without their own.
    pub start_block: Option<Leaf>,
}

/// The keys of [`RawNode`] only a `[chains.NAME]` table may hold.
pub(super) const CHAIN_KEYS: [&str; 5] = [
    "chain_id",
    "finality",
    "max_reorg_depth",
    "poll_interval",
    "start_block",
];

/// One `[[node.providers]]` entry: the keys of `[node]` (each defaulting to `[node]`'s) and `name`.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawProvider {
    /// String: unique among the providers; default the URL's host.
    pub name: Option<Leaf>,
    /// String, required: `sim://...`, `http(s)://...` or `ws(s)://...`.
    pub url: Option<Leaf>,
    /// String: `ws(s)://...`.
    pub ws_url: Option<Leaf>,
    /// String: `"http"` or `"ws"`.
    pub transport: Option<Leaf>,
    /// Integer, at least 1.
    pub requests_per_second: Option<Leaf>,
    /// Integer, at least 1.
    pub credits_per_second: Option<Leaf>,
    /// Inline table: method name (or `default`) -> integer, at least 1.
    pub method_credits: Option<Spanned<TableOr<RawMethodCredits>>>,
    /// Integer, at least 1.
    pub max_concurrency: Option<Leaf>,
    /// Duration string.
    pub request_timeout: Option<Leaf>,
    /// Integer, 0 or more.
    pub max_retries: Option<Leaf>,
    /// Duration string, at most `max_backoff`.
    pub initial_backoff: Option<Leaf>,
    /// Duration string.
    pub max_backoff: Option<Leaf>,
    /// Integer, at least 1.
    pub max_response_bytes: Option<Leaf>,
}

/// `method_credits`: method name (or `default`) -> credits per call.
pub(super) type RawMethodCredits = BTreeMap<String, Leaf>;

/// `[database]`.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawDatabase {
    /// String, required: `sqlite://...`, `sqlite::memory:` or `postgres://...`.
    pub url: Option<Leaf>,
    /// String: a plain identifier (Postgres only).
    pub schema: Option<Leaf>,
    /// Integer, 0 or more.
    pub max_retries: Option<Leaf>,
}

/// `[sync]`.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawSync {
    /// Integer, 0 or more.
    pub start_block: Option<Leaf>,
    /// `"finalized"`, or confirmations as an integer or a string of digits.
    pub finality: Option<Leaf>,
    /// Integer, at least 1, at most `max_block_range`.
    pub initial_block_range: Option<Leaf>,
    /// Integer, at least 1.
    pub max_block_range: Option<Leaf>,
    /// Integer, at least 1.
    pub target_logs_per_request: Option<Leaf>,
    /// Integer, at least 1.
    pub max_batch_logs: Option<Leaf>,
    /// Integer, at least 1.
    pub max_queued_batches: Option<Leaf>,
    /// Integer, at least 1.
    pub max_reorg_depth: Option<Leaf>,
    /// Integer, at least 1.
    pub defer_indexes_min_blocks: Option<Leaf>,
    /// Duration string.
    pub poll_interval: Option<Leaf>,
    /// Duration string.
    pub shutdown_grace: Option<Leaf>,
    /// Boolean.
    pub strict: Option<Leaf>,
    /// Boolean.
    pub block_timestamps: Option<Leaf>,
    /// Boolean.
    pub transactions: Option<Leaf>,
    /// Boolean; needs `transactions`.
    pub transaction_receipts: Option<Leaf>,
}

/// `[metrics]`.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawMetrics {
    /// String, required: `ip:port`.
    pub addr: Option<Leaf>,
    /// Duration string.
    pub max_stall: Option<Leaf>,
}

/// One `[[contracts]]` entry.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawContract {
    /// String, required; snake-cased.
    pub name: Option<Leaf>,
    /// String: the `[chains.NAME]` it is on; required when there are several.
    pub chain: Option<Leaf>,
    /// String: one address.
    pub address: Option<Leaf>,
    /// Array of strings: several addresses.
    pub addresses: Option<Spanned<ArrayOr<Leaf>>>,
    /// String: a JSON ABI file, relative to the config file.
    pub abi: Option<Leaf>,
    /// Array of strings: event signatures, or names and signatures of the ABI's events.
    pub events: Option<Spanned<ArrayOr<Leaf>>>,
    /// Integer, 0 or more.
    pub start_block: Option<Leaf>,
    /// Inline table: the factory whose events announce this contract's addresses.
    pub factory: Option<Spanned<TableOr<RawFactory>>>,
    /// Inline table: `{ Event = { parameter = [values] } }`.
    pub filters: Option<Spanned<TableOr<RawFilters>>>,
}

/// `filters` of a contract: event name -> its parameters' wanted values.
pub(super) type RawFilters = BTreeMap<String, Spanned<TableOr<RawEventFilter>>>;

/// One event's filter: parameter name -> the values a log may hold there.
pub(super) type RawEventFilter = BTreeMap<String, Spanned<ArrayOr<Leaf>>>;

/// `factory = { contract, event, parameter }` of a contract.
#[derive(Debug, Default, serde::Deserialize)]
pub(super) struct RawFactory {
    /// String, required: the factory's `[[contracts]]` name.
    pub contract: Option<Leaf>,
    /// String, required: the event's name or signature.
    pub event: Option<Leaf>,
    /// String, required: the event's parameter holding the child's address.
    pub parameter: Option<Leaf>,
}

/// Every table of the file, as the path `config::unknown` builds (`[]` for an array's element, `*` for a
/// chain's name), with the keys its serde type declares, in declaration order.
pub(super) fn sections() -> [(&'static str, &'static [&'static str]); 10] {
    let node = keys_of::<RawNode>();
    // `[node]`'s keys are a chain's but its own (declared last).
    let node_keys = &node[..node.len() - CHAIN_KEYS.len()];
    [
        ("", keys_of::<RawConfig>()),
        ("node", node_keys),
        ("node.providers[]", keys_of::<RawProvider>()),
        ("chains.*", node),
        ("chains.*.providers[]", keys_of::<RawProvider>()),
        ("database", keys_of::<RawDatabase>()),
        ("sync", keys_of::<RawSync>()),
        ("contracts[]", keys_of::<RawContract>()),
        ("contracts[].factory", keys_of::<RawFactory>()),
        ("metrics", keys_of::<RawMetrics>()),
    ]
}

/// The field names a derived `Deserialize` struct declares: what it passes to `deserialize_struct`.
fn keys_of<T: for<'de> Deserialize<'de>>() -> &'static [&'static str] {
    struct Probe<'a>(&'a std::cell::Cell<&'static [&'static str]>);
    impl<'de> Deserializer<'de> for Probe<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            self.0.set(fields);
            Err(de::Error::custom("probed"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf option
            unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier ignored_any
        }
    }
    let fields = std::cell::Cell::new(&[][..]);
    let _ = T::deserialize(Probe(&fields));
    fields.get()
}

/// The TOML type name of what a visitor was given, as `toml::Value::type_str` names it.
const STRING: &str = "string";

/// A table as declared (`T`), or the type name of what was written instead.
#[derive(Debug)]
pub(super) enum TableOr<T> {
    /// A table, read as `T`.
    Table(T),
    /// Something else: its TOML type name.
    Other(&'static str),
}

/// An array of `T`, or the type name of what was written instead.
#[derive(Debug)]
pub(super) enum ArrayOr<T> {
    /// An array.
    Array(Vec<T>),
    /// Something else: its TOML type name.
    Other(&'static str),
}

/// A scalar given where a table or an array goes: kept as its type name (both wrappers have `Other`).
macro_rules! scalars_are_other {
    () => {
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Self::Value::Other(STRING))
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Self::Value::Other("integer"))
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Self::Value::Other("integer"))
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Self::Value::Other("float"))
        }
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Self::Value::Other("boolean"))
        }
    };
}

struct TableVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for TableVisitor<T> {
    type Value = TableOr<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a table")
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(TableOr::Table)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // Drained as values, not `IgnoredAny`: `serde_ignored` would report each item as an unknown key.
        while seq.next_element::<Value>()?.is_some() {}
        Ok(TableOr::Other("array"))
    }
    scalars_are_other!();
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for TableOr<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(TableVisitor(PhantomData))
    }
}

struct ArrayVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ArrayVisitor<T> {
    type Value = ArrayOr<T>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(ArrayOr::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<String, Value>()?.is_some() {}
        Ok(ArrayOr::Other("table"))
    }
    scalars_are_other!();
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for ArrayOr<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ArrayVisitor(PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chains_own_keys_are_the_last_of_the_node_table() {
        let node = keys_of::<RawNode>();
        assert_eq!(&node[node.len() - CHAIN_KEYS.len()..], &CHAIN_KEYS[..]);
    }
}
