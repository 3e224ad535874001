//! logslice: an EVM log indexer.
//!
//! The library is a pipeline, and its modules are listed below in pipeline order: `config` is read, `rpc`
//! talks to the node, `planner` cuts block ranges that `fetch` asks for, `decode` turns logs into rows,
//! `sink` commits them, `follow` decides about reorgs at the head, and `pipeline` wires the stages;
//! `observe`, `status` and `exit` serve the commands. Dependencies point down the list, but for two edges:
//! `config` uses `decode` to turn ABIs into table columns, and `fetch` counts into `observe`'s metrics.
//! `ARCHITECTURE.md` has the codemap and the invariants; `docs/` has the user-facing contract.
#![warn(missing_docs)]

// The vocabulary every stage shares: block numbers, ranges, logs.
pub mod primitives;
// `config.toml` -> a validated `Config`.
pub mod config;
// The node: JSON-RPC over HTTP and WebSocket, and what its errors mean.
pub mod rpc;
// The providers of a chain: each one's rate, concurrency, breaker and head, and the gate that picks one.
pub mod node;
// Which block ranges to ask for (pure).
pub mod planner;
// Asking the node for them, concurrently, within its limits.
pub mod fetch;
// Logs -> typed rows (pure).
pub mod decode;
// Committing batches to SQLite or Postgres.
pub mod sink;
// Reorg decisions at the head (pure).
pub mod follow;
// The stages wired together: sync and run.
pub mod pipeline;
// Progress, metrics and /health.
pub mod observe;
// `logslice status`.
pub mod status;
// An error -> its exit code.
pub mod exit;
