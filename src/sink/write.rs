//! Writing, the same on both backends: the check of a batch before its transaction, the statements of its
//! bookkeeping (removed logs, remembered blocks, checkpoints), a rollback and a reindex. Each is a list of
//! [`Statement`]s with `$n` placeholders, which both SQLite and Postgres read, run by the backend in one
//! transaction. The bulk inserts of a batch are the backends' own (SQLite's multi-row `VALUES`, Postgres's
//! `UNNEST`): that is where they differ.

use std::fmt::Display;

use crate::decode::{ColumnKind, Value};
use crate::primitives::LogKey;

use super::prepare::Dialect;
use super::read::{self, invalid, ContractRecord};
use super::{
    hex, quote_ident, to_i64, Batch, BlockNumber, ChildRow, Error, ReindexReport, ReindexSpec,
    RollbackReport, Sink, TableSpec, Timestamps,
};

/// A value bound to a [`Statement`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Param {
    /// A block number, an index, a start block.
    Int(i64),
    /// Everything else.
    Text(String),
}

/// One SQL statement with `$n` placeholders, the same text on both backends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Statement {
    /// What it does, for [`Error::Query`].
    pub doing: &'static str,
    /// The SQL.
    pub sql: String,
    /// `$1`, `$2`, ...
    pub params: Vec<Param>,
}

impl Statement {
    pub(super) fn new(doing: &'static str, sql: impl Into<String>, params: Vec<Param>) -> Self {
        Self {
            doing,
            sql: sql.into(),
            params,
        }
    }
}

/// `n` as the `i64` both databases store (SQLite INTEGER, Postgres BIGINT); otherwise [`Error::Invalid`]
/// naming the table, row and column it was going to.
pub(super) fn int(table: &str, row: impl Display, column: &str, n: u64) -> Result<i64, Error> {
    i64::try_from(n).map_err(|_| {
        invalid(
            table,
            row,
            format_args!(
                "{column} {n} does not fit the database's column (at most {})",
                i64::MAX
            ),
        )
    })
}

/// [`int`] of a number the node sent (a batch's): one above `i64::MAX` is [`Error::Unstorable`], the
/// node's data, not the database's failure.
fn node_int(
    table: &'static str,
    row: impl Display,
    column: &'static str,
    n: u64,
) -> Result<i64, Error> {
    i64::try_from(n).map_err(|_| Error::Unstorable {
        table,
        row: row.to_string(),
        column,
        value: n,
    })
}

/// Checks a batch before anything of it is written: its ranges are contiguous and hold the checkpoints it
/// moves, every typed row fits the prepared tables (a bug in logslice otherwise) and every number fits its
/// column (the node's data otherwise: every number of a batch comes from the node). [`super::to_i64`] is
/// then safe on every number of the batch.
///
/// # Errors
/// [`Error::Gap`]; [`Error::Malformed`]; [`Error::Unstorable`] naming the table, the row and the column.
pub(super) fn check(tables: &[TableSpec], batch: &Batch) -> Result<(), Error> {
    super::continuity::check(batch)?;
    for log in &batch.logs {
        let row = LogRow(log.key());
        node_int("logs", row, "block_number", log.block_number)?;
        node_int("logs", row, "transaction_index", log.transaction_index)?;
        node_int("logs", row, "log_index", log.log_index)?;
    }
    check_typed(tables, batch)?;
    for key in &batch.removed {
        node_int("logs", LogRow(*key), "block_number", key.block_number)?;
        node_int("logs", LogRow(*key), "log_index", key.log_index)?;
    }
    for block in &batch.blocks {
        let row = format!("block_hash = {}", hex::encode(block.hash));
        node_int("block_hashes", row, "block_number", block.number)?;
    }
    if let Some(below) = batch.forget_blocks_below {
        node_int("block_hashes", "(all below)", "block_number", below)?;
    }
    for child in &batch.children {
        let row = format!(
            "contract = {:?}, address = {}",
            child.contract,
            hex::encode(child.address)
        );
        node_int("factory_children", &row, "block_number", child.block_number)?;
        node_int("factory_children", &row, "log_index", child.log_index)?;
    }
    for tx in &batch.transactions {
        let row = TxRow(tx.block_number, tx.transaction_index);
        node_int("transactions", row, "block_number", tx.block_number)?;
        node_int(
            "transactions",
            row,
            "transaction_index",
            tx.transaction_index,
        )?;
        node_int("transactions", row, "block_timestamp", tx.block_timestamp)?;
        node_int("transactions", row, "type", tx.tx_type)?;
    }
    for &block in &batch.receipt_blocks {
        node_int("receipt_blocks", block, "block_number", block)?;
    }
    for checkpoint in &batch.checkpoints {
        let row = format!("contract = {:?}", checkpoint.contract);
        node_int("checkpoints", row, "block_number", checkpoint.block)?;
    }
    Ok(())
}

/// The typed rows of [`check`]: each names a prepared table and a log of the batch, and has a value of its
/// column's kind per column.
fn check_typed(tables: &[TableSpec], batch: &Batch) -> Result<(), Error> {
    for typed in &batch.typed {
        let table = tables.get(typed.table).ok_or_else(|| {
            Error::Malformed(format!(
                "a typed row names table #{} but {} tables were prepared",
                typed.table,
                tables.len()
            ))
        })?;
        if typed.log >= batch.logs.len() {
            return Err(Error::Malformed(format!(
                "a row of {} decodes log #{} of a batch of {}",
                table.name,
                typed.log,
                batch.logs.len()
            )));
        }
        if typed.values.len() != table.columns.len() {
            return Err(Error::Malformed(format!(
                "a row of {} has {} values for {} columns",
                table.name,
                typed.values.len(),
                table.columns.len()
            )));
        }
        for (column, value) in table.columns.iter().zip(&typed.values) {
            if !fits(column.kind, value) {
                return Err(Error::Malformed(format!(
                    "column {}.{} of kind {:?} was given {value:?}",
                    table.name, column.name, column.kind
                )));
            }
        }
    }
    Ok(())
}

/// Checks that every log of a batch carries its block's timestamp when the sink stores them: a log without
/// one is a bug upstream (`pipeline::enrich` fills them), never a NULL in the table.
///
/// # Errors
/// [`Error::Malformed`] naming the log; [`Error::Unstorable`] when a timestamp does not fit the column.
pub(super) fn check_timestamps(timestamps: Timestamps, batch: &Batch) -> Result<(), Error> {
    if timestamps == Timestamps::Omitted {
        return Ok(());
    }
    for log in &batch.logs {
        let Some(timestamp) = log.block_timestamp else {
            return Err(Error::Malformed(format!(
                "log {} of block {} has no block_timestamp",
                log.log_index, log.block_number
            )));
        };
        node_int("logs", LogRow(log.key()), "block_timestamp", timestamp)?;
    }
    Ok(())
}

/// A log's row for a message, formatted only when there is one (a batch's check runs on every log).
#[derive(Clone, Copy)]
struct LogRow(LogKey);

impl Display for LogRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let LogKey {
            block_number,
            block_hash,
            log_index,
        } = self.0;
        write!(
            f,
            "block_number = {block_number}, log_index = {log_index} (block_hash = {})",
            hex::encode(block_hash)
        )
    }
}

/// A transaction's row for a message, by its key `(block_number, transaction_index)`, formatted only when
/// there is one.
#[derive(Clone, Copy)]
struct TxRow(u64, u64);

impl Display for TxRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self(block_number, transaction_index) = self;
        write!(
            f,
            "block_number = {block_number}, transaction_index = {transaction_index}"
        )
    }
}

/// Whether a value is of a column's kind (as `decode` makes them).
fn fits(kind: ColumnKind, value: &Value) -> bool {
    match kind {
        ColumnKind::Int64 | ColumnKind::BigInt => matches!(value, Value::Int(_) | Value::BigInt(_)),
        ColumnKind::Address | ColumnKind::FixedBytes | ColumnKind::TopicHash => {
            matches!(value, Value::Hex(_) | Value::Text(_))
        }
        ColumnKind::Text => matches!(value, Value::Text(_)),
        ColumnKind::Bool => matches!(value, Value::Bool(_)),
        ColumnKind::Bytes => matches!(value, Value::Bytes(_)),
        ColumnKind::Json => matches!(value, Value::Json(_)),
    }
}

/// The statements of a [`check`]ed batch after its inserts: delete the logs the node reported removed,
/// remember blocks above finality, forget final ones, move checkpoints.
pub(super) fn bookkeeping(
    dialect: &Dialect,
    chain_id: i64,
    tables: &[TableSpec],
    batch: &Batch,
) -> Vec<Statement> {
    let mut statements = Vec::new();
    let chain = Param::Int(chain_id);
    let raw_hash = (dialect.raw_hex)("$3");
    for key in &batch.removed {
        let hash = hex::encode(key.block_hash);
        let raw = std::iter::once(("logs", raw_hash.as_str()));
        let typed = tables.iter().map(|t| (t.name.as_str(), "$3"));
        for (table, hash_param) in raw.chain(typed) {
            statements.push(Statement::new(
                "deleting a removed log",
                format!(
                    "DELETE FROM {} WHERE block_number = $1 AND log_index = $2 AND block_hash = {hash_param} \
                     AND chain_id = $4",
                    quote_ident(table)
                ),
                vec![
                    Param::Int(to_i64(key.block_number)),
                    Param::Int(to_i64(key.log_index)),
                    Param::Text(hash.clone()),
                    chain.clone(),
                ],
            ));
        }
    }
    for block in &batch.blocks {
        statements.push(Statement::new(
            "remembering a block hash",
            "INSERT INTO block_hashes (chain_id, block_number, block_hash, parent_hash) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (chain_id, block_number) DO UPDATE SET block_hash = excluded.block_hash, \
             parent_hash = excluded.parent_hash",
            vec![
                chain.clone(),
                Param::Int(to_i64(block.number)),
                Param::Text(hex::encode(block.hash)),
                Param::Text(hex::encode(block.parent_hash)),
            ],
        ));
    }
    if let Some(below) = batch.forget_blocks_below {
        statements.push(Statement::new(
            "forgetting final block hashes",
            "DELETE FROM block_hashes WHERE block_number < $1 AND chain_id = $2",
            vec![Param::Int(to_i64(below)), chain.clone()],
        ));
    }
    for child in &batch.children {
        statements.push(Statement::new(
            "recording a factory child",
            "INSERT INTO factory_children \
             (contract, address, block_number, block_hash, log_index, factory_address, chain_id) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (chain_id, contract, address) DO NOTHING",
            vec![
                Param::Text(child.contract.clone()),
                Param::Text(hex::encode(child.address)),
                Param::Int(to_i64(child.block_number)),
                Param::Text(hex::encode(child.block_hash)),
                Param::Int(to_i64(child.log_index)),
                Param::Text(hex::encode(child.factory_address)),
                chain.clone(),
            ],
        ));
    }
    for &block in &batch.receipt_blocks {
        statements.push(Statement::new(
            "counting a block read from receipts",
            "INSERT INTO receipt_blocks (chain_id, block_number) VALUES ($1, $2) \
             ON CONFLICT (chain_id, block_number) DO NOTHING",
            vec![chain.clone(), Param::Int(to_i64(block))],
        ));
    }
    for checkpoint in &batch.checkpoints {
        statements.push(Statement::new(
            "moving a checkpoint",
            "INSERT INTO checkpoints (chain_id, contract, block_number) VALUES ($1, $2, $3) \
             ON CONFLICT (chain_id, contract) DO UPDATE SET block_number = excluded.block_number",
            vec![
                chain.clone(),
                Param::Text(checkpoint.contract.clone()),
                Param::Int(to_i64(checkpoint.block)),
            ],
        ));
    }
    statements
}

/// Rolls back to `ancestor` in one transaction: rows and remembered blocks above it go, checkpoints above it
/// come back to it, and the reorg is recorded.
pub(super) async fn rollback(
    sink: &Sink,
    ancestor: BlockNumber,
    note: &str,
) -> Result<RollbackReport, Error> {
    let above = Param::Int(int(
        "block_hashes",
        "(the ancestor)",
        "block_number",
        ancestor,
    )?);
    // Per chain: a rollback of one chain never touches another's rows.
    let chain = sink.chain_param("rolling back")?;
    let delete_above = |doing, table: &str| {
        let sql = format!(
            "DELETE FROM {} WHERE chain_id = $2 AND block_number > $1",
            quote_ident(table)
        );
        Statement::new(doing, sql, vec![above.clone(), chain.clone()])
    };
    let tables = sink.tables();
    let mut statements = vec![delete_above("rolling back raw logs", "logs")];
    for table in tables {
        statements.push(delete_above("rolling back typed rows", &table.name));
    }
    statements.push(delete_above("forgetting orphaned blocks", "block_hashes"));
    // A child whose creating log is orphaned goes; its rows above the ancestor went with the logs above.
    statements.push(delete_above(
        "forgetting orphaned factory children",
        "factory_children",
    ));
    // A block read from receipts that is orphaned no longer counts; its replacement counts when committed,
    // if it is read from receipts too.
    statements.push(delete_above(
        "forgetting orphaned blocks read from receipts",
        "receipt_blocks",
    ));
    statements.push(Statement::new(
        "moving checkpoints back",
        "UPDATE checkpoints SET block_number = $1 WHERE chain_id = $2 AND block_number > $1",
        vec![above.clone(), chain.clone()],
    ));
    statements.push(super::chains::set_fact(
        sink,
        "last_reorg",
        note.to_owned(),
    )?);
    if super::transactions::table_exists(sink).await? {
        statements.push(delete_above("rolling back transactions", "transactions"));
    }
    let n_typed = tables.len();
    let deleted = sink.transaction(&statements).await?;
    Ok(RollbackReport {
        logs: deleted[0],
        typed_rows: deleted[1..=n_typed].iter().sum(),
        blocks: deleted[n_typed + 1],
        children: deleted[n_typed + 2],
        receipt_blocks: deleted[n_typed + 3],
    })
}

/// Forgets contracts in one transaction, after every read and check (see [`reindex_plan`]).
pub(super) async fn reindex(
    sink: &Sink,
    contracts: &[ReindexSpec],
) -> Result<ReindexReport, Error> {
    let recorded = read::contract_records(sink, |_| true).await?;
    let children = read::factory_children(sink).await?;
    let (addresses, tables) = reindex_plan(contracts, &recorded, &children)?;
    let mut report = ReindexReport::default();
    for table in tables {
        if read::table_exists(sink, &table).await? {
            report.tables.push(table);
        }
    }
    let chain = sink.chain_param("reindexing")?;
    let mut statements = Vec::new();
    for table in &report.tables {
        // A table shared with the same contract on another chain keeps that chain's rows.
        let other_chains = sink
            .fetch(
                "looking for another chain's typed rows",
                &format!(
                    "SELECT CAST(chain_id AS TEXT) FROM {} WHERE chain_id <> $1 LIMIT 1",
                    quote_ident(table)
                ),
                std::slice::from_ref(&chain),
            )
            .await?;
        statements.push(if other_chains.is_empty() {
            let sql = format!("DROP TABLE {}", quote_ident(table));
            Statement::new("dropping a typed table", sql, Vec::new())
        } else {
            let sql = format!("DELETE FROM {} WHERE chain_id = $1", quote_ident(table));
            Statement::new("deleting a chain's typed rows", sql, vec![chain.clone()])
        });
    }
    for address in &addresses {
        statements.push(Statement::new(
            "deleting raw logs",
            format!(
                "DELETE FROM logs WHERE chain_id = $2 AND address = {}",
                (sink.dialect().raw_hex)("$1")
            ),
            vec![Param::Text(address.clone()), chain.clone()],
        ));
    }
    for contract in contracts {
        for sql in [
            "DELETE FROM checkpoints WHERE chain_id = $2 AND contract = $1",
            "DELETE FROM contracts WHERE chain_id = $2 AND name = $1",
            "DELETE FROM factory_children WHERE chain_id = $2 AND contract = $1",
        ] {
            let name = Param::Text(contract.name.clone());
            statements.push(Statement::new(
                "forgetting a contract",
                sql,
                vec![name, chain.clone()],
            ));
        }
    }
    // A block read from receipts counts while any of its logs is stored.
    statements.push(Statement::new(
        "forgetting blocks read from receipts without a stored log",
        "DELETE FROM receipt_blocks WHERE chain_id = $1 AND NOT EXISTS \
         (SELECT 1 FROM logs WHERE logs.chain_id = receipt_blocks.chain_id \
         AND logs.block_number = receipt_blocks.block_number)",
        vec![chain.clone()],
    ));
    // Transactions whose every stored log went with the reindexed contracts go too.
    if super::transactions::table_exists(sink).await? {
        let Param::Int(chain_id) = chain else {
            unreachable!("a chain id is bound as an integer")
        };
        statements.push(super::transactions::cleanup(chain_id));
    }
    let deleted = sink.transaction(&statements).await?;
    let n_tables = report.tables.len();
    report.raw_rows = deleted[n_tables..n_tables + addresses.len()].iter().sum();
    Ok(report)
}

/// What a reindex of `contracts` deletes: every configured and recorded address (a factory's children
/// included) and typed table of them.
///
/// # Errors
/// [`Error::Mismatch`] when a recorded contract that stays shares one of the addresses (its raw rows would
/// go too).
fn reindex_plan(
    contracts: &[ReindexSpec],
    recorded: &[ContractRecord],
    children: &[ChildRow],
) -> Result<(Vec<String>, Vec<String>), Error> {
    let reindexed = |name: &str| contracts.iter().any(|c| c.name == name);
    let mut addresses: Vec<String> = Vec::new();
    let mut tables: Vec<String> = Vec::new();
    for contract in contracts {
        addresses.extend(contract.addresses.iter().map(hex::encode));
        tables.extend(contract.tables.iter().cloned());
    }
    for child in children.iter().filter(|c| reindexed(&c.contract)) {
        addresses.push(hex::encode(child.address));
    }
    for record in recorded.iter().filter(|r| reindexed(&r.name)) {
        addresses.extend(record.addresses.iter().cloned());
        tables.extend(record.events.iter().map(|(_, table)| table.clone()));
    }
    addresses.sort();
    addresses.dedup();
    tables.sort();
    tables.dedup();
    for record in recorded.iter().filter(|r| !reindexed(&r.name)) {
        if let Some(shared) = record.addresses.iter().find(|a| addresses.contains(a)) {
            let name = &record.name;
            return Err(Error::Mismatch(format!(
                "contract {name} also indexes address {shared}, whose raw rows a reindex would delete: \
                 reindex {name} too (repeat --reindex), or index into a new database"
            )));
        }
    }
    Ok((addresses, tables))
}
