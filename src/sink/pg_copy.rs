//! A batch in Postgres's binary `COPY` format: one buffer per table (raw logs, then each typed table with
//! rows), ready to stream with `COPY <table> (<columns>) FROM STDIN (FORMAT binary)`. Pure: no I/O, so the
//! encoding runs wherever the caller likes (the decoding stage, off the writer).
//!
//! Binary COPY was the fastest insert measured into Postgres (309-339k rows/s against
//! 169-208k for UNNEST arrays, measured alone before the store was written), and a block-ordered key makes the table's side cheap too. COPY has no
//! `ON CONFLICT`, so it is only used for a batch whose blocks hold no row yet (`postgres.rs` checks that in
//! the batch's transaction); the rest (a replay, a contract joining below another's checkpoint) keeps the
//! conflict-checked `UNNEST` insert.
//!
//! The format (<https://www.postgresql.org/docs/current/sql-copy.html>, "Binary Format"): a header, then per
//! row a 16-bit field count and each field as a 32-bit length (-1 for NULL) and its binary form as the type's
//! `recv` function reads it, then a trailer of -1. The raw table's hashes, addresses, topics and data are
//! BYTEA (migration 0007: the bytes as they are, half of hex text); the typed tables' are `0x` + hex TEXT.
//! Not here: which columns a table has (`prepare`), or the text forms of `docs/schema.md` beyond writing them
//! (`super::hex`).

use crate::decode::{ColumnKind, Integer, Value, MAX_DECIMAL_LEN};
use crate::primitives::Log;

use super::postgres::{json_without_nul, without_nul};
use super::{quote_ident, to_i64, Batch, Error, TableSpec, Timestamps};

/// `PGCOPY\n\377\r\n\0`, then 32-bit flags (no OIDs) and a header extension of length 0.
const HEADER: &[u8] = b"PGCOPY\n\xff\r\n\0\0\0\0\0\0\0\0\0";

/// The sign word of a negative `numeric`.
const NUMERIC_NEG: u16 = 0x4000;

/// One table's rows of a batch in binary COPY format.
#[derive(Debug, Clone)]
pub(super) struct Copy {
    /// What it does, for errors.
    pub doing: &'static str,
    /// `COPY "<table>" (<columns>) FROM STDIN (FORMAT binary)`.
    pub sql: String,
    /// The quoted table name.
    pub table: String,
    /// Header, rows, trailer.
    pub data: Vec<u8>,
}

/// A batch ready to COPY: its tables' buffers and the blocks it spans.
#[derive(Debug, Clone, Default)]
pub(super) struct CopyBatch {
    /// Raw logs first, then the typed tables with rows.
    pub copies: Vec<Copy>,
    /// The lowest and highest block of its logs; `None` without logs.
    pub span: Option<(i64, i64)>,
    /// The chain every row is of (the bound chain's id).
    pub chain_id: i64,
}

/// Encodes a [`super::write::check`]ed batch for binary COPY, the columns in the order `docs/schema.md`
/// and `prepare` give them (`block_timestamp` after `data` in `logs`, after `address` in typed tables).
///
/// # Errors
/// [`Error::Malformed`] when a value is not of its column's kind or a number is not decimal text (a bug
/// upstream, which the check refuses first).
pub(super) fn encode(
    chain_id: i64,
    tables: &[TableSpec],
    timestamps: Timestamps,
    batch: &Batch,
) -> Result<CopyBatch, Error> {
    let mut copies = Vec::new();
    let stored = timestamps == Timestamps::Stored;
    let span = batch.logs.iter().map(|l| to_i64(l.block_number)).fold(
        None,
        |span: Option<(i64, i64)>, n| match span {
            None => Some((n, n)),
            Some((lo, hi)) => Some((lo.min(n), hi.max(n))),
        },
    );
    if !batch.logs.is_empty() {
        let mut columns = String::from(
            "chain_id, block_number, block_hash, transaction_hash, transaction_index, log_index, \
             address, topic0, topic1, topic2, topic3, data",
        );
        if stored {
            columns.push_str(", block_timestamp");
        }
        let mut out = Buffer::new(batch.logs.len() * 360);
        let n_fields = 12 + u16::from(stored);
        for log in &batch.logs {
            out.row(n_fields);
            out.int8(chain_id);
            out.int8(to_i64(log.block_number));
            out.bytes(log.block_hash.as_slice());
            out.bytes(log.transaction_hash.as_slice());
            out.int8(to_i64(log.transaction_index));
            out.int8(to_i64(log.log_index));
            out.bytes(log.address.as_slice());
            for topic_idx in 0..4 {
                match log.topics.get(topic_idx) {
                    Some(topic) => out.bytes(topic.as_slice()),
                    None => out.null(),
                }
            }
            out.bytes(&log.data);
            if stored {
                out.int8(to_i64(log.block_timestamp.unwrap_or_default()));
            }
        }
        copies.push(Copy {
            doing: "copying raw logs",
            sql: format!("COPY logs ({columns}) FROM STDIN (FORMAT binary)"),
            table: "logs".into(),
            data: out.finish(),
        });
    }
    for (table_idx, table) in tables.iter().enumerate() {
        let rows = batch.typed_rows(table_idx);
        if rows.is_empty() {
            continue;
        }
        let mut columns = String::from(
            "chain_id, block_number, block_hash, transaction_hash, log_index, address",
        );
        if stored {
            columns.push_str(", block_timestamp");
        }
        for column in &table.columns {
            columns.push_str(", ");
            columns.push_str(&quote_ident(&column.name));
        }
        let n_fields = u16::try_from(6 + usize::from(stored) + table.columns.len())
            .map_err(|_| Error::Malformed(format!("table {} has too many columns", table.name)))?;
        let mut out = Buffer::new(rows.len() * 400);
        let mut digits = [0; MAX_DECIMAL_LEN];
        for row in rows {
            let log: &Log = &batch.logs[row.log];
            out.row(n_fields);
            out.int8(chain_id);
            out.int8(to_i64(log.block_number));
            out.hex(log.block_hash.as_slice());
            out.hex(log.transaction_hash.as_slice());
            out.int8(to_i64(log.log_index));
            out.hex(log.address.as_slice());
            if stored {
                out.int8(to_i64(log.block_timestamp.unwrap_or_default()));
            }
            for (column, value) in table.columns.iter().zip(&row.values) {
                let wrong = || {
                    Error::Malformed(format!(
                        "column {}.{} of kind {:?} was given {value:?}",
                        table.name, column.name, column.kind
                    ))
                };
                match (column.kind, value) {
                    (ColumnKind::Int64 | ColumnKind::BigInt, Value::Int(i)) => out
                        .numeric(Integer::from(*i).decimal(&mut digits))
                        .ok_or_else(wrong)?,
                    (ColumnKind::Int64 | ColumnKind::BigInt, Value::BigInt(n)) => {
                        out.numeric(n.decimal(&mut digits)).ok_or_else(wrong)?
                    }
                    (
                        ColumnKind::Address
                        | ColumnKind::FixedBytes
                        | ColumnKind::TopicHash
                        | ColumnKind::Text,
                        Value::Text(s),
                    ) => out.bytes(without_nul(s).as_bytes()),
                    (
                        ColumnKind::Address | ColumnKind::FixedBytes | ColumnKind::TopicHash,
                        Value::Hex(word),
                    ) => out.hex(word.as_bytes()),
                    (ColumnKind::Bool, Value::Bool(b)) => out.bytes(&[u8::from(*b)]),
                    (ColumnKind::Bytes, Value::Bytes(b)) => out.bytes(b),
                    (ColumnKind::Json, Value::Json(s)) => {
                        let json = json_without_nul(s).ok_or_else(wrong)?;
                        out.jsonb(&json);
                    }
                    _ => return Err(wrong()),
                }
            }
        }
        let quoted = quote_ident(&table.name);
        copies.push(Copy {
            doing: "copying typed rows",
            sql: format!("COPY {quoted} ({columns}) FROM STDIN (FORMAT binary)"),
            table: quoted,
            data: out.finish(),
        });
    }
    Ok(CopyBatch {
        copies,
        span,
        chain_id,
    })
}

/// A COPY buffer being written.
struct Buffer(Vec<u8>);

impl Buffer {
    fn new(capacity: usize) -> Self {
        let mut data = Vec::with_capacity(HEADER.len() + capacity + 2);
        data.extend_from_slice(HEADER);
        Self(data)
    }

    fn row(&mut self, n_fields: u16) {
        self.0.extend_from_slice(&n_fields.to_be_bytes());
    }

    fn len(&mut self, n: usize) {
        let n = i32::try_from(n).expect("a field under 1 GiB (Postgres's limit on a value)");
        self.0.extend_from_slice(&n.to_be_bytes());
    }

    fn null(&mut self) {
        self.0.extend_from_slice(&(-1i32).to_be_bytes());
    }

    /// A `bigint` column: block numbers, log and transaction indexes (migration 0008), timestamps.
    fn int8(&mut self, n: i64) {
        self.len(8);
        self.0.extend_from_slice(&n.to_be_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.len(bytes.len());
        self.0.extend_from_slice(bytes);
    }

    /// `0x` + lowercase hex as text, written in place (no `String` per value).
    fn hex(&mut self, bytes: &[u8]) {
        self.len(2 + 2 * bytes.len());
        super::hex::encode_into(bytes, &mut self.0);
    }

    /// `jsonb`'s binary form: version 1, then the text.
    fn jsonb(&mut self, json: &str) {
        self.len(1 + json.len());
        self.0.push(1);
        self.0.extend_from_slice(json.as_bytes());
    }

    /// A whole number given as decimal text (an optional `-`, then digits) as `numeric`'s binary form:
    /// base-10,000 digits, most significant first, with the weight of the first. `None` when the text is
    /// not such a number.
    fn numeric(&mut self, text: &str) -> Option<()> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let digits = digits.trim_start_matches('0');
        // Groups of four decimal digits from the right; the first may be shorter.
        let first = match digits.len() % 4 {
            0 => 4,
            n => n,
        };
        let mut groups: Vec<u16> = Vec::with_capacity(digits.len() / 4 + 1);
        if !digits.is_empty() {
            groups.push(digits[..first].parse().ok()?);
            let mut rest = &digits[first..];
            while !rest.is_empty() {
                groups.push(rest[..4].parse().ok()?);
                rest = &rest[4..];
            }
        }
        let weight = i16::try_from(groups.len()).ok()?.saturating_sub(1);
        // Trailing zero groups are implied by the weight, as Postgres itself writes them.
        while groups.last() == Some(&0) {
            groups.pop();
        }
        let n_groups = u16::try_from(groups.len()).ok()?;
        let sign = if negative && n_groups > 0 {
            NUMERIC_NEG
        } else {
            0
        };
        self.len(8 + 2 * groups.len());
        self.0.extend_from_slice(&n_groups.to_be_bytes());
        self.0
            .extend_from_slice(&(if n_groups == 0 { 0 } else { weight }).to_be_bytes());
        self.0.extend_from_slice(&sign.to_be_bytes());
        self.0.extend_from_slice(&0u16.to_be_bytes()); // dscale: whole numbers
        for group in groups {
            self.0.extend_from_slice(&group.to_be_bytes());
        }
        Some(())
    }

    fn finish(mut self) -> Vec<u8> {
        self.0.extend_from_slice(&(-1i16).to_be_bytes());
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::Buffer;

    /// The numeric field's bytes after its length.
    fn check(text: &str, expected: Option<&[u16]>) {
        let mut out = Buffer(Vec::new());
        let got = out.numeric(text).map(|()| {
            out.0[4..]
                .chunks(2)
                .map(|w| u16::from_be_bytes([w[0], w[1]]))
                .collect::<Vec<u16>>()
        });
        assert_eq!(got.as_deref(), expected, "{text}");
    }

    #[test]
    fn numbers_become_base_10000_digits_with_their_weight() {
        // [ndigits, weight, sign, dscale, digits...]
        check("0", Some(&[0, 0, 0, 0]));
        check("-0", Some(&[0, 0, 0, 0]));
        check("7", Some(&[1, 0, 0, 0, 7]));
        check("10000", Some(&[1, 1, 0, 0, 1]));
        check("123456789", Some(&[3, 2, 0, 0, 1, 2345, 6789]));
        check("-42", Some(&[1, 0, 0x4000, 0, 42]));
        check("000120000", Some(&[1, 1, 0, 0, 12]));
        check(
            &u128::MAX.to_string(), // 340282366920938463463374607431768211455
            Some(&[
                10, 9, 0, 0, 340, 2823, 6692, 938, 4634, 6337, 4607, 4317, 6821, 1455,
            ]),
        );
        check("", None);
        check("-", None);
        check("12a", None);
        check("1.5", None);
    }
}
