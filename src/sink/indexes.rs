//! Secondary indexes built after a long backfill instead of maintained row by row (as Ponder, rindexer and
//! Envio do it): a backfill in block order appends to every table's key, but the `(address, topic0,
//! block_number)` index of `logs` takes each row at a random place, and so does `transactions` by hash.
//! Building such an index once from the stored rows is a sort, far cheaper than as many random inserts.
//!
//! The protocol, on both backends (each step one transaction, so a SIGKILL anywhere leaves one of its
//! states):
//! 1. [`defer`]: drop the indexes and record their names in `meta.deferred_indexes`, together.
//! 2. The backfill commits its batches without them.
//! 3. [`build`]: record when the build started (`meta.index_build_started`, committed on its own, so
//!    `status` in another process sees it); then per index, `CREATE INDEX` and the removal of its name from
//!    `meta` (and of the start marker with the last name) in one transaction. A query sees no index or a
//!    whole one: neither backend shows an uncommitted index to other sessions. A build cut short is rolled
//!    back and runs again from its start when the next `sync` or `run` reaches its target.
//!
//! Whether and when to defer is the pipeline's choice (`pipeline::indexes`); this module knows what the
//! indexes are and how the database records their state. The unique keys are never deferred: the
//! conflict checks of every insert need them.

use std::time::{SystemTime, UNIX_EPOCH};

use super::read::{self, invalid};
use super::write::{Param, Statement};
use super::{Error, Sink};

/// `meta` key: the secondary indexes dropped for a backfill and not built yet, comma-separated.
pub const META_DEFERRED_INDEXES: &str = "deferred_indexes";

/// `meta` key: when (unix seconds) a build of the deferred indexes started; written in a transaction of its
/// own before the build, removed with the last index built.
pub const META_INDEX_BUILD_STARTED: &str = "index_build_started";

/// For tests only: when set (to anything), a build stops after its first `CREATE INDEX`, before that
/// transaction commits, logs [`HOLD_MESSAGE`] and waits until the process is killed. A test kills it there
/// to see that a build cut short resumes.
pub const HOLD_ENV: &str = "LOGSLICE_TEST_HOLD_INDEX_BUILD";

/// What a held build logs (see [`HOLD_ENV`]).
pub const HOLD_MESSAGE: &str = "index build held before its commit";

/// A secondary index that may be deferred; created the same way on both backends.
struct Secondary {
    name: &'static str,
    table: &'static str,
    columns: &'static str,
}

/// Every secondary index the migrations create on a table a backfill writes (the typed tables have none:
/// their unique key serves block ranges).
const SECONDARY: &[Secondary] = &[
    Secondary {
        name: "logs_address_topic0_block_number",
        table: "logs",
        columns: "address, topic0, block_number",
    },
    Secondary {
        name: "transactions_hash",
        table: "transactions",
        columns: "transaction_hash",
    },
];

/// The state of the secondary indexes, as `meta` records it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexState {
    /// Indexes dropped for a backfill and not built yet, in build order; empty when every index is there.
    pub deferred: Vec<String>,
    /// When (unix seconds) a build of them started, if one did and has not finished: a build running now,
    /// or one cut short that the next `sync` or `run` starts again.
    pub build_started: Option<u64>,
}

/// Reads the state of the secondary indexes.
///
/// # Errors
/// [`Error::Query`]; [`Error::Invalid`] when `meta` holds an index name logslice does not know or a start
/// time that is not a number.
pub(super) async fn state(sink: &Sink) -> Result<IndexState, Error> {
    let deferred = match read::meta(sink, META_DEFERRED_INDEXES).await? {
        None => Vec::new(),
        Some(names) => names
            .split(',')
            .filter(|name| !name.is_empty())
            .map(|name| {
                secondary(name)
                    .map(|index| index.name.to_owned())
                    .ok_or_else(|| {
                        invalid(
                            "meta",
                            format!("key = {META_DEFERRED_INDEXES:?}"),
                            format!(
                                "value: {name:?} is not an index logslice builds (a database of a newer \
                                 version?)"
                            ),
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
    };
    let build_started = match read::meta(sink, META_INDEX_BUILD_STARTED).await? {
        None => None,
        Some(text) => Some(text.parse().map_err(|_| {
            invalid(
                "meta",
                format!("key = {META_INDEX_BUILD_STARTED:?}"),
                format!("value: {text:?} is not a number of seconds"),
            )
        })?),
    };
    Ok(IndexState {
        deferred,
        build_started,
    })
}

/// Drops the secondary indexes that exist and records them as deferred, in one transaction; the names
/// deferred now (those deferred before included). Idempotent.
///
/// # Errors
/// [`Error::Query`], [`Error::Invalid`] as [`state`]; nothing is then changed.
pub(super) async fn defer(sink: &Sink) -> Result<Vec<String>, Error> {
    let mut deferred = state(sink).await?.deferred;
    let mut statements = Vec::new();
    for index in SECONDARY {
        if !exists(sink, index.name).await? {
            continue;
        }
        statements.push(Statement::new(
            "dropping a secondary index for the backfill",
            format!("DROP INDEX IF EXISTS {}", index.name),
            Vec::new(),
        ));
        if !deferred.iter().any(|name| name == index.name) {
            deferred.push(index.name.to_owned());
        }
    }
    if statements.is_empty() {
        return Ok(deferred);
    }
    statements.push(set_meta(META_DEFERRED_INDEXES, deferred.join(",")));
    sink.transaction(&statements).await?;
    Ok(deferred)
}

/// Builds every deferred index, each in one transaction with its removal from `meta`, after recording that
/// the build started; returns each index built with how long it took. An index whose table does not exist
/// (`transactions` switched off) is only removed from `meta`.
///
/// # Errors
/// [`Error::Query`], [`Error::Invalid`] as [`state`]. The indexes built before the error stay built and
/// recorded so; the rest stay deferred.
pub(super) async fn build(sink: &Sink) -> Result<Vec<(String, std::time::Duration)>, Error> {
    let IndexState { deferred, .. } = state(sink).await?;
    if deferred.is_empty() {
        return Ok(Vec::new());
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    sink.transaction(&[set_meta(META_INDEX_BUILD_STARTED, now.to_string())])
        .await?;
    let hold = std::env::var_os(HOLD_ENV).is_some();
    let session = sink.dialect().index_build_session;
    if let Some((before, _)) = session {
        sink.fetch("preparing an index build", before, &[]).await?;
    }
    let built = build_each(sink, &deferred, hold).await;
    if let Some((_, after)) = session {
        sink.fetch("ending an index build", after, &[]).await?;
    }
    built
}

async fn build_each(
    sink: &Sink,
    deferred: &[String],
    hold: bool,
) -> Result<Vec<(String, std::time::Duration)>, Error> {
    let mut built = Vec::new();
    for (i, name) in deferred.iter().enumerate() {
        let index = secondary(name).expect("state() accepts known names only");
        let started = std::time::Instant::now();
        let mut statements = Vec::new();
        if read::table_exists(sink, index.table).await? {
            tracing::info!(index = name, table = index.table, "building an index");
            statements.push(Statement::new(
                "building a secondary index",
                format!(
                    "CREATE INDEX IF NOT EXISTS {} ON {} ({})",
                    index.name, index.table, index.columns
                ),
                Vec::new(),
            ));
        }
        let rest = &deferred[i + 1..];
        if rest.is_empty() {
            statements.push(Statement::new(
                "recording the indexes built",
                "DELETE FROM meta WHERE key = $1 OR key = $2",
                vec![
                    Param::Text(META_DEFERRED_INDEXES.into()),
                    Param::Text(META_INDEX_BUILD_STARTED.into()),
                ],
            ));
        } else {
            statements.push(set_meta(META_DEFERRED_INDEXES, rest.join(",")));
        }
        sink.transaction_then(&statements, async {
            if hold {
                tracing::info!(index = name, "{HOLD_MESSAGE} ({HOLD_ENV} is set)");
                std::future::pending::<()>().await;
            }
        })
        .await?;
        built.push((name.clone(), started.elapsed()));
    }
    Ok(built)
}

fn secondary(name: &str) -> Option<&'static Secondary> {
    SECONDARY.iter().find(|index| index.name == name)
}

async fn exists(sink: &Sink, index: &str) -> Result<bool, Error> {
    let rows = sink
        .fetch(
            "listing indexes",
            sink.dialect().index_exists_sql,
            &[Param::Text(index.to_owned())],
        )
        .await?;
    // One row with count(*): "0" when the index does not exist.
    Ok(rows
        .into_iter()
        .flatten()
        .any(|count| count.as_deref() != Some("0")))
}

fn set_meta(key: &str, value: String) -> Statement {
    Statement::new(
        "recording the state of the secondary indexes",
        "INSERT INTO meta (key, value) VALUES ($1, $2) \
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        vec![Param::Text(key.into()), Param::Text(value)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The deferrable indexes are exactly the secondary indexes the migrations create on the tables a
    /// backfill writes, with the same columns: a build must restore what the migrations made.
    #[test]
    fn the_deferrable_indexes_are_those_of_the_migrations() {
        for (sqlite, postgres) in super::super::migrate::SQLITE
            .iter()
            .zip(super::super::migrate::POSTGRES)
        {
            for sql in [sqlite.2, postgres.2] {
                for index in SECONDARY {
                    let created = format!(
                        "CREATE INDEX {} ON {} ({})",
                        index.name, index.table, index.columns
                    );
                    if sql.contains(&format!("CREATE INDEX {} ", index.name)) {
                        assert!(sql.contains(&created), "{created} in {sql}");
                    }
                }
            }
        }
        let all: String = super::super::migrate::SQLITE.iter().map(|m| m.2).collect();
        for index in SECONDARY {
            assert!(all.contains(&format!("CREATE INDEX {} ", index.name)));
        }
    }
}
