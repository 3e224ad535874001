//! SQLite's rows of a batch, built whole before the writer sees them: per table, every value already in
//! the form SQLite binds (an integer, NULL, or a range of one buffer holding every text and blob of the
//! table's rows: hex written straight into it, no string per value). Pure and `Send`, so `sink::Encoder`
//! builds them in the decoding stage and the writer ([`super::sqlite_bind`]) only binds and steps, with
//! SQLite reading the buffer in place instead of copying each value (docs/BENCHMARKS.md: a `malloc`, a copy
//! and a `free` per text value through sqlx's arguments).

use crate::decode::{Value, MAX_DECIMAL_LEN};

use super::{quote_ident, to_i64, Batch, TableSpec, Timestamps};

/// How every row insert starts. `OR FAIL`: a row that breaks a constraint other than the key the conflict
/// clause skips (a NULL in a NOT NULL column) stops the statement with SQLite's error, and the writer rolls
/// the batch's transaction back, as with SQLite's default `ABORT`. But `ABORT` must undo the statement's
/// earlier rows on its own, so SQLite keeps a statement journal for every multi-row insert, copying each
/// page a statement touches first: 4.6% of a sync's CPU, 15% of the inserts' (docs/BENCHMARKS.md). Nothing
/// is lost by `FAIL`: no batch commits after an error.
pub(super) const INSERT_OR_FAIL: &str = "INSERT OR FAIL INTO";

/// The fixed columns of every typed table, before the parameter columns.
pub(super) const TYPED_FIXED: &str =
    "chain_id, block_number, block_hash, transaction_hash, log_index, address";

/// One value as SQLite binds it; text and blobs are ranges of [`TableRows::bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cell {
    Null,
    Int(i64),
    Text { start: usize, len: usize },
    Blob { start: usize, len: usize },
}

/// The rows of one table in a batch, for one `INSERT ... ON CONFLICT DO NOTHING` run row by row.
#[derive(Debug)]
pub(super) struct TableRows {
    /// What it does, for [`super::Error::Query`].
    pub doing: &'static str,
    /// `INSERT INTO t (columns) VALUES`: the writer adds one `(?, ...)` group per row of a statement.
    pub head: String,
    /// After the values: the conflict clause.
    pub tail: &'static str,
    /// Values per row.
    pub columns: usize,
    /// `columns` cells per row, rows in order.
    pub cells: Vec<Cell>,
    /// Every text and blob of the rows, back to back.
    pub bytes: Vec<u8>,
}

impl TableRows {
    pub fn new(doing: &'static str, head: String, tail: &'static str, columns: usize) -> Self {
        Self {
            doing,
            head,
            tail,
            columns,
            cells: Vec::new(),
            bytes: Vec::new(),
        }
    }

    /// TableRows held.
    pub fn len(&self) -> usize {
        self.cells.len() / self.columns.max(1)
    }

    pub fn null(&mut self) {
        self.cells.push(Cell::Null);
    }

    pub fn int(&mut self, n: i64) {
        self.cells.push(Cell::Int(n));
    }

    pub fn text(&mut self, text: &str) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(text.as_bytes());
        self.cells.push(Cell::Text {
            start,
            len: text.len(),
        });
    }

    /// `0x` + lowercase hex, as `docs/schema.md` stores bytes in text columns.
    pub fn hex(&mut self, raw: &[u8]) {
        let start = self.bytes.len();
        super::hex::encode_into(raw, &mut self.bytes);
        self.cells.push(Cell::Text {
            start,
            len: self.bytes.len() - start,
        });
    }

    /// A block timestamp, or NULL (a batch without timestamps is refused before this when they are stored).
    fn timestamp(&mut self, timestamp: Option<u64>) {
        match timestamp {
            Some(t) => self.int(to_i64(t)),
            None => self.null(),
        }
    }

    pub fn blob(&mut self, raw: &[u8]) {
        let start = self.bytes.len();
        self.bytes.extend_from_slice(raw);
        self.cells.push(Cell::Blob {
            start,
            len: raw.len(),
        });
    }

    fn value(&mut self, value: &Value) {
        match value {
            Value::Int(n) => self.int(*n),
            Value::BigInt(n) => self.text(n.decimal(&mut [0; MAX_DECIMAL_LEN])),
            Value::Text(s) | Value::Json(s) => self.text(s),
            Value::Hex(word) => self.hex(word.as_bytes()),
            Value::Bool(b) => self.int(i64::from(*b)),
            Value::Bytes(b) => self.blob(b),
        }
    }
}

/// Bytes of `0x` + hex text for `len` bytes.
fn hex_len(len: usize) -> usize {
    2 + 2 * len
}

/// Bytes a raw log's texts take in [`TableRows::bytes`]: its hashes, address, topics (the four the table
/// has) and data as hex.
fn raw_text_bytes(log: &crate::primitives::Log) -> usize {
    hex_len(32) * (2 + log.topics.len().min(4)) + hex_len(20) + hex_len(log.data.len())
}

/// Bytes a typed row's texts and blobs take in [`TableRows::bytes`].
fn typed_text_bytes(log: &crate::primitives::Log, values: &[Value]) -> usize {
    let fixed = hex_len(32) * 2 + hex_len(log.address.len());
    let values: usize = values
        .iter()
        .map(|value| match value {
            Value::Int(_) | Value::Bool(_) => 0,
            Value::BigInt(n) => n.decimal_len(),
            Value::Text(s) | Value::Json(s) => s.len(),
            Value::Hex(word) => hex_len(word.as_bytes().len()),
            Value::Bytes(b) => b.len(),
        })
        .sum();
    fixed + values
}

/// The rows of `batch`'s raw logs, then its typed rows per table (tables without rows left out).
pub(super) fn encode(
    chain_id: i64,
    tables: &[TableSpec],
    timestamps: Timestamps,
    batch: &Batch,
) -> Vec<TableRows> {
    // `block_timestamp` rides at the end of the raw columns when stored (checked present for every log).
    let stored = timestamps == Timestamps::Stored;
    let timestamp_column = if stored { ", block_timestamp" } else { "" };
    let mut all = Vec::new();
    // docs/schema.md: the database holds only canonical logs, so `(chain_id, block_number, log_index)` is
    // a log's identity (rows of an orphaned block are deleted before its replacement is written).
    let mut raw = TableRows::new(
        "inserting raw logs",
        format!(
            "{INSERT_OR_FAIL} logs (chain_id, block_number, block_hash, transaction_hash, \
             transaction_index, log_index, address, topic0, topic1, topic2, topic3, data{timestamp_column}) \
             VALUES "
        ),
        " ON CONFLICT (chain_id, block_number, log_index) DO NOTHING",
        12 + usize::from(stored),
    );
    // Both sized exactly: grown by doubling, the buffers were copied and faulted in again as they grew.
    raw.cells.reserve_exact(batch.logs.len() * raw.columns);
    let raw_bytes = batch.logs.iter().map(raw_text_bytes).sum();
    raw.bytes.reserve_exact(raw_bytes);
    for log in &batch.logs {
        raw.int(chain_id);
        raw.int(to_i64(log.block_number));
        raw.hex(log.block_hash.as_slice());
        raw.hex(log.transaction_hash.as_slice());
        raw.int(to_i64(log.transaction_index));
        raw.int(to_i64(log.log_index));
        raw.hex(log.address.as_slice());
        for i in 0..4 {
            match log.topics.get(i) {
                Some(topic) => raw.hex(topic.as_slice()),
                None => raw.null(),
            }
        }
        raw.hex(&log.data);
        if stored {
            raw.timestamp(log.block_timestamp);
        }
    }
    debug_assert_eq!(
        raw.bytes.len(),
        raw_bytes,
        "raw_text_bytes counts what is written"
    );
    if raw.len() > 0 {
        all.push(raw);
    }
    for (table_idx, table) in tables.iter().enumerate() {
        let typed = batch.typed_rows(table_idx);
        if typed.is_empty() {
            continue;
        }
        let names: String = table
            .columns
            .iter()
            .map(|c| format!(", {}", quote_ident(&c.name)))
            .collect();
        // No conflict target: the table's one unique key, whichever layout it was created with.
        let mut rows = TableRows::new(
            "inserting typed rows",
            format!(
                "{INSERT_OR_FAIL} {} ({TYPED_FIXED}{timestamp_column}{names}) VALUES ",
                quote_ident(&table.name)
            ),
            " ON CONFLICT DO NOTHING",
            6 + usize::from(stored) + table.columns.len(),
        );
        rows.cells.reserve_exact(typed.len() * rows.columns);
        let typed_bytes = typed
            .iter()
            .map(|row| typed_text_bytes(&batch.logs[row.log], &row.values))
            .sum();
        rows.bytes.reserve_exact(typed_bytes);
        for row in typed {
            let log = &batch.logs[row.log];
            rows.int(chain_id);
            rows.int(to_i64(log.block_number));
            rows.hex(log.block_hash.as_slice());
            rows.hex(log.transaction_hash.as_slice());
            rows.int(to_i64(log.log_index));
            rows.hex(log.address.as_slice());
            if stored {
                rows.timestamp(log.block_timestamp);
            }
            for value in &row.values {
                rows.value(value);
            }
        }
        debug_assert_eq!(
            rows.bytes.len(),
            typed_bytes,
            "typed_text_bytes counts what is written"
        );
        all.push(rows);
    }
    all
}

/// `(?, ?), (?, ?)` for `rows` rows of `columns` values.
pub(super) fn placeholders(rows: usize, columns: usize) -> String {
    let row = format!("({})", vec!["?"; columns].join(", "));
    vec![row; rows].join(", ")
}

#[cfg(test)]
mod tests {
    use super::{placeholders, Cell, TableRows};
    use crate::decode::Value;

    #[test]
    fn placeholders_have_one_mark_per_value() {
        assert_eq!(placeholders(2, 3), "(?, ?, ?), (?, ?, ?)");
        assert_eq!(placeholders(1, 1), "(?)");
    }

    /// The text a cell stands for, as SQLite would read it.
    fn read(rows: &TableRows, cell: Cell) -> Option<String> {
        match cell {
            Cell::Null => None,
            Cell::Int(n) => Some(n.to_string()),
            Cell::Text { start, len } | Cell::Blob { start, len } => {
                Some(String::from_utf8_lossy(&rows.bytes[start..start + len]).into_owned())
            }
        }
    }

    #[test]
    fn values_are_ranges_of_one_buffer_in_their_text_forms() {
        let mut rows = TableRows::new("testing", String::new(), "", 6);
        rows.hex(&[0xab, 0x01]);
        rows.hex(&[]);
        rows.value(&Value::Int(-5));
        rows.value(&Value::BigInt(
            "340282366920938463463374607431768211456".parse().unwrap(),
        ));
        rows.value(&Value::Bool(true));
        rows.value(&Value::Bytes(vec![b'h', b'i']));
        assert_eq!(rows.len(), 1);
        let texts: Vec<Option<String>> = rows.cells.iter().map(|c| read(&rows, *c)).collect();
        assert_eq!(
            texts,
            [
                Some("0xab01".to_owned()),
                Some("0x".to_owned()),
                Some("-5".to_owned()),
                Some("340282366920938463463374607431768211456".to_owned()),
                Some("1".to_owned()),
                Some("hi".to_owned()),
            ]
        );
        assert!(matches!(rows.cells[5], Cell::Blob { .. }));
    }
}
