//! Requests for many addresses (a factory's children): in chunks of at most [`ADDRESSES_PER_REQUEST`]
//! addresses, or as one *topic-only* request (the same topics, no address list) whose answer is cut to the
//! listed addresses here, whichever the answers so far say is cheaper.
//!
//! Thousands of children as chunks cost one request per thousand addresses for every range. A topic-only
//! request costs one, but also carries the logs of every other contract with the same events (every
//! Uniswap V2 fork emits the same `Swap`), and is refused when those push it over the node's cap. So each
//! set of topics keeps a [`Density`]: the listed addresses' logs per block (from every answer) and their
//! share of a topic-only answer (from topic-only answers), and [`Density::choose`] picks the mode with the
//! fewer expected requests, a full answer's size counted as one more request. An unknown share is tried
//! once (the answer measures it); a refused topic-only request falls back to chunks for that range at once
//! and is not tried again for a while. The choice is counted in [`super::GateStats`] and in the
//! `logslice_topic_only_requests_total` metric.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;

use alloy_primitives::{Address, B256};

use crate::primitives::Log;
use crate::rpc::{Blocks, LogFilter};

use super::{Access, Error};

/// Addresses per `eth_getLogs` request: providers refuse filters of more than 5,000 parameters
/// (`-32602 too many parameters`), and 1,000 keeps a request's body under 50 KB.
pub const ADDRESSES_PER_REQUEST: usize = 1_000;

/// The spec's result cap.
const CAP: f64 = 10_000.0;

/// The most logs a topic-only answer may be expected to carry for it to be chosen: room under [`CAP`] for
/// the estimate's error, since a refused request is one more.
const TOPIC_ONLY_MAX_LOGS: f64 = 7_500.0;

/// Weight of the newest answer in the running estimates.
const WEIGHT: f64 = 0.25;

/// Topic-only requests declined for their measured share before the share is measured again.
const REPROBE_AFTER: u32 = 64;

/// Chunked choices a refused topic-only request waits for, at least and at most (doubling).
const BACKOFF: (u32, u32) = (8, 512);

/// How to ask for one filter's logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One request per chunk of addresses.
    ByAddress {
        /// Requests.
        requests: usize,
    },
    /// One request without addresses, cut to them here.
    TopicOnly,
}

/// What the answers for one set of topics have shown.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Density {
    /// Logs of the listed addresses per block.
    kept_per_block: Option<f64>,
    /// Of a topic-only answer, the fraction that the listed addresses emitted.
    share: Option<f64>,
    /// Chunked choices to make before a topic-only request may be tried again.
    skip: u32,
    /// The next wait after a refusal.
    backoff: u32,
    /// Topic-only requests declined for the measured share since it was measured.
    declined: u32,
}

impl Density {
    /// The cheaper mode for `n_addresses` over `blocks` blocks. Chunks until a density is known, and
    /// always for a list that fits one request.
    pub fn choose(&mut self, n_addresses: usize, blocks: u64) -> Mode {
        let requests = n_addresses.div_ceil(ADDRESSES_PER_REQUEST).max(1);
        let by_address = Mode::ByAddress { requests };
        if requests < 2 {
            return by_address;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return by_address;
        }
        let Some(rate) = self.kept_per_block else {
            return by_address;
        };
        let kept = rate * blocks as f64;
        let address_cost = requests as f64 + kept / CAP;
        let wins = |share: f64| {
            let total = kept / share.max(f64::MIN_POSITIVE);
            total <= TOPIC_ONLY_MAX_LOGS && 1.0 + total / CAP < address_cost
        };
        // An unknown share is taken as 1: the answer measures it.
        if wins(self.share.unwrap_or(1.0)) {
            return Mode::TopicOnly;
        }
        if self.share.is_some() && wins(1.0) {
            // Declined for the share alone: measure it again after a while (other contracts on the same
            // events come and go, children get busier).
            self.declined += 1;
            if self.declined >= REPROBE_AFTER {
                self.declined = 0;
                self.share = None;
            }
        }
        by_address
    }

    /// Records a chunked answer: `kept` logs over `blocks` blocks.
    pub fn by_address(&mut self, blocks: u64, kept: usize) {
        self.observe_rate(blocks, kept);
    }

    /// Records a topic-only answer of `total` logs, `kept` of them from the listed addresses.
    pub fn topic_only(&mut self, blocks: u64, total: usize, kept: usize) {
        self.observe_rate(blocks, kept);
        if total > 0 {
            let share = kept as f64 / total as f64;
            self.share = Some(match self.share {
                Some(old) => old + WEIGHT * (share - old),
                None => share,
            });
        }
        self.backoff = 0;
        self.declined = 0;
    }

    /// Records a refused topic-only request over `blocks` blocks: its answer would have been over the cap,
    /// so the listed addresses' share is at most their expected logs over the cap.
    pub fn refused(&mut self, blocks: u64) {
        let kept = self.kept_per_block.unwrap_or(0.0) * blocks as f64;
        let bound = (kept / CAP).clamp(f64::MIN_POSITIVE, 1.0);
        self.share = Some(self.share.map_or(bound, |share| share.min(bound)));
        self.backoff = (self.backoff * 2).clamp(BACKOFF.0, BACKOFF.1);
        self.skip = self.backoff;
    }

    fn observe_rate(&mut self, blocks: u64, kept: usize) {
        let rate = kept as f64 / blocks.max(1) as f64;
        self.kept_per_block = Some(match self.kept_per_block {
            Some(old) => old + WEIGHT * (rate - old),
            None => rate,
        });
    }
}

/// The topics of a filter: what a [`Density`] is kept for.
type Topics = (Option<Vec<B256>>, [Option<Vec<B256>>; 3]);

/// The densities of a run, by topics (shared by every request through one gate).
#[derive(Debug, Default)]
pub struct Densities(Mutex<HashMap<Topics, Density>>);

impl Densities {
    fn with<T>(&self, filter: &LogFilter, f: impl FnOnce(&mut Density) -> T) -> T {
        let key = (filter.topic0.clone(), filter.indexed.clone());
        let mut map = self.0.lock().expect("densities lock");
        f(map.entry(key).or_default())
    }
}

/// The logs of one filter, and the most that any one of its requests answered: the node's cap bounds each
/// request, not their sum, so a range asked for in two chunks may carry twice the logs of one request.
#[derive(Debug)]
pub(crate) struct Chunked {
    /// Merged in `(block_number, log_index)` order.
    pub logs: Vec<Log>,
    /// The largest answer of a single request (a topic-only one counted before it is cut to the list).
    pub largest: usize,
}

/// `eth_getLogs` of `filter` through the gate: one request for at most [`ADDRESSES_PER_REQUEST`]
/// addresses; for more, chunks of them (run concurrently) or one topic-only request cut to them, as
/// [`Density::choose`] decides. Merged in `(block_number, log_index)` order. One refused chunk refuses the
/// whole, so the caller splits the range as for one request; a refused topic-only request is followed by
/// the chunks at once.
///
/// # Errors
/// Any [`Error`] of a request.
pub(crate) async fn get_chunked(access: &Access, filter: &LogFilter) -> Result<Chunked, Error> {
    if filter.addresses.len() <= ADDRESSES_PER_REQUEST {
        let logs = one(access, filter).await?;
        let largest = logs.len();
        return Ok(Chunked { logs, largest });
    }
    let blocks = match filter.blocks {
        Blocks::Range(range) => range.len(),
        Blocks::Hash(_) => 1,
    };
    let densities = &access.densities;
    let mode = densities.with(filter, |d| d.choose(filter.addresses.len(), blocks));
    tracing::debug!(
        ?mode,
        addresses = filter.addresses.len(),
        blocks,
        "many addresses"
    );
    if mode == Mode::TopicOnly {
        let topic_only = LogFilter {
            addresses: Vec::new(),
            ..filter.clone()
        };
        match one(access, &topic_only).await {
            Ok(logs) => {
                let total = logs.len();
                let listed: HashSet<&Address> = filter.addresses.iter().collect();
                let kept: Vec<Log> = logs
                    .into_iter()
                    .filter(|log| listed.contains(&log.address))
                    .collect();
                densities.with(filter, |d| d.topic_only(blocks, total, kept.len()));
                let foreign = (total - kept.len()) as u64;
                access.gate.stats.topic_only.fetch_add(1, Relaxed);
                access.gate.stats.foreign_logs.fetch_add(foreign, Relaxed);
                crate::observe::record_topic_only(foreign);
                return Ok(Chunked {
                    logs: kept,
                    largest: total,
                });
            }
            Err(Error::Split(_)) => densities.with(filter, |d| d.refused(blocks)),
            Err(other) => return Err(other),
        }
    }
    let parts = dealt(&filter.addresses)
        .into_iter()
        .map(|chunk| async move {
            let part = LogFilter {
                addresses: chunk,
                ..filter.clone()
            };
            one(access, &part).await
        });
    let parts = futures::future::try_join_all(parts).await?;
    let largest = parts.iter().map(Vec::len).max().unwrap_or(0);
    let mut logs: Vec<Log> = parts.into_iter().flatten().collect();
    logs.sort_by_key(|log| (log.block_number, log.log_index));
    densities.with(filter, |d| d.by_address(blocks, logs.len()));
    Ok(Chunked { logs, largest })
}

/// `addresses` in the fewest chunks of at most [`ADDRESSES_PER_REQUEST`], dealt in turn like cards rather
/// than cut in runs of the limit: 1,505 addresses in runs are chunks of 1,000 and 505, the first carrying
/// two thirds of the logs; dealt, 753 and 752. The planner sizes a range by its largest answer, so even
/// chunks let the range grow longer.
fn dealt(addresses: &[Address]) -> Vec<Vec<Address>> {
    let n = addresses.len().div_ceil(ADDRESSES_PER_REQUEST).max(1);
    // Not `vec![...; n]`: a cloned `Vec` does not keep its capacity.
    let mut chunks: Vec<Vec<Address>> = (0..n)
        .map(|_| Vec::with_capacity(addresses.len() / n + 1))
        .collect();
    for (i, address) in addresses.iter().enumerate() {
        chunks[i % n].push(*address);
    }
    chunks
}

async fn one(access: &Access, filter: &LogFilter) -> Result<Vec<Log>, Error> {
    access.get_logs(filter).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MANY: usize = 3 * ADDRESSES_PER_REQUEST;

    fn learned(rate: f64, share: Option<f64>) -> Density {
        Density {
            kept_per_block: Some(rate),
            share,
            ..Density::default()
        }
    }

    #[test]
    fn a_list_that_fits_one_request_is_always_sent_with_its_addresses() {
        let mut density = learned(1.0, Some(1.0));
        assert_eq!(
            density.choose(ADDRESSES_PER_REQUEST, 100),
            Mode::ByAddress { requests: 1 }
        );
    }

    #[test]
    fn chunks_until_a_density_is_known_then_tries_topic_only_once() {
        let mut density = Density::default();
        assert_eq!(density.choose(MANY, 100), Mode::ByAddress { requests: 3 });
        density.by_address(100, 2_000);
        assert_eq!(density.choose(MANY, 100), Mode::TopicOnly);
    }

    #[test]
    fn busy_children_alone_on_their_topics_are_asked_for_by_topic() {
        let mut density = Density::default();
        density.by_address(100, 3_000);
        density.topic_only(100, 3_000, 3_000);
        assert_eq!(density.choose(MANY, 100), Mode::TopicOnly);
    }

    #[test]
    fn a_crowd_of_other_contracts_on_the_same_topics_keeps_the_chunks() {
        let mut density = Density::default();
        density.by_address(100, 300);
        // A hundredth of a short range's answer was ours: 100 blocks by topic would be 30,000 logs.
        density.topic_only(10, 3_000, 30);
        assert_eq!(density.choose(MANY, 100), Mode::ByAddress { requests: 3 });
    }

    #[test]
    fn a_range_expected_over_the_cap_is_never_asked_for_by_topic() {
        let mut density = learned(100.0, Some(1.0));
        assert_eq!(density.choose(MANY, 90), Mode::ByAddress { requests: 3 });
    }

    #[test]
    fn a_refusal_waits_before_trying_again_and_bounds_the_share() {
        let mut density = learned(10.0, None);
        assert_eq!(density.choose(MANY, 100), Mode::TopicOnly);
        density.refused(100);
        assert_eq!(density.share, Some(0.1));
        for _ in 0..BACKOFF.0 {
            assert_eq!(density.choose(MANY, 100), Mode::ByAddress { requests: 3 });
        }
        // The bound says a topic-only answer of 100 blocks would be 10,000 logs: still chunks.
        assert_eq!(density.choose(MANY, 100), Mode::ByAddress { requests: 3 });
        // ... and after a while the share is measured again.
        for _ in 0..REPROBE_AFTER {
            density.choose(MANY, 100);
        }
        assert_eq!(density.choose(MANY, 10), Mode::TopicOnly);
    }

    proptest! {
        /// Every address lands in exactly one chunk, no chunk is over the limit, there are as few chunks as
        /// the limit allows, and their sizes differ by at most one.
        #[test]
        fn addresses_are_dealt_into_the_fewest_even_chunks(n in 0usize..5_000) {
            let addresses: Vec<Address> = (0..n as u64)
                .map(|i| Address::left_padding_from(&i.to_be_bytes()))
                .collect();
            let chunks = dealt(&addresses);
            prop_assert_eq!(chunks.len(), n.div_ceil(ADDRESSES_PER_REQUEST).max(1));
            let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
            let (least, most) = (sizes.iter().min().unwrap(), sizes.iter().max().unwrap());
            prop_assert!(*most <= ADDRESSES_PER_REQUEST);
            prop_assert!(most - least <= 1);
            let mut all: Vec<Address> = chunks.into_iter().flatten().collect();
            all.sort();
            prop_assert_eq!(all, addresses);
        }

        /// Topic-only is chosen only for a list longer than one request, when the expected answer is under
        /// the cap, and never in the rounds after a refusal.
        #[test]
        fn the_choice_stays_inside_its_bounds(
            answers in proptest::collection::vec((1u64..5_000, 0usize..20_000, 0u8..=100, any::<bool>()), 1..40),
            n_addresses in 1usize..6_000,
            blocks in 1u64..5_000,
        ) {
            let mut density = Density::default();
            for (span, kept, percent, refused) in answers {
                if refused {
                    density.refused(span);
                    let waiting = density.skip;
                    for _ in 0..waiting {
                        prop_assert_ne!(density.choose(n_addresses, blocks), Mode::TopicOnly);
                    }
                } else {
                    let total = kept * 100 / usize::from(percent.max(1));
                    density.topic_only(span, total.max(kept), kept);
                }
                let before = density.clone();
                if density.choose(n_addresses, blocks) == Mode::TopicOnly {
                    prop_assert!(n_addresses > ADDRESSES_PER_REQUEST);
                    let kept = before.kept_per_block.unwrap() * blocks as f64;
                    let share = before.share.unwrap_or(1.0);
                    prop_assert!(kept / share <= TOPIC_ONLY_MAX_LOGS);
                }
            }
        }
    }
}
