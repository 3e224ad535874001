//! Filter groups: the `eth_getLogs` filters one range is asked with, and fetching a range as all of them.
//!
//! A filter's topics apply to every address of the request, so contracts that filter an event's indexed
//! parameters cannot share a request with contracts that don't, nor with differently filtered events: each
//! distinct set of topics is a [`Group`] of its own (groups with identical topics share one request, their
//! addresses united). [`get_logs`] asks the node once per group, concurrently through the gate, and merges
//! the answers in `(block_number, log_index)` order. What the node answers is what is kept: an answer that
//! does not match its group's filter is refused as inconsistent, never trimmed.
//!
//! Deciding which groups a configured contract makes is the job's (`pipeline::job`); this module knows
//! filters, not contracts.

use alloy_primitives::{Address, B256};

use crate::primitives::{BlockRange, Log};
use crate::rpc::{Blocks, LogFilter};

use super::answer::{checked, checked_topics, in_log_order};
use super::{get_chunked, Access, Error, Selection};

/// Logs one `eth_getLogs` filter asks for: its addresses, each with the same topics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Emitting contracts.
    pub addresses: Vec<Address>,
    /// Alternatives for topic0; `None` when an anonymous event forbids a topic0 filter.
    pub topic0: Option<Vec<B256>>,
    /// Alternatives for topics 1, 2 and 3 (a filtered event's indexed parameters); `None`: any.
    pub indexed: [Option<Vec<B256>>; 3],
}

impl Group {
    /// A group of every log of `addresses` with one of `topic0` (any log when `None`).
    pub fn unfiltered(addresses: Vec<Address>, topic0: Option<Vec<B256>>) -> Self {
        Self {
            addresses,
            topic0,
            indexed: Default::default(),
        }
    }

    /// Whether the group constrains a topic beyond topic0.
    pub fn is_narrowed(&self) -> bool {
        self.indexed.iter().any(Option::is_some)
    }

    /// The request for `blocks`.
    pub fn filter(&self, blocks: Blocks) -> LogFilter {
        LogFilter {
            blocks,
            addresses: self.addresses.clone(),
            topic0: self.topic0.clone(),
            indexed: self.indexed.clone(),
        }
    }

    /// Two narrower groups that together ask for the same logs: halves of the addresses, else of the topic0
    /// alternatives; `None` when neither can be narrowed.
    pub(super) fn halves(self) -> Option<(Group, Group)> {
        let Group {
            addresses,
            topic0,
            indexed,
        } = self;
        if addresses.len() > 1 {
            let (a, b) = addresses.split_at(addresses.len() / 2);
            let half = |addresses: &[Address]| Group {
                addresses: addresses.to_vec(),
                topic0: topic0.clone(),
                indexed: indexed.clone(),
            };
            return Some((half(a), half(b)));
        }
        let topics = topic0.filter(|t| t.len() > 1)?;
        let (a, b) = topics.split_at(topics.len() / 2);
        let half = |topics: &[B256]| Group {
            addresses: addresses.clone(),
            topic0: Some(topics.to_vec()),
            indexed: indexed.clone(),
        };
        Some((half(a), half(b)))
    }
}

/// `groups` with those of identical topics merged into one (addresses united, sorted, deduplicated) and
/// those without addresses dropped, in order of first appearance.
pub fn merge(groups: impl IntoIterator<Item = Group>) -> Vec<Group> {
    let mut merged: Vec<Group> = Vec::new();
    for group in groups {
        if group.addresses.is_empty() {
            continue;
        }
        match merged
            .iter_mut()
            .find(|m| m.topic0 == group.topic0 && m.indexed == group.indexed)
        {
            Some(same) => same.addresses.extend(group.addresses),
            None => merged.push(group),
        }
    }
    for group in &mut merged {
        group.addresses.sort();
        group.addresses.dedup();
    }
    merged
}

/// Whether `log` is one `filter` asks for (address and every constrained topic).
pub(super) fn admits(filter: &LogFilter, log: &Log) -> bool {
    filter.addresses.contains(&log.address) && topics_admitted(filter, log)
}

/// Whether `log`'s topics are ones `filter` asks for (topic0 and every constrained indexed topic).
pub(super) fn topics_admitted(filter: &LogFilter, log: &Log) -> bool {
    let topic_admitted = |position: usize, wanted: Option<&Vec<B256>>| match wanted {
        None => true,
        Some(values) => log
            .topics
            .get(position)
            .is_some_and(|topic| values.contains(topic)),
    };
    topic_admitted(0, filter.topic0.as_ref())
        && filter
            .indexed
            .iter()
            .enumerate()
            .all(|(idx, wanted)| topic_admitted(idx + 1, wanted.as_ref()))
}

/// The logs of `selection` over `blocks`: one request per group, concurrently (each through the gate),
/// each answer checked against its request, merged in `(block_number, log_index)` order. One group's
/// refusal (a range-too-large answer) is the whole call's, so the caller narrows the range for all groups.
///
/// # Errors
/// The first [`Error`] of any group, [`Error::Split`] included; the other requests are then dropped.
///
/// # Cancel safety
/// Cancel safe: dropped, it sends nothing more (as [`Gate::run`]).
pub(crate) async fn get_logs(
    access: &Access,
    blocks: Blocks,
    selection: &Selection,
) -> Result<Vec<Log>, Error> {
    let requests = selection.groups.iter().map(|group| async move {
        let filter = group.filter(blocks);
        let logs = get_chunked(access, &filter).await?.logs;
        match blocks {
            Blocks::Range(range) => checked(&access.gate.stats, range, &filter, logs),
            Blocks::Hash(_) => checked_topics(&access.gate.stats, &filter, logs),
        }
    });
    let answers = futures::future::try_join_all(requests).await?;
    merge_answers(answers)
}

/// The answers one range got from the node: each group's logs (or the refusal that ended it).
pub(super) struct Answered {
    /// The merged logs, or the first error of any group.
    pub logs: Result<Vec<Log>, Error>,
    /// When another group's refusal ended the range, the groups that were answered, with their logs (kept
    /// for the range's pieces); empty when every group answered.
    pub by_group: Vec<(Group, Vec<Log>)>,
    /// The most logs any one request answered (a kept group's logs counted as one request): what the
    /// planner sizes ranges by, since the node's cap bounds each request and not the range's sum.
    pub largest: usize,
}

/// [`get_logs`] over a range, taking the logs of groups in `kept` from there instead of asking again, and
/// handing back what each group answered, so that one group's refusal does not throw the others' answers
/// away (the range's pieces take them from [`Kept`]).
pub(super) async fn get_range_logs(
    access: &Access,
    range: BlockRange,
    selection: &Selection,
    kept: Vec<Option<Vec<Log>>>,
) -> Answered {
    let requests = selection
        .groups
        .iter()
        .zip(kept)
        .map(|(group, kept)| async move {
            if let Some(logs) = kept {
                let largest = logs.len();
                return (group, Ok((logs, largest)));
            }
            let filter = group.filter(Blocks::Range(range));
            let answer = get_chunked(access, &filter).await.and_then(|answer| {
                let logs = checked(&access.gate.stats, range, &filter, answer.logs)?;
                Ok((logs, answer.largest))
            });
            (group, answer)
        });
    let mut answered = Vec::new();
    let mut first_error = None;
    let mut largest = 0;
    for (group, answer) in futures::future::join_all(requests).await {
        match answer {
            Ok((logs, most)) => {
                largest = largest.max(most);
                answered.push((group, logs));
            }
            Err(err) => {
                first_error.get_or_insert(err);
            }
        }
    }
    // The groups (each with its address list) and their answers are handed back only when the range is
    // refused, for its pieces; a range answered whole merges the answers and copies nothing.
    match first_error {
        Some(err) => Answered {
            logs: Err(err),
            by_group: answered
                .into_iter()
                .map(|(group, logs)| (group.clone(), logs))
                .collect(),
            largest,
        },
        None => Answered {
            logs: merge_answers(answered.into_iter().map(|(_, logs)| logs).collect()),
            by_group: Vec::new(),
            largest,
        },
    }
}

/// Answers of groups whose range was split by another group's refusal, until the pieces are fetched: a
/// piece inside such a range takes that group's logs from here (the node's answer cut at the piece's
/// blocks, which loses nothing) instead of asking the node again.
#[derive(Debug, Default)]
pub(super) struct Kept {
    answers: Vec<(Group, BlockRange, Vec<Log>)>,
}

impl Kept {
    /// Keeps what the groups of `range` answered.
    pub(super) fn keep(&mut self, range: BlockRange, by_group: Vec<(Group, Vec<Log>)>) {
        for (group, logs) in by_group {
            self.answers.push((group, range, logs));
        }
    }

    /// For each group of `selection`, its logs in `range` when a kept answer covers the range.
    pub(super) fn for_range(
        &self,
        selection: &Selection,
        range: BlockRange,
    ) -> Vec<Option<Vec<Log>>> {
        selection
            .groups
            .iter()
            .map(|group| {
                let (_, _, logs) = self.answers.iter().find(|(kept, covered, _)| {
                    kept == group
                        && covered.start() <= range.start()
                        && range.end() <= covered.end()
                })?;
                Some(
                    logs.iter()
                        .filter(|log| range.contains(log.block_number))
                        .cloned()
                        .collect(),
                )
            })
            .collect()
    }

    /// Forgets answers of ranges that end below `block` (every piece of them was fetched).
    pub(super) fn forget_below(&mut self, block: u64) {
        self.answers.retain(|(_, range, _)| range.end() >= block);
    }

    /// Logs held.
    pub(super) fn n_logs(&self) -> usize {
        self.answers.iter().map(|(_, _, logs)| logs.len()).sum()
    }
}

/// The answers of several requests for one range (groups, halves of a filter, quarters) as one list in
/// `(block_number, log_index)` order, each log once ([`in_log_order`]). Groups never ask for the same log
/// (they differ in address or topic0, or are merged), but filters may overlap (an anonymous event's
/// contract in two groups): a log in two answers is kept once. Not counted as a repeat of the node's: each
/// answer was checked, and its own repeats counted, on its own.
///
/// # Errors
/// [`Error::Conflict`] for two different logs at one position.
pub(super) fn merge_answers(answers: Vec<Vec<Log>>) -> Result<Vec<Log>, Error> {
    if answers.len() == 1 {
        return Ok(answers.into_iter().next().unwrap_or_default());
    }
    let mut logs: Vec<Log> = answers.into_iter().flatten().collect();
    in_log_order(&mut logs)?;
    Ok(logs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(n: u8) -> Address {
        Address::repeat_byte(n)
    }

    fn t(n: u8) -> B256 {
        B256::repeat_byte(n)
    }

    fn narrowed(addresses: &[u8], topic0: u8, to: &[u8]) -> Group {
        Group {
            addresses: addresses.iter().map(|&n| a(n)).collect(),
            topic0: Some(vec![t(topic0)]),
            indexed: [None, Some(to.iter().map(|&n| t(n)).collect()), None],
        }
    }

    fn check_merge(groups: Vec<Group>, expected: Vec<Group>) {
        assert_eq!(merge(groups), expected);
    }

    #[test]
    fn groups_of_identical_topics_share_a_request() {
        let all = Group::unfiltered(vec![a(2), a(1)], Some(vec![t(1), t(2)]));
        check_merge(
            vec![
                all.clone(),
                narrowed(&[3], 1, &[9]),
                narrowed(&[4], 1, &[9]),
                narrowed(&[5], 1, &[8]),
                Group::unfiltered(vec![a(3)], Some(vec![t(1), t(2)])),
                Group::unfiltered(Vec::new(), None),
            ],
            vec![
                Group::unfiltered(vec![a(1), a(2), a(3)], Some(vec![t(1), t(2)])),
                narrowed(&[3, 4], 1, &[9]),
                narrowed(&[5], 1, &[8]),
            ],
        );
        // No filter at all: one group, one request, as without filters.
        check_merge(
            vec![all.clone()],
            vec![Group::unfiltered(vec![a(1), a(2)], Some(vec![t(1), t(2)]))],
        );
    }

    #[test]
    fn halves_keep_the_indexed_topics() {
        let (x, y) = narrowed(&[1, 2, 3], 1, &[9]).halves().unwrap();
        assert_eq!(
            (x, y),
            (narrowed(&[1], 1, &[9]), narrowed(&[2, 3], 1, &[9]))
        );
        let two_topics = Group {
            topic0: Some(vec![t(1), t(2)]),
            ..narrowed(&[1], 1, &[9])
        };
        let (x, y) = two_topics.halves().unwrap();
        assert_eq!((x, y), (narrowed(&[1], 1, &[9]), narrowed(&[1], 2, &[9])));
        assert_eq!(narrowed(&[1], 1, &[9]).halves(), None);
    }

    fn log_at(block_number: u64, log_index: u64, address: u8, topics: &[u8]) -> Log {
        Log {
            block_number,
            block_hash: B256::ZERO,
            transaction_hash: B256::ZERO,
            transaction_index: 0,
            log_index,
            address: a(address),
            topics: topics.iter().map(|&n| t(n)).collect(),
            data: Default::default(),
            removed: false,
            block_timestamp: None,
        }
    }

    fn log(address: u8, topics: &[u8]) -> Log {
        log_at(0, 0, address, topics)
    }

    #[test]
    fn an_answer_must_match_its_filter() {
        let filter = narrowed(&[1], 1, &[9, 8]).filter(Blocks::Range(BlockRange::single(0)));
        assert!(admits(&filter, &log(1, &[1, 0, 9])));
        assert!(admits(&filter, &log(1, &[1, 5, 8, 7])));
        assert!(
            !admits(&filter, &log(1, &[1, 0, 7])),
            "topic2 not asked for"
        );
        assert!(!admits(&filter, &log(1, &[1, 0])), "too few topics");
        assert!(!admits(&filter, &log(1, &[2, 0, 9])), "another event");
        assert!(!admits(&filter, &log(2, &[1, 0, 9])), "another address");
        let any = Group::unfiltered(vec![a(1)], None).filter(Blocks::Range(BlockRange::single(0)));
        assert!(admits(&any, &log(1, &[])));
    }

    #[test]
    fn a_piece_of_a_refused_range_takes_the_kept_answers_of_the_other_groups() {
        let answered = narrowed(&[1], 1, &[9]);
        let refused = Group::unfiltered(vec![a(2)], None);
        let selection = Selection {
            groups: vec![refused.clone(), answered.clone()],
            pairs: Vec::new(),
        };
        let range = |start, end| BlockRange::new(start, end).unwrap();
        let mut kept = Kept::default();
        kept.keep(
            range(10, 20),
            vec![(
                answered,
                vec![
                    log_at(10, 0, 1, &[]),
                    log_at(15, 3, 1, &[]),
                    log_at(20, 1, 1, &[]),
                ],
            )],
        );
        assert_eq!(kept.n_logs(), 3);
        let blocks = |logs: &Option<Vec<Log>>| {
            logs.as_ref()
                .map(|logs| logs.iter().map(|l| l.block_number).collect::<Vec<_>>())
        };
        let pieces = kept.for_range(&selection, range(10, 15));
        assert_eq!(
            pieces.iter().map(blocks).collect::<Vec<_>>(),
            [None, Some(vec![10, 15])]
        );
        let pieces = kept.for_range(&selection, range(16, 20));
        assert_eq!(
            pieces.iter().map(blocks).collect::<Vec<_>>(),
            [None, Some(vec![20])]
        );
        let beyond = kept.for_range(&selection, range(16, 21));
        assert_eq!(
            beyond,
            [None, None],
            "a range the answer does not cover asks the node"
        );
        kept.forget_below(20);
        assert_eq!(kept.n_logs(), 3);
        kept.forget_below(21);
        assert_eq!(kept.n_logs(), 0);
    }

    #[test]
    fn answers_merge_in_log_order() {
        let at = |block: u64, log_index: u64| log_at(block, log_index, 1, &[]);
        let merged = merge_answers(vec![
            vec![at(1, 0), at(3, 2)],
            vec![at(1, 1), at(2, 0), at(3, 2)],
        ])
        .expect("a log in two answers is one log");
        let keys: Vec<(u64, u64)> = merged
            .iter()
            .map(|l| (l.block_number, l.log_index))
            .collect();
        assert_eq!(keys, [(1, 0), (1, 1), (2, 0), (3, 2)]);
    }
}
