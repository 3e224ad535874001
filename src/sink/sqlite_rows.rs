//! SQLite's inserts of a batch, built whole before the writer sees them: the SQL text of each multi-row
//! `INSERT` and its arguments, every value already in the form SQLite binds (hex text, `i64`, blobs). Pure
//! and `Send`, so `sink::Encoder` builds them in the decoding stage and the writer only binds and steps
//! prepared statements. Measured before (`docs/BENCHMARKS.md`): hex-encoding and binding on the writer's
//! thread came to about a tenth of its time.

use sqlx::sqlite::SqliteArguments;
use sqlx::Arguments;

use crate::decode::Value;

use super::{hex, quote_ident, to_i64, Batch, Error, TableSpec, Timestamps};

/// SQLite's default limit on bound parameters per statement is 32,766; stay well under it while keeping
/// statements large enough that per-statement overhead does not dominate.
const MAX_BINDS_PER_STATEMENT: usize = 16_000;

/// The fixed columns of every typed table, before the parameter columns.
pub(super) const TYPED_FIXED: &str =
    "block_number, block_hash, transaction_hash, log_index, address";

/// One multi-row `INSERT ... ON CONFLICT DO NOTHING` with its arguments.
#[derive(Debug)]
pub(super) struct Insert {
    /// What it does, for [`Error::Query`].
    pub doing: &'static str,
    /// The SQL: the same text for the same table and row count, so SQLite's statement cache keeps it.
    pub sql: String,
    /// Its arguments, in order.
    pub args: SqliteArguments<'static>,
}

/// The inserts of `batch`'s raw logs, then its typed rows per table, in chunks under SQLite's bind limit.
///
/// # Errors
/// [`Error::Malformed`] when a value cannot be bound (never for the types built here).
pub(super) fn encode(
    tables: &[TableSpec],
    timestamps: Timestamps,
    batch: &Batch,
) -> Result<Vec<Insert>, Error> {
    // `block_timestamp` rides at the end of the raw columns when stored (checked present for every log).
    let stored = timestamps == Timestamps::Stored;
    let timestamp_column = if stored { ", block_timestamp" } else { "" };
    let mut inserts = Vec::new();
    let raw_columns = 11 + usize::from(stored);
    for chunk in statement_chunks(&batch.logs, MAX_BINDS_PER_STATEMENT / raw_columns) {
        let mut args = SqliteArguments::default();
        args.reserve(chunk.len() * raw_columns, 0);
        for log in chunk {
            add(&mut args, to_i64(log.block_number))?;
            add(&mut args, hex::encode(log.block_hash))?;
            add(&mut args, hex::encode(log.transaction_hash))?;
            add(&mut args, to_i64(log.transaction_index))?;
            add(&mut args, to_i64(log.log_index))?;
            add(&mut args, hex::encode(log.address))?;
            for i in 0..4 {
                add(&mut args, log.topics.get(i).map(hex::encode))?;
            }
            add(&mut args, hex::encode(&log.data))?;
            if stored {
                add(&mut args, log.block_timestamp.map(to_i64))?;
            }
        }
        // interface.md: the database holds only canonical logs, so `(block_number, log_index)` is a log's
        // identity (rows of an orphaned block are deleted before its replacement is written).
        inserts.push(Insert {
            doing: "inserting raw logs",
            sql: format!(
                "INSERT INTO logs (block_number, block_hash, transaction_hash, transaction_index, \
                 log_index, address, topic0, topic1, topic2, topic3, data{timestamp_column}) VALUES {} \
                 ON CONFLICT (block_number, log_index) DO NOTHING",
                placeholders(chunk.len(), raw_columns)
            ),
            args,
        });
    }
    for (table_idx, table) in tables.iter().enumerate() {
        let rows = batch.typed_rows(table_idx);
        if rows.is_empty() {
            continue;
        }
        let n_columns = 5 + usize::from(stored) + table.columns.len();
        let names: String = table
            .columns
            .iter()
            .map(|c| format!(", {}", quote_ident(&c.name)))
            .collect();
        for chunk in statement_chunks(&rows, MAX_BINDS_PER_STATEMENT / n_columns) {
            let mut args = SqliteArguments::default();
            args.reserve(chunk.len() * n_columns, 0);
            for typed in chunk {
                let log = &batch.logs[typed.log];
                add(&mut args, to_i64(log.block_number))?;
                add(&mut args, hex::encode(log.block_hash))?;
                add(&mut args, hex::encode(log.transaction_hash))?;
                add(&mut args, to_i64(log.log_index))?;
                add(&mut args, hex::encode(log.address))?;
                if stored {
                    add(&mut args, log.block_timestamp.map(to_i64))?;
                }
                for value in &typed.values {
                    match value {
                        Value::Int(i) => add(&mut args, *i)?,
                        Value::BigInt(s) | Value::Text(s) | Value::Json(s) => {
                            add(&mut args, s.clone())?
                        }
                        Value::Bool(b) => add(&mut args, *b)?,
                        Value::Bytes(b) => add(&mut args, b.clone())?,
                    }
                }
            }
            // No conflict target: the table's one unique key, whichever layout it was created with.
            inserts.push(Insert {
                doing: "inserting typed rows",
                sql: format!(
                    "INSERT INTO {} ({TYPED_FIXED}{timestamp_column}{names}) VALUES {} \
                     ON CONFLICT DO NOTHING",
                    quote_ident(&table.name),
                    placeholders(chunk.len(), n_columns)
                ),
                args,
            });
        }
    }
    Ok(inserts)
}

fn add<T>(args: &mut SqliteArguments<'static>, value: T) -> Result<(), Error>
where
    T: sqlx::Encode<'static, sqlx::Sqlite> + sqlx::Type<sqlx::Sqlite> + 'static,
{
    args.add(value)
        .map_err(|e| Error::Malformed(format!("a value SQLite cannot bind: {e}")))
}

/// `(?, ?), (?, ?)` for `rows` rows of `columns` values.
fn placeholders(rows: usize, columns: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    vec![row; rows].join(", ")
}

/// Splits rows into statements of at most `max` rows whose sizes are `max` or a power of two, so a table
/// has a handful of distinct INSERT texts that stay in the prepared-statement cache: a remainder of any
/// size would make a new statement (parsed and planned anew, thousands of placeholders) for every batch.
fn statement_chunks<T>(rows: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let max = max.max(1);
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let n = if rest.len() >= max {
            max
        } else {
            1 << rest.len().ilog2()
        };
        let (chunk, tail) = rest.split_at(n);
        rest = tail;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::{placeholders, statement_chunks};

    #[test]
    fn statement_chunks_cover_every_row_once_with_few_distinct_sizes() {
        for n in [0usize, 1, 2, 3, 7, 1000, 1454, 5000, 12_345] {
            let rows: Vec<usize> = (0..n).collect();
            let chunks: Vec<&[usize]> = statement_chunks(&rows, 1454).collect();
            assert_eq!(chunks.concat(), rows);
            assert!(chunks
                .iter()
                .all(|c| c.len() == 1454 || c.len().is_power_of_two()));
        }
    }

    #[test]
    fn placeholders_have_one_mark_per_value() {
        assert_eq!(placeholders(2, 3), "(?, ?, ?), (?, ?, ?)");
        assert_eq!(placeholders(1, 1), "(?)");
    }
}
