-- The raw table keyed by `(block_number, log_index)`, the identity `interface.md` gives a log (the database
-- holds only canonical logs), as a WITHOUT ROWID table: its rows are stored in key order, so a backfill in
-- block order appends to one B-tree instead of inserting into a table, a unique index on the random
-- `(block_hash, log_index)` and a `block_number` index. Both indexes go: the key serves block ranges.
--
-- The rows are copied by `sink::migrate::finish_logs_rebuild` after this migration, in one transaction of
-- its own with progress shown, which also creates the `(address, topic0, block_number)` index once the
-- rows are in. Until then they wait in `logs_before_0004`; an interrupted copy is started again when the
-- database is next opened. The copy there knows whether this database keeps `block_timestamp`
-- (`block_timestamps = false` dropped it), which SQL here cannot ask.
DROP INDEX logs_address_topic0_block_number;
DROP INDEX logs_block_number;
ALTER TABLE logs RENAME TO logs_before_0004;
CREATE TABLE logs (
    block_number      INTEGER NOT NULL,
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
    block_timestamp   INTEGER,
    PRIMARY KEY (block_number, log_index)
) WITHOUT ROWID;
