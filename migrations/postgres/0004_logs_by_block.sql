-- The raw table keyed by `(block_number, log_index)`, the identity `interface.md` gives a log (the database
-- holds only canonical logs): a backfill in block order appends to this key, where the unique key on the
-- random `(block_hash, log_index)` it replaces touched a different index page for almost every row. The
-- `block_number` index goes too: the key's prefix serves block ranges.
--
-- Building the key reads the table once; `sink::migrate` says so, with the row count, before it starts.
ALTER TABLE logs DROP CONSTRAINT IF EXISTS logs_block_hash_log_index_key;
DROP INDEX IF EXISTS logs_block_number;
ALTER TABLE logs ADD CONSTRAINT logs_pkey PRIMARY KEY (block_number, log_index);
