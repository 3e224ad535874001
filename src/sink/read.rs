//! Reading records back, the same on both backends: checkpoints, remembered blocks, `meta`, the `contracts`
//! records and row counts. Every value is checked as it is read: a record that does not parse, a negative
//! number or one that does not fit is an [`Error::Invalid`] naming the table, the row and the column, never
//! a default (an empty address list would defeat `--reindex`'s shared-address check; a block number read
//! as 0 would restart a sync from the contract's start).
//!
//! Numbers are read as text (`CAST(... AS TEXT)` in the SQL) and parsed here, so what SQLite's dynamic
//! typing lets a column hold (a real, an integer beyond 64 bits written as a real, text) is caught by the
//! same check as a negative number on Postgres. Nothing here writes.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Display;

use alloy_primitives::{Address, B256};

use super::write::Param;
use super::{
    hex, quote_ident, BlockNumber, ChildRow, ContractStatus, Error, Sink, TableStatus, TrackedBlock,
};

/// Why a value that cannot be right is in the database, and what to do about it.
const NOT_WRITTEN_BY_LOGSLICE: &str = "logslice never writes that, so something else changed the \
     database: repair the row, or index into a new database";

/// The longest part of a stored value a message quotes.
const MAX_SHOWN_CHARS: usize = 80;

/// The error for a value of `table`'s row `row` that cannot be right.
pub(super) fn invalid(table: &str, row: impl Display, problem: impl Display) -> Error {
    Error::Invalid {
        table: table.to_owned(),
        row: row.to_string(),
        problem: problem.to_string(),
    }
}

/// `text` quoted for a message, cut at [`MAX_SHOWN_CHARS`].
fn shown(text: &str) -> String {
    match text.char_indices().nth(MAX_SHOWN_CHARS) {
        Some((end, _)) => format!("{:?}...", &text[..end]),
        None => format!("{text:?}"),
    }
}

/// One fetched row, read column by column with the table and the row's key at hand for messages.
pub(super) struct Record {
    table: &'static str,
    /// The row's key, `contract = "usdc"`; set by [`Record::key_text`] or [`Record::key_number`].
    row: String,
    cells: std::vec::IntoIter<Option<String>>,
}

impl Record {
    pub(super) fn new(table: &'static str, cells: Vec<Option<String>>) -> Self {
        Self {
            table,
            row: String::from("?"),
            cells: cells.into_iter(),
        }
    }

    fn invalid(&self, problem: impl Display) -> Error {
        invalid(self.table, &self.row, problem)
    }

    /// The next column, `None` for NULL.
    fn next(&mut self) -> Option<String> {
        self.cells
            .next()
            .expect("the shared SQL selects as many columns as are read")
    }

    /// The next column, which the schema declares NOT NULL.
    fn text(&mut self, column: &str) -> Result<String, Error> {
        self.next()
            .ok_or_else(|| self.invalid(format!("{column} is NULL: {NOT_WRITTEN_BY_LOGSLICE}")))
    }

    /// The next column as a block number or count: 0 to `i64::MAX`, as both backends store them.
    pub(super) fn number(&mut self, column: &str, what: &str) -> Result<BlockNumber, Error> {
        let text = self.text(column)?;
        number(&text).ok_or_else(|| self.invalid(not_a_number(column, &text, what)))
    }

    /// The next column, `0x` and `len` bytes of hex (a hash, an address).
    fn hex_bytes(&mut self, column: &str, len: usize) -> Result<Vec<u8>, Error> {
        let text = self.text(column)?;
        match hex::decode(&text) {
            Ok(bytes) if bytes.len() == len => Ok(bytes),
            _ => Err(self.invalid(format!(
                "{column} holds {}, not 0x and {} hex digits: {NOT_WRITTEN_BY_LOGSLICE}",
                shown(&text),
                2 * len
            ))),
        }
    }

    /// The next column, text, is the row's key.
    pub(super) fn key_text(&mut self, column: &str) -> Result<String, Error> {
        let text = self.text(column)?;
        self.row = format!("{column} = {text:?}");
        Ok(text)
    }

    /// The next column, a number, is the row's key.
    fn key_number(&mut self, column: &str, what: &str) -> Result<BlockNumber, Error> {
        let text = self.text(column)?;
        self.row = format!("{column} = {text}");
        number(&text).ok_or_else(|| self.invalid(not_a_number(column, &text, what)))
    }
}

/// `text` as a block number or count: a whole number from 0 to `i64::MAX` (both backends' column type).
fn number(text: &str) -> Option<u64> {
    match text.parse::<i64>() {
        Ok(n) => u64::try_from(n).ok(),
        Err(_) => None,
    }
}

fn not_a_number(column: &str, text: &str, what: &str) -> String {
    format!(
        "{column} holds {}, not {what} (a whole number from 0 to {}): {NOT_WRITTEN_BY_LOGSLICE}",
        shown(text),
        i64::MAX
    )
}

/// Every contract's checkpoint.
pub(super) async fn checkpoints(sink: &Sink) -> Result<HashMap<String, BlockNumber>, Error> {
    let chain_id = sink.chain_param("reading checkpoints")?;
    let rows = sink
        .fetch(
            "reading checkpoints",
            "SELECT contract, CAST(block_number AS TEXT) FROM checkpoints WHERE chain_id = $1",
            &[chain_id],
        )
        .await?;
    rows.into_iter()
        .map(|cells| {
            let mut record = Record::new("checkpoints", cells);
            let contract = record.key_text("contract")?;
            Ok((contract, record.number("block_number", "a block number")?))
        })
        .collect()
}

/// Every factory child the database records, in the order they were created.
pub(super) async fn factory_children(sink: &Sink) -> Result<Vec<ChildRow>, Error> {
    let chain_id = sink.chain_param("reading factory children")?;
    let rows = sink
        .fetch(
            "reading factory children",
            "SELECT contract, address, CAST(block_number AS TEXT), block_hash, CAST(log_index AS TEXT), \
             factory_address FROM factory_children WHERE chain_id = $1 \
             ORDER BY factory_children.block_number, factory_children.log_index, contract",
            &[chain_id],
        )
        .await?;
    rows.into_iter()
        .map(|cells| {
            let mut record = Record::new("factory_children", cells);
            let contract = record.key_text("contract")?;
            let address = Address::from_slice(&record.hex_bytes("address", 20)?);
            record.row = format!(
                "contract = {contract:?}, address = {}",
                hex::encode(address)
            );
            Ok(ChildRow {
                contract,
                address,
                block_number: record.number("block_number", "a block number")?,
                block_hash: B256::from_slice(&record.hex_bytes("block_hash", 32)?),
                log_index: record.number("log_index", "a log index")?,
                factory_address: Address::from_slice(&record.hex_bytes("factory_address", 20)?),
            })
        })
        .collect()
}

/// The remembered blocks above finality, by number.
pub(super) async fn tracked_blocks(
    sink: &Sink,
) -> Result<BTreeMap<BlockNumber, TrackedBlock>, Error> {
    let chain_id = sink.chain_param("reading block hashes")?;
    let rows = sink
        .fetch(
            "reading block hashes",
            "SELECT CAST(block_number AS TEXT), block_hash, parent_hash FROM block_hashes \
             WHERE chain_id = $1 ORDER BY block_number",
            &[chain_id],
        )
        .await?;
    rows.into_iter()
        .map(|cells| {
            let mut record = Record::new("block_hashes", cells);
            let number = record.key_number("block_number", "a block number")?;
            let mut hash = |column: &str| {
                let text = record.text(column)?;
                match hex::decode(&text) {
                    Ok(bytes) if bytes.len() == 32 => Ok(B256::from_slice(&bytes)),
                    _ => Err(record.invalid(format!(
                        "{column} holds {}, not a 32-byte hash (0x and 64 hex digits): {NOT_WRITTEN_BY_LOGSLICE}",
                        shown(&text)
                    ))),
                }
            };
            let block = TrackedBlock {
                number,
                hash: hash("block_hash")?,
                parent_hash: hash("parent_hash")?,
            };
            Ok((number, block))
        })
        .collect()
}

/// A value of the `meta` table.
pub(super) async fn meta(sink: &Sink, key: &str) -> Result<Option<String>, Error> {
    let rows = sink
        .fetch(
            "reading the meta table",
            "SELECT value FROM meta WHERE key = $1",
            &[Param::Text(key.to_owned())],
        )
        .await?;
    match rows.into_iter().next() {
        None => Ok(None),
        Some(cells) => {
            let mut record = Record::new("meta", cells);
            record.row = format!("key = {key:?}");
            record.text("value").map(Some)
        }
    }
}

/// The rows of `receipt_blocks`: stored blocks whose logs were read from their receipts.
pub(super) async fn receipt_blocks(sink: &Sink) -> Result<u64, Error> {
    let chain_id = sink.chain_param("counting blocks read from receipts")?;
    let rows = sink
        .fetch(
            "counting blocks read from receipts",
            "SELECT CAST(count(*) AS TEXT) FROM receipt_blocks WHERE chain_id = $1",
            &[chain_id],
        )
        .await?;
    match rows.into_iter().next() {
        Some(cells) => Record::new("receipt_blocks", cells).number("count(*)", "a row count"),
        None => Ok(0),
    }
}

/// A `contracts` record, read and checked, with its checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ContractRecord {
    /// Name.
    pub name: String,
    /// Addresses, `0x` + 40 lowercase hex digits each, as [`hex::encode`] wrote them.
    pub addresses: Vec<String>,
    /// `(event signature, table)` of each recorded event.
    pub events: Vec<(String, String)>,
    /// Start block.
    pub start_block: BlockNumber,
    /// The checkpoint; `None` before the first committed batch.
    pub checkpoint: Option<BlockNumber>,
}

/// The `contracts` records whose name `wanted` accepts, in name order, each checked whole (addresses,
/// events, start block, checkpoint). Records not wanted are not parsed, so a damaged record of a contract
/// the config no longer names does not stop a sync.
pub(super) async fn contract_records(
    sink: &Sink,
    wanted: impl Fn(&str) -> bool,
) -> Result<Vec<ContractRecord>, Error> {
    let chain_id = sink.chain_param("reading the contracts")?;
    let rows = sink
        .fetch(
            "reading the contracts",
            "SELECT c.name, c.addresses, c.events, CAST(c.start_block AS TEXT), \
             CAST(k.block_number AS TEXT) \
             FROM contracts c LEFT JOIN checkpoints k ON k.chain_id = c.chain_id AND k.contract = c.name \
             WHERE c.chain_id = $1 ORDER BY c.name",
            &[chain_id],
        )
        .await?;
    let mut records = Vec::with_capacity(rows.len());
    for cells in rows {
        let mut record = Record::new("contracts", cells);
        let name = record.key_text("name")?;
        if !wanted(&name) {
            continue;
        }
        let addresses = record.text("addresses")?;
        let addresses = parse_addresses(&addresses)
            .ok_or_else(|| record.invalid(format!(
                "addresses holds {}, not a JSON list of addresses (\"0x\" and 40 lowercase hex digits each): {NOT_WRITTEN_BY_LOGSLICE}",
                shown(&addresses)
            )))?;
        let events = record.text("events")?;
        let events = parse_events(&events).ok_or_else(|| record.invalid(format!(
            "events holds {}, not a JSON list of \"<event signature> -> <table>\": {NOT_WRITTEN_BY_LOGSLICE}",
            shown(&events)
        )))?;
        let start_block = record.number("start_block", "a block number")?;
        let checkpoint = match record.next() {
            None => None,
            Some(text) => Some(number(&text).ok_or_else(|| {
                invalid(
                    "checkpoints",
                    format_args!("contract = {name:?}"),
                    not_a_number("block_number", &text, "a block number"),
                )
            })?),
        };
        records.push(ContractRecord {
            name,
            addresses,
            events,
            start_block,
            checkpoint,
        });
    }
    Ok(records)
}

/// A JSON list of addresses as [`hex::encode`] writes them; `None` for anything else.
fn parse_addresses(json: &str) -> Option<Vec<String>> {
    let addresses: Vec<String> = serde_json::from_str(json).ok()?;
    let canonical =
        |a: &String| matches!(hex::decode(a), Ok(b) if b.len() == 20 && hex::encode(&b) == *a);
    addresses.iter().all(canonical).then_some(addresses)
}

/// A JSON list of `<event signature> -> <table>`, split; `None` for anything else.
fn parse_events(json: &str) -> Option<Vec<(String, String)>> {
    let events: Vec<String> = serde_json::from_str(json).ok()?;
    events.iter().map(|e| split_event_record(e)).collect()
}

/// `Transfer(address,address,uint256) -> usdc_transfer` split in two; `None` when a part is missing.
pub(super) fn split_event_record(record: &str) -> Option<(String, String)> {
    let (event, table) = record.rsplit_once(" -> ")?;
    (!event.is_empty() && !table.is_empty()).then(|| (event.to_owned(), table.to_owned()))
}

/// Whether a table exists (in the configured schema, on Postgres).
pub(super) async fn table_exists(sink: &Sink, table: &str) -> Result<bool, Error> {
    let rows = sink
        .fetch(
            "listing tables",
            sink.dialect().table_exists_sql,
            &[Param::Text(table.to_owned())],
        )
        .await?;
    // One row with count(*): "0" when the table does not exist.
    Ok(rows
        .into_iter()
        .flatten()
        .any(|count| count.as_deref() != Some("0")))
}

/// `(name, type)` of a table's columns in order, as the database's catalog spells them; empty when the table
/// does not exist.
pub(super) async fn columns(sink: &Sink, table: &str) -> Result<Vec<(String, String)>, Error> {
    let rows = sink
        .fetch(
            "reading a table's columns",
            sink.dialect().columns_sql,
            &[Param::Text(table.to_owned())],
        )
        .await?;
    rows.into_iter()
        .map(|cells| {
            let mut record = Record::new("the catalog", cells);
            record.row = format!("of table {table}");
            Ok((record.text("name")?, record.text("type")?))
        })
        .collect()
}

/// Rows of the bound chain in a table, `None` when it does not exist.
async fn row_count(sink: &Sink, table: &str) -> Result<Option<u64>, Error> {
    if !table_exists(sink, table).await? {
        return Ok(None);
    }
    let chain_id = sink.chain_param("counting rows")?;
    let sql = format!(
        "SELECT CAST(count(*) AS TEXT) FROM {} WHERE chain_id = $1",
        quote_ident(table)
    );
    let rows = sink.fetch("counting rows", &sql, &[chain_id]).await?;
    let cells = rows.into_iter().next().unwrap_or_else(|| vec![None]);
    let mut record = Record::new("count", cells);
    record.row = format!("of table {table}");
    record.number("count(*)", "a row count").map(Some)
}

/// Every contract the database records, in name order, with its checkpoint and the row count of each
/// event table.
pub(super) async fn status(sink: &Sink) -> Result<Vec<ContractStatus>, Error> {
    let records = contract_records(sink, |_| true).await?;
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let mut tables = Vec::with_capacity(record.events.len());
        for (event, table) in record.events {
            let rows = row_count(sink, &table).await?;
            tables.push(TableStatus { event, table, rows });
        }
        let children = sink
            .fetch(
                "counting factory children",
                "SELECT CAST(count(*) AS TEXT) FROM factory_children \
                 WHERE chain_id = $1 AND contract = $2",
                &[
                    sink.chain_param("counting factory children")?,
                    Param::Text(record.name.clone()),
                ],
            )
            .await?;
        let children = match children.into_iter().next() {
            Some(cells) => {
                Record::new("factory_children", cells).number("count(*)", "a row count")?
            }
            None => 0,
        };
        out.push(ContractStatus {
            children,
            name: record.name,
            addresses: record.addresses,
            start_block: record.start_block,
            checkpoint: record.checkpoint,
            tables,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_whole_and_between_zero_and_i64_max() {
        let check =
            |text: &str, expected: Option<u64>| assert_eq!(number(text), expected, "{text}");
        check("0", Some(0));
        check("19000000", Some(19_000_000));
        check("9223372036854775807", Some(i64::MAX as u64));
        check("9223372036854775808", None);
        check("-1", None);
        check("1.5", None);
        check("1.0e+20", None);
        check("", None);
        check("abc", None);
    }

    #[test]
    fn only_canonical_address_lists_and_complete_event_records_parse() {
        let address = format!("0x{}", "ab".repeat(20));
        assert_eq!(
            parse_addresses(&format!("[\"{address}\"]")),
            Some(vec![address.clone()])
        );
        assert_eq!(parse_addresses("[]"), Some(vec![]));
        for bad in [
            "".to_owned(),
            "{".to_owned(),
            "[1]".to_owned(),
            "[\"0x12\"]".to_owned(),
            format!("[\"{}\"]", address.to_uppercase().replace("0X", "0x")),
            format!("\"{address}\""),
        ] {
            assert_eq!(parse_addresses(&bad), None, "{bad}");
        }
        assert_eq!(
            parse_events(r#"["Transfer(address,address,uint256) -> usdc_transfer"]"#),
            Some(vec![(
                "Transfer(address,address,uint256)".to_owned(),
                "usdc_transfer".to_owned()
            )])
        );
        for bad in [
            "[\"Transfer\"]",
            "[\"Transfer -> \"]",
            "[\" -> t\"]",
            "[1]",
            "x",
        ] {
            assert_eq!(parse_events(bad), None, "{bad}");
        }
    }

    #[test]
    fn messages_quote_at_most_a_prefix_of_a_stored_value() {
        assert_eq!(shown("abc"), "\"abc\"");
        let long = "x".repeat(1_000);
        assert!(shown(&long).len() < MAX_SHOWN_CHARS + 10);
    }
}
