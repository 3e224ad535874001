//! A refused range of many addresses, asked again by address halves, then quarters, before it is split by
//! blocks.
//!
//! Where no survey shows where a range's logs are (a factory's children join all the time, so no probe's
//! share holds), a refusal says only "more than the cap somewhere in these blocks". When the excess is one
//! block whose logs are spread over many contracts (a pool factory's pairs all trading in one block), halving
//! the range by blocks finds that block only after about log2(blocks) refusals, each a round trip in a row:
//! 12 refusals for a block of 11,600 pair logs in a range of 4,000 blocks, where the whole range fits in a
//! few requests of part of the addresses each. So a *piece* of a refused range that is refused again is
//! asked for in address halves, and a half refused again in its own halves ([`ROUNDS`]); only if one of
//! those is refused too does the piece go back to the planner to be split by blocks, and its own
//! pieces are not asked by addresses again: the excess is one contract's, and every level of the split would
//! pay the halves again. A first refusal is split by blocks: a range merely a little over the cap costs less
//! that way (its first piece fits, and the rest joins the next range).

use std::sync::Arc;

use alloy_primitives::Address;
use tokio::task::JoinSet;

use crate::planner::{Outcome, Planner};
use crate::primitives::{BlockNumber, BlockRange, Log};

use super::groups::{get_range_logs, merge_answers};
use super::{Access, Error, Group, Selection, Task, ADDRESSES_PER_REQUEST};

/// Rounds of halving a refused group's addresses: halves, then quarters.
const ROUNDS: usize = 2;

/// A group of fewer addresses is not halved. Among a few contracts an excess is most often one contract's
/// (a burst, a block over the cap for one address), found faster by blocks: halving the 5 addresses of
/// `bench`'s presets costs `bursts` and `overcap` more requests (docs/planner.md). A pool factory's pairs
/// trade together.
const MIN_ADDRESSES: usize = 16;

/// Logs of one block that make it an excess of its range: half the spec's cap.
const HEAVY_BLOCK_LOGS: usize = 5_000;

/// `groups` with every group of at least [`MIN_ADDRESSES`] addresses cut in two groups of consecutive
/// addresses (the same topics each); `None` when no group is that large, or when one is asked for in chunks
/// of addresses already (`fetch::wide`): its refused chunk would be asked again as it was.
fn halved(groups: &[Group]) -> Option<Vec<Group>> {
    let sizes = || groups.iter().map(|g| g.addresses.len());
    if sizes().all(|n| n < MIN_ADDRESSES) || sizes().any(|n| n > ADDRESSES_PER_REQUEST) {
        return None;
    }
    let halves = groups
        .iter()
        .flat_map(|group| {
            if group.addresses.len() < MIN_ADDRESSES {
                return vec![group.clone()];
            }
            let (a, b) = group.addresses.split_at(group.addresses.len() / 2);
            [a, b]
                .into_iter()
                .map(|addresses: &[Address]| Group {
                    addresses: addresses.to_vec(),
                    topic0: group.topic0.clone(),
                    indexed: group.indexed.clone(),
                })
                .collect()
        })
        .collect();
    Some(halves)
}

/// The refusals so far, and the ranges whose excess turned out to be one contract's.
#[derive(Debug, Default)]
pub(super) struct Tried {
    refused: Vec<BlockRange>,
    concentrated: Vec<BlockRange>,
}

impl Tried {
    /// The address halves to ask `range` again with, when the node refused it (`outcome`, without a
    /// suggested range) asked `whole`, it is more than a block, no survey covers it, it is a piece of a range
    /// refused before and of none whose excess was one contract's, and a group of `selection` is large
    /// enough to halve ([`halved`]). Records the refusal.
    pub(super) fn due(
        &mut self,
        planner: &Planner,
        range: BlockRange,
        whole: bool,
        outcome: Outcome,
        selection: &Selection,
    ) -> Option<Vec<Group>> {
        let refused = outcome == Outcome::TooManyResults { suggested: None };
        let due = whole
            && refused
            && self.refused_again(range)
            && range.len() > 1
            && !planner.surveyed(range);
        due.then(|| halved(&selection.groups)).flatten()
    }

    /// Records the refusal of `range`; whether it is a piece of a range refused before and of none whose
    /// excess was one contract's.
    fn refused_again(&mut self, range: BlockRange) -> bool {
        let inside = |r: &BlockRange| r.start() <= range.start() && range.end() <= r.end();
        let piece = self.refused.iter().any(|r| inside(r) && *r != range);
        let concentrated = self.concentrated.iter().any(inside);
        self.refused.push(range);
        piece && !concentrated
    }

    /// Records that `range` was refused by addresses too: its excess is one contract's.
    pub(super) fn concentrated(&mut self, range: BlockRange) {
        self.concentrated.push(range);
    }

    /// Forgets the ranges that end below `block` (all their pieces are fetched).
    pub(super) fn forget_below(&mut self, block: BlockNumber) {
        self.refused.retain(|r| r.end() >= block);
        self.concentrated.retain(|r| r.end() >= block);
    }
}

/// What the planner learns from a range its address groups answered with `logs` (in block order): where one
/// block holds more than half the cap, an excess its neighbours do not share ([`Outcome::ReadByFilters`]);
/// otherwise the range was merely long, and its density is worth learning.
pub(super) fn outcome(logs: &[Log]) -> Outcome {
    let n = logs.len() as u64;
    let heaviest = logs
        .chunk_by(|a, b| a.block_number == b.block_number)
        .map(<[Log]>::len)
        .max()
        .unwrap_or(0);
    if heaviest > HEAVY_BLOCK_LOGS {
        Outcome::ReadByFilters { n }
    } else {
        Outcome::Logs { n }
    }
}

/// Asks for `range` again by `halves` (of its selection, from [`Tried::due`]) in the background
/// ([`by_addresses`]).
pub(super) fn spawn(
    in_flight: &mut JoinSet<Task>,
    access: Arc<Access>,
    range: BlockRange,
    halves: Vec<Group>,
) {
    in_flight.spawn(crate::observe::chain::carry(async move {
        let logs = by_addresses(&access, range, halves).await;
        Task::ByAddresses(range, logs)
    }));
}

/// `range`'s logs asked by `halves`, the halves refused again by their own halves ([`ROUNDS`] in all); the
/// refusal of a group still over the cap after the last round (or too small to halve).
async fn by_addresses(
    access: &Access,
    range: BlockRange,
    halves: Vec<Group>,
) -> Result<Vec<Log>, Error> {
    let mut answers = Vec::new();
    let mut asked = Some(halves);
    let mut refusal = None;
    for _ in 0..ROUNDS {
        let Some(groups) = asked.take() else { break };
        let selection = Selection {
            groups,
            pairs: Vec::new(),
        };
        let kept = vec![None; selection.groups.len()];
        let answered = get_range_logs(access, range, &selection, kept).await;
        match answered.logs {
            Ok(logs) => {
                answers.push(logs);
                return merge_answers(answers);
            }
            Err(Error::Split(err)) => {
                let answered_groups = answered.by_group;
                let refused: Vec<Group> = selection
                    .groups
                    .into_iter()
                    .filter(|g| !answered_groups.iter().any(|(a, _)| a == g))
                    .collect();
                answers.extend(answered_groups.into_iter().map(|(_, logs)| logs));
                asked = halved(&refused);
                refusal = Some(err);
            }
            Err(err) => return Err(err),
        }
    }
    Err(Error::Split(
        refusal.expect("the node refused the range before"),
    ))
}

#[cfg(test)]
mod tests {
    use alloy_primitives::{Address, B256};

    use super::*;

    fn addresses(n: u8) -> Vec<Address> {
        (0..n).map(|i| Address::repeat_byte(i + 1)).collect()
    }

    #[test]
    fn large_groups_are_halved_keeping_every_address_and_their_topics() {
        let topic = vec![B256::repeat_byte(9)];
        let groups = vec![
            Group::unfiltered(addresses(17), Some(topic.clone())),
            Group::unfiltered(addresses(3), None),
        ];
        let halves = halved(&groups).expect("one group is large enough");
        let sizes: Vec<usize> = halves.iter().map(|g| g.addresses.len()).collect();
        assert_eq!(sizes, [8, 9, 3]);
        let united: Vec<Address> = halves[..2]
            .iter()
            .flat_map(|g| g.addresses.clone())
            .collect();
        assert_eq!(united, addresses(17));
        assert!(halves[..2]
            .iter()
            .all(|g| g.topic0.as_deref() == Some(&topic[..])));
        assert_eq!(halves[2], groups[1]);
    }

    #[test]
    fn small_groups_and_groups_asked_in_chunks_are_not_halved() {
        assert_eq!(halved(&[Group::unfiltered(addresses(15), None)]), None);
        let many: Vec<Address> = (0..=ADDRESSES_PER_REQUEST as u64)
            .map(|i| Address::left_padding_from(&i.to_be_bytes()))
            .collect();
        let groups = [
            Group::unfiltered(many, None),
            Group::unfiltered(addresses(20), None),
        ];
        assert_eq!(halved(&groups), None);
    }

    #[test]
    fn only_pieces_of_refused_ranges_are_asked_by_addresses_unless_the_excess_is_one_contracts() {
        let range = |a, b| BlockRange::new(a, b).unwrap();
        let mut tried = Tried::default();
        assert!(!tried.refused_again(range(0, 99)), "a first refusal");
        assert!(tried.refused_again(range(0, 49)), "a piece refused again");
        assert!(tried.refused_again(range(0, 24)), "and a piece of that");
        tried.concentrated(range(0, 24));
        assert!(!tried.refused_again(range(0, 12)), "concentrated");
        assert!(!tried.refused_again(range(0, 24)), "the same range again");
        assert!(tried.refused_again(range(25, 49)), "beside it");
        tried.forget_below(100);
        assert!(
            !tried.refused_again(range(10, 20)),
            "forgotten: a first refusal"
        );
    }

    #[test]
    fn heavy_blocks_are_an_excess_and_long_ranges_a_density() {
        let log = |block_number| Log {
            block_number,
            block_hash: B256::ZERO,
            transaction_hash: B256::ZERO,
            transaction_index: 0,
            log_index: 0,
            address: Address::ZERO,
            topics: Default::default(),
            data: Default::default(),
            removed: false,
            block_timestamp: None,
        };
        let spread: Vec<Log> = (0..12_000).map(|i| log(i / 10)).collect();
        assert_eq!(outcome(&spread), Outcome::Logs { n: 12_000 });
        let heavy: Vec<Log> = (0..12_000).map(|i| log(u64::from(i >= 6_000))).collect();
        assert_eq!(outcome(&heavy), Outcome::ReadByFilters { n: 12_000 });
    }
}
