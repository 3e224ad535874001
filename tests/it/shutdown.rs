//! Shutdown (issue #21): `logslice run` and `logslice sync`, as child processes, get SIGTERM while the node is
//! down (connections dropped, or requests hanging) and while a backfill commits; each must exit with 130
//! within `sync.shutdown_grace` + 1 s, through the clean path (not the forced exit), and leave a database
//! whose checkpoint covers exactly the rows committed; a rerun then finishes exact.
//!
//! The test waits on events only: the devnode's counters (woken on every update), and the child's exit.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use devnode::{DevNode, Down, StatsSnapshot};

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, Backend, Contract, Workdir,
};

/// The grace the tests configure: short, so the forced exit would show within the test's bound.
const GRACE: Duration = Duration::from_secs(2);

/// A failure guard on waits for the devnode's counters.
const PATIENCE: Duration = Duration::from_secs(60);

/// Writes `config.toml` in `work` for the node at `url`, with `node_keys` and `sync_keys` as the only
/// `[node]` and `[sync]` settings besides the URL, and `contracts`.
pub fn write_config(
    work: &Workdir,
    url: &str,
    node_keys: &str,
    sync_keys: &str,
    contracts: &[Contract],
) -> PathBuf {
    let database = match &work.schema {
        None => format!("url = \"sqlite://{}\"", work.db().display()),
        Some(schema) => format!(
            "url = \"{}\"\nschema = \"{}\"",
            schema.secret_url().expose(),
            schema.name
        ),
    };
    let mut text = format!(
        "[node]\nurl = \"{url}\"\n{node_keys}\n\n[database]\n{database}\n\n[sync]\n{sync_keys}\n"
    );
    let abis = Path::new(env!("CARGO_MANIFEST_DIR")).join("abis");
    for c in contracts {
        text.push_str(&format!(
            "\n[[contracts]]\nname = \"{}\"\naddress = \"{:#x}\"\nabi = \"{}\"\nstart_block = {}\n",
            c.name,
            c.address,
            abis.join(c.abi).display(),
            c.start_block
        ));
        if !c.events.is_empty() {
            let names: Vec<String> = c.events.iter().map(|e| format!("\"{e}\"")).collect();
            text.push_str(&format!("events = [{}]\n", names.join(", ")));
        }
    }
    let path = work.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

/// `logslice <args> --config <config>`, its log lines to `stderr.log` in the work dir.
fn spawn(work: &Workdir, args: &[&str], config: &Path) -> Child {
    let stderr = std::fs::File::create(work.dir.path().join("stderr.log")).expect("log file");
    Command::new(env!("CARGO_BIN_EXE_logslice"))
        .args(args)
        .arg("--config")
        .arg(config)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("spawn logslice")
}

fn stderr(work: &Workdir) -> String {
    std::fs::read_to_string(work.dir.path().join("stderr.log")).unwrap_or_default()
}

async fn wait_for(node: &DevNode, what: &str, done: impl Fn(&StatsSnapshot) -> bool) {
    if tokio::time::timeout(PATIENCE, node.wait_for_stats(done))
        .await
        .is_err()
    {
        panic!("{what}: not seen within {PATIENCE:?}: {:#?}", node.stats());
    }
}

/// Waits for `child` to exit; kills it and fails the test after `patience`.
async fn exit_status(child: Child, patience: Duration, work: &Workdir) -> std::process::ExitStatus {
    let pid = child.id().to_string();
    let mut child = child;
    let waiting = tokio::task::spawn_blocking(move || child.wait().expect("wait for the child"));
    match tokio::time::timeout(patience, waiting).await {
        Ok(joined) => joined.expect("join"),
        Err(_) => {
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            panic!(
                "still running after {patience:?}; its log:\n{}",
                stderr(work)
            );
        }
    }
}

/// Sends SIGTERM to `child` and waits for it to exit; returns its exit code and how long it took.
async fn terminate(child: Child, work: &Workdir) -> (Option<i32>, Duration) {
    let pid = child.id().to_string();
    let sent = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid}");
    let status = exit_status(child, GRACE * 5, work).await;
    (status.code(), sent.elapsed())
}

/// Asserts the exit of a SIGTERM: 130, within the grace and a second, through the clean path.
fn assert_stopped_cleanly(work: &Workdir, code: Option<i32>, elapsed: Duration) {
    let log = stderr(work);
    assert_eq!(code, Some(130), "exit code; log:\n{log}");
    assert!(
        elapsed <= GRACE + Duration::from_secs(1),
        "stopped {elapsed:?} after SIGTERM; log:\n{log}"
    );
    assert!(
        log.contains("stopped; everything committed before the signal is intact"),
        "the clean shutdown path was not taken; log:\n{log}"
    );
    assert!(
        !log.contains("not stopped within sync.shutdown_grace"),
        "the forced exit was needed; log:\n{log}"
    );
}

/// Every contract's checkpoint (they all start at block 0, so they move together); `None` before the first
/// commit.
async fn common_checkpoint(work: &Workdir) -> Option<u64> {
    let mut checkpoints = Vec::new();
    for contract in all_contracts() {
        checkpoints.push(support::checkpoint(work, contract.name).await);
    }
    assert!(
        checkpoints.windows(2).all(|w| w[0] == w[1]),
        "checkpoints moved apart: {checkpoints:?}"
    );
    checkpoints[0].map(|c| u64::try_from(c).expect("a block number"))
}

/// The daemon follows the head; the node goes down (`down`) and the daemon retries or waits; SIGTERM.
async fn sigterm_while_the_node_is_down(backend: Backend, down: Down) {
    let node = support::start(node_config(3_000)).await;
    let truth = node.truth();
    let head = truth.head();
    let work = Workdir::with(backend).await;
    // Retries for longer than the test runs, and a request timeout far beyond the grace: only the
    // cancellation can end them in time.
    let config = write_config(
        &work,
        &node.http_url(),
        "requests_per_second = 1000\nmax_retries = 100000\ninitial_backoff = \"10ms\"\nmax_backoff = \"100ms\"\nrequest_timeout = \"60s\"",
        &format!(
            "poll_interval = \"50ms\"\nshutdown_grace = \"{}s\"",
            GRACE.as_secs()
        ),
        &all_contracts(),
    );
    let child = spawn(&work, &["run"], &config);
    // A second head poll comes after the first catch-up has committed up to the head.
    wait_for(&node, "the daemon caught up", |s| {
        s.calls("eth_blockNumber") >= 2
    })
    .await;
    node.set_down(down);
    match down {
        Down::Refuse => {
            wait_for(&node, "the daemon retrying", |s| s.refused_while_down >= 3).await;
        }
        Down::Hang | Down::Up | Down::Status(_) | Down::RpcErrors => {
            wait_for(&node, "a request hanging", |s| s.hung_while_down >= 1).await;
        }
    }
    let (code, elapsed) = terminate(child, &work).await;
    assert_stopped_cleanly(&work, code, elapsed);
    assert_eq!(common_checkpoint(&work).await, Some(head));
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_the_node_refuses_connections_exits_130_within_the_grace() {
    sigterm_while_the_node_is_down(Backend::Sqlite, Down::Refuse).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_a_request_hangs_exits_130_within_the_grace() {
    sigterm_while_the_node_is_down(Backend::Sqlite, Down::Hang).await;
}

/// `sync` backfills (rate-limited, committing small batches often); SIGTERM once many ranges were fetched:
/// exit 130, the committed prefix exact, and a rerun completes it exactly.
async fn sigterm_mid_backfill_keeps_every_committed_range_and_a_rerun_finishes(backend: Backend) {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let target = 19_000;
    let work = Workdir::with(backend).await;
    let config = write_config(
        &work,
        &node.http_url(),
        "requests_per_second = 20\nmax_retries = 8\ninitial_backoff = \"10ms\"\nmax_backoff = \"100ms\"",
        &format!(
            "initial_block_range = 100\nmax_block_range = 400\nmax_batch_logs = 100\nshutdown_grace = \"{}s\"",
            GRACE.as_secs()
        ),
        &all_contracts(),
    );
    let target_arg = target.to_string();
    let child = spawn(&work, &["sync", "--to", &target_arg], &config);
    wait_for(&node, "the backfill under way", |s| {
        s.ok("eth_getLogs") >= 25
    })
    .await;
    let (code, elapsed) = terminate(child, &work).await;
    assert_stopped_cleanly(&work, code, elapsed);
    let committed = common_checkpoint(&work)
        .await
        .expect("batches were committed before the signal");
    assert!(
        committed < target,
        "the backfill was interrupted, at {committed}"
    );
    assert_db_matches_truth(&work, &truth, &all_contracts(), committed).await;

    let rerun = spawn(&work, &["sync", "--to", &target_arg], &config);
    let status = exit_status(rerun, PATIENCE, &work).await;
    assert_eq!(status.code(), Some(0), "rerun; log:\n{}", stderr(&work));
    assert_eq!(common_checkpoint(&work).await, Some(target));
    assert_db_matches_truth(&work, &truth, &all_contracts(), target).await;
}
both_backends!(sigterm_mid_backfill_keeps_every_committed_range_and_a_rerun_finishes);
