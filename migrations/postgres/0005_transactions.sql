-- `[sync] transactions = true`: one row per transaction that emitted an indexed log, written in the same
-- transaction as its logs; a rollback deletes the rows above the ancestor. Wei amounts, gas and nonces are
-- exact NUMERIC(78,0); `status` and `gas_used` stay NULL unless `transaction_receipts = true`.
CREATE TABLE transactions (
    block_number             BIGINT        NOT NULL,
    transaction_index        INTEGER       NOT NULL,
    transaction_hash         TEXT          NOT NULL,
    block_hash               TEXT          NOT NULL,
    block_timestamp          BIGINT        NOT NULL,
    from_address             TEXT          NOT NULL,
    to_address               TEXT,
    value                    NUMERIC(78,0) NOT NULL,
    gas                      NUMERIC(78,0) NOT NULL,
    gas_price                NUMERIC(78,0),
    max_fee_per_gas          NUMERIC(78,0),
    max_priority_fee_per_gas NUMERIC(78,0),
    nonce                    NUMERIC(78,0) NOT NULL,
    type                     INTEGER       NOT NULL,
    input                    TEXT          NOT NULL,
    status                   INTEGER,
    gas_used                 NUMERIC(78,0),
    PRIMARY KEY (block_number, transaction_index)
);
CREATE INDEX transactions_hash ON transactions (transaction_hash);
