//! Reading the blocks above finality from the node: their headers, the hash of the block before them, and
//! their logs, checked against each other. Nothing here touches the database, so the read can run while the
//! backfill below finality is still committing; the caller compares it with what the database holds.

use std::collections::HashMap;
use std::sync::Arc;

use alloy_primitives::B256;

use crate::fetch::{self, OnSplit, Selection};
use crate::follow;
use crate::primitives::{BlockNumber, BlockRange, Log, LogKey};
use crate::rpc;

use super::{Error, Node};

/// Headers asked for in one JSON-RPC batch: geth takes up to 1,000 calls in one; a batch of the 64 blocks
/// above `finalized` replaced 64 requests with one.
const HEADERS_PER_BATCH: u64 = 100;

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
}

/// Reads `span`: the header of the block before it in the same request as the span's first headers, then
/// the logs of the blocks the node knows, committed only if their hashes are the headers' and no block
/// whose bloom promises a log came back empty.
///
/// # Errors
/// [`Error::Node`] when a request fails for good.
pub(super) async fn read(
    node: Arc<Node>,
    selector: Arc<dyn Fn(BlockRange) -> Selection + Send + Sync>,
    interests: Vec<follow::Interest>,
    span: BlockRange,
) -> Result<HeadRead, Error> {
    let (before, headers) = read_headers(&node, span).await?;
    let logs = match headers.last() {
        None => Ok(HeadLogs::default()),
        Some(last) => {
            let range =
                BlockRange::new(span.start(), last.number).expect("headers start at the span");
            read_logs(&node, &selector(range), &interests, range, &headers).await?
        }
    };
    Ok(HeadRead {
        span,
        before,
        headers,
        logs,
    })
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

/// The logs of `range`, whose blocks' headers are `headers`; `Err` with the reason when the answers do not
/// agree with the headers.
async fn read_logs(
    node: &Node,
    selection: &Selection,
    interests: &[follow::Interest],
    range: BlockRange,
    headers: &[rpc::Header],
) -> Result<Result<HeadLogs, String>, Error> {
    let filter = rpc::LogFilter {
        blocks: rpc::Blocks::Range(range),
        addresses: selection.addresses.clone(),
        topic0: selection.topic0.clone(),
    };
    let logs = match node
        .gate
        .run("eth_getLogs", OnSplit::Return, || {
            node.client.get_logs(&filter)
        })
        .await
    {
        Ok(logs) => logs,
        // Near the head a range is short; a split answer here means a dense block: fetch block by block.
        Err(fetch::Error::Split(_)) => {
            let mut logs = Vec::new();
            for block in range.start()..=range.end() {
                let part = fetch::fetch_block_by_filters(
                    &node.client,
                    &node.gate,
                    block,
                    selection.clone(),
                    fetch::FirstRequest::Whole,
                )
                .await
                .map_err(node.error())?;
                logs.extend(part);
            }
            logs
        }
        Err(err) => return Err(node.error()(err)),
    };
    let hash_of: HashMap<BlockNumber, B256> = headers.iter().map(|h| (h.number, h.hash)).collect();
    let mut read = HeadLogs::default();
    for log in logs {
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
        let pinned = rpc::LogFilter {
            blocks: rpc::Blocks::Hash(hash_of[&suspect]),
            addresses: selection.addresses.clone(),
            topic0: selection.topic0.clone(),
        };
        let again = node
            .gate
            .run("eth_getLogs", OnSplit::Return, || {
                node.client.get_logs(&pinned)
            })
            .await
            .map_err(node.error())?;
        if again.iter().any(|l| !l.removed) {
            return Ok(Err(format!(
                "block {suspect} came back empty although its bloom says it has logs"
            )));
        }
    }
    Ok(Ok(read))
}
