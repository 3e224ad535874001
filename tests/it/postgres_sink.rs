//! The Postgres sink against a real server, each test in a schema of its own, driving [`Sink`] with batches
//! built here; and the behaviours both backends share (replays, checkpoints, a changed ABI, another chain),
//! checked on SQLite too through the same helper so the two are held to one behaviour.

use std::collections::HashMap;

use logslice::config::SecretUrl;
use logslice::decode::{Column, ColumnKind, Value};
use logslice::primitives::{Address, BlockRange, Bytes, Log, B256};
use logslice::sink::{
    self, Batch, Checkpoint, ContractSpec, PostgresSink, Sink, SqliteSink, TableSpec, TypedRow,
};
use sqlx::Executor;

use crate::pg::TestSchema;

const UINT256_MAX: &str =
    "115792089237316195423570985008687907853269984665640564039457584007913129639935";
const INT256_MIN: &str =
    "-57896044618658097711785492504343953926634992332820282019728792003956564819968";

/// Both backends, so a shared behaviour is one function called twice.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

/// Where a test database lives; dropping it removes the database.
enum Place {
    Dir(#[allow(dead_code)] tempfile::TempDir),
    Schema(TestSchema),
}

/// An open sink and its place.
pub(crate) struct Db {
    pub(crate) sink: Sink,
    place: Place,
}

impl Db {
    pub(crate) async fn open(backend: Backend) -> Db {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("a temp dir");
                let sink = SqliteSink::open(&dir.path().join("test.db"))
                    .await
                    .expect("SQLite opens");
                Db {
                    sink: Sink::Sqlite(sink),
                    place: Place::Dir(dir),
                }
                .bound()
                .await
            }
            Backend::Postgres => {
                let schema = TestSchema::new().await;
                let sink = Db::open_postgres(&schema).await;
                Db {
                    sink,
                    place: Place::Schema(schema),
                }
                .bound()
                .await
            }
        }
    }

    /// Bound to chain 1 as the chain named `default`, as `sync` binds a config with `[node]` alone.
    async fn bound(mut self) -> Db {
        self.sink
            .bind_chain(sink::DEFAULT_CHAIN, 1)
            .await
            .expect("bind the chain");
        self
    }

    async fn open_postgres(schema: &TestSchema) -> Sink {
        match PostgresSink::open(&schema.secret_url(), Some(&schema.name)).await {
            Ok(sink) => Sink::Postgres(sink),
            Err(err) => panic!("Postgres sink opens: {err}"),
        }
    }

    /// Another sink on the same database (SQLite: another connection to the file; Postgres: another pool
    /// on the schema), not bound to a chain.
    pub(crate) async fn reopen(&self) -> Sink {
        match &self.place {
            Place::Dir(dir) => Sink::Sqlite(
                SqliteSink::open(&dir.path().join("test.db"))
                    .await
                    .expect("SQLite opens again"),
            ),
            Place::Schema(schema) => Db::open_postgres(schema).await,
        }
    }

    pub(crate) fn schema(&self) -> &TestSchema {
        match &self.place {
            Place::Schema(schema) => schema,
            Place::Dir(_) => panic!("not a Postgres test"),
        }
    }

    /// Rows in `table`.
    pub(crate) async fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM \"{table}\"");
        match &self.sink {
            Sink::Sqlite(s) => sqlx::query_scalar(&sql).fetch_one(s.pool()).await,
            Sink::Postgres(s) => sqlx::query_scalar(&sql).fetch_one(s.pool()).await,
        }
        .expect("counting rows")
    }

    /// Drops a table behind the sink's back, so the next commit that writes it fails.
    async fn drop_table(&self, table: &str) {
        let sql = format!("DROP TABLE \"{table}\"");
        match &self.sink {
            Sink::Sqlite(s) => s.pool().execute(sql.as_str()).await.map(|_| ()),
            Sink::Postgres(s) => s.pool().execute(sql.as_str()).await.map(|_| ()),
        }
        .expect("dropping a table");
    }

    /// The raw logs as stored, in block and log order.
    pub(crate) async fn raw_logs(&self) -> Vec<RawRow> {
        let backend = match &self.sink {
            Sink::Sqlite(_) => crate::support::Backend::Sqlite,
            Sink::Postgres(_) => crate::support::Backend::Postgres,
        };
        let hex = |c: &str| crate::support::raw_hex_text(backend, c);
        let sql = format!(
            "SELECT block_number, {}, {}, CAST(transaction_index AS BIGINT), CAST(log_index AS BIGINT), \
             {}, {}, {}, {}, {}, {} FROM logs ORDER BY block_number, log_index",
            hex("block_hash"),
            hex("transaction_hash"),
            hex("address"),
            hex("topic0"),
            hex("topic1"),
            hex("topic2"),
            hex("topic3"),
            hex("data"),
        );
        match &self.sink {
            Sink::Sqlite(s) => sqlx::query_as(&sql).fetch_all(s.pool()).await,
            Sink::Postgres(s) => sqlx::query_as(&sql).fetch_all(s.pool()).await,
        }
        .expect("reading raw logs")
    }
}

pub(crate) type RawRow = (
    i64,
    String,
    String,
    i64,
    i64,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
);

/// A raw row as `docs/schema.md` says it is stored.
pub(crate) fn raw_row(log: &Log) -> RawRow {
    let topic = |i: usize| log.topics.get(i).map(hex);
    (
        i64::try_from(log.block_number).unwrap(),
        hex(log.block_hash),
        hex(log.transaction_hash),
        i64::try_from(log.transaction_index).unwrap(),
        i64::try_from(log.log_index).unwrap(),
        hex(log.address),
        topic(0),
        topic(1),
        topic(2),
        topic(3),
        hex(&log.data),
    )
}

fn hex(bytes: impl AsRef<[u8]>) -> String {
    sink::hex::encode(bytes)
}

pub(crate) fn word(n: u64) -> B256 {
    B256::left_padding_from(&n.to_be_bytes())
}

/// A log of block `block` at `log_index`; 0 to 4 topics depending on the index, so NULL topics are covered.
pub(crate) fn log(block: u64, log_index: u64) -> Log {
    Log {
        block_number: block,
        block_hash: word(block * 1_000 + 7),
        transaction_hash: word(block * 1_000 + log_index),
        transaction_index: log_index / 2,
        log_index,
        address: Address::repeat_byte(0xab),
        topics: (0..log_index % 5).map(|t| word(t + 1)).collect(),
        data: Bytes::from([0u8, 1, 2, 0xff].repeat(log_index as usize)),
        removed: false,
        block_timestamp: Some(1_700_000_000 + block * 12),
    }
}

pub(crate) fn column(name: &str, sol_type: &str, kind: ColumnKind) -> Column {
    Column {
        name: name.to_owned(),
        param: name.to_owned(),
        sol_type: sol_type.to_owned(),
        kind,
    }
}

/// One table with a column of every [`ColumnKind`] (the two integer kinds twice, for both signs).
pub(crate) fn everything_table() -> TableSpec {
    TableSpec {
        name: "demo_everything".to_owned(),
        columns: vec![
            column("small", "int64", ColumnKind::Int64),
            column("big", "uint256", ColumnKind::BigInt),
            column("neg", "int256", ColumnKind::BigInt),
            column("who", "address", ColumnKind::Address),
            column("tag", "bytes2", ColumnKind::FixedBytes),
            column("flag", "bool", ColumnKind::Bool),
            column("blob", "bytes", ColumnKind::Bytes),
            column("note", "string", ColumnKind::Text),
            column("list", "(uint256,bytes)[]", ColumnKind::Json),
            column("topic", "string", ColumnKind::TopicHash),
        ],
    }
}

pub(crate) fn contract() -> ContractSpec {
    ContractSpec {
        name: "demo".to_owned(),
        addresses: vec![Address::repeat_byte(0xab)],
        events: vec!["Everything(...) -> demo_everything".to_owned()],
        start_block: 100,
        filters: None,
    }
}

/// The values of the typed row of log `log_idx`: extremes on the first, a NUL string, JSON with a NUL.
fn values(log_idx: usize) -> Vec<Value> {
    let first = log_idx == 0;
    vec![
        Value::Int(if first { i64::MIN } else { log_idx as i64 }),
        Value::BigInt(if first { UINT256_MAX } else { "0" }.parse().unwrap()),
        Value::BigInt(if first { INT256_MIN } else { "-1" }.parse().unwrap()),
        Value::Text(format!("0x{}", "0a".repeat(20))),
        Value::Text("0x00ff".to_owned()),
        Value::Bool(first),
        Value::Bytes(vec![0, 0, 1, 0]),
        Value::Text(if first {
            "nul\0inside".to_owned()
        } else {
            format!("row {log_idx} ✓")
        }),
        Value::Json(if first {
            serde_json::json!([["1", "0x00"], ["a\0b"]]).to_string()
        } else {
            serde_json::json!([]).to_string()
        }),
        Value::Text(hex(word(log_idx as u64))),
    ]
}

/// Logs of `blocks` (three per block), a typed row for each, and the contract's checkpoint at the last block,
/// as one range (as the backfill's batches have it).
pub(crate) fn batch(blocks: std::ops::RangeInclusive<u64>) -> Batch {
    let (first, last) = (*blocks.start(), *blocks.end());
    let logs: Vec<Log> = blocks
        .flat_map(|block| (0..3).map(move |log_index| log(block, log_index)))
        .collect();
    let typed = (0..logs.len())
        .map(|log_idx| TypedRow {
            table: 0,
            log: log_idx,
            values: values(log_idx).into(),
        })
        .collect();
    Batch {
        ranges: vec![BlockRange::new(first, last).expect("first <= last")],
        logs,
        typed,
        checkpoints: vec![Checkpoint {
            contract: "demo".to_owned(),
            block: last,
        }],
        ..Batch::default()
    }
}

pub(crate) async fn prepared(backend: Backend) -> Db {
    let mut db = Db::open(backend).await;
    db.sink
        .prepare(&[everything_table()], &[contract()])
        .await
        .expect("prepare");
    db
}

fn checkpoints(pairs: &[(&str, u64)]) -> HashMap<String, u64> {
    pairs
        .iter()
        .map(|&(name, block)| (name.to_owned(), block))
        .collect()
}

// ---- Behaviours both backends share ----

async fn commits_the_same_batch_twice_once(backend: Backend) {
    let mut db = prepared(backend).await;
    let batch = batch(100..=101);
    db.sink.commit(&batch).await.expect("first commit");
    db.sink.commit(&batch).await.expect("replay");
    assert_eq!(db.count("logs").await, 6);
    assert_eq!(db.count("demo_everything").await, 6);
    let expected: Vec<RawRow> = batch.logs.iter().map(raw_row).collect();
    assert_eq!(db.raw_logs().await, expected);
    db.sink.close().await;
}

#[tokio::test]
async fn committing_the_same_batch_twice_keeps_one_copy_in_postgres() {
    commits_the_same_batch_twice_once(Backend::Postgres).await;
}

#[tokio::test]
async fn committing_the_same_batch_twice_keeps_one_copy_in_sqlite() {
    commits_the_same_batch_twice_once(Backend::Sqlite).await;
}

/// Goal: a batch whose first blocks are committed already (a contract joining below another's checkpoint, a
/// range fetched again after a crash) keeps the rows there and adds the rest. On Postgres such a batch takes
/// the conflict-checked insert, not COPY, which cannot skip a row.
async fn adds_what_an_overlapping_batch_brings(backend: Backend) {
    let mut db = prepared(backend).await;
    db.sink
        .commit(&batch(100..=101))
        .await
        .expect("first commit");
    db.sink
        .commit(&batch(101..=103))
        .await
        .expect("overlapping commit");
    let expected: Vec<RawRow> = batch(100..=103).logs.iter().map(raw_row).collect();
    assert_eq!(db.raw_logs().await, expected);
    assert_eq!(db.count("demo_everything").await, 12);
    db.sink.close().await;
}

#[tokio::test]
async fn an_overlapping_batch_adds_only_its_new_rows_in_postgres() {
    adds_what_an_overlapping_batch_brings(Backend::Postgres).await;
}

#[tokio::test]
async fn an_overlapping_batch_adds_only_its_new_rows_in_sqlite() {
    adds_what_an_overlapping_batch_brings(Backend::Sqlite).await;
}

/// Which unique key the typed table has.
#[derive(Debug, Clone, Copy)]
enum TypedKey {
    /// What `prepare` creates: `(block_number, log_index)` (on SQLite the table's primary key,
    /// `WITHOUT ROWID`).
    Current,
    /// What databases of the version before it hold: `(block_number, log_index, block_hash)`.
    WithHash,
    /// What databases built before that hold: a rowid table unique on `(block_hash, log_index)`, with a
    /// `block_number` index.
    Earlier,
}

impl Db {
    /// Rebuilds the typed table with the key databases of an earlier version have.
    async fn use_an_earlier_typed_key(&self, key: TypedKey) {
        match &self.sink {
            Sink::Sqlite(s) => {
                let sql: String = sqlx::query_scalar(
                    "SELECT sql FROM sqlite_master WHERE name = 'demo_everything'",
                )
                .fetch_one(s.pool())
                .await
                .unwrap();
                let current = "PRIMARY KEY (chain_id, block_number, log_index)) WITHOUT ROWID";
                let (earlier, index) = match key {
                    TypedKey::Current => return,
                    TypedKey::WithHash => (
                        "PRIMARY KEY (block_number, log_index, block_hash)) WITHOUT ROWID",
                        None,
                    ),
                    TypedKey::Earlier => (
                        "UNIQUE (block_hash, log_index))",
                        Some("CREATE INDEX demo_everything_block_number ON demo_everything (block_number)"),
                    ),
                };
                let earlier = sql.replace(current, earlier);
                assert_ne!(earlier, sql, "the current key is spelt as expected: {sql}");
                for statement in ["DROP TABLE demo_everything", earlier.as_str()]
                    .into_iter()
                    .chain(index)
                {
                    s.pool().execute(statement).await.unwrap();
                }
            }
            Sink::Postgres(s) => {
                let statements: &[&str] = match key {
                    TypedKey::Current => return,
                    TypedKey::WithHash => &[
                        "ALTER TABLE demo_everything DROP CONSTRAINT demo_everything_key",
                        "ALTER TABLE demo_everything ADD CONSTRAINT demo_everything_key \
                         UNIQUE (block_number, log_index, block_hash)",
                    ],
                    TypedKey::Earlier => &[
                        "ALTER TABLE demo_everything DROP CONSTRAINT demo_everything_key",
                        "ALTER TABLE demo_everything ADD UNIQUE (block_hash, log_index)",
                        "CREATE INDEX demo_everything_block_number ON demo_everything (block_number)",
                    ],
                };
                for statement in statements {
                    s.pool().execute(*statement).await.unwrap();
                }
            }
        }
    }
}

/// Goal: typed tables with any unique key, the current one in block order or those earlier databases have,
/// take a replayed batch once and lose a log the node reports `removed`, in raw and typed rows alike.
async fn replays_and_removals_are_exact_with_either_typed_key(backend: Backend, key: TypedKey) {
    let mut db = prepared(backend).await;
    db.use_an_earlier_typed_key(key).await;
    let first = batch(100..=101);
    db.sink.commit(&first).await.expect("first commit");
    db.sink.commit(&first).await.expect("replay");
    assert_eq!(db.count("demo_everything").await, 6);

    // Block 101's second log is reported removed; a key that differs in one part only must stay.
    let gone = log(101, 1);
    let mut removal = batch(102..=102);
    removal.removed = vec![
        gone.key(),
        logslice::primitives::LogKey {
            block_hash: word(1),
            ..log(101, 2).key()
        },
    ];
    db.sink.commit(&removal).await.expect("removal");
    let expected: Vec<RawRow> = first
        .logs
        .iter()
        .chain(&removal.logs)
        .filter(|l| l.key() != gone.key())
        .map(raw_row)
        .collect();
    assert_eq!(db.raw_logs().await, expected);
    assert_eq!(db.count("demo_everything").await, 8);
    let typed_keys = "SELECT block_number, CAST(log_index AS BIGINT) FROM demo_everything \
                      ORDER BY block_number, log_index";
    let typed: Vec<(i64, i64)> = match &db.sink {
        Sink::Sqlite(s) => sqlx::query_as(typed_keys).fetch_all(s.pool()).await,
        Sink::Postgres(s) => sqlx::query_as(typed_keys).fetch_all(s.pool()).await,
    }
    .unwrap();
    assert!(!typed.contains(&(101, 1)), "{typed:?}");
    db.sink.close().await;
}

#[tokio::test]
async fn typed_tables_replay_and_remove_exactly_with_the_current_key_in_postgres() {
    replays_and_removals_are_exact_with_either_typed_key(Backend::Postgres, TypedKey::Current)
        .await;
}

#[tokio::test]
async fn typed_tables_replay_and_remove_exactly_with_the_current_key_in_sqlite() {
    replays_and_removals_are_exact_with_either_typed_key(Backend::Sqlite, TypedKey::Current).await;
}

#[tokio::test]
async fn typed_tables_keyed_with_the_hash_replay_and_remove_exactly_in_postgres() {
    replays_and_removals_are_exact_with_either_typed_key(Backend::Postgres, TypedKey::WithHash)
        .await;
}

#[tokio::test]
async fn typed_tables_keyed_with_the_hash_replay_and_remove_exactly_in_sqlite() {
    replays_and_removals_are_exact_with_either_typed_key(Backend::Sqlite, TypedKey::WithHash).await;
}

#[tokio::test]
async fn typed_tables_of_earlier_databases_replay_and_remove_exactly_in_postgres() {
    replays_and_removals_are_exact_with_either_typed_key(Backend::Postgres, TypedKey::Earlier)
        .await;
}

#[tokio::test]
async fn typed_tables_of_earlier_databases_replay_and_remove_exactly_in_sqlite() {
    replays_and_removals_are_exact_with_either_typed_key(Backend::Sqlite, TypedKey::Earlier).await;
}

/// Goal: a checkpoint moves with its rows and never without them. Method: commit two batches, then one whose
/// typed table was dropped behind the sink's back, so the transaction fails after the raw rows went in.
async fn checkpoints_move_with_rows(backend: Backend) {
    let mut db = prepared(backend).await;
    assert_eq!(db.sink.checkpoints().await.unwrap(), checkpoints(&[]));
    db.sink.commit(&batch(100..=101)).await.unwrap();
    assert_eq!(
        db.sink.checkpoints().await.unwrap(),
        checkpoints(&[("demo", 101)])
    );
    db.sink.commit(&batch(102..=102)).await.unwrap();
    assert_eq!(
        db.sink.checkpoints().await.unwrap(),
        checkpoints(&[("demo", 102)])
    );
    assert_eq!(db.count("logs").await, 9);

    db.drop_table("demo_everything").await;
    let err = db.sink.commit(&batch(103..=104)).await.unwrap_err();
    assert!(matches!(err, sink::Error::Query { .. }), "{err:?}");
    assert_eq!(
        db.sink.checkpoints().await.unwrap(),
        checkpoints(&[("demo", 102)]),
        "a failed batch moved the checkpoint"
    );
    assert_eq!(db.count("logs").await, 9, "a failed batch left raw rows");
    db.sink.close().await;
}

#[tokio::test]
async fn checkpoints_move_with_their_rows_in_postgres() {
    checkpoints_move_with_rows(Backend::Postgres).await;
}

#[tokio::test]
async fn checkpoints_move_with_their_rows_in_sqlite() {
    checkpoints_move_with_rows(Backend::Sqlite).await;
}

async fn prepare_is_idempotent_and_refuses_other_columns(backend: Backend) {
    let mut db = prepared(backend).await;
    db.sink
        .prepare(&[everything_table()], &[contract()])
        .await
        .expect("preparing again");
    db.sink.commit(&batch(100..=100)).await.unwrap();
    db.sink
        .prepare(&[everything_table()], &[contract()])
        .await
        .expect("preparing a table with rows again");

    let mut renamed = everything_table();
    renamed.columns[1].name = "value".to_owned();
    let err = db
        .sink
        .prepare(&[renamed], &[contract()])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, sink::Error::Mismatch(m) if m.contains("demo_everything")),
        "{err:?}"
    );

    let mut longer = everything_table();
    longer
        .columns
        .push(column("extra", "bool", ColumnKind::Bool));
    let err = db.sink.prepare(&[longer], &[contract()]).await.unwrap_err();
    assert!(matches!(err, sink::Error::Mismatch(_)), "{err:?}");

    let mut moved = contract();
    moved.addresses = vec![Address::repeat_byte(0xcd)];
    let err = db
        .sink
        .prepare(&[everything_table()], &[moved])
        .await
        .unwrap_err();
    assert!(matches!(err, sink::Error::Mismatch(_)), "{err:?}");
    assert_eq!(db.count("demo_everything").await, 3);
    db.sink.close().await;
}

#[tokio::test]
async fn prepare_twice_is_idempotent_and_refuses_a_changed_column_set_in_postgres() {
    prepare_is_idempotent_and_refuses_other_columns(Backend::Postgres).await;
}

#[tokio::test]
async fn prepare_twice_is_idempotent_and_refuses_a_changed_column_set_in_sqlite() {
    prepare_is_idempotent_and_refuses_other_columns(Backend::Sqlite).await;
}

/// Goal: a chain name is bound to the chain id recorded for it, and a chain id to its name: another
/// id under the name, or the id under another name, is refused naming both and the fix.
async fn refuses_another_chain(backend: Backend) {
    let mut db = Db::open(backend).await;
    db.sink
        .bind_chain(sink::DEFAULT_CHAIN, 1)
        .await
        .expect("same chain");
    let err = db
        .sink
        .bind_chain(sink::DEFAULT_CHAIN, 5)
        .await
        .unwrap_err();
    assert!(
        matches!(&err, sink::Error::Mismatch(m) if m.contains("chain id 1") && m.contains("chain id 5")
            && m.contains("\"default\"") && m.contains("database.url")),
        "{err}"
    );
    let err = db.sink.bind_chain("mainnet", 1).await.unwrap_err();
    assert!(
        matches!(&err, sink::Error::Mismatch(m) if m.contains("\"mainnet\"") && m.contains("rename the chain back")),
        "{err}"
    );
    assert_eq!(
        db.sink.bound_chain(),
        Some(1),
        "a refusal keeps the binding"
    );
    db.sink
        .bind_chain("base", 8453)
        .await
        .expect("another chain");
    assert_eq!(
        db.sink.chains().await.unwrap(),
        [("base".to_owned(), 8453), ("default".to_owned(), 1)]
    );
    assert_eq!(db.sink.recorded_chain("base").await.unwrap(), Some(8453));
    assert_eq!(db.sink.recorded_chain("nowhere").await.unwrap(), None);
    db.sink.close().await;
}

#[tokio::test]
async fn bind_chain_refuses_another_chain_id_or_name_in_postgres() {
    refuses_another_chain(Backend::Postgres).await;
}

#[tokio::test]
async fn bind_chain_refuses_another_chain_id_or_name_in_sqlite() {
    refuses_another_chain(Backend::Sqlite).await;
}

// ---- Postgres only ----

type TypedPgRow = (
    i64,
    String,
    String,
    i64,
    String,
    String,
    String,
    String,
    String,
    String,
    bool,
    Vec<u8>,
    String,
    String,
    String,
);

/// Goal: every column kind round-trips exactly, including uint256 max, int256 min, bytes with 0x00, and a NUL
/// inside a string (stored as U+FFFD) or inside a JSON string. Method: commit, read back with NUMERIC and
/// JSONB as text, compare with what docs/schema.md says is stored.
#[tokio::test]
async fn every_column_kind_reads_back_as_written_in_postgres() {
    let mut db = prepared(Backend::Postgres).await;
    let batch = batch(100..=101);
    db.sink.commit(&batch).await.unwrap();
    let expected_raw: Vec<RawRow> = batch.logs.iter().map(raw_row).collect();
    assert_eq!(db.raw_logs().await, expected_raw);

    let Sink::Postgres(pg) = &db.sink else {
        unreachable!()
    };
    let rows: Vec<TypedPgRow> = sqlx::query_as(
        "SELECT block_number, block_hash, transaction_hash, log_index, address, small::text, big::text, \
         neg::text, who, tag, flag, blob, note, list::text, topic \
         FROM demo_everything ORDER BY block_number, log_index",
    )
    .fetch_all(pg.pool())
    .await
    .unwrap();
    assert_eq!(rows.len(), batch.typed.len());
    for (row, typed) in rows.iter().zip(&batch.typed) {
        let log = &batch.logs[typed.log];
        let text = |i: usize| match &typed.values[i] {
            Value::Int(n) => n.to_string(),
            Value::BigInt(n) => n.to_string(),
            Value::Text(s) | Value::Json(s) => s.clone(),
            other => panic!("{other:?}"),
        };
        assert_eq!(row.0, i64::try_from(log.block_number).unwrap());
        assert_eq!(row.1, hex(log.block_hash));
        assert_eq!(row.2, hex(log.transaction_hash));
        assert_eq!(row.3, i64::try_from(log.log_index).unwrap());
        assert_eq!(row.4, hex(log.address));
        assert_eq!(row.5, text(0));
        assert_eq!(row.6, text(1));
        assert_eq!(row.7, text(2));
        assert_eq!(row.8, text(3));
        assert_eq!(row.9, text(4));
        assert_eq!(Value::Bool(row.10), typed.values[5]);
        assert_eq!(Value::Bytes(row.11.clone()), typed.values[6]);
        assert_eq!(row.12, text(7).replace('\0', "\u{FFFD}"));
        let stored: serde_json::Value = serde_json::from_str(&row.13).unwrap();
        let written: serde_json::Value =
            serde_json::from_str(&text(8).replace("\\u0000", "\u{FFFD}")).unwrap();
        assert_eq!(stored, written);
        assert_eq!(row.14, text(9));
    }
    assert_eq!(rows[0].5, i64::MIN.to_string());
    assert_eq!(rows[0].6, UINT256_MAX);
    assert_eq!(rows[0].7, INT256_MIN);
    assert_eq!(rows[0].12, "nul\u{FFFD}inside");
    assert_eq!(rows[0].11, vec![0, 0, 1, 0]);
    db.sink.close().await;
}

/// Goal: the column types follow docs/schema.md, and a changed type under the same name is refused.
#[tokio::test]
async fn prepare_refuses_a_column_whose_type_changed_in_postgres() {
    let mut db = prepared(Backend::Postgres).await;
    let mut conn = db.schema().connect().await;
    let types: Vec<(String, String)> = sqlx::query_as(
        "SELECT column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = 'demo_everything' ORDER BY ordinal_position",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let types: Vec<String> = types.into_iter().map(|(n, t)| format!("{n} {t}")).collect();
    assert_eq!(
        types,
        [
            "chain_id bigint",
            "block_number bigint",
            "block_hash text",
            "transaction_hash text",
            "log_index bigint",
            "address text",
            "small numeric",
            "big numeric",
            "neg numeric",
            "who text",
            "tag text",
            "flag boolean",
            "blob bytea",
            "note text",
            "list jsonb",
            "topic text",
        ]
    );
    let mut retyped = everything_table();
    retyped.columns[1].kind = ColumnKind::Text;
    let err = db
        .sink
        .prepare(&[retyped], &[contract()])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, sink::Error::Mismatch(m) if m.contains("big numeric(78,0)") && m.contains("big text")),
        "{err}"
    );
    db.sink.close().await;
}

/// Goal: a table name Postgres would truncate is refused as a config problem, not silently merged.
#[tokio::test]
async fn prepare_refuses_a_table_name_postgres_would_truncate() {
    let mut db = Db::open(Backend::Postgres).await;
    let mut long = everything_table();
    long.name = format!("demo_{}", "x".repeat(60));
    let err = db.sink.prepare(&[long], &[contract()]).await.unwrap_err();
    assert!(
        matches!(&err, sink::Error::Mismatch(m) if m.contains("63-byte")),
        "{err}"
    );
    db.sink.close().await;
}

/// Goal: `database.schema` isolates: two schemas, same table names, no interference; the tables (and sqlx's
/// migration table) live in the configured schema, not in `public`.
#[tokio::test]
async fn schemas_with_the_same_tables_do_not_interfere() {
    let mut a = prepared(Backend::Postgres).await;
    let mut b = prepared(Backend::Postgres).await;
    a.sink.commit(&batch(100..=101)).await.unwrap();
    b.sink.commit(&batch(100..=100)).await.unwrap();
    b.sink.bind_chain("other", 5).await.unwrap();
    assert_eq!(a.sink.chains().await.unwrap(), [("default".to_owned(), 1)]);
    b.sink.bind_chain(sink::DEFAULT_CHAIN, 1).await.unwrap();
    assert_eq!(a.count("logs").await, 6);
    assert_eq!(b.count("logs").await, 3);
    assert_eq!(
        a.sink.checkpoints().await.unwrap(),
        checkpoints(&[("demo", 101)])
    );
    assert_eq!(
        b.sink.checkpoints().await.unwrap(),
        checkpoints(&[("demo", 100)])
    );
    let mut conn = a.schema().connect().await;
    for schema in [&a.schema().name, &b.schema().name] {
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT tablename::text FROM pg_tables WHERE schemaname = $1 ORDER BY tablename",
        )
        .bind(schema)
        .fetch_all(&mut conn)
        .await
        .unwrap();
        assert_eq!(
            tables,
            [
                "_sqlx_migrations",
                "block_hashes",
                "chains",
                "checkpoints",
                "contracts",
                "demo_everything",
                "factory_children",
                "logs",
                "meta",
                "receipt_blocks",
                // Created by migration 0005 whatever `[sync] transactions` says; empty while it is off.
                "transactions"
            ]
        );
    }
    a.sink.close().await;
    b.sink.close().await;
}

/// Goal: a commit after every connection of the sink was killed (as by a server restart) succeeds, exactly.
/// Method: `pg_terminate_backend(pid, timeout)` waits until each backend is gone; the sink's connections are
/// found by the `application_name` the test put in the URL.
#[tokio::test]
async fn a_commit_after_the_connection_is_killed_succeeds_and_is_exact() {
    let mut db = prepared(Backend::Postgres).await;
    db.sink.commit(&batch(100..=100)).await.unwrap();
    let mut conn = db.schema().connect().await;
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE application_name = $1",
    )
    .bind(&db.schema().name)
    .fetch_all(&mut conn)
    .await
    .unwrap();
    // `false` only for a backend that exited by itself meanwhile.
    assert!(killed.contains(&true), "{killed:?}");

    let second = batch(101..=102);
    db.sink
        .commit(&second)
        .await
        .expect("commit after the kill");
    let mut expected: Vec<RawRow> = batch(100..=100).logs.iter().map(raw_row).collect();
    expected.extend(second.logs.iter().map(raw_row));
    assert_eq!(db.raw_logs().await, expected);
    assert_eq!(db.count("demo_everything").await, 9);
    assert_eq!(
        db.sink.checkpoints().await.unwrap(),
        checkpoints(&[("demo", 102)])
    );
    db.sink.close().await;
}

/// Makes the sink's connection die inside its transaction, on the first `kills` inserts into `logs`: a
/// statement trigger terminates its own backend. A sequence counts attempts, since it survives the rollback.
async fn kill_first_attempts(db: &Db, kills: u32) {
    let schema = &db.schema().name;
    let mut conn = db.schema().connect().await;
    sqlx::raw_sql(&format!(
        "CREATE SEQUENCE \"{schema}\".attempts;
         CREATE FUNCTION \"{schema}\".kill_first_attempts() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF nextval('\"{schema}\".attempts') <= {kills} THEN
                 PERFORM pg_terminate_backend(pg_backend_pid());
             END IF;
             RETURN NULL;
         END $$;
         CREATE TRIGGER kill_first_attempts AFTER INSERT ON \"{schema}\".logs
             FOR EACH STATEMENT EXECUTE FUNCTION \"{schema}\".kill_first_attempts();"
    ))
    .execute(&mut conn)
    .await
    .unwrap();
}

async fn attempts(db: &Db) -> i64 {
    let mut conn = db.schema().connect().await;
    sqlx::query_scalar("SELECT last_value FROM attempts")
        .fetch_one(&mut conn)
        .await
        .unwrap()
}

/// Goal: a connection lost in the middle of a batch's transaction is retried on a fresh one, and the batch
/// lands once and whole.
#[tokio::test]
async fn a_commit_whose_connection_dies_mid_transaction_is_retried() {
    let mut db = prepared(Backend::Postgres).await;
    kill_first_attempts(&db, 2).await;
    let batch = batch(100..=101);
    db.sink.commit(&batch).await.expect("commit with retries");
    assert_eq!(attempts(&db).await, 3);
    let expected: Vec<RawRow> = batch.logs.iter().map(raw_row).collect();
    assert_eq!(db.raw_logs().await, expected);
    assert_eq!(db.count("demo_everything").await, 6);
    assert_eq!(
        db.sink.checkpoints().await.unwrap(),
        checkpoints(&[("demo", 101)])
    );
    db.sink.close().await;
}

/// Goal: retries are bounded, and giving up is a database failure (exit 74) that commits nothing.
#[tokio::test]
async fn a_commit_gives_up_after_bounded_attempts_and_maps_to_exit_74() {
    let mut db = prepared(Backend::Postgres).await;
    kill_first_attempts(&db, 1_000).await;
    let err = db.sink.commit(&batch(100..=100)).await.unwrap_err();
    assert!(
        matches!(err, sink::Error::ConnectionLost { attempts, .. } if attempts == sink::COMMIT_ATTEMPTS),
        "{err:?}"
    );
    assert_eq!(attempts(&db).await, i64::from(sink::COMMIT_ATTEMPTS));
    assert_eq!(db.count("logs").await, 0);
    assert_eq!(db.sink.checkpoints().await.unwrap(), checkpoints(&[]));
    let job_error = logslice::pipeline::Error::Database {
        database: "postgres://test".to_owned(),
        source: err,
    };
    assert_eq!(logslice::exit::code(&job_error), logslice::exit::IO);
    db.sink.close().await;
}

/// Goal: an unknown role or database, or a server that is down, fails `open` with `Error::Open` naming the
/// URL redacted, never the password (in Display, Debug or the source chain).
#[tokio::test]
async fn opening_with_a_bad_role_database_or_server_never_shows_the_password() {
    const PASSWORD: &str = "PG-SECRET-pw123";
    let schema = TestSchema::new().await;
    let mut bad_role = crate::pg::url();
    bad_role.set_username("logslice_no_such_role").unwrap();
    bad_role.set_password(Some(PASSWORD)).unwrap();
    let mut bad_database = crate::pg::url();
    bad_database.set_password(Some(PASSWORD)).unwrap();
    bad_database.set_path("/logslice_no_such_database");
    let mut no_server = crate::pg::url();
    no_server.set_password(Some(PASSWORD)).unwrap();
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    no_server.set_port(Some(1)).unwrap();
    for url in [bad_role, bad_database, no_server] {
        let secret = SecretUrl::new(url);
        let err = match PostgresSink::open(&secret, Some(&schema.name)).await {
            Ok(_) => panic!("{secret} opened"),
            Err(err) => err,
        };
        assert!(matches!(err, sink::Error::Open { .. }), "{err:?}");
        let mut shown = vec![err.to_string(), format!("{err:?}"), format!("{err:#?}")];
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            shown.push(cause.to_string());
            source = cause.source();
        }
        for text in &shown {
            assert!(!text.contains(PASSWORD), "password shown: {text}");
        }
        assert!(
            shown[0].contains(&secret.to_string()) && shown[0].contains("****"),
            "{}",
            shown[0]
        );
    }
}

/// Goal: `database.url = "postgres://..."` with `database.schema` opens the Postgres sink in that schema through
/// the pipeline, and the database is shown redacted.
#[tokio::test]
async fn a_postgres_url_in_the_config_opens_the_postgres_sink_in_its_schema() {
    let schema = TestSchema::new().await;
    let mut server = crate::pg::url();
    server.set_password(Some("PG-SECRET-pw123")).unwrap();
    let text = format!(
        "[node]\nurl = \"sim://\"\n\n[database]\nurl = \"{server}\"\nschema = \"{}\"\n\n\
         [[contracts]]\nname = \"demo\"\naddress = \"0x{}\"\n\
         events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]\n",
        schema.name,
        "ab".repeat(20)
    );
    let config = logslice::config::load_str(std::path::Path::new("config.toml"), &text, &|_| None)
        .expect("the config is valid");
    let (sink, shown) = match logslice::pipeline::open_sink(&config).await {
        Ok(opened) => opened,
        Err(err) => panic!("open_sink: {err}"),
    };
    assert!(
        !shown.contains("PG-SECRET-pw123") && shown.contains(&schema.name),
        "{shown}"
    );
    assert!(matches!(sink, Sink::Postgres(_)));
    let mut sink = sink;
    sink.bind_chain(sink::DEFAULT_CHAIN, 1).await.unwrap();
    let mut conn = schema.connect().await;
    let chain: (i64, String) = sqlx::query_as("SELECT chain_id, name FROM chains")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(chain, (1, "default".to_owned()));
    sink.close().await;
}
