//! The planner and the fetcher's probes against the default simulated chain, with no sockets: how many
//! `eth_getLogs` requests a backfill takes, next to the fewest the 10,000-result cap allows.
//!
//! Requests are counts, not timings, so they can be asserted: the chain is seeded and the simulated
//! completion order is fixed (first in, first out, `MAX_CONCURRENCY` outstanding, as a pool of equally fast
//! workers answers).

use std::collections::VecDeque;

use alloy_primitives::{Address, B256};

use super::{probes, Group, Probe, Selection};
use devnode::{contracts, DevNodeConfig, GroundTruth};
use crate::planner::{Outcome, Planner, PlannerConfig, SurveyRequest, Tail, Verdict};
use crate::primitives::{BlockNumber, BlockRange};

const CAP: u64 = 10_000;
const MAX_CONCURRENCY: usize = 8;

/// Per block, the logs of each (address, topic0) pair the chain emits.
struct Chain {
    pairs: Vec<(Address, Option<B256>)>,
    counts: Vec<Vec<u16>>,
}

impl Chain {
    fn new(truth: &GroundTruth) -> Self {
        let mut pairs: Vec<(Address, Option<B256>)> = Vec::new();
        let mut counts = Vec::new();
        for block in 0..=truth.head() {
            let mut row = vec![0u16; pairs.len()];
            for pair in truth.log_emitters(block) {
                let idx = match pairs.iter().position(|p| *p == pair) {
                    Some(idx) => idx,
                    None => {
                        pairs.push(pair);
                        row.push(0);
                        pairs.len() - 1
                    }
                };
                row[idx] += 1;
            }
            counts.push(row);
        }
        Self { pairs, counts }
    }

    /// Logs of `range` matching `address` in `addresses` and topic0 in `topic0` (any when `None`), per block.
    fn matching(
        &self,
        range: BlockRange,
        addresses: &[Address],
        topic0: Option<&[B256]>,
    ) -> impl Iterator<Item = (BlockNumber, u64)> + '_ {
        let wanted: Vec<bool> = self
            .pairs
            .iter()
            .map(|(a, t)| {
                addresses.contains(a) && topic0.is_none_or(|ts| t.is_some_and(|t| ts.contains(&t)))
            })
            .collect();
        (range.start()..=range.end()).map(move |block| {
            let row = &self.counts[block as usize];
            let n = row
                .iter()
                .zip(&wanted)
                .filter(|(_, w)| **w)
                .map(|(n, _)| u64::from(*n))
                .sum();
            (block, n)
        })
    }

    fn count(&self, range: BlockRange, group: &Group) -> u64 {
        self.matching(range, &group.addresses, group.topic0.as_deref())
            .map(|(_, n)| n)
            .sum()
    }

    /// The range a node that suggests one offers for a refused `range`, as Infura words it and
    /// `devnode::rpc` answers: from its start to the last block before the cap is crossed, or its first
    /// block alone when that is over the cap.
    fn suggestion(&self, range: BlockRange, group: &Group) -> (BlockNumber, BlockNumber) {
        let mut total = 0;
        for (block, n) in self.matching(range, &group.addresses, group.topic0.as_deref()) {
            total += n;
            if total > CAP {
                return (range.start(), block.saturating_sub(1).max(range.start()));
            }
        }
        (range.start(), range.end())
    }

    /// Requests `fetch_block_by_filters` makes for one block: halves of the filter, down to one address and
    /// one topic0 over the cap, whose block is read from its receipts (its transactions, then
    /// `eth_getBlockReceipts`), straight away once the node is known to serve them. Each refused half adds
    /// its logs to `refused_logs`.
    fn by_filters(
        &self,
        block: BlockNumber,
        group: Group,
        receipts_served: &mut bool,
        refused_logs: &mut u64,
    ) -> u64 {
        const RECEIPTS_READ: u64 = 2;
        if *receipts_served {
            return RECEIPTS_READ;
        }
        let (a, b) = group
            .halves()
            .expect("the simulated selection has several addresses");
        let mut todo = vec![a, b];
        let mut requests = 0;
        while let Some(group) = todo.pop() {
            requests += 1;
            let n = self.count(BlockRange::single(block), &group);
            if n <= CAP {
                continue;
            }
            *refused_logs += n;
            match group.halves() {
                Some((a, b)) => todo.extend([a, b]),
                None => {
                    *receipts_served = true;
                    return requests + RECEIPTS_READ;
                }
            }
        }
        requests
    }
}

enum Item {
    Range(BlockRange),
    Survey(SurveyRequest),
}

struct Tally {
    requests: u64,
    surveys: u64,
    refused: u64,
    /// Logs the refused requests asked for: what a node that counts a range's logs before refusing it
    /// (a proxy in front of an uncapped node) reads for nothing.
    refused_logs: u64,
    /// Logs of the chain under the selection.
    chain_logs: u64,
}

/// Whether the simulated node suggests a range with its refusals (the spec's does not; Infura, Alchemy and
/// reth do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Node {
    Plain,
    Suggesting,
}

fn simulate(chain: &Chain, config: PlannerConfig, head: BlockNumber, node: Node) -> Tally {
    let selection = Selection {
        groups: vec![Group::unfiltered(
            {
                let mut all = contracts::ALL_CONTRACTS.to_vec();
                all.sort();
                all
            },
            {
                let mut all: Vec<B256> = chain.pairs.iter().filter_map(|(_, t)| *t).collect();
                all.sort();
                all.dedup();
                // An anonymous event forbids a topic0 filter (as `pipeline::selection` decides).
                chain.pairs.iter().all(|(_, t)| t.is_some()).then_some(all)
            },
        )],
        pairs: {
            let mut pairs: Vec<(Address, B256)> = chain
                .pairs
                .iter()
                .filter_map(|(a, t)| t.map(|t| (*a, t)))
                .collect();
            pairs.sort();
            pairs
        },
    };
    let probes: Vec<Probe> = probes(&selection);
    let group = selection.groups[0].clone();
    let mut planner = Planner::new(config, BlockRange::new(0, head).unwrap(), []);
    let mut receipts_served = false;
    let mut outstanding: VecDeque<Item> = VecDeque::new();
    let mut tally = Tally {
        requests: 0,
        surveys: 0,
        refused: 0,
        refused_logs: 0,
        chain_logs: chain.count(BlockRange::new(0, head).expect("0 <= head"), &group),
    };
    loop {
        while outstanding.len() < MAX_CONCURRENCY {
            let Some(survey) = planner.next_survey() else {
                break;
            };
            outstanding.push_back(Item::Survey(survey));
        }
        while outstanding.len() < MAX_CONCURRENCY {
            match planner.next_range() {
                Some(range) => {
                    if std::env::var("SIM_TRACE").is_ok() {
                        eprintln!("out {range} span={}", planner.span());
                    }
                    outstanding.push_back(Item::Range(range))
                }
                None => break,
            }
        }
        let Some(item) = outstanding.pop_front() else {
            assert!(planner.is_finished(), "the planner stalled");
            return tally;
        };
        tally.requests += 1;
        if std::env::var("SIM_TRACE").is_ok() {
            match &item {
                Item::Survey(sv) => eprintln!("survey {} ", sv.range),
                Item::Range(r) => eprintln!(
                    "range {} n={} span={}",
                    r,
                    chain.count(*r, &group),
                    planner.span()
                ),
            }
        }
        match item {
            Item::Survey(survey) => {
                tally.surveys += 1;
                let probe = &probes[survey.probe];
                let hits: Vec<BlockNumber> = chain
                    .matching(
                        survey.range,
                        &probe.filter.addresses,
                        probe.filter.topic0.as_deref(),
                    )
                    .flat_map(|(block, n)| std::iter::repeat_n(block, n as usize))
                    .collect();
                if hits.len() as u64 > CAP {
                    tally.refused += 1;
                    tally.refused_logs += hits.len() as u64;
                    planner.report_survey(survey, Err(Outcome::TooManyResults { suggested: None }));
                } else {
                    planner.report_survey(survey, Ok(&hits));
                }
            }
            Item::Range(range) if planner.expects_overflow(range) => {
                tally.requests += chain.by_filters(
                    range.start(),
                    group.clone(),
                    &mut receipts_served,
                    &mut tally.refused_logs,
                ) - 1;
                let n = chain.count(range, &group);
                assert_eq!(planner.report(range, Outcome::Logs { n }), Verdict::Done);
            }
            Item::Range(range) => {
                let n = chain.count(range, &group);
                if n > CAP {
                    tally.refused += 1;
                    tally.refused_logs += n;
                    let suggested =
                        (node == Node::Suggesting).then(|| chain.suggestion(range, &group));
                    if std::env::var("SIM_TRACE").is_ok() {
                        eprintln!("refused {range} suggested={suggested:?}");
                    }
                    let verdict = planner.report(range, Outcome::TooManyResults { suggested });
                    if verdict == Verdict::SingleBlockOverflow {
                        tally.requests += chain.by_filters(
                            range.start(),
                            group.clone(),
                            &mut receipts_served,
                            &mut tally.refused_logs,
                        );
                        planner.report(range, Outcome::Logs { n });
                    }
                    continue;
                }
                let counts: Vec<u64> = probes
                    .iter()
                    .map(|p| {
                        chain
                            .matching(range, &p.filter.addresses, p.filter.topic0.as_deref())
                            .map(|(_, n)| n)
                            .sum()
                    })
                    .collect();
                planner.observe_mix(range, n, &counts);
                let blocks = chain
                    .matching(range, &group.addresses, group.topic0.as_deref())
                    .flat_map(|(block, n)| std::iter::repeat_n(block, n as usize))
                    .collect();
                if let Some(tail) = Tail::of(range, blocks) {
                    planner.observe_tail(range, tail);
                }
                assert_eq!(planner.report(range, Outcome::Logs { n }), Verdict::Done);
            }
        }
    }
}

/// Simulates a backfill of the chain of `seed` with the default `[sync]` limits; returns the requests made
/// and the fewest possible. `sparse` picks the shape of `bench --preset sparse`: ten times the blocks at a
/// twentieth of the density, so dense bursts and heavy blocks sit between long quiet stretches.
fn requests_against_bound(seed: u64, sparse: bool) -> (u64, u64) {
    let preset = if sparse { "sparse" } else { "default" };
    preset_against_bound(preset, seed)
}

/// Simulates a backfill of `devnode` preset `preset` (seed `seed`) with the default `[sync]` limits;
/// returns the requests made and the fewest possible.
fn preset_against_bound(preset: &str, seed: u64) -> (u64, u64) {
    preset_at_density(preset, seed, None, Node::Plain)
}

/// As [`preset_against_bound`], with the preset's density replaced by `density` when given, against `node`.
fn preset_at_density(preset: &str, seed: u64, density: Option<f64>, node: Node) -> (u64, u64) {
    let mut node_config = DevNodeConfig {
        seed,
        ..DevNodeConfig::default()
    };
    node_config.chain = devnode::ChainConfig::preset(preset).expect("a preset");
    node_config.chain.density = density.unwrap_or(node_config.chain.density);
    let truth = GroundTruth::detached(&node_config);
    let chain = Chain::new(&truth);
    let bound = truth.fewest_requests(crate::config::DEFAULT_MAX_BLOCK_RANGE);
    let config = PlannerConfig {
        initial_span: crate::config::DEFAULT_INITIAL_BLOCK_RANGE,
        max_span: crate::config::DEFAULT_MAX_BLOCK_RANGE,
        target_logs: crate::config::DEFAULT_TARGET_LOGS_PER_REQUEST,
    };
    let tally = simulate(&chain, config, truth.head(), node);
    eprintln!(
        "{preset} (density {}) seed {seed}{}: {} requests ({} surveys, {} refused), bound {bound}, {:.2}x; \
         refused requests asked for {} logs, {:.2}x the chain's {}",
        node_config.chain.density,
        if node == Node::Suggesting { ", suggesting" } else { "" },
        tally.requests,
        tally.surveys,
        tally.refused,
        tally.requests as f64 / bound as f64,
        tally.refused_logs,
        tally.refused_logs as f64 / tally.chain_logs.max(1) as f64,
        tally.chain_logs,
    );
    (tally.requests, bound)
}

/// Asserts that the chains of seeds 1 to 4 take at most 1.3x the fewest requests on average.
fn assert_other_seeds_within_1_3x_on_average(sparse: bool) {
    let seeds = [1, 2, 3, 4];
    let ratios: Vec<f64> = seeds
        .iter()
        .map(|&seed| {
            let (requests, bound) = requests_against_bound(seed, sparse);
            requests as f64 / bound as f64
        })
        .collect();
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    assert!(mean <= 1.3, "mean {mean:.3} of {ratios:?}");
}

/// Asserts that the chain of the default seed takes at most 1.3x the fewest requests.
fn assert_default_seed_within_1_3x(sparse: bool) {
    let (requests, bound) = requests_against_bound(DevNodeConfig::default().seed, sparse);
    assert!(
        requests as f64 <= 1.3 * bound as f64,
        "{requests} requests for a bound of {bound}"
    );
}

#[test]
fn a_backfill_of_the_default_chain_takes_at_most_1_3x_the_fewest_requests() {
    assert_default_seed_within_1_3x(false);
}

#[test]
fn backfills_of_other_chains_take_1_3x_the_fewest_requests_on_average() {
    assert_other_seeds_within_1_3x_on_average(false);
}

/// Before the probe was chosen after 300 logs (it was 1,000) and every due survey went out ahead of the
/// ranges, seed 7 took 186 requests (1.34x) and seed 1 192 (1.36x): the first blocks were too sparse to
/// choose a probe, and a dense burst behind them was halved blind, up to ten refusals in a row.
#[test]
fn a_backfill_of_the_sparse_chain_takes_at_most_1_3x_the_fewest_requests() {
    assert_default_seed_within_1_3x(true);
}

#[test]
fn backfills_of_other_sparse_chains_take_1_3x_the_fewest_requests_on_average() {
    assert_other_seeds_within_1_3x_on_average(true);
}

/// The shapes of real chains `bench` measures (`devnode::ChainConfig::preset`), each held to the ratio it
/// reaches now, so that a change that makes one worse fails here. The aim is 1.15x the fewest requests; the
/// ceilings record how far from it each shape still is (docs/BENCHMARKS.md, "Presets shaped like real
/// chains"): a burst of a contract the probe does not see and a single block over the cap for one address are
/// found by narrowing (`planner::narrowing`), one probe per halving of the refused range, since the spec's
/// node suggests no range. Overcap's 3.4 (3.20x before the survey fitted a background beside its probe,
/// `planner::background`): on seed 7 the fit moved a few cuts in a dense stretch and which over-cap block
/// was met first, 294 -> 312 requests; over seeds 1-4 it took 1,163 -> 1,161. Bursts' 3.05 (3.0 before a
/// chain too short for the lookahead took a probe for spot surveys, `planner::survey`): seed 7 went from
/// 153 to 158 requests, while over seeds 1-5 and 7 bursts took 981 -> 970, growth 1,168 -> 915, and every
/// preset together 5,773 -> 5,495 requests with 1,201 -> 1,105 refusals. Bursts' 2.9 (3.05 before the survey
/// was trusted again after a burst it does not see, and the burst's answers were kept out of the probe's
/// share, `planner::survey::Survey::weigh_distrusted`): seed 7 158 -> 149, seeds 1-5 and 7 970 -> 916.
/// Overcap's 3.05 (3.4 before a range refused right after a block over the cap was narrowed to its first
/// block alone, `Planner::heavy_block_found`): each next block of the run of five was found by halving the
/// rest from its start, twelve refusals each; seed 7 308 -> 276 requests (123 -> 91 refused), seeds 1-5 and
/// 7 1,725 -> 1,541, bursts 918 -> 919, every other preset and the suggesting node's request for request the
/// same. Bursts' 2.8 (2.9 before the survey was trusted again after a burst's piece whose last quarter it
/// accounts for, `planner::survey::Survey::weigh_burst_end`): seed 7 149 -> 142, seeds 1-5 and 7 919 -> 892
/// (886 with its last eighth), the rest unchanged.
#[test]
fn presets_shaped_like_real_chains_stay_within_their_measured_ratios() {
    assert_within_ceilings(
        &[
            ("overcap", 3.05),
            ("bursts", 2.8),
            ("growth", 1.35),
            ("hot", 1.32),
            ("huge_runs", 1.3),
            ("empty", 1.3),
        ],
        Node::Plain,
    );
}

/// Asserts that each preset takes at most its ceiling times the fewest requests against `node`.
/// `SIM_PRESET=name` runs one preset, `SIM_SEED=n` another seed (the ceilings hold for seed 7).
fn assert_within_ceilings(presets: &[(&str, f64)], node: Node) {
    let only = std::env::var("SIM_PRESET").ok();
    let seed = std::env::var("SIM_SEED").map_or(7, |s| s.parse().expect("SIM_SEED is a number"));
    let mut over = Vec::new();
    for &(preset, ceiling) in presets {
        if only.as_deref().is_some_and(|o| o != preset) {
            continue;
        }
        let (requests, bound) = preset_at_density(preset, seed, None, node);
        if requests as f64 > ceiling * bound as f64 {
            over.push(format!(
                "{preset}: {requests} requests for a bound of {bound} (ceiling {ceiling}x)"
            ));
        }
    }
    assert!(over.is_empty(), "{over:?}");
}

/// Every preset against a node that suggests a range with its refusals, as Infura, Alchemy and reth do
/// (and the access service's proxy the outside measurement ran behind): a refusal says where the cap is
/// crossed, so the ratios are lower than the plain node's. Each is held to what it reaches now. Before the
/// rest of a refused range waited for the suggested range's answer (`Planner::take_suggestion`), bursts
/// took 139 requests (2.67x) and overcap 171 (1.86x): each rest went out whole and was refused in its turn.
/// Before the range after an answer was cut by the density of the answer's tail (`planner::Tail`), bursts
/// took 109 (2.10x) here and 173 (3.33x) against the plain node: a suggested range ending a few dozen blocks
/// into a burst put the next range hundreds of blocks deep into it; 105 and 159 before that forecast was
/// aimed with a miss of its own (`planner::learning::TAIL_MISS`). Before the span after an answer grew past
/// eight times the answer here and a burst ending inside an answer was seen in its last quarter
/// (`planner::learning`, `Planner::suggests`), bursts took 102 (1.96x): the quiet blocks after each burst
/// went out in ranges of a few hundred blocks. Before a block that a refusal showed to hold over half the
/// target alone was read by narrower filters at once (`Planner::expects_overflow`), overcap took 145 (1.58x,
/// 31 refused): each block over the cap was asked for alone once and refused; over seeds 1-5 and 7 the
/// presets took 6,074 requests then and 5,999 now (against the plain node 5,799 and 5,773), none more on
/// any preset and seed. Once the survey was trusted again after a burst it does not see and the burst's
/// answers were kept out of the probe's share (`planner::survey::Survey::weigh_distrusted`), bursts here took
/// 620 -> 574 requests over seeds 1-5 and 7, seed 7 85 -> 87.
#[test]
fn with_a_node_that_suggests_ranges_presets_stay_within_their_measured_ratios() {
    assert_within_ceilings(
        &[
            ("default", 1.3),
            ("sparse", 1.3),
            ("overcap", 1.5),
            ("bursts", 1.7),
            ("growth", 1.32),
            ("hot", 1.23),
            ("huge_runs", 1.3),
            ("empty", 1.3),
            ("dense", 1.35),
        ],
        Node::Suggesting,
    );
}

/// Chains as short and dense as the two the outside measurement used (the `dense` preset, 20,001 blocks
/// holding about 500,000 logs, and the same at 14.4 times the default density, about 1,500,000), over
/// seeds 1-4 and 7, each held
/// to its total now. Before a refused survey's excess was remembered (`survey::Survey::overflow`) and a
/// refused range's spot survey kept all of it (`Planner::spots_due`), they took 249 and 711 requests
/// (1.54x and 1.44x): a dense stretch near the chain's end refused every lookahead survey that reached it,
/// thirteen in a row on seed 1, and the blocks behind a refused range's first part were cut blind. Before
/// ranges of a few blocks were cut by their estimate without its error (`planner::cutting::FEW_BLOCKS`), the denser
/// chains took 683 (1.39x): at 3,800 logs a block many ranges held one block where two fit.
#[test]
fn short_dense_chains_stay_within_their_measured_ratios() {
    for (density, ceiling) in [(4.8, 1.38), (14.4, 1.32)] {
        let (mut requests, mut bound) = (0, 0);
        for seed in [1, 2, 3, 4, 7] {
            let (r, b) = preset_at_density("dense", seed, Some(density), Node::Plain);
            requests += r;
            bound += b;
        }
        assert!(
            requests as f64 <= ceiling * bound as f64,
            "density {density}: {requests} requests for a bound of {bound} (ceiling {ceiling}x)"
        );
    }
}
