//! The opt-in `transactions` table (`[sync] transactions = true`): its rows, the statements that write them in
//! a batch's transaction, the cleanup that keeps only transactions with a stored log, and the one decision of
//! what to do when the config and the database disagree.
//!
//! A database records its choice in `meta.transactions` with its first sync. Switching it on for a database
//! that already holds logs is refused, naming `--reindex`: the table would silently lack the transactions of
//! every block indexed before (reading them all back costs one block read per block with logs over the whole
//! history; the user picks that with a reindex). Switching it off keeps the rows written so far, and records
//! the choice, so that switching on again is refused the same way. Nothing here reads the node.

use alloy_primitives::{Address, Bytes, B256, U256};

use super::write::{Param, Statement};
use super::{hex, read, to_i64, Error, Sink};

/// `meta` key of the database's choice: `on` or `off`.
pub const META_TRANSACTIONS: &str = "transactions";

/// Whether the `transactions` table is kept, and with which columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transactions {
    /// Not kept (the default): nothing read, nothing written.
    #[default]
    Omitted,
    /// Kept, from the blocks' transaction objects (`status` and `gas_used` NULL).
    Stored,
    /// Kept with `status` and `gas_used` from the receipts (`transaction_receipts = true`).
    WithReceipts,
}

impl Transactions {
    fn as_meta(self) -> &'static str {
        match self {
            Transactions::Omitted => "off",
            Transactions::Stored => "on",
            Transactions::WithReceipts => "receipts",
        }
    }

    fn as_config(meta: &str) -> &'static str {
        match meta {
            "on" => "transactions = true",
            "receipts" => "transactions = true and transaction_receipts = true",
            _ => "transactions = false",
        }
    }
}

/// Migration 0008's statement for this table (Postgres), for a table created from 0005 after 0008 ran.
const WIDEN_POSTGRES: &str = "ALTER TABLE transactions ALTER COLUMN transaction_index TYPE BIGINT";

/// Rows per insert statement: 18 parameters each, far under both backends' bind limits.
const ROWS_PER_STATEMENT: usize = 500;

/// One row of `transactions`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransactionRow {
    /// Block number.
    pub block_number: u64,
    /// Block hash (the logs' block hash, checked by the reader).
    pub block_hash: B256,
    /// Block timestamp.
    pub block_timestamp: u64,
    /// Position in the block.
    pub transaction_index: u64,
    /// Hash.
    pub transaction_hash: B256,
    /// Sender.
    pub from: Address,
    /// Receiver; `None` for a contract creation.
    pub to: Option<Address>,
    /// Wei transferred, exact.
    pub value: U256,
    /// Gas provided.
    pub gas: U256,
    /// Gas price (the effective one for a mined EIP-1559 transaction); `None` when the node sends none.
    pub gas_price: Option<U256>,
    /// EIP-1559 only.
    pub max_fee_per_gas: Option<U256>,
    /// EIP-1559 only.
    pub max_priority_fee_per_gas: Option<U256>,
    /// Sender's nonce.
    pub nonce: U256,
    /// Transaction type.
    pub tx_type: u64,
    /// Input data.
    pub input: Bytes,
    /// From the receipt (`transaction_receipts = true`): success.
    pub status: Option<bool>,
    /// From the receipt: gas used.
    pub gas_used: Option<U256>,
}

/// How an insert statement writes its parameters, per backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Placeholders {
    /// Anonymous `?`, bound in order. SQLite parses `$n` as a *named* parameter and looks each name up in a
    /// list (and sqlx asks each one's name back): with 17 parameters per row and 500 rows per statement
    /// that was quadratic, 70% of the in-process benchmark's CPU with the table on (`docs/BENCHMARKS.md`).
    Sqlite,
    /// `$n`, with `::numeric` turning a decimal text parameter into the column's type.
    Postgres,
}

/// The statements inserting `rows` (idempotent on `(block_number, transaction_index)`).
pub(super) fn inserts(
    chain_id: i64,
    rows: &[TransactionRow],
    placeholders: Placeholders,
) -> Vec<Statement> {
    const COLUMNS: &str =
        "chain_id, block_number, transaction_index, transaction_hash, block_hash, block_timestamp, \
                           from_address, to_address, value, gas, gas_price, max_fee_per_gas, \
                           max_priority_fee_per_gas, nonce, type, input, status, gas_used";
    const N_COLUMNS: usize = 18;
    // Columns holding exact decimals: value, gas, gas_price, max fees, nonce, gas_used.
    const NUMERIC: [usize; 7] = [8, 9, 10, 11, 12, 13, 17];
    let decimal = |n: &U256| Param::Text(n.to_string());
    let opt_decimal = |n: &Option<U256>| n.as_ref().map(decimal);
    rows.chunks(ROWS_PER_STATEMENT)
        .map(|chunk| {
            let mut params: Vec<Param> = Vec::with_capacity(chunk.len() * N_COLUMNS);
            let mut values = Vec::with_capacity(chunk.len());
            for row in chunk {
                let first = params.len();
                let cells: [Option<Param>; N_COLUMNS] = [
                    Some(Param::Int(chain_id)),
                    Some(Param::Int(to_i64(row.block_number))),
                    Some(Param::Int(to_i64(row.transaction_index))),
                    Some(Param::Text(hex::encode(row.transaction_hash))),
                    Some(Param::Text(hex::encode(row.block_hash))),
                    Some(Param::Int(to_i64(row.block_timestamp))),
                    Some(Param::Text(hex::encode(row.from))),
                    row.to.map(|to| Param::Text(hex::encode(to))),
                    Some(decimal(&row.value)),
                    Some(decimal(&row.gas)),
                    opt_decimal(&row.gas_price),
                    opt_decimal(&row.max_fee_per_gas),
                    opt_decimal(&row.max_priority_fee_per_gas),
                    Some(decimal(&row.nonce)),
                    Some(Param::Int(to_i64(row.tx_type))),
                    Some(Param::Text(hex::encode(&row.input))),
                    row.status.map(|ok| Param::Int(i64::from(ok))),
                    opt_decimal(&row.gas_used),
                ];
                let mut cells_sql = Vec::with_capacity(N_COLUMNS);
                for (column, cell) in cells.into_iter().enumerate() {
                    match cell {
                        // NULL is written as such: a bound NULL has no type Postgres could check.
                        None => cells_sql.push("NULL".to_owned()),
                        Some(param) => {
                            params.push(param);
                            let n = params.len();
                            cells_sql.push(match placeholders {
                                Placeholders::Sqlite => "?".to_owned(),
                                Placeholders::Postgres if NUMERIC.contains(&column) => {
                                    format!("${n}::numeric")
                                }
                                Placeholders::Postgres => format!("${n}"),
                            });
                        }
                    }
                }
                debug_assert!(params.len() > first);
                values.push(format!("({})", cells_sql.join(", ")));
            }
            Statement::new(
                "inserting transactions",
                format!(
                    "INSERT INTO transactions ({COLUMNS}) VALUES {} \
                     ON CONFLICT (chain_id, block_number, transaction_index) DO NOTHING",
                    values.join(", ")
                ),
                params,
            )
        })
        .collect()
}

/// Deletes chain `chain_id`'s transactions none of whose logs is stored any more (after a reindex, or a
/// removed log).
pub(super) fn cleanup(chain_id: i64) -> Statement {
    Statement::new(
        "deleting transactions without stored logs",
        "DELETE FROM transactions WHERE chain_id = $1 AND NOT EXISTS (SELECT 1 FROM logs \
         WHERE logs.chain_id = transactions.chain_id \
         AND logs.block_number = transactions.block_number \
         AND logs.transaction_index = transactions.transaction_index)",
        vec![Param::Int(chain_id)],
    )
}

/// Decides what to do with a database that recorded `recorded` and holds log rows (`has_rows`) for a config
/// that wants `wanted`; returns whether the choice must be recorded. Pure.
///
/// # Errors
/// [`Error::Mismatch`] naming `--reindex`, when the table (or its receipt columns) is wanted for a database
/// whose logs were indexed without it: rows would be missing or NULL for everything indexed before.
pub(super) fn plan(
    recorded: Option<&str>,
    has_rows: bool,
    wanted: Transactions,
) -> Result<bool, Error> {
    let recorded_or_off = recorded.unwrap_or("off");
    let more_than_recorded = match wanted {
        Transactions::Omitted => false,
        Transactions::Stored => recorded_or_off == "off",
        Transactions::WithReceipts => recorded_or_off != "receipts",
    };
    if more_than_recorded && has_rows {
        return Err(Error::Mismatch(format!(
            "the database holds logs indexed with [sync] {}, and the config now wants {}: the transactions \
             of what was indexed before would be missing; set it back, or re-index every contract \
             (`logslice sync --reindex <contract> ...` naming each) or index into a new database",
            Transactions::as_config(recorded_or_off),
            Transactions::as_config(wanted.as_meta()),
        )));
    }
    Ok(recorded != Some(wanted.as_meta()))
}

/// Brings `meta.transactions` in line with `wanted` (see [`plan`]).
pub(super) async fn settle(sink: &mut Sink, wanted: Transactions) -> Result<(), Error> {
    let has_rows = !sink
        .fetch(
            "looking for raw logs",
            "SELECT CAST(block_number AS TEXT) FROM logs LIMIT 1",
            &[],
        )
        .await?
        .is_empty();
    let recorded = read::meta(sink, META_TRANSACTIONS).await?;
    if plan(recorded.as_deref(), has_rows, wanted)? {
        sink.transaction(&[Statement::new(
            "recording transactions",
            "INSERT INTO meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            vec![
                Param::Text(META_TRANSACTIONS.into()),
                Param::Text(wanted.as_meta().into()),
            ],
        )])
        .await?;
    }
    // docs/schema.md: the table is there only with `[sync] transactions = true`. Migration 0005 creates it; a
    // database where it was never on drops it (it is empty: nothing was ever written to it), and switching
    // it on (allowed only while `logs` is empty) creates it again.
    let ever_on =
        recorded.as_deref().is_some_and(|r| r != "off") || wanted != Transactions::Omitted;
    let exists = table_exists(sink).await?;
    if !ever_on && exists {
        sink.transaction(&[Statement::new(
            "dropping the transactions table ([sync] transactions is off)",
            "DROP TABLE IF EXISTS transactions",
            Vec::new(),
        )])
        .await?;
    } else if ever_on && !exists {
        // Migration 0008 widened a table that existed then (Postgres); one created after it gets the same.
        // Migration 9 keyed it by chain first, as every table.
        let (ddl, widen, chain_type) = match sink {
            Sink::Sqlite(_) => (
                include_str!("../../migrations/sqlite/0005_transactions.sql"),
                None,
                "INTEGER",
            ),
            Sink::Postgres(_) => (
                include_str!("../../migrations/postgres/0005_transactions.sql"),
                Some(WIDEN_POSTGRES),
                "BIGINT",
            ),
        };
        let mut statements = create_statements(ddl, chain_type);
        statements.extend(
            widen.map(|sql| Statement::new("creating the transactions table", sql, Vec::new())),
        );
        sink.transaction(&statements).await?;
    }
    sink.set_transactions_table(ever_on);
    Ok(())
}

/// Whether the `transactions` table exists in the database (it does not where `[sync] transactions` was
/// never on).
///
/// # Errors
/// [`Error::Query`].
pub(super) async fn table_exists(sink: &Sink) -> Result<bool, Error> {
    let sql = match sink {
        Sink::Sqlite(_) => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'transactions'"
        }
        Sink::Postgres(_) => "SELECT CAST(to_regclass('transactions') AS TEXT)",
    };
    let rows = sink
        .fetch("looking for the transactions table", sql, &[])
        .await?;
    Ok(rows
        .first()
        .and_then(|row| row.first())
        .is_some_and(Option::is_some))
}

/// The statements of migration 0005, made idempotent (`IF NOT EXISTS`), comments left out, with migration
/// 9's `chain_id` (of type `chain_type`) as the first column and the first of the key.
fn create_statements(ddl: &str, chain_type: &str) -> Vec<Statement> {
    let code: String = ddl
        .lines()
        .filter(|line| !line.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n");
    code.split(';')
        .map(str::trim)
        .filter(|sql| !sql.is_empty())
        .map(|sql| {
            let sql = sql
                .replacen(
                    "CREATE TABLE transactions (",
                    &format!("CREATE TABLE IF NOT EXISTS transactions (\n    chain_id {chain_type} NOT NULL,"),
                    1,
                )
                .replacen(
                    "PRIMARY KEY (block_number, transaction_index)",
                    "PRIMARY KEY (chain_id, block_number, transaction_index)",
                    1,
                )
                .replacen("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1);
            Statement::new("creating the transactions table", sql, Vec::new())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_created_from_migration_0005_if_it_is_not_there() {
        for (ddl, chain_type) in [
            (
                include_str!("../../migrations/sqlite/0005_transactions.sql"),
                "INTEGER",
            ),
            (
                include_str!("../../migrations/postgres/0005_transactions.sql"),
                "BIGINT",
            ),
        ] {
            let statements = create_statements(ddl, chain_type);
            assert_eq!(statements.len(), 2, "{statements:?}");
            let create = &statements[0].sql;
            assert!(
                create.starts_with(&format!(
                    "CREATE TABLE IF NOT EXISTS transactions (\n    chain_id {chain_type} NOT NULL,"
                )) && create.contains("PRIMARY KEY (chain_id, block_number, transaction_index)"),
                "{create}"
            );
            assert!(statements[1]
                .sql
                .starts_with("CREATE INDEX IF NOT EXISTS transactions_hash"));
        }
    }

    #[test]
    fn a_table_created_after_migration_0008_gets_its_bigint_index() {
        let migration = include_str!("../../migrations/postgres/0008_bigint_indexes.sql");
        let widened = WIDEN_POSTGRES.replacen("ALTER TABLE ", "ALTER TABLE IF EXISTS ", 1);
        assert!(migration.contains(&format!("{widened};")), "{migration}");
    }

    #[test]
    fn switching_on_with_logs_is_refused_and_everything_else_recorded() {
        use Transactions::{Omitted, Stored, WithReceipts};
        let refused = plan(None, true, Stored).expect_err("no transactions for the old logs");
        assert!(refused.to_string().contains("--reindex"), "{refused}");
        assert!(plan(Some("off"), true, Stored).is_err());
        assert!(
            plan(Some("on"), true, WithReceipts).is_err(),
            "NULL status for the old rows"
        );
        assert_eq!(plan(None, false, Stored).ok(), Some(true));
        assert_eq!(plan(Some("on"), false, WithReceipts).ok(), Some(true));
        assert_eq!(plan(Some("on"), true, Stored).ok(), Some(false));
        assert_eq!(plan(Some("receipts"), true, Stored).ok(), Some(true));
        assert_eq!(plan(Some("on"), true, Omitted).ok(), Some(true));
        assert_eq!(plan(None, true, Omitted).ok(), Some(true));
        assert_eq!(plan(Some("off"), true, Omitted).ok(), Some(false));
    }

    #[test]
    fn nulls_are_literal_and_decimals_cast() {
        let row = TransactionRow {
            block_number: 5,
            block_hash: B256::ZERO,
            block_timestamp: 60,
            transaction_index: 0,
            transaction_hash: B256::ZERO,
            from: Address::ZERO,
            to: None,
            value: U256::MAX,
            gas: U256::from(21_000),
            gas_price: Some(U256::from(7)),
            max_fee_per_gas: None,
            max_priority_fee_per_gas: None,
            nonce: U256::from(1),
            tx_type: 0,
            input: Bytes::new(),
            status: None,
            gas_used: None,
        };
        // SQLite: anonymous parameters in the same order (no named-parameter lookups).
        let sqlite = inserts(1, std::slice::from_ref(&row), Placeholders::Sqlite);
        assert!(
            sqlite[0]
                .sql
                .contains("(?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, NULL, NULL, ?, ?, ?, NULL, NULL)"),
            "{}",
            sqlite[0].sql
        );
        assert!(!sqlite[0].sql.contains('$'));
        let statements = inserts(1, &[row], Placeholders::Postgres);
        assert_eq!(statements.len(), 1);
        let sql = &statements[0].sql;
        assert!(sql.contains("($1, $2, $3, $4, $5, $6, $7, NULL, $8::numeric, $9::numeric, $10::numeric, NULL, NULL, $11::numeric, $12, $13, NULL, NULL)"), "{sql}");
        assert_eq!(statements[0].params.len(), 13);
        assert_eq!(statements[0].params[7], Param::Text(U256::MAX.to_string()));
    }
}
