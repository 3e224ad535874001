//! Small domain types shared by every stage: block numbers and inclusive block ranges.
//!
//! `BlockRange::new` enforces `start <= end`, so nothing downstream has to check it again.

use std::fmt;

pub use alloy_primitives::{Address, Bloom, Bytes, B256};

/// A block number.
pub type BlockNumber = u64;

/// An inclusive, non-empty span of blocks `[start, end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockRange {
    start: BlockNumber,
    end: BlockNumber,
}

impl BlockRange {
    /// `[start, end]`, or `None` when `start > end`.
    pub fn new(start: BlockNumber, end: BlockNumber) -> Option<Self> {
        (start <= end).then_some(Self { start, end })
    }

    /// A single block.
    pub fn single(block: BlockNumber) -> Self {
        Self {
            start: block,
            end: block,
        }
    }

    /// First block.
    pub fn start(&self) -> BlockNumber {
        self.start
    }

    /// Last block (inclusive).
    pub fn end(&self) -> BlockNumber {
        self.end
    }

    /// Number of blocks, at least 1.
    pub fn len(&self) -> u64 {
        self.end - self.start + 1
    }

    /// Always false: a range holds at least one block. Present for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Splits after `last_of_first`: `[start, last_of_first]` and `[last_of_first + 1, end]`, or `None` unless
    /// `start <= last_of_first < end`.
    pub fn split_after(&self, last_of_first: BlockNumber) -> Option<(Self, Self)> {
        (self.start <= last_of_first && last_of_first < self.end).then(|| {
            (
                Self {
                    start: self.start,
                    end: last_of_first,
                },
                Self {
                    start: last_of_first + 1,
                    end: self.end,
                },
            )
        })
    }

    /// Halves the range (the first half gets the extra block), or `None` for a single block.
    pub fn halve(&self) -> Option<(Self, Self)> {
        self.split_after(self.start + (self.len() - 1) / 2)
    }

    /// Whether `block` is inside.
    pub fn contains(&self, block: BlockNumber) -> bool {
        self.start <= block && block <= self.end
    }
}

impl fmt::Display for BlockRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {}]", self.start, self.end)
    }
}

/// A log's topics (at most [`Topics::MAX`]), held inline. As a vector they cost one allocation per log,
/// about one in seven of a backfill's (heaptrack, default chain), each freed again with its batch on the
/// writer's time. Reads as a slice.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Topics {
    len: u8,
    words: [B256; Topics::MAX],
}

impl Topics {
    /// An EVM log has 0 to 4 topics (`LOG0` to `LOG4`).
    pub const MAX: usize = 4;

    /// The topics in `words`, or `None` when there are more than [`Self::MAX`].
    pub fn from_slice(words: &[B256]) -> Option<Self> {
        let mut topics = Self::default();
        for &word in words {
            if !topics.push(word) {
                return None;
            }
        }
        Some(topics)
    }

    /// Appends `topic`; `false`, appending nothing, when there are [`Self::MAX`] already.
    pub fn push(&mut self, topic: B256) -> bool {
        let Some(slot) = self.words.get_mut(usize::from(self.len)) else {
            return false;
        };
        *slot = topic;
        self.len += 1;
        true
    }
}

impl std::ops::Deref for Topics {
    type Target = [B256];

    fn deref(&self) -> &[B256] {
        &self.words[..usize::from(self.len)]
    }
}

impl fmt::Debug for Topics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl FromIterator<B256> for Topics {
    /// # Panics
    /// When `iter` yields more than [`Topics::MAX`] topics (as `arrayvec` does past its capacity): a log
    /// read from a node goes through the deserializer, which refuses such a log instead.
    fn from_iter<I: IntoIterator<Item = B256>>(iter: I) -> Self {
        let mut topics = Self::default();
        for topic in iter {
            assert!(topics.push(topic), "a log has at most 4 topics");
        }
        topics
    }
}

impl<const N: usize> From<[B256; N]> for Topics {
    fn from(words: [B256; N]) -> Self {
        const { assert!(N <= Topics::MAX, "a log has at most 4 topics") };
        Self::from_slice(&words).expect("N <= MAX, checked when compiled")
    }
}

/// A log as the indexer uses it: every positional field present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    /// Block number.
    pub block_number: BlockNumber,
    /// Block hash.
    pub block_hash: B256,
    /// Transaction hash.
    pub transaction_hash: B256,
    /// Position of the transaction in the block.
    pub transaction_index: u64,
    /// Position of the log in the block.
    pub log_index: u64,
    /// Emitting contract.
    pub address: Address,
    /// 0 to 4 topics.
    pub topics: Topics,
    /// Non-indexed data.
    pub data: Bytes,
    /// True when the node says the log was removed by a reorganisation.
    pub removed: bool,
    /// Unix seconds of the log's block: the node's `blockTimestamp` when it sends one (real nodes do; the
    /// spec's log object lacks it), otherwise filled from the block's header by `pipeline::enrich`.
    pub block_timestamp: Option<u64>,
}

impl Log {
    /// The log's identity in the database.
    pub fn key(&self) -> LogKey {
        LogKey {
            block_number: self.block_number,
            block_hash: self.block_hash,
            log_index: self.log_index,
        }
    }
}

#[cfg(test)]
impl Log {
    /// A log of block `block_number` at `log_index` with every other field zero or empty, for unit tests
    /// that set only what they look at.
    pub(crate) fn blank(block_number: BlockNumber, log_index: u64) -> Self {
        Self {
            block_number,
            block_hash: B256::ZERO,
            transaction_hash: B256::ZERO,
            transaction_index: 0,
            log_index,
            address: Address::ZERO,
            topics: Topics::default(),
            data: Bytes::new(),
            removed: false,
            block_timestamp: None,
        }
    }
}

/// What identifies a log the node reports: its block hash and position. The block number goes with them
/// because a hash names exactly one block; the database holds only canonical logs, so its tables are keyed
/// by `(block_number, log_index)` alone, and a removal gives the hash too, so that it deletes only the log
/// of the block that was orphaned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogKey {
    /// Block number.
    pub block_number: BlockNumber,
    /// Block hash.
    pub block_hash: B256,
    /// Position of the log in the block.
    pub log_index: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_hold_at_most_four_and_read_as_a_slice() {
        let words: Vec<B256> = (1..=5).map(B256::repeat_byte).collect();
        assert_eq!(Topics::from_slice(&words), None);
        let mut topics = Topics::from_slice(&words[..4]).expect("four fit");
        assert_eq!(&*topics, &words[..4]);
        assert!(!topics.push(words[4]), "a fifth is refused");
        assert_eq!(topics.len(), 4);
        assert_eq!(topics.first(), Some(&words[0]));
        assert!(Topics::default().is_empty());
        assert_eq!(
            Topics::from([words[1]]),
            Topics::from_slice(&words[1..2]).unwrap()
        );
        assert_eq!(
            format!("{:?}", Topics::from([words[0]])),
            format!("{:?}", &words[..1])
        );
    }

    #[test]
    fn a_range_cannot_be_inverted() {
        assert!(BlockRange::new(5, 4).is_none());
        assert_eq!(BlockRange::new(4, 4).map(|r| r.len()), Some(1));
    }

    #[test]
    fn halving_covers_the_range_without_overlap() {
        for (start, end) in [(0, 1), (10, 20), (7, 8), (3, 1000)] {
            let range = BlockRange::new(start, end).unwrap();
            let (a, b) = range.halve().unwrap();
            assert_eq!((a.start(), a.end() + 1, b.end()), (start, b.start(), end));
        }
        assert!(BlockRange::single(9).halve().is_none());
    }
}
