//! `[database]`, `[sync]` and `[metrics]`, and the defaults of every limit (`[node]`'s too: its keys are
//! typed in `config::providers`).

use std::path::PathBuf;
use std::time::Duration;

use toml::Value;

use super::check::{field, Checker, Setting, Span};
use super::raw::{RawDatabase, RawMetrics, RawSync};
use super::{DatabaseConfig, DatabaseUrl, Finality, MetricsConfig, SecretUrl, SyncConfig};

/// `node.requests_per_second`.
pub const DEFAULT_REQUESTS_PER_SECOND: u32 = 25;
/// `node.max_concurrency`.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;
/// `node.request_timeout`: above the node's own 10 s cap, so the node answers first.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(15);
/// `database.max_retries`.
pub const DEFAULT_DATABASE_MAX_RETRIES: u32 = 5;
/// `node.max_retries`.
pub const DEFAULT_MAX_RETRIES: u32 = 8;
/// `node.initial_backoff`.
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(250);
/// `node.max_backoff`.
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// `node.max_response_bytes`: 32 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 32 * 1024 * 1024;
/// `sync.start_block`.
pub const DEFAULT_START_BLOCK: u64 = 0;
/// `sync.initial_block_range`.
pub const DEFAULT_INITIAL_BLOCK_RANGE: u64 = 2000;
/// `sync.max_block_range`.
pub const DEFAULT_MAX_BLOCK_RANGE: u64 = 100_000;
/// `sync.target_logs_per_request`: 95% of the node's 10,000-result cap; ranges are cut so that the
/// survey's estimate plus its error stays under it (see `planner`).
pub const DEFAULT_TARGET_LOGS_PER_REQUEST: u64 = 9500;
/// `sync.max_batch_logs`.
pub const DEFAULT_MAX_BATCH_LOGS: usize = 5000;
/// `sync.max_queued_batches`: the reorder buffer already holds up to `max_concurrency` target-sized
/// ranges' worth of logs ahead of the writer, so two more only cover the hand-over (4 held 7 MB more at the same speed, docs/BENCHMARKS.md).
pub const DEFAULT_MAX_QUEUED_BATCHES: usize = 2;
/// `sync.max_reorg_depth`.
pub const DEFAULT_MAX_REORG_DEPTH: u64 = 128;
/// `sync.defer_indexes_min_blocks`: about a day and a half of Ethereum mainnet. Shorter catch-ups (a cron
/// `sync` every few minutes, a daemon back after a short outage) keep the indexes; building them again over
/// the rows already stored would cost more than the backfill saves. See `pipeline::indexes`.
pub const DEFAULT_DEFER_INDEXES_MIN_BLOCKS: u64 = 10_000;
/// `sync.poll_interval`.
/// A second: on a 2-s chain a new block's rows land within one block time whatever the poll's phase
/// against the chain's (measured: p50 0.45 s, max 1.04 s; with 2 s, max 1.81 s; `examples/head_latency.rs`,
/// docs/BENCHMARKS.md), for two calls a poll that finds no new block.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// `sync.shutdown_grace`.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// `metrics.max_stall`: long enough that a slow node's retries (up to `node.max_backoff` each) do not
/// count as a stall, short enough that a stuck job is noticed within one alerting interval.
pub const DEFAULT_MAX_STALL: Duration = Duration::from_secs(5 * 60);

/// `[database]`; `at` is the table's span, for the keys it lacks.
pub(super) fn database(
    checker: &mut Checker<'_>,
    table: &RawDatabase,
    at: Option<&Span>,
) -> DatabaseConfig {
    let url = checker
        .required_string(
            table.url.as_ref(),
            at,
            "database.url",
            "write url = \"sqlite://logslice.db\" or \"postgres://user@host/db\"",
        )
        .and_then(|setting| database_url(checker, &setting))
        .unwrap_or_else(|| DatabaseUrl::Sqlite(PathBuf::from(":memory:")));
    let schema = checker
        .string(table.schema.as_ref(), "database.schema")
        .and_then(|setting| {
            let is_identifier = setting.value.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && setting.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            // Postgres truncates identifiers at 63 bytes (NAMEDATALEN - 1).
            && setting.value.len() <= 63;
            if !is_identifier {
                checker.error(
                    Some(&setting.span),
                    "database.schema",
                    format!("\"{}\" is not a plain identifier", setting.raw),
                    "use letters, digits and _, starting with a letter, at most 63 characters",
                );
                return None;
            }
            if matches!(url, DatabaseUrl::Sqlite(_)) {
                checker.error(
                    Some(&setting.span),
                    "database.schema",
                    "only applies to Postgres",
                    "remove it, or use a postgres:// url",
                );
                return None;
            }
            Some(setting.value)
        });
    let max_retries = checker.int(
        table.max_retries.as_ref(),
        "database.max_retries",
        DEFAULT_DATABASE_MAX_RETRIES,
        0,
    );
    DatabaseConfig {
        url,
        schema,
        max_retries,
    }
}

/// `sqlite://path`, `sqlite:path`, `sqlite::memory:`, `postgres://...`, `postgresql://...`.
fn database_url(checker: &mut Checker<'_>, setting: &Setting) -> Option<DatabaseUrl> {
    const FIX: &str = "write sqlite://path/to/file.db, sqlite::memory: or postgres://user@host/db";
    let at = Some(&setting.span);
    let value = setting.value.as_str();
    if value.starts_with("postgres://") || value.starts_with("postgresql://") {
        return match url::Url::parse(value) {
            Ok(url) => Some(DatabaseUrl::Postgres(SecretUrl::new(url))),
            Err(err) => {
                checker.error(
                    at,
                    "database.url",
                    format!("is not a valid postgres URL ({err})"),
                    FIX,
                );
                None
            }
        };
    }
    if let Some(rest) = value.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() {
            checker.error(at, "database.url", "names no SQLite file", FIX);
            return None;
        }
        return Some(DatabaseUrl::Sqlite(PathBuf::from(path)));
    }
    // Show the scheme only: the rest may hold a password.
    let scheme = value.split_once(':').map_or("", |(scheme, _)| scheme);
    let problem = if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '+')
    {
        "is not a database URL".to_owned()
    } else {
        format!("scheme \"{scheme}\" is not supported")
    };
    checker.error(at, "database.url", problem, FIX);
    None
}

/// `[sync]` (an empty table when absent).
pub(super) fn sync(checker: &mut Checker<'_>, table: &RawSync) -> SyncConfig {
    let f = |key: &str| field("sync", key);
    let start_block = checker.int(
        table.start_block.as_ref(),
        &f("start_block"),
        DEFAULT_START_BLOCK,
        0,
    );
    let finality = finality(checker, table.finality.as_ref(), "sync.finality");
    let initial_block_range = checker.int(
        table.initial_block_range.as_ref(),
        &f("initial_block_range"),
        DEFAULT_INITIAL_BLOCK_RANGE,
        1,
    );
    let max_block_range = checker.int(
        table.max_block_range.as_ref(),
        &f("max_block_range"),
        DEFAULT_MAX_BLOCK_RANGE,
        1,
    );
    if initial_block_range > max_block_range {
        checker.error(
            table
                .initial_block_range
                .as_ref()
                .map(|l| l.span())
                .as_ref(),
            "sync.initial_block_range",
            format!("{initial_block_range} is above sync.max_block_range ({max_block_range})"),
            "make initial_block_range at most max_block_range",
        );
    }
    let max_reorg_depth = checker.int(
        table.max_reorg_depth.as_ref(),
        &f("max_reorg_depth"),
        DEFAULT_MAX_REORG_DEPTH,
        1,
    );
    let transactions = checker.bool(table.transactions.as_ref(), &f("transactions"), false);
    let transaction_receipts = checker.bool(
        table.transaction_receipts.as_ref(),
        &f("transaction_receipts"),
        false,
    );
    if transaction_receipts && !transactions {
        checker.error(
            table
                .transaction_receipts
                .as_ref()
                .map(|l| l.span())
                .as_ref(),
            "sync.transaction_receipts",
            "true adds columns to the transactions table, which is off",
            "set transactions = true too, or remove transaction_receipts",
        );
    }
    check_finality_depth(
        checker,
        table.finality.as_ref(),
        ("sync.finality", finality),
        ("sync.max_reorg_depth", max_reorg_depth),
    );
    SyncConfig {
        start_block,
        finality,
        initial_block_range,
        max_block_range,
        target_logs_per_request: checker.int(
            table.target_logs_per_request.as_ref(),
            &f("target_logs_per_request"),
            DEFAULT_TARGET_LOGS_PER_REQUEST,
            1,
        ),
        max_batch_logs: checker.int(
            table.max_batch_logs.as_ref(),
            &f("max_batch_logs"),
            DEFAULT_MAX_BATCH_LOGS,
            1,
        ),
        max_queued_batches: checker.int(
            table.max_queued_batches.as_ref(),
            &f("max_queued_batches"),
            DEFAULT_MAX_QUEUED_BATCHES,
            1,
        ),
        max_reorg_depth,
        defer_indexes_min_blocks: checker.int(
            table.defer_indexes_min_blocks.as_ref(),
            &f("defer_indexes_min_blocks"),
            DEFAULT_DEFER_INDEXES_MIN_BLOCKS,
            1,
        ),
        poll_interval: checker.duration(
            table.poll_interval.as_ref(),
            &f("poll_interval"),
            DEFAULT_POLL_INTERVAL,
        ),
        shutdown_grace: checker.duration(
            table.shutdown_grace.as_ref(),
            &f("shutdown_grace"),
            DEFAULT_SHUTDOWN_GRACE,
        ),
        strict: checker.bool(table.strict.as_ref(), &f("strict"), false),
        block_timestamps: checker.bool(
            table.block_timestamps.as_ref(),
            &f("block_timestamps"),
            true,
        ),
        transactions,
        transaction_receipts,
    }
}

/// Confirmations deeper than the reorg window are an error (reported at `leaf`, where finality is written):
/// blocks between the window and finality would be neither final nor hash-tracked, so a reorg there would
/// go unseen.
pub(super) fn check_finality_depth(
    checker: &mut Checker<'_>,
    leaf: Option<&super::raw::Leaf>,
    (finality_field, finality): (&str, Finality),
    (depth_field, max_reorg_depth): (&str, u64),
) {
    if let Finality::Confirmations(confirmations) = finality {
        if confirmations > max_reorg_depth {
            checker.error(
                leaf.map(|l| l.span()).as_ref(),
                finality_field,
                format!(
                    "{confirmations} confirmations is more than {depth_field} ({max_reorg_depth}), \
                     the blocks whose hashes are kept to detect a reorg"
                ),
                format!("raise {depth_field} to at least {confirmations}, or lower finality"),
            );
        }
    }
}

/// `sync.finality` (or a chain's, named by `field`): `"finalized"`, or confirmations as an integer or a
/// string of digits.
pub(super) fn finality(
    checker: &mut Checker<'_>,
    leaf: Option<&super::raw::Leaf>,
    field: &str,
) -> Finality {
    const FIX: &str = "write \"finalized\" or a number of confirmations such as 12";
    let Some(value) = leaf else {
        return Finality::Finalized;
    };
    match value.get_ref() {
        Value::Integer(_) => Finality::Confirmations(checker.int(leaf, field, 0, 0)),
        Value::String(_) => {
            let Some(setting) = checker.string(leaf, field) else {
                return Finality::Finalized;
            };
            if setting.value == "finalized" {
                Finality::Finalized
            } else if let Some(n) = setting
                .value
                .parse::<u64>()
                .ok()
                .filter(|_| setting.value.bytes().all(|b| b.is_ascii_digit()))
            {
                Finality::Confirmations(n)
            } else {
                checker.error(
                    Some(&setting.span),
                    field,
                    format!("\"{}\" is not a finality", setting.raw),
                    FIX,
                );
                Finality::Finalized
            }
        }
        other => {
            checker.error(
                Some(&value.span()),
                field,
                format!("is a {}", other.type_str()),
                FIX,
            );
            Finality::Finalized
        }
    }
}

/// `[metrics]` (only when the section is present); `at` is the table's span, for the keys it lacks.
pub(super) fn metrics(
    checker: &mut Checker<'_>,
    table: &RawMetrics,
    at: &Span,
) -> Option<MetricsConfig> {
    const FIX: &str =
        "write addr = \"127.0.0.1:9090\" (host:port), or remove the [metrics] section";
    let max_stall = checker.duration(
        table.max_stall.as_ref(),
        "metrics.max_stall",
        DEFAULT_MAX_STALL,
    );
    let setting = checker.required_string(table.addr.as_ref(), Some(at), "metrics.addr", FIX)?;
    match setting.value.parse() {
        Ok(addr) => Some(MetricsConfig { addr, max_stall }),
        Err(_) => {
            checker.error(
                Some(&setting.span),
                "metrics.addr",
                format!("\"{}\" is not an IP address and port", setting.raw),
                FIX,
            );
            None
        }
    }
}
