//! `[node]`, `[database]` and `[sync]`: endpoints, limits and their defaults, and the checks between them.

use std::path::PathBuf;
use std::time::Duration;

use toml::{Table, Value};

use super::reader::{field, Reader, Setting};
use super::{
    DatabaseConfig, DatabaseUrl, Endpoint, Finality, MetricsConfig, NodeConfig, SecretUrl,
    SyncConfig, Transport,
};

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

const NODE_KEYS: &[&str] = &[
    "url",
    "ws_url",
    "transport",
    "requests_per_second",
    "max_concurrency",
    "request_timeout",
    "max_retries",
    "initial_backoff",
    "max_backoff",
    "max_response_bytes",
];
const METRICS_KEYS: &[&str] = &["addr", "max_stall"];
const DATABASE_KEYS: &[&str] = &["url", "schema", "max_retries"];
const SYNC_KEYS: &[&str] = &[
    "start_block",
    "finality",
    "initial_block_range",
    "max_block_range",
    "target_logs_per_request",
    "max_batch_logs",
    "max_queued_batches",
    "max_reorg_depth",
    "defer_indexes_min_blocks",
    "poll_interval",
    "shutdown_grace",
    "strict",
    "block_timestamps",
    "transactions",
    "transaction_receipts",
];

const URL_FIX: &str = "write sim://, https://host/path or wss://host/path";

/// `[node]`.
pub(super) fn node(reader: &mut Reader<'_>, table: &Table) -> NodeConfig {
    const S: &str = "node";
    reader.check_keys(S, table, NODE_KEYS);
    let url = reader.required_string(table, S, "url", URL_FIX);
    let endpoint = url
        .as_ref()
        .and_then(|url| parse_endpoint(reader, "node.url", url, &["http", "https", "ws", "wss"]))
        .unwrap_or_else(|| Endpoint::Sim(String::new()));
    let ws_url = reader.string(table, S, "ws_url");
    let mut ws_endpoint = ws_url
        .as_ref()
        .and_then(|ws_url| parse_endpoint(reader, "node.ws_url", ws_url, &["ws", "wss"]));
    let url_is_ws =
        matches!(&endpoint, Endpoint::Url(url) if matches!(url.expose().scheme(), "ws" | "wss"));
    let transport = match reader.string(table, S, "transport") {
        None if url_is_ws => Transport::Ws,
        None => Transport::Http,
        Some(setting) => match setting.value.as_str() {
            "http" if url_is_ws => {
                reader.error(
                    "node.transport",
                    "\"http\" does not fit a ws:// or wss:// node.url",
                    "set transport = \"ws\", or give an http(s):// url",
                );
                Transport::Http
            }
            "http" => Transport::Http,
            "ws" => Transport::Ws,
            _ => {
                reader.error(
                    "node.transport",
                    format!("\"{}\" is not a transport", setting.raw),
                    "write \"http\" or \"ws\"",
                );
                Transport::Http
            }
        },
    };
    if transport == Transport::Ws && ws_endpoint.is_none() && ws_url.is_none() {
        // sim:// stays None: the pipeline starts the built-in node and knows its WebSocket address.
        if let Endpoint::Url(url) = &endpoint {
            ws_endpoint = Some(Endpoint::Url(derive_ws_url(url)));
        }
    }
    let requests_per_second = reader.int(
        table,
        S,
        "requests_per_second",
        DEFAULT_REQUESTS_PER_SECOND,
        1,
    );
    let max_concurrency = reader.int(table, S, "max_concurrency", DEFAULT_MAX_CONCURRENCY, 1);
    let request_timeout = reader.duration(table, S, "request_timeout", DEFAULT_REQUEST_TIMEOUT);
    // 0 retries is meaningful: try each request once.
    let max_retries = reader.int(table, S, "max_retries", DEFAULT_MAX_RETRIES, 0);
    let initial_backoff = reader.duration(table, S, "initial_backoff", DEFAULT_INITIAL_BACKOFF);
    let max_backoff = reader.duration(table, S, "max_backoff", DEFAULT_MAX_BACKOFF);
    if initial_backoff > max_backoff {
        reader.error(
            "node.initial_backoff",
            format!(
                "{} is above node.max_backoff ({})",
                humantime::format_duration(initial_backoff),
                humantime::format_duration(max_backoff)
            ),
            "make initial_backoff at most max_backoff",
        );
    }
    let max_response_bytes = reader.int(
        table,
        S,
        "max_response_bytes",
        DEFAULT_MAX_RESPONSE_BYTES,
        1,
    );
    NodeConfig {
        endpoint,
        ws_endpoint,
        transport,
        requests_per_second,
        max_concurrency,
        request_timeout,
        max_retries,
        initial_backoff,
        max_backoff,
        max_response_bytes,
    }
}

/// Parses a node URL whose scheme is one of `schemes` (or `sim://`). Messages show the scheme or the redacted
/// URL, never the text: it may hold a key written inline.
fn parse_endpoint(
    reader: &mut Reader<'_>,
    field: &str,
    setting: &Setting,
    schemes: &[&str],
) -> Option<Endpoint> {
    if setting.value.starts_with("sim://") {
        return Some(Endpoint::Sim(setting.value.clone()));
    }
    let fix = format!(
        "write sim:// or a URL starting with {}://",
        schemes.join("://, ")
    );
    match url::Url::parse(&setting.value) {
        Ok(url) if !schemes.contains(&url.scheme()) => {
            reader.error(
                field,
                format!("scheme \"{}\" is not supported here", url.scheme()),
                fix,
            );
            None
        }
        Ok(url) if url.host_str().is_none_or(str::is_empty) => {
            reader.error(field, format!("{} has no host", SecretUrl::new(url)), fix);
            None
        }
        Ok(url) => Some(Endpoint::Url(SecretUrl::new(url))),
        Err(err) => {
            reader.error(field, format!("is not a valid URL ({err})"), fix);
            None
        }
    }
}

/// The WebSocket URL of an HTTP one: http -> ws, https -> wss, `/v3/` -> `/ws/v3/` (the access service's
/// layout, `service-spec.md`).
pub(super) fn derive_ws_url(url: &SecretUrl) -> SecretUrl {
    let mut ws = url.expose().clone();
    let scheme = match ws.scheme() {
        "http" => "ws",
        "https" => "wss",
        other => other,
    }
    .to_owned();
    // Both are special schemes, so the change is allowed.
    let _ = ws.set_scheme(&scheme);
    let path = ws.path().to_owned();
    if !path.contains("/ws/v3/") {
        if let Some(v3_idx) = path.find("/v3/") {
            ws.set_path(&format!("{}/ws{}", &path[..v3_idx], &path[v3_idx..]));
        }
    }
    SecretUrl::new(ws)
}

/// `[database]`.
pub(super) fn database(reader: &mut Reader<'_>, table: &Table) -> DatabaseConfig {
    const S: &str = "database";
    reader.check_keys(S, table, DATABASE_KEYS);
    let url = reader
        .required_string(
            table,
            S,
            "url",
            "write url = \"sqlite://logslice.db\" or \"postgres://user@host/db\"",
        )
        .and_then(|setting| database_url(reader, &setting))
        .unwrap_or_else(|| DatabaseUrl::Sqlite(PathBuf::from(":memory:")));
    let schema = reader.string(table, S, "schema").and_then(|setting| {
        let is_identifier = setting.value.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && setting.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            // Postgres truncates identifiers at 63 bytes (NAMEDATALEN - 1).
            && setting.value.len() <= 63;
        if !is_identifier {
            reader.error(
                "database.schema",
                format!("\"{}\" is not a plain identifier", setting.raw),
                "use letters, digits and _, starting with a letter, at most 63 characters",
            );
            return None;
        }
        if matches!(url, DatabaseUrl::Sqlite(_)) {
            reader.error(
                "database.schema",
                "only applies to Postgres",
                "remove it, or use a postgres:// url",
            );
            return None;
        }
        Some(setting.value)
    });
    let max_retries = reader.int(table, S, "max_retries", DEFAULT_DATABASE_MAX_RETRIES, 0);
    DatabaseConfig {
        url,
        schema,
        max_retries,
    }
}

/// `sqlite://path`, `sqlite:path`, `sqlite::memory:`, `postgres://...`, `postgresql://...`.
fn database_url(reader: &mut Reader<'_>, setting: &Setting) -> Option<DatabaseUrl> {
    const FIX: &str = "write sqlite://path/to/file.db, sqlite::memory: or postgres://user@host/db";
    let value = setting.value.as_str();
    if value.starts_with("postgres://") || value.starts_with("postgresql://") {
        return match url::Url::parse(value) {
            Ok(url) => Some(DatabaseUrl::Postgres(SecretUrl::new(url))),
            Err(err) => {
                reader.error(
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
            reader.error("database.url", "names no SQLite file", FIX);
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
    reader.error("database.url", problem, FIX);
    None
}

/// `[sync]` (an empty table when absent).
pub(super) fn sync(reader: &mut Reader<'_>, table: &Table) -> SyncConfig {
    const S: &str = "sync";
    reader.check_keys(S, table, SYNC_KEYS);
    let start_block = reader.int(table, S, "start_block", DEFAULT_START_BLOCK, 0);
    let finality = finality(reader, table);
    let initial_block_range = reader.int(
        table,
        S,
        "initial_block_range",
        DEFAULT_INITIAL_BLOCK_RANGE,
        1,
    );
    let max_block_range = reader.int(table, S, "max_block_range", DEFAULT_MAX_BLOCK_RANGE, 1);
    if initial_block_range > max_block_range {
        reader.error(
            "sync.initial_block_range",
            format!("{initial_block_range} is above sync.max_block_range ({max_block_range})"),
            "make initial_block_range at most max_block_range",
        );
    }
    let max_reorg_depth = reader.int(table, S, "max_reorg_depth", DEFAULT_MAX_REORG_DEPTH, 1);
    let transactions = reader.bool(table, S, "transactions", false);
    let transaction_receipts = reader.bool(table, S, "transaction_receipts", false);
    if transaction_receipts && !transactions {
        reader.error(
            "sync.transaction_receipts",
            "true adds columns to the transactions table, which is off",
            "set transactions = true too, or remove transaction_receipts",
        );
    }
    // Blocks between the window and a deeper finality would be neither final nor hash-tracked: a reorg
    // there would go unseen.
    if let Finality::Confirmations(confirmations) = finality {
        if confirmations > max_reorg_depth {
            reader.error(
                "sync.finality",
                format!(
                    "{confirmations} confirmations is more than sync.max_reorg_depth ({max_reorg_depth}), \
                     the blocks whose hashes are kept to detect a reorg"
                ),
                format!("raise sync.max_reorg_depth to at least {confirmations}, or lower finality"),
            );
        }
    }
    SyncConfig {
        start_block,
        finality,
        initial_block_range,
        max_block_range,
        target_logs_per_request: reader.int(
            table,
            S,
            "target_logs_per_request",
            DEFAULT_TARGET_LOGS_PER_REQUEST,
            1,
        ),
        max_batch_logs: reader.int(table, S, "max_batch_logs", DEFAULT_MAX_BATCH_LOGS, 1),
        max_queued_batches: reader.int(
            table,
            S,
            "max_queued_batches",
            DEFAULT_MAX_QUEUED_BATCHES,
            1,
        ),
        max_reorg_depth,
        defer_indexes_min_blocks: reader.int(
            table,
            S,
            "defer_indexes_min_blocks",
            DEFAULT_DEFER_INDEXES_MIN_BLOCKS,
            1,
        ),
        poll_interval: reader.duration(table, S, "poll_interval", DEFAULT_POLL_INTERVAL),
        shutdown_grace: reader.duration(table, S, "shutdown_grace", DEFAULT_SHUTDOWN_GRACE),
        strict: reader.bool(table, S, "strict", false),
        block_timestamps: reader.bool(table, S, "block_timestamps", true),
        transactions,
        transaction_receipts,
    }
}

/// `sync.finality`: `"finalized"`, or confirmations as an integer or a string of digits.
fn finality(reader: &mut Reader<'_>, table: &Table) -> Finality {
    const FIX: &str = "write \"finalized\" or a number of confirmations such as 12";
    let field = field("sync", "finality");
    match table.get("finality") {
        None => Finality::Finalized,
        Some(Value::Integer(_)) => {
            Finality::Confirmations(reader.int(table, "sync", "finality", 0, 0))
        }
        Some(Value::String(_)) => {
            let Some(setting) = reader.string(table, "sync", "finality") else {
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
                reader.error(
                    &field,
                    format!("\"{}\" is not a finality", setting.raw),
                    FIX,
                );
                Finality::Finalized
            }
        }
        Some(other) => {
            reader.error(&field, format!("is a {}", other.type_str()), FIX);
            Finality::Finalized
        }
    }
}

/// `[metrics]` (only when the section is present).
pub(super) fn metrics(reader: &mut Reader<'_>, table: &Table) -> Option<MetricsConfig> {
    const S: &str = "metrics";
    const FIX: &str =
        "write addr = \"127.0.0.1:9090\" (host:port), or remove the [metrics] section";
    reader.check_keys(S, table, METRICS_KEYS);
    let max_stall = reader.duration(table, S, "max_stall", DEFAULT_MAX_STALL);
    let setting = reader.required_string(table, S, "addr", FIX)?;
    match setting.value.parse() {
        Ok(addr) => Some(MetricsConfig { addr, max_stall }),
        Err(_) => {
            reader.error(
                "metrics.addr",
                format!("\"{}\" is not an IP address and port", setting.raw),
                FIX,
            );
            None
        }
    }
}
