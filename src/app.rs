//! What each command does, in terms of the library: load the config, run the job, print the result, and
//! turn the outcome into an exit code. `main.rs` only parses, installs logging and calls [`run`].
//!
//! Results go to stdout; every message about a failure goes to stderr through `tracing` (or, for a config
//! that does not load, as the list of its errors), and names only redacted URLs.

use std::path::Path;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

mod chains;
mod check;

use crate::cli::{Cli, Command, ConfigArg, StatusArgs, SyncArgs};
use logslice::config::{self, Config};
use logslice::exit;
use logslice::observe::{self, Console, Observer, StallClock};
use logslice::pipeline::{self, Target};
use logslice::sink::{self, ReindexSpec};
use logslice::status;

/// Runs a parsed command line; returns the exit code. `console` is stderr as the log writer shares it
/// with the progress bar.
pub async fn run(cli: Cli, cancel: CancellationToken, console: Console) -> u8 {
    match cli.command {
        Command::Sync(args) => sync(args, cancel, console).await,
        Command::Run(args) => daemon(&args, cancel, console).await,
        Command::Status(args) => status(&args).await,
        Command::Check(args) => check::check(&args, &cancel).await,
        #[cfg(feature = "sim")]
        Command::Bench(args) => match crate::bench::run(&args).await {
            Ok(report) => {
                print!("{report}");
                exit::OK
            }
            Err(err) => {
                tracing::error!("{}", error_chain(&err));
                match &err {
                    crate::bench::Error::Phase { source, .. } => exit::code(source),
                    crate::bench::Error::Setup(_) => exit::CONFIG,
                }
            }
        },
        #[cfg(feature = "sim")]
        Command::Devnode(args) => match devnode::cli::run(*args, cancel).await {
            Ok(()) => exit::OK,
            Err(err) => {
                tracing::error!(cause = %err, "devnode failed");
                exit::IO
            }
        },
    }
}

/// Whether the command writes to Postgres (a config whose `database.url` is one, or `bench
/// --database postgres://...`), read before the runtime is built to size it. A config that does not
/// load says no here; the command reports its errors.
pub fn writes_postgres(cli: &Cli) -> bool {
    let config_is_postgres = |path: &std::path::Path| {
        logslice::config::load(path).is_ok_and(|config| {
            matches!(
                config.database.url,
                logslice::config::DatabaseUrl::Postgres(_)
            )
        })
    };
    match &cli.command {
        Command::Sync(args) => config_is_postgres(&args.config.config),
        Command::Run(args) => config_is_postgres(&args.config),
        #[cfg(feature = "sim")]
        Command::Bench(args) => args.postgres_url().is_some(),
        #[cfg(feature = "sim")]
        Command::Devnode(_) => false,
        Command::Status(_) | Command::Check(_) => false,
    }
}

fn load(path: &Path) -> Result<Config, u8> {
    config::load(path).map_err(|errors| {
        eprintln!("{errors}");
        exit::CONFIG
    })
}

/// Every contract whose `start_block` is above an explicit `--to N`: it would index nothing, which is
/// almost certainly a typo in one of the two, so the sync refuses (exit 78) and names each of them.
pub fn start_blocks_above(config: &Config, target: Target) -> Vec<String> {
    let Target::Number(to) = target else {
        return Vec::new();
    };
    config
        .contracts
        .iter()
        .enumerate()
        .filter(|(_, contract)| contract.start_block > to)
        .map(|(contract_idx, contract)| {
            format!(
                "{}: contracts[{contract_idx}].start_block: {} (contract {}) is above the target block {to} given with --to, so it would index nothing \
                 (lower contracts[{contract_idx}].start_block, or sync to a block at or above it)",
                config.source.display(),
                contract.start_block,
                contract.name
            )
        })
        .collect()
}

async fn sync(args: SyncArgs, cancel: CancellationToken, console: Console) -> u8 {
    let config = match load(&args.config.config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    exit_after_grace(&cancel, config.sync.shutdown_grace);
    let mut views = match chains::select(&config, &args.config.chains) {
        Ok(views) => views,
        Err(code) => return code,
    };
    if views.len() > 1 {
        return chains::sync(&config, views, &args, cancel).await;
    }
    let config = views.remove(0);
    let above = start_blocks_above(&config, args.to);
    if !above.is_empty() {
        for problem in above {
            tracing::error!("{problem}");
        }
        return exit::CONFIG;
    }
    if !args.reindex.is_empty() {
        if let Err(code) = reindex(&config, &args.reindex).await {
            return code;
        }
    }
    let clock = StallClock::new();
    let server = CancellationToken::new();
    if let Err(code) = start_metrics(&config, &clock, &server).await {
        return code;
    }
    let observer = Observer::new(console, clock);
    let result = pipeline::sync_observed(&config, args.to, cancel, &observer).await;
    observer.finish();
    server.cancel();
    match result {
        Ok(report) => {
            println!("{}", summary_line(&report));
            exit::OK
        }
        Err(pipeline::Error::Interrupted) => {
            tracing::info!("stopped; everything committed before the signal is intact");
            exit::INTERRUPTED
        }
        Err(err) => report_error(&config, &err),
    }
}

/// `sync`'s summary line of one chain.
fn summary_line(report: &pipeline::SyncReport) -> String {
    let secs = report.elapsed.as_secs_f64().max(1e-9);
    format!(
        "synced to block {}: {} logs, {} typed rows in {} batches, {:.1}s ({:.0} logs/s); {} requests, {} errors, {} retries, {} splits{}",
        report.target,
        report.logs,
        report.typed_rows,
        report.batches,
        secs,
        report.logs as f64 / secs,
        report.requests,
        report.errors,
        report.retries,
        report.splits,
        summary_notes(report)
    )
}

/// The end of `sync`'s summary line: what only some runs have.
fn summary_notes(report: &pipeline::SyncReport) -> String {
    let mut notes = String::new();
    if report.topic_only > 0 {
        notes.push_str(&format!(
            "; {} requests by topic only ({} logs of other contracts dropped)",
            report.topic_only, report.foreign_logs
        ));
    }
    if report.repeated_logs > 0 {
        notes.push_str(&format!(
            "; {} logs the node delivered twice, kept once",
            report.repeated_logs
        ));
    }
    if report.receipt_blocks > 0 {
        notes.push_str(&format!(
            "; {} blocks over the result cap read from receipts",
            report.receipt_blocks
        ));
    }
    if report.streamed_batches > 0 {
        notes.push_str(&format!(
            "; {} batches too large to encode whole written in parts",
            report.streamed_batches
        ));
    }
    if report.undecodable > 0 {
        notes.push_str(&format!(
            "; {} logs kept raw only (did not decode)",
            report.undecodable
        ));
    }
    notes
}

/// The last line of defence of a shutdown: once `cancel` fires, the process exits with 130 after `grace`
/// (`sync.shutdown_grace`), whatever the job is still doing. Every wait for the node ends when the token
/// fires, so this is for what does not: a commit that takes too long, a database that does not answer.
///
/// A forced exit loses the batch in flight whole, never half: its transaction was not committed, and the
/// database rolls it back when the process dies. SQLite ignores the WAL frames of a transaction that never
/// committed (they carry no commit record) when it next opens the file; Postgres aborts the open transaction
/// of a connection that closes. The checkpoint moves only in the transaction of the rows it covers, so it
/// stays at the last committed batch.
fn exit_after_grace(cancel: &CancellationToken, grace: Duration) {
    let cancel = cancel.clone();
    tokio::spawn(async move {
        cancel.cancelled().await;
        // A thread of its own, not a task: runtime workers that are stuck must not hold the exit up.
        std::thread::spawn(move || {
            std::thread::sleep(grace);
            tracing::error!(
                grace = %humantime::format_duration(grace),
                "not stopped within sync.shutdown_grace of the signal: exiting now; the batch in flight is rolled back"
            );
            std::process::exit(i32::from(exit::INTERRUPTED));
        });
    });
}

/// Serves `/metrics` and `/health` when `[metrics]` is configured, until `server` is cancelled.
async fn start_metrics(
    config: &Config,
    clock: &StallClock,
    server: &CancellationToken,
) -> Result<(), u8> {
    let Some(metrics) = &config.metrics else {
        return Ok(());
    };
    match observe::install_recorder(&config.chain_names()) {
        Ok(handle) => match observe::serve(
            metrics.addr,
            handle,
            clock.clone(),
            metrics.max_stall,
            server.clone(),
        )
        .await
        {
            Ok(addr) => tracing::info!(%addr, "serving /metrics and /health"),
            Err(err) => {
                tracing::error!(
                    "{}: metrics.addr: cannot listen on {}: {err} (choose a free address, or remove [metrics])",
                    config.source.display(),
                    metrics.addr
                );
                return Err(exit::CONFIG);
            }
        },
        // Only when a recorder is installed already; the job runs on without metrics.
        Err(err) => tracing::warn!(cause = %err, "metrics are off"),
    }
    Ok(())
}

/// `logslice run`: the daemon, until SIGINT/SIGTERM (exit 130, everything committed before it intact).
async fn daemon(args: &ConfigArg, cancel: CancellationToken, console: Console) -> u8 {
    let config = match load(&args.config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    exit_after_grace(&cancel, config.sync.shutdown_grace);
    let mut views = match chains::select(&config, &args.chains) {
        Ok(views) => views,
        Err(code) => return code,
    };
    if views.len() > 1 {
        return chains::daemon(&config, views, cancel).await;
    }
    let config = views.remove(0);
    let clock = StallClock::new();
    let server = CancellationToken::new();
    if let Err(code) = start_metrics(&config, &clock, &server).await {
        return code;
    }
    let observer = Observer::new(console, clock);
    let result = pipeline::run_watched(
        &config,
        cancel,
        tokio::sync::watch::Sender::new(None),
        &observer,
    )
    .await;
    observer.finish();
    server.cancel();
    match result {
        Ok(_) => exit::OK,
        Err(pipeline::Error::Interrupted) => {
            tracing::info!("stopped; everything committed before the signal is intact");
            exit::INTERRUPTED
        }
        Err(err) => report_error(&config, &err),
    }
}

/// Logs a job's error with the fix for its class, and returns its exit code.
fn report_error(config: &Config, err: &pipeline::Error) -> u8 {
    tracing::error!("{}", explain(config, err));
    exit::code(err)
}

/// The error chain, then the fix for its class in parentheses.
fn explain(config: &Config, err: &pipeline::Error) -> String {
    match fix(config, err, exit::code(err)) {
        Some(fix) => format!("{} ({fix})", error_chain(err)),
        None => error_chain(err),
    }
}

/// What to do about an error whose message cannot know the config file or the field (the sink never
/// sees the config, the rpc layer only a redacted URL).
fn fix(config: &Config, err: &pipeline::Error, code: u8) -> Option<String> {
    use logslice::fetch;
    let file = config.source.display();
    match err {
        pipeline::Error::Database {
            source:
                sink::Error::Mismatch(_) | sink::Error::Invalid { .. } | sink::Error::Unstorable { .. },
            ..
        } => None,
        pipeline::Error::Database { .. } => Some(format!(
            "check database.url in {file}: the database must be reachable, its directory must exist and be writable, \
             and no other process may hold it locked"
        )),
        pipeline::Error::Node {
            source: fetch::Error::Rejected { .. },
            ..
        } => Some(format!(
            "check the API key in node.url in {file}; when written as ${{VAR}} it is read from the environment"
        )),
        pipeline::Error::Node { .. } if code == exit::UNAVAILABLE => Some(format!(
            "check node.url in {file} and that the node is reachable from here; node.max_retries sets how often it is retried"
        )),
        pipeline::Error::Node { .. } if code == exit::TEMPFAIL => Some(format!(
            "the node is failing or rate-limiting: run again later, or lower node.requests_per_second in {file}"
        )),
        _ => None,
    }
}

/// `sync --reindex`: forgets the named contracts in one transaction, so the sync that follows indexes
/// them from their start blocks.
async fn reindex(config: &Config, names: &[String]) -> Result<(), u8> {
    let file = config.source.display();
    let mut specs = Vec::new();
    for name in names {
        let Some(contract) = config.contracts.iter().find(|c| &c.name == name) else {
            let known: Vec<&str> = config.contracts.iter().map(|c| c.name.as_str()).collect();
            tracing::error!(
                "--reindex {name}: {file} has no contract named {name:?} (give one of: {})",
                known.join(", ")
            );
            return Err(exit::USAGE);
        };
        // Raw rows are shared by address: deleting them under a contract that stays would leave it with
        // typed rows and a checkpoint over raw rows that are gone.
        for other in config.contracts.iter().filter(|c| !names.contains(&c.name)) {
            if let Some(shared) = other
                .addresses
                .iter()
                .find(|a| contract.addresses.contains(a))
            {
                tracing::error!(
                    "--reindex {name}: contract {} in {file} shares address {shared:#x} with {name}, and a reindex deletes that address's raw rows \
                     (reindex both: --reindex {name} --reindex {})",
                    other.name,
                    other.name
                );
                return Err(exit::CONFIG);
            }
        }
        specs.push(ReindexSpec {
            name: contract.name.clone(),
            addresses: contract.addresses.clone(),
            tables: contract.events.iter().map(|e| e.table.clone()).collect(),
        });
    }
    let (mut sink, db) = pipeline::open_sink(config)
        .await
        .map_err(|err| report_error(config, &err))?;
    // Nothing recorded for the chain: nothing to forget.
    let result = match sink.bind_recorded(&config.chains[0].name).await {
        Ok(Some(_)) => sink.reindex(&specs).await,
        Ok(None) => Ok(sink::ReindexReport::default()),
        Err(err) => Err(err),
    };
    sink.close().await;
    match result {
        Ok(report) => {
            tracing::info!(
                contracts = %names.join(","),
                tables_dropped = report.tables.len(),
                raw_rows_deleted = report.raw_rows,
                "reindexing: forgot what was indexed; indexing again from the start blocks"
            );
            Ok(())
        }
        Err(source) => Err(report_error(
            config,
            &pipeline::Error::Database {
                database: db,
                source,
            },
        )),
    }
}

async fn status(args: &StatusArgs) -> u8 {
    let config = match load(&args.config.config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    let views = match chains::select(&config, &args.config.chains) {
        Ok(views) => views,
        Err(code) => return code,
    };
    let mut reports = Vec::new();
    for view in &views {
        match status::gather(view, |err| explain(view, err)).await {
            Ok(report) => reports.push(report),
            Err(err) => return report_error(view, &err),
        }
    }
    match (args.json, reports.as_slice()) {
        (true, [one]) => println!(
            "{}",
            serde_json::to_string_pretty(one).expect("the report serializes")
        ),
        (true, several) => println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "chains": several }))
                .expect("the report serializes")
        ),
        (false, reports) => {
            for (idx, report) in reports.iter().enumerate() {
                if idx > 0 {
                    println!();
                }
                print!("{report}");
            }
        }
    }
    // The report is printed either way; the code tells a script a node could not be asked.
    if reports.iter().all(|r| r.node.head.is_some()) {
        exit::OK
    } else {
        exit::UNAVAILABLE
    }
}

/// An error with its sources, `a: b: c`.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(all(test, feature = "sim"))]
mod cli_tests {
    /// The example config as it is (SQLite) and pointed at Postgres, beside the example's ABIs.
    #[test]
    fn postgres_is_told_apart_before_the_runtime_is_built() {
        use clap::Parser;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = tempfile::tempdir().expect("a temp dir");
        std::os::unix::fs::symlink(root.join("abis"), dir.path().join("abis")).expect("abis");
        let example = std::fs::read_to_string(root.join("config.toml")).expect("the example");
        let on_postgres = example.replace(
            "url = \"sqlite://logslice.db\"",
            "url = \"postgres://postgres@127.0.0.1:5432/test\"",
        );
        assert_ne!(on_postgres, example, "the example's database line moved");
        let (sqlite, postgres) = (dir.path().join("sqlite.toml"), dir.path().join("pg.toml"));
        std::fs::write(&sqlite, example).expect("write");
        std::fs::write(&postgres, on_postgres).expect("write");
        let writes_postgres = |args: &[&str]| {
            super::writes_postgres(
                &crate::cli::Cli::try_parse_from([&["logslice"], args].concat()).expect("parses"),
            )
        };
        let (sqlite, postgres) = (sqlite.to_str().unwrap(), postgres.to_str().unwrap());
        assert!(writes_postgres(&[
            "sync", "--to", "10", "--config", postgres
        ]));
        assert!(writes_postgres(&["run", "--config", postgres]));
        assert!(!writes_postgres(&[
            "sync", "--to", "10", "--config", sqlite
        ]));
        assert!(!writes_postgres(&["run", "--config", sqlite]));
        assert!(!writes_postgres(&[
            "sync",
            "--to",
            "10",
            "--config",
            "/no/such/config.toml"
        ]));
        assert!(writes_postgres(&[
            "bench",
            "--database",
            "postgres://u@h/db"
        ]));
        assert!(!writes_postgres(&[
            "bench",
            "--database",
            "sqlite:///tmp/b.db"
        ]));
        assert!(!writes_postgres(&["bench"]));
        assert!(!writes_postgres(&["status", "--config", postgres]));
    }
}
