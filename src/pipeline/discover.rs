//! Address discovery: the children of factories, found in their factory's logs as ranges arrive in block
//! order, and the logs of a range that was fetched before a child was known, filled in.
//!
//! Ranges are fetched concurrently and ahead of the decoding stage, so a range may have been asked for
//! before the child created in it (or before it) was found. Every selection records how many children it
//! covered ([`Children::selected`]); when the range arrives, the children registered since are fetched for
//! it ([`Job::discover`]) and merged in, so a child's logs are complete from the block of its creating log,
//! including those emitted earlier in that block (a proxy's setup events). A catch-up reads the children
//! ahead (`pipeline::foresight`): its selections carry them from the start, and a foreseen child is filled
//! in only for a range selected before a reading that found it.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use alloy_dyn_abi::{DynSolEvent, Specifier};
use alloy_primitives::{Address, B256};

use crate::config::{Config, FactoryConfig};
use crate::fetch::{self, Fetched, Group, Selection};
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
    /// Range start -> what its selection covered (the least, when asked more than once).
    selected: BTreeMap<BlockNumber, Covered>,
    /// The children read ahead from the factories' logs ([`Job::foresee`]), in block order:
    /// every selection made since covers those created by its range's end, registered or not.
    foreseen: Vec<Child>,
    /// Address -> the foreseen children at it: contract, creating block, and the reading that found it.
    foreseen_at: HashMap<Address, Vec<Foreseen>>,
    /// Readings ahead so far: a selection covers the foreseen children of its reading and before.
    readings: u32,
}

/// A foreseen child as [`Children::foreseen_at`] keeps it.
#[derive(Debug, Clone, Copy)]
struct Foreseen {
    contract: usize,
    block_number: BlockNumber,
    reading: u32,
}

/// What a selection covered: the first `registered` children of the list, and the children foreseen by
/// reading `foreseen` and before (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Covered {
    /// Children of the list, from its start.
    pub registered: usize,
    /// The last reading ahead whose children it had (0: none).
    pub foreseen: u32,
}

impl Covered {
    /// What both of two selections covered.
    fn least(self, other: Self) -> Self {
        Self {
            registered: self.registered.min(other.registered),
            foreseen: self.foreseen.min(other.foreseen),
        }
    }
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
        let now = Covered {
            registered: self.list.len(),
            foreseen: self.readings,
        };
        self.selected
            .entry(start)
            .and_modify(|covered| *covered = covered.least(now))
            .or_insert(now);
    }

    /// Adds `children` (any order) to the foreseen, for the selections made from now on; a child foreseen
    /// already, or announced again, counts from its first creating log.
    pub(super) fn foresee(&mut self, mut children: Vec<Child>) {
        self.readings += 1;
        children.sort_by_key(|c| (c.block_number, c.log_index));
        for child in children {
            let at = self.foreseen_at.entry(child.address).or_default();
            if at.iter().all(|f| f.contract != child.contract) {
                at.push(Foreseen {
                    contract: child.contract,
                    block_number: child.block_number,
                    reading: self.readings,
                });
                self.foreseen.push(child);
            }
        }
        self.foreseen.sort_by_key(|c| (c.block_number, c.log_index));
    }

    /// Whether selections that covered `covered` had `child` for every block from the one it was created
    /// in: it was foreseen by one of their readings, at or before that block.
    fn was_foreseen(&self, child: &Child, covered: Covered) -> bool {
        self.foreseen_at
            .get(&child.address)
            .into_iter()
            .flatten()
            .any(|f| {
                f.contract == child.contract
                    && f.block_number <= child.block_number
                    && f.reading <= covered.foreseen
            })
    }

    /// How many children the requests that fetched `range` covered: the fewest over the selections made
    /// for blocks from the last one at or before its start up to its end (a range's pieces are selected
    /// on their own; a range nobody recorded counts as covering none). Forgets selections before `range`.
    pub(super) fn covered(&mut self, range: BlockRange) -> Covered {
        let from = self
            .selected
            .range(..=range.start())
            .next_back()
            .map_or(range.start(), |(&start, _)| start);
        let covered = self
            .selected
            .range(from..=range.end())
            .map(|(_, &covered)| covered)
            .reduce(Covered::least)
            .unwrap_or(Covered {
                registered: 0,
                foreseen: 0,
            });
        self.selected = self.selected.split_off(&from);
        covered
    }

    /// The children of contract `contract` created at or before `block`: those registered, then those
    /// foreseen and not registered yet.
    pub(super) fn addresses_of(&self, contract: usize, block: BlockNumber) -> Vec<Address> {
        let registered = |address: &Address| {
            self.by_address
                .get(address)
                .is_some_and(|at| at.iter().any(|&i| self.list[i].contract == contract))
        };
        let foreseen = self
            .foreseen
            .iter()
            .take_while(|c| c.block_number <= block)
            .filter(|c| c.contract == contract && !registered(&c.address));
        self.list
            .iter()
            .filter(|c| c.contract == contract && c.block_number <= block)
            .chain(foreseen)
            .map(|c| c.address)
            .collect()
    }

    /// The block each child joins at, registered or foreseen (once per child of each contract).
    pub(super) fn join_blocks(&self) -> Vec<BlockNumber> {
        let registered = |child: &Child| {
            self.by_address
                .get(&child.address)
                .is_some_and(|at| at.iter().any(|&i| self.list[i].contract == child.contract))
        };
        let foreseen = self.foreseen.iter().filter(|c| !registered(c));
        self.list
            .iter()
            .chain(foreseen)
            .map(|c| c.block_number)
            .collect()
    }

    /// Contracts whose child `address` is at `block` by the factories' logs read ahead, registered yet or
    /// not: the logs a batch may keep once its creating logs are registered.
    pub(super) fn foreseen_emitters(
        &self,
        address: &Address,
        block: BlockNumber,
    ) -> impl Iterator<Item = usize> + '_ {
        self.foreseen_at
            .get(address)
            .into_iter()
            .flatten()
            .filter(move |f| f.block_number <= block)
            .map(|f| f.contract)
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

/// Merges `extra` logs into `logs`, in `(block_number, log_index)` order, each log once
/// ([`fetch::in_log_order`]: a child's log may also be a configured contract's).
///
/// # Errors
/// [`fetch::Conflict`] for two different logs at one position.
pub(super) fn merge(logs: &mut Vec<Log>, extra: Vec<Log>) -> Result<(), fetch::Conflict> {
    if extra.is_empty() {
        return Ok(());
    }
    logs.extend(extra);
    fetch::in_log_order(logs).map(drop)
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
            let mut least: Option<Covered> = None;
            for f in fetched.iter() {
                let covered = children.covered(f.range);
                least = Some(least.map_or(covered, |least| least.least(covered)));
                self.register_announced(&mut children, &f.logs);
            }
            let least = least.expect("fetched is not empty");
            let last = fetched[fetched.len() - 1].range.end();
            let missing: Vec<&Child> = children.list[least.registered.min(children.list.len())..]
                .iter()
                .filter(|c| c.block_number <= last && !children.was_foreseen(c, least))
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
        node.gate
            .stats
            .children_filled
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let filled = self.fill(node, config, span, addresses, topic0).await?;
        let n_filled = filled.logs.len();
        let mut logs = filled.logs.into_iter().peekable();
        for f in fetched.iter_mut() {
            let mut mine = Vec::new();
            while let Some(log) = logs.next_if(|l| l.block_number <= f.range.end()) {
                mine.push(log);
            }
            merge(&mut f.logs, mine).map_err(|conflict| node.error()(conflict.into()))?;
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

    /// With factories, the block each address asked for joins at, children read ahead included: where
    /// children multiply, what they log grows with them, so the planner's survey weighs each block by the
    /// addresses there (`planner::addresses`). `None` without factories: every block weighs one.
    pub(super) fn address_joins(&self) -> Option<Vec<BlockNumber>> {
        if self.factories.is_empty() {
            return None;
        }
        let mut joins = self.children.read().expect("children lock").join_blocks();
        for contract in self.contracts.iter() {
            joins.extend(contract.addresses.iter().map(|_| contract.next));
        }
        Some(joins)
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

    /// Registers the children the factories announce in `logs`.
    fn register_announced(&self, children: &mut Children, logs: &[Log]) {
        for child in self.announced(logs) {
            children.register(child);
        }
    }

    /// The children the factories announce in `logs`, in log order (a `removed` log announces nothing).
    pub(super) fn announced<'a>(&'a self, logs: &'a [Log]) -> impl Iterator<Item = Child> + 'a {
        logs.iter()
            .filter(|l| !l.removed)
            .flat_map(|log| self.factories.iter().filter_map(move |f| f.child_of(log)))
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
        let planner = super::job::span_planner(config, span);
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
