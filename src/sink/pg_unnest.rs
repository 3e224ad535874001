//! The Postgres insert for batches that binary `COPY` cannot take (a replay, a contract joining below
//! another's checkpoint, a retry after a commit that may have landed): `INSERT ... SELECT * FROM
//! UNNEST($1::bigint[], ...) ON CONFLICT DO NOTHING`, one statement per table with one array per column,
//! so a row that is already there is skipped. Integers go as decimal text cast to `numeric`, text and JSON
//! with their NUL bytes replaced (see `postgres`'s choices), the raw table's hashes and data as BYTEA.

use sqlx::Postgres;

use crate::decode::{ColumnKind, Value};
use crate::primitives::Log;

use super::postgres::{json_without_nul, without_nul};
use super::{hex, quote_ident, to_i64, Batch, Error, TableSpec, Timestamps};

/// Runs one UNNEST insert in the batch's transaction.
pub(super) async fn insert_unnest(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    insert: &Insert,
) -> Result<(), (&'static str, sqlx::Error)> {
    let mut query = sqlx::query::<Postgres>(&insert.sql);
    for array in &insert.arrays {
        query = match array {
            Array::BigInt(v) => query.bind(v.as_slice()),
            Array::Text(v) => query.bind(v.as_slice()),
            Array::Bool(v) => query.bind(v.as_slice()),
            Array::Bytea(v) => query.bind(v.as_slice()),
            Array::OptBytea(v) => query.bind(v.as_slice()),
        };
    }
    query
        .bind(insert.chain_id)
        .execute(&mut **tx)
        .await
        .map(drop)
        .map_err(|e| (insert.doing, e))
}

/// One `INSERT ... SELECT * FROM UNNEST(...)` with its column arrays.
pub(super) struct Insert {
    doing: &'static str,
    sql: String,
    arrays: Vec<Array>,
    /// The rows' chain, bound after the arrays (`SELECT $n::bigint, * FROM UNNEST(...)`).
    chain_id: i64,
}

/// One column of a batch, bound as one Postgres array.
enum Array {
    BigInt(Vec<i64>),
    Text(Vec<String>),
    Bool(Vec<bool>),
    Bytea(Vec<Vec<u8>>),
    OptBytea(Vec<Option<Vec<u8>>>),
}

/// The statements of a batch ([`super::write::check`]ed): raw logs, then each typed table that has rows.
///
/// # Errors
/// [`Error::Malformed`] when a value is not of its column's kind (a bug upstream, which the check refuses
/// first).
pub(super) fn inserts(
    chain_id: i64,
    tables: &[TableSpec],
    timestamps: Timestamps,
    batch: &Batch,
) -> Result<Vec<Insert>, Error> {
    let mut inserts = Vec::new();
    // `block_timestamp` when stored: after `data` in `logs`, after `address` in typed tables (docs/schema.md).
    let stored = timestamps == Timestamps::Stored;
    let timestamps_of = |logs: &[&Log]| {
        Array::BigInt(
            logs.iter()
                .map(|l| to_i64(l.block_timestamp.unwrap_or_default()))
                .collect(),
        )
    };
    if !batch.logs.is_empty() {
        let logs = &batch.logs;
        // The raw table's hashes, addresses, topics and data are BYTEA (migration 0007).
        let bytes =
            |get: fn(&Log) -> &[u8]| Array::Bytea(logs.iter().map(|l| get(l).to_vec()).collect());
        let topic = |i: usize| {
            Array::OptBytea(
                logs.iter()
                    .map(|log| log.topics.get(i).map(|t| t.to_vec()))
                    .collect(),
            )
        };
        let mut sql = String::from(
            "INSERT INTO logs (chain_id, block_number, block_hash, transaction_hash, transaction_index, log_index, \
             address, topic0, topic1, topic2, topic3, data",
        );
        let mut params = String::from(
            "$1::bigint[], $2::bytea[], $3::bytea[], $4::bigint[], $5::bigint[], \
             $6::bytea[], $7::bytea[], $8::bytea[], $9::bytea[], $10::bytea[], $11::bytea[]",
        );
        let mut arrays = vec![
            Array::BigInt(logs.iter().map(|l| to_i64(l.block_number)).collect()),
            bytes(|l| l.block_hash.as_slice()),
            bytes(|l| l.transaction_hash.as_slice()),
            Array::BigInt(logs.iter().map(|l| to_i64(l.transaction_index)).collect()),
            Array::BigInt(logs.iter().map(|l| to_i64(l.log_index)).collect()),
            bytes(|l| l.address.as_slice()),
            topic(0),
            topic(1),
            topic(2),
            topic(3),
            bytes(|l| &l.data),
        ];
        if stored {
            sql.push_str(", block_timestamp");
            params.push_str(", $12::bigint[]");
            arrays.push(timestamps_of(&logs.iter().collect::<Vec<_>>()));
        }
        let chain_param = arrays.len() + 1;
        inserts.push(Insert {
            doing: "inserting raw logs",
            sql: format!(
                "{sql}) SELECT ${chain_param}::bigint, * FROM UNNEST({params}) \
                 ON CONFLICT (chain_id, block_number, log_index) DO NOTHING"
            ),
            arrays,
            chain_id,
        });
    }
    for (table_idx, table) in tables.iter().enumerate() {
        let rows = batch.typed_rows(table_idx);
        if rows.is_empty() {
            continue;
        }
        let logs: Vec<_> = rows.iter().map(|row| &batch.logs[row.log]).collect();
        let mut arrays = vec![
            Array::BigInt(logs.iter().map(|l| to_i64(l.block_number)).collect()),
            Array::Text(logs.iter().map(|l| hex::encode(l.block_hash)).collect()),
            Array::Text(
                logs.iter()
                    .map(|l| hex::encode(l.transaction_hash))
                    .collect(),
            ),
            Array::BigInt(logs.iter().map(|l| to_i64(l.log_index)).collect()),
            Array::Text(logs.iter().map(|l| hex::encode(l.address)).collect()),
        ];
        let mut names = String::new();
        let mut params =
            String::from("$1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::text[]");
        if stored {
            params.push_str(", $6::bigint[]");
            arrays.push(timestamps_of(&logs));
        }
        for (column_idx, column) in table.columns.iter().enumerate() {
            let values = rows.iter().map(|row| &row.values[column_idx]);
            let n = arrays.len() + 1;
            names.push_str(", ");
            names.push_str(&quote_ident(&column.name));
            let wrong = |value: &Value| {
                Error::Malformed(format!(
                    "column {}.{} of kind {:?} was given {value:?}",
                    table.name, column.name, column.kind
                ))
            };
            let (array, cast) = match column.kind {
                ColumnKind::Int64 | ColumnKind::BigInt => (
                    Array::Text(
                        values
                            .map(|value| match value {
                                Value::Int(i) => Ok(i.to_string()),
                                Value::BigInt(n) => Ok(n.to_string()),
                                other => Err(wrong(other)),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    "::text[]::numeric[]",
                ),
                ColumnKind::Address
                | ColumnKind::FixedBytes
                | ColumnKind::TopicHash
                | ColumnKind::Text => (
                    Array::Text(
                        values
                            .map(|value| match value {
                                Value::Text(s) => Ok(without_nul(s).into_owned()),
                                Value::Hex(word) if column.kind != ColumnKind::Text => {
                                    Ok(word.to_hex())
                                }
                                other => Err(wrong(other)),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    "::text[]",
                ),
                ColumnKind::Bool => (
                    Array::Bool(
                        values
                            .map(|value| match value {
                                Value::Bool(b) => Ok(*b),
                                other => Err(wrong(other)),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    "::boolean[]",
                ),
                ColumnKind::Bytes => (
                    Array::Bytea(
                        values
                            .map(|value| match value {
                                Value::Bytes(b) => Ok(b.clone()),
                                other => Err(wrong(other)),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    "::bytea[]",
                ),
                ColumnKind::Json => (
                    Array::Text(
                        values
                            .map(|value| match value {
                                Value::Json(s) => json_without_nul(s).ok_or_else(|| wrong(value)),
                                other => Err(wrong(other)),
                            })
                            .collect::<Result<_, _>>()?,
                    ),
                    "::text[]::jsonb[]",
                ),
            };
            params.push_str(&format!(", ${n}{cast}"));
            arrays.push(array);
        }
        let fixed: Vec<&str> = super::prepare::typed_fixed(&super::postgres::DIALECT, timestamps)
            .iter()
            .map(|&(name, _)| name)
            .collect();
        // `fixed` starts with `chain_id`, bound after the arrays.
        let chain_param = arrays.len() + 1;
        inserts.push(Insert {
            doing: "inserting typed rows",
            sql: format!(
                "INSERT INTO {table} ({fixed}{names}) SELECT ${chain_param}::bigint, * FROM UNNEST({params}) \
                 ON CONFLICT DO NOTHING",
                table = quote_ident(&table.name),
                fixed = fixed.join(", "),
            ),
            arrays,
            chain_id,
        });
    }
    Ok(inserts)
}
