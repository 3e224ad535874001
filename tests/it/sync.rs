//! `logslice sync` end to end against the simulated node over real sockets: the database must equal the
//! node's ground truth, log by log and value by value, whatever the node does.

use std::process::Stdio;
use std::time::Duration;

use devnode::TooManyStyle;
use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, Backend, Workdir, KEY,
};

/// The whole example configuration over a chain that holds a block with more than 10,000 logs, synced to a
/// block number: every raw and typed row equals the ground truth.
async fn sync_to_a_block_matches_the_ground_truth_log_by_log(backend: Backend) {
    let node = support::start(node_config(60_000)).await;
    let truth = node.truth();
    let huge = truth.next_huge_block(0);
    assert!(
        huge < 60_000 && truth.log_count(huge) > 10_000,
        "the chain holds a block over the cap"
    );
    let work = Workdir::with(backend).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let report = support::sync(&config, Target::Number(59_000))
        .await
        .expect("sync succeeds");
    assert_eq!(report.target, 59_000);
    let n = assert_db_matches_truth(&work, &truth, &all_contracts(), 59_000).await;
    assert!(n > 10_000, "compared {n} logs");
    // Density surveys ran ahead: the node served their probe logs on top of the stored ones, a few percent.
    let served = node.stats().logs_served;
    assert!(
        served > n as u64 && served <= n as u64 + n as u64 / 10,
        "served {served} logs for {n} stored"
    );
    for contract in all_contracts() {
        assert_eq!(
            support::checkpoint(&work, contract.name).await,
            Some(59_000)
        );
    }
}
both_backends!(sync_to_a_block_matches_the_ground_truth_log_by_log);

/// A second run resumes from the checkpoint, fetches only the new blocks and duplicates nothing.
async fn sync_resumes_from_the_checkpoint_without_refetching(backend: Backend) {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Number(8_000))
        .await
        .expect("first sync");
    // The second run talks to a fresh node of the same (seeded) chain, so its counters are the second run's.
    let node = support::start(node_config(20_000)).await;
    let config = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&config, Target::Latest)
        .await
        .expect("second sync");
    let stats = node.stats();
    let head = truth.head();
    assert_eq!(
        stats.lowest_log_block,
        Some(8_001),
        "the second run asked for nothing at or below the checkpoint"
    );
    // The misc contract's anonymous event forbids a topic0 filter, so every log of the four addresses above
    // block 8,000 is served; a density survey may serve a few percent more under a narrower filter.
    let addresses: Vec<_> = all_contracts().iter().map(|c| c.address).collect();
    let above = truth
        .logs(8_001, head)
        .iter()
        .filter(|l| addresses.contains(&l.address))
        .count() as u64;
    assert!(
        (above..=above + above / 10).contains(&stats.logs_served),
        "served {} logs for the {above} above the checkpoint",
        stats.logs_served
    );
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    // A third run has nothing to do and changes nothing.
    let report = support::sync(&config, Target::Latest)
        .await
        .expect("third sync");
    assert_eq!(report.logs, 0);
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
}
both_backends!(sync_resumes_from_the_checkpoint_without_refetching);

/// A contract added to the config later is backfilled from its own start; the others are not refetched.
async fn a_contract_added_later_is_backfilled_without_refetching_the_others(backend: Backend) {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let work = Workdir::with(backend).await;
    let mut contracts = all_contracts();
    let added = contracts.pop().expect("four contracts");
    let config = work.write_config(&node.http_url(), &contracts, "", "");
    support::sync(&config, Target::Number(15_000))
        .await
        .expect("first sync");
    let served_before = node.stats().logs_served;
    contracts.push(added.clone());
    let config = work.write_config(&node.http_url(), &contracts, "", "");
    support::sync(&config, Target::Number(15_000))
        .await
        .expect("second sync");
    let served = node.stats().logs_served - served_before;
    let added_logs =
        support::expected_logs(&truth, std::slice::from_ref(&added), 15_000).len() as u64;
    // One contract over 15,000 blocks is too small a job to survey: exactly its logs, once.
    assert_eq!(
        served, added_logs,
        "only the added contract's logs were fetched"
    );
    assert_db_matches_truth(&work, &truth, &contracts, 15_000).await;
}
both_backends!(a_contract_added_later_is_backfilled_without_refetching_the_others);

/// Over WebSocket the result is the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_over_websocket_matches_the_ground_truth() {
    let node = support::start(node_config(20_000)).await;
    let work = Workdir::new();
    let config = work.write_config(&node.ws_url(), &all_contracts(), "transport = \"ws\"", "");
    support::sync(&config, Target::Number(19_000))
        .await
        .expect("sync over ws");
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 19_000).await;
}

/// Each provider's wording of "too many results" (with and without a suggested range) ends in the same
/// exact database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_provider_wording_of_too_many_results_ends_in_the_ground_truth() {
    for style in [
        TooManyStyle::Plain,
        TooManyStyle::Infura,
        TooManyStyle::Alchemy,
        TooManyStyle::Reth,
        TooManyStyle::RethServerError,
    ] {
        let mut config = node_config(12_000);
        config.limits.too_many_style = style;
        // A low cap makes every style answer often.
        config.limits.max_results = 2_000;
        let node = support::start(config).await;
        let work = Workdir::new();
        let path = work.write_config(
            &node.http_url(),
            &all_contracts()[..3],
            "",
            "initial_block_range = 5000",
        );
        support::sync(&path, Target::Number(11_000))
            .await
            .unwrap_or_else(|e| panic!("{style:?}: {e}"));
        let stats = node.stats();
        assert!(
            stats.methods["eth_getLogs"].errors.values().sum::<u64>() > 0,
            "{style:?}: the cap was hit"
        );
        assert_db_matches_truth(&work, &node.truth(), &all_contracts()[..3], 11_000).await;
    }
}

/// Every fault of the simulated node alone, then all of them together, over HTTP: each sync ends with the
/// database equal to the ground truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_alone_and_all_at_once_over_http_ends_exact() {
    each_fault_alone_and_all_at_once("http").await;
}

/// The same over WebSocket (a 429 becomes a rate-limit error, a 5xx a -32603, a drop a closed socket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_fault_alone_and_all_at_once_over_websocket_ends_exact() {
    each_fault_alone_and_all_at_once("ws").await;
}

async fn each_fault_alone_and_all_at_once(transport: &str) {
    type Fault = fn(&mut devnode::DevNodeConfig);
    let faults: [(&str, Fault); 10] = [
        ("429 with Retry-After", |c| c.faults.http_429 = 0.2),
        ("5xx", |c| c.faults.http_5xx = 0.2),
        ("dropped connections", |c| c.faults.drop = 0.2),
        ("-32603", |c| c.faults.internal_error = 0.2),
        ("Infura's rate-limit wording", |c| {
            c.faults.rate_limit_error = 0.2
        }),
        ("latency", |c| {
            c.faults.latency = Duration::from_millis(3);
            c.faults.jitter = Duration::from_millis(5);
        }),
        ("query timeouts", |c| {
            // 1,000 logs' worth of modelled time: most ranges time out and must be split.
            c.limits.query_budget = Duration::from_millis(100)
        }),
        ("a lagging backend", |c| c.faults.lag = 0.3),
        ("a request-rate limit", |c| c.faults.max_rps = Some(300)),
        ("all at once", |c| {
            c.faults.http_429 = 0.04;
            c.faults.http_5xx = 0.04;
            c.faults.drop = 0.04;
            c.faults.internal_error = 0.04;
            c.faults.rate_limit_error = 0.04;
            c.faults.jitter = Duration::from_millis(2);
            c.faults.lag = 0.1;
            c.limits.query_budget = Duration::from_millis(400);
        }),
    ];
    for (name, fault) in faults {
        let mut config = node_config(12_000);
        config.faults.retry_after_secs = 0;
        fault(&mut config);
        let node = support::start(config).await;
        let work = Workdir::new();
        let url = if transport == "ws" {
            node.ws_url()
        } else {
            node.http_url()
        };
        let path = work.write_config(
            &url,
            &all_contracts(),
            &format!("transport = \"{transport}\""),
            "target_logs_per_request = 2000",
        );
        support::sync(&path, Target::Number(11_000))
            .await
            .unwrap_or_else(|e| panic!("{name} over {transport}: {e}"));
        assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 11_000).await;
    }
}

/// 429s with Retry-After, 5xx, dropped connections, -32603 and Infura's rate-limit wording under -32005,
/// all at once: retried with backoff, never split into a gap, and the database is exact.
async fn sync_through_every_transient_fault_matches_the_ground_truth(backend: Backend) {
    let mut config = node_config(15_000);
    config.faults.http_429 = 0.05;
    config.faults.retry_after_secs = 0;
    config.faults.http_5xx = 0.05;
    config.faults.drop = 0.05;
    config.faults.internal_error = 0.05;
    config.faults.rate_limit_error = 0.05;
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    // Small ranges, so that 5% of faults each are met within a short chain.
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "",
        "target_logs_per_request = 1000",
    );
    let report = support::sync(&path, Target::Number(14_000))
        .await
        .expect("sync succeeds through faults");
    assert!(report.retries > 0, "faults were met and retried");
    let stats = node.stats();
    assert!(
        stats.dropped > 0 && stats.rate_limited > 0,
        "{}",
        stats.summary()
    );
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 14_000).await;
}
both_backends!(sync_through_every_transient_fault_matches_the_ground_truth);

fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
}

/// SIGKILL in the middle of a sync, then a rerun: nothing lost, nothing duplicated.
async fn a_sync_killed_with_sigkill_resumes_with_nothing_lost_or_duplicated(backend: Backend) {
    let mut config = node_config(40_000);
    // Slow answers keep the sync running long enough to be killed mid-way.
    config.faults.latency = Duration::from_millis(20);
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "max_concurrency = 2",
        "max_batch_logs = 500\ninitial_block_range = 200\nmax_block_range = 400",
    );
    let mut child = binary()
        .args(["sync", "--to", "39000", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(work.dir.path().join("stderr")).expect("stderr file"))
        .spawn()
        .expect("spawn logslice");
    // Wait (bounded) until it has fetched a good part of the chain, then kill it.
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
    support::sync(&path, Target::Number(39_000))
        .await
        .expect("resume");
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 39_000).await;
}
both_backends!(a_sync_killed_with_sigkill_resumes_with_nothing_lost_or_duplicated);

/// A config with an unknown key exits 78 and names the file, the key and the nearest valid key.
#[test]
fn a_config_with_an_unknown_key_exits_78_naming_file_field_and_fix() {
    let work = Workdir::new();
    let path = work.write_config("sim://", &all_contracts(), "max_concurency = 4", "");
    let out = binary()
        .args(["sync", "--to", "10", "--config"])
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(78));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config.toml")
            && stderr.contains("max_concurency")
            && stderr.contains("max_concurrency"),
        "{stderr}"
    );
}

/// An unreachable node exits 69 after the configured retries.
#[test]
fn an_unreachable_node_exits_69() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let work = Workdir::new();
    let url = format!("http://127.0.0.1:{port}/v3/SECRET-KEY-xyz123456789");
    let path = work.write_config(&url, &all_contracts(), "", "");
    std::fs::write(
        &path,
        std::fs::read_to_string(&path)
            .unwrap()
            .replace("max_retries = 12", "max_retries = 2"),
    )
    .unwrap();
    let out = binary()
        .args(["sync", "--to", "10", "--config"])
        .arg(&path)
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(69),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains("SECRET-KEY-xyz123456789"),
        "the key leaked: {all}"
    );
}

/// A rejected key exits 69, says the key was rejected, and never prints it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_key_exits_69_without_printing_it() {
    let node = support::start(node_config(100)).await;
    let url = node.http_url().replace(KEY, "SECRET-KEY-xyz123456789");
    let work = Workdir::new();
    let path = work.write_config(&url, &all_contracts(), "", "");
    let out = tokio::task::spawn_blocking(move || {
        binary()
            .args(["-v", "sync", "--to", "10", "--config"])
            .arg(&path)
            .output()
            .expect("run")
    })
    .await
    .expect("join");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(69), "{all}");
    assert!(all.contains("rejected the API key"), "{all}");
    assert!(
        !all.contains("SECRET-KEY-xyz123456789"),
        "the key leaked: {all}"
    );
}

/// Postgres drops the sync's connections mid-sync (`pg_terminate_backend`, as a server restart would):
/// the sink retries the batch on a fresh connection and the database ends exact, nothing lost or twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_whose_postgres_connections_are_killed_midway_ends_exact() {
    use sqlx::Connection;
    let mut config = node_config(40_000);
    config.faults.latency = Duration::from_millis(5);
    let node = support::start(config).await;
    let work = Workdir::with(Backend::Postgres).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "max_concurrency = 2",
        "max_batch_logs = 500\ninitial_block_range = 200\nmax_block_range = 400",
    );
    let application = work
        .schema
        .as_ref()
        .expect("a Postgres workdir")
        .name
        .clone();
    let syncing = tokio::spawn(async move { support::sync(&path, Target::Number(39_000)).await });
    let mut admin = sqlx::PgConnection::connect(crate::pg::url().as_str())
        .await
        .expect("admin connection");
    let mut killed = 0u64;
    let mut last_seen = -1;
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while killed < 3 && !syncing.is_finished() {
        assert!(
            std::time::Instant::now() < deadline,
            "the sync made no progress"
        );
        // Kill whenever the sync has committed something new since the last kill.
        let checkpoint = support::checkpoint(&work, "token_a").await.unwrap_or(-1);
        if checkpoint > last_seen {
            last_seen = checkpoint;
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1) AS t",
            )
            .bind(&application)
            .fetch_one(&mut admin)
            .await
            .expect("terminate");
            killed += u64::try_from(n).unwrap_or(0);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let report = syncing
        .await
        .expect("join")
        .expect("the sync survives its connections being killed");
    assert_eq!(report.target, 39_000);
    assert!(killed > 0, "no connection was killed");
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 39_000).await;
}

/// The headers of the tracked tail (the last `max_reorg_depth` blocks, whatever the node calls final) are
/// read in JSON-RPC batches, once (the read started beside the backfill is the one used); a node that
/// refuses batches gets one request per header instead, and both end with the same exact database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tail_above_finality_is_read_in_one_batch_or_header_by_header() {
    for max_batch in [1_000, 1] {
        let mut config = node_config(10_000);
        config.limits.max_batch = max_batch;
        let node = support::start(config).await;
        let truth = node.truth();
        let work = Workdir::new();
        let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
        let report = support::sync(&path, Target::Latest)
            .await
            .unwrap_or_else(|e| panic!("max_batch {max_batch}: {e}"));
        assert_eq!(report.target, truth.head());
        assert_db_matches_truth(&work, &truth, &all_contracts(), truth.head()).await;
        let stats = node.stats();
        let header_calls = stats.calls("eth_getBlockByNumber");
        let tail = 128;
        if max_batch == 1 {
            assert_eq!(stats.errors_with(-32600), 1, "the one batch was refused");
            assert!(header_calls > tail, "{header_calls} header calls");
        } else {
            assert_eq!(stats.errors_with(-32600), 0);
            // The finalized block, then the block below the tail and the tail, each read once: the read made
            // while the backfill committed is the one the step above finality uses (the default
            // max_reorg_depth, 128 blocks).
            assert_eq!(header_calls, tail + 2, "{header_calls} header calls");
            // The batch is one HTTP request holding a call per header of the tail.
            assert!(
                stats.http_requests < tail,
                "{} HTTP requests for a tail of {tail}",
                stats.http_requests
            );
        }
    }
}

/// A target the node does not have yet ends with exit 75 ("run again later"), after committing what it
/// could reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_target_above_the_head_exits_75_after_committing_what_exists() {
    let node = support::start(node_config(2_000)).await;
    let head = node.truth().head();
    let work = Workdir::new();
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    let err = support::sync(&path, Target::Number(head + 100))
        .await
        .expect_err("the head is below the target");
    assert_eq!(logslice::exit::code(&err), 75, "{err}");
    assert_eq!(
        support::checkpoint(&work, "token_a").await,
        Some(head as i64)
    );
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), head).await;
}

/// Goal: bursts met several at a time end exact. Method: six bursts of the quiet `misc` contract, each three
/// times the node's cap, within one window of in-flight requests, and a budget of eight 1,900-log requests
/// for the ranges waiting to be sent: several refused ranges are narrowed at once, and the pieces of the
/// later ones wait for room while the first is narrowed (`fetch::ready`). Each sync must commit every log
/// of the ground truth, in order, and nothing twice; a piece held back with nothing to let it out would
/// leave the fetcher stalled or a gap in the database.
async fn bursts_met_several_at_a_time_end_exact(backend: Backend) {
    let mut config = node_config(20_000);
    config.chain.density = 0.2;
    config.chain.shapes.bursts = (0..6)
        .map(|k| devnode::Burst {
            first: 2_000 + k * 2_500,
            len: 100,
            per_block: 60,
        })
        .collect();
    config.limits.max_results = 2_000;
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    let path = work.write_config(
        &node.http_url(),
        &all_contracts(),
        "max_concurrency = 8",
        "target_logs_per_request = 1900",
    );
    support::sync(&path, Target::Number(19_000))
        .await
        .expect("sync succeeds");
    let refused = node.stats().methods["eth_getLogs"]
        .errors
        .values()
        .sum::<u64>();
    assert!(
        refused >= 6,
        "each burst was refused at least once: {refused}"
    );
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 19_000).await;
}
both_backends!(bursts_met_several_at_a_time_end_exact);

/// Goal: under `sync.strict`, a log that matches an event but does not decode with it stops the sync with
/// exit 65, naming the contract, and commits nothing of its batch (decoding runs in a stage of its own,
/// beside the writer). Method: misc's `Batch(uint8 indexed kind, uint256[] ids, address[] recipients,
/// int256 delta, uint32 count)` declared with `delta` indexed instead of `kind` has the same signature, so
/// the same topic0 and topic count, but reads the random `delta` word as the offset of `recipients`, which
/// points outside the data. (An anonymous event's mismatch no longer counts: such a log is simply not it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_that_does_not_decode_under_strict_exits_65_and_commits_nothing_of_its_batch() {
    let node = support::start(node_config(2_000)).await;
    let work = Workdir::new();
    let text = format!(
        "[node]\nurl = \"{}\"\n\n[database]\nurl = \"sqlite://{}\"\n\n[sync]\nstrict = true\n\n\
         [[contracts]]\nname = \"misc\"\naddress = \"{:#x}\"\n\
         events = [\"event Batch(uint8 kind, uint256[] ids, address[] recipients, int256 indexed delta, uint32 count)\"]\n",
        node.http_url(),
        work.db().display(),
        devnode::contracts::MISC,
    );
    let path = work.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("write config");
    let err = support::sync(&path, Target::Number(2_000))
        .await
        .expect_err("the logs do not decode");
    assert_eq!(logslice::exit::code(&err), 65, "{err}");
    assert!(err.to_string().contains("misc"), "{err}");
    assert_eq!(support::checkpoint(&work, "misc").await, None);
}
