//! ABI -> typed rows: the column layout of an event's table and the decoding of one log into it. Pure: no I/O,
//! no tokio, no sqlx, no knowledge of backends beyond the abstract [`ColumnKind`].

use alloy_json_abi::Event;
use alloy_primitives::B256;

/// How a parameter is stored; each backend maps a kind to its own SQL type (see `interface.md`).
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
    /// [`ColumnKind::BigInt`]: decimal, `-` for negatives.
    BigInt(String),
    /// [`ColumnKind::Address`], [`ColumnKind::FixedBytes`], [`ColumnKind::TopicHash`] (lowercase `0x` hex),
    /// and [`ColumnKind::Text`].
    Text(String),
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

/// Decodes logs of one event into rows of its table.
#[derive(Debug, Clone)]
pub struct EventDecoder {
    _private: (),
}

impl EventDecoder {
    /// Resolves an event once.
    ///
    /// # Errors
    /// [`DecodeError::Resolve`] when a parameter type does not resolve.
    pub fn new(event: &Event) -> Result<Self, DecodeError> {
        let _ = event;
        todo!()
    }

    /// The event's signature, e.g. `Transfer(address,address,uint256)`.
    pub fn signature(&self) -> &str {
        todo!()
    }

    /// `topic0` for a non-anonymous event, `None` for an anonymous one.
    pub fn selector(&self) -> Option<B256> {
        todo!()
    }

    /// Number of topics a matching log has (indexed params, plus one unless anonymous).
    pub fn topic_count(&self) -> usize {
        todo!()
    }

    /// Whether a log with these topics is this event: topic0 equal, or (anonymous) the topic count equal.
    pub fn matches(&self, topics: &[B256]) -> bool {
        let _ = topics;
        todo!()
    }

    /// The parameter columns, in ABI order.
    pub fn columns(&self) -> &[Column] {
        todo!()
    }

    /// Decodes one log into one value per column.
    ///
    /// # Errors
    /// [`DecodeError::Mismatch`] when the topics or data do not fit.
    pub fn decode(&self, topics: &[B256], data: &[u8]) -> Result<Vec<Value>, DecodeError> {
        let _ = (topics, data);
        todo!()
    }
}

/// `snake_case` of an identifier (`fromAddress` -> `from_address`, `USDC` -> `usdc`, `Swap2` -> `swap2`).
pub fn snake_case(s: &str) -> String {
    let _ = s;
    todo!()
}

/// The typed table name of a contract's event: `<contract>_<event>` in snake case.
pub fn table_name(contract: &str, event: &str) -> String {
    format!("{}_{}", snake_case(contract), snake_case(event))
}
