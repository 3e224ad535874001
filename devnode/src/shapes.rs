//! Opt-in shapes that real chains have and the default chain lacks: a quiet contract suddenly dense for a few
//! hundred blocks (`bursts`), density growing over the chain (`growth`), one contract a thousand times denser
//! than its neighbours (`hot`), runs of blocks over the cap spread across every contract (`huge_runs`), and
//! long runs of blocks without a log (`empty_runs`). All are off by default, and with them off the chain is
//! byte for byte the default chain. This module owns the options and what they add to or take from a block's
//! plan; it knows nothing of JSON or serving.

use super::chain::{BlockPlan, PlannedLog};
use super::contracts::{MISC, TOKEN_B};
use super::rng::{hash3, Rng};

/// [`EMITTERS`](super::contracts::EMITTERS) index of [`MISC`]'s `Note`: the quiet contract that bursts.
const BURST_EMITTER: u8 = 6;
/// [`EMITTERS`](super::contracts::EMITTERS) index of [`TOKEN_B`]'s `Transfer`: the hot contract.
const HOT_EMITTER: u8 = 2;
/// Most logs of one added transaction.
const MAX_LOGS_PER_TX: u64 = 6;
const TAG_SHAPES: u64 = 23;

/// The option names [`ShapeConfig::set_option`] accepts.
pub const SHAPE_OPTION_NAMES: &[&str] = &["bursts", "growth", "hot", "huge_runs", "empty_runs"];

/// A stretch where the quiet contract is dense.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Burst {
    /// First block.
    pub first: u64,
    /// Blocks.
    pub len: u64,
    /// Logs per block on average (each block draws from half to one and a half times this).
    pub per_block: u64,
}

/// The opt-in shapes; the default is none of them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ShapeConfig {
    /// [`MISC`] bursts (`bursts=FIRST:LEN:PER_BLOCK,...`).
    pub bursts: Vec<Burst>,
    /// The ordinary blocks' log counts are multiplied by `1 + (growth - 1) * number / initial_head`: the
    /// chain ends `growth` times as dense as it starts (`growth=20`).
    pub growth: Option<f64>,
    /// [`TOKEN_B`] emits this many more `Transfer` logs per block on average, in every block (`hot=25`).
    pub hot: u64,
    /// Runs of consecutive blocks like the default chain's rare ones over the cap: 10,500 to 13,500 logs
    /// spread evenly over every contract and event, none of them alone near the cap
    /// (`huge_runs=FIRST:COUNT,...`).
    pub huge_runs: Vec<(u64, u64)>,
    /// Stretches of blocks without ordinary logs (`empty_runs=FIRST:LEN,...`); the other shapes still add
    /// theirs.
    pub empty_runs: Vec<(u64, u64)>,
}

impl ShapeConfig {
    /// Whether no shape is switched on.
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }

    /// Whether block `number` is in one of the runs over the cap.
    pub fn in_huge_run(&self, number: u64) -> bool {
        in_runs(&self.huge_runs, number)
    }

    /// Whether block `number` is in one of the empty stretches.
    pub fn in_empty_run(&self, number: u64) -> bool {
        in_runs(&self.empty_runs, number)
    }

    /// How many ordinary logs block `number` has instead of `base` (with the chain's `density` applied
    /// here too, so that both round once).
    pub fn ordinary_logs(&self, number: u64, base: u64, density: f64, initial_head: u64) -> u64 {
        if self.in_empty_run(number) {
            return 0;
        }
        let growth = self.growth.map_or(1.0, |growth| {
            1.0 + (growth - 1.0) * number as f64 / initial_head.max(1) as f64
        });
        if density == 1.0 && growth == 1.0 {
            base
        } else {
            (base as f64 * density * growth).round() as u64
        }
    }

    /// Appends the bursting and hot contracts' transactions to `plan` (block `number` of generation `gen`).
    pub(crate) fn extend_plan(&self, seed: u64, number: u64, gen: u32, plan: &mut BlockPlan) {
        let burst: u64 = self
            .bursts
            .iter()
            .filter(|b| (b.first..b.first.saturating_add(b.len)).contains(&number))
            .map(|b| b.per_block)
            .sum();
        if burst == 0 && self.hot == 0 {
            return;
        }
        let mut rng = Rng::new(hash3(seed, number, u64::from(gen), TAG_SHAPES));
        let n_burst = if burst > 0 {
            rng.between(burst / 2, burst + burst / 2)
        } else {
            0
        };
        let n_hot = if self.hot > 0 {
            rng.between(0, 2 * self.hot)
        } else {
            0
        };
        for (emitter, address, n) in [
            (BURST_EMITTER, MISC, n_burst),
            (HOT_EMITTER, TOKEN_B, n_hot),
        ] {
            let mut left = n;
            while left > 0 {
                let in_tx = rng.between(1, MAX_LOGS_PER_TX).min(left);
                for _ in 0..in_tx {
                    plan.logs.push(PlannedLog {
                        tx_index: plan.n_txs,
                        emitter,
                        address,
                        child: 0,
                        seed: rng.next_u64(),
                    });
                }
                left -= in_tx;
                plan.n_txs += 1;
            }
        }
    }

    /// Sets one option by name (see [`SHAPE_OPTION_NAMES`]).
    ///
    /// # Errors
    /// What the option accepts, when `value` does not parse.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<(), String> {
        let off = value == "off" || value == "none" || value.is_empty();
        match name {
            "bursts" => {
                self.bursts = if off {
                    Vec::new()
                } else {
                    parse_list(value, 3, "FIRST:LEN:PER_BLOCK,... (e.g. 4000:300:150)")?
                        .into_iter()
                        .map(|v| Burst {
                            first: v[0],
                            len: v[1],
                            per_block: v[2],
                        })
                        .collect()
                };
            }
            "growth" => {
                self.growth = if off {
                    None
                } else {
                    let growth: f64 = value
                        .trim()
                        .parse()
                        .map_err(|_| format!("{value:?} is not a number (e.g. 20)"))?;
                    if !(growth.is_finite() && growth > 0.0) {
                        return Err(format!("{value} is not a positive factor"));
                    }
                    Some(growth)
                };
            }
            "hot" => {
                self.hot = if off {
                    0
                } else {
                    value
                        .trim()
                        .parse()
                        .map_err(|_| format!("{value:?} is not a number of logs per block"))?
                };
            }
            "huge_runs" | "empty_runs" => {
                let runs = if off {
                    Vec::new()
                } else {
                    parse_list(value, 2, "FIRST:COUNT,... (e.g. 2000:5,9000:3)")?
                        .into_iter()
                        .map(|v| (v[0], v[1]))
                        .collect()
                };
                if name == "huge_runs" {
                    self.huge_runs = runs;
                } else {
                    self.empty_runs = runs;
                }
            }
            other => return Err(format!("unknown shape option {other:?}")),
        }
        Ok(())
    }
}

fn in_runs(runs: &[(u64, u64)], number: u64) -> bool {
    number != 0
        && runs
            .iter()
            .any(|&(first, count)| (first..first.saturating_add(count)).contains(&number))
}

/// `a:b:c,d:e:f` as lists of `parts` numbers each.
fn parse_list(value: &str, parts: usize, form: &str) -> Result<Vec<Vec<u64>>, String> {
    value
        .split(',')
        .filter(|item| !item.trim().is_empty())
        .map(|item| {
            let numbers = item
                .split(':')
                .map(|n| n.trim().parse::<u64>())
                .collect::<Result<Vec<u64>, _>>()
                .map_err(|_| format!("{item:?} is not {form}"))?;
            if numbers.len() == parts {
                Ok(numbers)
            } else {
                Err(format!("{item:?} is not {form}"))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::{EventId, EMITTERS};

    #[test]
    fn the_emitters_are_the_quiet_misc_note_and_the_token_b_transfer() {
        let burst = EMITTERS[usize::from(BURST_EMITTER)];
        assert_eq!((burst.address, burst.event), (MISC, EventId::Note));
        let hot = EMITTERS[usize::from(HOT_EMITTER)];
        assert_eq!((hot.address, hot.event), (TOKEN_B, EventId::Transfer));
    }

    #[test]
    fn options_parse_and_cover_their_blocks() {
        let mut cfg = ShapeConfig::default();
        assert!(cfg.is_plain());
        cfg.set_option("bursts", "100:10:50, 500:5:20")
            .expect("bursts");
        cfg.set_option("huge_runs", "2000:3").expect("runs");
        cfg.set_option("empty_runs", "10:5").expect("runs");
        cfg.set_option("growth", "4").expect("growth");
        cfg.set_option("hot", "7").expect("hot");
        assert_eq!(cfg.bursts.len(), 2);
        assert!(cfg.in_huge_run(2002) && !cfg.in_huge_run(2003) && !cfg.in_huge_run(1999));
        assert!(cfg.in_empty_run(14) && !cfg.in_empty_run(15));
        assert_eq!(cfg.ordinary_logs(12, 9, 1.0, 100), 0);
        assert_eq!(cfg.ordinary_logs(100, 10, 1.0, 100), 40);
        assert_eq!(cfg.ordinary_logs(0, 10, 0.5, 100), 5);
        for (name, bad) in [
            ("bursts", "100:10"),
            ("huge_runs", "x:1"),
            ("growth", "-1"),
            ("hot", "many"),
        ] {
            assert!(cfg.set_option(name, bad).is_err(), "{name}={bad}");
        }
        cfg.set_option("bursts", "off").expect("off");
        assert!(cfg.bursts.is_empty());
    }

    #[test]
    fn bursts_and_the_hot_contract_add_whole_transactions_after_the_block_s_own() {
        let cfg = ShapeConfig {
            bursts: vec![Burst {
                first: 10,
                len: 2,
                per_block: 100,
            }],
            hot: 20,
            ..ShapeConfig::default()
        };
        let mut plan = BlockPlan {
            n_txs: 3,
            logs: Vec::new(),
        };
        cfg.extend_plan(7, 11, 0, &mut plan);
        let bursts = plan.logs.iter().filter(|l| l.address == MISC).count() as u64;
        assert!((50..=150).contains(&bursts), "{bursts}");
        assert!(plan.logs.iter().all(|l| l.tx_index >= 3));
        assert!(plan.logs.windows(2).all(|w| w[0].tx_index <= w[1].tx_index));
        assert_eq!(plan.n_txs, plan.logs.last().map_or(3, |l| l.tx_index + 1));
        let mut outside = BlockPlan {
            n_txs: 0,
            logs: Vec::new(),
        };
        cfg.extend_plan(7, 12, 0, &mut outside);
        assert!(outside.logs.iter().all(|l| l.address == TOKEN_B));
    }
}
