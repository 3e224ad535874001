-- Many chains in one database (interface.md, "Many chains"): every table's rows are told apart by
-- `chain_id`, the chain's `eth_chainId`, the first column of every key. `chains` names each chain as the
-- config does (`default` for a config with `[node]` alone) and holds what is per chain beside the rows:
-- the last reorg seen and the providers' report, `meta` keys until now. It replaces `meta.chain_id`.
--
-- SQLite cannot change a table's key in place, so every table is rebuilt with `chain_id` first, by
-- `sink::migrate_chain` after this migration: the chain id of the rows already there is the one the
-- database recorded in `meta.chain_id`, which SQL here could copy but not refuse clearly when it is
-- missing; and the typed tables, which no migration knows by name, are found in the catalog. All in one
-- transaction with progress shown; a table still without `chain_id` is rebuilt at the next open.
CREATE TABLE chains (
    chain_id   INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL UNIQUE,
    last_reorg TEXT,
    providers  TEXT
);
