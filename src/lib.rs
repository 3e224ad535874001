//! logslice: an EVM log indexer.
//!
//! The library is a pipeline; the modules below are listed in pipeline order and dependencies point down it:
//! `config` -> `rpc` -> `planner` -> `fetch` -> `decode` -> `sink`, wired by `pipeline`. `devnode` is the
//! simulated access service used by tests, demos and benchmarks; it shares no code path with the indexer.
#![warn(missing_docs)]

pub mod config;
pub mod decode;
pub mod exit;
pub mod fetch;
pub mod follow;
pub mod observe;
pub mod pipeline;
pub mod planner;
pub mod primitives;
pub mod rpc;
pub mod sink;
pub mod status;
