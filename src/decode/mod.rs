//! ABI -> typed rows: the column layout of an event's table and the decoding of one log into it. Pure: no I/O,
//! no tokio, no sqlx, no knowledge of backends beyond the abstract [`ColumnKind`].
//!
//! # Columns
//!
//! An event's table has one column per parameter, in ABI order (indexed and non-indexed interleaved as
//! declared). A column's name is:
//!
//! 1. the parameter's name in [`snake_case`]; an unnamed parameter is `arg<i>`, `i` its position (from 0);
//!    a name that would start with a digit gets a leading `_`;
//! 2. with a `_` suffix when that is one of the fixed columns (`id`, `block_number`, `block_hash`,
//!    `transaction_hash`, `transaction_index`, `log_index`, `address`), an SQL keyword of SQLite or a reserved
//!    word of Postgres, or a system column of either (`rowid`, `oid`, `ctid`, ...): `from` -> `from_`,
//!    `to` -> `to_`, `address` -> `address_`;
//! 3. when an earlier column already has that name, `_2`, `_3`, ... appended (to the name without its
//!    trailing `_`): `a`, `a` -> `a`, `a_2`; `from`, `From` -> `from_`, `from_2`.
//!
//! # Kinds and values
//!
//! | ABI type | [`ColumnKind`] | [`Value`] |
//! |---|---|---|
//! | `uint8`..`uint56`, `int8`..`int64` | `Int64` | `Int` |
//! | wider integers (`uint64` included) | `BigInt` | `BigInt`: exact decimal, `-` for negatives |
//! | `address` | `Address` | `Text`: `0x` + 40 lowercase hex (not checksummed) |
//! | `bytes1`..`bytes32`, `function` | `FixedBytes` | `Text`: `0x` + lowercase hex |
//! | `bool` | `Bool` | `Bool` |
//! | `bytes` | `Bytes` | `Bytes` |
//! | `string` | `Text` | `Text` |
//! | arrays, fixed arrays, tuples | `Json` | `Json`, compact |
//! | indexed `string`, `bytes`, array or tuple | `TopicHash` | `Text`: the topic, `0x` + 64 hex |
//!
//! JSON values: integers are decimal strings (JSON numbers lose precision above 2^53), addresses and bytes
//! are lowercase `0x` hex strings, strings are JSON strings, bools JSON bools, tuples and arrays JSON arrays.
//!
//! A `string` whose bytes are not valid UTF-8 decodes lossily (each invalid sequence becomes U+FFFD), as
//! alloy decodes it: the typed table is for querying; the raw `logs` table keeps the exact bytes.
//!
//! Integers narrower than 256 bits must be properly padded (no dirty high bits, sign-extended when
//! signed); otherwise the log is a [`DecodeError::Mismatch`]. Addresses and bools are not checked that way.
//! When every non-indexed parameter is static (no `string`, `bytes`, dynamic array, or tuple or fixed array
//! holding one), the data must be exactly as long as they are encoded: a log with bytes over, or short of
//! them, is a [`DecodeError::Mismatch`] too.
//!
//! # Which event a log is
//!
//! A log is offered to the configured events of its contract in their configured order ([`Offer`]): a named
//! event takes it by topic0 and topic count; an anonymous event, having no topic0, only by its exact shape
//! (see [`Claim`]), and the first anonymous event that takes a log is the only one that does.

mod names;
mod offer;
mod value;
mod words;

pub use offer::Offer;
pub use value::{Integer, Word, MAX_DECIMAL_LEN};

/// A decoded log's values, one per parameter column, held inline up to six (`Transfer` has three,
/// Uniswap's `Swap` six): a typed row costs no allocation of its own.
pub type Values = smallvec::SmallVec<[Value; VALUES_INLINE]>;

/// Parameters a [`Values`] holds without allocating.
pub const VALUES_INLINE: usize = 6;

use alloy_dyn_abi::{DynSolEvent, DynSolType, Specifier};
use alloy_json_abi::Event;
use alloy_primitives::B256;

/// How a parameter is stored; each backend maps a kind to its own SQL type (see `docs/schema.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// `uint8..uint56`, `int8..int64`: fits in an i64 (SQLite INTEGER, Postgres NUMERIC(78,0) too).
    Int64,
    /// Wider integers: decimal text in SQLite, NUMERIC(78,0) in Postgres.
    BigInt,
    /// `address`: `0x` + 40 lowercase hex.
    Address,
    /// `bytesN`: `0x` + lowercase hex.
    FixedBytes,
    /// `bool`.
    Bool,
    /// `bytes`: raw bytes (BLOB / BYTEA).
    Bytes,
    /// `string`.
    Text,
    /// Arrays and tuples: JSON text.
    Json,
    /// An indexed dynamic parameter (`string`, `bytes`, arrays, tuples): its 32-byte topic, `0x` + 64 hex.
    TopicHash,
}

/// One parameter column of an event table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Column {
    /// Column name: snake case; reserved words and fixed column names get a `_` suffix; unnamed -> `arg<i>`.
    pub name: String,
    /// The parameter's name in the ABI ("" when unnamed).
    pub param: String,
    /// Solidity type as in the ABI, e.g. `uint256`, `(address,uint256)[]`.
    pub sol_type: String,
    /// Storage kind.
    pub kind: ColumnKind,
}

/// One decoded value, ready for any backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// [`ColumnKind::Int64`].
    Int(i64),
    /// [`ColumnKind::BigInt`]: written in decimal, `-` for negatives.
    BigInt(Integer),
    /// [`ColumnKind::Text`]; sinks also take it for the hex kinds, as `0x` + lowercase hex.
    Text(String),
    /// [`ColumnKind::Address`], [`ColumnKind::FixedBytes`], [`ColumnKind::TopicHash`]: the bytes, which
    /// the sinks write as `0x` + lowercase hex straight into their buffers (no string per value).
    Hex(Word),
    /// [`ColumnKind::Bool`].
    Bool(bool),
    /// [`ColumnKind::Bytes`].
    Bytes(Vec<u8>),
    /// [`ColumnKind::Json`]: integers as decimal strings, bytes/addresses as hex strings, tuples as arrays.
    Json(String),
}

/// Why a log did not decode.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The event cannot be resolved into a decoder (bad type string).
    #[error("event {event}: {reason}")]
    Resolve {
        /// Event signature.
        event: String,
        /// Why.
        reason: String,
    },
    /// The log's topics or data do not fit the event.
    #[error("log does not decode as {event}: {reason}")]
    Mismatch {
        /// Event signature.
        event: String,
        /// Why.
        reason: String,
    },
}

/// Whether a log may belong to an event ([`EventDecoder::claim`]).
///
/// An anonymous event has no topic0, so any log of its contract with its topic count could be one. A log
/// whose topic0 is the selector of a non-anonymous event of the same contract (configured or only in the
/// ABI) is that event's and never an anonymous one's; an anonymous event takes the remaining logs of its
/// exact shape: its topic count, data as long as its parameters when they are static, and data that decodes.
/// Of several anonymous events a log fits, the first configured takes it ([`Offer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Not this event.
    No,
    /// This named event: topic0 and topic count match. A log that then does not decode is malformed.
    Named,
    /// Possibly this anonymous event: it is the event's only if its topics and data decode.
    Anonymous,
}

/// Decodes logs of one event into rows of its table.
#[derive(Debug, Clone)]
pub struct EventDecoder {
    /// `Name(type,...)`: what errors name.
    signature: String,
    /// Resolved once; decodes topics and data.
    resolved: DynSolEvent,
    /// One per parameter, ABI order.
    columns: Vec<Column>,
    /// Where each column's value is in a decoded log, parallel to `columns`.
    slots: Vec<Slot>,
    /// The fast path, for an event whose every parameter is one word ([`words`]).
    words: Option<words::Words>,
    /// The exact length of a log's data when every non-indexed parameter is static; `None` otherwise.
    data_len: Option<usize>,
}

/// Where a parameter's value is: alloy returns indexed and body values in two lists.
#[derive(Debug, Clone, Copy)]
enum Slot {
    /// `indexed[i]`.
    Indexed(usize),
    /// `body[i]`.
    Body(usize),
}

impl EventDecoder {
    /// Resolves an event once.
    ///
    /// # Errors
    /// [`DecodeError::Resolve`] when a parameter type does not resolve, or the event has more than 4 topics.
    pub fn new(event: &Event) -> Result<Self, DecodeError> {
        let signature = event.signature();
        let resolve_error = |reason: String| DecodeError::Resolve {
            event: signature.clone(),
            reason,
        };
        let resolved: DynSolEvent = event
            .resolve()
            .map_err(|err| resolve_error(err.to_string()))?;
        let names = names::column_names(event.inputs.iter().map(|param| param.name.as_str()));
        let mut columns = Vec::with_capacity(event.inputs.len());
        let mut slots = Vec::with_capacity(event.inputs.len());
        let mut params = Vec::with_capacity(event.inputs.len());
        let (mut n_indexed, mut n_body) = (0, 0);
        for (param, name) in event.inputs.iter().zip(names) {
            let ty: DynSolType = param
                .resolve()
                .map_err(|err| resolve_error(format!("parameter {:?}: {err}", param.name)))?;
            if param.indexed {
                slots.push(Slot::Indexed(n_indexed));
                n_indexed += 1;
            } else {
                slots.push(Slot::Body(n_body));
                n_body += 1;
            }
            let kind = value::column_kind(&ty, param.indexed);
            columns.push(Column {
                name,
                param: param.name.clone(),
                sol_type: param.selector_type().into_owned(),
                kind,
            });
            params.push((ty, param.indexed, kind));
        }
        let words = words::Words::new(&params, resolved.topic_0());
        let data_len = static_len(resolved.body());
        Ok(Self {
            signature,
            resolved,
            columns,
            slots,
            words,
            data_len,
        })
    }

    /// The event's signature, e.g. `Transfer(address,address,uint256)`.
    pub fn signature(&self) -> &str {
        &self.signature
    }

    /// `topic0` for a non-anonymous event, `None` for an anonymous one.
    pub fn selector(&self) -> Option<B256> {
        self.resolved.topic_0()
    }

    /// Number of topics a matching log has (indexed params, plus one unless anonymous).
    pub fn topic_count(&self) -> usize {
        self.resolved.indexed().len() + usize::from(!self.resolved.is_anonymous())
    }

    /// Whether a log with these topics is this event: topic0 equal, or (anonymous) the topic count equal.
    ///
    /// The topic count must be equal in both cases: ERC-20 and ERC-721 `Transfer` share topic0 and differ
    /// only in how many parameters are indexed.
    pub fn matches(&self, topics: &[B256]) -> bool {
        if topics.len() != self.topic_count() {
            return false;
        }
        match self.selector() {
            Some(selector) => topics.first() == Some(&selector),
            None => true,
        }
    }

    /// Whether a log of this event's contract may be this event, by its topics alone (the rule in
    /// [`Claim`]). `named_selectors` is the topic0 of every non-anonymous event the contract declares,
    /// configured or not, sorted.
    pub fn claim(&self, topics: &[B256], named_selectors: &[B256]) -> Claim {
        if !self.matches(topics) {
            return Claim::No;
        }
        match self.selector() {
            Some(_) => Claim::Named,
            // A log whose topic0 names another event is that event's, whatever an anonymous one's shape.
            None if topics
                .first()
                .is_some_and(|topic0| named_selectors.binary_search(topic0).is_ok()) =>
            {
                Claim::No
            }
            None => Claim::Anonymous,
        }
    }

    /// The parameter columns, in ABI order.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Decodes one log into one value per column.
    ///
    /// # Errors
    /// [`DecodeError::Mismatch`] when the topics or data do not fit: wrong topic count or topic0, data too
    /// short (or, for static parameters, not exactly their length), or an integer with dirty high bits.
    pub fn decode(&self, topics: &[B256], data: &[u8]) -> Result<Values, DecodeError> {
        let mismatch = |reason: String| DecodeError::Mismatch {
            event: self.signature.clone(),
            reason,
        };
        // alloy checks this too, but on an exact-size iterator only; say it plainly first.
        if topics.len() != self.topic_count() {
            return Err(mismatch(format!(
                "expected {} topics, the log has {}",
                self.topic_count(),
                topics.len()
            )));
        }
        self.check_data_len(data)?;
        if let Some(values) = self.words.as_ref().and_then(|w| w.decode(topics, data)) {
            return Ok(values);
        }
        self.decode_with_alloy(topics, data)
    }

    /// Refuses data that is not exactly as long as static parameters take: alloy reads what it needs and
    /// ignores bytes over, which would let a log of another shape pass for this event.
    fn check_data_len(&self, data: &[u8]) -> Result<(), DecodeError> {
        match self.data_len {
            Some(len) if data.len() != len => Err(DecodeError::Mismatch {
                event: self.signature.clone(),
                reason: format!(
                    "the data is {} bytes, but the event's non-indexed parameters take exactly {len}",
                    data.len()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Decodes one log with alloy's decoder: every event, and the answer (value or error) for any log the
    /// fast path gives up on.
    fn decode_with_alloy(&self, topics: &[B256], data: &[u8]) -> Result<Values, DecodeError> {
        let mismatch = |reason: String| DecodeError::Mismatch {
            event: self.signature.clone(),
            reason,
        };
        let decoded = self
            .resolved
            .decode_log_parts(topics.iter().copied(), data)
            .map_err(|err| mismatch(err.to_string()))?;
        self.columns
            .iter()
            .zip(&self.slots)
            .map(|(column, slot)| {
                let dyn_value = match *slot {
                    Slot::Indexed(i) => decoded.indexed.get(i),
                    Slot::Body(i) => decoded.body.get(i),
                }
                .ok_or_else(|| mismatch(format!("no value for parameter {:?}", column.param)))?;
                value::to_value(column.kind, dyn_value)
                    .map_err(|reason| mismatch(format!("parameter {:?}: {reason}", column.param)))
            })
            .collect()
    }
}

/// The ABI-encoded length of a sequence of `types`, when every one is static (its encoding is then its
/// words in place, with no offsets); `None` when any is dynamic.
fn static_len(types: &[DynSolType]) -> Option<usize> {
    if types.iter().any(DynSolType::is_dynamic) {
        return None;
    }
    let words = types
        .iter()
        .fold(0usize, |sum, ty| sum.saturating_add(ty.minimum_words()));
    Some(words.saturating_mul(32))
}

/// `snake_case` of an identifier (`fromAddress` -> `from_address`, `USDC` -> `usdc`, `Swap2` -> `swap2`,
/// `amount0In` -> `amount0_in`, `ERC20Token` -> `erc20_token`, `my-contract` -> `my_contract`).
///
/// ASCII letters and digits are kept, lowercased; any other character separates words, and separators at
/// either end are dropped (`_value` -> `value`).
pub fn snake_case(s: &str) -> String {
    names::snake_case(s)
}

/// The typed table name of a contract's event: `<contract>_<event>` in snake case.
pub fn table_name(contract: &str, event: &str) -> String {
    format!("{}_{}", snake_case(contract), snake_case(event))
}

#[cfg(test)]
mod offer_tests;
#[cfg(test)]
mod tests;
