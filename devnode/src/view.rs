//! What one request sees of the chain: the heights of a node behind the true head and of a lagging backend.
//!
//! Two kinds of lag, composed: a node (or provider) that is `behind` blocks behind the head sees the chain as
//! it was then, its head and finality alike; a lagging backend (the `fault_lag` fault) behind the node's load
//! balancer serves a head `backend` blocks older still, but keeps the node's finality (capped at that head).
//! Pure arithmetic: the dispatcher answers from the view.

use super::config::ChainConfig;

/// How far behind the true head one request is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Lag {
    /// The node's own distance behind the true head (`lag_blocks`, a provider's `set_lag`).
    pub(crate) behind: u64,
    /// A lagging backend's further distance, for this request only (the `fault_lag` fault).
    pub(crate) backend: u64,
}

/// The heights one request sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) head: u64,
    pub(crate) finalized: u64,
    pub(crate) safe: u64,
}

impl View {
    /// The view of a chain whose true head is `true_head`, served with `lag`.
    pub(crate) fn new(true_head: u64, chain: &ChainConfig, lag: Lag) -> Self {
        let node_head = true_head.saturating_sub(lag.behind);
        let head = node_head.saturating_sub(lag.backend);
        Self {
            head,
            finalized: node_head.saturating_sub(chain.finalized_depth).min(head),
            safe: node_head.saturating_sub(chain.safe_depth).min(head),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(true_head: u64, behind: u64, backend: u64, expected: (u64, u64, u64)) {
        let chain = ChainConfig {
            finalized_depth: 64,
            safe_depth: 32,
            ..ChainConfig::default()
        };
        let view = View::new(true_head, &chain, Lag { behind, backend });
        assert_eq!(
            (view.head, view.finalized, view.safe),
            expected,
            "head {true_head}, behind {behind}, backend {backend}"
        );
    }

    #[test]
    fn a_node_behind_moves_head_and_finality_down_a_lagging_backend_only_the_head() {
        check(1000, 0, 0, (1000, 936, 968));
        check(1000, 10, 0, (990, 926, 958));
        check(1000, 0, 5, (995, 936, 968));
        check(1000, 10, 5, (985, 926, 958));
        check(1000, 0, 980, (20, 20, 20));
        check(5, 10, 0, (0, 0, 0));
    }
}
