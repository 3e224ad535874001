//! Log indexes past 2^31 (`docs/schema.md`: some chains number logs past 2^31, 0xffffffe2 is seen; issue 57,
//! item 4): stored exactly on both backends, raw and typed; a database of the versions whose Postgres
//! indexes were INTEGER is migrated in place and then takes them; an index no column holds (above
//! `i64::MAX`) fails its batch with exit 65 naming the log, and nothing of that batch is written.
//!
//! Method: the devnode's `high_log_indexes` numbers the logs of one block from a base (0xffffffe2 unless
//! said otherwise), in `eth_getLogs`, receipts and its ground truth alike; the block is one where the
//! configured contracts emitted several logs, so raw and typed rows both carry such indexes. The database is
//! then compared with the ground truth log by log.

use devnode::{DevNodeConfig, DEFAULT_LOG_INDEX_BASE};
use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, expected_logs, node_config, query_texts, Backend,
    Workdir,
};

/// The chain's length: a few thousand logs, a backfill of several batches.
const BLOCKS: u64 = 3_000;

/// The first block at or after `from` where the configured contracts have at least three logs (on the
/// default seed; the option changes no log but its index, so the chain without it says which).
async fn busy_block(from: u64) -> u64 {
    let node = support::start(node_config(BLOCKS)).await;
    let expected = expected_logs(&node.truth(), &all_contracts(), BLOCKS);
    let blocks: Vec<u64> = expected.iter().map(|(log, _)| log.block_number).collect();
    blocks
        .chunk_by(|a, b| a == b)
        .find(|run| run[0] >= from && run.len() >= 3)
        .map(|run| run[0])
        .expect("a block with three logs of the configured contracts")
}

/// A node whose block `block` numbers its logs from `base`.
fn high_node_config(block: u64, base: u64) -> DevNodeConfig {
    let mut config = node_config(BLOCKS);
    config.chain.high_log_indexes = Some(block);
    config.chain.log_index_base = base;
    config
}

/// The stored log indexes of block `block`, raw and in every typed table, as decimal text.
async fn stored_indexes(
    work: &Workdir,
    backend: Backend,
    block: u64,
) -> (Vec<String>, Vec<String>) {
    let int = support::int_text(backend, "log_index");
    let select = |table: &str| {
        format!("SELECT {int} FROM \"{table}\" WHERE block_number = {block} ORDER BY log_index")
    };
    let flat = |rows: Vec<Vec<String>>| rows.into_iter().flatten().collect::<Vec<_>>();
    let raw = flat(query_texts(work, &select("logs")).await);
    let mut typed = Vec::new();
    for table in typed_tables(work, backend).await {
        typed.extend(flat(query_texts(work, &select(&table)).await));
    }
    typed.sort();
    (raw, typed)
}

/// The typed tables: every table with a `log_index` but `logs` and `factory_children`.
async fn typed_tables(work: &Workdir, backend: Backend) -> Vec<String> {
    let sql = match backend {
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
    let tables: Vec<String> = query_texts(work, sql).await.into_iter().flatten().collect();
    assert!(tables.len() >= 3, "typed tables: {tables:?}");
    tables
}

/// Goal: a sync over a chain whose block has log indexes from 0xffffffe2 (some past 2^32) stores every one
/// exactly, raw and typed, on both backends. Method: sync the whole chain, compare with the ground truth
/// log by log, and check that the block's indexes are there (so the comparison is not vacuous).
async fn stores_log_indexes_near_2_32_exactly(backend: Backend) {
    let block = busy_block(1_000).await;
    let node = support::start(high_node_config(block, DEFAULT_LOG_INDEX_BASE)).await;
    let truth = node.truth();
    let in_truth = truth.logs(block, block);
    assert_eq!(
        in_truth[0].log_index, 0xffff_ffe2,
        "the node numbers from the base"
    );
    let work = Workdir::with(backend).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(BLOCKS))
        .await
        .expect("sync");
    assert_db_matches_truth(&work, &truth, &all_contracts(), BLOCKS).await;
    let (raw, typed) = stored_indexes(&work, backend, block).await;
    let stored = |log_index: u64| log_index.to_string();
    let expected: Vec<String> = expected_logs(&truth, &all_contracts(), BLOCKS)
        .iter()
        .filter(|(log, _)| log.block_number == block)
        .map(|(log, _)| stored(log.log_index))
        .collect();
    assert!(expected.len() >= 3, "{expected:?}");
    assert_eq!(raw, expected);
    assert!(raw.contains(&stored(DEFAULT_LOG_INDEX_BASE)), "{raw:?}");
    // Every row of the block is the chain's (migration 9: `chain_id` first of every key).
    let chain_id = truth.chain_id();
    let mut tables = typed_tables(&work, backend).await;
    tables.push("logs".to_owned());
    for table in tables {
        let other = query_texts(
            &work,
            &format!(
                "SELECT CAST(count(*) AS TEXT) FROM \"{table}\" WHERE block_number = {block} \
                 AND chain_id <> {chain_id}"
            ),
        )
        .await;
        assert_eq!(other, [["0"]], "{table}");
    }
    assert!(
        typed
            .iter()
            .any(|index| index.parse::<u64>().unwrap() >= DEFAULT_LOG_INDEX_BASE),
        "typed rows of block {block}: {typed:?}"
    );
}
both_backends!(stores_log_indexes_near_2_32_exactly);

/// `(table, column, type)` of every log and transaction index column, as Postgres's catalog names the types.
async fn index_types(work: &Workdir) -> Vec<(String, String, String)> {
    query_texts(
        work,
        "SELECT table_name::text, column_name::text, data_type::text FROM information_schema.columns \
         WHERE table_schema = current_schema() AND column_name IN ('log_index', 'transaction_index') \
         ORDER BY table_name, column_name",
    )
    .await
    .into_iter()
    .map(|row| (row[0].clone(), row[1].clone(), row[2].clone()))
    .collect()
}

/// Statements that turn a Postgres database of this version back into the one before migration 0008 (and
/// its typed tables into those earlier versions created): the log and transaction indexes INTEGER.
async fn to_integer_indexes(work: &Workdir) -> Vec<String> {
    let mut statements = vec![
        "ALTER TABLE logs ALTER COLUMN transaction_index TYPE INTEGER, \
         ALTER COLUMN log_index TYPE INTEGER"
            .to_owned(),
        "ALTER TABLE factory_children ALTER COLUMN log_index TYPE INTEGER".to_owned(),
        "DELETE FROM _sqlx_migrations WHERE version = 8".to_owned(),
    ];
    for table in typed_tables(work, Backend::Postgres).await {
        statements.push(format!(
            "ALTER TABLE \"{table}\" ALTER COLUMN log_index TYPE INTEGER"
        ));
    }
    statements
}

/// Goal: a database of the version before 64-bit indexes is migrated in place, keeps every row, and then
/// takes a log index past 2^32. Method: sync the chain below the block of high indexes, put the database
/// back into that version's layout (Postgres: INTEGER indexes in `logs`, `factory_children` and every typed
/// table, 0008 not applied, and no `transactions` table, as `[sync] transactions = false` leaves it;
/// SQLite's INTEGER has always held 64 bits, so its layout is the same), sync on past the block; the index
/// columns must be BIGINT and the database equal the ground truth log by log.
async fn migrates_integer_indexes_then_takes_a_high_log_index(backend: Backend) {
    let block = busy_block(2_000).await;
    let node = support::start(high_node_config(block, DEFAULT_LOG_INDEX_BASE)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(block - 1))
        .await
        .expect("first sync");
    let before = support::row_count(&work, "logs").await.expect("logs");
    assert!(before > 1_000, "{before} logs synced before the migration");
    if backend == Backend::Postgres {
        for statement in to_integer_indexes(&work).await {
            support::execute(&work, &statement).await;
        }
        let staged = index_types(&work).await;
        assert!(staged.len() >= 6, "{staged:?}");
        assert!(
            staged.iter().all(|(_, _, ty)| ty == "integer"),
            "{staged:?}"
        );
        assert!(
            !staged.iter().any(|(table, _, _)| table == "transactions"),
            "migration 0008 finds no transactions table: {staged:?}"
        );
    }

    support::sync(&config, Target::Number(BLOCKS))
        .await
        .expect("sync after the upgrade");
    if backend == Backend::Postgres {
        let migrated = index_types(&work).await;
        assert!(migrated.len() >= 6, "{migrated:?}");
        assert!(
            migrated.iter().all(|(_, _, ty)| ty == "bigint"),
            "{migrated:?}"
        );
    }
    let n = assert_db_matches_truth(&work, &truth, &all_contracts(), BLOCKS).await;
    assert!(n as i64 > before, "compared {n} logs, {before} from before");
    let (raw, _) = stored_indexes(&work, backend, block).await;
    assert_eq!(raw[0], DEFAULT_LOG_INDEX_BASE.to_string());
}
both_backends!(migrates_integer_indexes_then_takes_a_high_log_index);

/// Goal: a log index above `i64::MAX`, which no column of either database holds, fails `sync` with exit 65
/// (the node's data cannot be right, not a database failure) and a message naming the log (block number and
/// log index) and the column; nothing of its batch is written. Method: the node numbers one block's logs
/// from 2^63; run the binary over the chain.
async fn a_log_index_above_i64_max_fails_its_batch_with_exit_65(backend: Backend) {
    let block = busy_block(1_000).await;
    let base = 1u64 << 63;
    let node = support::start(high_node_config(block, base)).await;
    let work = Workdir::with(backend).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let support::Run { code, stderr } =
        support::run(&["sync", "--to", &BLOCKS.to_string()], &config).await;
    assert_eq!(code, Some(logslice::exit::DATA.into()), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "logs row block_number = {block}, log_index = {base} (block_hash = 0x"
        )) && stderr.contains(&format!(
            "log_index {base} does not fit the database's column"
        )),
        "{stderr}"
    );
    let written = query_texts(
        &work,
        &format!("SELECT CAST(count(*) AS TEXT) FROM logs WHERE block_number >= {block}"),
    )
    .await;
    assert_eq!(written, [["0"]], "nothing of the refused batch is written");
    for contract in all_contracts() {
        let checkpoint = support::checkpoint(&work, contract.name).await;
        assert!(
            checkpoint.is_none_or(|at| at < block as i64),
            "{} checkpoint {checkpoint:?}",
            contract.name
        );
    }
}
both_backends!(a_log_index_above_i64_max_fails_its_batch_with_exit_65);

/// Goal: indexes past 2^32, up to `i64::MAX`, round-trip exactly through every insert path: on Postgres
/// binary COPY (a batch whose blocks hold no rows) and the UNNEST insert (one beside rows already there),
/// on SQLite its bound inserts; transaction indexes too. Method: commit a batch of one block, then one of
/// it and the next (Postgres writes that one by UNNEST), and read the raw and typed rows back.
async fn the_largest_indexes_round_trip_through_every_insert(backend: Backend) {
    use crate::postgres_sink::{self, batch, prepared, raw_row};
    use logslice::sink::Sink;

    let mut db = prepared(match backend {
        Backend::Sqlite => postgres_sink::Backend::Sqlite,
        Backend::Postgres => postgres_sink::Backend::Postgres,
    })
    .await;
    let wide = [DEFAULT_LOG_INDEX_BASE, 1 << 32, i64::MAX as u64];
    let high = |blocks| {
        let mut batch = batch(blocks);
        for log in &mut batch.logs {
            let position = log.log_index;
            log.log_index = wide[usize::try_from(position).unwrap()];
            log.transaction_index = (1 << 40) + position;
        }
        batch
    };
    db.sink.commit(&high(100..=100)).await.expect("COPY");
    let both = high(100..=101);
    db.sink
        .commit(&both)
        .await
        .expect("beside rows already there");
    let expected: Vec<_> = both.logs.iter().map(raw_row).collect();
    assert_eq!(db.raw_logs().await, expected);
    let sql =
        "SELECT CAST(log_index AS TEXT) FROM demo_everything ORDER BY block_number, log_index";
    let typed: Vec<String> = match &db.sink {
        Sink::Sqlite(s) => sqlx::query_scalar(sql).fetch_all(s.pool()).await,
        Sink::Postgres(s) => sqlx::query_scalar(sql).fetch_all(s.pool()).await,
    }
    .expect("typed rows");
    let wanted: Vec<String> = both.logs.iter().map(|l| l.log_index.to_string()).collect();
    assert_eq!(typed, wanted);
    db.sink.close().await;
}
both_backends!(the_largest_indexes_round_trip_through_every_insert);
