//! A database the previous release wrote (`tests/fixtures/b696f2d_*.sql`, written by `main` at b696f2d: one
//! chain, no `chain_id`, the chain id in `meta`) opens with this version: migration 9 tags every row with the
//! chain id the database recorded, records it in `chains` as the chain named `default`, and a sync goes on
//! from the checkpoints into the same tables; the database then equals the ground truth log by log.
//!
//! Method: the fixture (a sync to block 2,000 of the chain below, with a factory and `[sync] transactions`)
//! is loaded into a fresh database or schema as text SQL, opened by this version (the migration runs), every
//! row's `chain_id` checked, then synced to block 4,000 of the same simulated chain and compared whole.

use logslice::pipeline::Target;
use sqlx::{Connection, Executor};

use crate::both_backends;
use crate::factory::{add_pairs, assert_exact, factory_chain, factory_contract, token_a};
use crate::support::{self, query_texts, Backend, Workdir};

/// The chain id of the fixtures' simulated chain (devnode's default).
const FIXTURE_CHAIN_ID: u64 = 1337;

/// The fixtures' chain: 4,000 blocks, 20 pairs by the head, density 0.12 (`tests/fixtures/README.md`).
fn fixture_chain() -> devnode::DevNodeConfig {
    let mut config = factory_chain(4_000, 20);
    config.chain.density = 0.12;
    config
}

/// Loads the previous release's dump for `backend` into `work`'s database (Postgres: its schema).
async fn load_fixture(work: &Workdir, backend: Backend) {
    match backend {
        Backend::Sqlite => {
            let dump = include_str!("../fixtures/b696f2d_sqlite.sql");
            let options = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(work.db())
                .create_if_missing(true);
            let mut conn = sqlx::ConnectOptions::connect(&options)
                .await
                .expect("create the database");
            conn.execute(dump).await.expect("load the SQLite fixture");
            conn.close().await.expect("close");
        }
        Backend::Postgres => {
            let schema = work.schema.as_ref().expect("a Postgres workdir");
            // psql's `\restrict` lines are not SQL; the dump's schema becomes the test's own.
            let dump: String = include_str!("../fixtures/b696f2d_postgres.sql")
                .lines()
                .filter(|line| !line.starts_with('\\'))
                .collect::<Vec<_>>()
                .join("\n")
                .replace("fixture_b696f2d", &schema.name);
            let mut conn = sqlx::PgConnection::connect(crate::pg::url().as_str())
                .await
                .expect("connect");
            conn.execute(dump.as_str())
                .await
                .expect("load the Postgres fixture");
            conn.close().await.expect("close");
        }
    }
}

/// The tables of `work`'s database that have a `chain_id` column, besides `chains`.
async fn tables_with_chain_id(work: &Workdir, backend: Backend) -> Vec<String> {
    let sql = match backend {
        Backend::Sqlite => {
            "SELECT m.name FROM sqlite_master m WHERE m.type = 'table' AND m.name <> 'chains' \
             AND EXISTS (SELECT 1 FROM pragma_table_info(m.name) p WHERE p.name = 'chain_id') \
             ORDER BY m.name"
        }
        Backend::Postgres => {
            "SELECT table_name::text FROM information_schema.columns WHERE table_schema = current_schema() \
             AND column_name = 'chain_id' AND table_name <> 'chains' ORDER BY table_name"
        }
    };
    query_texts(work, sql)
        .await
        .into_iter()
        .map(|mut row| row.remove(0))
        .collect()
}

async fn migrates_a_database_of_the_previous_release(backend: Backend) {
    let node = support::start(fixture_chain()).await;
    let truth = node.truth();
    assert_eq!(truth.chain_id(), FIXTURE_CHAIN_ID);
    let work = Workdir::with(backend).await;
    load_fixture(&work, backend).await;
    let before = support::row_count(&work, "logs").await.expect("logs");
    assert!(before > 100, "{before} logs in the fixture");
    assert!(support::columns(&work, "logs")
        .await
        .iter()
        .all(|c| c != "chain_id"));

    let contracts = [token_a(), factory_contract()];
    let config = work.write_config(&node.http_url(), &contracts, "", "transactions = true");
    add_pairs(&config);
    // Opened by this version: the migration runs.
    let loaded = logslice::config::load(&config).expect("the config is valid");
    let (sink, _) = match logslice::pipeline::open_sink(&loaded).await {
        Ok(opened) => opened,
        Err(err) => panic!("open_sink: {err}"),
    };
    assert_eq!(
        sink.chains().await.expect("chains"),
        [("default".to_owned(), FIXTURE_CHAIN_ID)]
    );
    sink.close().await;
    let tables = tables_with_chain_id(&work, backend).await;
    for wanted in [
        "logs",
        "checkpoints",
        "contracts",
        "block_hashes",
        "factory_children",
        "transactions",
        "receipt_blocks",
        "token_a_transfer",
        "uniswap_v2_factory_pair_created",
        "pair_swap",
    ] {
        assert!(tables.iter().any(|t| t == wanted), "{wanted}: {tables:?}");
    }
    for table in &tables {
        let counts = query_texts(
            &work,
            &format!(
                "SELECT CAST(count(*) AS TEXT), CAST(count(CASE WHEN chain_id = {FIXTURE_CHAIN_ID} THEN 1 END) AS TEXT) \
                 FROM \"{table}\""
            ),
        )
        .await;
        assert_eq!(counts[0][0], counts[0][1], "every row of {table} is tagged");
    }
    assert_eq!(
        support::row_count(&work, "logs").await,
        Some(before),
        "no row lost"
    );
    let meta = query_texts(&work, "SELECT key FROM meta ORDER BY key").await;
    assert!(
        meta.iter()
            .all(|row| row[0] != "chain_id" && row[0] != "providers"),
        "{meta:?}"
    );
    let providers = query_texts(
        &work,
        "SELECT CAST(count(*) AS TEXT) FROM chains WHERE providers IS NOT NULL",
    )
    .await;
    assert_eq!(providers, [["1"]], "the providers' report moved to chains");

    support::sync(&config, Target::Number(4_000))
        .await
        .expect("sync on after the migration");
    let children = assert_exact(&work, &truth, &contracts, 4_000).await;
    assert!(children >= 10, "{children} children compared");
    let n = support::row_count(&work, "logs").await.expect("logs");
    assert!(n > before, "{n} logs, {before} from the previous release");
    let untagged = query_texts(
        &work,
        &format!(
            "SELECT CAST(count(*) AS TEXT) FROM transactions WHERE chain_id <> {FIXTURE_CHAIN_ID}"
        ),
    )
    .await;
    assert_eq!(untagged, [["0"]]);
}
both_backends!(migrates_a_database_of_the_previous_release);

/// Goal: SQLite's migration 9, cut short before its one transaction commits, leaves the database as the
/// previous release wrote it, and runs whole at the next open. Method: the fixture loaded, a `logslice sync`
/// held (`LOGSLICE_TEST_HOLD_CHAIN_MIGRATION`) after every table is copied and before the commit is killed
/// with SIGKILL; the database must still be the previous release's (no `chain_id`, `meta.chain_id` there);
/// a sync then migrates it and the database equals the ground truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_sqlite_migration_runs_again_at_the_next_open() {
    let node = support::start(fixture_chain()).await;
    let truth = node.truth();
    let work = Workdir::with(Backend::Sqlite).await;
    load_fixture(&work, Backend::Sqlite).await;
    let before = support::row_count(&work, "logs").await.expect("logs");
    let contracts = [token_a(), factory_contract()];
    let config = work.write_config(&node.http_url(), &contracts, "", "transactions = true");
    add_pairs(&config);

    let held = support::Held::sync(
        &config,
        4_000,
        logslice::sink::HOLD_CHAIN_MIGRATION_ENV,
        logslice::sink::HOLD_CHAIN_MIGRATION_MESSAGE,
    )
    .await;
    held.kill();
    assert!(tables_with_chain_id(&work, Backend::Sqlite)
        .await
        .is_empty());
    let recorded = query_texts(&work, "SELECT value FROM meta WHERE key = 'chain_id'").await;
    assert_eq!(recorded, [[FIXTURE_CHAIN_ID.to_string()]]);
    assert_eq!(support::row_count(&work, "logs").await, Some(before));

    support::sync(&config, Target::Number(4_000))
        .await
        .expect("the migration runs again, then the sync");
    assert!(tables_with_chain_id(&work, Backend::Sqlite)
        .await
        .iter()
        .any(|t| t == "logs"));
    assert_exact(&work, &truth, &contracts, 4_000).await;
}
