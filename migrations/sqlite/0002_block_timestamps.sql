-- `[sync] block_timestamps` (on by default): the unix seconds of each log's block. Nullable because rows
-- written by an earlier version have none; the sink refuses such a database (naming --reindex) rather than
-- leave NULLs behind, drops the column on a database indexed with `block_timestamps = false`, and every
-- batch it writes with timestamps on carries one for each log. Typed tables get theirs when created.
ALTER TABLE logs ADD COLUMN block_timestamp INTEGER;
