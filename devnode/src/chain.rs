//! The simulated chain: block headers, transactions and logs derived lazily from `(seed, number, fork generation)`.
//!
//! Nothing per block is stored. The only state is the head, a map of heights whose fork generation was bumped by
//! a reorg (a few entries per reorg) and a bounded list of recently orphaned `(height, generation)` pairs for the
//! stale-replica fault. A block's log count comes from the density of its 200-block segment (sparse, medium,
//! dense) and, once per 50,000 blocks, one block with more than 10,000 logs. This module knows nothing of JSON,
//! filters' wire format or faults.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use alloy_dyn_abi::DynSolValue;
use alloy_primitives::{keccak256, Address, Bloom, BloomInput, B256};

use super::config::FactoryConfig;
use super::contracts::{self, parsed, Emitter, EMITTERS, PAIR_CREATED};
use super::factory::Factory;
use super::filter::LogFilter;
use super::gen;
use super::overcap::{self, OvercapConfig};
use super::rng::{hash3, mix64, Rng};
use super::shapes::ShapeConfig;

/// Blocks per density segment: a whole segment is sparse, medium or dense.
pub(crate) const SEGMENT_LEN: u64 = 200;
/// One block with more than 10,000 logs per this many blocks.
pub(crate) const HUGE_PERIOD: u64 = 50_000;
/// Seconds between block timestamps.
pub(crate) const BLOCK_INTERVAL_SECS: u64 = 12;
/// Gas limit of every block.
pub(crate) const GAS_LIMIT: u64 = 30_000_000;
/// Orphaned `(height, generation)` pairs remembered for the stale-replica fault.
const MAX_ORPHANS: usize = 4096;

const TAG_BLOCK: u64 = 1;
const TAG_SEGMENT: u64 = 2;
const TAG_HUGE: u64 = 3;

/// The fixed parameters of a chain.
#[derive(Debug, Clone)]
pub(crate) struct ChainParams {
    pub(crate) seed: u64,
    pub(crate) chain_id: u64,
    pub(crate) initial_head: u64,
    pub(crate) density: f64,
    pub(crate) genesis_timestamp: u64,
    pub(crate) finalized_depth: u64,
    pub(crate) reorg_every: Option<u64>,
    pub(crate) reorg_depth: u64,
    /// Whether the opt-in [`contracts::ANON`] emits too (its emitters follow the default ones).
    pub(crate) anon_contract: bool,
    /// The opt-in [`contracts::FACTORY`] and its pairs, planned after every block's other transactions.
    pub(crate) factory: Option<FactoryConfig>,
    /// The opt-in blocks where one contract alone is over the cap, planned after every block's ordinary
    /// transactions and before the factory's.
    pub(crate) overcap: OvercapConfig,
    /// The opt-in shapes of real chains (bursts, growth, a hot contract, runs over the cap, empty runs).
    pub(crate) shapes: ShapeConfig,
    /// The opt-in block whose logs are numbered from a high base: `(block, base)` (`log_indexes`).
    pub(crate) high_log_indexes: Option<(u64, u64)>,
}

/// What changes as the chain moves.
#[derive(Debug)]
pub(crate) struct ChainState {
    /// The canonical head.
    pub(crate) head: u64,
    /// Fork generation of every height that was reorged (absent = 0).
    gens: BTreeMap<u64, u32>,
    /// Recently orphaned blocks, oldest first.
    orphans: VecDeque<(u64, u32)>,
}

impl ChainState {
    /// The canonical fork generation of height `number`.
    pub(crate) fn gen(&self, number: u64) -> u32 {
        self.gens.get(&number).copied().unwrap_or(0)
    }

    /// Orphaned `(height, generation)` pairs with heights in `from..=to`.
    pub(crate) fn orphans_in(&self, from: u64, to: u64) -> Vec<(u64, u32)> {
        let mut found: Vec<(u64, u32)> = self
            .orphans
            .iter()
            .copied()
            .filter(|(n, _)| (from..=to).contains(n))
            .collect();
        found.sort_unstable();
        found
    }
}

/// A block header's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) number: u64,
    pub(crate) gen: u32,
    pub(crate) hash: B256,
    pub(crate) parent_hash: B256,
    pub(crate) timestamp: u64,
}

/// Which (contract, event) a log of a block comes from, before its values are drawn.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlannedLog {
    pub(crate) tx_index: u32,
    pub(crate) emitter: u8,
    /// The emitting contract: the emitter's, or for a factory's child, the child's.
    pub(crate) address: Address,
    /// The ordinal of the factory's child the log creates or comes from (0 for other logs).
    pub(crate) child: u64,
    pub(crate) seed: u64,
}

/// The cheap skeleton of a block: how many transactions, which logs in which transaction.
#[derive(Debug, Clone)]
pub(crate) struct BlockPlan {
    pub(crate) n_txs: u32,
    pub(crate) logs: Vec<PlannedLog>,
}

/// A fully generated log.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    pub(crate) block_number: u64,
    pub(crate) block_hash: B256,
    pub(crate) tx_hash: B256,
    pub(crate) tx_index: u32,
    pub(crate) log_index: u64,
    pub(crate) address: Address,
    pub(crate) topics: Vec<B256>,
    pub(crate) data: Vec<u8>,
    pub(crate) emitter: u8,
    pub(crate) values: Vec<DynSolValue>,
}

/// A block with everything the block object needs.
#[derive(Debug, Clone)]
pub(crate) struct FullBlock {
    pub(crate) header: Header,
    pub(crate) tx_hashes: Vec<B256>,
    pub(crate) n_logs: usize,
    pub(crate) bloom: Bloom,
    /// The sum of its receipts' `gasUsed`.
    pub(crate) gas_used: u64,
}

/// Density class of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Density {
    /// Most blocks empty.
    Sparse,
    /// Most blocks have a few logs.
    Medium,
    /// Hundreds of logs per block.
    Dense,
}

/// The simulated chain.
#[derive(Debug)]
pub(crate) struct Chain {
    pub(crate) params: ChainParams,
    /// The emitters this chain draws from: a prefix of [`EMITTERS`], so an emitter index means the same
    /// (contract, event) whatever the options.
    emitters: &'static [Emitter],
    /// Sum of `emitters`' weights.
    total_weight: u32,
    /// The opt-in factory, if any.
    factory: Option<Factory>,
    pub(crate) users: Vec<Address>,
    miner: Address,
    state: RwLock<ChainState>,
    /// Publishes every new head, so tests and tasks can wait for one instead of polling.
    head_tx: tokio::sync::watch::Sender<u64>,
}

impl Chain {
    /// A chain at its initial head.
    pub(crate) fn new(params: ChainParams) -> Self {
        let users = gen::user_pool(params.seed);
        let miner = Address::from_word(keccak256(
            [b"dn/miner".as_slice(), &params.seed.to_be_bytes()].concat(),
        ));
        let state = ChainState {
            head: params.initial_head,
            gens: BTreeMap::new(),
            orphans: VecDeque::new(),
        };
        let (head_tx, _) = tokio::sync::watch::channel(params.initial_head);
        let emitters = contracts::emitters(params.anon_contract);
        let factory = params
            .factory
            .and_then(|cfg| Factory::new(params.seed, cfg, params.initial_head));
        Self {
            params,
            emitters,
            total_weight: emitters.iter().map(|emitter| emitter.weight).sum(),
            factory,
            users,
            miner,
            state: RwLock::new(state),
            head_tx,
        }
    }

    /// A read view of the moving state; hold it for one request, never across an `.await`.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, ChainState> {
        // A panic while holding the lock cannot leave the state half-written (every write is one assignment
        // or a whole reorg under the lock), so a poisoned lock is still consistent.
        self.state.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// The canonical head.
    pub(crate) fn head(&self) -> u64 {
        self.read().head
    }

    /// The block reward beneficiary.
    pub(crate) fn miner(&self) -> Address {
        self.miner
    }

    /// Produces `n` blocks, applying the scripted reorg schedule; returns the new head.
    pub(crate) fn mine(&self, n: u64) -> u64 {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        for _ in 0..n {
            state.head += 1;
            if let Some(every) = self.params.reorg_every.filter(|every| *every > 0) {
                if state.head % every == 0 {
                    Self::reorg_locked(&mut state, self.params.reorg_depth);
                }
            }
        }
        self.head_tx.send_replace(state.head);
        state.head
    }

    /// A receiver of the head, updated by every [`Chain::mine`].
    pub(crate) fn watch_head(&self) -> tokio::sync::watch::Receiver<u64> {
        self.head_tx.subscribe()
    }

    /// Replaces the top `depth` blocks (never the genesis) by a fork; returns the first replaced height.
    pub(crate) fn reorg(&self, depth: u64) -> u64 {
        let mut state = self.state.write().unwrap_or_else(PoisonError::into_inner);
        Self::reorg_locked(&mut state, depth)
    }

    fn reorg_locked(state: &mut ChainState, depth: u64) -> u64 {
        let first = state.head.saturating_sub(depth.saturating_sub(1)).max(1);
        for number in first..=state.head {
            let old = state.gen(number);
            state.orphans.push_back((number, old));
            state.gens.insert(number, old + 1);
        }
        while state.orphans.len() > MAX_ORPHANS {
            state.orphans.pop_front();
        }
        first
    }

    /// The seed of everything inside block `number` of fork generation `gen`.
    fn block_seed(&self, number: u64, gen: u32) -> u64 {
        hash3(self.params.seed, number, u64::from(gen), TAG_BLOCK)
    }

    /// The hash of block `number` in fork generation `gen`.
    ///
    /// Its last 8 bytes hold the number masked by a function of the first 8, so a hash can be mapped back to a
    /// height without storing anything (see [`Chain::number_of_hash`]); the hash still looks uniformly random.
    pub(crate) fn block_hash(&self, number: u64, gen: u32) -> B256 {
        let mut preimage = [0u8; 28];
        preimage[..8].copy_from_slice(b"dn/block");
        preimage[8..16].copy_from_slice(&self.params.seed.to_be_bytes());
        preimage[16..24].copy_from_slice(&number.to_be_bytes());
        preimage[24..].copy_from_slice(&gen.to_be_bytes());
        let mut hash = keccak256(preimage);
        let mask = self.hash_mask(&hash);
        hash[24..].copy_from_slice(&(number ^ mask).to_be_bytes());
        hash
    }

    fn hash_mask(&self, hash: &B256) -> u64 {
        let mut prefix = [0u8; 8];
        prefix.copy_from_slice(&hash[..8]);
        mix64(self.params.seed ^ u64::from_be_bytes(prefix))
    }

    /// The canonical height of `hash`, if it is a canonical block at or below `head`.
    pub(crate) fn number_of_hash(&self, state: &ChainState, hash: &B256, head: u64) -> Option<u64> {
        let mut suffix = [0u8; 8];
        suffix.copy_from_slice(&hash[24..]);
        let number = u64::from_be_bytes(suffix) ^ self.hash_mask(hash);
        (number <= head && self.block_hash(number, state.gen(number)) == *hash).then_some(number)
    }

    /// The header of canonical block `number` (whether or not it exists yet).
    pub(crate) fn header(&self, state: &ChainState, number: u64) -> Header {
        self.header_of(number, state.gen(number), state)
    }

    /// The header of block `number` of generation `gen`; its parent is the canonical block below.
    pub(crate) fn header_of(&self, number: u64, gen: u32, state: &ChainState) -> Header {
        let parent_hash = match number.checked_sub(1) {
            Some(parent) => self.block_hash(parent, state.gen(parent)),
            None => B256::ZERO,
        };
        Header {
            number,
            gen,
            hash: self.block_hash(number, gen),
            parent_hash,
            // A replacement (generation > 0) comes a little later than the block it replaces, so a reorg
            // changes the timestamp too; at most BLOCK_INTERVAL_SECS - 1 later keeps them strictly increasing.
            timestamp: self.params.genesis_timestamp
                + number * BLOCK_INTERVAL_SECS
                + u64::from(gen).min(BLOCK_INTERVAL_SECS - 1),
        }
    }

    /// The density class of the segment holding block `number`.
    pub(crate) fn density_of(&self, number: u64) -> Density {
        match hash3(self.params.seed, number / SEGMENT_LEN, 0, TAG_SEGMENT) % 1000 {
            0..11 => Density::Dense,
            11..300 => Density::Medium,
            _ => Density::Sparse,
        }
    }

    /// The block with more than 10,000 logs in the `HUGE_PERIOD`-block period holding `number`.
    pub(crate) fn huge_block_near(&self, number: u64) -> u64 {
        let period = number / HUGE_PERIOD;
        period * HUGE_PERIOD + hash3(self.params.seed, period, 0, TAG_HUGE) % HUGE_PERIOD
    }

    /// Whether block `number` is one of the rare blocks with more than 10,000 logs.
    pub(crate) fn is_huge(&self, number: u64) -> bool {
        number != 0 && self.huge_block_near(number) == number
    }

    /// The opt-in factory, if the chain has one.
    pub(crate) fn factory(&self) -> Option<&Factory> {
        self.factory.as_ref()
    }

    /// The skeleton of block `number` of generation `gen`, whose lower heights are those of `state`.
    pub(crate) fn plan(&self, number: u64, gen: u32, state: &ChainState) -> BlockPlan {
        let mut plan = self.base_plan(number, gen);
        if self.params.overcap.covers(number) {
            let n_logs = self.params.overcap.logs;
            overcap::extend_plan(self.params.seed, number, gen, n_logs, &mut plan);
        }
        if number > 0 {
            self.params
                .shapes
                .extend_plan(self.params.seed, number, gen, &mut plan);
        }
        if let Some(factory) = &self.factory {
            if number > 0 {
                factory.extend_plan(number, gen, |lower| state.gen(lower), &mut plan);
            }
        }
        plan
    }

    /// The skeleton of block `number` of generation `gen` without the factory: the default chain's, drawn
    /// exactly as it always was.
    fn base_plan(&self, number: u64, gen: u32) -> BlockPlan {
        let mut rng = Rng::new(self.block_seed(number, gen));
        if number == 0 {
            return BlockPlan {
                n_txs: 0,
                logs: Vec::new(),
            };
        }
        let huge = self.is_huge(number) || self.params.shapes.in_huge_run(number);
        let n_logs = if huge {
            // Uniform over the (contract, event) pairs (~1,300 each of the default 10), far under 10,000 per pair.
            rng.between(10_500, 13_500)
        } else {
            let base = match self.density_of(number) {
                Density::Sparse => {
                    if rng.chance(0.08) {
                        rng.between(1, 6)
                    } else {
                        0
                    }
                }
                Density::Medium => {
                    if rng.chance(0.7) {
                        rng.between(1, 12)
                    } else {
                        0
                    }
                }
                Density::Dense => rng.between(100, 400),
            };
            self.params.shapes.ordinary_logs(
                number,
                base,
                self.params.density,
                self.params.initial_head,
            )
        };
        let mut logs = Vec::with_capacity(n_logs as usize);
        let mut tx_index = 0u32;
        let mut left_in_tx = 0u64;
        for _ in 0..n_logs {
            if left_in_tx == 0 {
                if !logs.is_empty() {
                    // Now and then a transaction without logs sits between two with logs.
                    tx_index += if rng.chance(0.25) { 2 } else { 1 };
                }
                left_in_tx = rng.between(1, 4);
            }
            left_in_tx -= 1;
            let emitter = if huge {
                rng.below(self.emitters.len() as u64) as u8
            } else {
                pick_weighted(&mut rng, self.emitters, self.total_weight)
            };
            logs.push(PlannedLog {
                tx_index,
                emitter,
                address: EMITTERS[usize::from(emitter)].address,
                child: 0,
                seed: rng.next_u64(),
            });
        }
        let n_txs = if logs.is_empty() {
            rng.below(4) as u32
        } else {
            tx_index + 1 + rng.below(3) as u32
        };
        BlockPlan { n_txs, logs }
    }

    /// The hash of transaction `tx_index` of block `number` with hash `block_hash`.
    ///
    /// Like a block hash, its last 12 bytes hold the index and the height masked by a function of the first 8,
    /// so `eth_getTransactionByHash` finds the block without an index of every transaction (see
    /// [`Chain::locate_tx`]).
    pub(crate) fn tx_hash(&self, number: u64, block_hash: &B256, tx_index: u32) -> B256 {
        let mut preimage = [0u8; 37];
        preimage[..5].copy_from_slice(b"dn/tx");
        preimage[5..].copy_from_slice(block_hash.as_slice());
        let mut hash = keccak256([&preimage[..], &tx_index.to_be_bytes()].concat());
        let mask = self.hash_mask(&hash);
        hash[20..24].copy_from_slice(&(tx_index ^ (mask >> 32) as u32).to_be_bytes());
        hash[24..].copy_from_slice(&(number ^ mix64(mask)).to_be_bytes());
        hash
    }

    /// The canonical block (at or below `head`) and index of the transaction with hash `hash`, if any.
    pub(crate) fn locate_tx(
        &self,
        state: &ChainState,
        hash: &B256,
        head: u64,
    ) -> Option<(Header, BlockPlan, u32)> {
        let mask = self.hash_mask(hash);
        let mut index = [0u8; 4];
        index.copy_from_slice(&hash[20..24]);
        let tx_index = u32::from_be_bytes(index) ^ (mask >> 32) as u32;
        let mut suffix = [0u8; 8];
        suffix.copy_from_slice(&hash[24..]);
        let number = u64::from_be_bytes(suffix) ^ mix64(mask);
        if number > head {
            return None;
        }
        let header = self.header(state, number);
        if self.tx_hash(number, &header.hash, tx_index) != *hash {
            return None;
        }
        let plan = self.plan(number, header.gen, state);
        (tx_index < plan.n_txs).then_some((header, plan, tx_index))
    }

    /// Draws the values of the block's `position`th planned log and encodes it (its log index is
    /// [`Chain::log_index`] of that position).
    pub(crate) fn materialize(
        &self,
        header: &Header,
        planned: &PlannedLog,
        position: usize,
    ) -> Log {
        let emitter_idx = usize::from(planned.emitter);
        let emitter = &EMITTERS[emitter_idx];
        let mut rng = Rng::new(planned.seed);
        let values = match &self.factory {
            Some(factory) if planned.emitter == PAIR_CREATED => {
                factory.pair_created_values(planned.child)
            }
            _ => gen::values_for(emitter.event, &mut rng, &self.users),
        };
        let (topics, data) = gen::encode(parsed(emitter_idx), &values);
        Log {
            block_number: header.number,
            block_hash: header.hash,
            tx_hash: self.tx_hash(header.number, &header.hash, planned.tx_index),
            tx_index: planned.tx_index,
            log_index: self.log_index(header.number, position),
            address: planned.address,
            topics,
            data,
            emitter: planned.emitter,
            values,
        }
    }

    /// Calls `on_log` with every log of block `header` matching `filter`, in log-index order; returns how many.
    ///
    /// Address and topic0 are checked on the skeleton, so a filter on one contract draws and encodes only that
    /// contract's logs.
    pub(crate) fn logs_of_block(
        &self,
        header: &Header,
        plan: &BlockPlan,
        filter: &LogFilter,
        mut on_log: impl FnMut(Log),
    ) -> usize {
        let mut n_matched = 0;
        for (position, planned) in plan.logs.iter().enumerate() {
            let emitter_idx = usize::from(planned.emitter);
            if !filter.may_match(planned.address, parsed(emitter_idx).topic0) {
                continue;
            }
            let log = self.materialize(header, planned, position);
            if filter.matches(log.address, &log.topics) {
                n_matched += 1;
                on_log(log);
            }
        }
        n_matched
    }

    /// Every canonical log of `from..=to` (clamped to `head`).
    pub(crate) fn canonical_logs(
        &self,
        state: &ChainState,
        from: u64,
        to: u64,
        head: u64,
    ) -> Vec<Log> {
        let mut out = Vec::new();
        let any = LogFilter::any();
        for number in from..=to.min(head) {
            let header = self.header(state, number);
            let plan = self.plan(number, header.gen, state);
            self.logs_of_block(&header, &plan, &any, |log| out.push(log));
        }
        out
    }

    /// Block `number` of generation `gen` with its transaction hashes and bloom.
    pub(crate) fn full_block(&self, state: &ChainState, number: u64, gen: u32) -> FullBlock {
        let header = self.header_of(number, gen, state);
        let plan = self.plan(number, gen, state);
        let mut bloom = Bloom::ZERO;
        for (position, planned) in plan.logs.iter().enumerate() {
            let log = self.materialize(&header, planned, position);
            bloom.accrue(BloomInput::Raw(log.address.as_slice()));
            for topic in &log.topics {
                bloom.accrue(BloomInput::Raw(topic.as_slice()));
            }
        }
        let tx_hashes = (0..plan.n_txs)
            .map(|tx_index| self.tx_hash(number, &header.hash, tx_index))
            .collect();
        FullBlock {
            gas_used: self.block_gas_used(&header, &plan),
            header,
            tx_hashes,
            n_logs: plan.logs.len(),
            bloom,
        }
    }
}

/// Draws an index into `emitters` according to their weights (`total_weight` is their sum).
fn pick_weighted(rng: &mut Rng, emitters: &[Emitter], total_weight: u32) -> u8 {
    let mut roll = rng.below(u64::from(total_weight)) as u32;
    for (idx, emitter) in emitters.iter().enumerate() {
        if roll < emitter.weight {
            return idx as u8;
        }
        roll -= emitter.weight;
    }
    0
}

#[cfg(test)]
mod tests;
