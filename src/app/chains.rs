//! `sync` and `run` over several chains: one job per chain at once (`pipeline::chains`), progress as log
//! lines tagged with the chain, and one summary line per chain. One selected chain takes the commands'
//! single-chain path, whose output is unchanged.

use tokio_util::sync::CancellationToken;

use super::{explain, reindex, start_metrics, summary_line};
use crate::cli::SyncArgs;
use logslice::config::Config;
use logslice::exit;
use logslice::observe::{Console, Observer, StallClock};
use logslice::pipeline::{self, chains::ChainOutcome, Target};

/// The views of the chains `--chain` names (every chain without it); exit 2 for a name the config lacks.
pub(super) fn select(config: &Config, names: &[String]) -> Result<Vec<Config>, u8> {
    pipeline::chains::views(config, names).map_err(|problem| {
        tracing::error!("{problem}");
        exit::USAGE
    })
}

/// `sync` of several chains: each to `args.to`, concurrently; every chain finishes whatever the others do.
pub(super) async fn sync(
    config: &Config,
    views: Vec<Config>,
    args: &SyncArgs,
    cancel: CancellationToken,
) -> u8 {
    if let Target::Number(to) = args.to {
        let names: Vec<&str> = views.iter().map(|v| v.chains[0].name.as_str()).collect();
        tracing::error!(
            "--to {to}: a block number names a block of one chain, and {} chains are selected ({}) (give one of them with --chain NAME, or sync to latest, safe or finalized)",
            views.len(),
            names.join(", ")
        );
        return exit::USAGE;
    }
    if !args.reindex.is_empty() {
        if let Some(missing) = args.reindex.iter().find(|name| {
            !views
                .iter()
                .any(|v| v.contracts.iter().any(|c| &&c.name == name))
        }) {
            tracing::error!(
                "--reindex {missing}: {} has no contract named {missing:?} on the selected chains",
                config.source.display()
            );
            return exit::USAGE;
        }
        for view in &views {
            let here: Vec<String> = args
                .reindex
                .iter()
                .filter(|name| view.contracts.iter().any(|c| &&c.name == name))
                .cloned()
                .collect();
            if here.is_empty() {
                continue;
            }
            if let Err(code) = reindex(view, &here).await {
                return code;
            }
        }
    }
    let clock = StallClock::new();
    let server = CancellationToken::new();
    if let Err(code) = start_metrics(config, &clock, &server).await {
        return code;
    }
    let observer = |_: &str| Observer::new(Console::default(), clock.clone());
    let outcomes = pipeline::chains::sync(views.clone(), args.to, &cancel, observer).await;
    server.cancel();
    for (view, outcome) in views.iter().zip(&outcomes) {
        match &outcome.result {
            Ok(report) => println!("chain {}: {}", outcome.chain, summary_line(report)),
            Err(err) => println!(
                "chain {}: not synced, exit {}: {}",
                outcome.chain,
                exit::code(err),
                explain(view, err)
            ),
        }
    }
    finish(&outcomes)
}

/// `run` of several chains: each follows its head; a failing chain rides out its outage while the others
/// go on, and only an error no waiting mends (78, 74, 65) stops them all.
pub(super) async fn daemon(config: &Config, views: Vec<Config>, cancel: CancellationToken) -> u8 {
    let clock = StallClock::new();
    let server = CancellationToken::new();
    if let Err(code) = start_metrics(config, &clock, &server).await {
        return code;
    }
    let observer = |_: &str| Observer::new(Console::default(), clock.clone());
    let progress = |_: &str| tokio::sync::watch::Sender::new(None);
    let outcomes = pipeline::chains::run(views.clone(), &cancel, observer, progress).await;
    server.cancel();
    for (view, outcome) in views.iter().zip(&outcomes) {
        match &outcome.result {
            Err(pipeline::Error::Interrupted) | Ok(_) => {}
            Err(err) => tracing::error!(chain = %outcome.chain, "{}", explain(view, err)),
        }
    }
    finish(&outcomes)
}

/// The exit code of the chains' outcomes, with the line a user reads about an interruption.
fn finish(outcomes: &[ChainOutcome]) -> u8 {
    let code = pipeline::chains::exit_code(outcomes);
    if code == exit::INTERRUPTED {
        tracing::info!("stopped; everything committed before the signal is intact");
    }
    code
}
