//! Secondary indexes built after a long backfill: a `logslice` process killed with SIGKILL while they are
//! deferred (during the backfill) or while one is being built resumes, on the next sync, into a database
//! that equals the ground truth and has every index; while a build runs, `status` says so and no other
//! connection sees the index.
//!
//! Method: a real child process against the devnode. The kill during the backfill lands once the node has
//! served some of its requests (the indexes are dropped before the first one); the kill during the build
//! lands where the build holds (`LOGSLICE_TEST_HOLD_INDEX_BUILD`): after its `CREATE INDEX`, before that
//! transaction commits, which the child announces on stderr. No sleeps decide anything.

use std::process::{Command, Stdio};
use std::time::Duration;

use logslice::pipeline::Target;
use logslice::sink::{
    HOLD_INDEX_BUILD_ENV, HOLD_INDEX_BUILD_MESSAGE, META_DEFERRED_INDEXES, META_INDEX_BUILD_STARTED,
};

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, query_texts, Backend, Held, Workdir,
};

/// The index of `logs` a backfill defers (`docs/schema.md`: indexed for `(address, topic0, block_number)`).
const LOGS_INDEX: &str = "logs_address_topic0_block_number";

/// Whether `index` exists, as the catalog says from a connection of the test's own.
async fn index_exists(work: &Workdir, backend: Backend, index: &str) -> bool {
    let sql = match backend {
        Backend::Sqlite => {
            format!("SELECT name FROM sqlite_master WHERE type = 'index' AND name = '{index}'")
        }
        Backend::Postgres => format!(
            "SELECT indexname::text FROM pg_indexes WHERE schemaname = current_schema() \
             AND indexname = '{index}'"
        ),
    };
    !query_texts(work, &sql).await.is_empty()
}

/// The `meta` value of `key`, if any.
async fn meta(work: &Workdir, key: &str) -> Option<String> {
    query_texts(work, &format!("SELECT value FROM meta WHERE key = '{key}'"))
        .await
        .into_iter()
        .next()
        .map(|mut row| row.remove(0))
}

fn binary() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_logslice"));
    command.env_remove("RUST_LOG");
    command
}

/// `logslice status --json` for `config`, parsed.
fn status_json(config: &std::path::Path) -> serde_json::Value {
    let out = binary()
        .args(["status", "--json", "--config"])
        .arg(config)
        .output()
        .expect("run status");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("status --json prints JSON")
}

/// SIGKILL during a long backfill that deferred the indexes, then a rerun: exact, and the index is built.
async fn a_backfill_killed_while_the_indexes_are_deferred_resumes_and_builds_them(
    backend: Backend,
) {
    let mut config = node_config(40_000);
    // Slow answers keep the sync running long enough to be killed mid-way.
    config.faults.latency = Duration::from_millis(20);
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "max_concurrency = 2",
        "max_batch_logs = 500\ninitial_block_range = 200\nmax_block_range = 400\n\
         defer_indexes_min_blocks = 1000",
    );
    let mut child = binary()
        .args(["sync", "--to", "39000", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn logslice");
    // The indexes are dropped before the first request for logs: wait (bounded) until some were served.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while node.stats().ok("eth_getLogs") < 40 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child made no progress"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "the child finished before it could be killed"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    let checkpoint = support::checkpoint(&work, "token_a").await.unwrap_or(0);
    assert!(
        checkpoint < 39_000,
        "killed before the end (checkpoint {checkpoint})"
    );
    assert!(!index_exists(&work, backend, LOGS_INDEX).await);
    assert_eq!(
        meta(&work, META_DEFERRED_INDEXES).await.as_deref(),
        Some(LOGS_INDEX)
    );
    assert_eq!(status_json(&path)["indexes"]["state"], "pending");

    support::sync(&path, Target::Number(39_000))
        .await
        .expect("resume");
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 39_000).await;
    assert!(index_exists(&work, backend, LOGS_INDEX).await);
    assert_eq!(meta(&work, META_DEFERRED_INDEXES).await, None);
    assert_eq!(status_json(&path)["indexes"]["state"], "built");
}
both_backends!(a_backfill_killed_while_the_indexes_are_deferred_resumes_and_builds_them);

/// SIGKILL while the index is being built (its `CREATE INDEX` done, its transaction not committed): no
/// other connection ever sees the index, `status` says a build runs, and a rerun builds it, exact.
async fn an_index_build_killed_with_sigkill_resumes_and_builds_the_index(backend: Backend) {
    let node = support::start(node_config(6_000)).await;
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "defer_indexes_min_blocks = 1000",
    );
    let held = Held::sync(&path, 5_000, HOLD_INDEX_BUILD_ENV, HOLD_INDEX_BUILD_MESSAGE).await;
    // Held inside the build's transaction: the backfill is committed, the index is not.
    assert_eq!(support::checkpoint(&work, "token_a").await, Some(5_000));
    assert!(!index_exists(&work, backend, LOGS_INDEX).await);
    assert!(meta(&work, META_INDEX_BUILD_STARTED).await.is_some());
    let status = status_json(&path);
    assert_eq!(status["indexes"]["state"], "building", "{status}");
    assert_eq!(status["indexes"]["deferred"][0], LOGS_INDEX, "{status}");
    assert!(status["indexes"]["build_started"].is_string(), "{status}");

    held.kill();
    assert!(!index_exists(&work, backend, LOGS_INDEX).await);
    assert_eq!(
        meta(&work, META_DEFERRED_INDEXES).await.as_deref(),
        Some(LOGS_INDEX)
    );

    support::sync(&path, Target::Number(5_000))
        .await
        .expect("rerun");
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 5_000).await;
    assert!(index_exists(&work, backend, LOGS_INDEX).await);
    assert_eq!(meta(&work, META_DEFERRED_INDEXES).await, None);
    assert_eq!(meta(&work, META_INDEX_BUILD_STARTED).await, None);
    let status = status_json(&path);
    assert_eq!(status["indexes"]["state"], "built", "{status}");
}
both_backends!(an_index_build_killed_with_sigkill_resumes_and_builds_the_index);

/// A short catch-up over a database that covers more blocks keeps its indexes (no rebuild over every row
/// stored). Method: the index is replaced by one of the same name with an extra column; a deferral would
/// drop it and the build would create the standard one.
async fn a_short_catch_up_keeps_the_indexes(backend: Backend) {
    let node = support::start(node_config(6_000)).await;
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "defer_indexes_min_blocks = 1000",
    );
    support::sync(&path, Target::Number(4_000))
        .await
        .expect("first sync");
    assert!(index_exists(&work, backend, LOGS_INDEX).await);
    support::execute(&work, &format!("DROP INDEX {LOGS_INDEX}")).await;
    support::execute(
        &work,
        &format!("CREATE INDEX {LOGS_INDEX} ON logs (address, topic0, block_number, log_index)"),
    )
    .await;
    let definition = |work| async move {
        let sql = match backend {
            Backend::Sqlite => format!("SELECT sql FROM sqlite_master WHERE name = '{LOGS_INDEX}'"),
            Backend::Postgres => format!(
                "SELECT indexdef::text FROM pg_indexes WHERE schemaname = current_schema() \
                 AND indexname = '{LOGS_INDEX}'"
            ),
        };
        query_texts(work, &sql).await.concat().concat()
    };
    // 1,000 blocks ahead (at the minimum) over 4,001 stored: kept.
    support::sync(&path, Target::Number(5_000))
        .await
        .expect("catch-up");
    assert!(definition(&work).await.contains("log_index"));
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 5_000).await;
}
both_backends!(a_short_catch_up_keeps_the_indexes);
