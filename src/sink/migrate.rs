//! Migrations embedded in the binary with `include_str!`, so `sqlx`'s `macros` feature (and its build cost)
//! is not needed; checksums are the same as `sqlx migrate` computes from the files.
//!
//! A database created by an earlier version is migrated in place when it is opened, never rebuilt behind
//! the user's back: [`run_sqlite`] and [`run_postgres`] say before a migration that rewrites `logs` how many
//! rows it holds, and SQLite's copy of them into the layout of 0004 ([`finish_logs_rebuild`]) shows its
//! progress and can be interrupted: it is one transaction, started again at the next open. So is
//! migration 9's (`chain_id` first in every key, [`super::migrate_chain`]).

use std::borrow::Cow;
use std::time::Instant;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};
use sqlx::{Executor, PgPool, SqlitePool};

use super::{query_error, Error};

/// `(version, description, sql)` of every SQLite migration, in order.
pub(super) const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "block timestamps",
        include_str!("../../migrations/sqlite/0002_block_timestamps.sql"),
    ),
    (
        3,
        "factory children",
        include_str!("../../migrations/sqlite/0003_factory_children.sql"),
    ),
    (
        4,
        "logs by block",
        include_str!("../../migrations/sqlite/0004_logs_by_block.sql"),
    ),
    (
        5,
        "transactions",
        include_str!("../../migrations/sqlite/0005_transactions.sql"),
    ),
    (
        6,
        "receipt blocks",
        include_str!("../../migrations/sqlite/0006_receipt_blocks.sql"),
    ),
    (
        CHAIN_ID,
        "chain id",
        include_str!("../../migrations/sqlite/0009_chain_id.sql"),
    ),
];

/// `(version, description, sql)` of every Postgres migration, in order; numbered like [`SQLITE`] up to 6,
/// and at 9.
/// 7 and 8 are Postgres's alone: 7, the raw table as BYTEA (SQLite keeps hex TEXT, `docs/schema.md`);
/// 8, the log and transaction indexes as BIGINT (SQLite's INTEGER has always held 64 bits). A
/// migration both backends need takes the next number on both, leaving SQLite's gap.
pub(super) const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "block timestamps",
        include_str!("../../migrations/postgres/0002_block_timestamps.sql"),
    ),
    (
        3,
        "factory children",
        include_str!("../../migrations/postgres/0003_factory_children.sql"),
    ),
    (
        4,
        "logs by block",
        include_str!("../../migrations/postgres/0004_logs_by_block.sql"),
    ),
    (
        5,
        "transactions",
        include_str!("../../migrations/postgres/0005_transactions.sql"),
    ),
    (
        6,
        "receipt blocks",
        include_str!("../../migrations/postgres/0006_receipt_blocks.sql"),
    ),
    (
        7,
        "logs bytea",
        include_str!("../../migrations/postgres/0007_logs_bytea.sql"),
    ),
    (
        8,
        "bigint indexes",
        include_str!("../../migrations/postgres/0008_bigint_indexes.sql"),
    ),
    (
        CHAIN_ID,
        "chain id",
        include_str!("../../migrations/postgres/0009_chain_id.sql"),
    ),
];

/// The migration that rewrites `logs` keyed by `(block_number, log_index)`.
const LOGS_BY_BLOCK: i64 = 4;

/// The Postgres migration that rewrites `logs` with BYTEA columns.
const LOGS_BYTEA: i64 = 7;

/// The Postgres migration that rewrites `logs` with BIGINT log and transaction indexes.
const BIGINT_INDEXES: i64 = 8;

/// The migration that puts `chain_id` first in every table's key (both backends; SQLite's rebuild is
/// [`super::migrate_chain::finish_sqlite`]).
const CHAIN_ID: i64 = 9;

/// SQLite's table holding the rows of `logs` until [`finish_logs_rebuild`] has copied them.
const LOGS_BEFORE_0004: &str = "logs_before_0004";

/// Rows copied per statement of [`finish_logs_rebuild`], between two progress lines.
const COPY_CHUNK_ROWS: i64 = 200_000;

#[derive(Debug)]
struct Embedded(&'static [(i64, &'static str, &'static str)]);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move {
            Ok(self
                .0
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// Migrates a SQLite database: announces a rewrite of `logs`, runs the pending migrations, and finishes
/// the copy 0004 leaves to [`finish_logs_rebuild`].
///
/// # Errors
/// [`Error::Migrate`]; [`Error::Query`] when the copy fails (nothing of it is then kept).
pub(super) async fn run_sqlite(pool: &SqlitePool) -> Result<(), Error> {
    let known: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'",
    )
    .fetch_one(pool)
    .await
    .map_err(query_error("reading the applied migrations"))?;
    if known > 0 {
        let applied: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM _sqlx_migrations WHERE version = $1 AND success",
        )
        .bind(LOGS_BY_BLOCK)
        .fetch_one(pool)
        .await
        .map_err(query_error("reading the applied migrations"))?;
        if applied == 0 {
            let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM logs")
                .fetch_one(pool)
                .await
                .map_err(query_error("counting raw logs"))?;
            announce(
                rows,
                LOGS_BY_BLOCK,
                "copying the raw logs into a table keyed by (block_number, log_index)",
            );
        }
    }
    migrator(SQLITE).await?.run(pool).await?;
    finish_logs_rebuild(pool).await?;
    super::migrate_chain::finish_sqlite(pool).await
}

/// Migrates a Postgres database (its `search_path` schema): announces a rewrite of `logs`, then runs the
/// pending migrations.
///
/// # Errors
/// [`Error::Migrate`]; [`Error::Query`].
pub(super) async fn run_postgres(pool: &PgPool) -> Result<(), Error> {
    let existing: bool = sqlx::query_scalar(
        "SELECT to_regclass('_sqlx_migrations') IS NOT NULL AND to_regclass('logs') IS NOT NULL",
    )
    .fetch_one(pool)
    .await
    .map_err(query_error("reading the applied migrations"))?;
    let mut rewrite = false;
    if existing {
        let applied: Vec<i64> = sqlx::query_scalar(
            "SELECT version FROM _sqlx_migrations WHERE version = ANY($1) AND success",
        )
        .bind([LOGS_BY_BLOCK, LOGS_BYTEA, BIGINT_INDEXES, CHAIN_ID].as_slice())
        .fetch_all(pool)
        .await
        .map_err(query_error("reading the applied migrations"))?;
        let pending: Vec<(i64, &str)> = [
            (
                LOGS_BY_BLOCK,
                "building the raw logs' primary key (block_number, log_index)",
            ),
            (
                LOGS_BYTEA,
                "storing the raw logs' hashes, addresses, topics and data as BYTEA",
            ),
            (
                BIGINT_INDEXES,
                "storing the raw logs' log_index and transaction_index as BIGINT",
            ),
            (CHAIN_ID, "building every table's key with chain_id first"),
        ]
        .into_iter()
        .filter(|(version, _)| !applied.contains(version))
        .collect();
        if !applied.contains(&CHAIN_ID) {
            super::migrate_chain::refuse_untagged(pool).await?;
        }
        if !pending.is_empty() {
            let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM logs")
                .fetch_one(pool)
                .await
                .map_err(query_error("counting raw logs"))?;
            for (version, what) in pending {
                announce(rows, version, what);
            }
            rewrite = rows > 0;
        }
    }
    let started = Instant::now();
    migrator(POSTGRES).await?.run(pool).await?;
    if rewrite {
        tracing::info!(
            secs = started.elapsed().as_secs_f64(),
            "migrated the database"
        );
    }
    Ok(())
}

/// The line a user sees before a migration rewrites `logs`: it reads every row once.
fn announce(rows: i64, version: i64, what: &str) {
    if rows > 0 {
        tracing::info!(
            rows,
            "migrating the database to schema {version}: {what}; this reads every raw log once \
             (an interrupted migration starts again at the next run)"
        );
    }
}

/// Copies the rows migration 0004 left in [`LOGS_BEFORE_0004`] into the new `logs`, in chunks of
/// [`COPY_CHUNK_ROWS`] by the old table's rowids (its insertion order, so mostly block order: the new key is
/// appended to), logging progress after each; then builds the `(address, topic0, block_number)` index over
/// the copied rows, drops `block_timestamp` again when the old table had none (`block_timestamps = false`),
/// and drops the old table. All in one transaction: a copy interrupted is rolled back and starts over.
///
/// A row whose `(block_number, log_index)` another row already has (a log of an orphaned block that an
/// earlier version left behind; the old key allowed it) is not copied, and a warning says how many.
///
/// # Errors
/// [`Error::Query`]; nothing is then changed.
pub(super) async fn finish_logs_rebuild(pool: &SqlitePool) -> Result<(), Error> {
    let doing = "migrating raw logs to the layout of migration 0004";
    let pending: i64 =
        sqlx::query_scalar("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = $1")
            .bind(LOGS_BEFORE_0004)
            .fetch_one(pool)
            .await
            .map_err(query_error(doing))?;
    if pending == 0 {
        return Ok(());
    }
    let started = Instant::now();
    let old_columns: Vec<String> = sqlx::query_scalar("SELECT name FROM pragma_table_info($1)")
        .bind(LOGS_BEFORE_0004)
        .fetch_all(pool)
        .await
        .map_err(query_error(doing))?;
    let with_timestamps = old_columns.iter().any(|c| c == "block_timestamp");
    let columns =
        "block_number, block_hash, transaction_hash, transaction_index, log_index, address, \
                   topic0, topic1, topic2, topic3, data";
    let columns = if with_timestamps {
        format!("{columns}, block_timestamp")
    } else {
        columns.to_owned()
    };
    let mut tx = pool.begin().await.map_err(query_error(doing))?;
    let (total, last_rowid): (i64, Option<i64>) = sqlx::query_as(&format!(
        "SELECT count(*), max(rowid) FROM {LOGS_BEFORE_0004}"
    ))
    .fetch_one(&mut *tx)
    .await
    .map_err(query_error(doing))?;
    let mut copied: u64 = 0;
    let mut from = 0i64;
    let last_rowid = last_rowid.unwrap_or(0);
    while from <= last_rowid && total > 0 {
        let to = from.saturating_add(COPY_CHUNK_ROWS);
        let done = sqlx::query(&format!(
            "INSERT INTO logs ({columns}) SELECT {columns} FROM {LOGS_BEFORE_0004} \
             WHERE rowid >= $1 AND rowid < $2 ORDER BY block_number, log_index ON CONFLICT DO NOTHING"
        ))
        .bind(from)
        .bind(to)
        .execute(&mut *tx)
        .await
        .map_err(query_error(doing))?;
        copied += done.rows_affected();
        from = to;
        tracing::info!(copied, total, "migrating the database: raw logs copied");
    }
    let skipped = u64::try_from(total).unwrap_or(0).saturating_sub(copied);
    if skipped > 0 {
        tracing::warn!(
            skipped,
            "migrating the database: raw logs sharing a (block_number, log_index) with another were not \
             copied (rows of an orphaned block an earlier version kept)"
        );
    }
    let mut statements = vec![
        format!("DROP TABLE {LOGS_BEFORE_0004}"),
        "CREATE INDEX logs_address_topic0_block_number ON logs (address, topic0, block_number)"
            .into(),
    ];
    if !with_timestamps {
        statements.push("ALTER TABLE logs DROP COLUMN block_timestamp".into());
    }
    for statement in &statements {
        tx.execute(statement.as_str())
            .await
            .map_err(query_error(doing))?;
    }
    tx.commit().await.map_err(query_error(doing))?;
    if total > 0 {
        tracing::info!(
            copied,
            secs = started.elapsed().as_secs_f64(),
            "migrated the database: raw logs keyed by (block_number, log_index)"
        );
    }
    Ok(())
}

/// A migrator over embedded migrations.
pub(super) async fn migrator(
    migrations: &'static [(i64, &'static str, &'static str)],
) -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(migrations)).await
}
