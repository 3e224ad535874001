-- logslice schema, Postgres. Typed per-event tables are created at startup from the config (their columns
-- depend on the ABI); everything fixed lives here. Tables are created unqualified: the sink sets
-- `search_path` to `database.schema` (when given) on every connection, so they land in that schema.
--
-- Hashes, addresses and data are TEXT holding `0x` + lowercase hex, not BYTEA: both backends then hold
-- byte-identical values, a query written for one runs unchanged on the other (`WHERE address = '0x...'`),
-- and psql shows what a block explorer shows. The cost is about twice the bytes of BYTEA for those columns.

-- Every indexed log, raw.
CREATE TABLE logs (
    block_number      BIGINT  NOT NULL,
    block_hash        TEXT    NOT NULL,
    transaction_hash  TEXT    NOT NULL,
    transaction_index INTEGER NOT NULL,
    log_index         INTEGER NOT NULL,
    address           TEXT    NOT NULL,
    topic0            TEXT,
    topic1            TEXT,
    topic2            TEXT,
    topic3            TEXT,
    data              TEXT    NOT NULL,
    UNIQUE (block_hash, log_index)
);
CREATE INDEX logs_address_topic0_block_number ON logs (address, topic0, block_number);
CREATE INDEX logs_block_number ON logs (block_number);

-- Per contract: the highest block whose logs are committed, moved in the same transaction as those rows.
CREATE TABLE checkpoints (
    contract     TEXT   PRIMARY KEY,
    block_number BIGINT NOT NULL
);

-- The contracts the database was built for, so that a changed address or ABI is noticed.
CREATE TABLE contracts (
    name        TEXT   PRIMARY KEY,
    addresses   TEXT   NOT NULL,
    events      TEXT   NOT NULL,
    start_block BIGINT NOT NULL
);

-- Blocks above finality with their hashes, so a reorg is detected even across restarts.
CREATE TABLE block_hashes (
    block_number BIGINT PRIMARY KEY,
    block_hash   TEXT   NOT NULL,
    parent_hash  TEXT   NOT NULL
);

-- Facts about the database: chain_id, schema owner.
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
