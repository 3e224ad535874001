//! What both backends do before a sync writes: the checks that refuse a database built for another chain,
//! other contract addresses, another ABI or other filters, then the typed tables and the `contracts` records
//! (a contract's filters are recorded in `meta`, under [`filters_key`], with no migration of their own). Every refusal
//! has one wording on both backends and names `--reindex` where that is the fix.
//!
//! Every read and every refusal happens before the transaction starts (an architecture invariant): a
//! transaction dropped after its DDL keeps its locks until the pool reuses that connection, and another
//! connection would wait on them. A backend differs only in its [`Dialect`].

use crate::decode::ColumnKind;

use super::read::{self, ContractRecord};
use super::write::{int, Param, Statement};
use super::{hex, quote_ident, ContractSpec, Error, Sink, TableSpec, Timestamps};

/// What differs between the backends in preparing a database.
pub(super) struct Dialect {
    /// The fixed columns of every typed table, with their types as [`Dialect::columns_sql`] reports them.
    pub typed_fixed: [(&'static str, &'static str); 6],
    /// The type of `block_timestamp` (logs and typed tables), as [`Dialect::columns_sql`] reports it.
    pub timestamp_type: &'static str,
    /// A parameter column's type, as [`Dialect::columns_sql`] reports it (and `CREATE TABLE` takes it).
    pub sql_type: fn(ColumnKind) -> &'static str,
    /// `(name, type)` of table `$1`'s columns in order, as text; no rows when it does not exist.
    pub columns_sql: &'static str,
    /// One row whose one column, as text, is `0` when table `$1` does not exist.
    pub table_exists_sql: &'static str,
    /// One row whose one column, as text, is `0` when index `$1` does not exist.
    pub index_exists_sql: &'static str,
    /// Statements run on the writer's connection before and after building indexes (`sink::indexes`).
    pub index_build_session: Option<(&'static str, &'static str)>,
    /// The clause declaring a typed table's unique key on [`super::TYPED_KEY`], given the table's name.
    pub typed_key: fn(&str) -> String,
    /// What follows a typed table's column list in `CREATE TABLE` (SQLite: `WITHOUT ROWID`).
    pub typed_table_options: &'static str,
    /// The database's name and the longest table name it keeps whole; `None`: no limit.
    pub max_table_name: Option<(&'static str, usize)>,
    /// A `0x` + hex text parameter (`$n`) as compared with the raw table's hashes and addresses: itself
    /// where they are TEXT, their bytes where they are BYTEA (Postgres, migration 0007).
    pub raw_hex: fn(&str) -> String,
    /// `(column, type)` of a fixed column of typed tables as earlier versions created it, narrower than
    /// `typed_fixed` has it now: [`prepare`] widens such a column in place (see [`widen`]).
    pub widened: &'static [(&'static str, &'static str)],
}

/// Creates the typed tables that do not exist yet and records the contracts, after every check.
pub(super) async fn prepare(
    sink: &mut Sink,
    tables: &[TableSpec],
    contracts: &[ContractSpec],
) -> Result<(), Error> {
    let (dialect, timestamps) = (sink.dialect(), sink.timestamps());
    let chain_id = sink.chain_param("preparing the tables")?;
    let mut widenings = Vec::new();
    for table in tables {
        let mut existing = read::columns(sink, &table.name).await?;
        // Migration 9 added `chain_id` to a Postgres table in place, so it is the last column there; on
        // SQLite, and in a table created since, it is the first. Writes name their columns either way.
        existing.sort_by_key(|(name, _)| name != "chain_id");
        let widening = widen(dialect, &table.name, &mut existing);
        check_table(dialect, timestamps, table, &existing, contracts)?;
        widenings.extend(widening);
    }
    let configured = |name: &str| contracts.iter().any(|c| c.name == name);
    let recorded = read::contract_records(sink, configured).await?;
    for contract in contracts {
        if let Some(record) = recorded.iter().find(|r| r.name == contract.name) {
            check_addresses(contract, record)?;
            check_events(contract, record)?;
            if record.checkpoint.is_some() {
                let key = filters_key(&chain_id, &contract.name);
                check_filters(contract, read::meta(sink, &key).await?.as_deref())?;
            }
        }
    }
    for widening in &widenings {
        tracing::info!(
            statement = %widening.sql,
            "widening a typed table's column an earlier version made narrower; this rewrites the table once \
             (interrupted, it is rolled back and done again at the next run)"
        );
    }
    let mut statements = widenings;
    statements.extend(
        tables
            .iter()
            .map(|table| create_table(dialect, timestamps, table)),
    );
    for contract in contracts {
        let recorded = recorded.iter().any(|r| r.name == contract.name);
        statements.push(record_contract(&chain_id, contract, recorded)?);
        statements.push(record_filters(&chain_id, contract));
    }
    sink.transaction(&statements).await?;
    sink.set_tables(tables);
    // Read back after the contracts are recorded: each batch is checked against them from now on.
    let checkpoints = read::checkpoints(sink).await?;
    *sink.nexts_mut() = super::continuity::Nexts::read_back(contracts, &checkpoints);
    Ok(())
}

/// The fixed columns of a typed table: `dialect.typed_fixed`, then `block_timestamp` when stored
/// (docs/schema.md: after `address`, before the event's parameters).
pub(super) fn typed_fixed(
    dialect: &Dialect,
    timestamps: Timestamps,
) -> Vec<(&'static str, &'static str)> {
    let mut fixed = dialect.typed_fixed.to_vec();
    if timestamps == Timestamps::Stored {
        fixed.push(("block_timestamp", dialect.timestamp_type));
    }
    fixed
}

/// `(name, type)` of every column of `table`, as the dialect's catalog spells them.
fn wanted_columns(
    dialect: &Dialect,
    timestamps: Timestamps,
    table: &TableSpec,
) -> Vec<(String, String)> {
    let fixed = typed_fixed(dialect, timestamps)
        .into_iter()
        .map(|(name, ty)| (name.to_owned(), ty.to_owned()));
    let params = table
        .columns
        .iter()
        .map(|c| (c.name.clone(), (dialect.sql_type)(c.kind).to_owned()));
    fixed.chain(params).collect()
}

/// The statements widening `table`'s columns of a type [`Dialect::widened`] names to the type
/// [`Dialect::typed_fixed`] gives them (Postgres: `log_index` from `integer` to `bigint`), with `existing`
/// (its columns as the catalog reports them) changed to what they will be. Run in `prepare`'s transaction,
/// after every check: a table refused for another reason is not altered, and an interrupted alteration
/// is rolled back whole and found again at the next run. Pure.
fn widen(dialect: &Dialect, table: &str, existing: &mut [(String, String)]) -> Vec<Statement> {
    let mut statements = Vec::new();
    for (name, ty) in existing.iter_mut() {
        let narrow = dialect
            .widened
            .iter()
            .any(|(column, earlier)| column == name && earlier.eq_ignore_ascii_case(ty));
        let wide = dialect
            .typed_fixed
            .iter()
            .find(|(column, _)| column == name);
        if let (true, Some(&(_, wide))) = (narrow, wide) {
            statements.push(Statement::new(
                "widening a typed table's column",
                format!(
                    "ALTER TABLE {} ALTER COLUMN {} TYPE {wide}",
                    quote_ident(table),
                    quote_ident(name)
                ),
                Vec::new(),
            ));
            wide.clone_into(ty);
        }
    }
    statements
}

/// Refuses a table name the database would cut, and a table that exists with other columns: other names,
/// another order or other types (a `uint64` that became a `uint256` changes a column's type only).
fn check_table(
    dialect: &Dialect,
    timestamps: Timestamps,
    table: &TableSpec,
    existing: &[(String, String)],
    contracts: &[ContractSpec],
) -> Result<(), Error> {
    if let Some((database, max)) = dialect.max_table_name {
        if table.name.len() > max {
            return Err(Error::Mismatch(format!(
                "table {} is longer than {database}'s {max}-byte limit on names, which would truncate it: \
                 shorten the contract's name",
                table.name
            )));
        }
    }
    let wanted = wanted_columns(dialect, timestamps, table);
    let same = |(name, ty): &(String, String), (w_name, w_ty): &(String, String)| {
        name == w_name && ty.eq_ignore_ascii_case(w_ty)
    };
    if existing.is_empty()
        || (existing.len() == wanted.len() && existing.iter().zip(&wanted).all(|(e, w)| same(e, w)))
    {
        return Ok(());
    }
    let owner = contracts
        .iter()
        .find(|c| {
            c.events
                .iter()
                .any(|e| read::split_event_record(e).is_some_and(|(_, name)| name == table.name))
        })
        .map_or("<contract>", |c| c.name.as_str());
    let show = |columns: &[(String, String)]| {
        columns
            .iter()
            .map(|(name, ty)| format!("{name} {ty}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(Error::Mismatch(format!(
        "table {} exists with columns ({}) but the config's ABI gives ({}): the event's ABI changed; \
         to rebuild the contract's tables from its start_block run `logslice sync --reindex {owner} --to ...`, \
         or restore the old ABI, or index into a new database",
        table.name,
        show(existing),
        show(&wanted)
    )))
}

/// Refuses a contract recorded with other addresses: its raw rows and checkpoint belong to those.
fn check_addresses(contract: &ContractSpec, record: &ContractRecord) -> Result<(), Error> {
    let configured: Vec<String> = contract.addresses.iter().map(hex::encode).collect();
    if record.addresses == configured {
        return Ok(());
    }
    let json = |addresses: &[String]| serde_json::to_string(addresses).expect("strings serialize");
    Err(Error::Mismatch(format!(
        "contract {name} was indexed with addresses {} and the config now says {}: give the new addresses a new \
         contract name, or run `logslice sync --reindex {name} --to ...` to drop what was indexed for it and \
         index the new addresses from its start_block",
        json(&record.addresses),
        json(&configured),
        name = contract.name,
    )))
}

/// Refuses a contract with a checkpoint whose table is recorded for another event, or for the same event
/// from another source (a factory child's events record their factory): its rows were chosen by the old one,
/// and the blocks below the checkpoint would never be read again for the new one.
fn check_events(contract: &ContractSpec, record: &ContractRecord) -> Result<(), Error> {
    if record.checkpoint.is_none() {
        return Ok(());
    }
    for configured in &contract.events {
        let Some((event, table)) = read::split_event_record(configured) else {
            continue;
        };
        let Some((before, _)) = record.events.iter().find(|(_, t)| *t == table) else {
            continue;
        };
        if *before != event {
            return Err(Error::Mismatch(format!(
                "table {table} of contract {name} was indexed for \"{before}\" and the config now says \"{event}\": \
                 run `logslice sync --reindex {name} --to ...` to drop what was indexed for it and index it again \
                 from its start_block, or restore the old setting",
                name = contract.name,
            )));
        }
    }
    Ok(())
}

/// The `meta` key under which a contract of chain `chain_id` (a [`Param::Int`]) records its filters:
/// `filters.<chain id>.<contract>` (migration 9 renamed the `filters.<contract>` of earlier versions).
pub(super) fn filters_key(chain_id: &Param, contract: &str) -> String {
    let Param::Int(chain_id) = chain_id else {
        unreachable!("a chain id is bound as an integer")
    };
    format!("filters.{chain_id}.{contract}")
}

/// Refuses other filters for a contract that has committed rows: they were fetched with the recorded ones,
/// so new filters would leave a gap (or keep rows the new ones exclude) below the checkpoint.
fn check_filters(contract: &ContractSpec, recorded: Option<&str>) -> Result<(), Error> {
    if recorded == contract.filters.as_deref() {
        return Ok(());
    }
    let shown = |filters: Option<&str>| filters.unwrap_or("none").to_owned();
    Err(Error::Mismatch(format!(
        "contract {name} was indexed with filters {} and the config now says {}: its rows were fetched with the \
         old filters, so run `logslice sync --reindex {name} --to ...` to drop what was indexed for it and index \
         it again from its start_block, or restore the old filters",
        shown(recorded),
        shown(contract.filters.as_deref()),
        name = contract.name,
    )))
}

/// The statement recording a contract's filters (checked to be the recorded ones, or the contract has no
/// rows yet), or forgetting them when it has none.
fn record_filters(chain_id: &Param, contract: &ContractSpec) -> Statement {
    let key = Param::Text(filters_key(chain_id, &contract.name));
    match &contract.filters {
        Some(filters) => Statement::new(
            "recording a contract's filters",
            "INSERT INTO meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            vec![key, Param::Text(filters.clone())],
        ),
        None => Statement::new(
            "recording a contract's filters",
            "DELETE FROM meta WHERE key = $1",
            vec![key],
        ),
    }
}

/// `CREATE TABLE IF NOT EXISTS` of a typed table: the fixed columns, one per parameter, the unique key.
fn create_table(dialect: &Dialect, timestamps: Timestamps, table: &TableSpec) -> Statement {
    let fixed: String = typed_fixed(dialect, timestamps)
        .iter()
        .map(|(name, ty)| format!("{name} {ty} NOT NULL, "))
        .collect();
    let params: String = table
        .columns
        .iter()
        .map(|c| format!("{} {}, ", quote_ident(&c.name), (dialect.sql_type)(c.kind)))
        .collect();
    let sql = format!(
        "CREATE TABLE IF NOT EXISTS {} ({fixed}{params}{}){}",
        quote_ident(&table.name),
        (dialect.typed_key)(&table.name),
        dialect.typed_table_options
    );
    Statement::new("creating a typed table", sql, Vec::new())
}

/// The statement recording a contract: its events and start block, and its addresses when it is new (a
/// recorded contract's addresses were checked to be the same).
fn record_contract(
    chain_id: &Param,
    contract: &ContractSpec,
    recorded: bool,
) -> Result<Statement, Error> {
    let addresses: Vec<String> = contract.addresses.iter().map(hex::encode).collect();
    let addresses = serde_json::to_string(&addresses).expect("strings serialize");
    let events = serde_json::to_string(&contract.events).expect("strings serialize");
    let start_block = int(
        "contracts",
        format_args!("name = {:?}", contract.name),
        "start_block",
        contract.start_block,
    )?;
    let name = Param::Text(contract.name.clone());
    Ok(if recorded {
        Statement::new(
            "recording a contract",
            "UPDATE contracts SET events = $1, start_block = $2 WHERE chain_id = $3 AND name = $4",
            vec![
                Param::Text(events),
                Param::Int(start_block),
                chain_id.clone(),
                name,
            ],
        )
    } else {
        Statement::new(
            "recording a contract",
            "INSERT INTO contracts (chain_id, name, addresses, events, start_block) \
             VALUES ($1, $2, $3, $4, $5)",
            vec![
                chain_id.clone(),
                name,
                Param::Text(addresses),
                Param::Text(events),
                Param::Int(start_block),
            ],
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(name, type)` pairs as the catalog reports them.
    fn columns(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|&(name, ty)| (name.to_owned(), ty.to_owned()))
            .collect()
    }

    fn check(dialect: &Dialect, existing: &[(&str, &str)], sql: &[&str], after: &[(&str, &str)]) {
        let mut existing = columns(existing);
        let statements = widen(dialect, "t", &mut existing);
        let got: Vec<&str> = statements.iter().map(|s| s.sql.as_str()).collect();
        assert_eq!(got, sql);
        assert_eq!(existing, columns(after));
    }

    #[test]
    fn an_integer_log_index_of_postgres_is_widened_and_nothing_else() {
        let pg = &crate::sink::postgres::DIALECT;
        check(
            pg,
            &[
                ("block_number", "bigint"),
                ("log_index", "integer"),
                ("n", "integer"),
            ],
            &[r#"ALTER TABLE "t" ALTER COLUMN "log_index" TYPE bigint"#],
            &[
                ("block_number", "bigint"),
                ("log_index", "bigint"),
                ("n", "integer"),
            ],
        );
        check(
            pg,
            &[("log_index", "bigint")],
            &[],
            &[("log_index", "bigint")],
        );
        check(pg, &[("log_index", "text")], &[], &[("log_index", "text")]);
        check(pg, &[], &[], &[]);
        let sqlite = &crate::sink::sqlite::DIALECT;
        check(
            sqlite,
            &[("log_index", "INTEGER")],
            &[],
            &[("log_index", "INTEGER")],
        );
    }
}
