-- Many chains in one database (interface.md, "Many chains"): every table's rows are told apart by
-- `chain_id`, the chain's `eth_chainId`, the first column of every key. `chains` names each chain as the
-- config does (`default` for a config with `[node]` alone) and holds what is per chain beside the rows:
-- the last reorg seen and the providers' report, `meta` keys until now. It replaces `meta.chain_id`.
--
-- In place, in this migration's one transaction (interrupted, nothing of it is kept and it runs again at
-- the next open): `ADD COLUMN ... NOT NULL DEFAULT <id>` only records the default in the catalog
-- (Postgres 11 and later), the default is dropped again, and each key is rebuilt with `chain_id` first,
-- which reads its table once (`sink::migrate` says so, with the row count, before it starts). `<id>` is
-- the chain id the database recorded in `meta.chain_id`, so the block below reads it. The typed tables,
-- which no migration knows by name, are the tables holding every fixed column of one (`block_number`,
-- `block_hash`, `transaction_hash`, `log_index`, `address`) besides `logs`. `sink::migrate` refuses a
-- database holding rows but no chain id before this runs; the block refuses it too.
CREATE TABLE chains (
    chain_id   BIGINT PRIMARY KEY,
    name       TEXT   NOT NULL UNIQUE,
    last_reorg TEXT,
    providers  TEXT
);

DO $migration$
DECLARE
    recorded  TEXT;
    id        BIGINT;
    tbl       TEXT;
    old_key   TEXT;
    fixed     TEXT[] := ARRAY['logs', 'checkpoints', 'contracts', 'block_hashes', 'factory_children',
                              'transactions', 'receipt_blocks'];
BEGIN
    SELECT value INTO recorded FROM meta WHERE key = 'chain_id';
    IF recorded IS NULL THEN
        IF EXISTS (SELECT 1 FROM logs) OR EXISTS (SELECT 1 FROM checkpoints)
           OR EXISTS (SELECT 1 FROM contracts) OR EXISTS (SELECT 1 FROM block_hashes) THEN
            RAISE EXCEPTION 'the database holds indexed rows but no chain id (meta.chain_id), so they cannot be '
                'told apart by chain: record the chain id of the node they came from with INSERT INTO meta '
                '(key, value) VALUES (''chain_id'', ''<eth_chainId>''), or index into a new database';
        END IF;
        -- No rows to tag: the default only serves the ALTERs below.
        id := 0;
    ELSE
        id := recorded::bigint;
        INSERT INTO chains (chain_id, name, last_reorg, providers) VALUES (
            id, 'default',
            (SELECT value FROM meta WHERE key = 'last_reorg'),
            (SELECT value FROM meta WHERE key = 'providers'));
    END IF;
    DELETE FROM meta WHERE key IN ('chain_id', 'last_reorg', 'providers');
    -- A contract's filters are recorded per chain: `filters.<chain id>.<contract>`.
    UPDATE meta SET key = 'filters.' || id || '.' || substr(key, 9) WHERE key LIKE 'filters.%';

    -- Every table gets the column, the chain's rows their chain id.
    FOR tbl IN
        SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind = 'r'
          AND (c.relname::text = ANY (fixed) OR (
              SELECT count(*) FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
                AND a.attname IN ('block_number', 'block_hash', 'transaction_hash', 'log_index', 'address')
          ) = 5)
    LOOP
        EXECUTE format('ALTER TABLE %I ADD COLUMN chain_id BIGINT NOT NULL DEFAULT %s', tbl, id);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN chain_id DROP DEFAULT', tbl);
        IF NOT (tbl = ANY (fixed)) THEN
            -- A typed table: its unique key (of whichever earlier layout) becomes the chain's typed key,
            -- under the name it had (`<table>_key`, or the hashed name of a long table).
            old_key := NULL;
            FOR old_key IN
                SELECT conname::text FROM pg_constraint
                WHERE conrelid = format('%I', tbl)::regclass AND contype IN ('u', 'p')
            LOOP
                EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', tbl, old_key);
            END LOOP;
            EXECUTE format('DROP INDEX IF EXISTS %I', tbl || '_block_number');
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I UNIQUE (chain_id, block_number, log_index)',
                           tbl, coalesce(old_key, left(tbl, 59) || '_key'));
        END IF;
    END LOOP;
END
$migration$;

ALTER TABLE logs DROP CONSTRAINT logs_pkey;
ALTER TABLE logs ADD CONSTRAINT logs_pkey PRIMARY KEY (chain_id, block_number, log_index);
ALTER TABLE checkpoints DROP CONSTRAINT checkpoints_pkey;
ALTER TABLE checkpoints ADD CONSTRAINT checkpoints_pkey PRIMARY KEY (chain_id, contract);
ALTER TABLE contracts DROP CONSTRAINT contracts_pkey;
ALTER TABLE contracts ADD CONSTRAINT contracts_pkey PRIMARY KEY (chain_id, name);
ALTER TABLE block_hashes DROP CONSTRAINT block_hashes_pkey;
ALTER TABLE block_hashes ADD CONSTRAINT block_hashes_pkey PRIMARY KEY (chain_id, block_number);
ALTER TABLE factory_children DROP CONSTRAINT factory_children_pkey;
ALTER TABLE factory_children ADD CONSTRAINT factory_children_pkey PRIMARY KEY (chain_id, contract, address);
DROP INDEX factory_children_block_number;
CREATE INDEX factory_children_block_number ON factory_children (chain_id, block_number);
ALTER TABLE receipt_blocks DROP CONSTRAINT receipt_blocks_pkey;
ALTER TABLE receipt_blocks ADD CONSTRAINT receipt_blocks_pkey PRIMARY KEY (chain_id, block_number);
-- `transactions` is absent from a database that never had `[sync] transactions` on (`sink::transactions`).
ALTER TABLE IF EXISTS transactions DROP CONSTRAINT IF EXISTS transactions_pkey;
ALTER TABLE IF EXISTS transactions
    ADD CONSTRAINT transactions_pkey PRIMARY KEY (chain_id, block_number, transaction_index);
