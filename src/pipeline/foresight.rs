//! Factory children read ahead of a catch-up: the factories' announcing logs from the first block any
//! contract needs up to the target, read before the backfill's ranges and the head read beside it are
//! selected, so every request carries the children created by its range's end.
//!
//! Without it a range carries only the children the decoding stage had found when the range was sent.
//! The fetcher runs ahead of that stage by its whole budget, so on a chain where children multiply most
//! ranges were sent without the newest ones, and each batch then cost one more request to fill them in
//! ([`Job::discover`]); a range over the 1,000 addresses one request takes was rarely seen whole, so
//! topic-only requests ([`crate::fetch::wide`]) were chosen by chance. The announcing event of a few
//! factory addresses is sparse: reading it costs a few requests of the largest span.
//!
//! Only the selections use what is read here. Children are still registered (and written to
//! `factory_children`) as the decoding stage meets their creating logs in block order, and a child found
//! there that was not foreseen (the node answered differently the second time) is still filled in.

use std::sync::Arc;

use alloy_primitives::{Address, B256};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::fetch::{self, Fetched, Group, Selection};
use crate::planner::Planner;
use crate::primitives::BlockRange;

use super::{Error, Job, Node};

impl Job {
    /// Reads the children the factories announce in `plan` and makes every later selection cover them
    /// from their creating block; nothing for a plan no longer than the first range. Holds the children
    /// found, never the logs. Returns how many were found.
    ///
    /// # Errors
    /// [`Error::Node`] when a request fails for good; [`Error::Interrupted`] on cancellation.
    pub(super) async fn foresee(
        &self,
        node: &Arc<Node>,
        config: &Config,
        plan: BlockRange,
        cancel: &CancellationToken,
    ) -> Result<usize, Error> {
        // A plan the first range covers is asked for once, with what is known: reading ahead would cost
        // that one request again, where filling in costs it only when a child was created in it.
        if self.factories.is_empty() || plan.len() <= config.sync.initial_block_range {
            return Ok(0);
        }
        tracing::info!(%plan, factories = self.factories.len(), "reading the factories' children ahead");
        let selection = self.announcing_selection();
        let select: Arc<dyn Fn(BlockRange) -> Selection + Send + Sync> =
            Arc::new(move |_| selection.clone());
        // A few ranges in flight at most: what arrives is reduced to children at once.
        let (tx, mut rx) = mpsc::channel::<Fetched>(4);
        let fetching = fetch::run(
            node.access.clone(),
            announcing_planner(config, plan),
            select,
            tx,
            cancel.child_token(),
        );
        let collecting = async {
            let mut found = Vec::new();
            while let Some(fetched) = rx.recv().await {
                found.extend(self.announced(&fetched.logs));
            }
            found
        };
        let (fetched, found) = tokio::join!(fetching, collecting);
        fetched.map_err(node.error())?;
        let n = found.len();
        tracing::info!(%plan, children = n, "read the factories' children ahead");
        self.children.write().expect("children lock").foresee(found);
        Ok(n)
    }

    /// One group: every factory's addresses, with the announcing events.
    fn announcing_selection(&self) -> Selection {
        let mut addresses: Vec<Address> = self
            .factories
            .iter()
            .flat_map(|f| f.parent_addresses.iter().copied())
            .collect();
        addresses.sort();
        addresses.dedup();
        let mut topic0: Vec<B256> = self.factories.iter().map(|f| f.selector).collect();
        topic0.sort();
        topic0.dedup();
        Selection {
            groups: vec![Group::unfiltered(addresses, Some(topic0))],
            pairs: Vec::new(),
        }
    }
}

/// The planner of the reading ahead: its first range is the longest `[sync]` allows (`max_block_range`), not
/// `initial_block_range`. The announcing event of a few factory addresses is sparse, so the short first
/// range and its eightfold growth only cost requests (on a 40,001-block factory chain: 2,000 blocks, then
/// 16,000, then the rest, three requests for 300 logs); where it is dense, the refusal is split like any
/// other.
fn announcing_planner(config: &Config, plan: BlockRange) -> Planner {
    let mut limits = super::job::planner_config(config);
    limits.initial_span = limits.max_span;
    Planner::new(limits, plan, std::iter::once(plan.start()))
}
