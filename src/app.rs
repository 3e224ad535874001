//! What each command does, in terms of the library: load the config, run the job, print the result, and
//! turn the outcome into an exit code. `main.rs` only parses, installs logging and calls [`run`].

use std::io::Write;
use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::cli::{Cli, Command, ConfigArg, SyncArgs};
use crate::config::{self, Config};
use crate::exit;
use crate::pipeline::{self, Node};

/// Runs a parsed command line; returns the exit code.
pub async fn run(cli: Cli, cancel: CancellationToken) -> u8 {
    match cli.command {
        Command::Sync(args) => sync(args, cancel).await,
        Command::Run(args) => daemon(&args, cancel).await,
        Command::Check(args) => check(&args).await,
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
        Command::Devnode(args) => match crate::devnode::cli::run(args, cancel).await {
            Ok(()) => exit::OK,
            Err(err) => {
                tracing::error!(cause = %err, "devnode failed");
                exit::IO
            }
        },
    }
}

fn load(path: &Path) -> Result<Config, u8> {
    config::load(path).map_err(|errors| {
        eprintln!("{errors}");
        exit::CONFIG
    })
}

async fn sync(args: SyncArgs, cancel: CancellationToken) -> u8 {
    let config = match load(&args.config.config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    match pipeline::sync(&config, args.to, cancel).await {
        Ok(report) => {
            let secs = report.elapsed.as_secs_f64().max(1e-9);
            println!(
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
                if report.undecodable > 0 { format!("; {} logs kept raw only (did not decode)", report.undecodable) } else { String::new() }
            );
            exit::OK
        }
        Err(err) => {
            let code = exit::code(&err);
            tracing::error!("{}", error_chain(&err));
            code
        }
    }
}

async fn daemon(args: &ConfigArg, cancel: CancellationToken) -> u8 {
    let config = match load(&args.config) {
        Ok(config) => config,
        Err(code) => return code,
    };
    match pipeline::run(&config, cancel).await {
        Ok(_) => exit::OK,
        Err(pipeline::Error::Interrupted) => {
            tracing::info!("stopped; everything committed before the signal is intact");
            exit::INTERRUPTED
        }
        Err(err) => {
            tracing::error!("{}", error_chain(&err));
            exit::code(&err)
        }
    }
}

async fn check(args: &ConfigArg) -> u8 {
    let mut stdout = std::io::stdout();
    let config = match load(&args.config) {
        Ok(config) => {
            let _ = writeln!(
                stdout,
                "ok    config {} ({} contracts)",
                args.config.display(),
                config.contracts.len()
            );
            config
        }
        Err(code) => {
            let _ = writeln!(stdout, "FAIL  config {}", args.config.display());
            return code;
        }
    };
    let mut code = exit::OK;
    match pipeline::open_sink(&config).await {
        Ok((sink, db)) => {
            let _ = writeln!(stdout, "ok    database {db}");
            sink.close().await;
        }
        Err(err) => {
            let _ = writeln!(stdout, "FAIL  database: {}", error_chain(&err));
            code = exit::code(&err);
        }
    }
    match Node::connect(&config.node).await {
        Ok(node) => match node.chain_id().await {
            Ok(chain_id) => {
                let _ = writeln!(
                    stdout,
                    "ok    node {} (chain id {chain_id}, key accepted)",
                    node.display
                );
            }
            Err(err) => {
                let _ = writeln!(stdout, "FAIL  node: {}", error_chain(&err));
                code = if code == exit::OK {
                    exit::code(&err)
                } else {
                    code
                };
            }
        },
        Err(err) => {
            let _ = writeln!(stdout, "FAIL  node: {}", error_chain(&err));
            code = if code == exit::OK {
                exit::code(&err)
            } else {
                code
            };
        }
    }
    code
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
