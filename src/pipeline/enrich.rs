//! Block timestamps for logs that arrive without one (`[sync] block_timestamps`): the node's `blockTimestamp`
//! is kept when it sends one; otherwise the headers of the blocks that have logs, and only those, are read
//! in JSON-RPC batches sized to the request rate ([`Node::headers`], through the same gate as every other
//! request), and each log takes its block's timestamp once the header's hash is the log's block hash.
//!
//! [`stamp`] works on any `&mut [Log]`: the backfill runs it as a stage of its own between fetching and
//! decoding, several ranges at once ([`stamp_stage`]), so header reads overlap with `eth_getLogs` and with
//! the commits instead of coming after them. Above finality the headers are read anyway: [`stamp_from`]
//! takes their timestamps, at no request. Nothing here decodes or writes.

use std::collections::HashMap;

use alloy_primitives::B256;
use tokio::sync::mpsc;

use crate::fetch::Fetched;
use crate::primitives::{BlockNumber, Log};
use crate::rpc::Header;

use tokio_util::task::AbortOnDropHandle;

use super::{Error, Node};

/// Which logs the database keeps ([`super::Job::stored`]).
pub(super) type Stored = std::sync::Arc<dyn Fn(&Log) -> bool + Send + Sync>;

/// Ranges whose headers are read at once in the backfill: enough to keep the gate busy while the decoder
/// and the writer work, few enough that the logs held stay within the fetch window's budget.
pub(super) const RANGES_STAMPED_AT_ONCE: usize = 4;

/// Fills `block_timestamp` of every log of `logs` that lacks one from its block's header: one header per
/// block with such logs, read in batches within the request rate. Logs that carry one already cost nothing.
///
/// # Errors
/// [`Error::Node`] when a header request fails for good; [`Error::NotYet`] when the node does not know a
/// block of the logs, or its header there has another hash (the block was replaced since the logs were
/// read: reading again later gives consistent answers); [`Error::Interrupted`].
pub(crate) async fn stamp(node: &Node, logs: &mut [Log]) -> Result<(), Error> {
    stamp_stored(node, logs, &|_: &Log| true).await
}

/// [`stamp`] for the logs that `stored` says the database keeps: the others (a log the node matched by
/// address and topic0 that no configured event takes, a `removed` one) are dropped by the decoder, and a
/// block with only such logs needs no header.
pub(super) async fn stamp_stored(
    node: &Node,
    logs: &mut [Log],
    stored: &(dyn Fn(&Log) -> bool + Sync),
) -> Result<(), Error> {
    let numbers = missing_blocks(logs, stored);
    if numbers.is_empty() {
        return Ok(());
    }
    node.tell_header_reads();
    let headers = node.headers(&numbers).await?;
    let found: Vec<(BlockNumber, Option<Header>)> = numbers.into_iter().zip(headers).collect();
    let stored_logs = logs.iter_mut().filter(|log| stored(log));
    stamp_from(stored_logs, found.iter().filter_map(|(_, h)| h.as_ref()))?;
    match found.iter().find(|(_, header)| header.is_none()) {
        Some((missing, _)) => Err(Error::NotYet(format!(
            "node {}: it does not know block {missing}, whose logs it returned (a lagging backend); run again later",
            node.display
        ))),
        None => Ok(()),
    }
}

/// The blocks, in order and once each, of the `stored` logs without a timestamp. Pure.
pub(super) fn missing_blocks(logs: &[Log], stored: impl Fn(&Log) -> bool) -> Vec<BlockNumber> {
    let mut numbers: Vec<BlockNumber> = logs
        .iter()
        .filter(|log| log.block_timestamp.is_none() && stored(log))
        .map(|log| log.block_number)
        .collect();
    numbers.sort_unstable();
    numbers.dedup();
    numbers
}

/// Fills the missing timestamps of `logs` from `headers` (near the head, the headers read anyway). Pure.
///
/// # Errors
/// [`Error::NotYet`] when a header of a log's block has another hash than the log.
pub(super) fn stamp_from<'l, 'h>(
    logs: impl IntoIterator<Item = &'l mut Log>,
    headers: impl IntoIterator<Item = &'h Header>,
) -> Result<(), Error> {
    let by_number: HashMap<BlockNumber, (B256, u64)> = headers
        .into_iter()
        .map(|h| (h.number, (h.hash, h.timestamp)))
        .collect();
    for log in logs.into_iter().filter(|l| l.block_timestamp.is_none()) {
        match by_number.get(&log.block_number) {
            Some(&(hash, timestamp)) if hash == log.block_hash => {
                log.block_timestamp = Some(timestamp)
            }
            Some(&(hash, _)) => {
                return Err(Error::NotYet(format!(
                    "block {} changed while it was read: its logs carry hash {} and its header {hash}; run again later",
                    log.block_number, log.block_hash
                )))
            }
            None => {}
        }
    }
    Ok(())
}

/// The backfill's stamping stage: ranges from `fetched` come out on `stamped` in the same order, their logs
/// stamped, up to [`RANGES_STAMPED_AT_ONCE`] ranges' header reads in flight. Ends when `fetched` closes,
/// when `stamped`'s receiver is gone, or at the first error.
///
/// # Errors
/// As [`stamp`].
pub(super) async fn stamp_stage(
    node: std::sync::Arc<Node>,
    stored: Stored,
    mut fetched: mpsc::Receiver<Fetched>,
    stamped: mpsc::Sender<Fetched>,
) -> Result<(), Error> {
    // Each range's header reads run as a task of their own, so they finish (and give back the client's
    // answer slot and connection) while this stage waits for the decoder. Left unpolled in a stream here,
    // a read holding the client's one answer slot stalled every other request of the process, and the
    // decoder's own requests (a factory's children filled in) waited for it forever.
    let mut pending: std::collections::VecDeque<AbortOnDropHandle<Result<Fetched, Error>>> =
        std::collections::VecDeque::new();
    let mut open = true;
    loop {
        while open && pending.len() < RANGES_STAMPED_AT_ONCE {
            let next = if pending.is_empty() {
                fetched.recv().await
            } else {
                match fetched.try_recv() {
                    Ok(range) => Some(range),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => None,
                }
            };
            let Some(mut range) = next else {
                open = false;
                break;
            };
            let (node, stored) = (node.clone(), stored.clone());
            pending.push_back(AbortOnDropHandle::new(tokio::spawn(
                crate::observe::chain::carry(async move {
                    stamp_stored(&node, &mut range.logs, &*stored)
                        .await
                        .map(|()| range)
                }),
            )));
        }
        let Some(first) = pending.pop_front() else {
            return Ok(()); // nothing pending and the fetcher is done
        };
        let range = super::joined(first.await)??;
        if stamped.send(range).await.is_err() {
            return Ok(()); // the decoder stopped; its error is the one to report
        }
    }
}

#[cfg(test)]
mod tests {
    use alloy_primitives::Bloom;

    use super::*;

    fn log(block: BlockNumber, log_index: u64, timestamp: Option<u64>) -> Log {
        Log {
            block_hash: B256::with_last_byte(block as u8),
            block_timestamp: timestamp,
            ..Log::blank(block, log_index)
        }
    }

    fn header(block: BlockNumber, hash_byte: u8) -> Header {
        Header {
            number: block,
            hash: B256::with_last_byte(hash_byte),
            parent_hash: B256::ZERO,
            timestamp: 1_000 + block * 12,
            logs_bloom: Bloom::ZERO,
        }
    }

    #[test]
    fn only_blocks_of_logs_without_a_timestamp_are_asked_for_once_each() {
        let logs = [
            log(5, 0, None),
            log(5, 1, None),
            log(7, 0, Some(9)),
            log(3, 0, None),
            log(9, 0, Some(9)),
        ];
        assert_eq!(missing_blocks(&logs, |_| true), [3, 5]);
        assert_eq!(missing_blocks(&logs, |l| l.block_number != 3), [5]);
        assert!(missing_blocks(&[log(1, 0, Some(1))], |_| true).is_empty());
    }

    #[test]
    fn headers_fill_missing_timestamps_and_keep_the_nodes() {
        let mut logs = [log(5, 0, None), log(5, 1, None), log(7, 0, Some(42))];
        stamp_from(&mut logs, &[header(5, 5), header(7, 7)]).unwrap();
        let stamps: Vec<_> = logs.iter().map(|l| l.block_timestamp).collect();
        assert_eq!(stamps, [Some(1_060), Some(1_060), Some(42)]);
    }

    #[test]
    fn a_header_of_another_block_at_that_height_is_refused() {
        let mut logs = [log(5, 0, None)];
        let err = stamp_from(&mut logs, &[header(5, 6)]).unwrap_err();
        assert!(matches!(err, Error::NotYet(_)), "{err}");
        assert_eq!(logs[0].block_timestamp, None);
    }
}
