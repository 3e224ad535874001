//! Address discovery: the children of factories, found in their factory's logs as ranges arrive in block
//! order, and the logs of a range that was fetched before a child was known, filled in.
//!
//! Ranges are fetched concurrently and ahead of the decoding stage, so a range may have been asked for
//! before the child created in it (or before it) was found. Every selection records how many children it
//! covered ([`Children::selected`]); when the range arrives, the children registered since are fetched for
//! it ([`Job::discover`]) and merged in, so a child's logs are complete from the block of its creating log,
//! including those emitted earlier in that block (a proxy's setup events).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use alloy_dyn_abi::{DynSolEvent, Specifier};
use alloy_primitives::{Address, B256};

use crate::config::{Config, FactoryConfig};
use crate::fetch::{Fetched, Group, Selection};
use crate::planner::{Planner, PlannerConfig};
use crate::primitives::{BlockNumber, BlockRange, Log};
use crate::sink::ChildRow;

use super::{head, Error, Job, Node};

/// A factory as the pipeline uses it: which logs announce a child, and where the address is.
#[derive(Debug, Clone)]
pub(super) struct Factory {
    /// The contract whose addresses are the children (index into the job's contracts).
    pub child: usize,
    /// The factory contract (index into the job's contracts).
    pub parent: usize,
    /// Its addresses.
    pub parent_addresses: Vec<Address>,
    /// topic0 of the announcing event.
    pub selector: B256,
    event: DynSolEvent,
    /// Where the child's address is: `Ok(i)` the i-th indexed value, `Err(i)` the i-th value of the data.
    position: Result<usize, usize>,
}

impl Factory {
    /// Resolves `config` of contract `child`; `parent` is the factory contract's index and addresses.
    pub(super) fn new(
        config: &FactoryConfig,
        child: usize,
        parent: usize,
        parent_addresses: Vec<Address>,
    ) -> Result<Self, String> {
        let event = config.event.resolve().map_err(|e| e.to_string())?;
        let inputs = &config.event.inputs;
        let before = &inputs[..config.parameter_index];
        let indexed_before = before.iter().filter(|p| p.indexed).count();
        let position = if inputs[config.parameter_index].indexed {
            Ok(indexed_before)
        } else {
            Err(before.len() - indexed_before)
        };
        Ok(Self {
            child,
            parent,
            parent_addresses,
            selector: config.event.selector(),
            event,
            position,
        })
    }

    /// The child a log announces, if it is this factory's announcing event and decodes.
    pub(super) fn child_of(&self, log: &Log) -> Option<Child> {
        if log.topics.first() != Some(&self.selector)
            || !self.parent_addresses.contains(&log.address)
        {
            return None;
        }
        let decoded = self
            .event
            .decode_log_parts(log.topics.iter().copied(), &log.data)
            .ok()?;
        let value = match self.position {
            Ok(i) => decoded.indexed.get(i),
            Err(i) => decoded.body.get(i),
        }?;
        Some(Child {
            contract: self.child,
            address: value.as_address()?,
            block_number: log.block_number,
            block_hash: log.block_hash,
            log_index: log.log_index,
            factory_address: log.address,
        })
    }
}

/// A child found in a factory's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Child {
    /// The contract it belongs to (index into the job's contracts).
    pub contract: usize,
    pub address: Address,
    /// Of the creating log: the child is indexed from this block.
    pub block_number: BlockNumber,
    pub block_hash: B256,
    pub log_index: u64,
    pub factory_address: Address,
}

/// Every child known, in the order found, and what each selection covered.
#[derive(Debug, Default)]
pub(super) struct Children {
    /// In registration order: a selection that covered `n` children asked for the first `n`.
    pub list: Vec<Child>,
    /// Address -> positions in `list` (one address may be a child of several contracts).
    pub by_address: HashMap<Address, Vec<usize>>,
    /// Range start -> how many children its selection covered (the fewest, when asked more than once).
    selected: BTreeMap<BlockNumber, usize>,
}

impl Children {
    /// Registers `child` unless its contract has that address already; whether it was new.
    pub(super) fn register(&mut self, child: Child) -> bool {
        let positions = self.by_address.entry(child.address).or_default();
        if positions
            .iter()
            .any(|&i| self.list[i].contract == child.contract)
        {
            return false;
        }
        positions.push(self.list.len());
        self.list.push(child);
        true
    }

    /// Records that a selection for a range from `start` is being made with every child known now.
    pub(super) fn selected(&mut self, start: BlockNumber) {
        let n = self.list.len();
        self.selected
            .entry(start)
            .and_modify(|covered| *covered = (*covered).min(n))
            .or_insert(n);
    }

    /// How many children the requests that fetched `range` covered: the fewest over the selections made
    /// for blocks from the last one at or before its start up to its end (a range's pieces are selected
    /// on their own; a range nobody recorded counts as covering none). Forgets selections before `range`.
    pub(super) fn covered(&mut self, range: BlockRange) -> usize {
        let from = self
            .selected
            .range(..=range.start())
            .next_back()
            .map_or(range.start(), |(&start, _)| start);
        let covered = self
            .selected
            .range(from..=range.end())
            .map(|(_, &n)| n)
            .min()
            .unwrap_or(0);
        self.selected = self.selected.split_off(&from);
        covered
    }

    /// The children of contract `contract` created at or before `block`.
    pub(super) fn addresses_of(&self, contract: usize, block: BlockNumber) -> Vec<Address> {
        self.list
            .iter()
            .filter(|c| c.contract == contract && c.block_number <= block)
            .map(|c| c.address)
            .collect()
    }

    /// Contracts whose child `address` is at `block` (created at or before it).
    pub(super) fn emitters(
        &self,
        address: &Address,
        block: BlockNumber,
    ) -> impl Iterator<Item = usize> + '_ {
        self.by_address
            .get(address)
            .into_iter()
            .flatten()
            .map(|&i| &self.list[i])
            .filter(move |c| c.block_number <= block)
            .map(|c| c.contract)
    }
}

/// Merges `extra` logs into `logs`, both in `(block_number, log_index)` order, dropping duplicates.
pub(super) fn merge(logs: &mut Vec<Log>, extra: Vec<Log>) {
    if extra.is_empty() {
        return;
    }
    logs.extend(extra);
    logs.sort_by_key(|l| (l.block_number, l.log_index));
    logs.dedup_by_key(|l| (l.block_number, l.log_index));
}

impl Job {
    /// Finds the children announced in `fetched` (consecutive ranges, in order), registers them, and fills
    /// in the logs of every child a range was fetched without. Returns how many logs were filled in.
    ///
    /// # Errors
    /// [`Error::Node`] when a filling request fails for good.
    pub(super) async fn discover(
        &self,
        node: &Arc<Node>,
        config: &Config,
        fetched: &mut [Fetched],
    ) -> Result<usize, Error> {
        if self.factories.is_empty() || fetched.is_empty() {
            return Ok(0);
        }
        // The lock is held for this block only: never across a request.
        let wanted = {
            let mut children = self.children.write().expect("children lock");
            let mut fewest = usize::MAX;
            for f in fetched.iter() {
                fewest = fewest.min(children.covered(f.range));
                self.register_announced(&mut children, &f.logs);
            }
            let last = fetched[fetched.len() - 1].range.end();
            let missing: Vec<&Child> = children.list[fewest.min(children.list.len())..]
                .iter()
                .filter(|c| c.block_number <= last)
                .collect();
            let wanted = missing.iter().map(|c| c.block_number).min().map(|from| {
                let span = BlockRange::new(from.max(fetched[0].range.start()), last)
                    .expect("from <= last");
                let mut addresses: Vec<Address> = missing.iter().map(|c| c.address).collect();
                addresses.sort();
                addresses.dedup();
                (
                    span,
                    addresses,
                    self.topic0_of(missing.iter().map(|c| c.contract)),
                )
            });
            wanted
        };
        let Some((span, addresses, topic0)) = wanted else {
            return Ok(0);
        };
        let filled = self.fill(node, config, span, addresses, topic0).await?;
        let n_filled = filled.logs.len();
        let mut logs = filled.logs.into_iter().peekable();
        for f in fetched.iter_mut() {
            let mut mine = Vec::new();
            while let Some(log) = logs.next_if(|l| l.block_number <= f.range.end()) {
                mine.push(log);
            }
            merge(&mut f.logs, mine);
            // A child's block over the cap was read from its receipts: it counts as such a block too.
            f.receipt_blocks.extend(
                filled
                    .receipt_blocks
                    .iter()
                    .filter(|&&block| f.range.contains(block)),
            );
            f.receipt_blocks.sort_unstable();
            f.receipt_blocks.dedup();
        }
        Ok(n_filled)
    }

    /// Registers the children announced in `fetched` without fetching anything: for input that holds every
    /// log already (`bench`'s store-only phase).
    pub(super) fn note_children(&self, fetched: &[Fetched]) {
        if self.factories.is_empty() {
            return;
        }
        let mut children = self.children.write().expect("children lock");
        for f in fetched {
            self.register_announced(&mut children, &f.logs);
        }
    }

    /// Registers the children the factories announce in `logs` (a `removed` log announces nothing).
    fn register_announced(&self, children: &mut Children, logs: &[Log]) {
        for log in logs.iter().filter(|l| !l.removed) {
            for factory in &self.factories {
                if let Some(child) = factory.child_of(log) {
                    children.register(child);
                }
            }
        }
    }

    /// The topic0 alternatives that ask for every configured event of `contracts`; `None` when one has an
    /// anonymous event (no topic0 filter can then be used).
    pub(super) fn topic0_of(&self, contracts: impl Iterator<Item = usize>) -> Option<Vec<B256>> {
        let mut topic0 = Vec::new();
        for contract in contracts {
            topic0.extend(self.contracts[contract].selectors.as_ref()?);
        }
        topic0.sort();
        topic0.dedup();
        Some(topic0)
    }

    /// The logs of `addresses` over `span`, planned like any range (a dense stretch is cut, never walked
    /// block by block), in order.
    async fn fill(
        &self,
        node: &Arc<Node>,
        config: &Config,
        span: BlockRange,
        addresses: Vec<Address>,
        topic0: Option<Vec<B256>>,
    ) -> Result<Fetched, Error> {
        tracing::debug!(%span, children = addresses.len(), "filling in children found since the range was fetched");
        let selection = Selection {
            groups: vec![Group::unfiltered(addresses, topic0)],
            pairs: Vec::new(),
        };
        let planner = Planner::new(
            PlannerConfig {
                initial_span: config.sync.initial_block_range,
                max_span: config.sync.max_block_range,
                target_logs: config.sync.target_logs_per_request,
            },
            span,
            std::iter::once(span.start()),
        );
        let select: head::Selector = Arc::new(move |_| selection.clone());
        let mut fetched = head::fetch_logs(node, planner, &select, span).await?;
        fetched.logs.sort_by_key(|l| (l.block_number, l.log_index));
        Ok(fetched)
    }

    /// The `factory_children` rows of the children created in `range`.
    pub(super) fn child_rows(&self, range: BlockRange) -> Vec<ChildRow> {
        let children = self.children.read().expect("children lock");
        children
            .list
            .iter()
            .filter(|c| range.contains(c.block_number))
            .map(|c| ChildRow {
                contract: self.contracts[c.contract].name.clone(),
                address: c.address,
                block_number: c.block_number,
                block_hash: c.block_hash,
                log_index: c.log_index,
                factory_address: c.factory_address,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
