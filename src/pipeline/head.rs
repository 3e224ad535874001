//! Reading the blocks above finality from the node: their headers, the hash of the block before them, and
//! their logs, checked against each other. Nothing here touches the database, so the read can run while the
//! backfill below finality is still committing; the caller compares it with what the database holds.

use std::collections::HashMap;
use std::sync::Arc;

use alloy_primitives::B256;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::fetch::{self, Fetched, Selection};
use crate::follow;
use crate::planner::Planner;
use crate::primitives::{BlockNumber, BlockRange, Log, LogKey};
use crate::rpc;

use super::{Error, Node};

/// Headers asked for in one JSON-RPC batch: geth takes up to 1,000 calls in one; a batch of the 64 blocks
/// above `finalized` replaced 64 requests with one.
const HEADERS_PER_BATCH: u64 = 100;

/// What a range is fetched with, asked afresh for each request (children are found while fetching).
pub(super) type Selector = Arc<dyn Fn(BlockRange) -> Selection + Send + Sync>;

/// What the node said about a span of blocks above finality.
pub(super) struct HeadRead {
    /// The blocks asked for.
    pub span: BlockRange,
    /// The node's hash of the block before the span: `None` at genesis or when the node does not know it.
    pub before: Option<B256>,
    /// Headers from the span's start, in order, up to the first block the node does not know.
    pub headers: Vec<rpc::Header>,
    /// The logs of those blocks, or why they must be read again.
    pub logs: Result<HeadLogs, String>,
}

/// The logs of the blocks read, split by the node's `removed` flag.
#[derive(Default)]
pub(super) struct HeadLogs {
    /// Logs of the headers' blocks, each carrying its header's hash.
    pub kept: Vec<Log>,
    /// Logs the node reported `removed: true`.
    pub removed: Vec<LogKey>,
    /// Blocks whose logs were read from their receipts.
    pub receipt_blocks: Vec<BlockNumber>,
}

/// Reads `span`: the header of the block before it in the same request as the span's first headers, then
/// the logs of the blocks the node knows, committed only if their hashes are the headers' and no block
/// whose bloom promises a log came back empty. `planner` cuts the span when one request cannot carry it.
///
/// # Errors
/// [`Error::Node`] when a request fails for good.
pub(super) async fn read(
    node: Arc<Node>,
    planner: impl FnOnce(BlockRange) -> Planner,
    selector: Selector,
    interests: Vec<follow::Interest>,
    span: BlockRange,
) -> Result<HeadRead, Error> {
    let (before, headers) = read_headers(&node, span).await?;
    let logs = match headers.last() {
        None => Ok(HeadLogs::default()),
        Some(last) => {
            let range =
                BlockRange::new(span.start(), last.number).expect("headers start at the span");
            match fetch_logs(&node, planner(range), &selector, range).await {
                Ok(fetched) => {
                    check_logs(&node, fetched, &selector(range), &interests, &headers).await?
                }
                Err(err) => Err(read_across_a_reorg(&err).ok_or(err)?),
            }
        }
    };
    Ok(HeadRead {
        span,
        before,
        headers,
        logs,
    })
}

/// Why `err` means reading again rather than stopping: two different logs at one position that carry two
/// block hashes came from answers read on either side of a reorg (which headers then tell apart). Below
/// finality the same is a finalized block that changed, and stops the job (exit 65).
pub(super) fn read_across_a_reorg(err: &Error) -> Option<String> {
    match err {
        Error::Node {
            source: fetch::Error::Conflict(conflict),
            ..
        } if conflict.of_two_blocks() => Some(conflict.to_string()),
        _ => None,
    }
}

/// The logs of `range`: one request, which near the head usually carries them all; when the node refuses it
/// (a dense stretch), the range is planned like any other, never walked block by block. The answer is the
/// logs of the whole range, in the order they arrived, with the blocks read from their receipts.
pub(super) async fn fetch_logs(
    node: &Arc<Node>,
    planner: Planner,
    selector: &Selector,
    range: BlockRange,
) -> Result<Fetched, Error> {
    let selection = selector(range);
    match node.get_logs(rpc::Blocks::Range(range), &selection).await {
        Ok(logs) => return Ok(Fetched::from_get_logs(range, logs)),
        Err(fetch::Error::Split(_)) => {}
        Err(err) => return Err(node.error()(err)),
    }
    // At most the reorg window's logs: held until they are checked against the headers.
    let (tx, mut rx) = mpsc::channel::<Fetched>(4);
    let fetching = fetch::run(
        node.access.clone(),
        planner,
        selector.clone(),
        tx,
        CancellationToken::new(),
    );
    let collecting = async {
        let mut all = Fetched::from_get_logs(range, Vec::new());
        while let Some(fetched) = rx.recv().await {
            all.logs.extend(fetched.logs);
            all.receipt_blocks.extend(fetched.receipt_blocks);
        }
        all
    };
    let (fetched, all) = tokio::join!(fetching, collecting);
    fetched.map_err(node.error())?;
    Ok(all)
}

/// The hash of the block before `span` and the span's headers, in batches, up to the first block the node
/// does not have (a lagging replica, or a head that went backwards): never past it.
async fn read_headers(
    node: &Node,
    span: BlockRange,
) -> Result<(Option<B256>, Vec<rpc::Header>), Error> {
    let mut before = None;
    let mut headers = Vec::new();
    // The block before the span rides in the first batch.
    let mut next = span.start().saturating_sub(1);
    while next <= span.end() {
        let chunk_end = span.end().min(next + HEADERS_PER_BATCH - 1);
        let numbers: Vec<BlockNumber> = (next..=chunk_end).collect();
        for (&n, header) in numbers.iter().zip(node.headers(&numbers).await?) {
            let header = header.filter(|h| h.number == n);
            if n < span.start() {
                before = header.map(|h| h.hash);
                continue;
            }
            match header {
                Some(h) => headers.push(h),
                None => return Ok((before, headers)),
            }
        }
        next = chunk_end + 1;
    }
    Ok((before, headers))
}

/// Checks the logs of the blocks whose headers are `headers`: `Err` with the reason when the answers do
/// not agree with the headers.
async fn check_logs(
    node: &Node,
    fetched: Fetched,
    selection: &Selection,
    interests: &[follow::Interest],
    headers: &[rpc::Header],
) -> Result<Result<HeadLogs, String>, Error> {
    let hash_of: HashMap<BlockNumber, B256> = headers.iter().map(|h| (h.number, h.hash)).collect();
    let mut read = HeadLogs {
        receipt_blocks: fetched.receipt_blocks,
        ..HeadLogs::default()
    };
    for log in fetched.logs {
        if log.removed {
            read.removed.push(log.key());
            continue;
        }
        if hash_of.get(&log.block_number) != Some(&log.block_hash) {
            return Ok(Err(format!(
                "a log of block {} carries hash {}, not the header's",
                log.block_number, log.block_hash
            )));
        }
        read.kept.push(log);
    }
    let mut with_logs: Vec<BlockNumber> = read.kept.iter().map(|l| l.block_number).collect();
    with_logs.dedup();
    for suspect in follow::suspicious_empty_blocks(headers, &with_logs, interests) {
        // Ask again for exactly that block by hash; if logs appear, the first answer was stale.
        let again = match node
            .get_logs(rpc::Blocks::Hash(hash_of[&suspect]), selection)
            .await
        {
            Ok(again) => again,
            // The hash was reorged away since the headers were read: read the chain again, which finds
            // the reorg and rolls back to the common ancestor.
            Err(fetch::Error::UnknownBlock { .. }) => {
                return Ok(Err(format!(
                    "block {suspect}'s hash {} is no longer the node's (a reorg under the read)",
                    hash_of[&suspect]
                )))
            }
            Err(err) => return Err(node.error()(err)),
        };
        if again.iter().any(|l| !l.removed) {
            return Ok(Err(format!(
                "block {suspect} came back empty although its bloom says it has logs"
            )));
        }
    }
    Ok(Ok(read))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conflict(hashes: [B256; 2]) -> Error {
        Error::Node {
            node: "sim://".into(),
            source: fetch::Conflict {
                block: 7,
                log_index: 3,
                hashes,
            }
            .into(),
        }
    }

    /// Two versions of one block in the answers (a reorg between them) are read again above finality; two
    /// logs of one block hash at one position are the node's error, and so is anything else.
    #[test]
    fn only_a_conflict_of_two_block_hashes_is_read_again() {
        let (a, b) = (B256::repeat_byte(1), B256::repeat_byte(2));
        let why = read_across_a_reorg(&conflict([a, b])).expect("read again");
        assert!(why.contains("block 7 log index 3"), "{why}");
        assert_eq!(read_across_a_reorg(&conflict([a, a])), None);
        assert_eq!(read_across_a_reorg(&Error::NodeData("x".into())), None);
    }
}
