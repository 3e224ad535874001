//! Several chains in one process: one job per chain, each a task of its own (its planner, providers,
//! finality and head following), over one database. A chain that fails does not stop the others: `sync`
//! lets every other chain reach its target; `run` keeps the others indexing while a failing chain rides
//! out its outage, and stops them all only for an error no waiting mends.
//!
//! Each job runs in its chain's [`crate::observe::chain::scope`], so its metrics carry a `chain` label.

use std::collections::HashMap;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{Error, SyncReport, Target};
use crate::config::Config;
use crate::exit;
use crate::observe::{self, Observer};

/// What one chain's job ended with.
#[derive(Debug)]
pub struct ChainOutcome {
    /// The chain's name.
    pub chain: String,
    /// Its report, or why it stopped.
    pub result: Result<SyncReport, Error>,
}

/// The views of `names` (every chain of `config` when empty), in config order.
///
/// # Errors
/// The first name that is not a chain of `config`, with the chains it has.
pub fn views(config: &Config, names: &[String]) -> Result<Vec<Config>, String> {
    if let Some(unknown) = names
        .iter()
        .find(|name| !config.chains.iter().any(|c| &c.name == *name))
    {
        return Err(format!(
            "--chain {unknown}: {} has no chain named {unknown:?} (give one of: {})",
            config.source.display(),
            config.chain_names().join(", ")
        ));
    }
    Ok(config
        .chains
        .iter()
        .filter(|chain| names.is_empty() || names.contains(&chain.name))
        .filter_map(|chain| config.for_chain(&chain.name))
        .collect())
}

/// `sync` of every chain of `views` (each a [`Config::for_chain`] view) at once, each to its own `target`;
/// `observer` makes each chain's observer. Returns when every chain has finished, in `views`' order.
pub async fn sync(
    views: Vec<Config>,
    target: Target,
    cancel: &CancellationToken,
    observer: impl Fn(&str) -> Observer,
) -> Vec<ChainOutcome> {
    let jobs: Vec<_> = views
        .into_iter()
        .map(|view| {
            let chain = view.chains[0].name.clone();
            let observer = observer(&chain);
            let cancel = cancel.clone();
            let span = tracing::info_span!("chain", chain = %chain);
            let job = observe::chain::scope(&chain, async move {
                super::sync_observed(&view, target, cancel, &observer).await
            });
            let task = tokio::spawn(job.instrument(span));
            (chain, task)
        })
        .collect();
    let mut outcomes = Vec::new();
    for (chain, task) in jobs {
        let result = super::joined(task.await).and_then(|result| result);
        outcomes.push(ChainOutcome { chain, result });
    }
    outcomes
}

/// `run` of every chain of `views` at once, until `cancel` fires or a chain stops for an error no waiting
/// mends (78, 74, 65: then the others are stopped too). `progress` gets each chain's lowest checkpoint.
/// Returns every chain's outcome, in `views`' order.
pub async fn run(
    views: Vec<Config>,
    cancel: &CancellationToken,
    observer: impl Fn(&str) -> Observer,
    progress: impl Fn(&str) -> watch::Sender<Option<u64>>,
) -> Vec<ChainOutcome> {
    // Stopping the others for one chain's fatal error must not look like the user's signal to them.
    let stop = cancel.child_token();
    let mut jobs = tokio::task::JoinSet::new();
    let mut names = Vec::new();
    let mut tasks = HashMap::new();
    for (idx, view) in views.into_iter().enumerate() {
        let chain = view.chains[0].name.clone();
        let observer = observer(&chain);
        let progress = progress(&chain);
        let stop = stop.clone();
        names.push(chain.clone());
        let span = tracing::info_span!("chain", chain = %chain);
        let job = observe::chain::scope(&chain, async move {
            super::run_watched(&view, stop, progress, &observer).await
        });
        let task = jobs.spawn(job.instrument(span));
        tasks.insert(task.id(), idx);
    }
    let mut results: Vec<Option<Result<SyncReport, Error>>> = names.iter().map(|_| None).collect();
    let mut failed = false;
    while let Some(joined) = jobs.join_next_with_id().await {
        let (idx, result) = match joined {
            Ok((id, result)) => (tasks[&id], result),
            Err(err) => (
                tasks[&err.id()],
                Err(Error::Internal(crate::fetch::join_failure(err))),
            ),
        };
        if !matches!(result, Err(Error::Interrupted)) && !failed {
            failed = true;
            if let Err(err) = &result {
                tracing::error!(chain = %names[idx], cause = %err, "a chain stopped; stopping the others");
            }
            stop.cancel();
        }
        results[idx] = Some(result);
    }
    names
        .into_iter()
        .zip(results)
        .map(|(chain, result)| ChainOutcome {
            chain,
            result: result.unwrap_or(Err(Error::Interrupted)),
        })
        .collect()
}

/// The exit code of several chains' outcomes: 0 when all succeeded; else, of the failures, the first of
/// 78, 74, 65, 69, 75 (interface.md), then any other (70), then 130 for an interruption.
pub fn exit_code(outcomes: &[ChainOutcome]) -> u8 {
    let codes: Vec<u8> = outcomes
        .iter()
        .filter_map(|o| o.result.as_ref().err().map(exit::code))
        .collect();
    let ranked = [
        exit::CONFIG,
        exit::IO,
        exit::DATA,
        exit::UNAVAILABLE,
        exit::TEMPFAIL,
    ];
    ranked
        .into_iter()
        .find(|code| codes.contains(code))
        .or_else(|| codes.iter().copied().find(|c| *c != exit::INTERRUPTED))
        .or_else(|| codes.first().copied())
        .unwrap_or(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(err: Option<Error>) -> ChainOutcome {
        ChainOutcome {
            chain: "c".into(),
            result: err.map_or_else(|| Ok(SyncReport::default()), Err),
        }
    }

    #[test]
    fn the_exit_code_of_several_chains_ranks_their_failures() {
        assert_eq!(exit_code(&[outcome(None), outcome(None)]), exit::OK);
        let not_yet = || Some(Error::NotYet("lag".into()));
        let config = || Some(Error::Config("bad".into()));
        assert_eq!(
            exit_code(&[outcome(not_yet()), outcome(None)]),
            exit::TEMPFAIL
        );
        assert_eq!(
            exit_code(&[outcome(not_yet()), outcome(config()), outcome(None)]),
            exit::CONFIG
        );
        assert_eq!(
            exit_code(&[outcome(Some(Error::Interrupted)), outcome(not_yet())]),
            exit::TEMPFAIL
        );
        assert_eq!(
            exit_code(&[outcome(Some(Error::Interrupted)), outcome(None)]),
            exit::INTERRUPTED
        );
        assert_eq!(
            exit_code(&[outcome(Some(Error::Internal("bug".into()))), outcome(None)]),
            exit::SOFTWARE
        );
    }
}
