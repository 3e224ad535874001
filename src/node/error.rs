//! Why a request through the gate did not succeed.

use crate::rpc;

/// Why a request did not succeed. Every variant but [`Error::Interrupted`] and [`Error::Oversized`] names
/// the provider (by its `name`) whose answer decided.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The provider asked for a narrower request (with [`super::OnSplit::Return`]).
    #[error("{provider}: the node asked for a narrower request: {source}")]
    Split {
        /// The provider.
        provider: String,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// Every provider that was asked rejected its API key.
    #[error("{provider}: the node rejected the API key ({method}: {source})")]
    Rejected {
        /// The provider.
        provider: String,
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// An answer that retrying cannot change.
    #[error("{provider}: {method} failed: {source}")]
    Fatal {
        /// The provider.
        provider: String,
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// The provider does not know a block the request named by hash: a reorg since the hash was read.
    #[error("{provider}: {method}: the node no longer knows the block asked for (a reorg since it was read): {source}")]
    UnknownBlock {
        /// The provider.
        provider: String,
        /// The method.
        method: &'static str,
        /// The answer.
        #[source]
        source: rpc::Error,
    },
    /// Every provider failed past its `max_retries` with transient errors.
    #[error("{method} failed {attempts} times (node.max_retries, every provider); last, from {provider}: {source}")]
    Exhausted {
        /// The provider of the last answer.
        provider: String,
        /// The method.
        method: &'static str,
        /// Attempts made, over every provider.
        attempts: u32,
        /// The last answer.
        #[source]
        source: rpc::Error,
    },
    /// A batch costs more than any provider's rate admits now: the caller sends it in smaller parts.
    #[error("a batch of {calls} calls is more than any provider admits now ({admits})")]
    Oversized {
        /// Calls in the batch.
        calls: usize,
        /// The most calls of that method one request may carry now.
        admits: usize,
    },
    /// Shutdown was requested.
    #[error("interrupted")]
    Interrupted,
}
