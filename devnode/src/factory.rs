//! The opt-in Uniswap V2 factory and its children (pairs): when each pair is created, at which address, and
//! what the pairs emit in each block. Pure: it extends a block's plan from `(seed, number, fork generation)`
//! and the fork generations of the blocks below; it knows nothing of JSON, filters, locks or the other
//! contracts.
//!
//! Pair `k` (its ordinal, from 0) is due at block `ceil(horizon * sqrt((k + 1) / children))`: `children` pairs
//! by the horizon (the chain's initial head), at a rate growing linearly with the height, so children multiply
//! as the chain goes on, and the pairs due at a height come from arithmetic, never from a scan of the chain.
//! A pair's address is a hash of `(seed, k)`, so a pair created again after a reorg has the same address, as a
//! CREATE2 pair has.
//!
//! In the first fork of its due height a pair is created; in a later fork of that height (after a reorg) a
//! die decides whether it is created again there, a few blocks later, or not at all, so the children of
//! orphaned blocks disappear and some come back elsewhere. A pair emits only from its creating transaction
//! on: some emit in the creating transaction *before* the factory's `PairCreated` (as a Safe proxy's setup
//! events precede `ProxyCreation`), some again later in the same block, and then in later blocks, a few busy
//! pairs often and most rarely. The factory's transactions follow the block's other transactions.
//!
//! A later block's pair logs depend on whether the pair exists in the canonical chain *now*; a stale replica
//! serving an orphaned block computes them against today's canonical chain too (a reorg replaces the top
//! blocks together, so for canonical blocks this is always consistent).

use std::ops::Range;

use alloy_dyn_abi::DynSolValue;
use alloy_primitives::{keccak256, Address, U256};

use super::chain::{BlockPlan, PlannedLog};
use super::config::FactoryConfig;
use super::contracts::{
    CHILD_APPROVAL, CHILD_BURN, CHILD_MINT, CHILD_SWAP, CHILD_SYNC, CHILD_TRANSFER, FACTORY,
    PAIR_CREATED,
};
use super::rng::{hash3, Rng};

const TAG_FACTORY: u64 = 16;
const TAG_RECREATE: u64 = 17;
const TAG_TOKENS: u64 = 18;

/// One pair in this many is busy.
const BUSY_STRIDE: u64 = 20;
/// Actions (a swap, a mint, ...) of a busy pair per block, on average.
const BUSY_ACTIONS_PER_BLOCK: f64 = 0.1;
/// Actions of a quiet pair per block, on average.
const QUIET_ACTIONS_PER_BLOCK: f64 = 0.001;
/// Share of pairs that emit in their creating transaction before the `PairCreated` log.
const PRE_CREATION_SHARE: f64 = 0.3;
/// Share of pairs that emit again later in the block that creates them.
const AGAIN_SHARE: f64 = 0.3;
/// How many blocks after its due height a pair whose creation was orphaned may be created again.
pub(crate) const MAX_DELAY: u64 = 3;
/// Pair logs of a burst block: more than the 10,000-result cap together, spread over every pair.
const BURST_LOGS: (u64, u64) = (10_500, 12_000);

/// Something a pair does in one transaction, and the logs it emits in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// `Sync`, `Swap`.
    Swap,
    /// The liquidity token's mint `Transfer`, `Sync`, `Mint`.
    Mint,
    /// `Transfer` to the pair, the burn `Transfer`, `Sync`, `Burn`.
    Burn,
    /// A liquidity token `Transfer`.
    Transfer,
    /// A liquidity token `Approval`.
    Approve,
}

impl Action {
    fn draw(rng: &mut Rng) -> Self {
        match rng.below(100) {
            0..60 => Action::Swap,
            60..70 => Action::Mint,
            70..76 => Action::Burn,
            76..92 => Action::Transfer,
            _ => Action::Approve,
        }
    }

    /// The [`EMITTERS`](super::contracts::EMITTERS) indexes of its logs, in order.
    fn emitters(self) -> &'static [u8] {
        match self {
            Action::Swap => &[CHILD_SYNC, CHILD_SWAP],
            Action::Mint => &[CHILD_TRANSFER, CHILD_SYNC, CHILD_MINT],
            Action::Burn => &[CHILD_TRANSFER, CHILD_TRANSFER, CHILD_SYNC, CHILD_BURN],
            Action::Transfer => &[CHILD_TRANSFER],
            Action::Approve => &[CHILD_APPROVAL],
        }
    }
}

/// A chain's factory: its schedule of pairs and their activity.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Factory {
    seed: u64,
    /// Pairs due by `horizon`.
    children: u64,
    /// The chain's initial head (at least 1).
    horizon: u64,
    /// Burst blocks, in the second half of the horizon.
    bursts: u32,
}

impl Factory {
    /// The factory of a chain with seed `seed` and initial head `horizon`; `None` when it creates no pairs.
    pub(crate) fn new(seed: u64, cfg: FactoryConfig, horizon: u64) -> Option<Self> {
        (cfg.children > 0).then_some(Self {
            seed,
            children: cfg.children,
            horizon: horizon.max(1),
            bursts: cfg.bursts,
        })
    }

    /// The height at which pair `k` is due (at least 1: the genesis has no transactions).
    pub(crate) fn due_block(&self, k: u64) -> u64 {
        let share = (k + 1) as f64 / self.children as f64;
        ((self.horizon as f64 * share.sqrt()).ceil() as u64).max(1)
    }

    /// The first pair due at or after `number`: pairs `0..first_due_from(number)` are due below it.
    pub(crate) fn first_due_from(&self, number: u64) -> u64 {
        let below = number.saturating_sub(1) as f64 / self.horizon as f64;
        // An estimate from the inverse of `due_block`, then exact steps (`due_block` is non-decreasing).
        let mut k = (self.children as f64 * below * below) as u64;
        while k > 0 && self.due_block(k - 1) >= number {
            k -= 1;
        }
        while self.due_block(k) < number {
            k += 1;
        }
        k
    }

    /// The pairs due at height `number`.
    #[cfg(test)]
    pub(crate) fn due_at(&self, number: u64) -> Range<u64> {
        self.first_due_from(number)..self.first_due_from(number + 1)
    }

    /// The address of pair `k`.
    pub(crate) fn address(&self, k: u64) -> Address {
        let mut preimage = [0u8; 23];
        preimage[..7].copy_from_slice(b"dn/pair");
        preimage[7..15].copy_from_slice(&self.seed.to_be_bytes());
        preimage[15..].copy_from_slice(&k.to_be_bytes());
        Address::from_word(keccak256(preimage))
    }

    /// The tokens of pair `k`, sorted as the factory sorts them (`token0 < token1`).
    fn tokens(&self, k: u64) -> (Address, Address) {
        let token = |side: u64| {
            let word = hash3(self.seed, k, side, TAG_TOKENS);
            let mut preimage = [0u8; 16];
            preimage[..8].copy_from_slice(b"dn/token");
            preimage[8..].copy_from_slice(&word.to_be_bytes());
            Address::from_word(keccak256(preimage))
        };
        let (a, b) = (token(0), token(1));
        (a.min(b), a.max(b))
    }

    /// The height where pair `k` is created when its due height has fork generation `gen`: the due height in
    /// its first fork; after a reorg, a third of the time again there, a third a few blocks later (up to
    /// [`MAX_DELAY`]), a third never.
    pub(crate) fn creation_height(&self, k: u64, gen: u32) -> Option<u64> {
        let due = self.due_block(k);
        if gen == 0 {
            return Some(due);
        }
        let mut rng = Rng::new(hash3(self.seed, k, u64::from(gen), TAG_RECREATE));
        match rng.below(3) {
            0 => Some(due),
            1 => Some(due + rng.between(1, MAX_DELAY)),
            _ => None,
        }
    }

    /// The pairs that may be created at height `number`: those due there or up to [`MAX_DELAY`] before.
    pub(crate) fn candidates_at(&self, number: u64) -> Range<u64> {
        self.first_due_from(number.saturating_sub(MAX_DELAY).max(1))
            ..self.first_due_from(number + 1)
    }

    fn busy_offset(&self) -> u64 {
        self.seed % BUSY_STRIDE
    }

    /// How many of pairs `0..n` are busy.
    fn n_busy_below(&self, n: u64) -> u64 {
        let offset = self.busy_offset();
        if n > offset {
            (n - offset - 1) / BUSY_STRIDE + 1
        } else {
            0
        }
    }

    /// Whether pair `k` is one of the busy few.
    pub(crate) fn is_busy(&self, k: u64) -> bool {
        k % BUSY_STRIDE == self.busy_offset()
    }

    /// The heights whose pair logs together exceed 10,000 (none unless configured), spread evenly over the
    /// second half of the horizon, where there are many pairs to share them.
    pub(crate) fn burst_blocks(&self) -> impl Iterator<Item = u64> + '_ {
        let half = self.horizon / 2;
        let n_bursts = u64::from(self.bursts);
        (1..=n_bursts).map(move |i| half + i * (self.horizon - half) / (n_bursts + 1))
    }

    /// The values of the `PairCreated` log creating pair `k`: `token0`, `token1`, `pair`, and the unnamed
    /// `uint256`, the factory's pair count after it (counting every pair due so far).
    pub(crate) fn pair_created_values(&self, k: u64) -> Vec<DynSolValue> {
        let (token0, token1) = self.tokens(k);
        vec![
            DynSolValue::Address(token0),
            DynSolValue::Address(token1),
            DynSolValue::Address(self.address(k)),
            DynSolValue::Uint(U256::from(k + 1), 256),
        ]
    }

    /// Appends the factory's and the pairs' transactions of block `number` of fork generation `gen` to
    /// `plan`; `gen_of` gives the canonical fork generation of a lower height.
    pub(crate) fn extend_plan(
        &self,
        number: u64,
        gen: u32,
        gen_of: impl Fn(u64) -> u32,
        plan: &mut BlockPlan,
    ) {
        let mut rng = Rng::new(hash3(self.seed, number, u64::from(gen), TAG_FACTORY));
        // The factory's transactions follow the block's others.
        let tx_index = plan.n_txs;
        let mut txs = TxWriter { plan, tx_index };
        let mut created_here = Vec::new();
        for k in self.candidates_at(number) {
            let due = self.due_block(k);
            let due_gen = if due == number { gen } else { gen_of(due) };
            if self.creation_height(k, due_gen) != Some(number) {
                continue;
            }
            let pair = self.address(k);
            if rng.chance(PRE_CREATION_SHARE) {
                for &emitter in Action::Mint.emitters() {
                    txs.push(emitter, pair, k, &mut rng);
                }
            }
            txs.push(PAIR_CREATED, FACTORY, k, &mut rng);
            txs.end_tx();
            created_here.push(k);
        }
        for k in created_here {
            if rng.chance(AGAIN_SHARE) {
                txs.action(self.address(k), k, &mut rng);
            }
        }
        let n_before = self.first_due_from(number);
        // Pairs due below this height exist if created below it (one created here is in `created_here`).
        let exists = |k: u64| {
            self.creation_height(k, gen_of(self.due_block(k)))
                .is_some_and(|height| height < number)
        };
        let n_busy = self.n_busy_below(n_before);
        for _ in 0..poisson(&mut rng, n_busy as f64 * BUSY_ACTIONS_PER_BLOCK) {
            let k = rng.below(n_busy) * BUSY_STRIDE + self.busy_offset();
            if exists(k) {
                txs.action(self.address(k), k, &mut rng);
            }
        }
        let n_quiet = n_before - n_busy;
        for _ in 0..poisson(&mut rng, n_quiet as f64 * QUIET_ACTIONS_PER_BLOCK) {
            let k = rng.below(n_before);
            if !self.is_busy(k) && exists(k) {
                txs.action(self.address(k), k, &mut rng);
            }
        }
        if n_before > 0 && self.burst_blocks().any(|burst| burst == number) {
            let target = rng.between(BURST_LOGS.0, BURST_LOGS.1);
            let mut n_logs = 0;
            // Bounded: when most pairs were orphaned, the burst is smaller rather than endless.
            for _ in 0..target {
                if n_logs >= target {
                    break;
                }
                let k = rng.below(n_before);
                if exists(k) {
                    n_logs += txs.action(self.address(k), k, &mut rng);
                }
            }
        }
        let n_txs = txs.tx_index;
        plan.n_txs = n_txs;
    }
}

/// Appends logs to a plan, one transaction at a time.
struct TxWriter<'a> {
    plan: &'a mut BlockPlan,
    tx_index: u32,
}

impl TxWriter<'_> {
    fn push(&mut self, emitter: u8, address: Address, child: u64, rng: &mut Rng) {
        self.plan.logs.push(PlannedLog {
            tx_index: self.tx_index,
            emitter,
            address,
            child,
            seed: rng.next_u64(),
        });
    }

    fn end_tx(&mut self) {
        self.tx_index += 1;
    }

    /// One transaction of pair `k` doing a random action; returns how many logs it emitted.
    fn action(&mut self, pair: Address, k: u64, rng: &mut Rng) -> u64 {
        let emitters = Action::draw(rng).emitters();
        for &emitter in emitters {
            self.push(emitter, pair, k, rng);
        }
        self.end_tx();
        emitters.len() as u64
    }
}

/// A Poisson-distributed count with mean `mean` (Knuth's method; a rounded normal above 30).
fn poisson(rng: &mut Rng, mean: f64) -> u64 {
    if mean <= 0.0 {
        return 0;
    }
    if mean < 30.0 {
        let limit = (-mean).exp();
        let mut n = 0;
        let mut product = rng.unit();
        while product > limit {
            n += 1;
            product *= rng.unit();
        }
        return n;
    }
    // Box-Muller; `1 - unit` is in (0, 1], so the logarithm is finite.
    let radius = (-2.0 * (1.0 - rng.unit()).ln()).sqrt();
    let normal = radius * (std::f64::consts::TAU * rng.unit()).cos();
    (mean + mean.sqrt() * normal).round().max(0.0) as u64
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::chain::{Chain, Log};
    use crate::config::{ChainConfig, DevNodeConfig};

    fn factory(children: u64, horizon: u64) -> Factory {
        let cfg = FactoryConfig {
            children,
            bursts: 0,
        };
        Factory::new(7, cfg, horizon).expect("children > 0")
    }

    fn chain(blocks: u64, children: u64) -> Chain {
        let mut cfg = DevNodeConfig::default();
        cfg.chain.blocks = blocks;
        cfg.chain.factory = Some(FactoryConfig {
            children,
            bursts: 0,
        });
        Chain::new(crate::chain_params(&cfg))
    }

    #[test]
    fn pairs_are_due_in_order_and_multiply_as_the_chain_goes_on() {
        let factory = factory(200, 3_000);
        let mut previous = 0;
        let mut seen = 0;
        for number in 1..=3_000 {
            for k in factory.due_at(number) {
                assert_eq!(k, seen, "ordinals follow the heights");
                assert_eq!(factory.due_block(k), number);
                seen += 1;
            }
            assert!(factory.first_due_from(number) >= previous);
            previous = factory.first_due_from(number);
        }
        assert_eq!(seen, 200, "the configured count by the horizon");
        let first_half = factory.first_due_from(1_501);
        assert!(
            first_half * 2 < 200 - first_half,
            "{first_half} pairs in the first half"
        );
        assert!(factory.due_at(0).is_empty());
        assert_eq!(
            Factory::new(7, FactoryConfig::default(), 0).map(|f| f.horizon),
            Some(1)
        );
        assert_eq!(
            Factory::new(
                7,
                FactoryConfig {
                    children: 0,
                    bursts: 1
                },
                10
            ),
            None
        );
    }

    /// Where each child was created: its ordinal's `(block, tx_index, log_index)`.
    fn creations(logs: &[Log]) -> HashMap<Address, (u64, u32, u64)> {
        logs.iter()
            .filter(|log| log.emitter == PAIR_CREATED)
            .map(|log| {
                let DynSolValue::Address(pair) = log.values[2] else {
                    panic!("PairCreated's third value is the pair");
                };
                (pair, (log.block_number, log.tx_index, log.log_index))
            })
            .collect()
    }

    /// Goal: a child emits only from its creating transaction on; some before the creation log in that
    /// transaction, some again later in the same block, and some in later blocks. Method: every child log of
    /// a 3,000-block chain is compared with its child's `PairCreated` position.
    #[test]
    fn a_child_never_emits_before_its_creating_transaction() {
        let chain = chain(3_000, 150);
        let state = chain.read();
        let logs = chain.canonical_logs(&state, 0, 3_000, 3_000);
        let created = creations(&logs);
        assert_eq!(created.len(), 150);
        let (mut before, mut same_block, mut later) = (0, 0, 0);
        for log in logs.iter().filter(|log| log.emitter > PAIR_CREATED) {
            let (block, tx_index, log_index) = created[&log.address];
            assert!(
                (log.block_number, log.tx_index) >= (block, tx_index),
                "{log:?} before its creation at {block}/{tx_index}"
            );
            if log.block_number == block && log.tx_index == tx_index {
                assert!(log.log_index < log_index);
                before += 1;
            } else if log.block_number == block {
                same_block += 1;
            } else {
                later += 1;
            }
        }
        assert!(
            before > 0 && same_block > 0 && later > 0,
            "{before} {same_block} {later}"
        );
    }

    /// Goal: the default contracts' logs of a chain with a factory are the default chain's, at the same
    /// positions: the factory only appends transactions.
    #[test]
    fn the_factory_appends_to_blocks_without_moving_the_other_logs() {
        let plain = Chain::new(crate::chain_params(&DevNodeConfig {
            chain: ChainConfig {
                blocks: 3_000,
                ..ChainConfig::default()
            },
            ..DevNodeConfig::default()
        }));
        let with_factory = chain(3_000, 150);
        let plain_logs = plain.canonical_logs(&plain.read(), 0, 3_000, 3_000);
        let mut other_logs = with_factory.canonical_logs(&with_factory.read(), 0, 3_000, 3_000);
        other_logs.retain(|log| usize::from(log.emitter) < contracts_n_weighted());
        assert_eq!(plain_logs.len(), other_logs.len());
        for (a, b) in plain_logs.iter().zip(&other_logs) {
            assert_eq!(
                (a.block_hash, a.log_index, a.tx_hash, &a.topics, &a.data),
                (b.block_hash, b.log_index, b.tx_hash, &b.topics, &b.data)
            );
        }
    }

    fn contracts_n_weighted() -> usize {
        crate::contracts::N_WEIGHTED_EMITTERS
    }

    /// Goal: a few pairs are busy and most are quiet. Method: count each child's logs over the chain.
    #[test]
    fn a_few_children_are_busy_and_most_quiet() {
        let chain = chain(20_000, 400);
        let state = chain.read();
        let factory = *chain.factory().expect("factory");
        let mut per_child: HashMap<u64, usize> = HashMap::new();
        for number in 1..=20_000 {
            for planned in &chain.plan(number, 0, &state).logs {
                if planned.emitter > PAIR_CREATED {
                    assert_eq!(planned.address, factory.address(planned.child));
                    *per_child.entry(planned.child).or_default() += 1;
                }
            }
        }
        let busy: usize = per_child
            .iter()
            .filter(|(k, _)| factory.is_busy(**k))
            .map(|(_, n)| n)
            .sum();
        let quiet: usize = per_child
            .iter()
            .filter(|(k, _)| !factory.is_busy(**k))
            .map(|(_, n)| n)
            .sum();
        let n_busy = (0..400).filter(|k| factory.is_busy(*k)).count();
        assert!((10..=30).contains(&n_busy), "{n_busy} busy children");
        let (busy_each, quiet_each) = (busy / n_busy, quiet / (400 - n_busy));
        assert!(
            busy_each > 20 * quiet_each,
            "busy {busy_each}, quiet {quiet_each} logs each"
        );
        assert!(quiet > 0);
    }

    /// Goal: a reorg regenerates the factory's work of the replaced blocks: children created there disappear
    /// or are created again (same address, another transaction), and no log of a child without a canonical
    /// creation remains. Method: reorg the top of a chain where pairs are due often, many times, and check
    /// every child log against the canonical creations.
    #[test]
    fn children_of_orphaned_blocks_disappear_or_are_created_again() {
        let chain = chain(2_000, 1_000);
        let before = creations(&chain.canonical_logs(&chain.read(), 1_950, 2_000, 2_000));
        let (mut gone, mut again, mut moved) = (0, 0, 0);
        for _ in 0..6 {
            chain.mine(3);
            chain.reorg(20);
        }
        let state = chain.read();
        let logs = chain.canonical_logs(&state, 0, state.head, state.head);
        let created = creations(&logs);
        for (pair, (block, ..)) in &before {
            match created.get(pair) {
                None => gone += 1,
                Some((again_block, ..)) => {
                    assert!(
                        (*block..=block + MAX_DELAY).contains(again_block),
                        "a pair is created again at its height or a little later"
                    );
                    again += 1;
                    moved += usize::from(again_block != block);
                }
            }
        }
        assert!(
            gone > 0 && again > moved && moved > 0,
            "{gone} gone, {again} created again, {moved} of them later"
        );
        for log in logs.iter().filter(|log| log.emitter > PAIR_CREATED) {
            let (block, tx_index, _) = created
                .get(&log.address)
                .unwrap_or_else(|| panic!("{log:?} of a child never created"));
            assert!((log.block_number, log.tx_index) >= (*block, *tx_index));
        }
    }

    /// Goal: the `factory` bench shape has a few hundred to a couple thousand children by the end and burst
    /// blocks where the pairs' logs exceed 10,000 together but come nowhere near it for any one pair.
    #[test]
    fn the_factory_preset_has_bursts_over_the_cap_but_no_pair_near_it() {
        let chain = Chain::new(crate::chain_params(&DevNodeConfig {
            chain: ChainConfig::factory_preset(),
            ..DevNodeConfig::default()
        }));
        let factory = *chain.factory().expect("factory");
        let n_children = factory.first_due_from(chain.head() + 1);
        assert!((300..=2_000).contains(&n_children), "{n_children}");
        let bursts: Vec<u64> = factory.burst_blocks().collect();
        assert_eq!(bursts.len(), 2);
        let state = chain.read();
        for number in bursts {
            let plan = chain.plan(number, 0, &state);
            let mut per_pair: HashMap<Address, usize> = HashMap::new();
            for planned in plan.logs.iter().filter(|p| p.emitter > PAIR_CREATED) {
                *per_pair.entry(planned.address).or_default() += 1;
            }
            let total: usize = per_pair.values().sum();
            assert!(total > 10_000, "{number}: {total}");
            assert!(per_pair.values().all(|n| *n < 1_000), "{number}");
        }
    }

    #[test]
    fn poisson_counts_have_their_mean() {
        let mut rng = Rng::new(3);
        for mean in [0.5, 4.0, 80.0] {
            let total: u64 = (0..4_000).map(|_| poisson(&mut rng, mean)).sum();
            let observed = total as f64 / 4_000.0;
            assert!((observed - mean).abs() < mean * 0.1, "{mean}: {observed}");
        }
        assert_eq!(poisson(&mut rng, 0.0), 0);
    }
}
