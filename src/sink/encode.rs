//! A batch checked and put in the form its backend writes (SQLite: each multi-row `INSERT`'s SQL and bound
//! values; Postgres: binary `COPY` buffers), by an [`Encoder`] that runs off the writer, and committed by
//! [`Sink::commit_encoded`], or part by part by [`super::OpenBatch`].

use super::{
    pg_copy, sqlite_rows, transactions, write, Batch, Error, Sink, Statement, TableSpec, Timestamps,
};

impl Sink {
    /// What encodes batches for this sink as it is now prepared ([`Sink::prepare`],
    /// [`Sink::settle_timestamps`]), so that a stage before the writer can do it.
    pub fn encoder(&self) -> Encoder {
        Encoder {
            backend: match self {
                Sink::Sqlite(_) => EncoderBackend::Sqlite,
                Sink::Postgres(_) => EncoderBackend::Postgres,
            },
            chain_id: self.chain().map(|chain| chain.column),
            tables: self.tables().to_vec(),
            timestamps: self.timestamps(),
            transactions_table: self.settled_transactions_table(),
        }
    }

    /// [`Sink::commit`] of a batch already encoded by this sink's [`Sink::encoder`]: the writer only
    /// writes.
    ///
    /// # Errors
    /// As [`Sink::commit`].
    ///
    /// # Cancel safety
    /// Cancel safe: a transaction dropped before its commit rolls back.
    pub async fn commit_encoded(&mut self, batch: &Batch, encoded: Encoded) -> Result<(), Error> {
        self.nexts_mut().claim(batch)?;
        match (self, encoded.rows) {
            (Sink::Sqlite(s), EncodedRows::Sqlite(inserts)) => {
                s.commit(inserts, &encoded.bookkeeping).await
            }
            (Sink::Postgres(s), EncodedRows::Postgres(copy)) => {
                s.commit(batch, &copy, &encoded.bookkeeping, None).await
            }
            _ => Err(Error::Malformed(
                "a batch encoded for another backend (a bug in logslice)".into(),
            )),
        }
    }
}

/// Encodes batches for one sink ([`Sink::encoder`]): checks them, and builds their statements and rows in
/// the form the backend writes (SQLite: each multi-row INSERT's SQL and bound values; Postgres: binary
/// COPY buffers). Pure and `Send`, so it runs off the writer.
#[derive(Debug, Clone)]
pub struct Encoder {
    backend: EncoderBackend,
    /// The bound chain's id, which every row and statement of a batch carries; `None`: not bound.
    chain_id: Option<i64>,
    tables: Vec<TableSpec>,
    timestamps: Timestamps,
    transactions_table: bool,
}

#[derive(Debug, Clone, Copy)]
enum EncoderBackend {
    Sqlite,
    Postgres,
}

impl Encoder {
    /// Checks `batch` and encodes it for [`Sink::commit_encoded`].
    ///
    /// # Errors
    /// [`Error::Malformed`] when a typed row does not fit the prepared tables; [`Error::Invalid`] when a
    /// number does not fit its column; [`Error::Unbound`] for a sink not bound to a chain.
    pub fn encode(&self, batch: &Batch) -> Result<Encoded, Error> {
        let chain_id = self.chain_id.ok_or(Error::Unbound("encoding a batch"))?;
        write::check(&self.tables, batch)?;
        write::check_timestamps(self.timestamps, batch)?;
        let rows = match self.backend {
            EncoderBackend::Sqlite => EncodedRows::Sqlite(sqlite_rows::encode(
                chain_id,
                &self.tables,
                self.timestamps,
                batch,
            )),
            EncoderBackend::Postgres => EncodedRows::Postgres(pg_copy::encode(
                chain_id,
                &self.tables,
                self.timestamps,
                batch,
            )?),
        };
        let dialect = match self.backend {
            EncoderBackend::Sqlite => &super::sqlite::DIALECT,
            EncoderBackend::Postgres => &super::postgres::DIALECT,
        };
        let mut bookkeeping = write::bookkeeping(dialect, chain_id, &self.tables, batch);
        if !batch.transactions.is_empty() {
            let placeholders = match self.backend {
                EncoderBackend::Sqlite => transactions::Placeholders::Sqlite,
                EncoderBackend::Postgres => transactions::Placeholders::Postgres,
            };
            bookkeeping.extend(transactions::inserts(
                chain_id,
                &batch.transactions,
                placeholders,
            ));
        }
        if !batch.removed.is_empty() && self.transactions_table {
            // A removed log may have been its transaction's last stored one.
            bookkeeping.push(transactions::cleanup(chain_id));
        }
        Ok(Encoded { rows, bookkeeping })
    }
}

/// A checked batch in the form its sink writes it ([`Encoder::encode`]).
#[derive(Debug)]
pub struct Encoded {
    pub(super) rows: EncodedRows,
    pub(super) bookkeeping: Vec<Statement>,
}

#[derive(Debug)]
pub(super) enum EncodedRows {
    Sqlite(Vec<sqlite_rows::TableRows>),
    Postgres(pg_copy::CopyBatch),
}
