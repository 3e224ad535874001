//! Head following: decides whether newly fetched headers extend what the database holds, where the common
//! ancestor is after a reorg, and which empty answers cannot be trusted. Pure: it decides, it doesn't
//! delete or fetch; on a [`Decision::Reorg`] `pipeline` finds the ancestor, rolls the sink back and does
//! the I/O.

use std::collections::BTreeMap;

use alloy_primitives::{Address, Bloom, BloomInput, B256};

use crate::primitives::BlockNumber;
use crate::rpc::Header;
use crate::sink::TrackedBlock;

/// What to do about a run of headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// They extend the chain the database holds.
    Extend,
    /// The node's chain left ours below the first header: find the common ancestor and roll back.
    Reorg,
    /// The headers do not link to each other (the node changed while we read it): read again later.
    Retry,
}

/// Checks that `headers` (consecutive, ascending) link to each other and to `anchor`, the hash the database
/// holds for the block before the first one (`None` when it holds none: nothing to contradict).
pub fn check_headers(anchor: Option<B256>, headers: &[Header]) -> Decision {
    let Some(first) = headers.first() else {
        return Decision::Extend;
    };
    if anchor.is_some_and(|hash| hash != first.parent_hash) {
        return Decision::Reorg;
    }
    let linked = headers
        .windows(2)
        .all(|pair| pair[1].parent_hash == pair[0].hash && pair[1].number == pair[0].number + 1);
    if linked {
        Decision::Extend
    } else {
        Decision::Retry
    }
}

/// Tracked blocks to compare with the node, newest first: the first whose hash the node agrees with is the
/// common ancestor.
pub fn ancestor_candidates(
    tracked: &BTreeMap<BlockNumber, TrackedBlock>,
) -> impl Iterator<Item = &TrackedBlock> {
    tracked.values().rev()
}

/// Which contracts a block's logs could come from, for the bloom check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interest {
    /// An address.
    pub address: Address,
    /// topic0 values of its events; `None` when an anonymous event means any log of it counts.
    pub topic0: Option<Vec<B256>>,
    /// Values one of which topics 1, 2 and 3 must hold (a filtered event's indexed parameters); `None`: any.
    pub indexed: [Option<Vec<B256>>; 3],
}

/// Blocks that came back with no logs although their `logsBloom` says they may hold a log we asked for: a
/// lagging replica answers empty for blocks it has not seen, so such an answer is refetched, not committed.
/// (A bloom can say "maybe" wrongly; callers accept the empty answer after a few consistent refetches.)
pub fn suspicious_empty_blocks(
    headers: &[Header],
    blocks_with_logs: &[BlockNumber],
    interests: &[Interest],
) -> Vec<BlockNumber> {
    headers
        .iter()
        .filter(|h| blocks_with_logs.binary_search(&h.number).is_err())
        .filter(|h| interests.iter().any(|i| may_contain(&h.logs_bloom, i)))
        .map(|h| h.number)
        .collect()
}

fn may_contain(bloom: &Bloom, interest: &Interest) -> bool {
    if !bloom.contains_input(BloomInput::Raw(interest.address.as_slice())) {
        return false;
    }
    // A bloom holds every topic of every log of the block, by value: a wanted topic it lacks rules the
    // block out. (Without the indexed topics, every block with any log of a filtered event looked
    // suspicious and was read again.)
    let any_of = |topics: &Vec<B256>| {
        topics
            .iter()
            .any(|t| bloom.contains_input(BloomInput::Raw(t.as_slice())))
    };
    std::iter::once(&interest.topic0)
        .chain(&interest.indexed)
        .all(|wanted| wanted.as_ref().is_none_or(any_of))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(number: u64, hash: u8, parent: u8) -> Header {
        Header {
            number,
            hash: B256::repeat_byte(hash),
            parent_hash: B256::repeat_byte(parent),
            timestamp: 0,
            logs_bloom: Bloom::ZERO,
        }
    }

    #[test]
    fn headers_that_link_to_the_anchor_extend_the_chain() {
        let run = [header(10, 2, 1), header(11, 3, 2)];
        assert_eq!(
            check_headers(Some(B256::repeat_byte(1)), &run),
            Decision::Extend
        );
        assert_eq!(check_headers(None, &run), Decision::Extend);
    }

    #[test]
    fn a_first_header_with_another_parent_is_a_reorg() {
        assert_eq!(
            check_headers(Some(B256::repeat_byte(9)), &[header(10, 2, 1)]),
            Decision::Reorg
        );
    }

    #[test]
    fn headers_that_do_not_link_to_each_other_are_read_again() {
        let run = [header(10, 2, 1), header(11, 3, 7)];
        assert_eq!(
            check_headers(Some(B256::repeat_byte(1)), &run),
            Decision::Retry
        );
    }

    #[test]
    fn an_empty_answer_is_suspicious_only_where_the_bloom_says_maybe() {
        let address = Address::repeat_byte(0xaa);
        let topic = B256::repeat_byte(0xbb);
        let mut with = header(5, 1, 0);
        with.logs_bloom.accrue(BloomInput::Raw(address.as_slice()));
        with.logs_bloom.accrue(BloomInput::Raw(topic.as_slice()));
        let without = header(6, 2, 1);
        let interests = [Interest {
            address,
            topic0: Some(vec![topic]),
            indexed: Default::default(),
        }];
        assert_eq!(
            suspicious_empty_blocks(&[with.clone(), without.clone()], &[], &interests),
            vec![5]
        );
        assert_eq!(
            suspicious_empty_blocks(&[with, without], &[5], &interests),
            Vec::<u64>::new()
        );
    }

    /// A filtered event's block is suspicious only when the bloom also holds one of each position's
    /// wanted values: a log of the event with other values is no reason to read the block again.
    #[test]
    fn a_filtered_interest_needs_a_wanted_value_in_the_bloom() {
        let address = Address::repeat_byte(0xaa);
        let (selector, wanted, other) = (
            B256::repeat_byte(0xbb),
            B256::repeat_byte(0x01),
            B256::repeat_byte(0x02),
        );
        let block = |number: u64, topic: B256| {
            let mut h = header(number, 1, 0);
            for input in [address.as_slice(), selector.as_slice(), topic.as_slice()] {
                h.logs_bloom.accrue(BloomInput::Raw(input));
            }
            h
        };
        let interests = [Interest {
            address,
            topic0: Some(vec![selector]),
            indexed: [None, Some(vec![wanted]), None],
        }];
        assert_eq!(
            suspicious_empty_blocks(&[block(5, wanted), block(6, other)], &[], &interests),
            vec![5]
        );
    }
}
