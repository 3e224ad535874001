//! Operating logslice (issue #8): `status`, `check`, `sync --reindex`, progress lines, `/metrics` and
//! `/health` over a real socket, and the catalogue of bad inputs: each runs the binary and asserts the
//! exit code of `docs/schema.md`, that the message names the file, the field and the fix, and that neither
//! a recognisable API key nor a database password appears anywhere in the output.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use devnode::contracts;
use logslice::pipeline::Target;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};

use crate::support::{self, all_contracts, node_config, Workdir, KEY};

const SECRET_KEY: &str = "SECRET-KEY-xyz123456789";
const PG_PASSWORD: &str = "PG-SECRET-pw123";

/// What one run of the binary printed.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn all(&self) -> String {
        format!("--- stdout:\n{}\n--- stderr:\n{}", self.stdout, self.stderr)
    }
}

/// Runs the binary with `args` and the secrets in its environment, off the async runtime (the devnode
/// of the test answers on it meanwhile).
async fn run(args: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
            .args(&args)
            .env("LOGSLICE_API_KEY", SECRET_KEY)
            .env("PGPASSWORD", PG_PASSWORD)
            .env_remove("RUST_LOG")
            .output()
            .expect("run logslice");
        Run {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .expect("join")
}

fn args(list: &[&str], config: &Path) -> Vec<String> {
    let mut out: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    out.push("--config".into());
    out.push(config.display().to_string());
    out
}

/// Asserts that neither secret is in the output, and that nothing panicked.
fn assert_no_secret(run: &Run, what: &str) {
    let all = run.all();
    assert!(
        !all.contains(SECRET_KEY),
        "{what}: the API key leaked:\n{all}"
    );
    assert!(
        !all.contains(PG_PASSWORD),
        "{what}: the password leaked:\n{all}"
    );
    assert!(!all.contains("panicked"), "{what}: a panic:\n{all}");
}

/// A port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

fn abi(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("abis")
        .join(file)
        .display()
        .to_string()
}

/// A config text: `[node]` at `node_url` (fast retries), `[database]` at `db_url`, then `rest`.
fn config_text(node_url: &str, db_url: &str, rest: &str) -> String {
    format!(
        "[node]\nurl = \"{node_url}\"\nrequests_per_second = 10000\nmax_retries = 1\ninitial_backoff = \"5ms\"\n\
         max_backoff = \"20ms\"\nrequest_timeout = \"5s\"\n\n[database]\nurl = \"{db_url}\"\n\n{rest}"
    )
}

fn token_a(extra: &str) -> String {
    format!(
        "[[contracts]]\nname = \"token_a\"\naddress = \"{:#x}\"\nabi = \"{}\"\n{extra}\n",
        contracts::TOKEN_A,
        abi("erc20.json")
    )
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

async fn sqlite(db: &Path) -> sqlx::SqliteConnection {
    SqliteConnectOptions::new()
        .filename(db)
        .connect()
        .await
        .expect("open db")
}

async fn count(db: &Path, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM \"{table}\""))
        .fetch_one(&mut sqlite(db).await)
        .await
        .expect("count")
}

async fn columns(db: &Path, table: &str) -> Vec<String> {
    sqlx::query_scalar(&format!("SELECT name FROM pragma_table_info('{table}')"))
        .fetch_all(&mut sqlite(db).await)
        .await
        .expect("columns")
}

/// `status --json` after a sync: checkpoint, rows per table as in the database, and blocks behind the head;
/// then, with the node gone, the database part is still printed beside "node unreachable" (exit 69), with
/// the last reorg the follower recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_reports_checkpoints_rows_and_lag_and_still_reads_the_database_when_the_node_is_down(
) {
    let node = support::start(node_config(8_000)).await;
    let work = Workdir::new();
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(5_000))
        .await
        .expect("sync");
    let status = run(args(&["status", "--json"], &config)).await;
    assert_eq!(status.code, Some(0), "{}", status.all());
    let report: serde_json::Value = serde_json::from_str(&status.stdout).expect("json");
    assert_eq!(report["chain_id"], node.truth().chain_id());
    assert_eq!(report["last_reorg"], serde_json::Value::Null);
    assert_eq!(report["node"]["head"], node.truth().head());
    let token_a = &report["contracts"][0];
    assert_eq!(token_a["name"], "token_a");
    assert_eq!(token_a["checkpoint"], 5_000);
    assert_eq!(token_a["blocks_behind"], node.truth().head() - 5_000);
    for event in token_a["events"].as_array().expect("events") {
        let table = event["table"].as_str().expect("table");
        assert_eq!(event["rows"], count(&work.db(), table).await, "{table}");
    }

    sqlx::query("UPDATE chains SET last_reorg = 'block 4990: depth 3' WHERE name = 'default'")
        .execute(&mut sqlite(&work.db()).await)
        .await
        .expect("record a reorg");
    let down = format!(
        "http://127.0.0.1:{}/v3/${{LOGSLICE_API_KEY}}",
        closed_port()
    );
    let text = std::fs::read_to_string(&config)
        .expect("config")
        .replace(&node.http_url(), &down);
    let config = write(work.dir.path(), "down.toml", &text);
    let started = Instant::now();
    let status = run(args(&["-v", "status"], &config)).await;
    assert_eq!(status.code, Some(69), "{}", status.all());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "status waited {:?} for a node that is down",
        started.elapsed()
    );
    for wanted in [
        "node unreachable",
        "last reorg  block 4990: depth 3",
        "token_a_transfer",
        "/v3/****",
    ] {
        assert!(status.stdout.contains(wanted), "{wanted}: {}", status.all());
    }
    let line = status
        .stdout
        .lines()
        .find(|l| l.contains("token_a_transfer"))
        .expect("a line for token_a_transfer");
    assert!(
        line.contains("5000") && line.ends_with("node unreachable"),
        "{line}"
    );
    assert_no_secret(&status, "status with the node down");
}

/// `check` passes on a good setup, marking each check, and fails with 78 when the database was built from
/// another chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_marks_every_check_and_fails_with_78_on_another_chain() {
    let node = support::start(node_config(2_000)).await;
    let work = Workdir::new();
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(1_000))
        .await
        .expect("sync");
    let check = run(args(&["check"], &config)).await;
    assert_eq!(check.code, Some(0), "{}", check.all());
    for wanted in [
        "ok    config:",
        "ok    database:",
        "ok    node:",
        "key accepted",
        "ok    chain id:",
    ] {
        assert!(check.stdout.contains(wanted), "{wanted}: {}", check.all());
    }
    sqlx::query("UPDATE chains SET chain_id = 1 WHERE name = 'default'")
        .execute(&mut sqlite(&work.db()).await)
        .await
        .expect("pretend another chain");
    let check = run(args(&["check"], &config)).await;
    assert_eq!(check.code, Some(78), "{}", check.all());
    assert!(
        check
            .stdout
            .contains("FAIL  chain id: the database holds logs of chain 1"),
        "{}",
        check.all()
    );
}

/// An ABI whose column set changed under an existing table is refused with a message naming
/// `--reindex`; `sync --reindex` then drops and rebuilds that contract alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_abi_is_refused_and_sync_reindex_rebuilds_that_contract_only() {
    let node = support::start(node_config(6_000)).await;
    let work = Workdir::new();
    let db_url = format!("sqlite://{}", work.db().display());
    let token_b = |event: &str| {
        format!(
            "[[contracts]]\nname = \"token_b\"\naddress = \"{:#x}\"\nevents = [\"{event}\"]\n",
            contracts::TOKEN_B
        )
    };
    let old = token_b("event Transfer(address indexed from, address indexed to, uint256 value)");
    // The same topic0 (the types are unchanged) but other parameter names: other columns.
    let new = token_b("event Transfer(address indexed src, address indexed dst, uint256 wad)");
    let config = write(
        work.dir.path(),
        "config.toml",
        &config_text(&node.http_url(), &db_url, &format!("{}{old}", token_a(""))),
    );
    let first = run(args(&["sync", "--to", "5000"], &config)).await;
    assert_eq!(first.code, Some(0), "{}", first.all());
    let token_a_rows = count(&work.db(), "token_a_transfer").await;
    let transfers = count(&work.db(), "token_b_transfer").await;
    assert!(transfers > 0);

    let config = write(
        work.dir.path(),
        "config.toml",
        &config_text(&node.http_url(), &db_url, &format!("{}{new}", token_a(""))),
    );
    let refused = run(args(&["sync", "--to", "5000"], &config)).await;
    assert_eq!(refused.code, Some(78), "{}", refused.all());
    assert!(
        refused.stderr.contains("token_b_transfer")
            && refused
                .stderr
                .contains("logslice sync --reindex token_b --to"),
        "{}",
        refused.all()
    );

    let served_before = node.stats().logs_served;
    let rebuilt = run(args(
        &["sync", "--to", "5000", "--reindex", "token_b"],
        &config,
    ))
    .await;
    assert_eq!(rebuilt.code, Some(0), "{}", rebuilt.all());
    assert_eq!(
        columns(&work.db(), "token_b_transfer").await[6..],
        ["block_timestamp", "src", "dst", "wad"]
    );
    assert_eq!(count(&work.db(), "token_b_transfer").await, transfers);
    assert_eq!(
        count(&work.db(), "token_a_transfer").await,
        token_a_rows,
        "the other contract is untouched"
    );
    assert_eq!(support::checkpoint(&work, "token_b").await, Some(5_000));
    // Only token_b's transfers were fetched again.
    assert_eq!(
        node.stats().logs_served - served_before,
        u64::try_from(transfers).expect("count")
    );
}

/// A reindex that would delete raw rows another contract still needs is refused, and a name the config
/// does not know is a usage error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_reindex_refuses_a_shared_address_and_an_unknown_contract() {
    let work = Workdir::new();
    let db_url = format!("sqlite://{}", work.db().display());
    let shared = format!(
        "[[contracts]]\nname = \"token_a_approvals\"\naddress = \"{:#x}\"\nabi = \"{}\"\nevents = [\"Approval\"]\n",
        contracts::TOKEN_A,
        abi("erc20.json")
    );
    let config = write(
        work.dir.path(),
        "config.toml",
        &config_text(
            "sim://?blocks=100",
            &db_url,
            &format!("{}{shared}", token_a("events = [\"Transfer\"]")),
        ),
    );
    let refused = run(args(
        &["sync", "--to", "10", "--reindex", "token_a"],
        &config,
    ))
    .await;
    assert_eq!(refused.code, Some(78), "{}", refused.all());
    assert!(
        refused.stderr.contains("token_a_approvals")
            && refused
                .stderr
                .contains("--reindex token_a --reindex token_a_approvals"),
        "{}",
        refused.all()
    );
    let unknown = run(args(&["sync", "--to", "10", "--reindex", "nope"], &config)).await;
    assert_eq!(unknown.code, Some(2), "{}", unknown.all());
    assert!(
        unknown.stderr.contains("no contract named \"nope\"") && unknown.stderr.contains("token_a"),
        "{}",
        unknown.all()
    );
}

/// With stderr not a terminal, a sync logs `progress` lines (the first with the first batch) carrying
/// checkpoint, target, logs, logs/s and ETA, as JSON under `--log-format json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_without_a_terminal_logs_progress_lines_with_an_eta() {
    let node = support::start(node_config(4_000)).await;
    let work = Workdir::new();
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let out = run(args(
        &["--log-format", "json", "sync", "--to", "3000"],
        &config,
    ))
    .await;
    assert_eq!(out.code, Some(0), "{}", out.all());
    let progress: serde_json::Value = out
        .stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["fields"]["message"] == "progress")
        .unwrap_or_else(|| panic!("no progress line: {}", out.all()));
    let fields = &progress["fields"];
    for key in ["checkpoint", "logs", "logs_per_s", "eta", "eta_secs"] {
        assert!(!fields[key].is_null(), "{key}: {progress}");
    }
    assert_eq!(fields["target"], 3000);
    assert!(
        out.stdout.starts_with("synced to block 3000"),
        "{}",
        out.all()
    );
}

/// GET over a real socket until `predicate` holds for (status, body), within `limit`.
async fn poll_http(
    url: &str,
    limit: Duration,
    predicate: impl Fn(u16, &str) -> bool,
) -> (u16, String) {
    // reqwest is built without a default TLS provider (the library installs ring the same way).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let deadline = Instant::now() + limit;
    let mut last = (0, String::new());
    while Instant::now() < deadline {
        if let Ok(response) = client.get(url).send().await {
            let status = response.status().as_u16();
            let body = response.text().await.unwrap_or_default();
            if predicate(status, &body) {
                return (status, body);
            }
            last = (status, body);
        }
        // Polling interval of an observable condition, not a synchronisation guess.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("{url}: condition not met within {limit:?}; last answer {last:?}");
}

fn metric(body: &str, name: &str) -> Option<f64> {
    body.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `[metrics]` serves Prometheus text and `/health` while a sync runs: logs and blocks indexed, requests by
/// method and outcome, the reorg metrics at zero; `/health` is 200 while the checkpoint moves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_health_are_served_over_http_while_syncing() {
    let mut config = node_config(40_000);
    // Slow answers keep the sync running while the test scrapes.
    config.faults.latency = Duration::from_millis(30);
    let node = support::start(config).await;
    let work = Workdir::new();
    let port = closed_port();
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "max_concurrency = 2",
        &format!("max_batch_logs = 200\ninitial_block_range = 50\nmax_block_range = 100\n\n[metrics]\naddr = \"127.0.0.1:{port}\"\nmax_stall = \"1m\""),
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
        .args(args(&["sync", "--to", "39000"], &path))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let base = format!("http://127.0.0.1:{port}");
    let (_, body) = poll_http(
        &format!("{base}/metrics"),
        Duration::from_secs(60),
        |status, body| {
            status == 200 && metric(body, "logslice_logs_indexed_total").is_some_and(|n| n > 0.0)
        },
    )
    .await;
    for name in [
        "logslice_blocks_indexed_total",
        "logslice_checkpoint_block",
        "logslice_target_block",
        "logslice_head_lag_blocks",
        "logslice_range_size_blocks",
        "logslice_splits_total",
        "logslice_retries_total",
        "logslice_reorgs_total",
        "logslice_rollback_depth_blocks",
        "logslice_commit_seconds_bucket",
        "logslice_seconds_since_checkpoint_advance",
    ] {
        assert!(metric(&body, name).is_some(), "{name} missing:\n{body}");
    }
    assert!(
        body.contains(
            "logslice_requests_total{chain=\"default\",provider=\"127.0.0.1\",method=\"eth_getLogs\",outcome=\"ok\"}"
        ),
        "{body}"
    );
    assert_eq!(metric(&body, "logslice_target_block"), Some(39_000.0));
    let (status, health) = poll_http(
        &format!("{base}/health"),
        Duration::from_secs(10),
        |_, _| true,
    )
    .await;
    assert_eq!(status, 200, "{health}");
    child.kill().expect("kill");
    child.wait().expect("reap");
}

/// `/health` answers 503 once the checkpoint has not advanced for longer than `metrics.max_stall`: here
/// every answer of the node takes longer than that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_answers_503_when_the_checkpoint_stalls_longer_than_max_stall() {
    let mut config = node_config(10_000);
    config.faults.latency = Duration::from_secs(3);
    let node = support::start(config).await;
    let work = Workdir::new();
    let port = closed_port();
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        &format!("\n[metrics]\naddr = \"127.0.0.1:{port}\"\nmax_stall = \"300ms\""),
    );
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
        .args(args(&["sync", "--to", "9000"], &path))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let (_, body) = poll_http(
        &format!("http://127.0.0.1:{port}/health"),
        Duration::from_secs(30),
        |status, _| status == 503,
    )
    .await;
    assert!(body.starts_with("stalled:"), "{body}");
    assert!(body.contains("metrics.max_stall"), "{body}");
    child.kill().expect("kill");
    child.wait().expect("reap");
}

/// One bad input: the config written (or none), the command, the exit code and what the message names.
struct Case {
    name: &'static str,
    config: Option<String>,
    args: Vec<&'static str>,
    code: i32,
    names: Vec<String>,
}

/// Runs each case with `-v` and asserts its exit code, that stderr names what it should (file, field, fix),
/// and that neither secret nor a panic appears.
async fn check_cases(work: &Workdir, cases: Vec<Case>) {
    for case in cases {
        let path = match &case.config {
            Some(text) => write(work.dir.path(), "config.toml", text),
            None => work.dir.path().join("missing.toml"),
        };
        let mut argv = vec!["-v"];
        argv.extend(&case.args);
        let out = run(args(&argv, &path)).await;
        assert_eq!(out.code, Some(case.code), "{}: {}", case.name, out.all());
        for wanted in &case.names {
            assert!(
                out.stderr.contains(wanted.as_str()) || out.stdout.contains(wanted.as_str()),
                "{}: the message does not name {wanted:?}:\n{}",
                case.name,
                out.all()
            );
        }
        assert_no_secret(&out, case.name);
    }
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Every kind of bad config exits 78 with file, field and fix named, and without printing a secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_config_exits_78_naming_file_field_and_fix_without_printing_secrets() {
    let work = Workdir::new();
    let node_url = format!(
        "http://127.0.0.1:{}/v3/${{LOGSLICE_API_KEY}}",
        closed_port()
    );
    let db_url = format!("sqlite://{}", work.db().display());
    let broken_abi = write(work.dir.path(), "broken.json", "[{\"type\": \"event\",");
    let with = |rest: &str| Some(config_text(&node_url, &db_url, rest));
    let sync = vec!["sync", "--to", "100"];
    let cases = vec![
        Case {
            name: "unknown key",
            config: with(&format!("{}\n[sync]\nmax_batch_log = 10\n", token_a(""))),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "sync.max_batch_log", "did you mean \"max_batch_logs\"?"]),
        },
        Case {
            name: "missing config file",
            config: None,
            args: sync.clone(),
            code: 78,
            names: strings(&["missing.toml", "(file)", "cannot read it", "pass --config"]),
        },
        Case {
            name: "bad TOML",
            config: Some(format!("[node]\nurl = \"http://127.0.0.1:1/v3/{SECRET_KEY}\n")),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "line 2", "fix the TOML syntax"]),
        },
        Case {
            name: "bad address",
            config: with("[[contracts]]\nname = \"t\"\naddress = \"0x12\"\nevents = [\"event Ping()\"]\n"),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "contracts[0].address", "not a 20-byte address", "write 0x and 40 hex digits"]),
        },
        Case {
            name: "checksum-failing address",
            config: with("[[contracts]]\nname = \"t\"\naddress = \"0xa0B86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nevents = [\"event Ping()\"]\n"),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "contracts[0].address", "EIP-55 checksum", "all lowercase"]),
        },
        Case {
            name: "unparseable ABI",
            config: with(&format!(
                "[[contracts]]\nname = \"t\"\naddress = \"{:#x}\"\nabi = \"{}\"\n",
                contracts::TOKEN_A,
                broken_abi.display()
            )),
            args: sync.clone(),
            code: 78,
            names: strings(&["broken.json", "contracts[0].abi", "is not a JSON ABI", "give a JSON array of ABI items"]),
        },
        Case {
            name: "two anonymous events of one topic count",
            config: with("[[contracts]]\nname = \"t\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nevents = [\"event A(uint256 indexed x) anonymous\", \"event B(uint256 indexed y) anonymous\"]\n"),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "contracts[0].events[1]", "contract t: the anonymous events A(uint256) and B(uint256)", "index only one of them"]),
        },
        Case {
            name: "event not in the ABI",
            config: with(&token_a("events = [\"Tranfser\"]")),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "contracts[0].events[0]", "is not an event of", "use one of"]),
        },
        Case {
            name: "duplicate contract names",
            config: with(&format!("{}{}", token_a(""), token_a(""))),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "contracts[1].name", "is also the name of contracts[0]", "give each contract its own name"]),
        },
        Case {
            name: "start block above the target",
            config: with(&token_a("start_block = 500")),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "contracts[0].start_block", "above the target block 100", "lower contracts[0].start_block"]),
        },
        Case {
            name: "unset environment variable",
            config: Some(config_text(
                "http://127.0.0.1:1/v3/${LOGSLICE_UNSET_VARIABLE}",
                &db_url,
                &token_a(""),
            )),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "node.url", "LOGSLICE_UNSET_VARIABLE is not set", "set LOGSLICE_UNSET_VARIABLE in the environment"]),
        },
        Case {
            name: "bad metrics address",
            config: with(&format!("[metrics]\naddr = \"localhost\"\n{}", token_a(""))),
            args: sync.clone(),
            code: 78,
            names: strings(&["config.toml", "metrics.addr", "127.0.0.1:9090"]),
        },
    ];
    // check and status report a bad config the same way.
    let mut more = Vec::new();
    for command in [vec!["check"], vec!["status"]] {
        more.push(Case {
            name: "unknown key (check, status)",
            config: with(&format!("{}\n[sync]\nmax_batch_log = 10\n", token_a(""))),
            args: command,
            code: 78,
            names: strings(&[
                "config.toml",
                "sync.max_batch_log",
                "did you mean \"max_batch_logs\"?",
            ]),
        });
    }
    check_cases(&work, cases).await;
    check_cases(&work, more).await;
}

/// A node that cannot be reached or rejects the key exits 69, a database that cannot be opened or is
/// locked exits 74; each message names the field to fix, and no secret is printed, by `sync`, `check` or
/// `status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_and_database_failures_exit_69_and_74_naming_the_fix_without_printing_secrets() {
    let node = support::start(node_config(200)).await;
    let work = Workdir::new();
    let db_url = format!("sqlite://{}", work.db().display());
    let unreachable = format!(
        "http://127.0.0.1:{}/v3/${{LOGSLICE_API_KEY}}",
        closed_port()
    );
    // The devnode accepts KEY only; the environment holds SECRET_KEY.
    let rejected = node.http_url().replace(KEY, "${LOGSLICE_API_KEY}");
    assert_ne!(rejected, node.http_url());
    let not_a_dir = write(work.dir.path(), "plain-file", "");
    let good_node = node.http_url();
    let mut cases = Vec::new();
    for command in [vec!["sync", "--to", "100"], vec!["check"], vec!["status"]] {
        cases.push(Case {
            name: "unreachable node",
            config: Some(config_text(&unreachable, &db_url, &token_a(""))),
            args: command.clone(),
            code: 69,
            names: strings(&["/v3/****", "node.url", "config.toml"]),
        });
        cases.push(Case {
            name: "key rejected",
            config: Some(config_text(&rejected, &db_url, &token_a(""))),
            args: command,
            code: 69,
            names: strings(&["rejected the API key", "node.url", "config.toml"]),
        });
    }
    for command in [vec!["sync", "--to", "100"], vec!["check"]] {
        cases.push(Case {
            name: "database path not writable",
            config: Some(config_text(
                &good_node,
                &format!("sqlite://{}/logslice.db", not_a_dir.display()),
                &token_a(""),
            )),
            args: command,
            code: 74,
            names: strings(&[
                "plain-file/logslice.db",
                "database.url",
                "config.toml",
                "writable",
            ]),
        });
    }
    check_cases(&work, cases).await;

    // A database another process holds locked: the sink gives up after its busy timeout.
    let locked = work.dir.path().join("locked.db");
    let mut holder = SqliteConnectOptions::new()
        .filename(&locked)
        .create_if_missing(true)
        .connect()
        .await
        .expect("create");
    sqlx::raw_sql("CREATE TABLE t (x); BEGIN EXCLUSIVE; INSERT INTO t VALUES (1);")
        .execute(&mut holder)
        .await
        .expect("lock");
    check_cases(
        &work,
        vec![Case {
            name: "database locked",
            config: Some(config_text(
                &good_node,
                &format!("sqlite://{}", locked.display()),
                &token_a(""),
            )),
            args: vec!["sync", "--to", "100"],
            code: 74,
            names: strings(&["locked", "database.url", "config.toml"]),
        }],
    )
    .await;
    holder.close().await.expect("close");
}

/// A Postgres server that is down exits 74, naming `database.url`, and its password is never printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_down_exits_74_without_printing_the_password() {
    let work = Workdir::new();
    let db_url = format!(
        "postgres://logslice:${{PGPASSWORD}}@127.0.0.1:{}/logslice",
        closed_port()
    );
    let cases = [vec!["sync", "--to", "100"], vec!["check"], vec!["status"]]
        .into_iter()
        .map(|command| Case {
            name: "postgres down",
            config: Some(config_text("sim://?blocks=200", &db_url, &token_a(""))),
            args: command,
            code: 74,
            names: strings(&["database.url", "logslice:****@127.0.0.1"]),
        })
        .collect();
    check_cases(&work, cases).await;
}
