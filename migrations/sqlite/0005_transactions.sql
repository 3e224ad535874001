-- `[sync] transactions = true`: one row per transaction that emitted an indexed log, written in the same
-- transaction as its logs; a rollback deletes the rows above the ancestor. Wei amounts are exact decimal TEXT
-- (they exceed 64 bits); `status` and `gas_used` stay NULL unless `transaction_receipts = true`.
CREATE TABLE transactions (
    block_number             INTEGER NOT NULL,
    transaction_index        INTEGER NOT NULL,
    transaction_hash         TEXT    NOT NULL,
    block_hash               TEXT    NOT NULL,
    block_timestamp          INTEGER NOT NULL,
    from_address             TEXT    NOT NULL,
    to_address               TEXT,
    value                    TEXT    NOT NULL,
    gas                      TEXT    NOT NULL,
    gas_price                TEXT,
    max_fee_per_gas          TEXT,
    max_priority_fee_per_gas TEXT,
    nonce                    TEXT    NOT NULL,
    type                     INTEGER NOT NULL,
    input                    TEXT    NOT NULL,
    status                   INTEGER,
    gas_used                 TEXT,
    PRIMARY KEY (block_number, transaction_index)
);
CREATE INDEX transactions_hash ON transactions (transaction_hash);
