-- Blocks whose logs were read from their receipts (one address and topic0 over the node's result cap), for
-- `logslice status`: written in the same transaction as those logs, deleted with them by a rollback (an
-- orphaned block no longer counts; its replacement counts once committed, if it is read from receipts too).
CREATE TABLE receipt_blocks (
    block_number INTEGER PRIMARY KEY
);
