//! The SQLite writer's inserts through SQLite's own API, on the connection sqlx opened: each table's rows
//! ([`super::sqlite_rows::TableRows`]) bound in place (`SQLITE_STATIC`: SQLite reads the encoded buffer, no copy
//! per value) into a prepared multi-row `INSERT`, stepped, reset and bound again.
//!
//! Why not sqlx's arguments: each text value is an owned `String` that sqlx binds with `SQLITE_TRANSIENT`,
//! so SQLite copies it into memory of its own and frees both afterwards: a `malloc`, a copy and two `free`s
//! per value, about a tenth of the writer's time (docs/BENCHMARKS.md).
//!
//! Safety rests on three facts, each checked where it is used:
//! - the handle is locked away from sqlx's worker ([`sqlx::sqlite::LockedSqliteHandle`]) for the whole
//!   write, which runs without yielding, so nothing else uses the connection and a cancelled future cannot
//!   release the lock while a statement runs;
//! - a statement is finalized before this module returns ([`Stmt`]'s `Drop`), so no statement outlives the
//!   rows whose bytes it was bound to, or the lock;
//! - every bound range lies inside [`TableRows::bytes`] (built by `sqlite_rows`, checked here before binding).
//!
//! Not here: which rows are written (`sqlite_rows`), transactions and bookkeeping (`sqlite.rs`).

use std::ffi::{c_char, c_int, c_void};
use std::ptr::{self, NonNull};

use libsqlite3_sys as ffi;
use sqlx::sqlite::SqliteConnection;

use super::sqlite_rows::{placeholders, Cell, TableRows};
use super::Error;

/// Rows per statement: enough that stepping, resetting and the statement's start cost little per row,
/// few enough that preparing it (per batch: nothing is kept across the connection's life) is cheap.
const ROWS_PER_STATEMENT: usize = 64;

/// Values per statement at most: SQLite's default limit on bound parameters is 32,766.
const MAX_BINDS_PER_STATEMENT: usize = 16_000;

/// Writes every row of `all` on `conn`, inside the transaction the caller has begun.
///
/// # Errors
/// [`Error::Query`] with SQLite's message (a constraint or trigger, a full disk).
pub(super) async fn insert(conn: &mut SqliteConnection, all: &[TableRows]) -> Result<(), Error> {
    if all.is_empty() {
        return Ok(());
    }
    let mut locked = conn.lock_handle().await.map_err(|source| Error::Query {
        doing: "locking the SQLite connection",
        source,
    })?;
    let db = locked.as_raw_handle();
    let outcome = blocking(|| all.iter().try_for_each(|rows| insert_rows(db, rows)));
    outcome.map_err(|doing| Error::Query {
        doing,
        source: locked.last_error().map_or_else(
            || sqlx::Error::Protocol("SQLite failed without an error message".into()),
            |err| sqlx::Error::Database(Box::new(err)),
        ),
    })
}

/// Runs `work` on this thread, telling a multi-threaded runtime first so that, on one of its workers, its
/// other tasks move to another worker meanwhile (the writer's statements take tens of milliseconds per
/// batch). Whatever else the calling task runs (the backfill's decoding) waits; the sync's writer runs on
/// the thread that blocks on the runtime, not on a worker, so there this only runs `work`.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(work),
        _ => work(),
    }
}

/// One table's rows: full statements of [`ROWS_PER_STATEMENT`] rows (fewer for a table of very many
/// columns), then the rest one row at a time.
fn insert_rows(db: NonNull<ffi::sqlite3>, rows: &TableRows) -> Result<(), &'static str> {
    let per_row = rows.columns.max(1);
    let per_statement = (MAX_BINDS_PER_STATEMENT / per_row).clamp(1, ROWS_PER_STATEMENT);
    let full_cells = rows.len() / per_statement * per_statement * per_row;
    let (full, rest) = rows.cells.split_at(full_cells);
    if !full.is_empty() {
        let stmt = Stmt::prepare(db, rows, per_statement)?;
        for cells in full.chunks_exact(per_statement * per_row) {
            stmt.run(rows, cells)?;
        }
    }
    if !rest.is_empty() {
        let stmt = Stmt::prepare(db, rows, 1)?;
        for cells in rest.chunks_exact(per_row) {
            stmt.run(rows, cells)?;
        }
    }
    Ok(())
}

/// A prepared statement, finalized when dropped.
struct Stmt(NonNull<ffi::sqlite3_stmt>);

impl Stmt {
    fn prepare(
        db: NonNull<ffi::sqlite3>,
        rows: &TableRows,
        n_rows: usize,
    ) -> Result<Self, &'static str> {
        let sql = format!(
            "{}{}{}",
            rows.head,
            placeholders(n_rows, rows.columns),
            rows.tail
        );
        let len = c_int::try_from(sql.len()).map_err(|_| rows.doing)?;
        let mut stmt = ptr::null_mut();
        // SAFETY: `db` is a live connection locked for this thread (module doc); `sql` outlives the call and
        // its length is given, so no terminator is needed.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                db.as_ptr(),
                sql.as_ptr().cast::<c_char>(),
                len,
                0,
                &mut stmt,
                ptr::null_mut(),
            )
        };
        match NonNull::new(stmt) {
            Some(stmt) if rc == ffi::SQLITE_OK => Ok(Self(stmt)),
            _ => Err(rows.doing),
        }
    }

    /// Binds `cells` (one statement's worth) from `rows`' bytes, steps to the end and resets.
    fn run(&self, rows: &TableRows, cells: &[Cell]) -> Result<(), &'static str> {
        let stmt = self.0.as_ptr();
        for (i, cell) in cells.iter().enumerate() {
            let index = c_int::try_from(i + 1).map_err(|_| rows.doing)?;
            // SAFETY: `stmt` is live; a text or blob range is checked inside `rows.bytes`, which outlives
            // the statement (it is finalized before `insert` returns), so `SQLITE_STATIC` holds.
            let rc = unsafe {
                match *cell {
                    Cell::Null => ffi::sqlite3_bind_null(stmt, index),
                    Cell::Int(n) => ffi::sqlite3_bind_int64(stmt, index, n),
                    Cell::Text { start, len } => {
                        let (at, len) = checked(rows, start, len)?;
                        ffi::sqlite3_bind_text(
                            stmt,
                            index,
                            at.cast::<c_char>(),
                            len,
                            ffi::SQLITE_STATIC(),
                        )
                    }
                    Cell::Blob { start, len } => {
                        let (at, len) = checked(rows, start, len)?;
                        ffi::sqlite3_bind_blob(
                            stmt,
                            index,
                            at.cast::<c_void>(),
                            len,
                            ffi::SQLITE_STATIC(),
                        )
                    }
                }
            };
            if rc != ffi::SQLITE_OK {
                return Err(rows.doing);
            }
        }
        // SAFETY: `stmt` is live and fully bound.
        let rc = unsafe { ffi::sqlite3_step(stmt) };
        // SAFETY: as above; resetting keeps the bindings, which the next run replaces.
        unsafe { ffi::sqlite3_reset(stmt) };
        if rc == ffi::SQLITE_DONE {
            Ok(())
        } else {
            Err(rows.doing)
        }
    }
}

/// A pointer to `rows.bytes[start..start + len]` and its length as SQLite takes it.
fn checked(rows: &TableRows, start: usize, len: usize) -> Result<(*const u8, c_int), &'static str> {
    let slice = start
        .checked_add(len)
        .and_then(|end| rows.bytes.get(start..end))
        .ok_or(rows.doing)?;
    let len = c_int::try_from(len).map_err(|_| rows.doing)?;
    Ok((slice.as_ptr(), len))
}

impl Drop for Stmt {
    fn drop(&mut self) {
        // SAFETY: prepared by `Stmt::prepare` and finalized only here.
        unsafe { ffi::sqlite3_finalize(self.0.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use sqlx::{Connection, Executor, Row};

    use super::*;

    /// `n` rows of `t (k, s, b, x)`: every kind of cell, the key `k` from `first`.
    fn rows(first: i64, n: i64) -> TableRows {
        let mut rows = TableRows::new(
            "inserting test rows",
            "INSERT INTO t (k, s, b, x) VALUES ".into(),
            " ON CONFLICT (k) DO NOTHING",
            4,
        );
        for k in first..first + n {
            rows.int(k);
            rows.hex(&k.to_be_bytes());
            rows.blob(&vec![7u8; usize::try_from(k % 3).unwrap()]);
            if k % 2 == 0 {
                rows.null();
            } else {
                rows.text(&format!("row {k}"));
            }
        }
        rows
    }

    async fn table() -> SqliteConnection {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, s TEXT, b BLOB, x TEXT)")
            .await
            .unwrap();
        conn
    }

    async fn read(conn: &mut SqliteConnection) -> Vec<(i64, String, Vec<u8>, Option<String>)> {
        sqlx::query("SELECT k, s, b, x FROM t ORDER BY k")
            .fetch_all(conn)
            .await
            .unwrap()
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2), row.get(3)))
            .collect()
    }

    /// Goal: every row arrives with its values, whether it went in a full statement or one by one, and a
    /// row already there is left alone. Method: 64 + 64 + 7 rows, then the same keys again with others
    /// beside them, read back whole.
    async fn rows_arrive_exactly() {
        let mut conn = table().await;
        insert(&mut conn, &[rows(0, 135)]).await.unwrap();
        insert(&mut conn, &[rows(130, 10), rows(140, 1)])
            .await
            .unwrap();
        let stored = read(&mut conn).await;
        assert_eq!(stored.len(), 141);
        for (i, (k, s, b, x)) in stored.into_iter().enumerate() {
            assert_eq!(k, i64::try_from(i).unwrap());
            assert_eq!(s, crate::sink::hex::encode(k.to_be_bytes()));
            assert_eq!(b, vec![7u8; usize::try_from(k % 3).unwrap()]);
            assert_eq!(x, (k % 2 == 1).then(|| format!("row {k}")));
        }
    }

    #[tokio::test]
    async fn rows_arrive_exactly_on_one_thread() {
        rows_arrive_exactly().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn rows_arrive_exactly_on_a_worker_that_hands_its_tasks_over() {
        rows_arrive_exactly().await;
    }

    /// Goal: SQLite's own error comes back with what was being done, and the connection stays usable.
    /// Method: a trigger refuses one key of a full statement.
    #[tokio::test]
    async fn a_refused_row_fails_the_insert_with_sqlites_message() {
        let mut conn = table().await;
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON t WHEN NEW.k = 70 \
             BEGIN SELECT RAISE(ABORT, 'key 70 refused'); END",
        )
        .await
        .unwrap();
        let err = insert(&mut conn, &[rows(0, 100)]).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("inserting test rows") && text.contains("key 70 refused"),
            "{text}"
        );
        conn.execute("DROP TRIGGER refuse").await.unwrap();
        insert(&mut conn, &[rows(0, 100)]).await.unwrap();
        assert_eq!(read(&mut conn).await.len(), 100);
    }

    /// Goal: with the writer's `INSERT OR FAIL`, a row already there is skipped, a row breaking another
    /// constraint fails the insert, and the batch's transaction leaves nothing. Method: in a transaction,
    /// rows that overlap those stored, then a NULL in a NOT NULL column in the middle of a full statement.
    #[tokio::test]
    async fn with_or_fail_a_conflict_is_skipped_and_a_broken_row_fails_the_whole_batch() {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, s TEXT NOT NULL)")
            .await
            .unwrap();
        let rows = |keys: std::ops::Range<i64>, null_at: Option<i64>| {
            let head = format!(
                "{} t (k, s) VALUES ",
                super::super::sqlite_rows::INSERT_OR_FAIL
            );
            let mut rows = TableRows::new(
                "inserting test rows",
                head,
                " ON CONFLICT (k) DO NOTHING",
                2,
            );
            for k in keys {
                rows.int(k);
                if Some(k) == null_at {
                    rows.null();
                } else {
                    rows.text(&format!("row {k}"));
                }
            }
            rows
        };
        let mut tx = conn.begin().await.unwrap();
        insert(&mut tx, &[rows(0..100, None)]).await.unwrap();
        insert(&mut tx, &[rows(50..150, None)]).await.unwrap();
        tx.commit().await.unwrap();
        assert_eq!(count(&mut conn).await, 150);
        let kept: String = sqlx::query_scalar("SELECT s FROM t WHERE k = 60")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(kept, "row 60");

        let mut tx = conn.begin().await.unwrap();
        insert(&mut tx, &[rows(150..200, None)]).await.unwrap();
        let err = insert(&mut tx, &[rows(200..300, Some(230))])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("NOT NULL"), "{err}");
        drop(tx);
        assert_eq!(count(&mut conn).await, 150, "the batch left nothing");
    }

    async fn count(conn: &mut SqliteConnection) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(conn)
            .await
            .unwrap()
    }
}
