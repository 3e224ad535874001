//! What one `eth_getLogs` answer must be before anything uses it: logs of the requested blocks, addresses
//! and topics, in `(block_number, log_index)` order, each once.
//!
//! A node may deliver a log twice: in one answer (a replica or proxy repeating a range) or in two answers
//! whose filters overlap (filter groups, a factory child's logs filled in later). A repeat is the same log
//! (same block hash, log index and content) and is kept once, here, so the sinks never see it and both
//! backends store it once. Two *different* logs claiming one `(block_number, log_index)` are not a repeat but
//! data that cannot be right: [`Conflict`], exit 65 naming the block. An answer that does not match its
//! filter is refused, never trimmed. Deciding what a log means, or whether a block was reorganised, is not
//! done here.

use std::sync::atomic::Ordering::Relaxed;

use alloy_primitives::{Address, B256};

use crate::primitives::{BlockNumber, BlockRange, Log};
use crate::rpc::LogFilter;

use super::groups::{admits, topics_admitted};
use super::{Error, GateStats};

/// Two different logs at one `(block_number, log_index)`: the node's data cannot be right. Not a transient
/// inconsistency that reading again would mend, except where the two come from answers read at different
/// times with different block hashes (a reorg between them): [`Conflict::of_two_blocks`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the node answered two different logs at block {block} log index {log_index}{}",
    describe(.hashes)
)]
pub struct Conflict {
    /// The block number.
    pub block: BlockNumber,
    /// The position in the block.
    pub log_index: u64,
    /// The block hashes the two logs carry, first the one kept in order.
    pub hashes: [B256; 2],
}

impl Conflict {
    /// Whether the two logs are of two versions of the block (their hashes differ): near the head, answers
    /// read at different times across a reorg; the caller may read again instead.
    pub fn of_two_blocks(&self) -> bool {
        self.hashes[0] != self.hashes[1]
    }
}

fn describe(hashes: &[B256; 2]) -> String {
    if hashes[0] == hashes[1] {
        format!(" (both of block hash {})", hashes[0])
    } else {
        format!(" (one of block hash {}, one of {})", hashes[0], hashes[1])
    }
}

/// Whether `later` is a repeat of `kept`, a log at the same `(block_number, log_index)`: same block hash,
/// transaction, address, topics, data and `removed` flag. A timestamp one copy lacks is no difference (one
/// provider sends `blockTimestamp`, another does not).
fn is_repeat(kept: &Log, later: &Log) -> bool {
    kept.block_hash == later.block_hash
        && kept.transaction_hash == later.transaction_hash
        && kept.transaction_index == later.transaction_index
        && kept.address == later.address
        && kept.topics == later.topics
        && kept.data == later.data
        && kept.removed == later.removed
        && (kept.block_timestamp.is_none()
            || later.block_timestamp.is_none()
            || kept.block_timestamp == later.block_timestamp)
}

/// The order answers are kept in: `(block_number, log_index)`, and at one position the log before the
/// notices of logs `removed` from orphaned blocks (a stale replica serves those beside the canonical log,
/// with their own block hash), so that copies of one log or one notice are neighbours.
fn order_key(log: &Log) -> (BlockNumber, u64, bool, B256) {
    (log.block_number, log.log_index, log.removed, log.block_hash)
}

/// Puts `logs` in `(block_number, log_index)` order (a stable sort: of equal logs the first stays first) and
/// drops every log that repeats the one before it; returns how many were dropped. A kept log without a
/// timestamp takes its repeat's. A log flagged `removed` is a notice about an orphaned block's log, keyed by
/// its block hash: it conflicts with no log at its position. Pure.
///
/// # Errors
/// [`Conflict`] for two different logs (not `removed`) at one `(block_number, log_index)`; `logs` is then
/// sorted, with nothing dropped.
pub fn in_log_order(logs: &mut Vec<Log>) -> Result<usize, Conflict> {
    if !logs.is_sorted_by_key(order_key) {
        logs.sort_by_key(order_key);
    }
    let same_position =
        |a: &Log, b: &Log| (a.block_number, a.log_index) == (b.block_number, b.log_index);
    // The logs at one position are neighbours, before its notices: pairwise equal neighbours are all equal.
    let conflicting = |pair: &&[Log]| {
        let (kept, later) = (&pair[0], &pair[1]);
        !kept.removed && !later.removed && same_position(kept, later) && !is_repeat(kept, later)
    };
    if let Some(pair) = logs.windows(2).find(conflicting) {
        return Err(Conflict {
            block: pair[0].block_number,
            log_index: pair[0].log_index,
            hashes: [pair[0].block_hash, pair[1].block_hash],
        });
    }
    let before = logs.len();
    logs.dedup_by(|later, kept| {
        let repeat = order_key(kept) == order_key(later) && is_repeat(kept, later);
        if repeat && kept.block_timestamp.is_none() {
            kept.block_timestamp = later.block_timestamp;
        }
        repeat
    });
    Ok(before - logs.len())
}

/// Refuses an answer for `range` that cannot belong to the request (a backend bug would otherwise become a
/// silent gap or a foreign row), puts its logs in order and keeps each once ([`in_log_order`], counting the
/// repeats in `stats`).
pub(super) fn checked(
    stats: &GateStats,
    range: BlockRange,
    filter: &LogFilter,
    mut logs: Vec<Log>,
) -> Result<Vec<Log>, Error> {
    // Thousands of factory children make a list scan per log too slow.
    let many: Option<std::collections::HashSet<&Address>> =
        (filter.addresses.len() > 16).then(|| filter.addresses.iter().collect());
    let requested = |address: &Address| match &many {
        Some(set) => set.contains(address),
        None => filter.addresses.contains(address),
    };
    for log in &logs {
        if !range.contains(log.block_number) {
            return Err(Error::Inconsistent(format!(
                "log of block {} in an answer for {range}",
                log.block_number
            )));
        }
        if !requested(&log.address) {
            return Err(Error::Inconsistent(format!(
                "log of {} in block {}, not a requested address",
                log.address, log.block_number
            )));
        }
        // The address is checked above, by set when the list is long: only the topics are left.
        if !topics_admitted(filter, log) {
            return Err(Error::Inconsistent(unmatched(log)));
        }
    }
    once_each(stats, &mut logs)?;
    Ok(logs)
}

/// [`checked`] for an answer by block hash: logs the filter did not ask for are refused (see [`admits`]).
pub(super) fn checked_topics(
    stats: &GateStats,
    filter: &LogFilter,
    mut logs: Vec<Log>,
) -> Result<Vec<Log>, Error> {
    if let Some(log) = logs.iter().find(|log| !admits(filter, log)) {
        return Err(Error::Inconsistent(unmatched(log)));
    }
    once_each(stats, &mut logs)?;
    Ok(logs)
}

fn unmatched(log: &Log) -> String {
    format!(
        "log {} of block {} (address {}) does not match the filter it was asked with",
        log.log_index, log.block_number, log.address
    )
}

/// [`in_log_order`] on one answer, its repeats counted (`status` of the run, a metric) and said once per
/// answer; the first of a run is a warning, since a node that repeats logs is a node to look at.
fn once_each(stats: &GateStats, logs: &mut Vec<Log>) -> Result<(), Error> {
    let n_repeats = in_log_order(logs)?;
    if n_repeats == 0 {
        return Ok(());
    }
    let first_block = logs.first().map_or(0, |log| log.block_number);
    crate::observe::record_repeated_logs(n_repeats as u64);
    if stats.repeated_logs.fetch_add(n_repeats as u64, Relaxed) == 0 {
        tracing::warn!(
            n_repeats,
            first_block,
            "the node delivered logs twice in one answer; each is kept once"
        );
    } else {
        tracing::debug!(n_repeats, first_block, "repeated logs dropped");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
