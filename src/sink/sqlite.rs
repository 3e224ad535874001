//! The SQLite backend: WAL, `synchronous = NORMAL`, a busy timeout, one writer connection; multi-row
//! `INSERT ... ON CONFLICT DO NOTHING` in chunks under SQLite's bind limit. A second connection checkpoints
//! the WAL beside the writer ([`super::sqlite_wal`]). What both backends share (the checks of `prepare`,
//! reading records back, rollback and reindex) is in [`super::prepare`], [`super::read`] and
//! [`super::write`]; this file holds SQLite's dialect, its inserts and its connections.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use sqlx::query::Query;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Row, Sqlite, SqlitePool};

use crate::decode::ColumnKind;

use super::prepare::Dialect;
use super::sqlite_bind;
use super::sqlite_rows::TableRows;
use super::sqlite_wal::{Checkpointer, BACKSTOP_FRAMES};
use super::write::{Param, Statement};
use super::{migrate, query_error, Error, Rows, TableSpec, Timestamps, TYPED_KEY};

/// SQLite's side of [`super::prepare`]. Types are compared as declared (`pragma_table_info` reports the
/// `CREATE TABLE` text), and have been the same since the first typed table.
pub(super) const DIALECT: Dialect = Dialect {
    typed_fixed: [
        ("chain_id", "INTEGER"),
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
    // The key is the table: rows are stored once, in key order, so a backfill appends to one B-tree
    // instead of to a table and to a unique index beside it (about 70 bytes per log, docs/BENCHMARKS.md).
    typed_key: |_| format!("PRIMARY KEY ({TYPED_KEY})"),
    typed_table_options: " WITHOUT ROWID",
    max_table_name: None,
    raw_hex: str::to_owned,
    // INTEGER has always held 64 bits.
    widened: &[],
};

/// The page size of a database this version creates (SQLite's default is 4 KiB). A log's raw row is
/// about 620 bytes of hex text, so a 4 KiB page of the `WITHOUT ROWID` tables held six rows and a backfill
/// split a page every sixth insert (`balance_nonroot`, which redistributes three pages' cells; the quick
/// append split is for rowid tables only). Measured on a million logs (docs/BENCHMARKS.md): committing
/// 7.3-7.9 s against 8.7-8.8 s, the index build 1.6-1.9 s against 2.5-2.6 s.
const PAGE_SIZE: u32 = 16_384;

/// Helper threads SQLite's sorter may start beside the writer (`PRAGMA threads`; SQLite's default is none):
/// the one large sort the writer runs is an index build after a backfill (`sink::indexes`), when nothing
/// else is busy. Measured on 2 cores (`docs/BENCHMARKS.md`): the `(address, topic0, block_number)` index
/// over 8.9M logs took 23.7 s with none, 16.4 s with one; more threads add memory (about 16 MB each, the
/// sorter's share of the page cache) for little more speed.
fn sorter_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() - 1)
        .clamp(1, 3)
}

/// A SQLite database.
pub struct SqliteSink {
    /// The file's writer connection and checkpointer, shared by every sink of this process on the file.
    file: Arc<OpenFile>,
    pool: SqlitePool,
    /// The chain every statement of chain data names (`Sink::bind_chain`).
    pub(super) chain: Option<super::chains::Bound>,
    /// The tables given to the last `prepare`.
    pub(super) tables: Vec<TableSpec>,
    /// Whether batches carry `block_timestamp` (`Sink::settle_timestamps`).
    pub(super) timestamps: Timestamps,
    /// Whether the `transactions` table exists, once `Sink::settle_transactions` has made sure.
    pub(super) transactions_table: Option<bool>,
    /// The prepared contracts' next blocks: a batch that would skip blocks is refused.
    pub(super) nexts: super::continuity::Nexts,
}

/// What the sinks of one file share: the chains of a config each have a sink, and SQLite has one writer,
/// so their transactions queue for one connection instead of racing for the file's lock (where a
/// transaction that read before it wrote could fail at once with `SQLITE_BUSY`, whatever the busy timeout).
struct OpenFile {
    pool: SqlitePool,
    /// Copies the WAL into the database file beside the writer; `None` for `:memory:`.
    checkpointer: Option<Checkpointer>,
}

/// The files this process has open, by absolute path (`:memory:` databases are each their own).
static OPEN: tokio::sync::Mutex<Vec<(PathBuf, Weak<OpenFile>)>> =
    tokio::sync::Mutex::const_new(Vec::new());

/// How long a transaction waits for the shared writer connection: another chain's batch or index build
/// holds it meanwhile, never something outside the process.
const WRITER_WAIT: Duration = Duration::from_secs(600);

impl SqliteSink {
    /// Opens (creating if missing) and migrates the database at `path` (`:memory:` for a private one).
    ///
    /// # Errors
    /// [`Error::Open`] or [`Error::Migrate`].
    pub async fn open(path: &Path) -> Result<Self, Error> {
        let in_memory = path.as_os_str() == ":memory:";
        let file = if in_memory {
            Arc::new(open_file(path).await?)
        } else {
            let key = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
            let mut open = OPEN.lock().await;
            open.retain(|(_, file)| file.strong_count() > 0);
            match open
                .iter()
                .find_map(|(at, file)| (*at == key).then(|| file.upgrade()))
            {
                Some(Some(file)) => file,
                _ => {
                    let file = Arc::new(open_file(path).await?);
                    open.push((key, Arc::downgrade(&file)));
                    file
                }
            }
        };
        Ok(Self {
            pool: file.pool.clone(),
            file,
            chain: None,
            tables: Vec::new(),
            timestamps: Timestamps::default(),
            transactions_table: None,
            nexts: Default::default(),
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

    /// Commits a checked batch: its `inserts` (built by [`super::sqlite_rows`] off the writer), then
    /// `bookkeeping`, in one transaction.
    pub(super) async fn commit(
        &mut self,
        inserts: Vec<TableRows>,
        bookkeeping: &[Statement],
    ) -> Result<(), Error> {
        let mut tx = self.begin_batch().await?;
        write(&mut tx, inserts, bookkeeping).await?;
        self.commit_batch(tx).await
    }

    /// Starts the transaction of a batch (once the WAL checkpointer allows).
    pub(super) async fn begin_batch(
        &mut self,
    ) -> Result<sqlx::Transaction<'static, Sqlite>, Error> {
        if let Some(checkpointer) = &self.file.checkpointer {
            checkpointer.before_transaction().await;
        }
        self.pool
            .begin()
            .await
            .map_err(query_error("starting a transaction"))
    }

    /// Commits a batch's transaction and tells the WAL checkpointer.
    pub(super) async fn commit_batch(
        &self,
        tx: sqlx::Transaction<'static, Sqlite>,
    ) -> Result<(), Error> {
        tx.commit()
            .await
            .map_err(query_error("committing a batch"))?;
        if let Some(checkpointer) = &self.file.checkpointer {
            checkpointer.committed();
        }
        Ok(())
    }

    /// Closes the file when this is the last sink of the process on it.
    pub(super) async fn close(self) {
        drop(self.pool);
        let Ok(file) = Arc::try_unwrap(self.file) else {
            return;
        };
        if let Some(checkpointer) = file.checkpointer {
            checkpointer.stop().await;
        }
        file.pool.close().await;
    }
}

/// Opens (creating if missing) and migrates the database at `path`: its writer connection and, for a file,
/// its checkpointer.
async fn open_file(path: &Path) -> Result<OpenFile, Error> {
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
        // A new database only: an existing one keeps the page size it was created with.
        .page_size(PAGE_SIZE)
        // Measured (docs/BENCHMARKS.md): statement sub-journals of multi-row inserts went to temp files.
        .pragma("temp_store", "memory");
    // The checkpointer's connection: the same file and settings, no page cache to speak of (a
    // checkpoint copies frames through a buffer of its own).
    let checkpoint_options = options.clone().pragma("cache_size", "-256");
    // Checkpoints happen beside the writer; its own autocheckpoint is a backstop. Measured: checkpoints
    // every 1,000 WAL pages (the default) rewrote hot index pages again and again.
    let options = options
        .pragma("wal_autocheckpoint", BACKSTOP_FRAMES.to_string())
        .pragma("cache_size", "-16384")
        .pragma("threads", sorter_threads().to_string());
    // One writer connection: SQLite has one writer anyway, and a private `:memory:` database lives in it.
    let pool = SqlitePoolOptions::new()
        .max_connections(1)
        .acquire_timeout(WRITER_WAIT)
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
    Ok(OpenFile { pool, checkpointer })
}

/// Writes a batch (or a part of one): its `inserts`, then `bookkeeping`.
pub(super) async fn write(
    tx: &mut sqlx::Transaction<'static, Sqlite>,
    inserts: Vec<TableRows>,
    bookkeeping: &[Statement],
) -> Result<(), Error> {
    // The rows were built in the decoding stage: this only binds and steps.
    sqlite_bind::insert(tx, &inserts).await?;
    for statement in bookkeeping {
        run(tx, statement).await?;
    }
    Ok(())
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
