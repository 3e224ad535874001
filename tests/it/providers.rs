//! Several providers for one chain, and rates learned from the provider (issue 59): a key limited below the
//! configured rate, metered by calls or by credits, ends exact without exiting 75; with two and three
//! providers, one killed mid-sync, one rate-limited hard, one answering 5xx, one lagging behind the head,
//! the database is exact and every provider served some requests; `run` takes a provider back once it
//! answers again; a provider on another chain is a configuration error naming it.

use std::path::PathBuf;
use std::time::Duration;

use devnode::{DevNode, DevNodeConfig, Down, Provider, ProviderOptions};
use logslice::pipeline::{self, Target};

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, Backend, Contract, Workdir, KEY,
};

/// How long a test waits for a state before failing (a guard, not a synchronisation).
const PATIENCE: Duration = Duration::from_secs(120);

/// One provider in a config: its name, its URL and extra keys of its table.
struct Entry<'a> {
    name: &'a str,
    url: String,
    keys: &'a str,
}

/// A config of `work` with one `[[node.providers]]` table per entry, `node_keys` in `[node]` (every
/// provider's defaults), `sync_keys` in `[sync]`, indexing `contracts`.
fn providers_config(
    work: &Workdir,
    node_keys: &str,
    entries: &[Entry<'_>],
    sync_keys: &str,
    contracts: &[Contract],
) -> PathBuf {
    let mut text = format!(
        "[node]\ninitial_backoff = \"5ms\"\nmax_backoff = \"200ms\"\nrequest_timeout = \"2s\"\n{node_keys}\n"
    );
    for entry in entries {
        text.push_str(&format!(
            "\n[[node.providers]]\nname = \"{}\"\nurl = \"{}\"\n{}\n",
            entry.name, entry.url, entry.keys
        ));
    }
    text.push_str(&format!(
        "\n[database]\n{}\n\n[sync]\n{sync_keys}\n",
        work.database_toml()
    ));
    text.push_str(&support::contracts_toml(contracts));
    let path = work.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

/// Syncs `path` to the head and asserts the database equals the ground truth.
async fn sync_exact(
    path: &std::path::Path,
    node: &DevNode,
    work: &Workdir,
) -> pipeline::SyncReport {
    let truth = node.truth();
    let report = support::sync(path, Target::Latest)
        .await
        .unwrap_or_else(|err| panic!("the sync fails: {err}"));
    assert_eq!(report.target, truth.head());
    assert_db_matches_truth(work, &truth, &all_contracts(), truth.head()).await;
    report
}

/// A chain whose logs carry `blockTimestamp` or not; without, a sparse one (every block with logs costs a
/// header read).
fn chain(log_timestamps: bool) -> DevNodeConfig {
    let mut config = node_config(4_000);
    config.chain.log_timestamps = log_timestamps;
    if !log_timestamps {
        config.chain.density = 0.1;
    }
    config
}

/// Ranges of at most this many blocks: requests enough (a few hundred) for a learned rate to settle.
const SMALL_RANGES: &str = "initial_block_range = 20\nmax_block_range = 20";

/// Asserts that the node refused `refused` requests for its limit, at least one (the limit was met) and at
/// most a tenth of the requests it got.
fn assert_met_a_tenth_at_most(refused: u64, stats: &devnode::StatsSnapshot) {
    assert!(refused > 0, "the key's limit was never met: {stats:#?}");
    assert!(
        refused * 10 <= stats.http_requests,
        "{refused} of {} requests refused for the key's limit",
        stats.http_requests
    );
}

/// Goal: a key whose real limit is a third of `requests_per_second` ends exact, with refusals a small
/// share of calls. Method: the node refuses (429) past `LIMIT` calls a second, batch items counted; the
/// config says three times that; the sync must succeed and match the ground truth.
async fn a_key_limited_below_the_configured_rate_ends_exact(backend: Backend, stamps: bool) {
    let limit: u32 = if stamps { 100 } else { 200 };
    let mut config = chain(stamps);
    config.faults.max_rps = Some(limit);
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    let path = providers_config(
        &work,
        "",
        &[Entry {
            name: "key",
            url: node.http_url(),
            keys: &format!("requests_per_second = {}", 3 * limit),
        }],
        SMALL_RANGES,
        &all_contracts(),
    );
    let report = sync_exact(&path, &node, &work).await;
    let stats = node.stats();
    assert_met_a_tenth_at_most(stats.over_max_rps, &stats);
    assert_eq!(report.rate_limited, stats.status(429), "{report:?}");
}

async fn a_key_limited_below_the_rate_with_log_timestamps(backend: Backend) {
    a_key_limited_below_the_configured_rate_ends_exact(backend, true).await
}
both_backends!(a_key_limited_below_the_rate_with_log_timestamps);

async fn a_key_limited_below_the_rate_reading_headers(backend: Backend) {
    a_key_limited_below_the_configured_rate_ends_exact(backend, false).await
}
both_backends!(a_key_limited_below_the_rate_reading_headers);

/// Goal: the same with a provider metering credits per method. Method: the node refuses past `LIMIT`
/// credits a second (its default table: `eth_getLogs` 75, `eth_getBlockByNumber` 16...); the config says
/// three times that, with the same table. The chain is long enough (about 230 requests, 9 s) that the
/// first second's refusals (every request in flight when the key's limit is first met) are not most of
/// what is measured.
async fn a_key_metered_by_credits_below_the_configured_rate_ends_exact(backend: Backend) {
    const LIMIT: u32 = 2_000;
    let mut config = node_config(4_000);
    config.faults.max_cps = Some(LIMIT);
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    let path = providers_config(
        &work,
        "",
        &[Entry {
            name: "credits",
            url: node.http_url(),
            keys: &format!(
                "credits_per_second = {}\nmethod_credits = {{ eth_getLogs = 75, eth_getBlockByNumber = 16, eth_getBlockReceipts = 500, eth_getTransactionReceipt = 15, eth_blockNumber = 10, eth_chainId = 1, default = 26 }}",
                3 * LIMIT
            ),
        }],
        SMALL_RANGES,
        &all_contracts(),
    );
    sync_exact(&path, &node, &work).await;
    let stats = node.stats();
    assert_met_a_tenth_at_most(stats.over_max_cps, &stats);
}
both_backends!(a_key_metered_by_credits_below_the_configured_rate_ends_exact);

/// Requests `provider` served.
fn served(provider: &Provider) -> u64 {
    provider.stats().http_requests
}

/// Goal: three providers, one killed mid-sync and one answering 5xx at random: exact, exit 0, and each
/// served some requests. Method: the killed one is shut down once it served five requests (its port then
/// refuses connections); the sync must carry on through the others.
async fn a_provider_killed_mid_sync_costs_nothing(backend: Backend) {
    let node = support::start(node_config(3_000)).await;
    let steady = node.add_provider(ProviderOptions::default()).await.unwrap();
    let mut flaky_options = ProviderOptions::default();
    flaky_options.faults.http_5xx = 0.3;
    let flaky = node.add_provider(flaky_options).await.unwrap();
    let doomed = node.add_provider(ProviderOptions::default()).await.unwrap();
    let work = Workdir::with(backend).await;
    let rate = "requests_per_second = 200\nmax_concurrency = 4";
    let path = providers_config(
        &work,
        rate,
        &[
            Entry {
                name: "steady",
                url: steady.http_url(),
                keys: "",
            },
            Entry {
                name: "flaky",
                url: flaky.http_url(),
                keys: "",
            },
            Entry {
                name: "doomed",
                url: doomed.http_url(),
                keys: "",
            },
        ],
        SMALL_RANGES,
        &all_contracts(),
    );
    let killer = tokio::spawn(async move {
        doomed.wait_for_stats(|s| s.http_requests >= 5).await;
        let served_before = doomed.stats().http_requests;
        doomed.shutdown().await;
        served_before
    });
    let report = sync_exact(&path, &node, &work).await;
    let doomed_served = tokio::time::timeout(PATIENCE, killer)
        .await
        .expect("the doomed provider served five requests")
        .expect("no panic");
    assert!(doomed_served >= 5);
    assert!(served(&steady) > 0 && served(&flaky) > 0, "{report:?}");
    assert!(flaky.stats().status(500) + flaky.stats().status(502) + flaky.stats().status(503) > 0);
    let status =
        logslice::status::gather(&logslice::config::load(&path).unwrap(), |e| e.to_string())
            .await
            .expect("status reads the database");
    let names: Vec<&str> = status
        .node
        .providers
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    assert_eq!(names, ["steady", "flaky", "doomed"]);
    let doomed_status = &status.node.providers[2];
    assert!(
        doomed_status.head.is_none() && doomed_status.error.is_some(),
        "{doomed_status:?}"
    );
    let seen = doomed_status
        .reported
        .as_ref()
        .expect("the sync recorded its view");
    assert!(seen.requests >= 5, "{seen:?}");
}
both_backends!(a_provider_killed_mid_sync_costs_nothing);

/// Goal: two providers, one rate-limited hard and one lagging behind the head, with a third healthy: exact
/// (the lagging one answers ranges above its head short, silently: asked for blocks it lacks, the database
/// would miss logs), and requests spread.
async fn a_lagging_and_a_throttled_provider_cost_nothing(backend: Backend) {
    let node = support::start(node_config(3_000)).await;
    let healthy = node.add_provider(ProviderOptions::default()).await.unwrap();
    let throttled = node
        .add_provider(ProviderOptions {
            max_rps: Some(5),
            ..ProviderOptions::default()
        })
        .await
        .unwrap();
    let lagging = node
        .add_provider(ProviderOptions {
            lag: 200,
            ..ProviderOptions::default()
        })
        .await
        .unwrap();
    let work = Workdir::with(backend).await;
    let path = providers_config(
        &work,
        "requests_per_second = 100\nmax_concurrency = 4",
        &[
            Entry {
                name: "healthy",
                url: healthy.http_url(),
                keys: "",
            },
            Entry {
                name: "throttled",
                url: throttled.http_url(),
                keys: "",
            },
            Entry {
                name: "lagging",
                url: lagging.http_url(),
                keys: "",
            },
        ],
        SMALL_RANGES,
        &all_contracts(),
    );
    sync_exact(&path, &node, &work).await;
    for (name, provider) in [
        ("healthy", &healthy),
        ("throttled", &throttled),
        ("lagging", &lagging),
    ] {
        assert!(served(provider) > 0, "{name} served nothing");
    }
}
both_backends!(a_lagging_and_a_throttled_provider_cost_nothing);

/// Goal: under `run`, a provider down for a while is used again once it answers. Method: the second
/// provider refuses connections until the daemon reached the head through the first; then it heals and the
/// first goes down: the daemon must reach the blocks mined meanwhile through the second alone.
async fn run_takes_a_provider_back_once_it_answers(backend: Backend) {
    let node = support::start(node_config(1_000)).await;
    let first = node.add_provider(ProviderOptions::default()).await.unwrap();
    let second = node.add_provider(ProviderOptions::default()).await.unwrap();
    second.set_down(Down::Refuse);
    let work = Workdir::with(backend).await;
    let path = providers_config(
        &work,
        "requests_per_second = 200\nmax_retries = 2",
        &[
            Entry {
                name: "first",
                url: first.http_url(),
                keys: "",
            },
            Entry {
                name: "second",
                url: second.http_url(),
                keys: "",
            },
        ],
        "poll_interval = \"20ms\"",
        &all_contracts(),
    );
    let mut daemon = crate::outage::Daemon::start(&path);
    daemon.reaches(node.truth().head()).await;
    second.set_down(Down::Up);
    first.set_down(Down::Refuse);
    let before = served(&second);
    let head = node.mine(50);
    daemon.reaches(head).await;
    assert!(
        served(&second) > before,
        "the second provider was not used again"
    );
    daemon.stop().await;
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), head).await;
}
both_backends!(run_takes_a_provider_back_once_it_answers);

/// Goal: a provider that serves another chain is refused at start (78) with its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_on_another_chain_is_a_config_error_naming_it() {
    let node = support::start(node_config(500)).await;
    let mut other_chain = node_config(500);
    other_chain.chain.chain_id = 1338;
    let other = support::start(other_chain).await;
    let work = Workdir::new();
    let path = providers_config(
        &work,
        "",
        &[
            Entry {
                name: "right",
                url: node.http_url(),
                keys: "",
            },
            Entry {
                name: "wrong",
                url: other.http_url(),
                keys: "",
            },
        ],
        "",
        &all_contracts(),
    );
    let err = support::sync(&path, Target::Latest)
        .await
        .expect_err("providers on two chains");
    assert_eq!(logslice::exit::code(&err), logslice::exit::CONFIG, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("wrong") && message.contains("1338"),
        "{message}"
    );
    assert!(!message.contains(KEY), "{message}");
}
