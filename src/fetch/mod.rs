//! Concurrent, bounded fetching of logs: drives the [`Planner`] with the node's answers and hands out
//! fetched ranges strictly in block order.
//!
//! At most `max_concurrency` requests are in flight (fewer for a while after a query timeout: a timeout is
//! a cost problem, not a density one), and a reorder buffer bounded by the in-flight window holds ranges
//! that finished early, so memory depends on the window, never on the chain's length. Nothing here writes
//! to a database or decides what a log means.

mod gate;

use std::collections::BTreeMap;
use std::sync::Arc;

use alloy_primitives::{Address, B256};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use gate::{Gate, GateConfig, GateStats, OnSplit};

use crate::planner::{Outcome, Planner, Verdict};
use crate::primitives::{BlockNumber, BlockRange, Log};
use crate::rpc::{self, Blocks, Class, Client, LogFilter, SplitReason};

/// Why fetching stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The node asked for a narrower request (handled inside `fetch`; escapes only from [`Gate::run`]).
    #[error("the node asked for a narrower request: {0}")]
    Split(#[source] rpc::Error),
    /// The node rejected the API key.
    #[error("the node rejected the API key ({method}: {source})")]
    Rejected {
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// An answer that retrying cannot change.
    #[error("{method} failed: {source}")]
    Fatal {
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// Every attempt failed with a transient error.
    #[error("{method} failed {attempts} times (node.max_retries); last: {source}")]
    Exhausted {
        /// The method.
        method: &'static str,
        /// Attempts made.
        attempts: u32,
        /// The last answer.
        #[source]
        source: rpc::Error,
    },
    /// One block holds more matching logs than the node returns, even for one address and one topic0.
    #[error("block {block} has more logs than the node returns at once for address {address} and topic0 {topic0} (narrow the contract's events, or use a node with a higher result cap)")]
    BlockOverflow {
        /// The block.
        block: BlockNumber,
        /// The narrowest address filter.
        address: Address,
        /// The narrowest topic0 filter (`any` when anonymous events forbid one).
        topic0: String,
    },
    /// The node answered logs outside the requested range, or of another address.
    #[error("the node answered a log that does not match the request: {0}")]
    Inconsistent(String),
    /// Shutdown was requested.
    #[error("interrupted")]
    Interrupted,
}

/// Which logs to ask for over a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Emitting contracts.
    pub addresses: Vec<Address>,
    /// Alternatives for topic0; `None` when an anonymous event forbids a topic0 filter.
    pub topic0: Option<Vec<B256>>,
}

/// A range whose logs are all fetched, in `(block_number, log_index)` order.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The range.
    pub range: BlockRange,
    /// Its logs.
    pub logs: Vec<Log>,
}

/// Fetches logs of the ranges `planner` hands out and sends them to `out` in block order.
///
/// # Errors
/// Any [`Error`] that stops fetching; [`Error::Interrupted`] on cancellation.
pub async fn run(
    client: Arc<Client>,
    gate: Arc<Gate>,
    mut planner: Planner,
    select: Arc<dyn Fn(BlockRange) -> Selection + Send + Sync>,
    out: mpsc::Sender<Fetched>,
    cancel: CancellationToken,
) -> Result<(), Error> {
    let max_concurrency = gate.config().max_concurrency.max(1);
    // Ranges finished ahead of the next one to send wait here; bounded by this window.
    let window = max_concurrency + 2;
    let mut allowed = max_concurrency;
    let mut successes_since_ease = 0usize;
    let mut in_flight: JoinSet<(BlockRange, Result<Vec<Log>, Error>)> = JoinSet::new();
    let mut ready: BTreeMap<BlockNumber, Fetched> = BTreeMap::new();
    let mut next_to_send: Option<BlockNumber> = None;

    loop {
        while in_flight.len() < allowed && (ready.len() < window || planner.has_pieces()) {
            let Some(range) = planner.next_range() else {
                break;
            };
            next_to_send.get_or_insert(range.start());
            let (client, gate, selection) = (client.clone(), gate.clone(), select(range));
            in_flight.spawn(async move {
                let filter = LogFilter {
                    blocks: Blocks::Range(range),
                    addresses: selection.addresses,
                    topic0: selection.topic0,
                };
                let logs = gate
                    .run("eth_getLogs", OnSplit::Return, || client.get_logs(&filter))
                    .await;
                (range, logs.and_then(|logs| checked(range, &filter, logs)))
            });
        }
        let Some(joined) = (tokio::select! {
            _ = cancel.cancelled() => return Err(Error::Interrupted),
            joined = in_flight.join_next() => joined,
        }) else {
            break; // nothing in flight and nothing left to plan
        };
        let (range, result) = joined.expect("fetch tasks do not panic");
        match result {
            Ok(logs) => {
                planner.report(
                    range,
                    Outcome::Logs {
                        n: logs.len() as u64,
                    },
                );
                tracing::debug!(%range, n = logs.len(), next_span = planner.span(), "fetched");
                ready.insert(range.start(), Fetched { range, logs });
                successes_since_ease += 1;
                if allowed < max_concurrency && successes_since_ease >= 8 {
                    allowed += 1;
                    successes_since_ease = 0;
                }
            }
            Err(Error::Split(err)) => {
                let outcome = match err.class() {
                    Class::Split {
                        reason: SplitReason::Timeout,
                        ..
                    } => {
                        allowed = (allowed / 2).max(1);
                        successes_since_ease = 0;
                        Outcome::Timeout
                    }
                    Class::Split {
                        reason: SplitReason::RangeTooWide,
                        max_blocks,
                        ..
                    } => Outcome::RangeTooWide { max_blocks },
                    Class::Split { suggested, .. } => Outcome::TooManyResults { suggested },
                    _ => unreachable!("Error::Split carries a split class"),
                };
                tracing::debug!(%range, cause = %err, "splitting");
                if planner.report(range, outcome) == Verdict::SingleBlockOverflow {
                    let (client, gate, selection) = (client.clone(), gate.clone(), select(range));
                    in_flight.spawn(async move {
                        let logs =
                            fetch_block_by_filters(&client, &gate, range.start(), selection).await;
                        (range, logs)
                    });
                }
            }
            Err(err) => return Err(err),
        }
        while let Some(fetched) = next_to_send.and_then(|next| ready.remove(&next)) {
            next_to_send = Some(fetched.range.end() + 1);
            tokio::select! {
                _ = cancel.cancelled() => return Err(Error::Interrupted),
                sent = out.send(fetched) => if sent.is_err() { return Err(Error::Interrupted) },
            }
        }
    }
    debug_assert!(ready.is_empty(), "every fetched range was sent");
    Ok(())
}

/// Fetches one block whose logs exceed the node's cap by narrowing the filter: halves of the address set,
/// then halves of the topic0 set, merged back into log order.
pub(crate) async fn fetch_block_by_filters(
    client: &Client,
    gate: &Gate,
    block: BlockNumber,
    selection: Selection,
) -> Result<Vec<Log>, Error> {
    let mut todo = vec![selection];
    let mut logs = Vec::new();
    while let Some(selection) = todo.pop() {
        let filter = LogFilter {
            blocks: Blocks::Range(BlockRange::single(block)),
            addresses: selection.addresses.clone(),
            topic0: selection.topic0.clone(),
        };
        match gate
            .run("eth_getLogs", OnSplit::Return, || client.get_logs(&filter))
            .await
        {
            Ok(part) => logs.extend(checked(BlockRange::single(block), &filter, part)?),
            Err(Error::Split(_)) => {
                let Selection { addresses, topic0 } = selection;
                if addresses.len() > 1 {
                    let (a, b) = addresses.split_at(addresses.len() / 2);
                    todo.push(Selection {
                        addresses: a.to_vec(),
                        topic0: topic0.clone(),
                    });
                    todo.push(Selection {
                        addresses: b.to_vec(),
                        topic0,
                    });
                } else if let Some(topics) = topic0.filter(|t| t.len() > 1) {
                    let (a, b) = topics.split_at(topics.len() / 2);
                    todo.push(Selection {
                        addresses: addresses.clone(),
                        topic0: Some(a.to_vec()),
                    });
                    todo.push(Selection {
                        addresses,
                        topic0: Some(b.to_vec()),
                    });
                } else {
                    let topic0 = selection_topic(&filter);
                    return Err(Error::BlockOverflow {
                        block,
                        address: addresses[0],
                        topic0,
                    });
                }
            }
            Err(err) => return Err(err),
        }
    }
    logs.sort_by_key(|log| log.log_index);
    logs.dedup_by_key(|log| log.log_index);
    Ok(logs)
}

fn selection_topic(filter: &LogFilter) -> String {
    match filter.topic0.as_deref() {
        Some([one]) => one.to_string(),
        _ => "any".into(),
    }
}

/// Refuses answers that cannot belong to the request (a backend bug would otherwise become a silent gap
/// or a foreign row), and puts the logs in `(block_number, log_index)` order.
fn checked(range: BlockRange, filter: &LogFilter, mut logs: Vec<Log>) -> Result<Vec<Log>, Error> {
    for log in &logs {
        if !range.contains(log.block_number) {
            return Err(Error::Inconsistent(format!(
                "log of block {} in an answer for {range}",
                log.block_number
            )));
        }
        if !filter.addresses.contains(&log.address) {
            return Err(Error::Inconsistent(format!(
                "log of {} in block {}, not a requested address",
                log.address, log.block_number
            )));
        }
    }
    if !logs.is_sorted_by_key(|log| (log.block_number, log.log_index)) {
        logs.sort_by_key(|log| (log.block_number, log.log_index));
    }
    Ok(logs)
}
