//! Storage: the schema of `docs/schema.md`, and one transaction per [`Batch`] holding its raw rows, typed rows
//! and checkpoints. The sink knows batches, checkpoints and block ranges; it never sees a URL, an
//! `rpc::Error` or a transport. Every typed value becomes the text form of `docs/schema.md` here, with one
//! function each way ([`hex`]).
//!
//! What both backends do is written once: `prepare` (the typed tables and the checks that refuse a changed
//! chain, contract or ABI, with one wording), `read` (every record read back is checked, never replaced by
//! a default) and `write` (the statements of a batch's bookkeeping, a rollback and a reindex). `sqlite` and
//! `postgres` hold only what differs: the dialect, the bulk inserts and connection handling.

mod chains;
mod continuity;
mod encode;
mod error;
mod in_turn;
mod indexes;
mod migrate;
mod migrate_chain;
mod parts;
mod pg_copy;
mod pg_unnest;
mod postgres;
mod prepare;
mod read;
mod sqlite;
mod sqlite_bind;
mod sqlite_rows;
mod sqlite_wal;
mod timestamps;
mod transactions;
mod write;

use std::collections::{BTreeMap, HashMap};

use alloy_primitives::{Address, B256};

use crate::decode::{Column, Values};
use crate::primitives::{BlockNumber, BlockRange, Log, LogKey};

use prepare::Dialect;
use write::{Param, Statement};

pub use encode::{Encoded, Encoder};
pub use error::Error;
pub use in_turn::{Committed, InTurn};
pub use indexes::{
    IndexState, HOLD_ENV as HOLD_INDEX_BUILD_ENV, HOLD_MESSAGE as HOLD_INDEX_BUILD_MESSAGE,
    META_DEFERRED_INDEXES, META_INDEX_BUILD_STARTED,
};
pub use migrate_chain::{
    HOLD_ENV as HOLD_CHAIN_MIGRATION_ENV, HOLD_MESSAGE as HOLD_CHAIN_MIGRATION_MESSAGE,
};
pub use parts::{streams, OpenBatch, HOLD_PARTS_ENV, HOLD_PARTS_MESSAGE};
pub use postgres::{PostgresSink, COMMIT_ATTEMPTS};
pub use sqlite::SqliteSink;
pub use timestamps::{Timestamps, META_BLOCK_TIMESTAMPS};
pub use transactions::{TransactionRow, Transactions, META_TRANSACTIONS};

/// The unique key of every typed table created from now on, on both backends: the raw table's identity
/// (`docs/schema.md`: the database holds only canonical logs, so `(block_number, log_index)` names one log;
/// an orphaned block's rows are deleted before its replacement is written). In block order a backfill
/// appends to it, and its prefix serves `block_number` ranges, so typed tables need no other index.
///
/// Tables created before it keep working as they are: unique on `(block_number, log_index, block_hash)`
/// (the key until the raw table's, whose hash column made Postgres's index three times the size), or on
/// `(block_hash, log_index)` with a `block_number` index. Inserts name no conflict target and deletes give
/// all three columns, so the same statements serve every layout.
///
/// Migration 9 put `chain_id` first (`docs/schema.md`: many chains in one database, rows told apart by it),
/// in every table, typed ones included.
const TYPED_KEY: &str = "chain_id, block_number, log_index";

fn query_error(doing: &'static str) -> impl FnOnce(sqlx::Error) -> Error {
    move |source| Error::Query { doing, source }
}

/// A typed table of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSpec {
    /// Table name.
    pub name: String,
    /// Parameter columns (after the fixed ones).
    pub columns: Vec<Column>,
}

/// A contract as the database remembers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractSpec {
    /// Name.
    pub name: String,
    /// Addresses.
    pub addresses: Vec<Address>,
    /// Event signatures with their tables, e.g. `Transfer(address,address,uint256) -> usdc_transfer`.
    pub events: Vec<String>,
    /// Start block.
    pub start_block: BlockNumber,
    /// The canonical text of its `filters` (`None`: unfiltered): a change is refused once it has a
    /// checkpoint, since the rows it holds were fetched with the old filters.
    pub filters: Option<String>,
}

/// One decoded row of a typed table.
#[derive(Debug, Clone, PartialEq)]
pub struct TypedRow {
    /// Index into the tables given to [`Sink::prepare`].
    pub table: usize,
    /// Index into [`Batch::logs`] of the log it decodes.
    pub log: usize,
    /// One value per parameter column.
    pub values: Values,
}

/// A checkpoint: the highest block of a contract whose logs are committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Contract name.
    pub contract: String,
    /// Block.
    pub block: BlockNumber,
}

/// What one transaction commits.
#[derive(Debug, Clone, Default)]
pub struct Batch {
    /// The ranges of blocks it covers, in block order and contiguous (checked before it is written: a
    /// checkpoint never moves past a block no batch covered); [`Batch::range`] spans them.
    pub ranges: Vec<BlockRange>,
    /// Raw logs.
    pub logs: Vec<Log>,
    /// Typed rows.
    pub typed: Vec<TypedRow>,
    /// Checkpoints moved by this batch.
    pub checkpoints: Vec<Checkpoint>,
    /// Blocks above finality to remember (hash and parent), so a later reorg is detected.
    pub blocks: Vec<TrackedBlock>,
    /// Remembered blocks below this number are forgotten (they are final now).
    pub forget_blocks_below: Option<BlockNumber>,
    /// Logs the node reported `removed: true`: deleted if present, never inserted.
    pub removed: Vec<LogKey>,
    /// Factory children created in the batch's blocks (`factory_children`; kept if already recorded).
    pub children: Vec<ChildRow>,
    /// Rows of `transactions` (`[sync] transactions = true`): the transactions of the batch's logs.
    pub transactions: Vec<TransactionRow>,
    /// Blocks of the batch whose logs were read from their receipts (`receipt_blocks`, counted by
    /// `logslice status`).
    pub receipt_blocks: Vec<BlockNumber>,
}

/// A contract created by a factory, as `factory_children` records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildRow {
    /// The `[[contracts]]` entry it belongs to.
    pub contract: String,
    /// Its address.
    pub address: Address,
    /// Block of the creating log.
    pub block_number: BlockNumber,
    /// That block's hash.
    pub block_hash: B256,
    /// The creating log's index.
    pub log_index: u64,
    /// The factory that emitted the creating log.
    pub factory_address: Address,
}

impl Batch {
    /// The blocks covered, from the first range's start to the last one's end; `None` without ranges.
    pub fn range(&self) -> Option<BlockRange> {
        let (first, last) = (self.ranges.first()?, self.ranges.last()?);
        BlockRange::new(first.start(), last.end())
    }

    /// The typed rows of table `table`, in batch order.
    pub(crate) fn typed_rows(&self, table: usize) -> Vec<&TypedRow> {
        self.typed.iter().filter(|row| row.table == table).collect()
    }
}

/// A block above finality whose hash the database keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrackedBlock {
    /// Number.
    pub number: BlockNumber,
    /// Hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
}

/// What a rollback removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RollbackReport {
    /// Raw log rows deleted.
    pub logs: u64,
    /// Typed rows deleted.
    pub typed_rows: u64,
    /// Remembered blocks forgotten.
    pub blocks: u64,
    /// Factory children forgotten (their creating log was orphaned).
    pub children: u64,
    /// Blocks read from receipts forgotten (`receipt_blocks`).
    pub receipt_blocks: u64,
}

/// A contract as the database records it, for `logslice status`: read-only, no config needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractStatus {
    /// Name.
    pub name: String,
    /// Addresses (`0x` + lowercase hex), as recorded.
    pub addresses: Vec<String>,
    /// Start block, as recorded.
    pub start_block: BlockNumber,
    /// The checkpoint; `None` before the first committed batch.
    pub checkpoint: Option<BlockNumber>,
    /// Its event tables.
    pub tables: Vec<TableStatus>,
    /// Children recorded in `factory_children` (a contract created by a factory; 0 otherwise).
    pub children: u64,
}

/// One event table of a [`ContractStatus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStatus {
    /// The event's signature, e.g. `Transfer(address,address,uint256)`.
    pub event: String,
    /// Table name.
    pub table: String,
    /// Rows in the table; `None` when the table does not exist.
    pub rows: Option<u64>,
}

/// What a [`Sink::reindex`] removes: one contract's name, its configured addresses and tables. What the
/// database recorded for it (older addresses, tables of an older ABI) is removed too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReindexSpec {
    /// Contract name.
    pub name: String,
    /// Configured addresses.
    pub addresses: Vec<Address>,
    /// Configured table names.
    pub tables: Vec<String>,
}

/// What a [`Sink::reindex`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReindexReport {
    /// Tables dropped; a table another chain also has rows in is kept, with this chain's rows deleted.
    pub tables: Vec<String>,
    /// Raw rows deleted.
    pub raw_rows: u64,
}

/// The `meta` key of the chain id the database was built from, before migration 9 moved it to `chains`
/// (as the chain named [`DEFAULT_CHAIN`]). Read only by that migration.
pub const META_CHAIN_ID: &str = "chain_id";
/// Key of the last reorg seen, as text (written by the follower). Per chain since migration 9: [`Sink::meta`]
/// and [`Sink::set_meta`] read and write it in the bound chain's row of `chains` (column `last_reorg`).
pub const META_LAST_REORG: &str = "last_reorg";
/// Key of the providers as the last indexing process reported them (JSON), for `status`. Per chain, as
/// [`META_LAST_REORG`] (column `providers` of `chains`).
pub const META_PROVIDERS: &str = "providers";
/// The name of the one chain of a config with `[node]` alone (`interface.md`, "Many chains").
pub const DEFAULT_CHAIN: &str = crate::config::DEFAULT_CHAIN;

/// The storage backend.
pub enum Sink {
    /// SQLite (the embedded default).
    Sqlite(SqliteSink),
    /// Postgres (one database, or one schema of it).
    Postgres(PostgresSink),
}

impl Sink {
    /// Creates the typed tables that do not exist yet and records the contracts, in one transaction.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when a table exists with other columns (names or types), or a contract is recorded
    /// with other addresses; nothing is then changed. [`Error::Invalid`] when a configured contract's record
    /// cannot be read; [`Error::Query`].
    pub async fn prepare(
        &mut self,
        tables: &[TableSpec],
        contracts: &[ContractSpec],
    ) -> Result<(), Error> {
        prepare::prepare(self, tables, contracts).await
    }

    /// Makes `logs.block_timestamp` and the typed tables created from now on follow `wanted`
    /// (`[sync] block_timestamps`), recording the choice on first use. Call before [`Sink::prepare`]; a
    /// sink never told keeps [`Timestamps::Omitted`]'s layout.
    ///
    /// # Errors
    /// [`Error::Mismatch`] naming the fixes when the database holds rows written under the other choice,
    /// or by a version without timestamps while they are wanted; [`Error::Query`].
    pub async fn settle_timestamps(&mut self, wanted: Timestamps) -> Result<(), Error> {
        timestamps::settle(self, wanted).await
    }

    /// Records whether the `transactions` table is kept (`[sync] transactions`).
    ///
    /// # Errors
    /// [`Error::Mismatch`] naming `--reindex` when it is wanted for a database holding logs indexed without
    /// it; [`Error::Query`].
    pub async fn settle_transactions(&mut self, wanted: Transactions) -> Result<(), Error> {
        transactions::settle(self, wanted).await
    }

    /// Whether batches carry `block_timestamp` ([`Sink::settle_timestamps`]).
    pub fn timestamps(&self) -> Timestamps {
        match self {
            Sink::Sqlite(s) => s.timestamps,
            Sink::Postgres(s) => s.timestamps,
        }
    }

    /// Whether the `transactions` table exists, as [`Sink::settle_transactions`] left it; before that, as
    /// migration 0005 left it (it exists).
    fn settled_transactions_table(&self) -> bool {
        match self {
            Sink::Sqlite(s) => s.transactions_table,
            Sink::Postgres(s) => s.transactions_table,
        }
        .unwrap_or(true)
    }

    fn set_transactions_table(&mut self, exists: bool) {
        match self {
            Sink::Sqlite(s) => s.transactions_table = Some(exists),
            Sink::Postgres(s) => s.transactions_table = Some(exists),
        }
    }

    fn set_timestamps(&mut self, timestamps: Timestamps) {
        match self {
            Sink::Sqlite(s) => s.timestamps = timestamps,
            Sink::Postgres(s) => s.timestamps = timestamps,
        }
    }

    /// Every contract's checkpoint (of the bound chain).
    ///
    /// # Errors
    /// [`Error::Unbound`] before [`Sink::bind_chain`]; [`Error::Query`]; [`Error::Invalid`] naming the row
    /// when one is not a block number.
    pub async fn checkpoints(&self) -> Result<HashMap<String, BlockNumber>, Error> {
        read::checkpoints(self).await
    }

    /// Commits a batch in one transaction: raw rows, typed rows, checkpoints. Idempotent: a log already
    /// stored (the raw table's `(block_number, log_index)`, a typed table's key) is kept as it is. Postgres retries a batch whose connection was lost on a fresh one.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::ConnectionLost`] when every attempt lost its connection;
    /// [`Error::Malformed`] when a typed row does not fit the prepared tables; [`Error::Invalid`] when a
    /// number does not fit its column. Nothing of the batch is then committed, except that a connection lost
    /// during the final `COMMIT` leaves unknown whether it landed: committing the batch again is harmless
    /// either way.
    ///
    /// # Cancel safety
    /// Cancel safe: a transaction dropped before its commit rolls back.
    pub async fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        let encoded = self.encoder().encode(batch)?;
        self.commit_encoded(batch, encoded).await
    }

    /// Every factory child recorded, in the order they were created.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] naming the row when one cannot be right.
    pub async fn factory_children(&self) -> Result<Vec<ChildRow>, Error> {
        read::factory_children(self).await
    }

    /// The remembered blocks above finality, by number.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] naming the row when a number or hash cannot be right.
    pub async fn tracked_blocks(&self) -> Result<BTreeMap<BlockNumber, TrackedBlock>, Error> {
        read::tracked_blocks(self).await
    }

    /// Rolls back to `ancestor`: deletes raw and typed rows of later blocks, moves checkpoints above it back
    /// to it, forgets later blocks and records the reorg, all in one transaction.
    ///
    /// # Errors
    /// [`Error::Query`]; nothing is then changed.
    pub async fn rollback(
        &mut self,
        ancestor: BlockNumber,
        note: &str,
    ) -> Result<RollbackReport, Error> {
        let report = write::rollback(self, ancestor, note).await?;
        self.nexts_mut().rolled_back(ancestor);
        Ok(report)
    }

    /// A value of the `meta` table; for a per-chain key ([`META_LAST_REORG`], [`META_PROVIDERS`]), the
    /// bound chain's.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Unbound`] for a per-chain key before [`Sink::bind_chain`].
    pub async fn meta(&self, key: &str) -> Result<Option<String>, Error> {
        match chains::column_of(key) {
            Some(column) => chains::fact(self, column).await,
            None => read::meta(self, key).await,
        }
    }

    /// Sets `meta.<key>` to `value`, alone in its transaction (what a running process reports about
    /// itself, such as its providers, for `status`).
    ///
    /// # Errors
    /// [`Error::Query`].
    pub async fn set_meta(&self, key: &str, value: String) -> Result<(), Error> {
        if let Some(column) = chains::column_of(key) {
            let statement = chains::set_fact(self, column, value)?;
            return self.transaction(&[statement]).await.map(drop);
        }
        let statement = Statement::new(
            "recording what this process reports",
            "INSERT INTO meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            vec![Param::Text(key.into()), Param::Text(value)],
        );
        self.transaction(&[statement]).await.map(drop)
    }

    /// The chain id the sink is bound to; unbound, the one recorded for [`DEFAULT_CHAIN`] (the one chain of a
    /// config with `[node]` alone); `None` before the first sync.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] when the stored value is not a number.
    pub async fn chain_id(&self) -> Result<Option<u64>, Error> {
        match self.bound_chain() {
            Some(chain_id) => Ok(Some(chain_id)),
            None => chains::recorded(self, DEFAULT_CHAIN).await,
        }
    }

    /// The last reorg seen on the bound chain, as the follower wrote it; `None` when there was none.
    ///
    /// # Errors
    /// [`Error::Unbound`] before [`Sink::bind_chain`]; [`Error::Query`].
    pub async fn last_reorg(&self) -> Result<Option<String>, Error> {
        self.meta(META_LAST_REORG).await
    }

    /// How many stored blocks had their logs read from their receipts (over the node's result cap for one
    /// address and topic0): the rows of `receipt_blocks`, written with those logs and rolled back with
    /// them.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] when the count is not a number.
    pub async fn receipt_blocks(&self) -> Result<u64, Error> {
        read::receipt_blocks(self).await
    }

    /// Drops the secondary indexes (`logs (address, topic0, block_number)`, `transactions
    /// (transaction_hash)`) and records them as deferred in `meta`, in one transaction, so that a long
    /// backfill does not maintain them row by row; [`Sink::build_indexes`] builds them. Idempotent. The
    /// names deferred.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] when `meta` names an unknown index. Nothing is then changed.
    pub async fn defer_indexes(&mut self) -> Result<Vec<String>, Error> {
        indexes::defer(self).await
    }

    /// Builds the deferred secondary indexes, each in one transaction with its removal from `meta` (a query
    /// sees no index or a whole one), after recording in a transaction of its own when the build started
    /// (for `status`). Each index built, with how long it took; nothing when none was deferred.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] as [`Sink::index_state`]. Indexes built before the error stay.
    pub async fn build_indexes(&mut self) -> Result<Vec<(String, std::time::Duration)>, Error> {
        indexes::build(self).await
    }

    /// The state of the secondary indexes: deferred ones, and whether a build of them started.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] when `meta` names an unknown index or a start time that is not a
    /// number.
    pub async fn index_state(&self) -> Result<IndexState, Error> {
        indexes::state(self).await
    }

    /// Every contract the database records, in name order, with its checkpoint and the row count of each
    /// event table. Read-only.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] naming the row when a record cannot be read.
    pub async fn status(&self) -> Result<Vec<ContractStatus>, Error> {
        read::status(self).await
    }

    /// Forgets contracts so that the next sync indexes them from their start, in one transaction: drops
    /// their typed tables (configured and recorded), deletes their raw rows (by every configured and
    /// recorded address), their checkpoints and their `contracts` records.
    ///
    /// # Errors
    /// [`Error::Mismatch`] when a contract not being reindexed records one of the addresses (its raw rows
    /// would go too); [`Error::Invalid`] when a record cannot be read (its addresses would be unknown);
    /// [`Error::Query`]. Nothing is changed then.
    pub async fn reindex(&mut self, contracts: &[ReindexSpec]) -> Result<ReindexReport, Error> {
        let report = write::reindex(self, contracts).await?;
        for contract in contracts {
            self.nexts_mut().forget(&contract.name);
        }
        Ok(report)
    }

    /// Closes the connections cleanly.
    pub async fn close(self) {
        match self {
            Sink::Sqlite(s) => s.close().await,
            Sink::Postgres(s) => s.close().await,
        }
    }

    // What a backend provides to the shared code: its dialect, reads and transactions of statements.

    fn dialect(&self) -> &'static Dialect {
        match self {
            Sink::Sqlite(_) => &sqlite::DIALECT,
            Sink::Postgres(_) => &postgres::DIALECT,
        }
    }

    /// The chain the sink is bound to.
    fn chain(&self) -> Option<&chains::Bound> {
        match self {
            Sink::Sqlite(s) => s.chain.as_ref(),
            Sink::Postgres(s) => s.chain.as_ref(),
        }
    }

    /// The bound chain id as a statement's parameter.
    ///
    /// # Errors
    /// [`Error::Unbound`] naming what was asked before [`Sink::bind_chain`].
    fn chain_param(&self, doing: &'static str) -> Result<Param, Error> {
        self.chain()
            .map(|chain| Param::Int(chain.column))
            .ok_or(Error::Unbound(doing))
    }

    /// The tables given to the last [`Sink::prepare`].
    fn tables(&self) -> &[TableSpec] {
        match self {
            Sink::Sqlite(s) => &s.tables,
            Sink::Postgres(s) => &s.tables,
        }
    }

    /// The prepared contracts' next blocks ([`continuity::Nexts`]).
    fn nexts_mut(&mut self) -> &mut continuity::Nexts {
        match self {
            Sink::Sqlite(s) => &mut s.nexts,
            Sink::Postgres(s) => &mut s.nexts,
        }
    }

    /// Binds to `chain`; what `prepare` set up for another chain is forgotten.
    fn set_chain(&mut self, chain: chains::Bound) {
        let (bound, tables, nexts) = match self {
            Sink::Sqlite(s) => (&mut s.chain, &mut s.tables, &mut s.nexts),
            Sink::Postgres(s) => (&mut s.chain, &mut s.tables, &mut s.nexts),
        };
        if bound.as_ref().is_some_and(|b| b.id != chain.id) {
            tables.clear();
            *nexts = continuity::Nexts::default();
        }
        *bound = Some(chain);
    }

    fn set_tables(&mut self, tables: &[TableSpec]) {
        match self {
            Sink::Sqlite(s) => s.tables = tables.to_vec(),
            Sink::Postgres(s) => s.tables = tables.to_vec(),
        }
    }

    /// The rows of a read-only query, every column as text (numbers are cast in the SQL): one way in for
    /// every value the shared code reads, so [`read`] checks each.
    async fn fetch(&self, doing: &'static str, sql: &str, params: &[Param]) -> Result<Rows, Error> {
        match self {
            Sink::Sqlite(s) => s.fetch(doing, sql, params).await,
            Sink::Postgres(s) => s.fetch(doing, sql, params).await,
        }
    }

    /// Runs `statements` in one transaction; the rows each affected.
    async fn transaction(&self, statements: &[Statement]) -> Result<Vec<u64>, Error> {
        self.transaction_then(statements, async {}).await
    }

    /// [`Sink::transaction`], awaiting `before_commit` after the statements and before the commit.
    async fn transaction_then(
        &self,
        statements: &[Statement],
        before_commit: impl std::future::Future<Output = ()>,
    ) -> Result<Vec<u64>, Error> {
        match self {
            Sink::Sqlite(s) => s.transaction(statements, before_commit).await,
            Sink::Postgres(s) => s.transaction(statements, before_commit).await,
        }
    }
}

/// Rows of [`Sink::fetch`]: each a column list, `None` for NULL.
type Rows = Vec<Vec<Option<String>>>;

/// The text forms of `docs/schema.md`: `0x` + lowercase hex.
pub mod hex {
    /// Bytes as `0x` + lowercase hex (`0x` when empty).
    pub fn encode(bytes: impl AsRef<[u8]>) -> String {
        alloy_primitives::hex::encode_prefixed(bytes)
    }

    /// Bytes as `0x` + lowercase hex, appended to `out` in place (no `String` per value): the encoders of
    /// both backends' bulk rows (`pg_copy`, `sqlite_rows`).
    pub(crate) fn encode_into(bytes: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(b"0x");
        let start = out.len();
        out.resize(start + 2 * bytes.len(), 0);
        alloy_primitives::hex::encode_to_slice(bytes, &mut out[start..])
            .expect("the slice is twice the input's length");
    }

    /// `0x` + hex back to bytes.
    ///
    /// # Errors
    /// When the text is not `0x` + an even number of hex digits.
    pub fn decode(text: &str) -> Result<Vec<u8>, String> {
        let digits = text
            .strip_prefix("0x")
            .ok_or_else(|| format!("{text:?} lacks 0x"))?;
        alloy_primitives::hex::decode(digits).map_err(|e| format!("{text:?}: {e}"))
    }
}

/// `name` as a quoted SQL identifier (`"` doubled), the same on both backends, so case and reserved words
/// survive.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `i64` for a number of a batch, as both databases store them.
///
/// # Panics
/// When `n` does not fit: [`write::check`] refuses such a batch before any statement is built.
fn to_i64(n: u64) -> i64 {
    i64::try_from(n).expect("numbers of a batch fit in i64 (checked by write::check)")
}
