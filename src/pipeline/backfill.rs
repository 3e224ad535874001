//! Below finality: the concurrent range pipeline, fetch -> decode -> commit, with bounded channels.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::fetch::{self, Fetched};
use crate::primitives::{BlockNumber, BlockRange};
use crate::sink::{self, Batch, Encoded, Encoder, OpenBatch, Timestamps, Transactions};

use super::{enrich, joined, Error, SyncReport};

impl<'a> super::Ctx<'a> {
    /// Indexes every contract up to `end` (at or below finality) through the concurrent range pipeline.
    pub(super) async fn backfill(
        &mut self,
        end: BlockNumber,
        cancel: &CancellationToken,
        report: &mut SyncReport,
    ) -> Result<(), Error> {
        let Some(start) = self.job.start(end) else {
            return Ok(());
        };
        let plan = BlockRange::new(start, end).expect("start <= end");
        tracing::info!(%plan, node = %self.node.display, database = %self.db, "backfilling");
        self.observer.start(plan);
        let config = self.config;
        // `max_queued_batches` counts what waits for the writer: ranges in this channel and the decoded batch.
        let queued = config.sync.max_queued_batches.saturating_sub(1).max(1);
        let (tx, rx) = mpsc::channel::<Fetched>(queued);
        let fetch_cancel = cancel.child_token();
        let fetcher = tokio::spawn(crate::observe::chain::carry(fetch::run(
            self.node.access.clone(),
            self.job.planner(config, plan),
            self.job.selector(),
            tx,
            fetch_cancel.clone(),
        )));
        let node = self.node.clone();
        let stored = self.job.stored();
        // With block timestamps, ranges pass the stamping stage on their way to the decoder; its header
        // reads overlap with the fetching and the commits (`enrich`).
        let (mut rx, stamper) = match self.job.timestamps {
            Timestamps::Omitted => (rx, None),
            Timestamps::Stored => {
                // As many stamped ranges may wait as fetched ones did: the decoder gathers what waits into
                // one batch, and a channel of one made batches smaller (more commits; measured: 0.64 of the
                // throughput without timestamps on the default chain, with blockTimestamp in the logs).
                let (stamped_tx, stamped_rx) = mpsc::channel::<Fetched>(queued);
                let (node, stored) = (self.node.clone(), self.job.stored());
                let stamping = tokio::spawn(crate::observe::chain::carry(enrich::stamp_stage(
                    node, stored, rx, stamped_tx,
                )));
                (stamped_rx, Some(AbortOnDropHandle::new(stamping)))
            }
        };
        // Batches are checked and encoded where they are decoded, so the writer only writes.
        let encoder = self.sink.encoder();
        let (job, sink, db, observer) = (&self.job, &mut self.sink, &self.db, self.observer);
        // The next batch is decoded while this one commits: the statements that wait for SQLite's own thread
        // (`BEGIN`, `COMMIT`) or for the Postgres server let the decoding run. SQLite's inserts run on this
        // task's thread (`sink::sqlite_bind`), so decoding waits for them, and the writer's next statement
        // waits until the decoding yields; moving either to a thread of its own was measured and did not pay
        // on 2 cores, where the sync is bound by CPU as a whole (docs/BENCHMARKS.md, ninth session). One
        // decoded batch waits at most, and the next is gathered only once its place is free, so no more is
        // held than before this stage.
        let (decoded_tx, mut decoded_rx) = mpsc::channel::<Part>(1);
        let decoding = async move {
            let mut decode_report = SyncReport::default();
            let outcome = loop {
                let Ok(place) = decoded_tx.reserve().await else {
                    break Ok(()); // the writer stopped; its error is the one to report
                };
                let first = tokio::select! {
                    _ = cancel.cancelled() => break Err(Error::Interrupted),
                    first = rx.recv() => first,
                };
                let Some(first) = first else { break Ok(()) };
                // Gather what is already waiting, up to max_batch_logs, into one transaction.
                let mut fetched = vec![first];
                let mut n_logs = fetched[0].logs.len();
                while n_logs < config.sync.max_batch_logs {
                    match rx.try_recv() {
                        Ok(more) => {
                            n_logs += more.logs.len();
                            fetched.push(more);
                        }
                        Err(_) => break,
                    }
                }
                if let Some(last) = fetched.last() {
                    observer.fetched(last.range);
                }
                // Children announced in these ranges, and those found since a range was asked for, are
                // fetched for them before they are decoded.
                let filled = match job.discover(&node, config, &mut fetched).await {
                    Ok(filled) => filled,
                    Err(err) => break Err(err),
                };
                // What was filled in for them passed no stamping stage.
                if filled > 0 && job.timestamps == Timestamps::Stored {
                    let stamped = futures::future::try_join_all(
                        fetched
                            .iter_mut()
                            .map(|f| enrich::stamp_stored(&node, &mut f.logs, &*stored)),
                    );
                    if let Err(err) = stamped.await {
                        break Err(err);
                    }
                }
                // A batch far over max_batch_logs is decoded, encoded and written in parts
                // ([`sink::streams`]): its typed rows are built part by part in `send`.
                let streamed = sink::streams(
                    fetched.iter().map(|f| f.logs.len()).sum(),
                    config.sync.max_batch_logs,
                );
                let built = if streamed {
                    Ok(job.gather_batch(fetched))
                } else {
                    job.build_batch(fetched, &mut decode_report)
                };
                let mut batch = match built {
                    Ok(batch) => batch,
                    Err(err) => break Err(err),
                };
                // The transactions of its logs are read while the previous batch commits.
                if job.transactions != Transactions::Omitted {
                    let filled = super::transactions::fill(&node, &mut batch, job.transactions);
                    if let Err(err) = filled.await {
                        break Err(err);
                    }
                }
                let sender = Sender {
                    job,
                    encoder: &encoder,
                    writer: &decoded_tx,
                    part_logs: config.sync.max_batch_logs,
                    db,
                };
                match sender
                    .send(batch, streamed, place, &mut decode_report)
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => break Ok(()), // the writer stopped; its error is the one to report
                    Err(err) => break Err(err),
                }
            };
            (outcome, decode_report.undecodable)
        };
        let writing = async {
            // The open transaction of a batch streamed in parts: since when, and the rows written so far.
            let mut open: Option<(OpenBatch, Instant, u64, u64)> = None;
            // Batches in flight on Postgres, committed in the order they came (`sink::InTurn`).
            let mut in_turn = sink::InTurn::default();
            let mut done = Reporter {
                report: &mut *report,
                observer,
                batches: 0,
            };
            let db_error = |source| Error::Database {
                database: db.clone(),
                source,
            };
            loop {
                let batch = tokio::select! {
                    biased;
                    _ = cancel.cancelled() => {
                        // The batches being written finish, as the one batch being committed always did.
                        done.batches(in_turn.drain().await.map_err(db_error)?);
                        return Err(Error::Interrupted);
                    }
                    Some(committed) = in_turn.next() => {
                        done.batches([committed.map_err(db_error)?]);
                        continue;
                    }
                    batch = decoded_rx.recv() => batch,
                };
                let Some(Part {
                    batch,
                    encoded,
                    more,
                }) = batch
                else {
                    done.batches(in_turn.drain().await.map_err(db_error)?);
                    return Ok(());
                };
                if !(more || open.is_some()) {
                    done.batches(
                        in_turn
                            .submit(sink, batch, encoded)
                            .await
                            .map_err(db_error)?,
                    );
                    continue;
                }
                // A part of a batch streamed in several: written into the batch's open transaction, which
                // commits with the last part, after every batch before it.
                done.batches(in_turn.drain().await.map_err(db_error)?);
                let (logs, typed) = (batch.logs.len() as u64, batch.typed.len() as u64);
                if open.is_none() {
                    let opened = sink.begin_batch().await.map_err(db_error)?;
                    open = Some((opened, Instant::now(), 0, 0));
                }
                let (opened, _, logs_so_far, typed_so_far) = open.as_mut().expect("opened above");
                opened
                    .write(sink, &batch, encoded)
                    .await
                    .map_err(db_error)?;
                *logs_so_far += logs;
                *typed_so_far += typed;
                if more {
                    drop(batch);
                    release_freed_memory();
                    continue;
                }
                let (opened, began, logs, typed) = open.take().expect("opened above");
                opened.commit(sink).await.map_err(db_error)?;
                done.report.streamed_batches += 1;
                let range = batch.range();
                drop(batch);
                done.committed(range, logs, typed, began.elapsed());
            }
        };
        let (written, undecodable) = {
            let (mut decoding, mut writing) = (std::pin::pin!(decoding), std::pin::pin!(writing));
            let mut decoded = None;
            let written = loop {
                tokio::select! {
                    outcome = &mut decoding, if decoded.is_none() => decoded = Some(outcome),
                    written = &mut writing => break written,
                }
            };
            // A failed writer stops the decoding where it is (it may be waiting for a fetcher in backoff).
            // A writer that ended well saw the decoding's channel close: the decoding is done.
            match (written, decoded) {
                (Err(err), _) => (Err(err), 0),
                (Ok(()), Some(decoded)) => decoded,
                (Ok(()), None) => decoding.await,
            }
        };
        report.undecodable += undecodable;
        // Stop the fetcher whatever happened, then prefer its error (the writer only saw the channel close);
        // a stamping stage that failed closed its channel too, so its error comes before the fetcher's.
        fetch_cancel.cancel();
        let stamped = match stamper {
            Some(stamping) if written.is_ok() => joined(stamping.await)?,
            _ => Ok(()),
        };
        let fetched = joined(fetcher.await)?;
        match (written, stamped, fetched) {
            (Err(err), _, _) | (Ok(()), Err(err), _) => Err(err),
            (Ok(()), Ok(()), Err(err)) => Err(self.node.error()(err)),
            (Ok(()), Ok(()), Ok(())) => {
                self.job.advance(end);
                self.publish();
                Ok(())
            }
        }
    }
}

/// What the writer does with each batch committed: counts it, reports its progress, and every
/// [`TRIM_EVERY_BATCHES`] hands freed memory back.
struct Reporter<'r> {
    report: &'r mut SyncReport,
    observer: &'r super::Observer,
    /// Batches committed so far.
    batches: u64,
}

impl Reporter<'_> {
    fn committed(&mut self, range: Option<BlockRange>, logs: u64, typed: u64, took: Duration) {
        self.report.committed(logs, typed);
        // Logs a `progress` line or draws the bar; moves the clock `/health` reads.
        self.observer.committed(range, logs, typed, took);
        tracing::debug!(
            range = %range.map(|r| r.to_string()).unwrap_or_default(),
            logs,
            ms = took.as_millis() as u64,
            "committed"
        );
        self.batches += 1;
        if self.batches % TRIM_EVERY_BATCHES == 0 {
            release_freed_memory();
        }
    }

    /// Batches committed in turn ([`sink::InTurn`]), each dropped before the next is reported.
    fn batches(&mut self, committed: impl IntoIterator<Item = sink::Committed>) {
        for sink::Committed { batch, elapsed } in committed {
            let (logs, typed) = (batch.logs.len() as u64, batch.typed.len() as u64);
            let range = batch.range();
            drop(batch);
            self.committed(range, logs, typed, elapsed);
        }
    }
}

/// What the decoding stage hands the writer: a batch, or one part of a batch streamed in several.
struct Part {
    batch: Batch,
    encoded: Encoded,
    /// More parts of the same batch follow: its transaction stays open.
    more: bool,
}

/// What the decoding stage needs to hand a batch to the writer.
struct Sender<'a> {
    job: &'a super::Job,
    encoder: &'a Encoder,
    writer: &'a mpsc::Sender<Part>,
    part_logs: usize,
    db: &'a str,
}

impl Sender<'_> {
    /// Encodes `batch` and sends it to the writer through `place`: whole, or, when `streamed` (then it
    /// comes without typed rows: [`super::Job::gather_batch`]), in parts of `part_logs` logs, each decoded
    /// and encoded while the writer writes the one before, so that only the batch's logs are held whole.
    /// False when the writer stopped.
    async fn send(
        &self,
        mut batch: Batch,
        streamed: bool,
        mut place: mpsc::Permit<'_, Part>,
        report: &mut SyncReport,
    ) -> Result<bool, Error> {
        if !streamed {
            let encoded = self.encode(&batch)?;
            place.send(Part {
                batch,
                encoded,
                more: false,
            });
            return Ok(true);
        }
        loop {
            let (part, more) = self.job.next_part(&mut batch, self.part_logs, report)?;
            let encoded = self.encode(&part)?;
            place.send(Part {
                batch: part,
                encoded,
                more,
            });
            if !more {
                return Ok(true);
            }
            place = match self.writer.reserve().await {
                Ok(place) => place,
                Err(_) => return Ok(false),
            };
        }
    }

    fn encode(&self, batch: &Batch) -> Result<Encoded, Error> {
        self.encoder
            .encode(batch)
            .map_err(|source| Error::Database {
                database: self.db.to_string(),
                source,
            })
    }
}

/// Committed batches between two [`release_freed_memory`] calls (each part of a batch written in parts
/// releases its memory at once: such a batch is the size of many). Every batch cost a fifth of the
/// throughput: the pages handed back are faulted in again, zeroed, by the next batch (sys time 4.8-6.4 s of
/// a 1M-log sync against 3.3-3.5 s without; docs/BENCHMARKS.md).
const TRIM_EVERY_BATCHES: u64 = 16;

/// Hands the pages of freed allocations back to the kernel. A batch frees tens of thousands of small
/// allocations (topics, data, rows) interleaved with the next batch's; glibc only returns memory from the
/// top of its heaps, so without this the resident set crept up by about 15 MB over the first third of a long
/// backfill and stayed there (docs/BENCHMARKS.md, memory at 10x).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `malloc_trim` only releases free pages of the allocator's own heaps; it is thread-safe (it
    // takes each arena's lock) and leaves every live allocation where it is.
    unsafe {
        libc::malloc_trim(0);
    }
}
