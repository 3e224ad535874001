//! What a run makes of finality. The blocks tracked by hash never depend on what the node calls final:
//! the last `sync.max_reorg_depth` blocks below the head are always tracked (a devnet, some L2 endpoints
//! and providers that misreport the tag call their head final, and a reorg there would otherwise go
//! unseen). Finality is only reported against: a reorg under the final block is rolled back like any
//! other and said loudly ([`SeenFinality::reported`]), and a node whose finalized block stays within
//! [`SUSPECT_DEPTH`] blocks of its head on a chain that has reorged is called suspect, once a run.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use crate::primitives::BlockNumber;

/// A finalized block fewer than this many blocks below the head, on a chain that has reorged, is suspect:
/// finality gadgets finalize tens of blocks behind the head (mainnet: 64 to 95), not the head itself.
pub(super) const SUSPECT_DEPTH: u64 = 3;

/// The highest block treated as final for a job up to `target` on a node whose head is `head`: the last
/// `window` blocks below the head are tracked by hash, whatever the node reports as finalized.
pub(super) fn final_block(target: BlockNumber, head: BlockNumber, window: u64) -> BlockNumber {
    target.min(head.saturating_sub(window))
}

/// Whether a node reporting `finalized` with its head at `head` is suspect, on a chain that has
/// (`reorged`) or has not reorged.
pub(super) fn is_suspect(finalized: BlockNumber, head: BlockNumber, reorged: bool) -> bool {
    reorged && finalized.saturating_add(SUSPECT_DEPTH) > head
}

/// What this run has seen of finality.
#[derive(Debug)]
pub(super) struct SeenFinality {
    /// The last block reported final (the node's `finalized`, or `head - n` with `finality = n`);
    /// `u64::MAX`: none yet.
    reported: AtomicU64,
    /// Whether the chain has reorged (in this run, or as the database records).
    reorged: AtomicBool,
    /// Whether the suspect finality was said.
    warned: AtomicBool,
}

impl Default for SeenFinality {
    fn default() -> Self {
        Self {
            reported: AtomicU64::new(u64::MAX),
            reorged: AtomicBool::new(false),
            warned: AtomicBool::new(false),
        }
    }
}

/// Who called a block final.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Source {
    /// The node's `finalized` tag.
    Node,
    /// `sync.finality = n` confirmations.
    Confirmations,
}

impl SeenFinality {
    /// Block `finalized` is final by `source` while the head is `head`; warns once a run when the node's
    /// finality is suspect.
    pub(super) fn saw(
        &self,
        finalized: BlockNumber,
        head: BlockNumber,
        source: Source,
        node: &str,
    ) {
        self.reported.store(finalized, Relaxed);
        let reorged = self.reorged.load(Relaxed);
        if source == Source::Node
            && is_suspect(finalized, head, reorged)
            && !self.warned.swap(true, Relaxed)
        {
            tracing::warn!(
                node,
                finalized,
                head,
                "the node's finality is suspect: it reports block {finalized} as finalized, {} blocks below its head, \
                 on a chain that has reorged; logslice tracks the last sync.max_reorg_depth blocks by hash regardless",
                head.saturating_sub(finalized)
            );
        }
    }

    /// The last block reported final, if any.
    pub(super) fn reported(&self) -> Option<BlockNumber> {
        let reported = self.reported.load(Relaxed);
        (reported != u64::MAX).then_some(reported)
    }

    /// The chain has reorged.
    pub(super) fn saw_reorg(&self) {
        self.reorged.store(true, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_below_the_head_is_tracked_whatever_the_node_calls_final() {
        // A target at the head: the last 128 blocks are tracked.
        assert_eq!(final_block(1_000, 1_000, 128), 872);
        // A target deep below the head: all of it is final.
        assert_eq!(final_block(500, 1_000, 128), 500);
        // Near genesis.
        assert_eq!(final_block(50, 50, 128), 0);
    }

    #[test]
    fn a_finalized_head_is_suspect_only_on_a_chain_that_has_reorged() {
        assert!(!is_suspect(1_000, 1_000, false));
        assert!(is_suspect(1_000, 1_000, true));
        assert!(is_suspect(998, 1_000, true));
        assert!(!is_suspect(997, 1_000, true));
        assert!(!is_suspect(936, 1_000, true));
        let seen = SeenFinality::default();
        assert_eq!(seen.reported(), None);
        seen.saw(990, 1_000, Source::Node, "sim://");
        assert_eq!(seen.reported(), Some(990));
    }
}
