//! Migration 9's code: `chain_id` first in every table's key (many chains in one database). On SQLite,
//! which cannot change a table's key in place, every table without `chain_id` is rebuilt with it, its rows
//! copied with the chain id the database recorded (`meta.chain_id`, which becomes the `chains` row of the
//! chain named `default`); on Postgres the migration's SQL does it in place, and [`refuse_untagged`] only
//! refuses, before it runs, a database whose rows no recorded chain id can tag.
//!
//! The typed tables, which no migration knows by name, are found in the catalog: every table holding all
//! of a typed table's fixed columns (`block_number`, `block_hash`, `transaction_hash`, `log_index`,
//! `address`) besides `logs`. The catalog, not the `contracts` records, because a table outlives its
//! record (an ABI change leaves the old event's table behind) and a table whose rows were not tagged would
//! refuse every later write: the catalog misses none.
//!
//! SQLite's rebuild is one transaction, with progress shown: interrupted, nothing of it is kept, and the
//! tables still without `chain_id` are rebuilt at the next open. Not here: what the sink does with the
//! chain ids afterwards (`super::chains`).

use std::time::Instant;

use sqlx::{Executor, PgPool, Sqlite, SqlitePool, Transaction};

use super::{query_error, quote_ident, Error, DEFAULT_CHAIN, META_CHAIN_ID};

/// For tests only: when set (to anything), SQLite's rebuild stops after copying every table, before its
/// transaction commits, logs [`HOLD_MESSAGE`] and waits until the process is killed. A test kills it
/// there to see that an interrupted migration leaves the database as it was and runs again.
pub const HOLD_ENV: &str = "LOGSLICE_TEST_HOLD_CHAIN_MIGRATION";

/// What a held rebuild logs (see [`HOLD_ENV`]).
pub const HOLD_MESSAGE: &str = "chain_id migration held before its commit";

/// What the migration refuses, and the fix.
const UNTAGGED: &str = "the database holds indexed rows but records no chain id (meta.chain_id), so \
     migration 9 cannot tell which chain they belong to: record the chain id of the node they came from \
     with INSERT INTO meta (key, value) VALUES ('chain_id', '<eth_chainId>') and open it again, or index \
     into a new database";

/// Rows of `logs` copied per statement, between two progress lines.
const COPY_CHUNK_ROWS: i128 = 200_000;

/// The columns every typed table has, by which the catalog tells them.
const TYPED_COLUMNS: [&str; 5] = [
    "block_number",
    "block_hash",
    "transaction_hash",
    "log_index",
    "address",
];

/// A table every database has (`transactions` may be absent): its key after migration 9 and the
/// secondary indexes it may have (rebuilt only when it had them: a deferred index stays deferred).
struct Fixed {
    table: &'static str,
    key: &'static str,
    without_rowid: bool,
    indexes: &'static [(&'static str, &'static str)],
}

const FIXED: &[Fixed] = &[
    Fixed {
        table: "logs",
        key: "chain_id, block_number, log_index",
        without_rowid: true,
        indexes: &[(
            "logs_address_topic0_block_number",
            "address, topic0, block_number",
        )],
    },
    Fixed {
        table: "checkpoints",
        key: "chain_id, contract",
        without_rowid: false,
        indexes: &[],
    },
    Fixed {
        table: "contracts",
        key: "chain_id, name",
        without_rowid: false,
        indexes: &[],
    },
    Fixed {
        table: "block_hashes",
        key: "chain_id, block_number",
        without_rowid: false,
        indexes: &[],
    },
    Fixed {
        table: "factory_children",
        key: "chain_id, contract, address",
        without_rowid: false,
        indexes: &[("factory_children_block_number", "chain_id, block_number")],
    },
    Fixed {
        table: "transactions",
        key: "chain_id, block_number, transaction_index",
        without_rowid: false,
        indexes: &[("transactions_hash", "transaction_hash")],
    },
    Fixed {
        table: "receipt_blocks",
        key: "chain_id, block_number",
        without_rowid: false,
        indexes: &[],
    },
];

/// The key and layout of a typed table (`super::TYPED_KEY`, `WITHOUT ROWID` as `sqlite::DIALECT` makes them).
const TYPED: Fixed = Fixed {
    table: "",
    key: super::TYPED_KEY,
    without_rowid: true,
    indexes: &[],
};

/// A table to rebuild: its name, its columns `(name, type, not null)` and its layout after migration 9.
struct Pending {
    table: String,
    columns: Vec<(String, String, bool)>,
    layout: &'static Fixed,
}

type Tx = Transaction<'static, Sqlite>;

const DOING: &str = "migrating the database to schema 9 (chain_id in every table)";

/// Rebuilds every SQLite table without `chain_id` (see the module doc).
///
/// # Errors
/// [`Error::Mismatch`] when tables hold rows but the database records no chain id; [`Error::Invalid`]
/// when the recorded one is not a number; [`Error::Query`]. Nothing is then changed.
pub(super) async fn finish_sqlite(pool: &SqlitePool) -> Result<(), Error> {
    let mut tx = pool.begin().await.map_err(query_error(DOING))?;
    let pending = pending_sqlite(&mut tx).await?;
    if pending.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    let chain_id = recorded_chain_id(&mut tx).await?;
    let mut rows = 0i64;
    for table in &pending {
        let sql = format!("SELECT count(*) FROM {}", quote_ident(&table.table));
        let n: i64 = sqlx::query_scalar(&sql)
            .fetch_one(&mut *tx)
            .await
            .map_err(query_error(DOING))?;
        rows += n;
    }
    let Some(chain_id) = chain_id.or((rows == 0).then_some(0)) else {
        return Err(Error::Mismatch(UNTAGGED.into()));
    };
    if rows > 0 {
        tracing::info!(
            rows,
            tables = pending.len(),
            "migrating the database to schema 9: rebuilding every table keyed by chain_id first; this \
             copies every row once (an interrupted migration starts again at the next run)"
        );
    }
    move_meta(&mut tx, chain_id).await?;
    for table in &pending {
        rebuild(&mut tx, table, chain_id).await?;
    }
    if std::env::var_os(HOLD_ENV).is_some() {
        tracing::info!("{HOLD_MESSAGE} ({HOLD_ENV} is set)");
        std::future::pending::<()>().await;
    }
    tx.commit().await.map_err(query_error(DOING))?;
    if rows > 0 {
        tracing::info!(
            rows,
            chain_id,
            secs = started.elapsed().as_secs_f64(),
            "migrated the database: every table keyed by chain_id first"
        );
    }
    Ok(())
}

/// The tables without `chain_id`: the fixed ones there are, and the typed ones the catalog holds.
async fn pending_sqlite(tx: &mut Tx) -> Result<Vec<Pending>, Error> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         AND name NOT IN ('_sqlx_migrations', 'meta', 'chains') ORDER BY name",
    )
    .fetch_all(&mut **tx)
    .await
    .map_err(query_error(DOING))?;
    let mut pending = Vec::new();
    for table in names {
        let columns: Vec<(String, String, bool)> = sqlx::query_as(
            "SELECT name, type, \"notnull\" FROM pragma_table_info($1) ORDER BY cid",
        )
        .bind(&table)
        .fetch_all(&mut **tx)
        .await
        .map_err(query_error(DOING))?;
        if columns.iter().any(|(name, _, _)| name == "chain_id") {
            continue;
        }
        let has = |wanted: &str| columns.iter().any(|(name, _, _)| name == wanted);
        let layout = match FIXED.iter().find(|f| f.table == table) {
            Some(fixed) => fixed,
            None if TYPED_COLUMNS.iter().all(|c| has(c)) => &TYPED,
            // Not logslice's: left alone.
            None => continue,
        };
        pending.push(Pending {
            table,
            columns,
            layout,
        });
    }
    Ok(pending)
}

/// The chain id of the rows already there: `meta.chain_id`, or the one chain `chains` records (a rebuild
/// of a table left for the next open); `None` when the database records none.
async fn recorded_chain_id(tx: &mut Tx) -> Result<Option<i64>, Error> {
    let recorded: Option<String> = sqlx::query_scalar("SELECT value FROM meta WHERE key = $1")
        .bind(META_CHAIN_ID)
        .fetch_optional(&mut **tx)
        .await
        .map_err(query_error(DOING))?;
    if let Some(text) = recorded {
        return text.parse::<i64>().map(Some).map_err(|_| {
            super::read::invalid(
                "meta",
                format_args!("key = {META_CHAIN_ID:?}"),
                format_args!("value holds {text:?}, not a chain id: repair the row or index into a new database"),
            )
        });
    }
    let chains: Vec<i64> = sqlx::query_scalar("SELECT chain_id FROM chains")
        .fetch_all(&mut **tx)
        .await
        .map_err(query_error(DOING))?;
    Ok(match chains.as_slice() {
        [only] => Some(*only),
        _ => None,
    })
}

/// `meta.chain_id` becomes the `chains` row of [`DEFAULT_CHAIN`], with the per-chain facts `meta` held;
/// a contract's filters are recorded per chain (`filters.<chain id>.<contract>`).
async fn move_meta(tx: &mut Tx, chain_id: i64) -> Result<(), Error> {
    let recorded: Option<String> = sqlx::query_scalar("SELECT value FROM meta WHERE key = $1")
        .bind(META_CHAIN_ID)
        .fetch_optional(&mut **tx)
        .await
        .map_err(query_error(DOING))?;
    if recorded.is_none() {
        return Ok(());
    }
    sqlx::query(
        "INSERT INTO chains (chain_id, name, last_reorg, providers) VALUES ($1, $2, \
         (SELECT value FROM meta WHERE key = 'last_reorg'), \
         (SELECT value FROM meta WHERE key = 'providers')) ON CONFLICT DO NOTHING",
    )
    .bind(chain_id)
    .bind(DEFAULT_CHAIN)
    .execute(&mut **tx)
    .await
    .map_err(query_error(DOING))?;
    for sql in [
        "DELETE FROM meta WHERE key IN ('chain_id', 'last_reorg', 'providers')",
        "UPDATE meta SET key = 'filters.' || $1 || '.' || substr(key, 9) WHERE key LIKE 'filters.%'",
    ] {
        sqlx::query(sql)
            .bind(chain_id.to_string())
            .execute(&mut **tx)
            .await
            .map_err(query_error(DOING))?;
    }
    Ok(())
}

/// Rebuilds one table with `chain_id` first, its rows tagged `chain_id`, and the indexes it had.
async fn rebuild(tx: &mut Tx, table: &Pending, chain_id: i64) -> Result<(), Error> {
    let name = quote_ident(&table.table);
    let old = quote_ident(&format!("{}_before_0009", table.table));
    let mut had = Vec::new();
    for &(index, columns) in table.layout.indexes {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = $1",
        )
        .bind(index)
        .fetch_one(&mut **tx)
        .await
        .map_err(query_error(DOING))?;
        if n > 0 {
            had.push(format!("CREATE INDEX {index} ON {name} ({columns})"));
        }
    }
    let definitions: String = table
        .columns
        .iter()
        .map(|(column, ty, not_null)| {
            let not_null = if *not_null { " NOT NULL" } else { "" };
            format!(", {} {ty}{not_null}", quote_ident(column))
        })
        .collect();
    let names: String = table
        .columns
        .iter()
        .map(|(column, _, _)| format!(", {}", quote_ident(column)))
        .collect();
    let options = if table.layout.without_rowid {
        " WITHOUT ROWID"
    } else {
        ""
    };
    let create = format!(
        "CREATE TABLE {name} (chain_id INTEGER NOT NULL{definitions}, PRIMARY KEY ({})){options}",
        table.layout.key
    );
    for sql in [format!("ALTER TABLE {name} RENAME TO {old}"), create] {
        tx.execute(sql.as_str()).await.map_err(query_error(DOING))?;
    }
    let copy = format!(
        "INSERT INTO {name} (chain_id{names}) SELECT $1{names} FROM {old} \
         WHERE block_number >= $2 AND block_number < $3 ON CONFLICT DO NOTHING"
    );
    let has_blocks = table.columns.iter().any(|(c, _, _)| c == "block_number");
    let (total, copied) = if has_blocks {
        copy_by_blocks(tx, &table.table, &old, &copy, chain_id).await?
    } else {
        let sql = format!(
            "INSERT INTO {name} (chain_id{names}) SELECT $1{names} FROM {old} WHERE true \
             ON CONFLICT DO NOTHING"
        );
        let done = sqlx::query(&sql)
            .bind(chain_id)
            .execute(&mut **tx)
            .await
            .map_err(query_error(DOING))?;
        (done.rows_affected(), done.rows_affected())
    };
    if copied < total {
        tracing::warn!(
            table = %table.table,
            skipped = total - copied,
            "migrating the database: rows sharing a key with another were not copied (rows of an orphaned \
             block an earlier version kept)"
        );
    }
    tx.execute(format!("DROP TABLE {old}").as_str())
        .await
        .map_err(query_error(DOING))?;
    for sql in had {
        tx.execute(sql.as_str()).await.map_err(query_error(DOING))?;
    }
    Ok(())
}

/// Copies `old`'s rows with `copy` (binding the chain id and a block range) in block ranges of about
/// [`COPY_CHUNK_ROWS`] rows, logging progress after each; the rows there were and those copied.
async fn copy_by_blocks(
    tx: &mut Tx,
    table: &str,
    old: &str,
    copy: &str,
    chain_id: i64,
) -> Result<(u64, u64), Error> {
    let (total, low, high): (i64, Option<i64>, Option<i64>) = sqlx::query_as(&format!(
        "SELECT count(*), min(block_number), max(block_number) FROM {old}"
    ))
    .fetch_one(&mut **tx)
    .await
    .map_err(query_error(DOING))?;
    let (Some(low), Some(high)) = (low, high) else {
        return Ok((0, 0));
    };
    let span = i128::from(high) - i128::from(low) + 1;
    let step = (span * COPY_CHUNK_ROWS / i128::from(total.max(1))).clamp(1, span);
    let step = i64::try_from(step).unwrap_or(i64::MAX);
    let mut copied = 0u64;
    let mut from = low;
    while from <= high {
        let to = from.saturating_add(step);
        let done = sqlx::query(copy)
            .bind(chain_id)
            .bind(from)
            .bind(to)
            .execute(&mut **tx)
            .await
            .map_err(query_error(DOING))?;
        copied += done.rows_affected();
        if total > COPY_CHUNK_ROWS as i64 {
            tracing::info!(table, copied, total, "migrating the database: rows copied");
        }
        if to == i64::MAX {
            break;
        }
        from = to;
    }
    Ok((u64::try_from(total).unwrap_or(0), copied))
}

/// Refuses, before migration 9 runs on Postgres, a database holding rows but no recorded chain id (the
/// migration's SQL refuses it too, in words a user reads less easily).
///
/// # Errors
/// [`Error::Mismatch`] naming the fix; [`Error::Query`].
pub(super) async fn refuse_untagged(pool: &PgPool) -> Result<(), Error> {
    let untagged: bool = sqlx::query_scalar(
        "SELECT NOT EXISTS (SELECT 1 FROM meta WHERE key = 'chain_id') AND (EXISTS (SELECT 1 FROM logs) \
         OR EXISTS (SELECT 1 FROM checkpoints) OR EXISTS (SELECT 1 FROM contracts) \
         OR EXISTS (SELECT 1 FROM block_hashes))",
    )
    .fetch_one(pool)
    .await
    .map_err(query_error(DOING))?;
    if untagged {
        return Err(Error::Mismatch(UNTAGGED.into()));
    }
    Ok(())
}
