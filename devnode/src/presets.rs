//! The chain shapes by name (`sim://?preset=NAME`, `logslice bench --preset NAME`): the default chain and
//! the shapes of real chains `bench` measures the planner and the store on.

use super::config::{ChainConfig, FactoryConfig};
use super::overcap::OvercapConfig;
use super::shapes::{Burst, ShapeConfig};

impl ChainConfig {
    /// The `factory` bench shape: 100,000 blocks of the default chain plus a factory whose pairs multiply to
    /// about 1,500 by the end, most quiet, a few busy, and two blocks where the pairs' logs together exceed
    /// 10,000 while no pair alone comes near.
    pub fn factory_preset() -> Self {
        Self {
            blocks: 100_000,
            factory: Some(FactoryConfig {
                children: 1_500,
                bursts: 2,
            }),
            ..Self::default()
        }
    }

    /// A chain shape by name (see [`PRESET_NAMES`]): the default chain, or one of the shapes `bench` measures.
    ///
    /// # Errors
    /// The accepted names, when `name` is none of them.
    pub fn preset(name: &str) -> Result<Self, String> {
        let plain = Self::default();
        let shaped = |blocks: u64, density: f64, shapes: ShapeConfig| Self {
            blocks,
            density,
            shapes,
            ..Self::default()
        };
        Ok(match name {
            "default" => plain,
            // The default chain ten times longer: memory must not grow with it.
            "long" => Self {
                blocks: 2_000_000,
                ..plain
            },
            // Ten times longer at a twentieth of the density: dense bursts between long quiet stretches.
            "sparse" => Self {
                blocks: 2_000_000,
                density: 0.05,
                ..plain
            },
            "factory" => Self::factory_preset(),
            // 100,000 blocks with ten single over-cap blocks spread over them and a run of five.
            "overcap" => Self {
                blocks: 100_000,
                overcap: OvercapConfig::spread(100_000),
                ..plain
            },
            // A fifth of the density, and eight stretches of 300 blocks where the quiet `misc` contract emits
            // about 150 logs per block.
            "bursts" => shaped(
                100_000,
                0.2,
                ShapeConfig {
                    bursts: (0..8)
                        .map(|k| Burst {
                            first: 6_000 + k * 12_000,
                            len: 300,
                            per_block: 150,
                        })
                        .collect(),
                    ..ShapeConfig::default()
                },
            ),
            // A tenth of the density at the start, twenty times that at the end.
            "growth" => shaped(
                200_000,
                0.1,
                ShapeConfig {
                    growth: Some(20.0),
                    ..ShapeConfig::default()
                },
            ),
            // `token_b` emits about 25 logs per block, the other contracts a twentieth of the default density:
            // it is over a thousand times denser than its neighbours.
            "hot" => shaped(
                40_000,
                0.05,
                ShapeConfig {
                    hot: 25,
                    ..ShapeConfig::default()
                },
            ),
            // The default density with three runs of four blocks over the cap spread across every contract.
            "huge_runs" => shaped(
                100_000,
                1.0,
                ShapeConfig {
                    huge_runs: vec![(20_000, 4), (50_500, 4), (80_000, 4)],
                    ..ShapeConfig::default()
                },
            ),
            // As short and dense as the chain of 499k logs the outside measurement used: the default chain's
            // shapes over 20,000 blocks at 4.8 times its density (`--density 14.4` gives its 1.5M-log one).
            "dense" => Self {
                blocks: 20_000,
                density: 4.8,
                ..plain
            },
            // 500,000 blocks of which 380,000 in two stretches have no log at all.
            "empty" => shaped(
                500_000,
                1.0,
                ShapeConfig {
                    empty_runs: vec![(50_000, 200_000), (300_000, 180_000)],
                    ..ShapeConfig::default()
                },
            ),
            other => {
                return Err(format!(
                    "{other:?} is not a chain preset (use one of {})",
                    PRESET_NAMES.join(", ")
                ))
            }
        })
    }
}

/// The names [`ChainConfig::preset`] accepts.
pub const PRESET_NAMES: &[&str] = &[
    "default",
    "long",
    "sparse",
    "factory",
    "overcap",
    "bursts",
    "growth",
    "hot",
    "huge_runs",
    "empty",
    "dense",
];
