//! Why storage failed: `sink::Error`, its exit-code classes (see `exit`) and whether a daemon can wait it out
//! (`Error::is_connection_lost`).

use super::postgres;
use crate::primitives::BlockNumber;

/// Why storage failed. Every variant maps to exit code 74, except [`Error::Mismatch`] (78: the config does not
/// fit the database), [`Error::Unstorable`] (65: the node's data cannot be right), and [`Error::Skipped`]
/// and [`Error::Gap`] (70: a bug in logslice).
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
    /// A batch does not fit the tables given to [`super::Sink::prepare`]: a bug in logslice, not in the data.
    #[error("a batch does not fit the prepared tables (a bug in logslice): {0}")]
    Malformed(String),
    /// The database was built for something else (another chain, another address under a table).
    #[error("{0}")]
    Mismatch(String),
    /// A statement of one chain's data was asked of a sink not bound to a chain yet
    /// ([`super::Sink::bind_chain`]): a bug in logslice, not in the database.
    #[error("{0} before the sink was bound to a chain (a bug in logslice)")]
    Unbound(&'static str),
    /// A batch committed in turn ([`super::InTurn`]) was not committed because the batch before it failed: that
    /// batch's error is the one to report.
    #[error("a batch was not committed because the batch before it failed")]
    Abandoned,
    /// A number of a batch (the node's: a block number, a log or transaction index, a timestamp) above
    /// `i64::MAX`, which no column of either database holds (SQLite INTEGER and Postgres BIGINT are 64-bit
    /// signed). No chain numbers that high, so the node's data cannot be right; the batch is refused whole,
    /// before anything of it is written.
    #[error(
        "{table} row {row}: {column} {value} does not fit the database's column (at most {max}): no chain \
         numbers that high, so the node's data cannot be right",
        max = i64::MAX
    )]
    Unstorable {
        /// The table the row was going to.
        table: &'static str,
        /// Which row, by its key (`block_number = 5, log_index = 3 (block_hash = 0x...)`).
        row: String,
        /// The column.
        column: &'static str,
        /// The number.
        value: u64,
    },
    /// A batch would move a contract's checkpoint past blocks no batch committed: it starts above the
    /// contract's next block (its checkpoint + 1, or its start block). A bug in logslice (exit 70), refused
    /// before anything of the batch is written.
    #[error(
        "a batch starting at block {first} would move the checkpoint of contract {contract:?}, whose next \
         block to commit is {expected}: blocks {expected} to {} would never be indexed (a bug in logslice; \
         please report it)",
        first.saturating_sub(1)
    )]
    Skipped {
        /// The contract.
        contract: String,
        /// Its next block: its checkpoint + 1, or its start block before its first checkpoint.
        expected: BlockNumber,
        /// The batch's first block.
        first: BlockNumber,
    },
    /// A batch whose ranges leave a gap, or that moves a checkpoint beyond its last block (or covers no
    /// blocks at all): a bug in logslice (exit 70), refused before anything of it is written.
    #[error("a batch would skip blocks (a bug in logslice; please report it): {0}")]
    Gap(String),
    /// A value that cannot be right, never replaced by a default: a record the database holds that does not
    /// parse, a negative block number or count, a number that does not fit.
    #[error("{table} row {row}: {problem}")]
    Invalid {
        /// The table.
        table: String,
        /// Which row, by its key (`contract = "usdc"`).
        row: String,
        /// What is wrong with it, naming the column, and what to do.
        problem: String,
    },
}

impl Error {
    /// Whether the database connection was lost (a server restart or outage, killed connections, a pool that
    /// timed out waiting for one), as opposed to an error that retrying cannot mend (a constraint, a full
    /// disk, a permission, a schema refused). A daemon waits and opens the database again after the first;
    /// the second ends it.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            Error::ConnectionLost { .. } => true,
            Error::Open { source, .. } | Error::Query { source, .. } => {
                postgres::is_connection_lost(source)
            }
            Error::Migrate(sqlx::migrate::MigrateError::Execute(source)) => {
                postgres::is_connection_lost(source)
            }
            _ => false,
        }
    }
}
