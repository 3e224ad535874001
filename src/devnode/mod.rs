//! The built-in simulated access service (`logslice devnode`, `sim://`): a deterministic, lazily generated
//! chain served over real sockets per `service-spec.md`, with the spec's limits and scripted faults.
//!
//! It shares no code path with the indexer (no `crate::rpc`, `crate::decode`, `crate::sink` imports), so a
//! bug on one side cannot hide the same bug on the other.

pub mod cli;

use std::net::SocketAddr;

use alloy_dyn_abi::DynSolValue;
use alloy_primitives::{Address, Bytes, B256};

/// Everything a devnode is started with.
#[derive(Debug, Clone)]
pub struct DevNodeConfig {
    /// Listen address; port 0 picks a free one.
    pub addr: SocketAddr,
    /// The only API key accepted.
    pub key: String,
    /// Seed of the chain and of every fault decision.
    pub seed: u64,
}

impl Default for DevNodeConfig {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            key: "demo".into(),
            seed: 7,
        }
    }
}

impl DevNodeConfig {
    /// Builds a config from a `sim://` URL; its query string may set options (`sim://?seed=7&...`).
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn from_sim_url(url: &str) -> Result<Self, String> {
        let _ = url;
        todo!()
    }
}

/// A running simulated node.
pub struct DevNode {
    _private: (),
}

impl DevNode {
    /// Binds and starts serving in the background of the current tokio runtime.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn start(cfg: DevNodeConfig) -> std::io::Result<DevNode> {
        let _ = cfg;
        todo!()
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        todo!()
    }

    /// `http://ADDR/v3/KEY`.
    pub fn http_url(&self) -> String {
        todo!()
    }

    /// `ws://ADDR/ws/v3/KEY`.
    pub fn ws_url(&self) -> String {
        todo!()
    }

    /// The canonical chain as it is now, bypassing every limit and fault.
    pub fn truth(&self) -> GroundTruth {
        todo!()
    }

    /// Stops serving.
    pub async fn shutdown(self) {
        todo!()
    }
}

/// The node's exact canonical chain, for tests.
#[derive(Clone)]
pub struct GroundTruth {
    _private: (),
}

impl GroundTruth {
    /// The chain id.
    pub fn chain_id(&self) -> u64 {
        todo!()
    }
    /// The current head.
    pub fn head(&self) -> u64 {
        todo!()
    }
    /// A canonical block, if it exists.
    pub fn block(&self, number: u64) -> Option<TruthBlock> {
        let _ = number;
        todo!()
    }
    /// Every canonical log of blocks `from..=to`, in `(block_number, log_index)` order.
    pub fn logs(&self, from: u64, to: u64) -> Vec<TruthLog> {
        let _ = (from, to);
        todo!()
    }
}

/// A canonical block header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthBlock {
    /// Number.
    pub number: u64,
    /// Hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
    /// Unix timestamp.
    pub timestamp: u64,
}

/// A canonical log and the values it encodes.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthLog {
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: B256,
    /// Transaction hash.
    pub transaction_hash: B256,
    /// Transaction index.
    pub transaction_index: u64,
    /// Log index in the block.
    pub log_index: u64,
    /// Emitting contract.
    pub address: Address,
    /// 0 to 4 topics.
    pub topics: Vec<B256>,
    /// ABI-encoded non-indexed values.
    pub data: Bytes,
    /// The event's name in its ABI, e.g. `Transfer`.
    pub event: &'static str,
    /// Every parameter's value, in ABI order (indexed ones too, with their original value).
    pub values: Vec<DynSolValue>,
}
