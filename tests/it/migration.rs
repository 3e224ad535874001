//! A database created by an earlier version is migrated in place: migration 0004 keys `logs` by
//! `(block_number, log_index)`, and the rows synced before it stay, exactly, beside those synced after.
//!
//! Method: sync part of the chain, then put the database back into the layout migrations 0001-0003 left
//! (the raw table unique on `(block_hash, log_index)` with a `block_number` index, and 0004 not recorded as
//! applied), with its rows. The next sync opens it, migrates it and goes on; the database must then equal the
//! ground truth log by log, in the new layout.

use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, query_texts, Backend, Workdir,
};

/// Turns a database of this version back into the layout of the version before migration 9 (no
/// `chain_id`, the chain id in `meta.chain_id`), keeping its rows: the layout the statements of
/// [`to_earlier_layout`] and [`to_text_logs`] start from. `tests/it/previous_release.rs` tests migration 9 on
/// what the previous release really wrote; this lets the older layouts be staged from a sync of this one.
pub(crate) async fn to_previous_release(work: &Workdir, backend: Backend) {
    let chain_id = query_texts(work, "SELECT CAST(chain_id AS TEXT) FROM chains")
        .await
        .remove(0)
        .remove(0);
    let tables: Vec<(String, String)> = match backend {
        Backend::Sqlite => {
            query_texts(
                work,
                "SELECT m.name, m.sql FROM sqlite_master m WHERE m.type = 'table' AND m.name <> 'chains' \
                 AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) p WHERE p.name = 'chain_id')",
            )
            .await
        }
        Backend::Postgres => {
            query_texts(
                work,
                "SELECT table_name::text, '' FROM information_schema.columns \
                 WHERE table_schema = current_schema() AND column_name = 'chain_id' AND table_name <> 'chains'",
            )
            .await
        }
    }
    .into_iter()
    .map(|mut row| (row.remove(0), row.remove(0)))
    .collect();
    let without_chain = |sql: &str| {
        sql.replace("chain_id INTEGER NOT NULL, ", "")
            .replace("chain_id INTEGER NOT NULL,", "")
            .replace("(chain_id, ", "(")
    };
    let mut statements = Vec::new();
    for (table, create) in &tables {
        match backend {
            Backend::Sqlite => {
                let indexes = query_texts(
                    work,
                    &format!(
                        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = '{table}' \
                         AND sql IS NOT NULL"
                    ),
                )
                .await;
                let columns: Vec<String> = support::columns(work, table)
                    .await
                    .into_iter()
                    .filter(|c| c != "chain_id")
                    .map(|c| format!("\"{c}\""))
                    .collect();
                statements.push(format!(
                    "ALTER TABLE \"{table}\" RENAME TO \"{table}_chain\""
                ));
                statements.push(without_chain(create));
                statements.push(format!(
                    "INSERT INTO \"{table}\" ({0}) SELECT {0} FROM \"{table}_chain\"",
                    columns.join(", ")
                ));
                statements.push(format!("DROP TABLE \"{table}_chain\""));
                statements.extend(indexes.iter().map(|row| without_chain(&row[0])));
            }
            Backend::Postgres => {
                statements.push(format!("ALTER TABLE \"{table}\" DROP COLUMN chain_id"));
                let key = match table.as_str() {
                    "logs" => {
                        "CONSTRAINT logs_pkey PRIMARY KEY (block_number, log_index)".to_owned()
                    }
                    "checkpoints" => "PRIMARY KEY (contract)".to_owned(),
                    "contracts" => "PRIMARY KEY (name)".to_owned(),
                    "block_hashes" | "receipt_blocks" => "PRIMARY KEY (block_number)".to_owned(),
                    "factory_children" => "PRIMARY KEY (contract, address)".to_owned(),
                    "transactions" => "PRIMARY KEY (block_number, transaction_index)".to_owned(),
                    typed => format!("CONSTRAINT \"{typed}_key\" UNIQUE (block_number, log_index)"),
                };
                statements.push(format!("ALTER TABLE \"{table}\" ADD {key}"));
                if table == "factory_children" {
                    statements.push(
                        "CREATE INDEX factory_children_block_number ON factory_children (block_number)"
                            .into(),
                    );
                }
            }
        }
    }
    statements.extend([
        format!("INSERT INTO meta (key, value) VALUES ('chain_id', '{chain_id}')"),
        "DROP TABLE chains".into(),
        "DELETE FROM _sqlx_migrations WHERE version = 9".into(),
    ]);
    for statement in statements {
        support::execute(work, &statement).await;
    }
}

/// Statements that turn a database of this version back into the layout of the version before migration
/// 0004 (`migrations/*/0001..0003`), keeping its rows (after [`to_previous_release`]).
fn to_earlier_layout(backend: Backend, with_timestamps: bool) -> Vec<String> {
    let timestamp_column = if with_timestamps {
        ",\n    block_timestamp INTEGER"
    } else {
        ""
    };
    match backend {
        Backend::Sqlite => vec![
            format!(
                "CREATE TABLE logs_earlier (
    block_number      INTEGER NOT NULL,
    block_hash        TEXT    NOT NULL,
    transaction_hash  TEXT    NOT NULL,
    transaction_index INTEGER NOT NULL,
    log_index         INTEGER NOT NULL,
    address           TEXT    NOT NULL,
    topic0            TEXT,
    topic1            TEXT,
    topic2            TEXT,
    topic3            TEXT,
    data              TEXT    NOT NULL{timestamp_column},
    UNIQUE (block_hash, log_index)
)"
            ),
            // In the order a sync of the earlier version wrote them: by block.
            "INSERT INTO logs_earlier SELECT * FROM logs ORDER BY block_number, log_index".into(),
            "DROP TABLE logs".into(),
            "ALTER TABLE logs_earlier RENAME TO logs".into(),
            "CREATE INDEX logs_address_topic0_block_number ON logs (address, topic0, block_number)"
                .into(),
            "CREATE INDEX logs_block_number ON logs (block_number)".into(),
            "DELETE FROM _sqlx_migrations WHERE version = 4".into(),
        ],
        Backend::Postgres => {
            let mut statements = to_text_logs();
            statements.extend([
                "ALTER TABLE logs DROP CONSTRAINT logs_pkey".into(),
                "ALTER TABLE logs ADD UNIQUE (block_hash, log_index)".into(),
                "CREATE INDEX logs_block_number ON logs (block_number)".into(),
                "DELETE FROM _sqlx_migrations WHERE version = 4".into(),
            ]);
            statements
        }
    }
}

/// Statements that turn a Postgres database of this version back into the layout before migration 0007
/// (the raw table's hashes, addresses, topics and data as `0x` + hex TEXT), keeping its rows.
fn to_text_logs() -> Vec<String> {
    let columns = [
        "block_hash",
        "transaction_hash",
        "address",
        "topic0",
        "topic1",
        "topic2",
        "topic3",
        "data",
    ];
    let alter: Vec<String> = columns
        .iter()
        .map(|c| format!("ALTER COLUMN {c} TYPE TEXT USING '0x' || encode({c}, 'hex')"))
        .collect();
    vec![
        format!("ALTER TABLE logs {}", alter.join(", ")),
        "DELETE FROM _sqlx_migrations WHERE version = 7".into(),
    ]
}

/// `(column, type)` of the raw table's columns, as Postgres's catalog names the types.
async fn raw_column_types(work: &Workdir) -> Vec<(String, String)> {
    query_texts(
        work,
        "SELECT column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = 'logs' ORDER BY ordinal_position",
    )
    .await
    .into_iter()
    .map(|row| (row[0].clone(), row[1].clone()))
    .collect()
}

/// The raw table's keys and indexes, as the catalog spells them.
async fn layout(work: &Workdir, backend: Backend) -> String {
    let sql = match backend {
        Backend::Sqlite => {
            "SELECT coalesce(sql, name) FROM sqlite_master WHERE tbl_name = 'logs' ORDER BY name"
        }
        Backend::Postgres => {
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() \
             AND tablename = 'logs' ORDER BY indexname"
        }
    };
    query_texts(work, sql)
        .await
        .into_iter()
        .map(|row| row.join(" "))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn migrates_an_earlier_database_in_place(backend: Backend, with_timestamps: bool) {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let sync_extra = if with_timestamps {
        ""
    } else {
        "block_timestamps = false"
    };
    let config = work.write_config(&node.http_url(), &all_contracts(), "", sync_extra);
    support::sync(&config, Target::Number(12_000))
        .await
        .expect("first sync");
    let before = support::row_count(&work, "logs").await.expect("logs");
    assert!(before > 1_000, "{before} logs synced before the migration");
    to_previous_release(&work, backend).await;
    for statement in to_earlier_layout(backend, with_timestamps) {
        support::execute(&work, &statement).await;
    }
    let earlier = layout(&work, backend).await;
    assert!(
        earlier.contains("block_hash, log_index") && earlier.contains("logs_block_number"),
        "the earlier layout is staged: {earlier}"
    );

    support::sync(&config, Target::Number(19_000))
        .await
        .expect("sync after the upgrade");
    let migrated = layout(&work, backend).await;
    assert!(
        !migrated.contains("block_hash, log_index") && !migrated.contains("logs_block_number"),
        "the earlier keys are gone: {migrated}"
    );
    match backend {
        Backend::Sqlite => assert!(
            migrated.contains("PRIMARY KEY (chain_id, block_number, log_index)")
                && migrated.contains("WITHOUT ROWID"),
            "{migrated}"
        ),
        Backend::Postgres => assert!(
            migrated.contains("UNIQUE INDEX logs_pkey ON")
                && migrated.contains("(chain_id, block_number, log_index)"),
            "{migrated}"
        ),
    }
    assert!(
        migrated.contains("logs_address_topic0_block_number"),
        "{migrated}"
    );
    let columns = support::columns(&work, "logs").await;
    assert_eq!(
        columns.iter().any(|c| c == "block_timestamp"),
        with_timestamps,
        "{columns:?}"
    );
    let n = assert_db_matches_truth(&work, &truth, &all_contracts(), 19_000).await;
    assert!(n as i64 > before, "compared {n} logs, {before} from before");
}

/// Goal: a Postgres database of the version before migration 0007 (every raw hash, address, topic and data
/// as hex TEXT, the rest of this version's layout) is migrated in place to BYTEA: every row synced before
/// stays, exactly, beside those synced after. Method: sync part of the chain, turn the raw table's columns
/// back into TEXT and forget 0007, sync on; the columns must then be BYTEA and the database equal the ground
/// truth log by log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrates_postgres_raw_logs_from_text_to_bytea() {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let work = Workdir::with(Backend::Postgres).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(12_000))
        .await
        .expect("first sync");
    let before = support::row_count(&work, "logs").await.expect("logs");
    assert!(before > 1_000, "{before} logs synced before the migration");
    let hex_columns = |types: &[(String, String)], wanted: &str| {
        types
            .iter()
            .filter(|(name, _)| !name.contains("index") && !name.starts_with("block_num"))
            .filter(|(name, _)| name != "block_timestamp" && name != "chain_id")
            .all(|(_, kind)| kind == wanted)
    };
    let created = raw_column_types(&work).await;
    assert!(hex_columns(&created, "bytea"), "{created:?}");
    to_previous_release(&work, Backend::Postgres).await;
    for statement in to_text_logs() {
        support::execute(&work, &statement).await;
    }
    let staged = raw_column_types(&work).await;
    assert!(hex_columns(&staged, "text"), "{staged:?}");
    assert_eq!(staged.len(), created.len() - 1, "{staged:?}");

    support::sync(&config, Target::Number(19_000))
        .await
        .expect("sync after the upgrade");
    assert_eq!(raw_column_types(&work).await, created);
    let n = assert_db_matches_truth(&work, &truth, &all_contracts(), 19_000).await;
    assert!(n as i64 > before, "compared {n} logs, {before} from before");
}

async fn migrates_a_database_with_timestamps(backend: Backend) {
    migrates_an_earlier_database_in_place(backend, true).await;
}
both_backends!(migrates_a_database_with_timestamps);

async fn migrates_a_database_without_timestamps(backend: Backend) {
    migrates_an_earlier_database_in_place(backend, false).await;
}
both_backends!(migrates_a_database_without_timestamps);

/// The typed tables' `CREATE TABLE` texts on SQLite, by name.
async fn typed_layouts(work: &Workdir) -> Vec<(String, String)> {
    query_texts(
        work,
        "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND sql LIKE '%log_index%' \
         AND name NOT IN ('logs', 'factory_children') ORDER BY name",
    )
    .await
    .into_iter()
    .map(|row| (row[0].clone(), row[1].clone()))
    .collect()
}

/// SQLite's typed tables are stored in key order (`WITHOUT ROWID`, keyed by the typed key); a table of the
/// earlier layout (a rowid table with the key as a unique index beside it) is neither rebuilt nor refused:
/// the next sync writes into it, and every table equals the ground truth log by log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_tables_of_the_earlier_sqlite_layout_keep_working() {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let work = Workdir::with(Backend::Sqlite).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(12_000))
        .await
        .expect("first sync");
    let created = typed_layouts(&work).await;
    assert!(created.len() >= 3, "typed tables: {created:?}");
    for (name, sql) in &created {
        assert!(
            sql.contains("PRIMARY KEY (chain_id, block_number, log_index))")
                && sql.ends_with("WITHOUT ROWID"),
            "{name}: {sql}"
        );
        let earlier = sql
            .replacen(name.as_str(), &format!("{name}_earlier"), 1)
            .replace("PRIMARY KEY (", "UNIQUE (")
            .replace(" WITHOUT ROWID", "");
        for statement in [
            earlier,
            format!("INSERT INTO \"{name}_earlier\" SELECT * FROM \"{name}\""),
            format!("DROP TABLE \"{name}\""),
            format!("ALTER TABLE \"{name}_earlier\" RENAME TO \"{name}\""),
        ] {
            support::execute(&work, &statement).await;
        }
    }
    let staged = typed_layouts(&work).await;
    assert!(
        staged.iter().all(|(_, sql)| !sql.contains("WITHOUT ROWID")),
        "{staged:?}"
    );

    support::sync(&config, Target::Number(19_000))
        .await
        .expect("sync into the earlier layout");
    assert_eq!(typed_layouts(&work).await, staged, "not rebuilt");
    assert_db_matches_truth(&work, &truth, &all_contracts(), 19_000).await;
}

/// Goal: typed tables keyed by `(block_number, log_index, block_hash)`, as the version before the current
/// key created them, are neither rebuilt nor refused: the next sync writes into them and every table equals
/// the ground truth log by log. Method: sync part of the chain, give every typed table that key (SQLite:
/// the table rebuilt `WITHOUT ROWID` on it; Postgres: the constraint replaced), sync on.
async fn typed_tables_keyed_with_the_block_hash_keep_working(backend: Backend) {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(12_000))
        .await
        .expect("first sync");
    let typed_tables = match backend {
        Backend::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%log_index%' \
             AND name NOT IN ('logs', 'factory_children') ORDER BY name"
        }
        Backend::Postgres => {
            "SELECT table_name::text FROM information_schema.columns \
             WHERE table_schema = current_schema() AND column_name = 'log_index' \
             AND table_name NOT IN ('logs', 'factory_children') ORDER BY table_name"
        }
    };
    let tables: Vec<String> = query_texts(&work, typed_tables)
        .await
        .into_iter()
        .map(|mut row| row.remove(0))
        .collect();
    assert!(tables.len() >= 3, "typed tables: {tables:?}");
    for name in &tables {
        let statements = match backend {
            Backend::Sqlite => {
                let sql = query_texts(
                    &work,
                    &format!("SELECT sql FROM sqlite_master WHERE name = '{name}'"),
                )
                .await
                .remove(0)
                .remove(0);
                let current = "PRIMARY KEY (chain_id, block_number, log_index))";
                assert!(sql.contains(current), "{name}: {sql}");
                let keyed = sql
                    .replacen(name.as_str(), &format!("{name}_keyed"), 1)
                    .replace(
                        current,
                        "PRIMARY KEY (chain_id, block_number, log_index, block_hash))",
                    );
                vec![
                    keyed,
                    format!("INSERT INTO \"{name}_keyed\" SELECT * FROM \"{name}\""),
                    format!("DROP TABLE \"{name}\""),
                    format!("ALTER TABLE \"{name}_keyed\" RENAME TO \"{name}\""),
                ]
            }
            Backend::Postgres => vec![
                format!("ALTER TABLE \"{name}\" DROP CONSTRAINT \"{name}_key\""),
                format!(
                    "ALTER TABLE \"{name}\" ADD CONSTRAINT \"{name}_key\" \
                     UNIQUE (chain_id, block_number, log_index, block_hash)"
                ),
            ],
        };
        for statement in statements {
            support::execute(&work, &statement).await;
        }
    }

    support::sync(&config, Target::Number(19_000))
        .await
        .expect("sync into the tables keyed with the hash");
    assert_db_matches_truth(&work, &truth, &all_contracts(), 19_000).await;
}
both_backends!(typed_tables_keyed_with_the_block_hash_keep_working);

/// The page size of the test's SQLite database.
async fn page_size(work: &Workdir) -> String {
    query_texts(work, "SELECT CAST(page_size AS TEXT) FROM pragma_page_size")
        .await
        .remove(0)
        .remove(0)
}

/// A database this version creates has 16 KiB pages; one created with SQLite's 4 KiB (every database
/// before this version) keeps them, is not rebuilt, and syncs on exactly. Method: the 4 KiB file is made
/// before the first sync (its header written by `user_version`, which fixes the page size), then synced
/// in two steps; the database must equal the ground truth log by log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_databases_get_16_kib_pages_and_earlier_ones_keep_theirs() {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();

    let fresh = Workdir::with(Backend::Sqlite).await;
    let config = fresh.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(8_000))
        .await
        .expect("sync into a new database");
    assert_eq!(page_size(&fresh).await, "16384");
    assert_db_matches_truth(&fresh, &truth, &all_contracts(), 8_000).await;

    let earlier = Workdir::with(Backend::Sqlite).await;
    let mut conn = sqlx::ConnectOptions::connect(
        &sqlx::sqlite::SqliteConnectOptions::new()
            .filename(earlier.db())
            .create_if_missing(true)
            .page_size(4096),
    )
    .await
    .expect("create the file");
    sqlx::query("PRAGMA user_version = 0")
        .execute(&mut conn)
        .await
        .expect("write the header");
    sqlx::Connection::close(conn).await.expect("close");
    let config = earlier.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(8_000))
        .await
        .expect("first sync");
    support::sync(&config, Target::Number(19_000))
        .await
        .expect("second sync");
    assert_eq!(page_size(&earlier).await, "4096");
    assert_db_matches_truth(&earlier, &truth, &all_contracts(), 19_000).await;
}
