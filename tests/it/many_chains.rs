//! Several chains from one config into one database (issue 60): each chain is synced by its own job at
//! once, and the database must equal each chain's ground truth, log by log, in the rows of its `chain_id`;
//! one chain's failure leaves the others indexed and exact.

use std::path::{Path, PathBuf};

use devnode::{DevNode, DevNodeConfig};
use logslice::observe::Observer;
use logslice::pipeline::{self, Target};
use tokio_util::sync::CancellationToken;

use crate::both_backends;
use crate::support::{self, assert_chain_matches_truth, node_config, Backend, Contract, Workdir};

/// One simulated chain of a test: its name in the config, its node and the contracts indexed on it.
struct Chain {
    name: &'static str,
    node: DevNode,
    contracts: Vec<Contract>,
}

/// A devnode of `blocks` blocks serving `chain_id`, its chain generated from `seed` with `density`.
fn chain_config(chain_id: u64, seed: u64, blocks: u64, density: f64) -> DevNodeConfig {
    let mut config = node_config(blocks);
    config.chain.chain_id = chain_id;
    config.seed = seed;
    config.chain.density = density;
    config
}

/// `[chains.NAME]` per chain (with `extra` lines in each), the database, and each chain's contracts.
fn write_config(work: &Workdir, chains: &[(&str, String, &[Contract])], extra: &str) -> PathBuf {
    let mut text = String::new();
    for (name, url, _) in chains {
        text.push_str(&format!(
            "[chains.{name}]\nurl = \"{url}\"\nrequests_per_second = 10000\nmax_retries = 3\n\
             initial_backoff = \"5ms\"\nmax_backoff = \"20ms\"\nrequest_timeout = \"2s\"\n{extra}\n"
        ));
    }
    text.push_str(&format!("[database]\n{}\n", work.database_toml()));
    for (name, _, contracts) in chains {
        text.push_str(&support::contracts_toml_on(contracts, Some(name)));
    }
    let path = work.dir.path().join("config.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

fn contracts(names: &[&str]) -> Vec<Contract> {
    support::all_contracts()
        .into_iter()
        .filter(|c| names.contains(&c.name))
        .collect()
}

/// Syncs every chain of `config` in-process to `target`; returns each chain's outcome.
async fn sync_all(config: &Path, target: Target) -> Vec<pipeline::chains::ChainOutcome> {
    let config = logslice::config::load(config).unwrap_or_else(|e| panic!("config: {e}"));
    let views = pipeline::chains::views(&config, &[]).expect("every chain");
    pipeline::chains::sync(views, target, &CancellationToken::new(), |_| {
        Observer::default()
    })
    .await
}

/// Each chain's rows equal its ground truth.
async fn assert_chains_exact(work: &Workdir, chains: &[Chain]) {
    for chain in chains {
        let truth = chain.node.truth();
        let head = truth.head();
        let n = assert_chain_matches_truth(
            work,
            chain.node.config().chain.chain_id,
            &truth,
            &chain.contracts,
            head,
        )
        .await;
        assert!(n > 100, "chain {}: compared {n} logs", chain.name);
    }
}

/// Two chains of different shapes (chain ids, seeds, lengths, densities), the same contract names on both
/// and one contract on one only: one sync indexes both at once, each exact in its own rows.
async fn two_chains_sync_into_one_database_each_exact(backend: Backend) {
    let work = Workdir::with(backend).await;
    let chains = vec![
        Chain {
            name: "alpha",
            node: support::start(chain_config(31_337, 7, 6_000, 1.0)).await,
            contracts: contracts(&["token_a", "pair"]),
        },
        Chain {
            name: "beta",
            node: support::start(chain_config(31_338, 11, 9_000, 0.4)).await,
            contracts: contracts(&["token_a", "token_b"]),
        },
    ];
    let listed: Vec<(&str, String, &[Contract])> = chains
        .iter()
        .map(|c| (c.name, c.node.http_url(), c.contracts.as_slice()))
        .collect();
    let config = write_config(&work, &listed, "");
    let outcomes = sync_all(&config, Target::Latest).await;
    for outcome in &outcomes {
        let report = outcome
            .result
            .as_ref()
            .unwrap_or_else(|e| panic!("{}: {e}", outcome.chain));
        assert!(report.logs > 0, "{}: {report:?}", outcome.chain);
    }
    assert_eq!(pipeline::chains::exit_code(&outcomes), 0);
    assert_chains_exact(&work, &chains).await;
    // A second sync of both finds nothing new and duplicates nothing.
    let outcomes = sync_all(&config, Target::Latest).await;
    assert_eq!(pipeline::chains::exit_code(&outcomes), 0);
    assert!(outcomes
        .iter()
        .all(|o| o.result.as_ref().is_ok_and(|r| r.logs == 0)));
    assert_chains_exact(&work, &chains).await;
}
both_backends!(two_chains_sync_into_one_database_each_exact);

/// Three chains, one of which has no node to answer: the other two reach their targets and are exact, and
/// the outcome is that chain's exit code (69: unreachable), named with the chain.
async fn a_chain_whose_node_is_down_does_not_hold_the_others_back(backend: Backend) {
    let work = Workdir::with(backend).await;
    let chains = vec![
        Chain {
            name: "alpha",
            node: support::start(chain_config(100, 3, 5_000, 1.0)).await,
            contracts: contracts(&["token_a", "misc"]),
        },
        Chain {
            name: "gamma",
            node: support::start(chain_config(300, 5, 4_000, 2.0)).await,
            contracts: contracts(&["token_a"]),
        },
    ];
    let down = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let down_contracts = contracts(&["token_b"]);
    let mut listed: Vec<(&str, String, &[Contract])> = chains
        .iter()
        .map(|c| (c.name, c.node.http_url(), c.contracts.as_slice()))
        .collect();
    listed.insert(
        1,
        (
            "beta",
            format!("http://127.0.0.1:{down}/v3/{}", support::KEY),
            down_contracts.as_slice(),
        ),
    );
    let config = write_config(&work, &listed, "");
    let outcomes = sync_all(&config, Target::Latest).await;
    let names: Vec<&str> = outcomes.iter().map(|o| o.chain.as_str()).collect();
    assert_eq!(names, ["alpha", "beta", "gamma"]);
    assert!(outcomes[0].result.is_ok(), "{:?}", outcomes[0].result);
    assert!(outcomes[2].result.is_ok(), "{:?}", outcomes[2].result);
    let failed = outcomes[1].result.as_ref().expect_err("beta has no node");
    assert_eq!(
        logslice::exit::code(failed),
        logslice::exit::UNAVAILABLE,
        "{failed}"
    );
    assert_eq!(
        pipeline::chains::exit_code(&outcomes),
        logslice::exit::UNAVAILABLE
    );
    assert_chains_exact(&work, &chains).await;
}
both_backends!(a_chain_whose_node_is_down_does_not_hold_the_others_back);

/// What the binary prints and exits with for two chains: one summary line per chain; `--to N` without
/// `--chain` is a usage error (2); a `chain_id` the node contradicts is 78, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_one_line_per_chain_and_refuses_what_cannot_work() {
    let work = Workdir::new();
    let alpha = support::start(chain_config(41, 2, 3_000, 1.0)).await;
    let beta = support::start(chain_config(42, 4, 3_000, 1.0)).await;
    let token = contracts(&["token_a"]);
    let listed: Vec<(&str, String, &[Contract])> = vec![
        ("alpha", alpha.http_url(), token.as_slice()),
        ("beta", beta.http_url(), token.as_slice()),
    ];
    let config = write_config(&work, &listed, "");
    let out = binary(&["sync", "--to", "100"], &config).await;
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(out.stderr.contains("--chain NAME"), "{}", out.all());
    let out = binary(&["sync", "--to", "latest"], &config).await;
    assert_eq!(out.code, Some(0), "{}", out.all());
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.all());
    assert!(
        lines[0].starts_with("chain alpha: synced to block 3000: "),
        "{}",
        out.all()
    );
    assert!(
        lines[1].starts_with("chain beta: synced to block 3000: "),
        "{}",
        out.all()
    );
    let out = binary(&["sync", "--to", "100", "--chain", "beta"], &config).await;
    assert_eq!(out.code, Some(0), "{}", out.all());
    let out = binary(&["sync", "--to", "latest", "--chain", "gamma"], &config).await;
    assert_eq!(out.code, Some(2), "{}", out.all());
    assert!(
        out.stderr.contains("give one of: alpha, beta"),
        "{}",
        out.all()
    );
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replacen("[chains.beta]\n", "[chains.beta]\nchain_id = 43\n", 1),
    )
    .expect("write");
    let out = binary(&["sync", "--to", "latest"], &config).await;
    assert_eq!(out.code, Some(78), "{}", out.all());
    assert!(
        out.stdout.contains("chain beta: not synced, exit 78")
            && out
                .all()
                .contains("chains.beta.chain_id: 43, but its node serves chain 42"),
        "{}",
        out.all()
    );
    assert!(
        out.stdout.contains("chain alpha: synced to block 3000"),
        "{}",
        out.all()
    );
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    fn all(&self) -> String {
        format!("--- stdout:\n{}\n--- stderr:\n{}", self.stdout, self.stderr)
    }
}

async fn binary(args: &[&str], config: &Path) -> Out {
    let mut args: Vec<String> = args.iter().map(ToString::to_string).collect();
    args.extend(["--config".to_owned(), config.display().to_string()]);
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_logslice"))
            .args(&args)
            .env_remove("RUST_LOG")
            .output()
            .expect("run logslice");
        Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    })
    .await
    .expect("join")
}
