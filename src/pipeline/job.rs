//! What a config asks to index, resolved: decoders, tables, contracts with their next blocks, and the
//! filter each range is fetched with. Knows no node and no database beyond the sink calls that prepare it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use alloy_primitives::{Address, B256};

use crate::config::{self, Config, EventFilter};
use crate::decode::EventDecoder;
use crate::fetch::{self, Group, Selection};
use crate::follow;
use crate::planner::{Planner, PlannerConfig};
use crate::primitives::{BlockNumber, BlockRange};
use crate::sink::{self, ContractSpec, Sink, TableSpec};

use super::discover::{Child, Children, Factory};
use super::Error;

/// One configured contract at run time.
#[derive(Debug, Clone)]
pub(super) struct Contract {
    pub(super) name: String,
    pub(super) addresses: Vec<Address>,
    /// Its configured first block.
    pub(super) start_block: BlockNumber,
    /// First block not yet committed.
    pub(super) next: BlockNumber,
    /// Indexes into `decoders`.
    pub(super) tables: Vec<usize>,
    /// topic0 of each non-anonymous event; `None` if an anonymous event forbids a topic0 filter.
    pub(super) selectors: Option<Vec<B256>>,
    /// topic0 of each non-anonymous event, even when an anonymous one forbids filtering by them.
    pub(super) event_topics: Vec<B256>,
    /// topic0 of every non-anonymous event of the contract's ABI, configured or not, sorted: such a log is
    /// never an anonymous event's.
    pub(super) named_selectors: Vec<B256>,
    /// `filters`: each filtered event's topics (empty when the contract is unfiltered).
    pub(super) filters: Vec<EventFilter>,
}

/// What a config asks to index, resolved: decoders, tables, and contracts with their next blocks.
pub struct Job {
    pub(super) contracts: Arc<Vec<Contract>>,
    pub(super) decoders: Vec<EventDecoder>,
    tables: Vec<TableSpec>,
    specs: Vec<ContractSpec>,
    pub(super) by_address: HashMap<Address, Vec<usize>>,
    pub(super) strict: bool,
    /// The factories of contracts created by one.
    pub(super) factories: Vec<Factory>,
    /// Their children found so far (shared with the selections of concurrent fetches).
    pub(super) children: Arc<RwLock<Children>>,
    /// `[sync] block_timestamps`: whether logs are stamped before they are committed.
    pub(super) timestamps: sink::Timestamps,
    /// `[sync] transactions`: batches carry the rows of `transactions` ([`super::transactions`]).
    pub(super) transactions: sink::Transactions,
    /// Tests only: the backfill's planners never hand out a range from this block on
    /// ([`Planner::hold_back`]), as a planner with a bug that loses ranges would.
    #[cfg(test)]
    pub(super) hold_back: Option<BlockNumber>,
}

impl Job {
    /// Resolves every configured event into a decoder and a table.
    ///
    /// # Errors
    /// [`Error::Config`] when an event does not resolve.
    pub fn new(config: &Config) -> Result<Self, Error> {
        let mut decoders = Vec::new();
        let mut tables = Vec::new();
        let mut contracts = Vec::new();
        let mut specs = Vec::new();
        for contract in &config.contracts {
            let mut table_idxs = Vec::new();
            let mut selectors = Some(Vec::new());
            let mut event_topics = Vec::new();
            let mut events = Vec::new();
            for event in &contract.events {
                let decoder = EventDecoder::new(&event.event).map_err(|e| {
                    Error::Config(format!(
                        "{}: contracts.{}: {e}",
                        config.source.display(),
                        contract.name
                    ))
                })?;
                event_topics.extend(decoder.selector());
                match (decoder.selector(), selectors.as_mut()) {
                    (Some(selector), Some(list)) => list.push(selector),
                    (None, _) => selectors = None,
                    (Some(_), None) => {}
                }
                // A child contract's events record where its addresses come from: changing the factory is
                // refused like changing an address (its rows would belong to other children).
                let source = contract.factory.as_ref().map_or(String::new(), |f| {
                    format!(
                        " of children of {}.{}.{}",
                        f.contract,
                        f.event.signature(),
                        f.parameter
                    )
                });
                events.push(format!(
                    "{}{source} -> {}",
                    decoder.signature(),
                    event.table
                ));
                tables.push(TableSpec {
                    name: event.table.clone(),
                    columns: decoder.columns().to_vec(),
                });
                table_idxs.push(decoders.len());
                decoders.push(decoder);
            }
            contracts.push(Contract {
                name: contract.name.clone(),
                addresses: contract.addresses.clone(),
                start_block: contract.start_block,
                next: contract.start_block,
                tables: table_idxs,
                selectors,
                event_topics,
                named_selectors: contract.named_selectors.clone(),
                filters: contract.filters.clone(),
            });
            specs.push(ContractSpec {
                name: contract.name.clone(),
                addresses: contract.addresses.clone(),
                events,
                start_block: contract.start_block,
                filters: config::filters_record(&contract.filters),
            });
        }
        let mut by_address: HashMap<Address, Vec<usize>> = HashMap::new();
        for (idx, contract) in contracts.iter().enumerate() {
            for address in &contract.addresses {
                by_address.entry(*address).or_default().push(idx);
            }
        }
        let mut factories = Vec::new();
        for (child, contract) in config.contracts.iter().enumerate() {
            let Some(factory) = &contract.factory else {
                continue;
            };
            let parent = config
                .contracts
                .iter()
                .position(|c| c.name == factory.contract)
                .ok_or_else(|| {
                    Error::Config(format!(
                        "{}: contracts.{}.factory: no contract {}",
                        config.source.display(),
                        contract.name,
                        factory.contract
                    ))
                })?;
            let addresses = config.contracts[parent].addresses.clone();
            factories.push(
                Factory::new(factory, child, parent, addresses).map_err(|e| {
                    Error::Config(format!(
                        "{}: contracts.{}.factory: {e}",
                        config.source.display(),
                        contract.name
                    ))
                })?,
            );
        }
        Ok(Self {
            contracts: Arc::new(contracts),
            decoders,
            tables,
            specs,
            by_address,
            strict: config.sync.strict,
            factories,
            children: Arc::default(),
            timestamps: if config.sync.block_timestamps {
                sink::Timestamps::Stored
            } else {
                sink::Timestamps::Omitted
            },
            transactions: match (config.sync.transactions, config.sync.transaction_receipts) {
                (false, _) => sink::Transactions::Omitted,
                (true, false) => sink::Transactions::Stored,
                (true, true) => sink::Transactions::WithReceipts,
            },
            #[cfg(test)]
            hold_back: None,
        })
    }

    /// Creates the tables and moves every contract's next block past its checkpoint.
    pub(super) async fn prepare(&mut self, sink: &mut Sink) -> Result<(), sink::Error> {
        sink.settle_timestamps(self.timestamps).await?;
        sink.settle_transactions(self.transactions).await?;
        sink.prepare(&self.tables, &self.specs).await?;
        self.reload(sink).await
    }

    /// Sets every contract's next block from the checkpoints, and the children from `factory_children`
    /// (after a commit elsewhere or a rollback).
    pub(super) async fn reload(&mut self, sink: &Sink) -> Result<(), sink::Error> {
        let checkpoints = sink.checkpoints().await?;
        if !self.factories.is_empty() {
            let mut children = Children::default();
            for row in sink.factory_children().await? {
                let Some(contract) = self.contracts.iter().position(|c| c.name == row.contract)
                else {
                    continue;
                };
                children.register(Child {
                    contract,
                    address: row.address,
                    block_number: row.block_number,
                    block_hash: row.block_hash,
                    log_index: row.log_index,
                    factory_address: row.factory_address,
                });
            }
            *self.children.write().expect("children lock") = children;
        }
        for contract in Arc::make_mut(&mut self.contracts) {
            contract.next = checkpoints
                .get(&contract.name)
                .map_or(contract.start_block, |&cp| contract.start_block.max(cp + 1));
        }
        Ok(())
    }

    /// Records that every contract that had joined by `end` is committed up to it.
    pub(super) fn advance(&mut self, end: BlockNumber) {
        for contract in Arc::make_mut(&mut self.contracts) {
            if contract.next <= end {
                contract.next = end + 1;
            }
        }
    }

    /// What the bloom check looks for: per address (a factory's known children included), the topics its
    /// contract's requests ask for.
    pub(super) fn interests(&self) -> Vec<follow::Interest> {
        let children = self.children.read().expect("children lock");
        let child_interests = children.list.iter().map(|c| follow::Interest {
            address: c.address,
            topic0: self.contracts[c.contract].selectors.clone(),
            indexed: Default::default(),
        });
        self.contracts
            .iter()
            .flat_map(|c| {
                let groups = if c.filters.is_empty() {
                    vec![Group::unfiltered(c.addresses.clone(), c.selectors.clone())]
                } else {
                    filtered_groups(c)
                };
                groups
                    .into_iter()
                    .flat_map(|group| {
                        group
                            .addresses
                            .iter()
                            .map(|&address| follow::Interest {
                                address,
                                topic0: group.topic0.clone(),
                                indexed: group.indexed.clone(),
                            })
                            .collect::<Vec<_>>()
                    })
                    .collect::<Vec<_>>()
            })
            .chain(child_interests)
            .collect()
    }

    /// The first block any contract still needs, if it is at or below `target`.
    pub(super) fn start(&self, target: BlockNumber) -> Option<BlockNumber> {
        self.contracts
            .iter()
            .map(|c| c.next)
            .filter(|&n| n <= target)
            .min()
    }

    /// The blocks of the next step near the head, up to `end`: from the first block any contract still
    /// needs, up to the block before a contract that joins inside (the step after includes it, as the
    /// planner's boundaries do for backfill; otherwise its checkpoint would move past logs never asked for).
    pub(super) fn head_span(&self, end: BlockNumber) -> Option<BlockRange> {
        head_span(self.contracts.iter().map(|c| c.next), end)
    }

    /// [`Job::head_span`] once a backfill has committed every contract up to `backfilled`.
    pub(super) fn head_span_after(
        &self,
        backfilled: BlockNumber,
        end: BlockNumber,
    ) -> Option<BlockRange> {
        let nexts = self
            .contracts
            .iter()
            .map(|c| c.next.max(backfilled.saturating_add(1)));
        head_span(nexts, end)
    }

    pub(super) fn planner(&self, config: &Config, plan: BlockRange) -> Planner {
        let mut planner = self.planner_factory(config)(plan);
        if let Some(joins) = self.address_joins() {
            planner.weigh_by_addresses(joins);
        }
        #[cfg(test)]
        if let Some(start) = self.hold_back {
            planner.hold_back(start);
        }
        planner
    }

    /// Makes planners for ranges of this job as it stands now, owning what it needs.
    pub(super) fn planner_factory(
        &self,
        config: &Config,
    ) -> impl FnOnce(BlockRange) -> Planner + Send + use<> {
        let planner_config = planner_config(config);
        let contracts = self.contracts.clone();
        move |plan| Planner::new(planner_config, plan, contracts.iter().map(|c| c.next))
    }

    /// Whether a log is one the database keeps, as [`Job::build_batch`] decides it: not `removed`, of a
    /// contract that has joined by its block, taken by one of its configured events (a factory's child
    /// read ahead counts before its creating log is registered). For the stamping stage, which reads
    /// headers only for the blocks of such logs.
    pub(super) fn stored(&self) -> super::enrich::Stored {
        let (contracts, by_address) = (self.contracts.clone(), self.by_address.clone());
        let decoders = self.decoders.clone();
        // Only a job with factories looks its children up (a lock per log otherwise taken for nothing).
        let children = (!self.factories.is_empty()).then(|| self.children.clone());
        Arc::new(move |log| {
            if log.removed {
                return false;
            }
            let joined_and_matched = |contract_idx: usize| {
                let contract = &contracts[contract_idx];
                contract.next <= log.block_number && super::batch::keeps(contract, &decoders, log)
            };
            let configured = by_address.get(&log.address).into_iter().flatten();
            if configured.copied().any(joined_and_matched) {
                return true;
            }
            // A factory's child emits for its contract from the block of its creating log. This stage runs
            // before the batch's creating logs are registered: a child read ahead counts already.
            children.as_ref().is_some_and(|children| {
                let children = children.read().expect("children lock");
                let found = children
                    .emitters(&log.address, log.block_number)
                    .chain(children.foreseen_emitters(&log.address, log.block_number))
                    .any(joined_and_matched);
                found
            })
        })
    }

    pub(super) fn selector(&self) -> Arc<dyn Fn(BlockRange) -> Selection + Send + Sync> {
        let contracts = self.contracts.clone();
        let children = self.children.clone();
        // What a factory announces children with: the factories whose children's contract has joined.
        let creators: Vec<(usize, usize, B256)> = self
            .factories
            .iter()
            .map(|f| (f.child, f.parent, f.selector))
            .collect();
        Arc::new(move |range: BlockRange| {
            let mut children = children.write().expect("children lock");
            // Under the same lock as the read below: the selection covers exactly the children counted.
            children.selected(range.start());
            selection(&contracts, &children, &creators, range)
        })
    }
}

/// The planner's limits from `[sync]`.
pub(super) fn planner_config(config: &Config) -> PlannerConfig {
    PlannerConfig {
        initial_span: config.sync.initial_block_range,
        max_span: config.sync.max_block_range,
        target_logs: config.sync.target_logs_per_request,
    }
}

/// A planner for one `span` of its own (every contract taken as joined at its start): for the requests a
/// stage makes besides the backfill's ranges.
pub(super) fn span_planner(config: &Config, span: BlockRange) -> Planner {
    Planner::new(planner_config(config), span, std::iter::once(span.start()))
}

/// See [`Job::head_span`]; `nexts` are the contracts' next blocks.
fn head_span(
    nexts: impl Iterator<Item = BlockNumber> + Clone,
    end: BlockNumber,
) -> Option<BlockRange> {
    let start = nexts.clone().filter(|&next| next <= end).min()?;
    let end = match nexts.filter(|&next| next > start).min() {
        Some(joins) => end.min(joins - 1),
        None => end,
    };
    BlockRange::new(start, end)
}

/// The filters for a range: every contract that has joined by its start. Unfiltered contracts share one
/// group (as they always did), with the children known of a contract created by a factory (created by the
/// range's end), and the factory of such a contract even when the factory itself has not joined (its
/// announcing event only: the children are found in it); a filtered contract's unfiltered events are a
/// group of its addresses, and each filtered event one more, merged where the topics are identical
/// (`fetch::groups`).
fn selection(
    contracts: &[Contract],
    children: &Children,
    creators: &[(usize, usize, B256)],
    range: BlockRange,
) -> Selection {
    let mut all = Group::unfiltered(Vec::new(), Some(Vec::new()));
    let mut narrowed: Vec<Group> = Vec::new();
    let mut pairs: Vec<(Address, B256)> = Vec::new();
    let joined = |c: &Contract| c.next <= range.start();
    for &(child, parent, selector) in creators {
        if joined(&contracts[child]) && !joined(&contracts[parent]) {
            all.addresses.extend(&contracts[parent].addresses);
            if let Some(topic0) = all.topic0.as_mut() {
                topic0.push(selector);
            }
        }
    }
    for (idx, contract) in contracts.iter().enumerate().filter(|(_, c)| joined(c)) {
        let found;
        let addresses = if creators.iter().any(|&(child, _, _)| child == idx) {
            found = children.addresses_of(idx, range.end());
            &found
        } else {
            &contract.addresses
        };
        let filtered = |topic: &B256| contract.filters.iter().any(|f| f.selector == *topic);
        for &address in addresses {
            pairs.extend(
                contract
                    .event_topics
                    .iter()
                    .filter(|t| !filtered(t))
                    .map(|&t| (address, t)),
            );
        }
        if contract.filters.is_empty() {
            all.addresses.extend(addresses);
            match (&contract.selectors, all.topic0.as_mut()) {
                (Some(selectors), Some(topic0)) => topic0.extend(selectors),
                (None, _) => all.topic0 = None,
                (Some(_), None) => {}
            }
            continue;
        }
        narrowed.extend(filtered_groups(contract));
    }
    all.topic0 = all.topic0.map(sorted);
    pairs.sort();
    pairs.dedup();
    Selection {
        groups: fetch::merge_groups(std::iter::once(all).chain(narrowed)),
        pairs,
    }
}

/// The groups of a filtered contract: its unfiltered events (if any), then one per filtered event.
fn filtered_groups(contract: &Contract) -> Vec<Group> {
    let filtered = |topic: &B256| contract.filters.iter().any(|f| f.selector == *topic);
    // config: a filtered contract has no anonymous event, so every event has a selector.
    let unfiltered: Vec<B256> = contract
        .event_topics
        .iter()
        .copied()
        .filter(|t| !filtered(t))
        .collect();
    let unfiltered = (!unfiltered.is_empty())
        .then(|| Group::unfiltered(contract.addresses.clone(), Some(sorted(unfiltered))));
    let narrowed = contract.filters.iter().map(|filter| Group {
        addresses: contract.addresses.clone(),
        topic0: Some(vec![filter.selector]),
        indexed: filter.topics.clone(),
    });
    unfiltered.into_iter().chain(narrowed).collect()
}

fn sorted(mut topics: Vec<B256>) -> Vec<B256> {
    topics.sort();
    topics.dedup();
    topics
}

#[cfg(test)]
mod head_span_tests {
    use std::path::Path;

    use super::{head_span, Job};
    use crate::primitives::BlockRange;

    fn span(start: u64, end: u64) -> Option<BlockRange> {
        BlockRange::new(start, end)
    }

    #[test]
    fn a_step_near_the_head_starts_at_the_first_block_needed_and_stops_before_a_contract_joins() {
        assert_eq!(head_span([100, 150].into_iter(), 200), span(100, 149));
        assert_eq!(head_span([150, 100, 150].into_iter(), 120), span(100, 120));
        assert_eq!(head_span([150, 150].into_iter(), 200), span(150, 200));
        assert_eq!(head_span([201, 300].into_iter(), 200), None);
    }

    #[test]
    fn the_span_after_a_backfill_is_the_one_the_step_will_compute() {
        let contract = |name: &str, address: u8, start: u64| {
            format!(
                "[[contracts]]\nname = \"{name}\"\naddress = \"0x{address:040x}\"\nstart_block = {start}\n\
                 events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]\n"
            )
        };
        let text = format!(
            "[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n{}{}{}",
            contract("early", 1, 0),
            contract("caught_up", 2, 960),
            contract("late", 3, 1030),
        );
        let config = crate::config::load_str(Path::new("config.toml"), &text, &|_| None)
            .expect("a valid config");
        let mut job = Job::new(&config).expect("the events resolve");
        // Finalized 999, head 1064: the backfill takes `early` and `caught_up` to 999; `late` joins at 1030.
        let predicted = job.head_span_after(999, 1064);
        assert_eq!(predicted, span(1000, 1029));
        job.advance(999);
        assert_eq!(job.head_span(1064), predicted);
        // Nothing to backfill: the prediction is the span as it stands.
        assert_eq!(job.head_span_after(900, 1064), job.head_span(1064));
        job.advance(1029);
        assert_eq!(job.head_span(1064), span(1030, 1064));
    }
}

#[cfg(test)]
mod selection_tests {
    use std::path::Path;

    use alloy_primitives::{keccak256, Address, B256};

    use super::Job;
    use crate::fetch::Group;
    use crate::primitives::BlockRange;

    const TRANSFER: &str =
        "event Transfer(address indexed from, address indexed to, uint256 value)";
    const APPROVAL: &str =
        "event Approval(address indexed owner, address indexed spender, uint256 value)";

    fn contract(name: &str, address: u8, filters: Option<&str>) -> String {
        let filters = filters.map_or(String::new(), |f| format!("filters = {f}\n"));
        format!(
            "[[contracts]]\nname = \"{name}\"\naddress = \"0x{address:040x}\"\n\
             events = [\"{TRANSFER}\", \"{APPROVAL}\"]\n{filters}"
        )
    }

    /// Unfiltered contracts share one request; a filtered contract's unfiltered events are a group of
    /// their own (merged with the unfiltered one only where its topics are identical); each filtered event
    /// is one more group, shared by contracts whose filters are identical.
    #[test]
    fn a_range_is_asked_for_by_filter_group() {
        let to_one = "{ Transfer = { to = [\"0x0000000000000000000000000000000000000001\"] } }";
        let text = format!(
            "[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n{}{}{}{}",
            contract("plain", 1, None),
            contract("other_plain", 2, None),
            contract("narrow", 3, Some(to_one)),
            contract("narrow_too", 4, Some(to_one)),
        );
        let config = crate::config::load_str(Path::new("config.toml"), &text, &|_| None)
            .expect("a valid config");
        let job = Job::new(&config).expect("the events resolve");
        let selection = job.selector()(BlockRange::new(0, 10).unwrap());
        let transfer = keccak256("Transfer(address,address,uint256)");
        let approval = keccak256("Approval(address,address,uint256)");
        let mut both = vec![transfer, approval];
        both.sort();
        let a = |n: u8| Address::left_padding_from(&[n]);
        let to_one_topic = B256::left_padding_from(&[1]);
        assert_eq!(
            selection.groups,
            [
                Group::unfiltered(vec![a(1), a(2)], Some(both)),
                Group::unfiltered(vec![a(3), a(4)], Some(vec![approval])),
                Group {
                    addresses: vec![a(3), a(4)],
                    topic0: Some(vec![transfer]),
                    indexed: [None, Some(vec![to_one_topic]), None],
                },
            ]
        );
        // Surveys may probe the unfiltered events only by (address, topic0) pair.
        assert!(selection.pairs.contains(&(a(3), approval)));
        assert!(!selection.pairs.contains(&(a(3), transfer)));
        assert!(selection.pairs.contains(&(a(1), transfer)));
    }
}
