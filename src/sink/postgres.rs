//! The Postgres backend: a small pool whose connections all have `search_path` set to `database.schema`
//! (so every statement is unqualified and the same as SQLite's, modulo `$n` placeholders); a batch's rows
//! are streamed with binary `COPY` ([`super::pg_copy`]) when its blocks hold none yet, and inserted with
//! `INSERT ... SELECT * FROM UNNEST($1::bigint[], ...) ON CONFLICT DO NOTHING` ([`super::pg_unnest`]) otherwise.
//!
//! # Choices
//!
//! - **Insert method.** Binary COPY straight into the tables, in the batch's transaction, for a batch
//!   whose blocks no table holds rows of (every backfill batch); the UNNEST insert for the rest, since COPY
//!   cannot skip a row that is there. Measured before `logs` was keyed by `(block_number, log_index)`
//!   (release, 1,000,000 raw logs in 5,000-log batches, 2 cores at load average 2.5-3.8): UNNEST 72k-109k
//!   rows/s; COPY into a staging table then a conflict-checked `INSERT ... SELECT` 79k-117k (text) and
//!   99k-128k (binary): then the unique key on the random `(block_hash, log_index)` dominated every method.
//!   With the block-ordered key the insert into the table is cheap, and a staging table would copy every
//!   row twice; see `docs/BENCHMARKS.md` for the figures since.
//! - **BYTEA in the raw table, hex TEXT in the typed tables.** `logs`' hashes, addresses, topics and data
//!   are BYTEA (migration 0007; `docs/schema.md`): the backfill is bound by the bytes Postgres
//!   writes (each new heap page, then the WAL with the same rows), and hex text is twice the bytes; this
//!   alone made store-only 45-60% faster. The typed tables keep `0x` + lowercase hex TEXT, byte-identical to
//!   SQLite's, as `docs/schema.md` gives them. Statements shared with SQLite compare a raw column with
//!   a hex parameter through [`Dialect::raw_hex`].
//! - **Integers** of every width are `NUMERIC(78,0)` (`docs/schema.md`: exact): written in `numeric`'s binary
//!   form by COPY, bound as decimal text and cast in SQL (`$n::text[]::numeric[]`) by UNNEST; no
//!   `bigdecimal` dependency, no precision loss.
//! - **JSON** (arrays and tuples) is `JSONB`: queryable with `->`/`@>` and indexable. Postgres normalises its
//!   text form (`["1", "2"]`, a space after each comma); the value is the same JSON as SQLite's TEXT.
//! - **NUL bytes.** Postgres TEXT and JSONB cannot hold U+0000, and a `string` parameter may contain it. The
//!   sink replaces each NUL with U+FFFD (the replacement character), in `Text` values and in strings inside
//!   `Json` values, so one odd string never aborts a sync; this is the same lossy rule `decode` applies to
//!   invalid UTF-8, and the raw `logs` table keeps the exact bytes.
//! - **Faults.** A commit whose connection is lost (killed backend, server restart, network) is retried on a
//!   fresh connection, [`COMMIT_ATTEMPTS`] times in all with capped exponential backoff and full jitter; the
//!   batch is idempotent, so a commit that did land before the connection dropped is harmless to repeat.
//!   Other errors (a constraint, a full disk) are not retried.
//!
//! Not here: connection URLs beyond the [`SecretUrl`] opened (shown redacted, exposed only to connect),
//! `rpc` errors, transports.

use std::borrow::Cow;
use std::time::Duration;

use sqlx::postgres::{PgArguments, PgConnectOptions, PgPoolOptions};
use sqlx::query::Query;
use sqlx::{ConnectOptions, Connection, Executor, PgConnection, PgPool, Postgres, Row};
use tokio::sync::oneshot;

use crate::config::SecretUrl;
use crate::decode::ColumnKind;

use super::pg_copy::CopyBatch;
use super::pg_unnest::{insert_unnest, inserts};
use super::prepare::Dialect;
use super::write::{Param, Statement};
use super::{
    migrate, query_error, quote_ident, Batch, Error, Rows, TableSpec, Timestamps, TYPED_KEY,
};

/// Connections in the pool: one writes at a time; the rest serve `status` and readers of [`PostgresSink::pool`].
const MAX_CONNECTIONS: u32 = 4;

/// How long a statement waits for a pooled connection (including reconnecting) before failing.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Attempts at committing one batch when the connection is lost, the first included.
pub const COMMIT_ATTEMPTS: u32 = 6;

/// The largest `CopyData` message a batch is sent in. sqlx copies a message into its connection's write
/// buffer, which keeps its size: sent whole, a batch's COPY left a buffer of megabytes on every
/// connection that wrote one. Row boundaries need not fall on message boundaries.
const COPY_MESSAGE_BYTES: usize = 256 * 1024;

/// Backoff before the second attempt; doubled for each later one, up to [`MAX_BACKOFF`].
const INITIAL_BACKOFF: Duration = Duration::from_millis(250);

/// The longest wait between attempts: with [`COMMIT_ATTEMPTS`], a server restart of several seconds is
/// ridden out, and a server that stays down fails the job within about a minute.
const MAX_BACKOFF: Duration = Duration::from_secs(4);

/// Postgres truncates longer identifiers (NAMEDATALEN - 1), so two long names could silently become one.
const MAX_IDENTIFIER_BYTES: usize = 63;

/// Postgres's side of [`super::prepare`]: types as `format_type` spells them, the unique key named so that
/// it fits [`MAX_IDENTIFIER_BYTES`], and table names refused beyond it.
pub(super) const DIALECT: Dialect = Dialect {
    typed_fixed: [
        ("chain_id", "bigint"),
        ("block_number", "bigint"),
        ("block_hash", "text"),
        ("transaction_hash", "text"),
        ("log_index", "bigint"),
        ("address", "text"),
    ],
    timestamp_type: "bigint",
    sql_type,
    columns_sql: "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod) \
                  FROM pg_attribute a \
                  JOIN pg_class c ON c.oid = a.attrelid \
                  JOIN pg_namespace n ON n.oid = c.relnamespace \
                  WHERE n.nspname = current_schema() AND c.relname = $1 AND a.attnum > 0 \
                  AND NOT a.attisdropped ORDER BY a.attnum",
    table_exists_sql: "SELECT CAST(count(*) AS TEXT) FROM information_schema.tables \
                       WHERE table_schema = current_schema() AND table_name = $1",
    index_exists_sql: "SELECT CAST(count(*) AS TEXT) FROM pg_indexes \
                       WHERE schemaname = current_schema() AND indexname = $1",
    index_build_session: None,
    typed_key: |table| {
        format!(
            "CONSTRAINT {} UNIQUE ({TYPED_KEY})",
            quote_ident(&key_name(table))
        )
    },
    typed_table_options: "",
    max_table_name: Some(("Postgres", MAX_IDENTIFIER_BYTES)),
    raw_hex: |param| format!("decode(substr({param}, 3), 'hex')"),
    // Earlier versions made typed tables' `log_index` an `integer`, too narrow for the indexes some chains
    // give (docs/schema.md: 0xffffffe2 is seen).
    widened: &[("log_index", "integer")],
};

/// A Postgres database (or one schema of it). A clone shares the pool ([`super::InTurn`] commits batches on
/// clones, one per batch in flight).
#[derive(Clone)]
pub struct PostgresSink {
    pool: PgPool,
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
    /// Attempts of a batch whose connection is lost, the first included.
    commit_attempts: u32,
}

impl PostgresSink {
    /// Connects to `url`, creates `schema` if given and missing (and puts every table there), and migrates.
    ///
    /// # Errors
    /// [`Error::Open`] naming the URL redacted (an unknown database or role, a server that is down, a bad
    /// URL), [`Error::Query`] when the schema cannot be created, [`Error::Migrate`].
    pub async fn open(url: &SecretUrl, schema: Option<&str>) -> Result<Self, Error> {
        let open_error = |source| Error::Open {
            location: url.to_string(),
            source,
        };
        let mut options = PgConnectOptions::from_url(url.expose()).map_err(open_error)?;
        // Named in `pg_stat_activity`, unless the URL names it (`?application_name=...`).
        if options.get_application_name().is_none() {
            options = options.application_name("logslice");
        }
        // A bulk insert of thousands of rows takes a second by design: not worth a warning per batch.
        let options =
            options.log_slow_statements(log::LevelFilter::Debug, std::time::Duration::from_secs(1));
        // One plain connection first: the pool retries refused connections until its acquire timeout and then
        // reports only "pool timed out", while a single attempt says what is wrong (refused, no such role).
        let mut conn = PgConnection::connect_with(&options)
            .await
            .map_err(open_error)?;
        let search_path = match schema {
            Some(schema) => {
                let schema = quote_ident(schema);
                conn.execute(format!("CREATE SCHEMA IF NOT EXISTS {schema}").as_str())
                    .await
                    .map_err(query_error("creating the database schema"))?;
                Some(format!("SET search_path TO {schema}"))
            }
            None => None,
        };
        // Best effort: the server ends the session either way.
        let _ = conn.close().await;
        let pool = PgPoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // Every connection, including those opened after a reconnect, sees only the configured schema
            // (not `public` too: a table missing there must not be found elsewhere).
            .after_connect(move |conn, _meta| {
                let search_path = search_path.clone();
                Box::pin(async move {
                    if let Some(search_path) = search_path {
                        conn.execute(search_path.as_str()).await?;
                    }
                    Ok(())
                })
            })
            .connect_with(options)
            .await
            .map_err(open_error)?;
        migrate::run_postgres(&pool).await?;
        Ok(Self {
            pool,
            chain: None,
            tables: Vec::new(),
            timestamps: Timestamps::default(),
            transactions_table: None,
            nexts: Default::default(),
            commit_attempts: COMMIT_ATTEMPTS,
        })
    }

    /// Retries a batch whose connection is lost this many times (`database.max_retries`) instead of
    /// [`COMMIT_ATTEMPTS`]` - 1`.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.commit_attempts = max_retries.saturating_add(1);
        self
    }

    /// The pool, for read-only queries (status, tests). Its connections have `search_path` set.
    pub fn pool(&self) -> &PgPool {
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
    /// `super::indexes`) and commits; the rows each statement affected. Not retried: only a batch is.
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
            let done = bind(sqlx::query(&statement.sql), &statement.params)
                .execute(&mut *tx)
                .await
                .map_err(query_error(statement.doing))?;
            affected.push(done.rows_affected());
        }
        before_commit.await;
        tx.commit()
            .await
            .map_err(query_error("committing a transaction"))?;
        Ok(affected)
    }

    /// Commits a checked batch: its rows, then `bookkeeping`, in one transaction, retried on a fresh
    /// connection when the connection is lost. With a `turn` (a receiver of the batch before's commit,
    /// [`super::InTurn`]), the rows are written at once and the bookkeeping waits until the batch before has
    /// committed: a batch's checkpoints never land before the rows of the blocks below them, and two
    /// batches never take the same checkpoint rows' locks in the opposite order.
    ///
    /// # Errors
    /// As [`super::Sink::commit`]; [`Error::Abandoned`] when the batch before failed (its own error is the
    /// one to report).
    pub(super) async fn commit(
        &self,
        batch: &Batch,
        copy: &CopyBatch,
        bookkeeping: &[Statement],
        mut turn: Option<oneshot::Receiver<()>>,
    ) -> Result<(), Error> {
        // Encoded once (`super::Encoder`), sent again on every attempt.
        let mut attempt = 1;
        loop {
            let rows = self.try_rows(batch, copy).await;
            if let Some(turn) = turn.take() {
                turn.await.map_err(|_| Error::Abandoned)?;
            }
            let outcome = match rows {
                Ok(mut tx) => match write_bookkeeping(&mut tx, bookkeeping).await {
                    Ok(()) => tx.commit().await.map_err(|e| ("committing a batch", e)),
                    Err(err) => Err(err),
                },
                Err(err) => Err(err),
            };
            let (doing, source) = match outcome {
                Ok(()) => return Ok(()),
                Err((doing, source)) if !is_connection_lost(&source) => {
                    return Err(Error::Query { doing, source })
                }
                Err(lost) => lost,
            };
            if attempt >= self.commit_attempts {
                return Err(Error::ConnectionLost {
                    doing,
                    attempts: attempt,
                    source,
                });
            }
            let backoff = backoff(attempt);
            // Per attempt, debug: `run` warns once when it starts riding out a lost database, and `sync`
            // reports the last attempt's error.
            tracing::debug!(
                attempt,
                doing,
                max_attempts = self.commit_attempts,
                backoff_ms = backoff.as_millis() as u64,
                cause = %source,
                "database connection lost, retrying the batch on a fresh connection"
            );
            tokio::time::sleep(backoff).await;
            attempt += 1;
        }
    }

    /// One attempt's rows: a transaction holding the batch's rows, its bookkeeping not yet written.
    async fn try_rows(
        &self,
        batch: &Batch,
        copy: &CopyBatch,
    ) -> Result<sqlx::Transaction<'static, Postgres>, (&'static str, sqlx::Error)> {
        let mut tx = self.begin_batch().await?;
        let occupied = match copy.span {
            Some((low, high)) => occupied(&mut tx, copy, low, high).await?,
            None => false,
        };
        self.write(&mut tx, batch, copy, &[], occupied).await?;
        Ok(tx)
    }

    /// Starts the transaction of a batch.
    pub(super) async fn begin_batch(
        &self,
    ) -> Result<sqlx::Transaction<'static, Postgres>, (&'static str, sqlx::Error)> {
        self.pool
            .begin()
            .await
            .map_err(|e| ("starting a transaction", e))
    }

    /// Writes a batch (or a part of one): its rows, then `bookkeeping`. When no table it writes held a row
    /// in the batch's blocks as its transaction began (`occupied` false: a backfill's batch, always, but not
    /// after a crash or for a contract joining below another's checkpoint), the rows are streamed with
    /// binary COPY, which has no conflict handling; otherwise the conflict-checked UNNEST inserts keep what
    /// is there (a replay of a committed batch, or a retry after a connection lost during a `COMMIT` that
    /// landed). One writer per schema, so nothing else adds rows between the check and the COPY.
    pub(super) async fn write(
        &self,
        tx: &mut sqlx::Transaction<'static, Postgres>,
        batch: &Batch,
        copy: &CopyBatch,
        bookkeeping: &[Statement],
        occupied: bool,
    ) -> Result<(), (&'static str, sqlx::Error)> {
        if copy.span.is_some() {
            if occupied {
                let inserts = inserts(copy.chain_id, &self.tables, self.timestamps, batch)
                    .expect("the batch was encoded for COPY, so every value fits its column");
                for insert in &inserts {
                    insert_unnest(tx, insert).await?;
                }
            } else {
                for copy in &copy.copies {
                    let mut copy_in = tx
                        .copy_in_raw(&copy.sql)
                        .await
                        .map_err(|e| (copy.doing, e))?;
                    for chunk in copy.data.chunks(COPY_MESSAGE_BYTES) {
                        copy_in.send(chunk).await.map_err(|e| (copy.doing, e))?;
                    }
                    copy_in.finish().await.map_err(|e| (copy.doing, e))?;
                }
            }
        }
        write_bookkeeping(tx, bookkeeping).await
    }

    pub(super) async fn close(self) {
        self.pool.close().await;
    }
}

/// Runs a batch's bookkeeping statements (checkpoints, remembered blocks, children) in its transaction.
async fn write_bookkeeping(
    tx: &mut sqlx::Transaction<'static, Postgres>,
    bookkeeping: &[Statement],
) -> Result<(), (&'static str, sqlx::Error)> {
    for statement in bookkeeping {
        bind(sqlx::query(&statement.sql), &statement.params)
            .execute(&mut **tx)
            .await
            .map_err(|e| (statement.doing, e))?;
    }
    Ok(())
}

/// Whether any table `copy` writes holds a row of its chain in blocks `low..=high` (another chain's rows
/// there never conflict: every key starts with `chain_id`).
pub(super) async fn occupied(
    tx: &mut sqlx::Transaction<'static, Postgres>,
    copy: &CopyBatch,
    low: i64,
    high: i64,
) -> Result<bool, (&'static str, sqlx::Error)> {
    let exists: Vec<String> = copy
        .copies
        .iter()
        .map(|c| {
            format!(
                "EXISTS (SELECT 1 FROM {} WHERE chain_id = $3 AND block_number BETWEEN $1 AND $2)",
                c.table
            )
        })
        .collect();
    sqlx::query_scalar(&format!("SELECT {}", exists.join(" OR ")))
        .bind(low)
        .bind(high)
        .bind(copy.chain_id)
        .fetch_one(&mut **tx)
        .await
        .map_err(|e| ("looking for rows in the batch's blocks", e))
}

/// The column type of a parameter, spelled as Postgres's `format_type` prints it (so `prepare` can compare).
fn sql_type(kind: ColumnKind) -> &'static str {
    match kind {
        // docs/schema.md: uint*/int* exact, NUMERIC(78,0) (78 digits hold every uint256 and int256).
        ColumnKind::Int64 | ColumnKind::BigInt => "numeric(78,0)",
        ColumnKind::Address | ColumnKind::FixedBytes | ColumnKind::TopicHash | ColumnKind::Text => {
            "text"
        }
        ColumnKind::Bool => "boolean",
        ColumnKind::Bytes => "bytea",
        ColumnKind::Json => "jsonb",
    }
}

/// The name of typed table `table`'s unique key: `<table>_key`, or, when that is too long for Postgres, a
/// prefix of the table's name and a hash of all of it (so two long names never share a constraint name).
fn key_name(table: &str) -> String {
    let name = format!("{table}_key");
    if name.len() <= MAX_IDENTIFIER_BYTES {
        return name;
    }
    let hash = alloy_primitives::keccak256(table.as_bytes());
    // Table names are ASCII (decode's snake case); `floor_char_boundary` is not stable on our MSRV.
    let prefix: String = table.chars().take(40).collect();
    format!("{prefix}_{}_key", alloy_primitives::hex::encode(&hash[..6]))
}

/// Postgres TEXT cannot hold NUL: each becomes U+FFFD.
pub(super) fn without_nul(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(text)
    }
}

/// JSONB rejects `\u0000` in strings: each NUL in a string of `json` becomes U+FFFD. `None` when `json` is
/// not JSON.
pub(super) fn json_without_nul(json: &str) -> Option<String> {
    // A NUL can only appear escaped in JSON text; without the escape there is nothing to parse.
    if !json.contains("\\u0000") {
        return Some(json.to_owned());
    }
    fn clean(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => {
                if let Cow::Owned(cleaned) = without_nul(s) {
                    *s = cleaned;
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(clean),
            serde_json::Value::Object(fields) => {
                let entries = std::mem::take(fields);
                *fields = entries
                    .into_iter()
                    .map(|(key, mut item)| {
                        clean(&mut item);
                        (without_nul(&key).into_owned(), item)
                    })
                    .collect();
            }
            serde_json::Value::Null | serde_json::Value::Bool(_) | serde_json::Value::Number(_) => {
            }
        }
    }
    let mut value: serde_json::Value = serde_json::from_str(json).ok()?;
    clean(&mut value);
    Some(value.to_string())
}

fn bind<'q>(
    mut query: Query<'q, Postgres, PgArguments>,
    params: &'q [Param],
) -> Query<'q, Postgres, PgArguments> {
    for param in params {
        query = match param {
            Param::Int(n) => query.bind(*n),
            Param::Text(text) => query.bind(text.as_str()),
        };
    }
    query
}

/// Whether `err` means the connection (or the server) went away, so the same batch may succeed on a fresh
/// connection. Everything else (a constraint, a type error, a full disk) would fail again. Serialization
/// failures and deadlocks are absent on purpose: batches run at READ COMMITTED with one writer per schema.
/// Whether `err` means the connection to the server was lost or could not be had (not an error of the
/// statement): see [`Error::is_connection_lost`].
pub(super) fn is_connection_lost(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            // https://www.postgresql.org/docs/current/errcodes-appendix.html
            code.starts_with("08") // connection_exception and its subclasses
                || matches!(
                    &*code,
                    "57P01" // admin_shutdown: pg_terminate_backend, a fast shutdown or restart
                        | "57P02" // crash_shutdown
                        | "57P03" // cannot_connect_now: starting up
                        | "53300" // too_many_connections: while the server cleans up dead sessions
                )
        }),
        _ => false,
    }
}

/// The wait before attempt `attempt + 1`: full jitter over `INITIAL_BACKOFF * 2^(attempt - 1)`, capped.
fn backoff(attempt: u32) -> Duration {
    let ceiling = INITIAL_BACKOFF
        .saturating_mul(1 << attempt.saturating_sub(1).min(16))
        .min(MAX_BACKOFF);
    let ceiling_ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(fastrand::u64(0..=ceiling_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_nul_in_text_and_in_json_strings() {
        assert_eq!(without_nul("a\0b"), "a\u{FFFD}b");
        assert!(matches!(without_nul("ab"), Cow::Borrowed("ab")));
        let json = serde_json::to_string(&serde_json::json!(["a\0", ["\0"], "1"])).unwrap();
        assert!(json.contains("\\u0000"));
        assert_eq!(
            json_without_nul(&json).as_deref(),
            Some("[\"a\u{FFFD}\",[\"\u{FFFD}\"],\"1\"]")
        );
        // An escaped backslash followed by `u0000` is not a NUL and survives.
        assert_eq!(
            json_without_nul(r#"["\\u0000"]"#).as_deref(),
            Some(r#"["\\u0000"]"#)
        );
        assert_eq!(json_without_nul("[1,2]").as_deref(), Some("[1,2]"));
    }

    #[test]
    fn backoff_grows_and_stays_under_the_cap() {
        for attempt in 1..40 {
            let ceiling = INITIAL_BACKOFF
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(MAX_BACKOFF);
            assert!(backoff(attempt) <= ceiling);
        }
    }

    #[test]
    fn key_names_fit_postgres_and_stay_distinct() {
        assert_eq!(key_name("usdc_transfer"), "usdc_transfer_key");
        let long_a = format!("{}_a", "x".repeat(60));
        let long_b = format!("{}_b", "x".repeat(60));
        assert!(key_name(&long_a).len() <= MAX_IDENTIFIER_BYTES);
        assert_ne!(key_name(&long_a), key_name(&long_b));
    }

    #[test]
    fn quotes_identifiers() {
        assert_eq!(quote_ident("usdc_transfer"), "\"usdc_transfer\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
