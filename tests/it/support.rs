//! Shared test harness: a devnode on an ephemeral port, a config file in a temp dir, a sync run, and the
//! comparison of a SQLite database with the node's ground truth, log by log and value by value.
//!
//! The expected column values are computed here from the values the node *encoded* (`TruthLog::values`),
//! independently of `logslice::decode`, so a decoding bug cannot hide on both sides.

use std::path::{Path, PathBuf};

use alloy_dyn_abi::DynSolValue;
use alloy_json_abi::{Event, JsonAbi};
use alloy_primitives::{hex, Address, B256};
use devnode::{contracts, DevNode, DevNodeConfig, GroundTruth, TruthLog};

use crate::pg::TestSchema;
use logslice::pipeline::{self, SyncReport, Target};
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Row};
use tokio_util::sync::CancellationToken;

/// The key every test devnode accepts.
pub const KEY: &str = "test-key";

/// A devnode config with a small chain (`blocks` blocks) and no faults. Its logs carry `blockTimestamp`,
/// as most real nodes' do, so block timestamps (on by default, and compared with the ground truth by
/// [`assert_db_matches_truth`]) read no header: request counts stay those of the logs alone, and a
/// 100,000-block chain is not also read header by header. `timestamps.rs` covers the header path.
pub fn node_config(blocks: u64) -> DevNodeConfig {
    let mut config = DevNodeConfig {
        key: KEY.into(),
        ..DevNodeConfig::default()
    };
    config.chain.blocks = blocks;
    config.chain.log_timestamps = true;
    config
}

/// A configured contract as the tests know it.
#[derive(Debug, Clone)]
pub struct Contract {
    /// `name` in config.toml.
    pub name: &'static str,
    /// Its address.
    pub address: Address,
    /// ABI file under `abis/`.
    pub abi: &'static str,
    /// Selected events (empty = all).
    pub events: &'static [&'static str],
    /// `start_block`.
    pub start_block: u64,
}

/// The example config's contracts.
pub fn all_contracts() -> Vec<Contract> {
    vec![
        Contract {
            name: "token_a",
            address: contracts::TOKEN_A,
            abi: "erc20.json",
            events: &[],
            start_block: 0,
        },
        Contract {
            name: "token_b",
            address: contracts::TOKEN_B,
            abi: "erc20.json",
            events: &["Transfer"],
            start_block: 0,
        },
        Contract {
            name: "pair",
            address: contracts::PAIR,
            abi: "uniswap_v2_pair.json",
            events: &[],
            start_block: 0,
        },
        Contract {
            name: "misc",
            address: contracts::MISC,
            abi: "misc.json",
            events: &[],
            start_block: 0,
        },
    ]
}

pub fn abi_path(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("abis")
        .join(file)
}

/// Which database a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// A SQLite file in the test's temp dir.
    Sqlite,
    /// A schema of the test's own on the Postgres at `LOGSLICE_TEST_PG`.
    Postgres,
}

/// The `[[contracts]]` tables of `contracts`.
pub fn contracts_toml(contracts: &[Contract]) -> String {
    contracts_toml_on(contracts, None)
}

/// The `[[contracts]]` tables of `contracts`, each with `chain = "NAME"` when `chain` is given.
pub fn contracts_toml_on(contracts: &[Contract], chain: Option<&str>) -> String {
    let chain = chain.map_or_else(String::new, |name| format!("chain = \"{name}\"\n"));
    let mut text = String::new();
    for c in contracts {
        text.push_str(&format!(
            "\n[[contracts]]\nname = \"{}\"\n{chain}address = \"{:#x}\"\nabi = \"{}\"\nstart_block = {}\n",
            c.name,
            c.address,
            abi_path(c.abi).display(),
            c.start_block
        ));
        if !c.events.is_empty() {
            let names: Vec<String> = c.events.iter().map(|e| format!("\"{e}\"")).collect();
            text.push_str(&format!("events = [{}]\n", names.join(", ")));
        }
    }
    text
}

/// A test's working directory: config and database.
pub struct Workdir {
    /// Kept alive for the test.
    pub dir: tempfile::TempDir,
    /// The Postgres schema (dropped with the workdir).
    pub schema: Option<TestSchema>,
}

impl Workdir {
    /// A fresh temp dir with a SQLite database.
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            schema: None,
        }
    }

    /// A fresh temp dir and a fresh database of `backend`.
    pub async fn with(backend: Backend) -> Self {
        let schema = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(TestSchema::new().await),
        };
        Self {
            dir: tempfile::tempdir().expect("temp dir"),
            schema,
        }
    }

    /// `<dir>/logslice.db` (the SQLite file).
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("logslice.db")
    }

    /// The `[database]` keys of this test's database.
    pub fn database_toml(&self) -> String {
        match &self.schema {
            None => format!("url = \"sqlite://{}\"", self.db().display()),
            Some(schema) => format!(
                "url = \"{}\"\nschema = \"{}\"",
                schema.secret_url().expose(),
                schema.name
            ),
        }
    }

    /// Writes `config.toml` for `url` and `contracts`; `node_extra` and `sync_extra` are added TOML lines.
    pub fn write_config(
        &self,
        url: &str,
        contracts: &[Contract],
        node_extra: &str,
        sync_extra: &str,
    ) -> PathBuf {
        let mut text = format!(
            "[node]\nurl = \"{url}\"\nrequests_per_second = 10000\nmax_retries = 12\ninitial_backoff = \"5ms\"\nmax_backoff = \"50ms\"\nrequest_timeout = \"5s\"\n{node_extra}\n\
             [database]\n{}\n\n[sync]\n{sync_extra}\n",
            self.database_toml()
        );
        text.push_str(&contracts_toml(contracts));
        let path = self.dir.path().join("config.toml");
        std::fs::write(&path, text).expect("write config");
        path
    }

    async fn reader(&self) -> Option<Reader> {
        match &self.schema {
            None => SqliteConnectOptions::new()
                .filename(self.db())
                .read_only(true)
                .connect()
                .await
                .ok()
                .map(Reader::Sqlite),
            Some(schema) => Some(Reader::Postgres(schema.connect().await)),
        }
    }
}

/// A read-only connection to a test's database; every value is read as text.
enum Reader {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Reader {
    fn backend(&self) -> Backend {
        match self {
            Reader::Sqlite(_) => Backend::Sqlite,
            Reader::Postgres(_) => Backend::Postgres,
        }
    }

    /// Runs `sql`, whose every column is text, and returns the rows.
    async fn texts(&mut self, sql: &str) -> Vec<Vec<String>> {
        fn collect<R: Row>(rows: Vec<R>) -> Vec<Vec<String>>
        where
            for<'r> String: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
            usize: sqlx::ColumnIndex<R>,
        {
            rows.iter()
                .map(|row| (0..row.len()).map(|i| row.get::<String, _>(i)).collect())
                .collect()
        }
        match self {
            Reader::Sqlite(conn) => collect(
                sqlx::query(sql)
                    .fetch_all(conn)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}")),
            ),
            Reader::Postgres(conn) => collect(
                sqlx::query(sql)
                    .fetch_all(conn)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}")),
            ),
        }
    }

    /// A column as text: `quote()` in SQLite (so types show), `::text` in Postgres.
    fn as_text(&self, column: &str) -> String {
        match self {
            Reader::Sqlite(_) => format!("quote(\"{column}\")"),
            Reader::Postgres(_) => format!("coalesce(\"{column}\"::text, 'NULL')"),
        }
    }

    async fn columns(&mut self, table: &str) -> Vec<String> {
        let sql = match self {
            Reader::Sqlite(_) => format!("SELECT name FROM pragma_table_info('{table}') ORDER BY cid"),
            Reader::Postgres(_) => format!(
                "SELECT column_name::text FROM information_schema.columns WHERE table_schema = current_schema() \
                 AND table_name = '{table}' ORDER BY ordinal_position"
            ),
        };
        self.texts(&sql)
            .await
            .into_iter()
            .map(|mut row| row.remove(0))
            .collect()
    }
}

/// Loads a config file and syncs it to `target` in-process.
pub async fn sync(config: &Path, target: Target) -> Result<SyncReport, pipeline::Error> {
    let config =
        logslice::config::load(config).unwrap_or_else(|e| panic!("test config invalid: {e}"));
    pipeline::sync(&config, target, CancellationToken::new()).await
}

/// Starts a devnode.
pub async fn start(config: DevNodeConfig) -> DevNode {
    DevNode::start(config).await.expect("devnode starts")
}

/// The events of an ABI file by name.
fn events_of(file: &str) -> Vec<Event> {
    let text = std::fs::read_to_string(abi_path(file)).expect("abi file");
    let abi: JsonAbi = serde_json::from_str(&text).expect("abi parses");
    abi.events().cloned().collect()
}

/// How a log is recognised as each configured event of `c`.
enum MatchKey {
    /// A named event: topic0 is its selector, and the topic count its own.
    Named { selector: B256, n_topics: usize },
    /// An anonymous event: the node emitted it (`TruthLog::event`) with its topic count.
    Anonymous { name: String, n_topics: usize },
}

fn match_keys(c: &Contract) -> Vec<MatchKey> {
    events_of(c.abi)
        .into_iter()
        .filter(|event| c.events.is_empty() || c.events.contains(&event.name.as_str()))
        .map(|event| {
            let n_indexed = event.inputs.iter().filter(|param| param.indexed).count();
            if event.anonymous {
                MatchKey::Anonymous {
                    n_topics: n_indexed,
                    name: event.name,
                }
            } else {
                MatchKey::Named {
                    selector: event.selector(),
                    n_topics: n_indexed + 1,
                }
            }
        })
        .collect()
}

/// What the database must hold: the truth logs of configured contracts from their start blocks that a
/// configured event takes, with the names of those contracts.
///
/// A named event takes a log whose topic0 is its selector and whose topic count is its own. An anonymous
/// event takes only logs of its exact shape; of the logs the devnode emits, those are the event's own (a
/// log of another event of the contract's ABI has that event's topic0; the test ABIs declare what their
/// contracts emit, or, where they leave an event out, give no anonymous event its exact shape). So a log is
/// stored when the node emitted it as a configured anonymous event, or with a configured named event's
/// topic0; which typed table it belongs to is decided by what the node emitted (`TruthLog::event`).
pub fn expected_logs(
    truth: &GroundTruth,
    contracts: &[Contract],
    to: u64,
) -> Vec<(TruthLog, Vec<&'static str>)> {
    expected_logs_within(truth, contracts, 0, to)
}

/// [`expected_logs`] of blocks `from` to `to`.
fn expected_logs_within(
    truth: &GroundTruth,
    contracts: &[Contract],
    from: u64,
    to: u64,
) -> Vec<(TruthLog, Vec<&'static str>)> {
    let keys: Vec<Vec<MatchKey>> = contracts.iter().map(match_keys).collect();
    let mut out = Vec::new();
    for log in truth.logs(from, to) {
        let mut tables = Vec::new();
        for (c, keys) in contracts.iter().zip(&keys) {
            if c.address != log.address || c.start_block > log.block_number {
                continue;
            }
            let matched = keys.iter().any(|key| match key {
                MatchKey::Named { selector, n_topics } => {
                    log.topics.len() == *n_topics && log.topics.first() == Some(selector)
                }
                MatchKey::Anonymous { name, n_topics } => {
                    log.topics.len() == *n_topics && log.event == name.as_str()
                }
            });
            if matched {
                tables.push(c.name);
            }
        }
        if !tables.is_empty() {
            out.push((log, tables));
        }
    }
    out
}

/// `column` (an integer, or a Postgres numeric) as decimal text.
pub fn int_text(backend: Backend, column: &str) -> String {
    match backend {
        Backend::Sqlite => format!("CAST({column} AS TEXT)"),
        Backend::Postgres => format!("{column}::text"),
    }
}

/// A hash, address, topic or data column of the raw table as `docs/schema.md`'s text, `0x` + lowercase hex:
/// itself on SQLite, its BYTEA as that text on Postgres (migration 0007).
pub fn raw_hex_text(backend: Backend, column: &str) -> String {
    match backend {
        Backend::Sqlite => column.to_owned(),
        Backend::Postgres => format!("'0x' || encode({column}, 'hex')"),
    }
}

/// Every raw row from block `from` on, in log order, as text: block number, block hash, transaction hash and
/// index, log index, address, four topics (empty when absent), data, and the block timestamp (`NULL` when
/// absent) when `stamped`.
async fn raw_rows(
    db: &mut Reader,
    stamped: bool,
    from: u64,
    chain: Option<u64>,
) -> Vec<Vec<String>> {
    let of_chain = chain_filter(chain);
    let backend = db.backend();
    let int = |c: &str| int_text(backend, c);
    let hex = |c: &str| raw_hex_text(backend, c);
    db.texts(&format!(
        "SELECT {}, {}, {}, {}, {}, {}, coalesce({}, ''), coalesce({}, ''), \
         coalesce({}, ''), coalesce({}, ''), {}{} FROM logs WHERE block_number >= {from}{of_chain} \
         ORDER BY logs.block_number, logs.log_index",
        int("block_number"),
        hex("block_hash"),
        hex("transaction_hash"),
        int("transaction_index"),
        int("log_index"),
        hex("address"),
        hex("topic0"),
        hex("topic1"),
        hex("topic2"),
        hex("topic3"),
        hex("data"),
        if stamped {
            format!(", coalesce({}, 'NULL')", int("block_timestamp"))
        } else {
            String::new()
        }
    ))
    .await
}

/// [`raw_rows`] of the test's database, with the block timestamp.
pub async fn stamped_raw_rows(work: &Workdir) -> Vec<Vec<String>> {
    let mut db = work.reader().await.expect("open the database");
    raw_rows(&mut db, true, 0, None).await
}

fn hx(bytes: impl AsRef<[u8]>) -> String {
    hex::encode_prefixed(bytes)
}

fn text_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

/// Asserts the test's database holds exactly the ground truth up to `to`: every raw row, and every typed row
/// with every decoded value. Returns the number of raw logs compared.
pub async fn assert_db_matches_truth(
    work: &Workdir,
    truth: &GroundTruth,
    contracts: &[Contract],
    to: u64,
) -> usize {
    assert_db_holds(work, truth, contracts, expected_logs(truth, contracts, to)).await
}

/// [`assert_db_matches_truth`] for blocks `from` to `to` only: every row the database holds from `from` on,
/// raw and typed, must be the ground truth's (what lies below `from` is not read). For checks after each of
/// many small changes near the head, where reading the whole database every time would dominate a test.
pub async fn assert_db_matches_truth_within(
    work: &Workdir,
    truth: &GroundTruth,
    contracts: &[Contract],
    from: u64,
    to: u64,
) -> usize {
    let expected = expected_logs_within(truth, contracts, from, to);
    assert_db_holds_from(work, truth, contracts, expected, from, None).await
}

/// Asserts the test's database holds exactly `expected` (ground-truth logs with the contracts that store
/// each, in log order): every raw row, and every typed row with every decoded value. Returns the number of
/// raw logs compared.
pub async fn assert_db_holds(
    work: &Workdir,
    truth: &GroundTruth,
    contracts: &[Contract],
    expected: Vec<(TruthLog, Vec<&'static str>)>,
) -> usize {
    assert_db_holds_from(work, truth, contracts, expected, 0, None).await
}

/// `AND chain_id = N` for one chain's rows, nothing for every row.
fn chain_filter(chain: Option<u64>) -> String {
    chain.map_or_else(String::new, |id| format!(" AND chain_id = {id}"))
}

/// [`assert_db_matches_truth`] for the rows of one chain (`chain_id`) of a database that holds several.
pub async fn assert_chain_matches_truth(
    work: &Workdir,
    chain_id: u64,
    truth: &GroundTruth,
    contracts: &[Contract],
    to: u64,
) -> usize {
    let expected = expected_logs(truth, contracts, to);
    assert_db_holds_from(work, truth, contracts, expected, 0, Some(chain_id)).await
}

/// [`assert_db_holds`] for the rows from block `from` on (of `chain` only, when given); `expected` holds no
/// log below it.
async fn assert_db_holds_from(
    work: &Workdir,
    truth: &GroundTruth,
    contracts: &[Contract],
    expected: Vec<(TruthLog, Vec<&'static str>)>,
    from: u64,
    chain: Option<u64>,
) -> usize {
    let of_chain = chain_filter(chain);
    let mut db = work.reader().await.expect("open the database");
    let backend = db.backend();

    // Raw rows; with `block_timestamp` (block_timestamps = true, the default), each row's equals its block
    // header's in the node.
    let stamped = db
        .columns("logs")
        .await
        .iter()
        .any(|c| c == "block_timestamp");
    // One timestamp per block, not one per row (`GroundTruth::timestamp` reads the header alone: generating
    // each whole block for it took a third of a comparison's time).
    let timestamps: std::collections::HashMap<u64, String> = if stamped {
        let mut blocks: Vec<u64> = expected.iter().map(|(log, _)| log.block_number).collect();
        blocks.dedup();
        blocks
            .into_iter()
            .map(|block| {
                let timestamp = truth
                    .timestamp(block)
                    .unwrap_or_else(|| panic!("block {block} is canonical"));
                (block, timestamp.to_string())
            })
            .collect()
    } else {
        Default::default()
    };
    let timestamp_of = |block: u64| timestamps[&block].clone();
    let rows = raw_rows(&mut db, stamped, from, chain).await;
    assert_eq!(
        rows.len(),
        expected.len(),
        "raw log count differs from the ground truth"
    );
    for (row, (log, _)) in rows.iter().zip(&expected) {
        let topic = |i: usize| log.topics.get(i).map(hx).unwrap_or_default();
        let mut wanted = vec![
            log.block_number.to_string(),
            hx(log.block_hash),
            hx(log.transaction_hash),
            log.transaction_index.to_string(),
            log.log_index.to_string(),
            hx(log.address),
            topic(0),
            topic(1),
            topic(2),
            topic(3),
            hx(&log.data),
        ];
        if stamped {
            wanted.push(timestamp_of(log.block_number));
        }
        assert_eq!(
            row, &wanted,
            "raw row differs at block {} log {}",
            log.block_number, log.log_index
        );
    }

    // Typed rows, table by table (a factory's children are one contract of many addresses).
    let mut seen = std::collections::HashSet::new();
    for c in contracts.iter().filter(|c| seen.insert(c.name)) {
        for event in events_of(c.abi) {
            if !(c.events.is_empty() || c.events.contains(&event.name.as_str())) {
                continue;
            }
            let table = format!("{}_{}", c.name, snake(&event.name));
            let mut columns = db.columns(&table).await;
            // docs/schema.md: chain_id first of the fixed columns (last in a Postgres table migration 9
            // added it to in place); the rest compared without it.
            assert!(
                columns.iter().any(|c| c == "chain_id"),
                "{table} has chain_id: {columns:?}"
            );
            columns.retain(|c| c != "chain_id");
            // docs/schema.md: block_timestamp after address, before the parameters, exactly when logs has it.
            let n_fixed = 5 + usize::from(stamped);
            assert_eq!(
                columns.get(5).is_some_and(|c| c == "block_timestamp"),
                stamped,
                "{table} has block_timestamp exactly when logs has it: {columns:?}"
            );
            assert_eq!(
                columns.len(),
                n_fixed + event.inputs.len(),
                "table {table} has one column per parameter"
            );
            let select: Vec<String> = columns.iter().map(|c| db.as_text(c)).collect();
            let rows = db
                .texts(&format!(
                    "SELECT {} FROM \"{table}\" WHERE block_number >= {from}{of_chain} \
                     ORDER BY block_number, log_index",
                    select.join(", ")
                ))
                .await;
            let wanted: Vec<&TruthLog> = expected
                .iter()
                .filter(|(log, tables)| tables.contains(&c.name) && log.event == event.name)
                .map(|(log, _)| log)
                .collect();
            assert_eq!(rows.len(), wanted.len(), "row count of {table}");
            for (row, log) in rows.iter().zip(wanted) {
                let text = |s: String| match backend {
                    Backend::Sqlite => text_literal(&s),
                    Backend::Postgres => s,
                };
                let mut fixed = vec![
                    log.block_number.to_string(),
                    text(hx(log.block_hash)),
                    text(hx(log.transaction_hash)),
                    log.log_index.to_string(),
                    text(hx(log.address)),
                ];
                if stamped {
                    fixed.push(timestamp_of(log.block_number));
                }
                assert_eq!(
                    row[..n_fixed],
                    fixed[..],
                    "fixed columns of {table} at block {} log {}",
                    log.block_number,
                    log.log_index
                );
                let mut topic_idx = usize::from(!event.anonymous);
                for (i, (param, value)) in event.inputs.iter().zip(&log.values).enumerate() {
                    let topic = if param.indexed {
                        topic_idx += 1;
                        Some(log.topics[topic_idx - 1])
                    } else {
                        None
                    };
                    let what = format!(
                        "{table}.{} at block {} log {}",
                        columns[n_fixed + i],
                        log.block_number,
                        log.log_index
                    );
                    check_value(backend, &row[n_fixed + i], value, topic, &what);
                }
            }
        }
    }
    expected.len()
}

fn snake(name: &str) -> String {
    let mut out = String::new();
    for (i, ch) in name.chars().enumerate() {
        if ch.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(ch.to_ascii_lowercase());
    }
    out
}

/// Compares one value as the database shows it (SQLite `quote()`, Postgres `::text`) with the value the
/// node encoded.
fn check_value(
    backend: Backend,
    actual: &str,
    value: &DynSolValue,
    topic: Option<B256>,
    what: &str,
) {
    let sqlite = backend == Backend::Sqlite;
    let text = |s: &str| {
        if sqlite {
            text_literal(s)
        } else {
            s.to_owned()
        }
    };
    let dynamic = matches!(
        value,
        DynSolValue::String(_)
            | DynSolValue::Bytes(_)
            | DynSolValue::Array(_)
            | DynSolValue::Tuple(_)
    ) || matches!(value, DynSolValue::FixedArray(_));
    if let (Some(topic), true) = (topic, dynamic) {
        // An indexed dynamic value is stored as its topic hash.
        assert_eq!(actual, text(&hx(topic)), "{what}");
        return;
    }
    let wanted = match value {
        // SQLite: INTEGER up to 63 bits, exact decimal TEXT beyond; Postgres: NUMERIC(78,0) for all.
        DynSolValue::Uint(u, bits) if *bits <= 56 || !sqlite => u.to_string(),
        DynSolValue::Uint(u, _) => text(&u.to_string()),
        DynSolValue::Int(i, bits) if *bits <= 64 || !sqlite => i.to_string(),
        DynSolValue::Int(i, _) => text(&i.to_string()),
        DynSolValue::Address(a) => text(&hx(a)),
        DynSolValue::FixedBytes(w, size) => text(&hx(&w[..*size])),
        DynSolValue::Bool(b) => match (sqlite, *b) {
            (true, b) => if b { "1" } else { "0" }.to_owned(),
            (false, b) => b.to_string(),
        },
        DynSolValue::Bytes(b) if sqlite => format!("X'{}'", hex::encode_upper(b)),
        DynSolValue::Bytes(b) => format!("\\x{}", hex::encode(b)),
        // Postgres TEXT cannot hold NUL: the sink writes U+FFFD instead (README).
        DynSolValue::String(s) => text(&if sqlite {
            s.clone()
        } else {
            s.replace('\0', "\u{FFFD}")
        }),
        DynSolValue::Array(_) | DynSolValue::FixedArray(_) | DynSolValue::Tuple(_) => {
            let inner = if sqlite {
                actual
                    .strip_prefix('\'')
                    .and_then(|s| s.strip_suffix('\''))
                    .unwrap_or_else(|| panic!("{what}: JSON column holds {actual}"))
                    .replace("''", "'")
            } else {
                actual.to_owned()
            };
            let parsed: serde_json::Value =
                serde_json::from_str(&inner).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(parsed, json_of(value), "{what}");
            return;
        }
        other => panic!("{what}: the devnode encodes no {other:?}"),
    };
    assert_eq!(actual, wanted, "{what}");
}

/// The JSON form `docs/schema.md` gives arrays and tuples: integers as decimal strings, bytes as hex.
fn json_of(value: &DynSolValue) -> serde_json::Value {
    use serde_json::Value;
    match value {
        DynSolValue::Uint(u, _) => Value::String(u.to_string()),
        DynSolValue::Int(i, _) => Value::String(i.to_string()),
        DynSolValue::Address(a) => Value::String(hx(a)),
        DynSolValue::FixedBytes(w, size) => Value::String(hx(&w[..*size])),
        DynSolValue::Bool(b) => Value::Bool(*b),
        DynSolValue::Bytes(b) => Value::String(hx(b)),
        DynSolValue::String(s) => Value::String(s.clone()),
        DynSolValue::Array(items) | DynSolValue::FixedArray(items) | DynSolValue::Tuple(items) => {
            Value::Array(items.iter().map(json_of).collect())
        }
        other => panic!("the devnode encodes no {other:?}"),
    }
}

/// A contract's checkpoint; `None` while the database, the table or the row does not exist yet.
pub async fn checkpoint(work: &Workdir, contract: &str) -> Option<i64> {
    let sql =
        format!("SELECT CAST(block_number AS TEXT) FROM checkpoints WHERE contract = '{contract}'");
    let text: Option<String> = match work.reader().await? {
        Reader::Sqlite(mut conn) => sqlx::query_scalar(&sql)
            .fetch_optional(&mut conn)
            .await
            .ok()
            .flatten(),
        Reader::Postgres(mut conn) => sqlx::query_scalar(&sql)
            .fetch_optional(&mut conn)
            .await
            .ok()
            .flatten(),
    };
    text.and_then(|t| t.parse().ok())
}

/// The columns of `table`, in order (empty when it does not exist).
pub async fn columns(work: &Workdir, table: &str) -> Vec<String> {
    let mut db = work.reader().await.expect("open the database");
    db.columns(table).await
}

/// Runs one statement on the test's database with a writable connection (to stage a database state).
pub async fn execute(work: &Workdir, sql: &str) {
    match &work.schema {
        None => {
            let mut conn = SqliteConnectOptions::new()
                .filename(work.db())
                .connect()
                .await
                .expect("open the database");
            sqlx::query(sql).execute(&mut conn).await.expect(sql);
        }
        Some(schema) => {
            let mut conn = schema.connect().await;
            sqlx::query(sql).execute(&mut conn).await.expect(sql);
        }
    }
}

/// How many rows `table` holds; `None` while the database or the table does not exist.
pub async fn row_count(work: &Workdir, table: &str) -> Option<i64> {
    let sql = format!("SELECT CAST(count(*) AS TEXT) FROM \"{table}\"");
    let text: Option<String> = match work.reader().await? {
        Reader::Sqlite(mut conn) => sqlx::query_scalar(&sql).fetch_one(&mut conn).await.ok(),
        Reader::Postgres(mut conn) => sqlx::query_scalar(&sql).fetch_one(&mut conn).await.ok(),
    };
    text.and_then(|t| t.parse().ok())
}

/// Runs an `async fn(Backend)` scenario as two tests, `<name>::sqlite` and `<name>::postgres`.
#[macro_export]
macro_rules! both_backends {
    ($scenario:ident) => {
        mod $scenario {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                super::$scenario($crate::support::Backend::Sqlite).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                super::$scenario($crate::support::Backend::Postgres).await
            }
        }
    };
}

/// The rows of `sql` on the test's database, every column selected as text.
pub async fn query_texts(work: &Workdir, sql: &str) -> Vec<Vec<String>> {
    let mut db = work.reader().await.expect("open the database");
    db.texts(sql).await
}

/// A `logslice sync --to <to>` child process held where a test hook makes it wait (`hold_env` set), once
/// it logged `message`; its stderr is read on a thread of its own.
pub struct Held {
    child: std::process::Child,
    reader: std::thread::JoinHandle<Vec<String>>,
}

impl Held {
    /// Spawns the sync and waits (up to two minutes) until it holds; panics with its stderr when it
    /// never does.
    pub async fn sync(config: &Path, to: u64, hold_env: &str, message: &'static str) -> Self {
        use std::io::{BufRead, BufReader};
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
            .args(["sync", "--to", &to.to_string(), "--config"])
            .arg(config)
            .env_remove("RUST_LOG")
            .env(hold_env, "1")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn logslice");
        let stderr = child.stderr.take().expect("piped stderr");
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.contains(message) {
                    let _ = held_tx.send(());
                }
                seen.push(line);
            }
            seen
        });
        let held = tokio::task::spawn_blocking(move || {
            held_rx.recv_timeout(std::time::Duration::from_secs(120))
        })
        .await
        .expect("join");
        if held.is_err() {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "the child never held ({message}):\n{}",
                reader.join().expect("reader").join("\n")
            );
        }
        Self { child, reader }
    }

    /// SIGKILL, then reaps the child.
    pub fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reap");
        self.reader.join().expect("reader");
    }
}

/// What one run of the binary printed.
pub struct Run {
    /// Its exit code.
    pub code: Option<i32>,
    /// What it wrote on stderr.
    pub stderr: String,
}

/// Runs the binary with `args` and `--config config`, `RUST_LOG` unset, off the async runtime (the test's devnode answers on it meanwhile).
pub async fn run(args: &[&str], config: &Path) -> Run {
    let mut args: Vec<String> = args.iter().map(ToString::to_string).collect();
    args.extend(["--config".to_owned(), config.display().to_string()]);
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
            .args(&args)
            .env_remove("RUST_LOG")
            .output()
            .expect("run logslice");
        Run {
            code: out.status.code(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .expect("join")
}
