//! The planner and the fetcher's probes against the default simulated chain, with no sockets: how many
//! `eth_getLogs` requests a backfill takes, next to the fewest the 10,000-result cap allows.
//!
//! Requests are counts, not timings, so they can be asserted: the chain is seeded and the simulated
//! completion order is fixed (first in, first out, `MAX_CONCURRENCY` outstanding, as a pool of equally fast
//! workers answers).

use std::collections::VecDeque;

use alloy_primitives::{Address, B256};

use super::{probes, Group, Probe, Selection};
use crate::planner::{Outcome, Planner, PlannerConfig, SurveyRequest, Tail, Verdict};
use crate::primitives::{BlockNumber, BlockRange};
use devnode::{contracts, DevNodeConfig, GroundTruth};

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

/// One backfill of `devnode` preset `preset` (seed `seed`), with the preset's density replaced by
/// `density` when given, against `node`, with the default `[sync]` limits: the requests it took and the
/// fewest the cap allows.
fn backfill(preset: &str, seed: u64, density: Option<f64>, node: Node) -> (Tally, u64) {
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
    (simulate(&chain, config, truth.head(), node), bound)
}

mod snapshot;
