//! The SQLite backend: WAL, `synchronous = NORMAL`, a busy timeout, one writer connection; multi-row
//! `INSERT ... ON CONFLICT DO NOTHING` in chunks under SQLite's bind limit. A second connection checkpoints
//! the WAL beside the writer ([`super::sqlite_wal`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, QueryBuilder, Row, Sqlite, SqlitePool};

use crate::decode::{ColumnKind, Value};
use crate::primitives::{BlockNumber, Log};

use super::sqlite_wal::{Checkpointer, BACKSTOP_FRAMES};
use super::{
    hex, migrate, query_error, reindex_plan, split_event_record, to_i64, tracked_from_rows, Batch,
    ContractRow, ContractSpec, Error, ReindexReport, ReindexSpec, RollbackReport, TableSpec,
    TrackedBlock, CONTRACT_ROWS_SQL, TYPED_KEY,
};

/// SQLite's default limit on bound parameters per statement is 32,766; stay well under it while keeping
/// statements large enough that per-statement overhead does not dominate.
const MAX_BINDS_PER_STATEMENT: usize = 16_000;

/// The fixed columns of every typed table, before the parameter columns.
const TYPED_FIXED: &str = "block_number, block_hash, transaction_hash, log_index, address";

/// A SQLite database.
pub struct SqliteSink {
    pool: SqlitePool,
    tables: Vec<TableSpec>,
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
        migrate::migrator(migrate::SQLITE).await?.run(&pool).await?;
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
            checkpointer,
        })
    }

    /// The pool, for read-only queries (status, tests).
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }

    pub(super) async fn prepare(
        &mut self,
        tables: &[TableSpec],
        contracts: &[ContractSpec],
    ) -> Result<(), Error> {
        // Reads go through the pool before the transaction: sqlx's `fetch_*` on `&mut *tx` makes the future
        // fail rustc's higher-ranked `Send` check (rust-lang/rust#102211), and one writer needs no isolation.
        let mut existing_columns = Vec::with_capacity(tables.len());
        for table in tables {
            let existing: Vec<String> = sqlx::query(&format!(
                "SELECT name FROM pragma_table_info('{}')",
                table.name
            ))
            .fetch_all(&self.pool)
            .await
            .map_err(query_error("reading a table's columns"))?
            .iter()
            .map(|row| row.get::<String, _>(0))
            .collect();
            existing_columns.push(existing);
        }
        let mut stored_contracts = Vec::with_capacity(contracts.len());
        for contract in contracts {
            let stored: Option<(String, String)> =
                sqlx::query_as("SELECT addresses, events FROM contracts WHERE name = ?")
                    .bind(&contract.name)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(query_error("reading the contracts"))?;
            stored_contracts.push(stored);
        }
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a transaction"))?;
        for (table, existing) in tables.iter().zip(existing_columns) {
            let wanted: Vec<String> = TYPED_FIXED
                .split(", ")
                .map(str::to_owned)
                .chain(table.columns.iter().map(|c| c.name.clone()))
                .collect();
            if !existing.is_empty() && existing != wanted {
                let owner = contracts
                    .iter()
                    .find(|c| {
                        c.events
                            .iter()
                            .any(|e| split_event_record(e).1 == table.name)
                    })
                    .map_or("<contract>", |c| c.name.as_str());
                return Err(Error::Mismatch(format!(
                    "table {} exists with columns ({}) but the config's ABI gives ({}): the event's ABI changed; \
                     to rebuild the contract's tables from its start_block run `logslice sync --reindex {owner} --to ...`, \
                     or restore the old ABI, or index into a new database",
                    table.name,
                    existing.join(", "),
                    wanted.join(", ")
                )));
            }
            let columns: String = table
                .columns
                .iter()
                .map(|c| format!(", \"{}\" {}", c.name, sql_type(c.kind)))
                .collect();
            let create = format!(
                "CREATE TABLE IF NOT EXISTS \"{name}\" (block_number INTEGER NOT NULL, block_hash TEXT NOT NULL, \
                 transaction_hash TEXT NOT NULL, log_index INTEGER NOT NULL, address TEXT NOT NULL{columns}, \
                 UNIQUE ({TYPED_KEY}))",
                name = table.name
            );
            sqlx::query(&create)
                .execute(&mut *tx)
                .await
                .map_err(query_error("creating a typed table"))?;
        }
        for (contract, stored) in contracts.iter().zip(stored_contracts) {
            let addresses: Vec<String> = contract.addresses.iter().map(hex::encode).collect();
            let addresses = serde_json::to_string(&addresses).expect("strings serialize");
            let events = serde_json::to_string(&contract.events).expect("strings serialize");
            match stored {
                Some((a, _)) if a != addresses => {
                    return Err(Error::Mismatch(format!(
                        "contract {} was indexed with addresses {a} and the config now says {addresses}: give the new addresses a new contract name, \
                         or run `logslice sync --reindex {} --to ...` to drop what was indexed for it and index the new addresses from its start_block",
                        contract.name, contract.name
                    )))
                }
                Some(_) => {
                    sqlx::query("UPDATE contracts SET events = ?, start_block = ? WHERE name = ?")
                        .bind(&events)
                        .bind(to_i64(contract.start_block))
                        .bind(&contract.name)
                        .execute(&mut *tx)
                        .await
                        .map_err(query_error("recording a contract"))?;
                }
                None => {
                    sqlx::query("INSERT INTO contracts (name, addresses, events, start_block) VALUES (?, ?, ?, ?)")
                        .bind(&contract.name)
                        .bind(&addresses)
                        .bind(&events)
                        .bind(to_i64(contract.start_block))
                        .execute(&mut *tx)
                        .await
                        .map_err(query_error("recording a contract"))?;
                }
            }
        }
        tx.commit()
            .await
            .map_err(query_error("committing the schema"))?;
        self.tables = tables.to_vec();
        Ok(())
    }

    pub(super) async fn check_chain_id(&self, chain_id: u64) -> Result<(), Error> {
        let stored: Option<String> =
            sqlx::query_scalar("SELECT value FROM meta WHERE key = 'chain_id'")
                .fetch_optional(&self.pool)
                .await
                .map_err(query_error("reading the chain id"))?;
        match stored {
            Some(s) if s != chain_id.to_string() => Err(Error::Mismatch(format!(
                "the database holds logs of chain {s} but the node serves chain {chain_id}: point database.url at a new database"
            ))),
            Some(_) => Ok(()),
            None => sqlx::query("INSERT INTO meta (key, value) VALUES ('chain_id', ?)")
                .bind(chain_id.to_string())
                .execute(&self.pool)
                .await
                .map(|_| ())
                .map_err(query_error("recording the chain id")),
        }
    }

    pub(super) async fn checkpoints(&self) -> Result<HashMap<String, BlockNumber>, Error> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT contract, block_number FROM checkpoints")
                .fetch_all(&self.pool)
                .await
                .map_err(query_error("reading checkpoints"))?;
        Ok(rows
            .into_iter()
            .map(|(c, b)| (c, u64::try_from(b).unwrap_or(0)))
            .collect())
    }

    pub(super) async fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        if let Some(checkpointer) = &mut self.checkpointer {
            checkpointer.before_transaction().await;
        }
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a transaction"))?;
        const RAW_COLUMNS: usize = 11;
        for chunk in statement_chunks(&batch.logs, MAX_BINDS_PER_STATEMENT / RAW_COLUMNS) {
            let mut insert: QueryBuilder<Sqlite> = QueryBuilder::new(
                "INSERT INTO logs (block_number, block_hash, transaction_hash, transaction_index, log_index, address, topic0, topic1, topic2, topic3, data) ",
            );
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
            });
            insert.push(" ON CONFLICT (block_hash, log_index) DO NOTHING");
            execute(&mut tx, insert, "inserting raw logs").await?;
        }
        for (table_idx, table) in self.tables.iter().enumerate() {
            let rows = batch.typed_rows(table_idx);
            if rows.is_empty() {
                continue;
            }
            let n_columns = 5 + table.columns.len();
            let names: String = table
                .columns
                .iter()
                .map(|c| format!(", \"{}\"", c.name))
                .collect();
            for chunk in statement_chunks(&rows, MAX_BINDS_PER_STATEMENT / n_columns) {
                let mut insert: QueryBuilder<Sqlite> = QueryBuilder::new(format!(
                    "INSERT INTO \"{}\" ({TYPED_FIXED}{names}) ",
                    table.name
                ));
                insert.push_values(chunk, |mut row, typed| {
                    let log: &Log = &batch.logs[typed.log];
                    row.push_bind(to_i64(log.block_number))
                        .push_bind(hex::encode(log.block_hash))
                        .push_bind(hex::encode(log.transaction_hash))
                        .push_bind(to_i64(log.log_index))
                        .push_bind(hex::encode(log.address));
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
        for key in &batch.removed {
            let hash = hex::encode(key.block_hash);
            let tables = std::iter::once("logs").chain(self.tables.iter().map(|t| t.name.as_str()));
            for table in tables {
                sqlx::query(&format!(
                    "DELETE FROM \"{table}\" WHERE block_number = ? AND log_index = ? AND block_hash = ?"
                ))
                .bind(to_i64(key.block_number))
                .bind(to_i64(key.log_index))
                .bind(&hash)
                .execute(&mut *tx)
                .await
                .map_err(query_error("deleting a removed log"))?;
            }
        }
        for block in &batch.blocks {
            sqlx::query(
                "INSERT INTO block_hashes (block_number, block_hash, parent_hash) VALUES (?, ?, ?) \
                 ON CONFLICT (block_number) DO UPDATE SET block_hash = excluded.block_hash, parent_hash = excluded.parent_hash",
            )
            .bind(to_i64(block.number))
            .bind(hex::encode(block.hash))
            .bind(hex::encode(block.parent_hash))
            .execute(&mut *tx)
            .await
            .map_err(query_error("remembering a block hash"))?;
        }
        if let Some(below) = batch.forget_blocks_below {
            sqlx::query("DELETE FROM block_hashes WHERE block_number < ?")
                .bind(to_i64(below))
                .execute(&mut *tx)
                .await
                .map_err(query_error("forgetting final block hashes"))?;
        }
        for checkpoint in &batch.checkpoints {
            sqlx::query(
                "INSERT INTO checkpoints (contract, block_number) VALUES (?, ?) \
                 ON CONFLICT (contract) DO UPDATE SET block_number = excluded.block_number",
            )
            .bind(&checkpoint.contract)
            .bind(to_i64(checkpoint.block))
            .execute(&mut *tx)
            .await
            .map_err(query_error("moving a checkpoint"))?;
        }
        tx.commit()
            .await
            .map_err(query_error("committing a batch"))?;
        if let Some(checkpointer) = &self.checkpointer {
            checkpointer.committed();
        }
        Ok(())
    }

    pub(super) async fn tracked_blocks(
        &self,
    ) -> Result<BTreeMap<BlockNumber, TrackedBlock>, Error> {
        let rows: Vec<(i64, String, String)> = sqlx::query_as(
            "SELECT block_number, block_hash, parent_hash FROM block_hashes ORDER BY block_number",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(query_error("reading block hashes"))?;
        tracked_from_rows(rows)
    }

    pub(super) async fn rollback(
        &mut self,
        ancestor: BlockNumber,
        note: &str,
    ) -> Result<RollbackReport, Error> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a rollback"))?;
        let above = to_i64(ancestor);
        let logs = sqlx::query("DELETE FROM logs WHERE block_number > ?")
            .bind(above)
            .execute(&mut *tx)
            .await
            .map_err(query_error("rolling back raw logs"))?
            .rows_affected();
        let mut typed_rows = 0;
        for table in &self.tables {
            typed_rows += sqlx::query(&format!(
                "DELETE FROM \"{}\" WHERE block_number > ?",
                table.name
            ))
            .bind(above)
            .execute(&mut *tx)
            .await
            .map_err(query_error("rolling back typed rows"))?
            .rows_affected();
        }
        let blocks = sqlx::query("DELETE FROM block_hashes WHERE block_number > ?")
            .bind(above)
            .execute(&mut *tx)
            .await
            .map_err(query_error("forgetting orphaned blocks"))?
            .rows_affected();
        sqlx::query("UPDATE checkpoints SET block_number = ? WHERE block_number > ?")
            .bind(above)
            .bind(above)
            .execute(&mut *tx)
            .await
            .map_err(query_error("moving checkpoints back"))?;
        sqlx::query("INSERT INTO meta (key, value) VALUES ('last_reorg', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value")
            .bind(note)
            .execute(&mut *tx)
            .await
            .map_err(query_error("recording the reorg"))?;
        tx.commit()
            .await
            .map_err(query_error("committing a rollback"))?;
        Ok(RollbackReport {
            logs,
            typed_rows,
            blocks,
        })
    }

    pub(super) async fn meta(&self, key: &str) -> Result<Option<String>, Error> {
        sqlx::query_scalar("SELECT value FROM meta WHERE key = ?")
            .bind(key)
            .fetch_optional(&self.pool)
            .await
            .map_err(query_error("reading the meta table"))
    }

    pub(super) async fn contract_rows(&self) -> Result<Vec<ContractRow>, Error> {
        sqlx::query_as(CONTRACT_ROWS_SQL)
            .fetch_all(&self.pool)
            .await
            .map_err(query_error("reading the contracts"))
    }

    /// Rows of a table, `None` when it does not exist.
    pub(super) async fn row_count(&self, table: &str) -> Result<Option<u64>, Error> {
        if !table_exists(&self.pool, table).await? {
            return Ok(None);
        }
        let n: i64 = sqlx::query_scalar(&format!("SELECT count(*) FROM \"{table}\""))
            .fetch_one(&self.pool)
            .await
            .map_err(query_error("counting rows"))?;
        Ok(Some(u64::try_from(n).unwrap_or(0)))
    }

    pub(super) async fn reindex(
        &mut self,
        contracts: &[ReindexSpec],
    ) -> Result<ReindexReport, Error> {
        let mut tx = self
            .pool
            .begin()
            .await
            .map_err(query_error("starting a transaction"))?;
        let recorded: Vec<(String, String, String)> =
            sqlx::query_as("SELECT name, addresses, events FROM contracts")
                .fetch_all(&mut *tx)
                .await
                .map_err(query_error("reading the contracts"))?;
        let names: Vec<&str> = contracts.iter().map(|c| c.name.as_str()).collect();
        let (addresses, tables) = reindex_plan(contracts, &recorded)?;
        let mut report = ReindexReport::default();
        for table in &tables {
            if table_exists(&mut *tx, table).await? {
                sqlx::query(&format!("DROP TABLE \"{table}\""))
                    .execute(&mut *tx)
                    .await
                    .map_err(query_error("dropping a typed table"))?;
                report.tables.push(table.clone());
            }
        }
        for address in &addresses {
            report.raw_rows += sqlx::query("DELETE FROM logs WHERE address = ?")
                .bind(address)
                .execute(&mut *tx)
                .await
                .map_err(query_error("deleting raw logs"))?
                .rows_affected();
        }
        for name in &names {
            for statement in [
                "DELETE FROM checkpoints WHERE contract = ?",
                "DELETE FROM contracts WHERE name = ?",
            ] {
                sqlx::query(statement)
                    .bind(name)
                    .execute(&mut *tx)
                    .await
                    .map_err(query_error("forgetting a contract"))?;
            }
        }
        tx.commit()
            .await
            .map_err(query_error("committing the reindex"))?;
        Ok(report)
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

/// Whether a table exists (through the pool, or inside a transaction: the pool has one connection).
async fn table_exists<'e>(
    executor: impl sqlx::Executor<'e, Database = Sqlite>,
    table: &str,
) -> Result<bool, Error> {
    let n: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?")
            .bind(table)
            .fetch_one(executor)
            .await
            .map_err(query_error("listing tables"))?;
    Ok(n > 0)
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
