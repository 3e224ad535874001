//! `logslice check`: the config, then for each chain its database, its node (every provider) and its chain
//! id, one line each, without indexing.

use std::io::Write;

use tokio_util::sync::CancellationToken;

use super::{chains, explain};
use crate::cli::ConfigArg;
use logslice::config::{self, Config};
use logslice::exit;
use logslice::pipeline::{self, Node};
use logslice::status;

/// One line of `check`: a mark, the thing checked, what was found.
fn report_check(ok: bool, what: &str, detail: &str) {
    let mark = if ok { "ok  " } else { "FAIL" };
    let _ = writeln!(std::io::stdout(), "{mark}  {what}: {detail}");
}

pub(super) async fn check(args: &ConfigArg, cancel: &CancellationToken) -> u8 {
    let mut code = exit::OK;
    let mut fail = |failure: u8| {
        if code == exit::OK {
            code = failure;
        }
    };
    let config = match config::load(&args.config) {
        Ok(config) => {
            let n_events: usize = config.contracts.iter().map(|c| c.events.len()).sum();
            report_check(
                true,
                "config",
                &format!(
                    "{} ({} contracts, {n_events} events, every ABI parsed)",
                    args.config.display(),
                    config.contracts.len()
                ),
            );
            config
        }
        Err(errors) => {
            report_check(false, "config", &args.config.display().to_string());
            for error in &errors.0 {
                let _ = writeln!(std::io::stdout(), "      {error}");
            }
            return exit::CONFIG;
        }
    };
    let views = match chains::select(&config, &args.chains) {
        Ok(views) => views,
        Err(code) => return code,
    };
    let several = views.len() > 1;
    for view in &views {
        let name = &view.chains[0].name;
        let label = |what: &str| match several {
            true => format!("chain {name} {what}"),
            false => what.to_owned(),
        };
        check_chain(view, &label, cancel, &mut fail).await;
    }
    code
}

/// The database, the node and the chain id of one chain; `label` names a line of it.
async fn check_chain(
    config: &Config,
    label: &dyn Fn(&str) -> String,
    cancel: &CancellationToken,
    fail: &mut impl FnMut(u8),
) {
    let mut db_chain_id = None;
    match pipeline::open_sink(config).await {
        Ok((sink, db)) => {
            match sink.recorded_chain(&config.chains[0].name).await {
                Ok(chain_id) => {
                    db_chain_id = chain_id;
                    report_check(
                        true,
                        &label("database"),
                        &format!("{db} opens and is migrated"),
                    );
                }
                Err(source) => {
                    let err = pipeline::Error::Database {
                        database: db,
                        source,
                    };
                    report_check(false, &label("database"), &explain(config, &err));
                    fail(exit::code(&err));
                }
            }
            sink.close().await;
        }
        Err(err) => {
            report_check(false, &label("database"), &explain(config, &err));
            fail(exit::code(&err));
        }
    }
    let node = match Node::connect(&status::probe_config(&config.node), cancel).await {
        Ok(node) => node,
        Err(err) => {
            report_check(false, &label("node"), &explain(config, &err));
            fail(exit::code(&err));
            return;
        }
    };
    let Some(chain_id) = check_providers(config, label, &node, fail).await else {
        return;
    };
    match db_chain_id {
        Some(stored) if stored != chain_id => {
            report_check(
                false,
                &label("chain id"),
                &format!(
                    "the database holds logs of chain {stored} but the node serves chain {chain_id} (point database.url at a new database, or node.url at chain {stored})"
                ),
            );
            // As `sync` refuses it: a database built for another chain is a configuration error.
            fail(exit::CONFIG);
        }
        Some(_) => report_check(
            true,
            &label("chain id"),
            &format!("{chain_id}, as the database was built from"),
        ),
        None => report_check(
            true,
            &label("chain id"),
            &format!("{chain_id} (the database records none yet; the first sync records it)"),
        ),
    }
    if let Some(expected) = config.chains[0].chain_id.filter(|id| *id != chain_id) {
        report_check(
            false,
            &label("chain id"),
            &format!(
                "chains.{}.chain_id is {expected} but the node serves chain {chain_id} (correct chain_id, or point the chain's url at chain {expected})",
                config.chains[0].name
            ),
        );
        fail(exit::CONFIG);
    }
}

/// Asks each provider of `node` its chain id once, within the probe's timeout, and reports a line per
/// provider; returns the chain id when every provider answered the same one. `fail` records an exit code.
async fn check_providers(
    config: &Config,
    label: &dyn Fn(&str) -> String,
    node: &Node,
    fail: &mut impl FnMut(u8),
) -> Option<u64> {
    let answers = tokio::time::timeout(status::PROBE_TIMEOUT * 2, node.chain_ids()).await;
    let Ok(answers) = answers else {
        report_check(
            false,
            &label("node"),
            &format!(
                "{}: no answer within {}",
                node.display,
                humantime::format_duration(status::PROBE_TIMEOUT * 2)
            ),
        );
        fail(exit::UNAVAILABLE);
        return None;
    };
    let several = answers.len() > 1;
    let mut chain_id: Option<u64> = None;
    let mut all_answered = true;
    for (provider, answer) in node.providers().iter().zip(answers) {
        let what = if several {
            label(&format!("node {}", provider.name))
        } else {
            label("node")
        };
        match answer {
            Ok(id) if chain_id.is_some_and(|first| first != id) => {
                report_check(
                    false,
                    &what,
                    &format!(
                        "{} serves chain id {id}, the other providers {} (every provider of a chain must serve the same chain: fix or remove its url)",
                        provider.url,
                        chain_id.unwrap_or_default()
                    ),
                );
                fail(exit::CONFIG);
                all_answered = false;
            }
            Ok(id) => {
                chain_id = Some(id);
                report_check(
                    true,
                    &what,
                    &format!("{} answers chain id {id} (key accepted)", provider.url),
                );
            }
            Err(err) => {
                report_check(false, &what, &explain(config, &err));
                fail(exit::code(&err));
                all_answered = false;
            }
        }
    }
    chain_id.filter(|_| all_answered)
}
