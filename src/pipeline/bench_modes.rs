//! The phases `bench` measures besides `sync`: fetch only, store only, and a naive baseline.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::fetch::{self, Fetched};
use crate::primitives::{BlockNumber, BlockRange};

use crate::sink::Timestamps;

use super::{enrich, joined, open_job, Error, Job, Node, SyncReport, Target};

/// The fetch-only ceiling for `bench`: the same requests as [`super::sync`] from every contract's start block,
/// answers parsed and dropped, nothing stored.
///
/// # Errors
/// Any [`Error`].
pub async fn fetch_only(config: &Config, target: Target) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let node = std::sync::Arc::new(Node::connect(&config.node, &CancellationToken::new()).await?);
    let job = Job::new(config)?;
    let target = node.resolve(target, config.sync.max_reorg_depth).await?;
    let mut report = SyncReport {
        target,
        ..SyncReport::default()
    };
    if let Some(start) = job.start(target) {
        let plan = BlockRange::new(start, target).expect("start <= target");
        job.foresee(&node, config, plan, &CancellationToken::new())
            .await?;
        let (tx, mut rx) = mpsc::channel::<Fetched>(config.sync.max_queued_batches.max(1));
        let fetcher = tokio::spawn(fetch::run(
            node.access.clone(),
            job.planner(config, plan),
            job.selector(),
            tx,
            CancellationToken::new(),
        ));
        while let Some(mut fetched) = rx.recv().await {
            // Children are fetched as sync fetches them, or the factory preset would measure less work.
            job.discover(&node, config, std::slice::from_mut(&mut fetched))
                .await?;
            report.logs += fetched.logs.len() as u64;
            report.batches += 1;
        }
        joined(fetcher.await)?.map_err(node.error())?;
    }
    node.add_stats(&mut report);
    report.elapsed = started.elapsed();
    Ok(report)
}

/// The store-only ceiling for `bench`: decodes and commits the given ranges with no network, batched as
/// [`super::sync`] batches them; with the last block `end` they reach, the secondary indexes are deferred and
/// built as `sync` would for that backfill (the build is timed).
///
/// Batches commit one at a time, not in turn as `sync`'s writer commits them on Postgres (`sink::InTurn`):
/// the chunks are generated between commits, untimed, and a batch in flight would go on being written
/// meanwhile, so its time would go uncounted. On Postgres `sync` can therefore beat this ceiling.
///
/// # Errors
/// [`Error::Database`], or a decoding error under `sync.strict`.
pub async fn store_only(
    config: &Config,
    end: BlockNumber,
    chunks: impl Iterator<Item = Fetched>,
) -> Result<SyncReport, Error> {
    let (mut sink, db, job) = open_job(config, None).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
    let mut report = SyncReport::default();
    let mut pending: Vec<Fetched> = Vec::new();
    let mut n_logs = 0;
    let mut chunks = chunks.peekable();
    // Only decoding, committing and building the indexes are timed, not producing the chunks.
    let mut busy = Duration::ZERO;
    // As `sync` decides it for a backfill from the contracts' checkpoints to `end`.
    let started = Instant::now();
    super::indexes::defer_for_backfill(&mut sink, &job, end, config.sync.defer_indexes_min_blocks)
        .await
        .map_err(db_error)?;
    busy += started.elapsed();
    while let Some(chunk) = chunks.next() {
        n_logs += chunk.logs.len();
        report.target = chunk.range.end();
        job.note_children(std::slice::from_ref(&chunk));
        pending.push(chunk);
        if n_logs >= config.sync.max_batch_logs || chunks.peek().is_none() {
            let started = Instant::now();
            let batch = job.build_batch(std::mem::take(&mut pending), &mut report)?;
            // Encoding is timed, as it was when the writer did it: the figure stays comparable.
            let encoded = sink.encoder().encode(&batch).map_err(db_error)?;
            let committing = Instant::now();
            sink.commit_encoded(&batch, encoded)
                .await
                .map_err(db_error)?;
            busy += started.elapsed();
            tracing::debug!(
                range = %batch.range().map(|r| r.to_string()).unwrap_or_default(),
                logs = batch.logs.len(),
                ms = committing.elapsed().as_millis() as u64,
                "committed"
            );
            report.committed(batch.logs.len() as u64, batch.typed.len() as u64);
            n_logs = 0;
        }
    }
    let started = Instant::now();
    super::indexes::build_deferred(&mut sink)
        .await
        .map_err(db_error)?;
    busy += started.elapsed();
    sink.close().await;
    report.elapsed = busy;
    Ok(report)
}

/// The naive baseline for `bench`: one request at a time over fixed `span`-block ranges (halved only when
/// the node refuses), each range committed on its own, as a first script would do it.
///
/// # Errors
/// Any [`Error`].
pub async fn naive_sync(config: &Config, target: Target, span: u64) -> Result<SyncReport, Error> {
    let started = Instant::now();
    let node = std::sync::Arc::new(Node::connect(&config.node, &CancellationToken::new()).await?);
    let (mut sink, db, job) = open_job(config, None).await?;
    let db_error = |source| Error::Database {
        database: db.clone(),
        source,
    };
    let target = node.resolve(target, config.sync.max_reorg_depth).await?;
    let mut report = SyncReport {
        target,
        ..SyncReport::default()
    };
    let Some(mut next) = job.start(target) else {
        return Ok(report);
    };
    let select = job.selector();
    let mut todo: Vec<BlockRange> = Vec::new();
    while next <= target || !todo.is_empty() {
        let range = todo.pop().unwrap_or_else(|| {
            let range = BlockRange::new(next, next.saturating_add(span - 1).min(target))
                .expect("next <= end");
            next = range.end() + 1;
            range
        });
        let selection = select(range);
        match node
            .get_logs(crate::rpc::Blocks::Range(range), &selection)
            .await
        {
            Ok(logs) => {
                let mut fetched = vec![Fetched::from_get_logs(range, logs)];
                job.discover(&node, config, &mut fetched).await?;
                if job.timestamps == Timestamps::Stored {
                    enrich::stamp(&node, &mut fetched[0].logs).await?;
                }
                let mut batch = job.build_batch(fetched, &mut report)?;
                super::transactions::fill(&node, &mut batch, job.transactions).await?;
                sink.commit(&batch).await.map_err(db_error)?;
                report.committed(batch.logs.len() as u64, batch.typed.len() as u64);
            }
            Err(fetch::Error::Split(_)) => {
                if let Some((first, rest)) = range.halve() {
                    todo.push(rest);
                    todo.push(first);
                } else {
                    let block = fetch::fetch_block_by_filters(
                        &node.access,
                        range.start(),
                        selection.clone(),
                        fetch::FirstRequest::Halves,
                    )
                    .await
                    .map_err(node.error())?;
                    let mut fetched = vec![block];
                    job.discover(&node, config, &mut fetched).await?;
                    if job.timestamps == Timestamps::Stored {
                        enrich::stamp(&node, &mut fetched[0].logs).await?;
                    }
                    let mut batch = job.build_batch(fetched, &mut report)?;
                    super::transactions::fill(&node, &mut batch, job.transactions).await?;
                    sink.commit(&batch).await.map_err(db_error)?;
                    report.committed(batch.logs.len() as u64, batch.typed.len() as u64);
                }
            }
            Err(err) => return Err(node.error()(err)),
        }
    }
    sink.close().await;
    node.add_stats(&mut report);
    report.elapsed = started.elapsed();
    Ok(report)
}
