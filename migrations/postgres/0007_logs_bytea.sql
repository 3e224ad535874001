-- The raw table's hashes, addresses, topics and data as BYTEA (interface.md allows TEXT or BYTEA in
-- Postgres): half the bytes of `0x` + hex text. A backfill into Postgres spends most of its time on the
-- bytes it writes (each new heap page extended, then the WAL holding the same rows), so about 45% fewer
-- bytes per raw row is about a third more logs per second (docs/BENCHMARKS.md). The typed tables keep hex
-- TEXT, as interface.md fixes it for them. Query with `'\x...'::bytea` or `decode('...', 'hex')`, and read
-- as text with `'0x' || encode(address, 'hex')`.
--
-- Every value stored so far is `0x` + lowercase hex (`data` of an empty log is `0x`): `decode` of what
-- follows the prefix gives its bytes exactly. This rewrites the table and its indexes once;
-- `sink::migrate` says so, with the row count, before it starts.
ALTER TABLE logs
    ALTER COLUMN block_hash       TYPE BYTEA USING decode(substr(block_hash, 3), 'hex'),
    ALTER COLUMN transaction_hash TYPE BYTEA USING decode(substr(transaction_hash, 3), 'hex'),
    ALTER COLUMN address          TYPE BYTEA USING decode(substr(address, 3), 'hex'),
    ALTER COLUMN topic0           TYPE BYTEA USING decode(substr(topic0, 3), 'hex'),
    ALTER COLUMN topic1           TYPE BYTEA USING decode(substr(topic1, 3), 'hex'),
    ALTER COLUMN topic2           TYPE BYTEA USING decode(substr(topic2, 3), 'hex'),
    ALTER COLUMN topic3           TYPE BYTEA USING decode(substr(topic3, 3), 'hex'),
    ALTER COLUMN data             TYPE BYTEA USING decode(substr(data, 3), 'hex');
