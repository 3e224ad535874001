//! Storage: the schema of `interface.md`, and one transaction per [`Batch`] holding its raw rows, typed rows
//! and checkpoints. The sink knows batches, checkpoints and block ranges; it never sees a URL, an
//! `rpc::Error` or a transport. Every typed value becomes the text form `interface.md` fixes here, with one
//! function each way ([`hex`]).

mod migrate;
mod postgres;
mod sqlite;

use std::collections::HashMap;

use alloy_primitives::{Address, B256};

use crate::decode::{Column, Value};
use crate::primitives::{BlockNumber, BlockRange, Log};

pub use postgres::{PostgresSink, COMMIT_ATTEMPTS};
pub use sqlite::SqliteSink;

/// Why storage failed. Every variant maps to exit code 74, except [`Error::Mismatch`] (78: the config does not
/// fit the database).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database cannot be opened or created.
    #[error("cannot open the database {location}: {source}")]
    Open {
        /// Where (redacted).
        location: String,
        /// Why.
        #[source]
        source: sqlx::Error,
    },
    /// A migration failed.
    #[error("cannot migrate the database: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A statement failed.
    #[error("database error while {doing}: {source}")]
    Query {
        /// What we were doing.
        doing: &'static str,
        /// Why.
        #[source]
        source: sqlx::Error,
    },
    /// The connection was lost on every attempt at a statement (a killed backend, a server restart or
    /// outage); each attempt used a fresh connection.
    #[error("lost the database connection while {doing}, {attempts} attempts: {source}")]
    ConnectionLost {
        /// What we were doing on the last attempt.
        doing: &'static str,
        /// Attempts made, the first included.
        attempts: u32,
        /// The last attempt's error.
        #[source]
        source: sqlx::Error,
    },
    /// A batch does not fit the tables given to [`Sink::prepare`]: a bug in logslice, not in the data.
    #[error("a batch does not fit the prepared tables (a bug in logslice): {0}")]
    Malformed(String),
    /// The database was built for something else (another chain, another address under a table).
    #[error("{0}")]
    Mismatch(String),
}

fn query_error(doing: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Query { doing, source }
}

/// A typed table of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Table name.
    pub name: String,
    /// Parameter columns (after the fixed ones).
    pub columns: Vec<Column>,
}

/// A contract as the database remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractSpec {
    /// Name.
    pub name: String,
    /// Addresses.
    pub addresses: Vec<Address>,
    /// Event signatures with their tables, e.g. `Transfer(address,address,uint256) -> usdc_transfer`.
    pub events: Vec<String>,
    /// Start block.
    pub start_block: BlockNumber,
}

/// One decoded row of a typed table.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedRow {
    /// Index into the tables given to [`Sink::prepare`].
    pub table: usize,
    /// Index into [`Batch::logs`] of the log it decodes.
    pub log: usize,
    /// One value per parameter column.
    pub values: Vec<Value>,
}

/// A checkpoint: the highest block of a contract whose logs are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Contract name.
    pub contract: String,
    /// Block.
    pub block: BlockNumber,
}

/// What one transaction commits.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// The blocks covered (for messages).
    pub range: Option<BlockRange>,
    /// Raw logs.
    pub logs: Vec<Log>,
    /// Typed rows.
    pub typed: Vec<TypedRow>,
    /// Checkpoints moved by this batch.
    pub checkpoints: Vec<Checkpoint>,
    /// Blocks above finality to remember (hash and parent), so a later reorg is detected.
    pub blocks: Vec<TrackedBlock>,
    /// Remembered blocks below this number are forgotten (they are final now).
    pub forget_blocks_below: Option<BlockNumber>,
    /// Logs the node reported `removed: true`: deleted if present, never inserted.
    pub removed: Vec<(B256, u64)>,
}

/// A block above finality whose hash the database keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackedBlock {
    /// Number.
    pub number: BlockNumber,
    /// Hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
}

/// What a rollback removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RollbackReport {
    /// Raw log rows deleted.
    pub logs: u64,
    /// Typed rows deleted.
    pub typed_rows: u64,
    /// Remembered blocks forgotten.
    pub blocks: u64,
}

/// The storage backend.
pub enum Sink {
    /// SQLite (the embedded default).
    Sqlite(SqliteSink),
    /// Postgres (one database, or one schema of it).
    Postgres(PostgresSink),
}

impl Sink {
    /// Creates the typed tables that do not exist yet and records the contracts.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Mismatch`] when a table exists with other columns.
    pub async fn prepare(
        &mut self,
        tables: &[TableSpec],
        contracts: &[ContractSpec],
    ) -> Result<(), Error> {
        match self {
            Sink::Sqlite(s) => s.prepare(tables, contracts).await,
            Sink::Postgres(s) => s.prepare(tables, contracts).await,
        }
    }

    /// Remembers the chain id on first use; refuses a database built from another chain.
    ///
    /// # Errors
    /// [`Error::Mismatch`] naming both chain ids.
    pub async fn check_chain_id(&self, chain_id: u64) -> Result<(), Error> {
        match self {
            Sink::Sqlite(s) => s.check_chain_id(chain_id).await,
            Sink::Postgres(s) => s.check_chain_id(chain_id).await,
        }
    }

    /// Every contract's checkpoint.
    ///
    /// # Errors
    /// [`Error::Query`].
    pub async fn checkpoints(&self) -> Result<HashMap<String, BlockNumber>, Error> {
        match self {
            Sink::Sqlite(s) => s.checkpoints().await,
            Sink::Postgres(s) => s.checkpoints().await,
        }
    }

    /// Commits a batch in one transaction: raw rows, typed rows, checkpoints. Idempotent on
    /// `(block_hash, log_index)`. Postgres retries a batch whose connection was lost on a fresh one.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::ConnectionLost`] when every attempt lost its connection;
    /// [`Error::Malformed`] when a typed row does not fit the prepared tables. Nothing of the batch is then
    /// committed, except that a connection lost during the final `COMMIT` leaves unknown whether it landed:
    /// committing the batch again is harmless either way.
    ///
    /// # Cancel safety
    /// Cancel safe: a transaction dropped before its commit rolls back.
    pub async fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        match self {
            Sink::Sqlite(s) => s.commit(batch).await,
            Sink::Postgres(s) => s.commit(batch).await,
        }
    }

    /// The remembered blocks above finality, by number.
    ///
    /// # Errors
    /// [`Error::Query`].
    pub async fn tracked_blocks(
        &self,
    ) -> Result<std::collections::BTreeMap<BlockNumber, TrackedBlock>, Error> {
        match self {
            Sink::Sqlite(s) => s.tracked_blocks().await,
            Sink::Postgres(s) => s.tracked_blocks().await,
        }
    }

    /// Rolls back to `ancestor`: deletes raw and typed rows of later blocks, moves checkpoints above it back
    /// to it, forgets later blocks and records the reorg, all in one transaction.
    ///
    /// # Errors
    /// [`Error::Query`]; nothing is then changed.
    pub async fn rollback(
        &mut self,
        ancestor: BlockNumber,
        note: &str,
    ) -> Result<RollbackReport, Error> {
        match self {
            Sink::Sqlite(s) => s.rollback(ancestor, note).await,
            Sink::Postgres(s) => s.rollback(ancestor, note).await,
        }
    }

    /// Closes the connections cleanly.
    pub async fn close(self) {
        match self {
            Sink::Sqlite(s) => s.close().await,
            Sink::Postgres(s) => s.close().await,
        }
    }
}

/// The text forms of `interface.md`: `0x` + lowercase hex.
pub mod hex {
    /// Bytes as `0x` + lowercase hex (`0x` when empty).
    pub fn encode(bytes: impl AsRef<[u8]>) -> String {
        alloy_primitives::hex::encode_prefixed(bytes)
    }

    /// `0x` + hex back to bytes.
    ///
    /// # Errors
    /// When the text is not `0x` + an even number of hex digits.
    pub fn decode(text: &str) -> Result<Vec<u8>, String> {
        let digits = text
            .strip_prefix("0x")
            .ok_or_else(|| format!("{text:?} lacks 0x"))?;
        alloy_primitives::hex::decode(digits).map_err(|e| format!("{text:?}: {e}"))
    }
}

/// `i64` for a block number or index, as both databases store them.
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).expect("block numbers and indexes fit in i64 (validated at the rpc boundary)")
}
