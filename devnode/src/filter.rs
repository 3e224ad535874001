//! Log filter matching with geth's semantics: any of the addresses, positional topics with wildcards and
//! OR-lists.
//!
//! As in geth's `filterLogs`, a filter with more topic positions than a log has topics does not match that log,
//! even when the extra positions are wildcards. This module does not parse JSON (see `params`).

use alloy_primitives::{Address, B256};

/// A compiled filter: sorted lists, so a filter with thousands of entries is matched by binary search.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogFilter {
    /// Accepted addresses; empty = any.
    addresses: Vec<Address>,
    /// Per position, accepted topics; empty = wildcard.
    topics: Vec<Vec<B256>>,
}

impl LogFilter {
    /// A filter from its parts.
    pub(crate) fn new(mut addresses: Vec<Address>, mut topics: Vec<Vec<B256>>) -> Self {
        addresses.sort_unstable();
        addresses.dedup();
        for alternatives in &mut topics {
            alternatives.sort_unstable();
            alternatives.dedup();
        }
        Self { addresses, topics }
    }

    /// The filter that matches every log.
    pub(crate) fn any() -> Self {
        Self::default()
    }

    fn address_ok(&self, address: Address) -> bool {
        self.addresses.is_empty() || self.addresses.binary_search(&address).is_ok()
    }

    /// A cheap pre-check on what is known before a log's values are drawn: its address and, unless the event
    /// is anonymous (`topic0 == None`), its first topic. `false` means the log cannot match.
    pub(crate) fn may_match(&self, address: Address, topic0: Option<B256>) -> bool {
        if !self.address_ok(address) {
            return false;
        }
        match (self.topics.first(), topic0) {
            (Some(alternatives), Some(topic0)) => {
                alternatives.is_empty() || alternatives.binary_search(&topic0).is_ok()
            }
            _ => true,
        }
    }

    /// Whether a log with this address and these topics matches.
    pub(crate) fn matches(&self, address: Address, topics: &[B256]) -> bool {
        if !self.address_ok(address) || self.topics.len() > topics.len() {
            return false;
        }
        self.topics.iter().zip(topics).all(|(alternatives, topic)| {
            alternatives.is_empty() || alternatives.binary_search(topic).is_ok()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(byte: u8) -> B256 {
        B256::repeat_byte(byte)
    }
    fn a(byte: u8) -> Address {
        Address::repeat_byte(byte)
    }

    fn check(filter: &LogFilter, address: Address, topics: &[B256], expected: bool) {
        assert_eq!(
            filter.matches(address, topics),
            expected,
            "{filter:?} on {address} {topics:?}"
        );
    }

    #[test]
    fn an_empty_filter_matches_everything() {
        check(&LogFilter::any(), a(1), &[], true);
        check(&LogFilter::any(), a(1), &[t(1), t(2)], true);
    }

    #[test]
    fn addresses_are_alternatives() {
        let filter = LogFilter::new(vec![a(2), a(1)], vec![]);
        check(&filter, a(1), &[], true);
        check(&filter, a(2), &[t(9)], true);
        check(&filter, a(3), &[], false);
    }

    #[test]
    fn topics_are_positional_with_wildcards_and_or_lists() {
        let filter = LogFilter::new(vec![], vec![vec![t(1)], vec![], vec![t(3), t(4)]]);
        check(&filter, a(1), &[t(1), t(9), t(3)], true);
        check(&filter, a(1), &[t(1), t(9), t(4), t(7)], true);
        check(&filter, a(1), &[t(1), t(9), t(5)], false);
        check(&filter, a(1), &[t(2), t(9), t(3)], false);
        // More positions than the log has topics: no match, even though position 1 is a wildcard.
        check(
            &LogFilter::new(vec![], vec![vec![t(1)], vec![]]),
            a(1),
            &[t(1)],
            false,
        );
    }

    #[test]
    fn the_pre_check_never_rejects_a_log_that_matches() {
        let filter = LogFilter::new(vec![a(1)], vec![vec![t(1)]]);
        assert!(filter.may_match(a(1), Some(t(1))));
        assert!(filter.may_match(a(1), None));
        assert!(!filter.may_match(a(1), Some(t(2))));
        assert!(!filter.may_match(a(2), Some(t(1))));
    }
}
