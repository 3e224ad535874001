//! The sink against damaged databases and changed configs, on both backends through one function each (issue
//! #21): a record that cannot be read or a number that cannot be right is an error naming the table and the
//! row, exit 74 (65 for a batch's number no column holds: the node's), never a default; and a changed chain, contract or ABI is refused with the same words on
//! SQLite and Postgres, naming `--reindex` where it is the fix.
//!
//! Method: prepare a real database (SQLite in a temp dir, Postgres in a schema of its own), damage one record
//! with SQL behind the sink's back, then call the sink API that reads it.

use logslice::decode::ColumnKind;
use logslice::primitives::Address;
use logslice::sink::{self, ReindexSpec, Sink};
use sqlx::Executor;

use crate::postgres_sink::{batch, contract, everything_table, prepared, word, Backend, Db};

/// Runs SQL on the sink's own pool, as a user with `sqlite3` or `psql` would.
async fn execute(db: &Db, sql: &str) {
    match &db.sink {
        Sink::Sqlite(s) => s.pool().execute(sql).await.map(drop),
        Sink::Postgres(s) => s.pool().execute(sql).await.map(drop),
    }
    .unwrap_or_else(|err| panic!("{sql}: {err}"));
}

/// The exit code of a job that failed with `err`.
fn exit_code(err: sink::Error) -> u8 {
    logslice::exit::code(&logslice::pipeline::Error::Database {
        database: "test".to_owned(),
        source: err,
    })
}

/// `err` is [`sink::Error::Invalid`] for `table` and `row`, its message names them and `column`, and a job
/// failing with it exits 74.
fn assert_invalid(err: sink::Error, table: &str, row: &str, column: &str) {
    let text = err.to_string();
    assert!(
        matches!(&err, sink::Error::Invalid { table: t, row: r, .. } if t == table && r == row),
        "{err:?}"
    );
    assert!(
        text.starts_with(&format!("{table} row {row}: {column} ")),
        "{text}"
    );
    assert_eq!(exit_code(err), logslice::exit::IO, "{text}");
}

fn demo_address() -> Address {
    contract().addresses[0]
}

/// A reindex of a contract that shares demo's address: demo's unreadable addresses must not count as none.
fn reindex_of_a_sharer() -> Vec<ReindexSpec> {
    vec![ReindexSpec {
        name: "sharer".to_owned(),
        addresses: vec![demo_address()],
        tables: Vec::new(),
    }]
}

/// Goal: an unreadable address list in `contracts` is an error, never an empty list, so `--reindex` of
/// another contract on the same address is not let through to delete demo's raw rows.
async fn unreadable_addresses_are_an_error(backend: Backend) {
    let mut db = prepared(backend).await;
    db.sink.commit(&batch(100..=100)).await.unwrap();
    execute(
        &db,
        "UPDATE contracts SET addresses = 'not json' WHERE name = 'demo'",
    )
    .await;

    let err = db.sink.reindex(&reindex_of_a_sharer()).await.unwrap_err();
    assert_invalid(err, "contracts", "name = \"demo\"", "addresses");
    assert_eq!(
        db.count("logs").await,
        3,
        "the refused reindex deleted rows"
    );
    let err = db.sink.status().await.unwrap_err();
    assert_invalid(err, "contracts", "name = \"demo\"", "addresses");
    let err = db
        .sink
        .prepare(&[everything_table()], &[contract()])
        .await
        .unwrap_err();
    assert_invalid(err, "contracts", "name = \"demo\"", "addresses");

    // JSON, but not an address as logslice writes it (uppercase hex would never compare equal).
    let upper = format!("[\"0x{}\"]", "AB".repeat(20));
    execute(
        &db,
        &format!("UPDATE contracts SET addresses = '{upper}' WHERE name = 'demo'"),
    )
    .await;
    let err = db.sink.reindex(&reindex_of_a_sharer()).await.unwrap_err();
    assert_invalid(err, "contracts", "name = \"demo\"", "addresses");
    assert_eq!(db.count("logs").await, 3);
    db.sink.close().await;
}

#[tokio::test]
async fn an_unreadable_contract_address_list_is_an_error_not_an_empty_list_in_sqlite() {
    unreadable_addresses_are_an_error(Backend::Sqlite).await;
}

#[tokio::test]
async fn an_unreadable_contract_address_list_is_an_error_not_an_empty_list_in_postgres() {
    unreadable_addresses_are_an_error(Backend::Postgres).await;
}

/// Goal: the other fields of a `contracts` record are checked too: an events list that does not parse,
/// an event without its table, a negative start block.
async fn unreadable_events_and_start_blocks_are_errors(backend: Backend) {
    let db = prepared(backend).await;
    for events in ["{", "[\"Everything(...)\"]"] {
        execute(
            &db,
            &format!("UPDATE contracts SET events = '{events}' WHERE name = 'demo'"),
        )
        .await;
        let err = db.sink.status().await.unwrap_err();
        assert_invalid(err, "contracts", "name = \"demo\"", "events");
    }
    execute(
        &db,
        "UPDATE contracts SET events = '[\"Everything(...) -> demo_everything\"]', start_block = -1 \
         WHERE name = 'demo'",
    )
    .await;
    let err = db.sink.status().await.unwrap_err();
    assert_invalid(err, "contracts", "name = \"demo\"", "start_block");
    assert!(err_text(db.sink.status().await).contains("-1"));
    db.sink.close().await;
}

fn err_text<T: std::fmt::Debug>(result: Result<T, sink::Error>) -> String {
    result.unwrap_err().to_string()
}

#[tokio::test]
async fn unreadable_events_or_a_negative_start_block_are_errors_naming_the_contract_in_sqlite() {
    unreadable_events_and_start_blocks_are_errors(Backend::Sqlite).await;
}

#[tokio::test]
async fn unreadable_events_or_a_negative_start_block_are_errors_naming_the_contract_in_postgres() {
    unreadable_events_and_start_blocks_are_errors(Backend::Postgres).await;
}

/// Goal: a negative checkpoint is an error naming the contract, never block 0 (which would re-index the
/// contract from its start).
async fn a_negative_checkpoint_is_an_error(backend: Backend) {
    let mut db = prepared(backend).await;
    db.sink.commit(&batch(100..=100)).await.unwrap();
    execute(
        &db,
        "UPDATE checkpoints SET block_number = -5 WHERE contract = 'demo'",
    )
    .await;
    let err = db.sink.checkpoints().await.unwrap_err();
    assert_invalid(err, "checkpoints", "contract = \"demo\"", "block_number");
    let err = db.sink.status().await.unwrap_err();
    assert_invalid(err, "checkpoints", "contract = \"demo\"", "block_number");
    db.sink.close().await;
}

#[tokio::test]
async fn a_negative_checkpoint_is_an_error_naming_its_contract_in_sqlite() {
    a_negative_checkpoint_is_an_error(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_negative_checkpoint_is_an_error_naming_its_contract_in_postgres() {
    a_negative_checkpoint_is_an_error(Backend::Postgres).await;
}

/// Goal: SQLite's dynamic typing lets a column hold a real beyond 64 bits; read back it is an error, not a
/// truncated or zero block number.
#[tokio::test]
async fn a_checkpoint_beyond_64_bits_is_an_error_naming_its_contract_in_sqlite() {
    let mut db = prepared(Backend::Sqlite).await;
    db.sink.commit(&batch(100..=100)).await.unwrap();
    execute(
        &db,
        "UPDATE checkpoints SET block_number = 1e20 WHERE contract = 'demo'",
    )
    .await;
    let err = db.sink.checkpoints().await.unwrap_err();
    assert_invalid(err, "checkpoints", "contract = \"demo\"", "block_number");
    db.sink.close().await;
}

/// Goal: a remembered block with a negative number or an unreadable hash is an error naming its row, never
/// block 0 (the follower would compare the node's block 0 with it).
async fn unreadable_remembered_blocks_are_errors(backend: Backend) {
    let db = prepared(backend).await;
    let hash = sink::hex::encode(word(1));
    execute(
        &db,
        &format!(
            "INSERT INTO block_hashes (chain_id, block_number, block_hash, parent_hash) VALUES (1, -7, '{hash}', '{hash}')"
        ),
    )
    .await;
    let err = db.sink.tracked_blocks().await.unwrap_err();
    assert_invalid(err, "block_hashes", "block_number = -7", "block_number");

    execute(
        &db,
        "UPDATE block_hashes SET block_number = 7, parent_hash = '0x12'",
    )
    .await;
    let err = db.sink.tracked_blocks().await.unwrap_err();
    assert_invalid(err, "block_hashes", "block_number = 7", "parent_hash");
    db.sink.close().await;
}

#[tokio::test]
async fn a_negative_or_unreadable_remembered_block_is_an_error_naming_its_row_in_sqlite() {
    unreadable_remembered_blocks_are_errors(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_negative_or_unreadable_remembered_block_is_an_error_naming_its_row_in_postgres() {
    unreadable_remembered_blocks_are_errors(Backend::Postgres).await;
}

/// Goal: a stored chain id that cannot be one is a damaged record (74), not another chain (78).
async fn an_unreadable_chain_id_is_an_error(backend: Backend) {
    let mut db = Db::open(backend).await;
    execute(
        &db,
        "UPDATE chains SET chain_id = -1 WHERE name = 'default'",
    )
    .await;
    let err = db.sink.chains().await.unwrap_err();
    assert_invalid(err, "chains", "name = \"default\"", "chain_id");
    let err = db
        .sink
        .bind_chain(sink::DEFAULT_CHAIN, 1)
        .await
        .unwrap_err();
    assert_invalid(err, "chains", "name = \"default\"", "chain_id");
    db.sink.close().await;
}

#[tokio::test]
async fn a_chain_id_that_is_not_a_number_is_an_error_not_another_chain_in_sqlite() {
    an_unreadable_chain_id_is_an_error(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_chain_id_that_is_not_a_number_is_an_error_not_another_chain_in_postgres() {
    an_unreadable_chain_id_is_an_error(Backend::Postgres).await;
}

/// Goal: a batch with a number no column can store (above `i64::MAX`: both backends' columns are 64-bit
/// signed) is refused before anything is written, naming the table, the log and the column, as the node's
/// data (exit 65), the same on both backends (the sink used to panic, then to exit 74).
async fn a_number_beyond_its_column_is_refused(backend: Backend) {
    let mut db = prepared(backend).await;
    let row = |batch: &sink::Batch| {
        let log = &batch.logs[1];
        format!(
            "block_number = {}, log_index = {} (block_hash = {})",
            log.block_number,
            log.log_index,
            sink::hex::encode(log.block_hash)
        )
    };
    let mut too_far = batch(100..=100);
    too_far.logs[1].block_number = u64::MAX;
    let err = db.sink.commit(&too_far).await.unwrap_err();
    assert_unstorable(err, "logs", &row(&too_far), "block_number");

    let mut too_many = batch(100..=100);
    too_many.logs[1].log_index = 1 << 63;
    let err = db.sink.commit(&too_many).await.unwrap_err();
    assert_unstorable(err, "logs", &row(&too_many), "log_index");

    let mut too_many = batch(100..=100);
    too_many.logs[1].transaction_index = u64::MAX;
    let err = db.sink.commit(&too_many).await.unwrap_err();
    assert_unstorable(err, "logs", &row(&too_many), "transaction_index");

    assert_eq!(db.count("logs").await, 0);
    assert!(db.sink.checkpoints().await.unwrap().is_empty());
    db.sink.close().await;
}

/// `err` is [`sink::Error::Unstorable`] for `table` and `row`, its message names them and `column`, and a
/// job failing with it exits 65 (the node's data cannot be right).
fn assert_unstorable(err: sink::Error, table: &str, row: &str, column: &str) {
    let text = err.to_string();
    assert!(
        matches!(&err, sink::Error::Unstorable { table: t, row: r, column: c, .. }
            if *t == table && r == row && *c == column),
        "{err:?}"
    );
    assert!(
        text.starts_with(&format!("{table} row {row}: {column} ")),
        "{text}"
    );
    assert_eq!(exit_code(err), logslice::exit::DATA, "{text}");
}

#[tokio::test]
async fn a_batch_number_beyond_its_column_is_refused_naming_the_row_in_sqlite() {
    a_number_beyond_its_column_is_refused(Backend::Sqlite).await;
}

#[tokio::test]
async fn a_batch_number_beyond_its_column_is_refused_naming_the_row_in_postgres() {
    a_number_beyond_its_column_is_refused(Backend::Postgres).await;
}

// ---- One behaviour for both backends ----

/// A refusal's text with the column lists taken out: they spell each column's type as its database does
/// (`numeric(78,0)`, `TEXT`), and everything else must read the same on both backends.
fn without_column_lists(text: &str) -> String {
    let mut out = String::new();
    let mut depth = 0;
    let mut rest = text;
    // Only the lists after "columns" and "gives" are cut; a `(...)` elsewhere stays.
    while let Some(start) = rest.find(['(', ')']) {
        let (before, after) = rest.split_at(start);
        if depth == 0 {
            out.push_str(before);
        }
        let opens = after.starts_with('(');
        let is_list = before.ends_with("columns ") || before.ends_with("gives ");
        match (opens, depth) {
            (true, 0) if is_list => depth = 1,
            (true, d) if d > 0 => depth += 1,
            (false, d) if d > 1 => depth -= 1,
            (false, 1) => {
                depth = 0;
                out.push_str("(...)");
            }
            _ => out.push(after.chars().next().unwrap()),
        }
        rest = &after[1..];
    }
    out.push_str(rest);
    out
}

/// Each refusal `prepare` or `bind_chain` makes on `backend`: (what changed, its message). After each,
/// the database still takes the unchanged config and a batch.
async fn refusals(backend: Backend) -> Vec<(&'static str, String)> {
    let mut db = prepared(backend).await;
    let mut refused = Vec::new();
    let mut renamed = everything_table();
    renamed.columns[1].name = "value".to_owned();
    // `bytes` -> `string`: BLOB -> TEXT on SQLite, bytea -> text on Postgres; the names stay.
    let mut retyped = everything_table();
    retyped.columns[6].kind = ColumnKind::Text;
    for (what, table) in [("a renamed column", renamed), ("a column's type", retyped)] {
        let err = db.sink.prepare(&[table], &[contract()]).await.unwrap_err();
        assert!(matches!(err, sink::Error::Mismatch(_)), "{what}: {err:?}");
        refused.push((what, err.to_string()));
    }
    let mut moved = contract();
    moved.addresses = vec![Address::repeat_byte(0xcd)];
    let err = db
        .sink
        .prepare(&[everything_table()], &[moved])
        .await
        .unwrap_err();
    assert!(matches!(err, sink::Error::Mismatch(_)), "{err:?}");
    refused.push(("an address", err.to_string()));
    db.sink.bind_chain(sink::DEFAULT_CHAIN, 1).await.unwrap();
    let err = db
        .sink
        .bind_chain(sink::DEFAULT_CHAIN, 5)
        .await
        .unwrap_err();
    assert!(matches!(err, sink::Error::Mismatch(_)), "{err:?}");
    refused.push(("the chain", err.to_string()));

    // Every refusal came before a transaction: nothing is held, and the unchanged config still works.
    if let Backend::Postgres = backend {
        let mut conn = db.schema().connect().await;
        let open: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'",
        )
        .bind(&db.schema().name)
        .fetch_one(&mut conn)
        .await
        .unwrap();
        assert_eq!(open, 0, "a refusal left a transaction open");
    }
    db.sink
        .prepare(&[everything_table()], &[contract()])
        .await
        .expect("the unchanged config after the refusals");
    db.sink.commit(&batch(100..=100)).await.unwrap();
    assert_eq!(db.count("demo_everything").await, 3);
    db.sink.close().await;
    refused
}

/// Goal: the same change is refused with the same words on both backends (the column lists aside, which
/// spell each database's types), and the fix named for a changed ABI or address is `--reindex demo`.
#[tokio::test]
async fn refusals_read_the_same_on_both_backends_and_name_reindex_where_it_is_the_fix() {
    let sqlite = refusals(Backend::Sqlite).await;
    let postgres = refusals(Backend::Postgres).await;
    assert_eq!(sqlite.len(), postgres.len());
    for ((what, on_sqlite), (_, on_postgres)) in sqlite.iter().zip(&postgres) {
        assert_eq!(
            without_column_lists(on_sqlite),
            without_column_lists(on_postgres),
            "{what}"
        );
        let names_reindex = on_sqlite.contains("logslice sync --reindex demo --to");
        assert_eq!(names_reindex, *what != "the chain", "{what}: {on_sqlite}");
    }
    assert!(
        sqlite[3].1.contains("chain id 1") && sqlite[3].1.contains("chain id 5"),
        "{}",
        sqlite[3].1
    );
    // The address lists are the same on both: JSON of `0x` + lowercase hex.
    assert_eq!(sqlite[2].1, postgres[2].1);
}

/// Goal: SQLite compares column types too: `bytes` became `string` under the same column names, and the
/// message shows both types.
#[tokio::test]
async fn a_column_whose_type_changed_is_refused_in_sqlite() {
    let mut db = prepared(Backend::Sqlite).await;
    let mut retyped = everything_table();
    retyped.columns[6].kind = ColumnKind::Text;
    let err = db
        .sink
        .prepare(&[retyped], &[contract()])
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, sink::Error::Mismatch(_))
            && text.contains("blob BLOB")
            && text.contains("blob TEXT")
            && text.contains("--reindex demo"),
        "{text}"
    );
    assert_eq!(exit_code(err), logslice::exit::CONFIG);
    db.sink.close().await;
}

#[test]
fn column_lists_are_cut_from_refusals_and_nothing_else() {
    assert_eq!(
        without_column_lists("table t exists with columns (a INTEGER, b numeric(78,0)) but the config's ABI gives (a bigint): fix (or not)"),
        "table t exists with columns (...) but the config's ABI gives (...): fix (or not)"
    );
}
