//! Concurrent, bounded fetching of logs: drives the [`Planner`] with the node's answers and hands out
//! fetched ranges strictly in block order.
//!
//! At most `max_concurrency` requests are in flight (fewer for a while after a query timeout: a timeout is
//! a cost problem, not a density one), and a reorder buffer bounded in logs (`ready`: `max_concurrency`
//! target-sized ranges, requests and surveys in flight included) holds ranges that finished early, so
//! memory depends on that budget, never on the chain's length. Answers keep coming in while the writer is
//! busy, so sparse stretches are fetched ahead of it. Nothing here writes to a database or decides what a
//! log means.

mod access;
mod answer;
mod groups;
mod quarters;
mod ready;
mod receipts;
mod wide;

use std::sync::Arc;

use alloy_primitives::{Address, B256};
use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::node::{self, GateStats, OnSplit};
pub use access::Access;
use answer::checked;
pub use answer::{in_log_order, Conflict};
pub(crate) use groups::get_logs;
use groups::merge_answers;
pub use groups::{merge as merge_groups, Group};
pub(crate) use receipts::of_blocks as block_receipts;
use wide::get_chunked;
pub use wide::ADDRESSES_PER_REQUEST;

#[cfg(test)]
mod simulation;

use crate::planner::{Outcome, Planner, SurveyRequest, Tail, Verdict};
use crate::primitives::{BlockNumber, BlockRange, Log};
use crate::rpc::{self, Blocks, Class, LogFilter, SplitReason};

/// A range asked for in several requests (chunks of addresses, several filters) is sized by its largest
/// answer, so it may carry several requests' worth of logs; at most this many, since the log budget counts
/// a range in flight as one request's worth: memory stays within twice one request's worth per range.
const REQUESTS_OF_LOGS_PER_RANGE: usize = 2;

/// Why fetching stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The node asked for a narrower request (handled inside `fetch`; escapes only from [`crate::node::Gate::run`]).
    #[error("the node asked for a narrower request: {0}")]
    Split(#[source] rpc::Error),
    /// The node rejected the API key (every provider).
    #[error("{provider}: the node rejected the API key ({method}: {source})")]
    Rejected {
        /// The provider (boxed: every `Result` of the pipeline carries this error's size).
        provider: Box<str>,
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// An answer that retrying cannot change.
    #[error("{provider}: {method} failed: {source}")]
    Fatal {
        /// The provider (boxed: every `Result` of the pipeline carries this error's size).
        provider: Box<str>,
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// The node does not know a block the request named by hash: a reorg since the hash was read. The
    /// caller reads the chain again (a reorg signal), never the same request.
    #[error("{provider}: {method}: the node no longer knows the block asked for (a reorg since it was read): {source}")]
    UnknownBlock {
        /// The provider (boxed: every `Result` of the pipeline carries this error's size).
        provider: Box<str>,
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// Every attempt failed with a transient error, at every provider.
    #[error("{method} failed {attempts} times (node.max_retries, every provider); last, from {provider}: {source}")]
    Exhausted {
        /// The provider of the last answer.
        provider: Box<str>,
        /// The method.
        method: &'static str,
        /// Attempts made.
        attempts: u32,
        /// The last answer.
        #[source]
        source: rpc::Error,
    },
    /// One block holds more matching logs than the node returns at once, even for one address and one
    /// topic0, and its receipts cannot be read either.
    #[error("block {block} has more logs than the node returns at once for one address and topic0, and its receipts could not be read: {why} (use a node that serves eth_getBlockReceipts or eth_getTransactionReceipt)")]
    NoReceipts {
        /// The block.
        block: BlockNumber,
        /// The methods tried and what they answered.
        why: String,
    },
    /// The node answered logs outside the requested range, or of another address.
    #[error("the node answered a log that does not match the request: {0}")]
    Inconsistent(String),
    /// The node answered two different logs at one position (a log repeated whole is kept once instead).
    /// Boxed: it names both block hashes, and every `Result` of this module would carry its size.
    #[error(transparent)]
    Conflict(Box<Conflict>),
    /// A batch was larger than any provider admits (a bug of the caller, which sends it in parts).
    #[error("internal error (a bug in logslice; please report it): {0}")]
    Oversized(String),
    /// Shutdown was requested.
    #[error("interrupted")]
    Interrupted,
    /// A task panicked: a bug in logslice, reported with its message instead of a backtrace or a hang.
    #[error("internal error (a bug in logslice; please report it): {0}")]
    Panicked(String),
    /// Fetching ran out of work with blocks of the plan not sent on: the planner still held ranges it never
    /// handed out or never saw done, or the reorder buffer still held fetched ranges. A bug in logslice
    /// (exit 70): the job fails, so no checkpoint moves past those blocks.
    #[error(
        "internal error (a bug in logslice; please report it): fetching stopped with blocks left over \
         (not fetched: {}; fetched but not sent on: {}); nothing was committed past them",
        ranges_text(.unfinished),
        ranges_text(.unsent)
    )]
    Unfinished {
        /// The planner's ranges not done ([`Planner::unfinished`]).
        unfinished: Vec<BlockRange>,
        /// Fetched ranges left in the reorder buffer.
        unsent: Vec<BlockRange>,
    },
}

impl From<node::Error> for Error {
    fn from(err: node::Error) -> Self {
        match err {
            node::Error::Split { source, .. } => Error::Split(source),
            node::Error::Rejected {
                provider,
                method,
                source,
            } => Error::Rejected {
                provider: provider.into(),
                method,
                source,
            },
            node::Error::Fatal {
                provider,
                method,
                source,
            } => Error::Fatal {
                provider: provider.into(),
                method,
                source,
            },
            node::Error::UnknownBlock {
                provider,
                method,
                source,
            } => Error::UnknownBlock {
                provider: provider.into(),
                method,
                source,
            },
            node::Error::Exhausted {
                provider,
                method,
                attempts,
                source,
            } => Error::Exhausted {
                provider: provider.into(),
                method,
                attempts,
                source,
            },
            err @ node::Error::Oversized { .. } => Error::Oversized(err.to_string()),
            node::Error::Interrupted => Error::Interrupted,
        }
    }
}

/// `ranges` for a message: `[5, 9], [20, 29]`, or `none`.
fn ranges_text(ranges: &[BlockRange]) -> String {
    if ranges.is_empty() {
        return "none".into();
    }
    let texts: Vec<String> = ranges.iter().map(BlockRange::to_string).collect();
    texts.join(", ")
}

impl From<Conflict> for Error {
    fn from(conflict: Conflict) -> Self {
        Self::Conflict(Box::new(conflict))
    }
}

/// What a task that ended with `err` said: its panic message, or that it was cancelled.
pub(crate) fn join_failure(err: tokio::task::JoinError) -> String {
    if !err.is_panic() {
        return "the task was cancelled".into();
    }
    let payload = err.into_panic();
    match (
        payload.downcast_ref::<&str>(),
        payload.downcast_ref::<String>(),
    ) {
        (Some(message), _) => format!("a task panicked: {message}"),
        (_, Some(message)) => format!("a task panicked: {message}"),
        _ => "a task panicked".into(),
    }
}

/// Which logs to ask for over a range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// One `eth_getLogs` filter each (see `groups`): a single group unless contracts filter their events'
    /// indexed parameters.
    pub groups: Vec<Group>,
    /// Every (address, topic0) of a selected contract's non-anonymous, unfiltered events: the narrow
    /// filters a density survey may probe with (even when a group's topic0 is `None`).
    pub pairs: Vec<(Address, B256)>,
}

/// A range whose logs are all fetched, in `(block_number, log_index)` order.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The range.
    pub range: BlockRange,
    /// Its logs.
    pub logs: Vec<Log>,
    /// Blocks of the range whose logs were read from their receipts (over the cap for one address and
    /// topic0), in block order: the database counts them (`logslice status`).
    pub receipt_blocks: Vec<BlockNumber>,
}

impl Fetched {
    /// A range whose logs `eth_getLogs` answered.
    pub fn from_get_logs(range: BlockRange, logs: Vec<Log>) -> Self {
        Self {
            range,
            logs,
            receipt_blocks: Vec::new(),
        }
    }
}

/// One finished request of [`run`].
enum Task {
    /// A range of logs, with what each of its groups answered.
    Range(BlockRange, groups::Answered),
    /// A refused range asked again by addresses ([`quarters`]). Its mix is not counted either: the range
    /// holds an excess the planner did not foresee.
    ByAddresses(BlockRange, Result<Vec<Log>, Error>),
    /// One block over the cap, fetched by narrower filters. Its mix of logs is not counted towards a probe's
    /// share: such a block is an outlier by definition (on the simulated chain every event is equally
    /// likely in one, and counting it skewed the share by a fifth).
    Overflow(BlockRange, Result<Fetched, Error>),
    /// A density survey: the block numbers of the probe's logs.
    Survey(SurveyRequest, Result<Vec<BlockNumber>, Error>),
}

/// How the answer for a range was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    /// Whole, each group in one request (or chunks of addresses); the most logs one request answered.
    Whole { largest: usize },
    /// By address halves and quarters after a refusal ([`quarters`]).
    ByAddresses,
    /// One block over the cap, by narrower filters.
    BlockByFilters,
}

/// A narrow filter a survey may use: one address of a group with that group's topics, or with one topic0
/// of an unfiltered event. A survey asks for exactly the logs it counts in full answers, filtered events
/// included (they are often the narrowest probes there are).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    filter: Group,
}

/// The probes a selection offers: each address of each group (with the group's topics), and each
/// (address, topic0) pair of unfiltered events.
fn probes(selection: &Selection) -> Vec<Probe> {
    let addresses = selection.groups.iter().flat_map(|group| {
        group.addresses.iter().map(|&address| Group {
            addresses: vec![address],
            ..group.clone()
        })
    });
    let pairs = selection
        .pairs
        .iter()
        .map(|&(address, topic0)| Group::unfiltered(vec![address], Some(vec![topic0])));
    let mut probes: Vec<Probe> = Vec::new();
    for filter in addresses.chain(pairs) {
        if !probes.iter().any(|p| p.filter == filter) {
            probes.push(Probe { filter });
        }
    }
    probes
}

/// How many of `logs` each probe matches.
fn probe_counts(probes: &[Probe], logs: &[Log]) -> Vec<u64> {
    let filters: Vec<LogFilter> = probes
        .iter()
        .map(|p| p.filter.filter(Blocks::Range(BlockRange::single(0))))
        .collect();
    filters
        .iter()
        .map(|filter| {
            logs.iter()
                .filter(|log| groups::admits(filter, log))
                .count() as u64
        })
        .collect()
}

/// What the node's refusal of a range means to the planner.
fn outcome_of(err: &rpc::Error) -> Outcome {
    match err.class() {
        Class::Split {
            reason: SplitReason::Timeout,
            ..
        } => Outcome::Timeout,
        Class::Split {
            reason: SplitReason::RangeTooWide,
            max_blocks,
            ..
        } => Outcome::RangeTooWide { max_blocks },
        Class::Split { suggested, .. } => Outcome::TooManyResults { suggested },
        _ => unreachable!("Error::Split carries a split class"),
    }
}

/// Fetches logs of the ranges `planner` hands out and sends them to `out` in block order, running the
/// density surveys the planner asks for along the way.
///
/// # Errors
/// Any [`Error`] that stops fetching; [`Error::Interrupted`] on cancellation.
pub async fn run(
    access: Arc<Access>,
    mut planner: Planner,
    select: Arc<dyn Fn(BlockRange) -> Selection + Send + Sync>,
    out: mpsc::Sender<Fetched>,
    cancel: CancellationToken,
) -> Result<(), Error> {
    let max_concurrency = access.gate.max_concurrency();
    // What is fetched and not yet sent is bounded in logs, not in ranges: `max_concurrency` ranges of the
    // target size, counting each request in flight at the target, so with nothing waiting every worker can
    // be busy. Where the writer is the bottleneck (dense stretches) that is all it needs (a larger budget
    // only sits in memory: +2 ranges cost 8 MB of peak at the same speed, docs/bench-log/); where logs are
    // sparse, many small ranges fit, so the fetcher runs ahead through them while the writer is busy,
    // instead of idling with the network once it catches up.
    let target = usize::try_from(planner.target_logs()).unwrap_or(usize::MAX);
    let mut allowed = max_concurrency;
    let mut successes_since_ease = 0usize;
    let mut in_flight: JoinSet<Task> = JoinSet::new();
    let mut ready = ready::Ready::new(max_concurrency, target);
    // Groups' answers for ranges another group's refusal split, until the pieces are fetched.
    let mut kept = groups::Kept::default();
    let mut tried = quarters::Tried::default();
    // The selection is fixed from the sampling start on: surveys probe it.
    let sampling_selection = select(BlockRange::single(planner.sampling_start()));
    let probes = probes(&sampling_selection);

    loop {
        // Surveys first, all that are due (a spot survey and the lookahead can be due together): a range
        // cut before the lookahead survey is in flight would be cut blind.
        while in_flight.len() < allowed && ready.has_room(kept.n_logs(), in_flight.len()) {
            let Some(request) = planner.next_survey() else {
                break;
            };
            let probe = &probes[request.probe];
            let filter = probe.filter.filter(Blocks::Range(request.range));
            let access = access.clone();
            in_flight.spawn(crate::observe::chain::carry(async move {
                let logs = access.get_logs(&filter).await;
                let blocks = logs
                    .and_then(|logs| checked(&access.gate.stats, request.range, &filter, logs))
                    .map(|logs| logs.iter().map(|log| log.block_number).collect());
                Task::Survey(request, blocks)
            }));
        }
        // A split piece the ranges waiting wait for goes out whatever the budget (`ready::Ready`).
        while in_flight.len() < allowed
            && (planner
                .first_piece_start()
                .is_some_and(|start| ready.waits_for(start))
                || ready.has_room(kept.n_logs(), in_flight.len()))
        {
            let Some(range) = planner.next_range() else {
                break;
            };
            ready.handed_out(range.start());
            let (access, selection) = (access.clone(), select(range));
            if planner.expects_overflow(range) {
                // The survey says this block alone is over the cap: skip the request bound to be refused.
                spawn_by_filters(&mut in_flight, access, range, selection);
                continue;
            }
            let prefilled = kept.for_range(&selection, range);
            in_flight.spawn(crate::observe::chain::carry(async move {
                let answered = groups::get_range_logs(&access, range, &selection, prefilled).await;
                Task::Range(range, answered)
            }));
        }
        // Send the next range in order as soon as the writer has room, and meanwhile keep taking answers in
        // (and so handing out requests): the fetcher never waits for the writer while it has budget left.
        let sendable = ready.sendable();
        if in_flight.is_empty() && !sendable {
            break; // nothing in flight, nothing to send and nothing left to plan
        }
        let joined = tokio::select! {
            _ = cancel.cancelled() => return Err(Error::Interrupted),
            place = out.reserve(), if sendable => {
                let Ok(place) = place else { return Err(Error::Interrupted) };
                let fetched = ready.take_next().expect("sendable");
                kept.forget_below(fetched.range.end() + 1);
                tried.forget_below(fetched.range.end() + 1);
                place.send(fetched);
                continue;
            }
            Some(joined) = in_flight.join_next() => joined,
        };
        let joined = joined.map_err(|err| Error::Panicked(join_failure(err)))?;
        let (range, result, asked) = match joined {
            Task::Survey(request, result) => {
                match result {
                    Ok(blocks) => {
                        tracing::debug!(range = %request.range, hits = blocks.len(), "surveyed");
                        planner.report_survey(request, Ok(&blocks));
                    }
                    Err(Error::Split(err)) => {
                        tracing::debug!(range = %request.range, cause = %err, "survey refused");
                        planner.report_survey(request, Err(outcome_of(&err)));
                    }
                    Err(err) => return Err(err),
                }
                continue;
            }
            Task::Range(range, answered) => {
                if matches!(answered.logs, Err(Error::Split(_))) {
                    kept.keep(range, answered.by_group);
                }
                let fetched = answered
                    .logs
                    .map(|logs| Fetched::from_get_logs(range, logs));
                (
                    range,
                    fetched,
                    Asked::Whole {
                        largest: answered.largest,
                    },
                )
            }
            Task::ByAddresses(range, logs) => {
                if logs.is_err() {
                    tried.concentrated(range);
                }
                let fetched = logs.map(|logs| Fetched::from_get_logs(range, logs));
                (range, fetched, Asked::ByAddresses)
            }
            Task::Overflow(range, result) => (range, result, Asked::BlockByFilters),
        };
        match result {
            Ok(fetched) => {
                let n_logs = fetched.logs.len();
                let outcome = match asked {
                    // The planner aims each request under the cap: a range asked for in chunks of
                    // addresses (or several filters) is judged by its largest answer, so it may carry
                    // their sum (up to a bound, for memory).
                    Asked::Whole { largest } => {
                        let load = largest.max(n_logs.div_ceil(REQUESTS_OF_LOGS_PER_RANGE)) as u64;
                        if range.start() >= planner.sampling_start() {
                            let counts = probe_counts(&probes, &fetched.logs);
                            planner.observe_mix(range, load, &counts);
                        }
                        let blocks = fetched.logs.iter().map(|log| log.block_number).collect();
                        if let Some(tail) = Tail::of(range, blocks) {
                            planner.observe_tail(range, tail);
                        }
                        Outcome::Logs { n: load }
                    }
                    // Not counted towards the probe's mix: outliers by definition.
                    Asked::ByAddresses => quarters::outcome(&fetched.logs),
                    Asked::BlockByFilters => Outcome::Logs { n: n_logs as u64 },
                };
                planner.report(range, outcome);
                ready.insert(fetched);
                tracing::debug!(
                    %range,
                    n = n_logs,
                    next_span = planner.span(),
                    ready_logs = ready.logs(),
                    in_flight = in_flight.len(),
                    "fetched"
                );
                successes_since_ease += 1;
                if allowed < max_concurrency && successes_since_ease >= 8 {
                    allowed += 1;
                    successes_since_ease = 0;
                }
            }
            Err(Error::Split(err)) => {
                let outcome = outcome_of(&err);
                if outcome == Outcome::Timeout {
                    allowed = (allowed / 2).max(1);
                    successes_since_ease = 0;
                }
                let whole = matches!(asked, Asked::Whole { .. });
                let (access, selection) = (access.clone(), select(range));
                if let Some(halves) = tried.due(&planner, range, whole, outcome, &selection) {
                    tracing::debug!(%range, cause = %err, "asking again by addresses");
                    quarters::spawn(&mut in_flight, access, range, halves);
                    continue;
                }
                tracing::debug!(%range, cause = %err, "splitting");
                if planner.report(range, outcome) == Verdict::SingleBlockOverflow {
                    spawn_by_filters(&mut in_flight, access, range, selection);
                }
            }
            Err(err) => return Err(err),
        }
    }
    // Checked in every build: the caller moves its checkpoints to the plan's end when this returns Ok, so a
    // range left here would be a silent gap.
    finished(&planner, &ready)
}

/// `Ok` when fetching ended with every block of the plan done and sent on; otherwise
/// [`Error::Unfinished`] naming what is left.
fn finished(planner: &Planner, ready: &ready::Ready) -> Result<(), Error> {
    let unfinished = planner.unfinished();
    let unsent = ready.waiting();
    if unfinished.is_empty() && unsent.is_empty() {
        return Ok(());
    }
    Err(Error::Unfinished { unfinished, unsent })
}

/// Fetches the single block `range` by halves of `selection` in the background: the whole selection was
/// refused, or the survey shows it would be.
fn spawn_by_filters(
    in_flight: &mut JoinSet<Task>,
    access: Arc<Access>,
    range: BlockRange,
    selection: Selection,
) {
    in_flight.spawn(crate::observe::chain::carry(async move {
        let logs =
            fetch_block_by_filters(&access, range.start(), selection, FirstRequest::Halves).await;
        Task::Overflow(range, logs)
    }));
}

/// Where `fetch_block_by_filters` begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstRequest {
    /// With the whole selection: the block may well fit.
    Whole,
    /// With its halves: the whole selection was refused already, or is expected to be.
    Halves,
}

/// Fetches one block whose logs exceed the node's cap by narrowing the filter of each group: halves of the
/// address set, then halves of the topic0 set, merged back into log order. The narrower requests run concurrently (each
/// through the gate): every later range waits for this block to be committed in order, so its latency is
/// the whole pipeline's. The answer is the block as a [`Fetched`] range, naming it in `receipt_blocks` when
/// its receipts were read.
///
/// # Errors
/// [`Error::NoReceipts`] when one address and one topic0 are still over the cap and the block's receipts
/// cannot be read (`fetch::receipts`); any other [`Error`].
pub(crate) async fn fetch_block_by_filters(
    access: &Access,
    block: BlockNumber,
    selection: Selection,
    first: FirstRequest,
) -> Result<Fetched, Error> {
    let request = |group: Group| async move {
        let filter = group.filter(Blocks::Range(BlockRange::single(block)));
        let answer = get_chunked(access, &filter).await;
        (group, filter, answer)
    };
    if first == FirstRequest::Halves && access.receipts_served.block_receipts() {
        // Over the cap for the whole selection, and the node serves a block's receipts: two requests (its
        // transactions, its receipts) read it, where halving the filter takes two or more, and a block over
        // the cap for one address takes several refusals before it comes to the receipts anyway.
        tracing::debug!(block, "over the cap: reading the block's receipts");
        let logs = receipts::read_block(access, block, &selection).await?;
        return Ok(Fetched {
            range: BlockRange::single(block),
            logs,
            receipt_blocks: vec![block],
        });
    }
    let whole = selection.clone();
    let mut pending = FuturesUnordered::new();
    for group in selection.groups {
        match first {
            FirstRequest::Whole => pending.push(request(group)),
            FirstRequest::Halves => match group.clone().halves() {
                Some((a, b)) => pending.extend([request(a), request(b)]),
                None => pending.push(request(group)),
            },
        }
    }
    let mut parts = Vec::new();
    while let Some((group, filter, answer)) = pending.next().await {
        match answer {
            Ok(part) => parts.push(checked(
                &access.gate.stats,
                BlockRange::single(block),
                &filter,
                part.logs,
            )?),
            Err(Error::Split(_)) => {
                let address = group.addresses[0];
                let Some((a, b)) = group.halves() else {
                    // One address and one topic0 over the cap: the block's receipts hold every log.
                    tracing::info!(
                        block,
                        %address,
                        topic0 = %selection_topic(&filter),
                        "over the cap for one address and topic0: reading the block's receipts"
                    );
                    // The other requests go first: one holding an answer unpolled would hold the
                    // client's answer slot for good.
                    drop(pending);
                    let logs = receipts::read_block(access, block, &whole).await?;
                    return Ok(Fetched {
                        range: BlockRange::single(block),
                        logs,
                        receipt_blocks: vec![block],
                    });
                };
                pending.extend([request(a), request(b)]);
            }
            Err(err) => return Err(err),
        }
    }
    Ok(Fetched::from_get_logs(
        BlockRange::single(block),
        merge_answers(parts)?,
    ))
}

fn selection_topic(filter: &LogFilter) -> String {
    match filter.topic0.as_deref() {
        Some([one]) => one.to_string(),
        _ => "any".into(),
    }
}
