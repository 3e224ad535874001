//! One batch committed in several parts of one transaction, so that a batch too large to hold three times
//! (a block of 100,000 logs read from its receipts) streams through encoding and the writer: the decoding
//! stage cuts the batch's logs and typed rows into parts ([`Batch::split_part`]), encodes one part while the
//! writer writes the one before, and the last part carries the batch's bookkeeping (checkpoints, remembered
//! blocks, children, transactions), so it commits with the rows it covers. A batch is still committed
//! whole or not at all: dropping an [`OpenBatch`] before [`OpenBatch::commit`] rolls every part back.
//!
//! Postgres retries a whole batch whose connection was lost ([`Sink::commit_encoded`]); the parts of an
//! open batch are gone once written, so a lost connection here fails the batch, and the next run resumes
//! from the checkpoint before it.

use sqlx::{Postgres, Sqlite};

use super::encode::EncodedRows;
use super::{postgres, query_error, sqlite, Batch, Encoded, Error, Sink, TypedRow};

/// A batch's transaction, open while its parts are written ([`Sink::begin_batch`]).
pub struct OpenBatch {
    tx: Tx,
    /// Parts written so far.
    parts: usize,
}

/// For tests only: when set (to anything), a batch written in parts stops after its first part, before
/// its transaction commits, logs [`HOLD_PARTS_MESSAGE`] and waits until the process is killed. A test kills
/// it there to see that nothing of a batch cut short between its parts is committed.
pub const HOLD_PARTS_ENV: &str = "LOGSLICE_TEST_HOLD_PARTS";

/// What a held batch logs (see [`HOLD_PARTS_ENV`]).
pub const HOLD_PARTS_MESSAGE: &str = "batch held between its parts";

enum Tx {
    Sqlite(sqlx::Transaction<'static, Sqlite>),
    Postgres {
        tx: sqlx::Transaction<'static, Postgres>,
        /// Whether the batch's blocks held rows as it began (then every part takes the conflict-checked
        /// inserts); decided at the first part with rows.
        occupied: Option<bool>,
    },
}

fn pg_error((doing, source): (&'static str, sqlx::Error)) -> Error {
    Error::Query { doing, source }
}

impl Sink {
    /// Opens the transaction of a batch to be written in parts.
    ///
    /// # Errors
    /// [`Error::Query`].
    pub async fn begin_batch(&mut self) -> Result<OpenBatch, Error> {
        let tx = match self {
            Sink::Sqlite(s) => Tx::Sqlite(s.begin_batch().await?),
            Sink::Postgres(s) => Tx::Postgres {
                tx: s.begin_batch().await.map_err(pg_error)?,
                occupied: None,
            },
        };
        Ok(OpenBatch { tx, parts: 0 })
    }
}

/// A batch of more logs than this many parts is written in parts ([`streams`]).
pub const STREAM_ABOVE_PARTS: usize = 4;

/// Whether a batch of `n_logs` logs is written in parts of `part_logs` logs: only one far over a usual
/// batch (a block read from its receipts, a node without a result cap, a long range of a sparse chain) is.
pub fn streams(n_logs: usize, part_logs: usize) -> bool {
    n_logs > part_logs.saturating_mul(STREAM_ABOVE_PARTS)
}

impl OpenBatch {
    /// Writes one part, encoded by `sink`'s [`Sink::encoder`]. `part.ranges` are the whole batch's.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Malformed`] for a part encoded for the other backend. The batch is then
    /// not committed (drop it).
    pub async fn write(
        &mut self,
        sink: &mut Sink,
        part: &Batch,
        encoded: Encoded,
    ) -> Result<(), Error> {
        // The last part carries the batch's checkpoints, and its ranges are the whole batch's.
        sink.nexts_mut().claim(part)?;
        self.write_part(sink, part, encoded).await?;
        self.parts += 1;
        if self.parts == 1 && std::env::var_os(HOLD_PARTS_ENV).is_some() {
            tracing::info!("{HOLD_PARTS_MESSAGE} ({HOLD_PARTS_ENV} is set)");
            std::future::pending::<()>().await;
        }
        Ok(())
    }

    async fn write_part(
        &mut self,
        sink: &Sink,
        part: &Batch,
        encoded: Encoded,
    ) -> Result<(), Error> {
        match (&mut self.tx, sink, encoded.rows) {
            (Tx::Sqlite(tx), Sink::Sqlite(_), EncodedRows::Sqlite(inserts)) => {
                sqlite::write(tx, inserts, &encoded.bookkeeping).await
            }
            (Tx::Postgres { tx, occupied }, Sink::Postgres(s), EncodedRows::Postgres(copy)) => {
                let occupied = match (*occupied, copy.span) {
                    (Some(known), _) => known,
                    (None, None) => false,
                    (None, Some(span)) => {
                        // The whole batch's blocks, not only this part's: every part then writes the same way.
                        let (low, high) = part.range().map_or(span, |range| {
                            (super::to_i64(range.start()), super::to_i64(range.end()))
                        });
                        let found = postgres::occupied(tx, &copy, low, high)
                            .await
                            .map_err(pg_error)?;
                        *occupied = Some(found);
                        found
                    }
                };
                s.write(tx, part, &copy, &encoded.bookkeeping, occupied)
                    .await
                    .map_err(pg_error)
            }
            _ => Err(Error::Malformed(
                "a part encoded for another backend (a bug in logslice)".into(),
            )),
        }
    }

    /// Commits every part written.
    ///
    /// # Errors
    /// [`Error::Query`]; nothing of the batch is then committed (except that a connection lost during the
    /// `COMMIT` leaves unknown whether it landed: committing the batch again is harmless either way).
    pub async fn commit(self, sink: &Sink) -> Result<(), Error> {
        match (self.tx, sink) {
            (Tx::Sqlite(tx), Sink::Sqlite(s)) => s.commit_batch(tx).await,
            (Tx::Postgres { tx, .. }, Sink::Postgres(_)) => {
                tx.commit().await.map_err(query_error("committing a batch"))
            }
            _ => Err(Error::Malformed(
                "a batch opened on another backend (a bug in logslice)".into(),
            )),
        }
    }
}

impl Batch {
    /// Cuts the first `n` logs (all when fewer) and their typed rows off this batch as a part of it: the
    /// part has the batch's ranges and nothing else, this batch keeps the rest of its rows and all of its
    /// bookkeeping. Typed rows follow their logs' order, as the decoding stage builds them.
    #[must_use]
    pub fn split_part(&mut self, n: usize) -> Batch {
        let n = n.min(self.logs.len());
        let logs: Vec<_> = self.logs.drain(..n).collect();
        let typed_n = self.typed.partition_point(|row| row.log < n);
        let typed: Vec<TypedRow> = self.typed.drain(..typed_n).collect();
        for row in &mut self.typed {
            row.log -= n;
        }
        Batch {
            ranges: self.ranges.clone(),
            logs,
            typed,
            ..Batch::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::Value;
    use crate::primitives::{BlockRange, Log};
    use alloy_primitives::{Address, Bytes, B256};

    fn log(block: u64, index: u64) -> Log {
        Log {
            block_number: block,
            block_hash: B256::repeat_byte(1),
            transaction_hash: B256::repeat_byte(2),
            transaction_index: 0,
            log_index: index,
            address: Address::repeat_byte(3),
            topics: Default::default(),
            data: Bytes::new(),
            removed: false,
            block_timestamp: None,
        }
    }

    #[test]
    fn parts_take_their_logs_typed_rows_in_order_and_leave_the_bookkeeping_to_the_last() {
        let logs: Vec<Log> = (0..7).map(|i| log(5, i)).collect();
        // Logs 0, 2, 3 and 6 decode, 3 into two tables.
        let typed: Vec<TypedRow> = [(0, 0), (0, 2), (0, 3), (1, 3), (0, 6)]
            .into_iter()
            .map(|(table, log)| TypedRow {
                table,
                log,
                values: [Value::Int(log as i64)].into_iter().collect(),
            })
            .collect();
        let mut batch = Batch {
            ranges: vec![BlockRange::single(5)],
            logs: logs.clone(),
            typed: typed.clone(),
            receipt_blocks: vec![5],
            ..Batch::default()
        };
        let mut parts = vec![];
        while batch.logs.len() > 3 {
            parts.push(batch.split_part(3));
        }
        parts.push(batch);
        assert_eq!(
            parts.iter().map(|p| p.logs.len()).collect::<Vec<_>>(),
            [3, 3, 1]
        );
        assert!(parts
            .iter()
            .all(|p| p.range() == Some(BlockRange::single(5))));
        assert_eq!(
            parts
                .iter()
                .map(|p| p.receipt_blocks.len())
                .collect::<Vec<_>>(),
            [0, 0, 1]
        );
        // Every typed row still points at its own log, and none is lost or repeated.
        let mut seen = vec![];
        for part in &parts {
            for row in &part.typed {
                let log = &part.logs[row.log];
                assert_eq!(row.values[..], [Value::Int(log.log_index as i64)]);
                seen.push((row.table, log.log_index));
            }
        }
        let want: Vec<_> = typed.iter().map(|r| (r.table, r.log as u64)).collect();
        assert_eq!(seen, want);
        let all: Vec<Log> = parts.into_iter().flat_map(|p| p.logs).collect();
        assert_eq!(all, logs);
    }
}
