//! Integration tests: one binary, a module per feature (linked once on a 2-core CI).

mod anon;
mod anvil;
mod continuity;
mod factory;
mod filters;
mod finality;
mod follow;
mod in_turn;
mod indexes;
mod log_index;
mod migration;
mod ops;
mod outage;
mod parts;
mod pg;
mod planning;
mod postgres_sink;
mod rate;
mod receipts;
mod repeated;
mod shutdown;
mod sink_records;
mod support;
mod sync;
mod timestamps;
mod transactions;
