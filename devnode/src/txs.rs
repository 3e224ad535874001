//! The transactions of a simulated block and their receipts, derived lazily from `(seed, number, fork generation,
//! transaction index)` like everything else of the chain.
//!
//! A block's plan says how many transactions it has and which logs each emitted; this module draws the rest:
//! sender, receiver (the contract whose log came last, a user for a plain transfer, none for the few contract
//! creations), value (mostly small, some above 2^64, 2^128 and near 2^256, to test exactness), nonce, gas,
//! legacy (type 0) or EIP-1559 (type 2) fees, input, status (only transactions without logs fail) and gas
//! used. The gas-related draws are cheap and come first, so `cumulativeGasUsed` of the last transaction of a
//! 2,000-transaction block costs microseconds; hashes, input and signature are made only for the transactions
//! asked for. Nothing here knows JSON.

use std::ops::Range;

use alloy_primitives::{keccak256, Address, Bloom, BloomInput, B256, U256};

use super::chain::{BlockPlan, Chain, Header, Log};
use super::rng::{hash3, mix64, Rng};

const TAG_TX: u64 = 20;
const TAG_INPUT: u64 = 21;
const TAG_BASE_FEE: u64 = 22;
/// Share of transactions that create a contract (`to` is null).
const CREATION_SHARE: f64 = 0.03;
/// Share of legacy (type 0) transactions; the others are EIP-1559 (type 2).
const LEGACY_SHARE: f64 = 0.2;
/// Share of transactions without logs that failed (a failed transaction has no logs).
const FAILED_SHARE: f64 = 0.1;

/// The fees a transaction's type carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fees {
    /// Type 0: `gasPrice` only.
    Legacy,
    /// Type 2: `maxFeePerGas` and `maxPriorityFeePerGas`.
    Dynamic { max_fee: u64, max_priority_fee: u64 },
}

/// The cheap part of a transaction: what its receipt's gas and the block's `gasUsed` need.
#[derive(Debug, Clone)]
struct Draw {
    creation: bool,
    fees: Fees,
    failed: bool,
    value: U256,
    nonce: u64,
    input_len: usize,
    gas: u64,
    gas_used: u64,
    gas_price: u64,
}

/// One transaction of a block with its receipt's fields.
#[derive(Debug, Clone)]
pub(crate) struct Tx {
    pub(crate) index: u32,
    pub(crate) hash: B256,
    pub(crate) from: Address,
    /// `None` for a contract creation.
    pub(crate) to: Option<Address>,
    pub(crate) value: U256,
    pub(crate) nonce: u64,
    pub(crate) gas: u64,
    /// The effective gas price (for type 2, base fee plus the tip paid).
    pub(crate) gas_price: u64,
    pub(crate) fees: Fees,
    pub(crate) input: Vec<u8>,
    pub(crate) y_parity: u64,
    pub(crate) r: B256,
    pub(crate) s: B256,
    pub(crate) status: bool,
    pub(crate) gas_used: u64,
    pub(crate) cumulative_gas_used: u64,
    /// The created contract, for a creation.
    pub(crate) contract_address: Option<Address>,
    /// Its logs: positions in the block plan's logs, which are its log indexes in the block (offset in the
    /// opt-in block of `log_indexes`).
    pub(crate) logs: Range<usize>,
}

impl Tx {
    /// The type: 0 (legacy) or 2 (EIP-1559).
    pub(crate) fn kind(&self) -> u64 {
        match self.fees {
            Fees::Legacy => 0,
            Fees::Dynamic { .. } => 2,
        }
    }
}

/// The range of the plan's logs each transaction emitted (empty for those without logs).
fn log_spans(plan: &BlockPlan) -> Vec<Range<usize>> {
    let mut spans = vec![0..0; plan.n_txs as usize];
    for (log_idx, planned) in plan.logs.iter().enumerate() {
        if let Some(span) = spans.get_mut(planned.tx_index as usize) {
            if span.start == span.end {
                *span = log_idx..log_idx + 1;
            } else {
                span.end = log_idx + 1;
            }
        }
    }
    spans
}

/// A value in wei: zero for 40%, a u64 for 40%, and the rest above 2^64, above 2^128 or near 2^256.
fn draw_value(rng: &mut Rng) -> U256 {
    let (low, mid, high) = (rng.next_u64(), rng.next_u64(), rng.next_u64());
    match rng.below(100) {
        0..40 => U256::ZERO,
        40..80 => U256::from(low >> (high % 40)),
        80..92 => U256::from_limbs([low, mid | 1, 0, 0]),
        92..99 => U256::from_limbs([low, mid, (high % (1 << 20)) | 1, 0]),
        _ => U256::MAX - U256::from(low),
    }
}

impl Chain {
    /// The base fee of block `header`, in wei (1 to 41 gwei).
    fn base_fee(&self, header: &Header) -> u64 {
        1_000_000_000
            + hash3(
                self.params.seed,
                header.number,
                u64::from(header.gen),
                TAG_BASE_FEE,
            ) % 40_000_000_000
    }

    fn tx_seed(&self, header: &Header, tx_index: u32) -> u64 {
        let position = (u64::from(header.gen) << 32) | u64::from(tx_index);
        hash3(self.params.seed, header.number, position, TAG_TX)
    }

    /// The cheap draws of transaction `tx_index`, which emitted `n_logs` logs.
    fn draw(&self, header: &Header, base_fee: u64, tx_index: u32, n_logs: usize) -> Draw {
        let mut rng = Rng::new(self.tx_seed(header, tx_index));
        let creation = rng.chance(CREATION_SHARE);
        let legacy = rng.chance(LEGACY_SHARE);
        let failed = n_logs == 0 && rng.chance(FAILED_SHARE);
        let value = draw_value(&mut rng);
        let nonce = rng.below(100_000);
        let n_words = rng.below(5) as usize;
        let init_len = rng.between(64, 400) as usize;
        let input_len = match (creation, n_logs) {
            (true, _) => init_len,
            (false, 0) => 0,
            (false, _) => 4 + 32 * n_words,
        };
        let mut gas_used = 21_000 + 16 * input_len as u64 + 1_750 * n_logs as u64;
        gas_used += rng.below(40_000);
        if creation {
            gas_used += 32_000 + 200 * input_len as u64;
        }
        let gas = gas_used + rng.below(gas_used / 2 + 1);
        let tip = rng.between(1, 3_000_000_000);
        let headroom = rng.below(base_fee);
        let fees = if legacy {
            Fees::Legacy
        } else {
            Fees::Dynamic {
                max_fee: base_fee + tip + headroom,
                max_priority_fee: tip,
            }
        };
        Draw {
            creation,
            fees,
            failed,
            value,
            nonce,
            input_len,
            gas,
            gas_used,
            // With room above base fee plus tip, a type 2 transaction pays the whole tip, as a legacy one does.
            gas_price: base_fee + tip,
        }
    }

    /// The block's `gasUsed`: the sum over its transactions.
    pub(crate) fn block_gas_used(&self, header: &Header, plan: &BlockPlan) -> u64 {
        let base_fee = self.base_fee(header);
        log_spans(plan)
            .iter()
            .enumerate()
            .map(|(tx_idx, span)| {
                self.draw(header, base_fee, tx_idx as u32, span.len())
                    .gas_used
            })
            .sum()
    }

    /// Every transaction of block `header` (whose plan is `plan`), in order.
    pub(crate) fn transactions(&self, header: &Header, plan: &BlockPlan) -> Vec<Tx> {
        let base_fee = self.base_fee(header);
        let mut cumulative_gas_used = 0;
        log_spans(plan)
            .into_iter()
            .enumerate()
            .map(|(tx_idx, span)| {
                let draw = self.draw(header, base_fee, tx_idx as u32, span.len());
                cumulative_gas_used += draw.gas_used;
                self.finish(header, plan, tx_idx as u32, span, draw, cumulative_gas_used)
            })
            .collect()
    }

    /// Transaction `tx_index` of block `header`, if it has one.
    pub(crate) fn transaction(
        &self,
        header: &Header,
        plan: &BlockPlan,
        tx_index: u32,
    ) -> Option<Tx> {
        if tx_index >= plan.n_txs {
            return None;
        }
        let base_fee = self.base_fee(header);
        let spans = log_spans(plan);
        let mut cumulative_gas_used = 0;
        for (tx_idx, span) in spans.iter().enumerate().take(tx_index as usize) {
            cumulative_gas_used += self
                .draw(header, base_fee, tx_idx as u32, span.len())
                .gas_used;
        }
        let span = spans[tx_index as usize].clone();
        let draw = self.draw(header, base_fee, tx_index, span.len());
        cumulative_gas_used += draw.gas_used;
        Some(self.finish(header, plan, tx_index, span, draw, cumulative_gas_used))
    }

    /// The logs of `tx`, materialised (log indexes are the block's).
    pub(crate) fn tx_logs(&self, header: &Header, plan: &BlockPlan, tx: &Tx) -> Vec<Log> {
        tx.logs
            .clone()
            .map(|position| self.materialize(header, &plan.logs[position], position))
            .collect()
    }

    /// Adds the expensive fields (hash, addresses, input, signature) to a transaction's draws.
    fn finish(
        &self,
        header: &Header,
        plan: &BlockPlan,
        tx_index: u32,
        logs: Range<usize>,
        draw: Draw,
        cumulative_gas_used: u64,
    ) -> Tx {
        let number = header.number;
        let hash = self.tx_hash(number, &header.hash, tx_index);
        let n_users = self.users.len() as u64;
        let sender_pick = hash3(
            self.params.seed,
            number,
            u64::from(tx_index),
            u64::from(header.gen),
        );
        let from = self.users[(sender_pick % n_users) as usize];
        // A call goes to the contract whose log came last; a transaction without logs is a transfer to a user.
        let receiver = match logs.clone().last() {
            Some(log_idx) => plan.logs[log_idx].address,
            None => self.users[(mix64(number ^ u64::from(tx_index)) % n_users) as usize],
        };
        let mut input = vec![0u8; draw.input_len];
        Rng::new(hash3(
            self.params.seed,
            number,
            (u64::from(header.gen) << 32) | u64::from(tx_index),
            TAG_INPUT,
        ))
        .fill(&mut input);
        let contract_address = draw.creation.then(|| {
            Address::from_word(keccak256(
                [
                    b"dn/create".as_slice(),
                    from.as_slice(),
                    &draw.nonce.to_be_bytes(),
                ]
                .concat(),
            ))
        });
        if draw.creation && input.len() >= 5 {
            // The usual solc preamble: PUSH1 0x80 PUSH1 0x40 MSTORE.
            input[..5].copy_from_slice(&[0x60, 0x80, 0x60, 0x40, 0x52]);
        }
        Tx {
            index: tx_index,
            hash,
            from,
            to: (!draw.creation).then_some(receiver),
            value: draw.value,
            nonce: draw.nonce,
            gas: draw.gas,
            gas_price: draw.gas_price,
            fees: draw.fees,
            input,
            y_parity: u64::from(hash[5] & 1),
            r: keccak256([b"dn/r".as_slice(), hash.as_slice()].concat()),
            s: keccak256([b"dn/s".as_slice(), hash.as_slice()].concat()),
            status: !draw.failed,
            gas_used: draw.gas_used,
            cumulative_gas_used,
            contract_address,
            logs,
        }
    }
}

/// The bloom of `logs`' addresses and topics.
pub(crate) fn bloom_of(logs: &[Log]) -> Bloom {
    let mut bloom = Bloom::ZERO;
    for log in logs {
        bloom.accrue(BloomInput::Raw(log.address.as_slice()));
        for topic in &log.topics {
            bloom.accrue(BloomInput::Raw(topic.as_slice()));
        }
    }
    bloom
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_cover_zero_u64_and_beyond_2_pow_64_and_2_pow_128() {
        let mut rng = Rng::new(7);
        let values: Vec<U256> = (0..2_000).map(|_| draw_value(&mut rng)).collect();
        let two_64 = U256::from(1u8) << 64;
        let two_128 = U256::from(1u8) << 128;
        assert!(values.iter().any(|v| v.is_zero()));
        assert!(values.iter().any(|v| !v.is_zero() && *v < two_64));
        assert!(values.iter().any(|v| *v >= two_64 && *v < two_128));
        assert!(values
            .iter()
            .any(|v| *v >= two_128 && *v < (U256::from(1u8) << 200)));
        assert!(values.iter().any(|v| *v > U256::MAX - two_64));
    }
}
