//! Above finality: reading the head, checking it against the hashes the database keeps, rolling back to
//! the common ancestor on a reorg, and committing blocks with their hashes.

use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::fetch::Fetched;
use crate::follow;
use crate::observe;
use crate::primitives::{BlockNumber, BlockRange};
use crate::rpc::BlockTag;
use crate::sink::{Timestamps, TrackedBlock};

use super::head::{self, HeadRead};
use super::{joined, Error, Step, SyncReport};

impl<'a> super::Ctx<'a> {
    /// Compares the newest remembered block with the node; on a mismatch, rolls back to the common
    /// ancestor. This is how a reorg that happened while logslice was down is repaired at start.
    pub(super) async fn reconcile(&mut self) -> Result<(), Error> {
        let tracked = self.sink.tracked_blocks().await.map_err(self.db_error())?;
        let Some(top) = tracked.values().next_back().copied() else {
            return Ok(());
        };
        match self.header(BlockTag::Number(top.number)).await? {
            Some(header) if header.hash != top.hash => self.rollback_to_ancestor().await,
            // Same hash: nothing happened. Unknown to the node: it lags behind us; wait for it.
            _ => Ok(()),
        }
    }

    /// Walks back through the remembered blocks to the newest one the node still has, and rolls back to it.
    pub(super) async fn rollback_to_ancestor(&mut self) -> Result<(), Error> {
        let tracked = self.sink.tracked_blocks().await.map_err(self.db_error())?;
        let top = tracked.values().next_back().map_or(0, |b| b.number);
        for candidate in follow::ancestor_candidates(&tracked) {
            let header = self.header(BlockTag::Number(candidate.number)).await?;
            if header.is_some_and(|h| h.hash == candidate.hash) {
                let depth = top - candidate.number;
                let mut note = format!(
                    "rolled back {depth} blocks to {} ({})",
                    candidate.number, candidate.hash
                );
                if let Some(under) = self.under_finality(&tracked, candidate.number).await? {
                    note.push_str(&under);
                }
                self.node.finality.saw_reorg();
                let removed = self
                    .sink
                    .rollback(candidate.number, &note)
                    .await
                    .map_err(self.db_error())?;
                tracing::info!(
                    depth,
                    ancestor = candidate.number,
                    logs = removed.logs,
                    typed_rows = removed.typed_rows,
                    children = removed.children,
                    "reorg: rolled back"
                );
                observe::record_reorg(depth);
                self.job.reload(&self.sink).await.map_err(self.db_error())?;
                self.publish();
                return Ok(());
            }
        }
        let (low, high) = (tracked.keys().next().copied().unwrap_or(0), top);
        Err(Error::NodeData(format!(
            "reorg deeper than the tracked window: none of the {} remembered blocks {low}..={high} is on the node's chain any more \
             (a block at or below finality changed, or the reorg is deeper than sync.max_reorg_depth = {}); \
             re-index into a new database, or raise sync.max_reorg_depth",
            tracked.len(),
            self.config.sync.max_reorg_depth
        )))
    }

    /// When a reorg down to `ancestor` reached below the block last reported final: warns once, with the
    /// first orphaned block's kept hash and the node's hash of it now, counts it, and returns what the
    /// rollback's note (`status`) adds. It is rolled back like any other reorg.
    async fn under_finality(
        &self,
        tracked: &std::collections::BTreeMap<BlockNumber, TrackedBlock>,
        ancestor: BlockNumber,
    ) -> Result<Option<String>, Error> {
        let Some(finalized) = self.node.finality.reported() else {
            return Ok(None);
        };
        let Some(orphan) = tracked.range(ancestor + 1..).next().map(|(_, b)| *b) else {
            return Ok(None);
        };
        if orphan.number > finalized {
            return Ok(None);
        }
        let now = self.header(BlockTag::Number(orphan.number)).await?;
        let now = now.map_or_else(|| "none".to_owned(), |h| h.hash.to_string());
        tracing::warn!(
            finalized,
            block = orphan.number,
            kept_hash = %orphan.hash,
            node_hash = %now,
            "reorg under the block reported final: block {} was {} and is now {now}; rolled back all the same \
             (the node's finality, or sync.finality, is not to be trusted)",
            orphan.number,
            orphan.hash
        );
        observe::record_reorg_below_finalized();
        Ok(Some(format!(
            ", under the final block {finalized} (block {}: {} -> {now})",
            orphan.number, orphan.hash
        )))
    }

    /// The node's answers for `span` above finality ([`head::read`]), owning what it needs, so that it can
    /// also run as a task of its own.
    pub(super) fn read_head(
        &self,
        span: BlockRange,
    ) -> impl std::future::Future<Output = Result<HeadRead, Error>> + Send + use<> {
        head::read(
            self.node.clone(),
            self.job.planner_factory(self.config),
            self.job.selector(),
            self.job.interests(),
            span,
        )
    }

    /// Indexes blocks above finality up to `end`, remembering their hashes: headers first (they must link
    /// to what the database holds, or it is a reorg), then the logs, which are committed only if their block
    /// hashes are those headers' and no block whose bloom promises a log came back empty. `prefetched` is a
    /// read of the node made earlier (while the backfill committed); it is used if it covers this step.
    pub(super) async fn near_head(
        &mut self,
        end: BlockNumber,
        prefetched: Option<HeadRead>,
        report: &mut SyncReport,
    ) -> Result<Step, Error> {
        let Some(span) = self.job.head_span(end) else {
            return Ok(Step::Done);
        };
        let read = match prefetched.filter(|read| read.span == span) {
            Some(read) => read,
            None => self.read_head(span).await?,
        };
        let start = span.start();
        let tracked = self.sink.tracked_blocks().await.map_err(self.db_error())?;
        // Below what we track the block before the span is final, so the node's answer is the truth.
        let anchor = match start.checked_sub(1) {
            None => None,
            Some(before) => tracked.get(&before).map(|b| b.hash).or(read.before),
        };
        let headers = read.headers;
        let Some(last) = headers.last().map(|h| h.number) else {
            return Ok(Step::Retry(format!(
                "the node does not know block {start} yet"
            )));
        };
        match follow::check_headers(anchor, &headers) {
            follow::Decision::Extend => {}
            follow::Decision::Reorg => {
                self.rollback_to_ancestor().await?;
                return Ok(Step::Retry("reorg".into()));
            }
            follow::Decision::Retry => {
                return Ok(Step::Retry(
                    "headers do not link (the node changed while read)".into(),
                ))
            }
        }
        let logs = match read.logs {
            Ok(logs) => logs,
            Err(why) => return Ok(Step::Retry(why)),
        };
        // Children announced in these blocks, or found since they were read, are fetched for them; what is
        // filled in must be of the same blocks as the headers, or the node moved under the read.
        let mut read_logs = [Fetched {
            range: BlockRange::new(start, last).expect("headers start at the span"),
            logs: logs.kept,
            receipt_blocks: logs.receipt_blocks,
        }];
        let discovered = self
            .job
            .discover(&self.node, self.config, &mut read_logs)
            .await;
        if let Err(err) = discovered {
            let why = head::read_across_a_reorg(&err).ok_or(err)?;
            self.job.reload(&self.sink).await.map_err(self.db_error())?;
            return Ok(Step::Retry(why));
        }
        let [Fetched {
            logs: mut kept,
            receipt_blocks,
            ..
        }] = read_logs;
        if let Some(log) = kept.iter().find(|log| {
            headers
                .iter()
                .find(|h| h.number == log.block_number)
                .is_none_or(|h| h.hash != log.block_hash)
        }) {
            let why = format!(
                "a factory child's log of block {} is not of the header read (the node moved)",
                log.block_number
            );
            self.job.reload(&self.sink).await.map_err(self.db_error())?;
            return Ok(Step::Retry(why));
        }
        if self.job.timestamps == Timestamps::Stored {
            // The headers were read to check the logs: their timestamps cost no request (and after a reorg
            // they are the replacement blocks', as the logs are).
            super::enrich::stamp_from(&mut kept, &headers)?;
        }
        // Committed in batches of about `max_batch_logs`, a block never split: each batch keeps its blocks'
        // hashes, so a reorg after any of them is seen by the next step.
        let mut removed = Some(logs.removed);
        let mut logs = kept.into_iter().peekable();
        let mut from = start;
        while from <= last {
            let mut part: Vec<crate::primitives::Log> = Vec::new();
            while let Some(log) = logs.peek() {
                let full = part.len() >= self.config.sync.max_batch_logs;
                if full
                    && part
                        .last()
                        .is_some_and(|l| l.block_number != log.block_number)
                {
                    break;
                }
                part.extend(logs.next());
            }
            let to = match (logs.peek(), part.last()) {
                (Some(_), Some(log)) => log.block_number,
                _ => last,
            };
            let range = BlockRange::new(from, to).expect("from <= to");
            // A batch far over max_batch_logs (a block read from its receipts) is decoded part by part
            // below, as it is written.
            let part_logs = self.config.sync.max_batch_logs;
            let streamed = crate::sink::streams(part.len(), part_logs);
            let fetched = vec![Fetched {
                range,
                logs: part,
                receipt_blocks: receipt_blocks
                    .iter()
                    .copied()
                    .filter(|&block| range.contains(block))
                    .collect(),
            }];
            let mut batch = if streamed {
                self.job.gather_batch(fetched)
            } else {
                self.job.build_batch(fetched, report)?
            };
            batch.blocks = headers
                .iter()
                .filter(|h| range.contains(h.number))
                .map(|h| TrackedBlock {
                    number: h.number,
                    hash: h.hash,
                    parent_hash: h.parent_hash,
                })
                .collect();
            batch.forget_blocks_below = Some(last.saturating_sub(self.config.sync.max_reorg_depth));
            batch.removed = removed.take().unwrap_or_default();
            if self.job.transactions != crate::sink::Transactions::Omitted {
                match super::transactions::fill(&self.node, &mut batch, self.job.transactions).await
                {
                    Ok(()) => {}
                    // The blocks moved since the headers were read: the step reads again.
                    Err(Error::NotYet(why)) => return Ok(Step::Retry(why)),
                    Err(err) => return Err(err),
                }
            }
            let committing = Instant::now();
            let (range, logs) = (batch.range(), batch.logs.len() as u64);
            let typed = if streamed {
                report.streamed_batches += 1;
                self.commit_in_parts(batch, part_logs, report).await?
            } else {
                self.sink.commit(&batch).await.map_err(self.db_error())?;
                batch.typed.len() as u64
            };
            self.observer
                .committed(range, logs, typed, committing.elapsed());
            report.committed(logs, typed);
            self.job.advance(to);
            self.publish();
            from = to + 1;
        }
        Ok(Step::Done)
    }

    /// Commits `batch` (without its typed rows) in parts of `part_logs` logs of one transaction
    /// (`sink::parts`), decoding and encoding each part just before it is written, so that only the batch's
    /// logs are held whole; the typed rows written.
    async fn commit_in_parts(
        &mut self,
        mut batch: crate::sink::Batch,
        part_logs: usize,
        report: &mut SyncReport,
    ) -> Result<u64, Error> {
        let encoder = self.sink.encoder();
        let db = self.db.clone();
        let db_error = |source| Error::Database {
            database: db.clone(),
            source,
        };
        let mut open = self.sink.begin_batch().await.map_err(&db_error)?;
        let mut typed = 0;
        loop {
            let (part, more) = self.job.next_part(&mut batch, part_logs, report)?;
            typed += part.typed.len() as u64;
            let encoded = encoder.encode(&part).map_err(&db_error)?;
            open.write(&mut self.sink, &part, encoded)
                .await
                .map_err(&db_error)?;
            if !more {
                break;
            }
        }
        open.commit(&self.sink).await.map_err(&db_error)?;
        Ok(typed)
    }

    /// Backfills to finality, then steps near the head up to `end`, retrying a bounded number of times.
    /// `finalized` is the final block for `end` ([`Node::final_block`]) when the caller has it already.
    pub(super) async fn catch_up(
        &mut self,
        end: BlockNumber,
        finalized: Option<BlockNumber>,
        attempts: u32,
        cancel: &CancellationToken,
        report: &mut SyncReport,
    ) -> Result<(), Error> {
        let finalized = match finalized {
            Some(finalized) => finalized.min(end),
            None => self.finalized(end).await?,
        };
        // Factory children are read ahead up to `end`, before the head read is selected: with them, neither
        // the backfill's ranges nor the head read leaves a child to fill in.
        if let Some(plan) = self
            .job
            .start(end)
            .and_then(|start| BlockRange::new(start, end))
        {
            self.job
                .foresee(&self.node, self.config, plan, cancel)
                .await?;
        }
        // The blocks above finality are read while the backfill commits: with a slow node, these round trips
        // would otherwise come after the last commit. The step checks the read against the database first.
        // Dropped unused (an error, a shutdown), the read is aborted.
        let mut prefetch = self.job.head_span_after(finalized, end).map(|span| {
            AbortOnDropHandle::new(tokio::spawn(crate::observe::chain::carry(
                self.read_head(span),
            )))
        });
        // A long backfill builds the secondary indexes at its end instead of row by row; they are built
        // before anything follows the head, also when an earlier run deferred them and stopped.
        super::indexes::defer_for_backfill(
            &mut self.sink,
            &self.job,
            finalized,
            self.config.sync.defer_indexes_min_blocks,
        )
        .await
        .map_err(self.db_error())?;
        self.backfill(finalized, cancel, report).await?;
        super::indexes::build_deferred(&mut self.sink)
            .await
            .map_err(self.db_error())?;
        let mut last_problem = String::new();
        // Only a step that had to read again counts as an attempt; a committed step (one per contract that
        // joins above finality, at most) is progress.
        let mut retries = 0;
        while retries < attempts {
            if cancel.is_cancelled() {
                return Err(Error::Interrupted);
            }
            if self.job.start(end).is_none() {
                return Ok(());
            }
            let prefetched = match prefetch.take() {
                Some(read) => Some(joined(read.await)??),
                None => None,
            };
            match self.near_head(end, prefetched, report).await? {
                Step::Done => {}
                Step::Retry(why) => {
                    retries += 1;
                    tracing::debug!(%why, "reading the head again");
                    last_problem = why;
                    tokio::select! {
                        _ = cancel.cancelled() => return Err(Error::Interrupted),
                        _ = tokio::time::sleep(self.config.node.initial_backoff()) => {}
                    }
                }
            }
        }
        if self.job.start(end).is_none() {
            Ok(())
        } else {
            Err(Error::NotYet(format!(
                "node {}: could not reach block {end} consistently: {last_problem} (the node may not have it yet, \
                 or lags or reorganises; run again later)",
                self.node.display
            )))
        }
    }
}
