//! Opt-in blocks where one contract alone has more logs than the result cap, and the switch for
//! `eth_getBlockReceipts`: the shapes that only a receipts path can index.
//!
//! An over-cap block keeps its ordinary logs and gets, after its other transactions, `logs` more logs of
//! [`TOKEN_A`]'s `Transfer` spread over many transactions (1 to 10 logs each). No split of the range, the
//! addresses or topic0 brings a one-block `eth_getLogs` for that contract under the cap; its receipts hold them.
//! This module owns the options (`overcap_blocks`, `overcap_run`, `overcap_logs`, `block_receipts`) and the
//! plan extension; it knows nothing of JSON or serving.

use super::chain::{BlockPlan, PlannedLog};
use super::contracts::TOKEN_A;
use super::rng::{hash3, Rng};

/// Logs of the one contract in an over-cap block by default: over the spec's 10,000 by a tenth.
pub const DEFAULT_OVERCAP_LOGS: u64 = 11_000;
/// Most logs of one transaction of an over-cap block.
const MAX_LOGS_PER_TX: u64 = 10;
/// [`EMITTERS`](super::contracts::EMITTERS) index of [`TOKEN_A`]'s `Transfer`.
const OVERCAP_EMITTER: u8 = 0;
const TAG_OVERCAP: u64 = 19;

/// The option names [`OvercapConfig::set_option`] accepts (and `block_receipts` and `tx_receipts`, which
/// `config` sets).
pub const OVERCAP_OPTION_NAMES: &[&str] = &[
    "block_receipts",
    "tx_receipts",
    "overcap_blocks",
    "overcap_run",
    "overcap_logs",
    "overcap_reorg",
];

/// Which blocks have one contract over the cap. Empty (the default) leaves the chain byte for byte as it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OvercapConfig {
    /// Heights of single over-cap blocks, sorted (`overcap_blocks=900,1500`).
    pub blocks: Vec<u64>,
    /// A run of consecutive over-cap blocks: `(first, count)` (`overcap_run=2000:5`).
    pub run: Option<(u64, u64)>,
    /// Logs of [`TOKEN_A`]'s `Transfer` added to each of them.
    pub logs: u64,
    /// A fault (`overcap_reorg=N`): the first `eth_getBlockReceipts` of block N finds the chain reorganised
    /// from N up, as when a block changes while its receipts are being read.
    pub reorg_on_receipts: Option<u64>,
}

impl Default for OvercapConfig {
    fn default() -> Self {
        Self {
            blocks: Vec::new(),
            run: None,
            logs: DEFAULT_OVERCAP_LOGS,
            reorg_on_receipts: None,
        }
    }
}

impl OvercapConfig {
    /// The `overcap` bench shape over a chain of `n_blocks`: ten single blocks spread over it and a run of
    /// five in its second half.
    pub fn spread(n_blocks: u64) -> Self {
        let step = (n_blocks / 11).max(1);
        Self {
            blocks: (1..=10).map(|k| k * step - step / 3).collect(),
            run: Some((n_blocks / 2 + step / 2, 5)),
            logs: DEFAULT_OVERCAP_LOGS,
            reorg_on_receipts: None,
        }
    }

    /// Whether block `number` is one of them.
    pub fn covers(&self, number: u64) -> bool {
        number != 0
            && (self.blocks.binary_search(&number).is_ok()
                || self.run.is_some_and(|(first, count)| {
                    (first..first.saturating_add(count)).contains(&number)
                }))
    }

    /// Every over-cap height, sorted.
    pub fn heights(&self) -> Vec<u64> {
        let mut heights = self.blocks.clone();
        if let Some((first, count)) = self.run {
            heights.extend(first..first.saturating_add(count));
        }
        heights.retain(|number| *number != 0);
        heights.sort_unstable();
        heights.dedup();
        heights
    }

    /// Sets `overcap_blocks` (comma-separated heights), `overcap_run` (`FIRST:COUNT`) or `overcap_logs`.
    ///
    /// # Errors
    /// What the option accepts, when `value` does not parse.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<(), String> {
        let number = |text: &str| {
            text.trim()
                .parse::<u64>()
                .map_err(|_| format!("{text:?} is not a number"))
        };
        match name {
            "overcap_blocks" => {
                let mut blocks = value
                    .split(',')
                    .filter(|part| !part.trim().is_empty())
                    .map(number)
                    .collect::<Result<Vec<u64>, String>>()
                    .map_err(|err| format!("{err} (use heights separated by commas)"))?;
                blocks.sort_unstable();
                blocks.dedup();
                self.blocks = blocks;
            }
            "overcap_run" => {
                if value == "off" || value == "none" {
                    self.run = None;
                    return Ok(());
                }
                let (first, count) = value
                    .split_once(':')
                    .ok_or_else(|| format!("{value:?} is not FIRST:COUNT (e.g. 2000:5)"))?;
                self.run = Some((number(first)?, number(count)?)).filter(|(_, count)| *count > 0);
            }
            "overcap_logs" => self.logs = number(value)?,
            "overcap_reorg" => self.reorg_on_receipts = Some(number(value)?),
            other => return Err(format!("unknown over-cap option {other:?}")),
        }
        Ok(())
    }
}

/// Appends the over-cap contract's transactions to `plan` (block `number` of generation `gen`).
pub(crate) fn extend_plan(seed: u64, number: u64, gen: u32, n_logs: u64, plan: &mut BlockPlan) {
    let mut rng = Rng::new(hash3(seed, number, u64::from(gen), TAG_OVERCAP));
    let mut tx_index = plan.n_txs;
    let mut left = n_logs;
    plan.logs.reserve(n_logs as usize);
    while left > 0 {
        let in_tx = rng.between(1, MAX_LOGS_PER_TX).min(left);
        for _ in 0..in_tx {
            plan.logs.push(PlannedLog {
                tx_index,
                emitter: OVERCAP_EMITTER,
                address: TOKEN_A,
                child: 0,
                seed: rng.next_u64(),
            });
        }
        left -= in_tx;
        tx_index += 1;
    }
    plan.n_txs = tx_index;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::{EventId, EMITTERS};

    #[test]
    fn the_overcap_emitter_is_token_a_transfer() {
        let emitter = EMITTERS[usize::from(OVERCAP_EMITTER)];
        assert_eq!(
            (emitter.address, emitter.event),
            (TOKEN_A, EventId::Transfer)
        );
    }

    #[test]
    fn options_parse_and_cover_blocks_and_runs() {
        let mut cfg = OvercapConfig::default();
        cfg.set_option("overcap_blocks", "900, 300,900")
            .expect("heights");
        cfg.set_option("overcap_run", "2000:3").expect("a run");
        assert_eq!(cfg.blocks, [300, 900]);
        assert_eq!(cfg.heights(), [300, 900, 2000, 2001, 2002]);
        assert!(cfg.covers(900) && cfg.covers(2002) && !cfg.covers(2003) && !cfg.covers(0));
        assert!(cfg
            .set_option("overcap_run", "2000")
            .expect_err("no count")
            .contains("FIRST:COUNT"));
        assert!(cfg.set_option("overcap_blocks", "1,x").is_err());
        let spread = OvercapConfig::spread(100_000);
        assert_eq!(spread.heights().len(), 15);
        assert!(spread.heights().iter().all(|n| (1..100_000).contains(n)));
    }
}
