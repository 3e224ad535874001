//! Batches committed in turn. On Postgres the rows of the next batch are written on a second connection
//! while the batch before is still being written or committed, so the server works on two batches at once;
//! each batch's bookkeeping (its checkpoints, remembered blocks, children) waits until the batch before has
//! committed, so batches commit in the order they were submitted and a checkpoint never lands before the
//! rows under it. On SQLite, which has one writing connection, a batch commits when it is submitted.
//!
//! Why: one batch at a time kept the Postgres server busy about two thirds of the backfill (its log of
//! statement durations on the default chain: 7.3 s of COPY and COMMIT in a 10.9 s backfill), since the
//! writer's turns between statements wait for the one runtime thread that also parses and decodes. Two
//! batches in flight fill those gaps; `docs/BENCHMARKS.md` has the figures.
//!
//! Why this is safe: rows of two batches never meet, since a batch joins the batches in flight only when
//! all its rows' blocks lie above theirs (otherwise it waits for them); the bookkeeping, which takes the
//! checkpoint rows' locks, runs strictly in order; and a batch whose predecessor failed is never committed
//! ([`Error::Abandoned`]). On a signal the backfill's writer drains the batches in flight, as it always let the
//! batch being committed finish; one still in flight when its [`InTurn`] is dropped (an error) rolls back, as
//! an uncommitted batch always did: its checkpoint did not move either.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use tokio_util::task::AbortOnDropHandle;

use super::encode::EncodedRows;
use super::{Batch, Encoded, Error, Sink};

/// Batches written at once: the one committing and the next. More would hold more batches in memory for
/// little: two already keep the server's backend busy while the other waits for its turn.
const IN_FLIGHT: usize = 2;

/// A batch committed, handed back for reporting.
#[derive(Debug)]
pub struct Committed {
    /// The batch.
    pub batch: Batch,
    /// From [`InTurn::submit`] to its commit.
    pub elapsed: Duration,
}

/// Commits batches in the order they are submitted, up to `IN_FLIGHT` at once on Postgres; made with
/// `InTurn::default()` by a stage that commits many.
#[derive(Debug, Default)]
pub struct InTurn {
    in_flight: VecDeque<InFlight>,
    /// Fires when the batch submitted last has committed: the next one's turn.
    last_done: Option<oneshot::Receiver<()>>,
}

#[derive(Debug)]
struct InFlight {
    /// The highest block of its rows, if it has any.
    highest: Option<i64>,
    /// The batch, and whether it committed.
    task: AbortOnDropHandle<(Batch, Result<(), Error>)>,
    since: Instant,
}

impl InTurn {
    /// Hands over a batch encoded by `sink`'s [`Sink::encoder`]; the batches committed meanwhile, oldest
    /// first (on SQLite, this one).
    ///
    /// # Errors
    /// As [`Sink::commit`], of this batch or of one submitted before.
    pub async fn submit(
        &mut self,
        sink: &mut Sink,
        batch: Batch,
        encoded: Encoded,
    ) -> Result<Vec<Committed>, Error> {
        let since = Instant::now();
        let postgres = match sink {
            Sink::Postgres(postgres) => postgres.clone(),
            Sink::Sqlite(_) => {
                sink.commit_encoded(&batch, encoded).await?;
                return Ok(vec![Committed {
                    batch,
                    elapsed: since.elapsed(),
                }]);
            }
        };
        let EncodedRows::Postgres(copy) = encoded.rows else {
            return Err(Error::Malformed(
                "a batch encoded for another backend (a bug in logslice)".into(),
            ));
        };
        // Taken in the order submitted, before the batches after it: each must start where this one ends.
        sink.nexts_mut().claim(&batch)?;
        let mut committed = Vec::new();
        // Rows of batches in flight at once must never meet: a batch with rows at or below the highest of
        // theirs waits for them (its `occupied` check would not see their uncommitted rows).
        let highest = self.in_flight.iter().filter_map(|f| f.highest).max();
        if let (Some((low, _)), Some(highest)) = (copy.span, highest) {
            if low <= highest {
                committed.extend(self.drain().await?);
            }
        }
        while self.in_flight.len() >= IN_FLIGHT {
            if let Some(done) = self.next().await {
                committed.push(done?);
            }
        }
        let turn = self.last_done.take();
        let (done, next_turn) = oneshot::channel();
        self.last_done = Some(next_turn);
        let bookkeeping = encoded.bookkeeping;
        let highest = copy.span.map(|(_, high)| high);
        let task = tokio::spawn(async move {
            let outcome = postgres.commit(&batch, &copy, &bookkeeping, turn).await;
            if outcome.is_ok() {
                // The next batch may have gone (its stage stopped): nobody waits then.
                let _ = done.send(());
            }
            (batch, outcome)
        });
        self.in_flight.push_back(InFlight {
            highest,
            task: AbortOnDropHandle::new(task),
            since,
        });
        Ok(committed)
    }

    /// The oldest batch in flight once it has committed; `None` when none is in flight.
    ///
    /// # Errors
    /// As [`Sink::commit`].
    ///
    /// # Cancel safety
    /// Cancel safe: a batch is taken from those in flight only when it has finished.
    pub async fn next(&mut self) -> Option<Result<Committed, Error>> {
        let oldest = self.in_flight.front_mut()?;
        let finished = (&mut oldest.task).await;
        let oldest = self.in_flight.pop_front().expect("it was there above");
        Some(match finished {
            Ok((batch, Ok(()))) => Ok(Committed {
                batch,
                elapsed: oldest.since.elapsed(),
            }),
            Ok((_, Err(err))) => Err(err),
            // A panic in the commit is a panic of the stage that submitted it, as before batches were
            // committed in turn. A task is only cancelled by dropping its handle, which is then gone.
            Err(err) if err.is_panic() => std::panic::resume_unwind(err.into_panic()),
            Err(_) => Err(Error::Abandoned),
        })
    }

    /// Waits for every batch in flight to commit; them, oldest first.
    ///
    /// # Errors
    /// As [`Sink::commit`], of the first that failed.
    pub async fn drain(&mut self) -> Result<Vec<Committed>, Error> {
        let mut committed = Vec::new();
        while let Some(done) = self.next().await {
            committed.push(done?);
        }
        Ok(committed)
    }
}
