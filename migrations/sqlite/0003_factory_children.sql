-- Contracts created by a factory (`factory = { contract, event, parameter }`): one row per child, written in
-- the same transaction as the factory's rows; a rollback past the creating log removes it.
CREATE TABLE factory_children (
    contract        TEXT    NOT NULL,
    address         TEXT    NOT NULL,
    block_number    INTEGER NOT NULL,
    block_hash      TEXT    NOT NULL,
    log_index       INTEGER NOT NULL,
    factory_address TEXT    NOT NULL,
    PRIMARY KEY (contract, address)
);
CREATE INDEX factory_children_block_number ON factory_children (block_number);
