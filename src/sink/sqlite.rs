//! The SQLite backend: WAL, `synchronous = NORMAL`, a busy timeout, one writer connection; multi-row
//! `INSERT ... ON CONFLICT DO NOTHING` in chunks under SQLite's bind limit. A second connection checkpoints
//! the WAL beside the writer ([`super::sqlite_wal`]). What both backends share (the checks of `prepare`,
//! reading records back, rollback and reindex) is in [`super::prepare`], [`super::read`] and
//! [`super::write`]; this file holds SQLite's dialect, its inserts and its connections.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, QueryBuilder, Row, Sqlite, SqlitePool};

use crate::decode::{ColumnKind, Value};
use crate::primitives::Log;

use super::prepare::Dialect;
use super::sqlite_wal::{Checkpointer, BACKSTOP_FRAMES};
use super::write::{Param, Statement};
use super::{
    hex, migrate, query_error, quote_ident, to_i64, Batch, Error, Rows, TableSpec, Timestamps,
    TYPED_KEY,
};

/// SQLite's default limit on bound parameters per statement is 32,766; stay well under it while keeping
/// statements large enough that per-statement overhead does not dominate.
const MAX_BINDS_PER_STATEMENT: usize = 16_000;

/// The fixed columns of every typed table, before the parameter columns.
const TYPED_FIXED: &str = "block_number, block_hash, transaction_hash, log_index, address";

/// SQLite's side of [`super::prepare`]. Types are compared as declared (`pragma_table_info` reports the
/// `CREATE TABLE` text), and have been the same since the first typed table.
pub(super) const DIALECT: Dialect = Dialect {
    typed_fixed: [
        ("block_number", "INTEGER"),
        ("block_hash", "TEXT"),
        ("transaction_hash", "TEXT"),
        ("log_index", "INTEGER"),
        ("address", "TEXT"),
    ],
    timestamp_type: "INTEGER",
    sql_type,
    columns_sql: "SELECT name, type FROM pragma_table_info($1)",
    table_exists_sql:
        "SELECT CAST(count(*) AS TEXT) FROM sqlite_master WHERE type = 'table' AND name = $1",
    index_exists_sql:
        "SELECT CAST(count(*) AS TEXT) FROM sqlite_master WHERE type = 'index' AND name = $1",
    // The writer keeps temporary data in memory (statement journals of the bulk inserts), but an index
    // build sorts every row of its table there: measured, 150 MB more at a million logs. On disk, the
    // sort's memory stays within the page cache whatever the table's size.
    index_build_session: Some(("PRAGMA temp_store = FILE", "PRAGMA temp_store = MEMORY")),
    typed_key: |_| format!("UNIQUE ({TYPED_KEY})"),
    max_table_name: None,
};

/// A SQLite database.
pub struct SqliteSink {
    pool: SqlitePool,
    /// The tables given to the last `prepare`.
    pub(super) tables: Vec<TableSpec>,
    /// Whether batches carry `block_timestamp` (`Sink::settle_timestamps`).
    pub(super) timestamps: Timestamps,
    /// Whether the `transactions` table exists, once `Sink::settle_transactions` has made sure.
    pub(super) transactions_table: Option<bool>,
    /// Copies the WAL into the database file beside the writer; `None` for `:memory:`.
    checkpointer: Option<Checkpointer>,
}

impl SqliteSink {
    /// Opens (creating if missing) and migrates the database at `path` (`:memory:` for a private one).
    ///
    /// # Errors
    /// [`Error::Open`] or [`Error::Migrate`].
    pub async fn open(path: &Path) -> Result<Self, Error> {
        let location = path.display().to_string();
        let in_memory = location == ":memory:";
        let options = if in_memory {
            SqliteConnectOptions::from_str("sqlite::memory:").map_err(|source| Error::Open {
                location: location.clone(),
                source,
            })?
        } else {
            SqliteConnectOptions::new()
                .filename(path)
                .create_if_missing(true)
        };
        let options = options
            // A bulk insert of thousands of rows takes a second by design: not worth a warning per batch.
            .log_slow_statements(log::LevelFilter::Debug, Duration::from_secs(1))
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            // Measured (docs/BENCHMARKS.md): statement sub-journals of multi-row inserts went to temp files.
            .pragma("temp_store", "memory");
        // The checkpointer's connection: the same file and settings, no page cache to speak of (a
        // checkpoint copies frames through a buffer of its own).
        let checkpoint_options = options.clone().pragma("cache_size", "-256");
        // Checkpoints happen beside the writer; its own autocheckpoint is a backstop. Measured: checkpoints
        // every 1,000 WAL pages (the default) rewrote hot index pages again and again.
        let options = options
            .pragma("wal_autocheckpoint", BACKSTOP_FRAMES.to_string())
            .pragma("cache_size", "-16384");
        // One writer connection: SQLite has one writer anyway, and a private `:memory:` database lives in it.
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|source| Error::Open {
                location: location.clone(),
                source,
            })?;
        migrate::run_sqlite(&pool).await?;
        let checkpointer = if in_memory {
            None
        } else {
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .connect_with(checkpoint_options)
                .await
                .map_err(|source| Error::Open { location, source })?;
            Some(Checkpointer::start(pool))
        };
        Ok(Self {
            pool,
            tables: Vec::new(),
            timestamps: Timestamps::default(),
            transactions_table: None,
            checkpointer,
        })
    }

    /// The pool, for read-only queries (status, tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    /// The rows of a read-only query through the pool, every column as text.
    pub(super) async fn fetch(
        &self,
        doing: &'static str,
        sql: &str,
        params: &[Param],
    ) -> Result<Rows, Error> {
        let rows = bind(sqlx::query(sql), params)
            .fetch_all(&self.pool)
            .await
            .map_err(query_error(doing))?;
        rows.iter()
            .map(|row| (0..row.len()).map(|i| row.try_get(i)).collect())
            .collect::<Result<_, _>>()
            .map_err(query_error(doing))
    }

    /// Runs `statements` in one transaction, then awaits `before_commit` (a test's hold, see
    /// `super::indexes`) and commits; the rows each statement affected.
    pub(super) async fn transaction(
        &self,
        statements: &[Statement],
        before_commit: impl std::future::Future<Output = ()>,
    ) -> Result<Vec<u64>, Error> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a transaction"))?;
        let mut affected = Vec::with_capacity(statements.len());
        for statement in statements {
            affected.push(run(&mut tx, statement).await?);
        }
        before_commit.await;
        tx.commit()
            .await
            .map_err(query_error("committing a transaction"))?;
        Ok(affected)
    }

    /// Commits a checked batch: its inserts, then `bookkeeping`, in one transaction.
    pub(super) async fn commit(
        &mut self,
        batch: &Batch,
        bookkeeping: &[Statement],
    ) -> Result<(), Error> {
        if let Some(checkpointer) = &mut self.checkpointer {
            checkpointer.before_transaction().await;
        }
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a transaction"))?;
        // `block_timestamp` rides at the end of the raw columns when stored (checked present for every log).
        let stored = self.timestamps == Timestamps::Stored;
        let raw_columns = 11 + usize::from(stored);
        let timestamp_column = if stored { ", block_timestamp" } else { "" };
        for chunk in statement_chunks(&batch.logs, MAX_BINDS_PER_STATEMENT / raw_columns) {
            let mut insert: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
                "INSERT INTO logs (block_number, block_hash, transaction_hash, transaction_index, log_index, address, topic0, topic1, topic2, topic3, data{timestamp_column}) ",
            ));
            insert.push_values(chunk, |mut row, log| {
                row.push_bind(to_i64(log.block_number))
                    .push_bind(hex::encode(log.block_hash))
                    .push_bind(hex::encode(log.transaction_hash))
                    .push_bind(to_i64(log.transaction_index))
                    .push_bind(to_i64(log.log_index))
                    .push_bind(hex::encode(log.address));
                for i in 0..4 {
                    row.push_bind(log.topics.get(i).map(hex::encode));
                }
                row.push_bind(hex::encode(&log.data));
                if stored {
                    row.push_bind(log.block_timestamp.map(to_i64));
                }
            });
            // interface.md: the database holds only canonical logs, so `(block_number, log_index)` is a
            // log's identity (rows of an orphaned block are deleted before its replacement is written).
            insert.push(" ON CONFLICT (block_number, log_index) DO NOTHING");
            execute(&mut tx, insert, "inserting raw logs").await?;
        }
        for (table_idx, table) in self.tables.iter().enumerate() {
            let rows = batch.typed_rows(table_idx);
            if rows.is_empty() {
                continue;
            }
            let n_columns = 5 + usize::from(stored) + table.columns.len();
            let names: String = table
                .columns
                .iter()
                .map(|c| format!(", {}", quote_ident(&c.name)))
                .collect();
            for chunk in statement_chunks(&rows, MAX_BINDS_PER_STATEMENT / n_columns) {
                let mut insert: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
                    "INSERT INTO {} ({TYPED_FIXED}{timestamp_column}{names}) ",
                    quote_ident(&table.name)
                ));
                insert.push_values(chunk, |mut row, typed| {
                    let log: &Log = &batch.logs[typed.log];
                    row.push_bind(to_i64(log.block_number))
                        .push_bind(hex::encode(log.block_hash))
                        .push_bind(hex::encode(log.transaction_hash))
                        .push_bind(to_i64(log.log_index))
                        .push_bind(hex::encode(log.address));
                    if stored {
                        row.push_bind(log.block_timestamp.map(to_i64));
                    }
                    for value in &typed.values {
                        match value {
                            Value::Int(i) => row.push_bind(*i),
                            Value::BigInt(s) | Value::Text(s) | Value::Json(s) => {
                                row.push_bind(s.clone())
                            }
                            Value::Bool(b) => row.push_bind(*b),
                            Value::Bytes(b) => row.push_bind(b.clone()),
                        };
                    }
                });
                // No conflict target: the table's one unique key, whichever layout it was created with.
                insert.push(" ON CONFLICT DO NOTHING");
                execute(&mut tx, insert, "inserting typed rows").await?;
            }
        }
        for statement in bookkeeping {
            run(&mut tx, statement).await?;
        }
        tx.commit()
            .await
            .map_err(query_error("committing a batch"))?;
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.committed();
        }
        Ok(())
    }

    pub(super) async fn close(self) {
        if let Some(checkpointer) = self.checkpointer {
            checkpointer.stop().await;
        }
        self.pool.close().await;
    }
}

/// Runs a multi-row INSERT in the batch's transaction, as a prepared statement SQLite keeps for the next
/// batch (the same row count gives the same SQL).
async fn execute(
    tx: &mut sqlx::Transaction<'_, Sqlite>,
    mut insert: QueryBuilder<'_, Sqlite>,
    doing: &'static str,
) -> Result<(), Error> {
    insert
        .build()
        .persistent(true)
        .execute(&mut **tx)
        .await
        .map(drop)
        .map_err(query_error(doing))
}

/// Runs one shared statement in a transaction; the rows it affected.
async fn run(tx: &mut sqlx::Transaction<'_, Sqlite>, statement: &Statement) -> Result<u64, Error> {
    bind(sqlx::query(&statement.sql), &statement.params)
        .execute(&mut **tx)
        .await
        .map(|done| done.rows_affected())
        .map_err(query_error(statement.doing))
}

fn bind<'q>(
    mut query: Query<'q, Sqlite, SqliteArguments<'q>>,
    params: &'q [Param],
) -> Query<'q, Sqlite, SqliteArguments<'q>> {
    for param in params {
        query = match param {
            Param::Int(n) => query.bind(*n),
            Param::Text(text) => query.bind(text.as_str()),
        };
    }
    query
}

/// Splits rows into statements of at most `max` rows whose sizes are `max` or a power of two, so a table
/// has a handful of distinct INSERT texts that stay in the prepared-statement cache: a remainder of any
/// size would make a new statement (parsed and planned anew, thousands of placeholders) for every batch.
fn statement_chunks<T>(rows: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let max = max.max(1);
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = if rest.len() >= max {
            max
        } else {
            1 << rest.len().ilog2()
        };
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk)
    })
}

fn sql_type(kind: ColumnKind) -> &'static str {
    match kind {
        ColumnKind::Int64 | ColumnKind::Bool => "INTEGER",
        ColumnKind::Bytes => "BLOB",
        ColumnKind::BigInt
        | ColumnKind::Address
        | ColumnKind::FixedBytes
        | ColumnKind::Text
        | ColumnKind::Json
        | ColumnKind::TopicHash => "TEXT",
    }
}

#[cfg(test)]
mod tests {
    use super::statement_chunks;

    #[test]
    fn statement_chunks_cover_every_row_once_with_few_distinct_sizes() {
        for n in [0usize, 1, 2, 3, 7, 1000, 1454, 5000, 12_345] {
            let rows: Vec<usize> = (0..n).collect();
            let chunks: Vec<&[usize]> = statement_chunks(&rows, 1454).collect();
            assert_eq!(chunks.concat(), rows);
            assert!(chunks
                .iter()
                .all(|c| c.len() == 1454 || c.len().is_power_of_two()));
        }
    }
}
