-- `log_index` and `transaction_index` as BIGINT (interface.md): some chains number logs past 2^31
-- (0xffffffe2 is seen), which INTEGER cannot hold. SQLite's INTEGER has always held 64 bits, so this
-- migration is Postgres's alone. The typed tables, which no migration knows by name, are widened by
-- `sink::prepare` when a sync next prepares them.
--
-- This rewrites `logs` and its indexes once; `sink::migrate` says so, with the row count, before it
-- starts. It runs in one transaction: interrupted, nothing of it is kept and it runs again at the next open.
-- `transactions` is absent from a database that never had `[sync] transactions` on (`sink::transactions`
-- drops it, and creates it again with this change applied).
ALTER TABLE logs
    ALTER COLUMN transaction_index TYPE BIGINT,
    ALTER COLUMN log_index         TYPE BIGINT;
ALTER TABLE factory_children ALTER COLUMN log_index TYPE BIGINT;
ALTER TABLE IF EXISTS transactions ALTER COLUMN transaction_index TYPE BIGINT;
