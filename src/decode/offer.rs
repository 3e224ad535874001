//! One log offered to the configured events of one contract, which decides which of them it is: each
//! event's table gets at most this log's one row, and at most one anonymous event's table gets it.
//!
//! The rule, event by event in the contract's configured order ([`super::Claim`]):
//! - a named event takes a log with its topic0 and topic count; a log that then does not decode is
//!   malformed ([`DecodeError::Mismatch`]), not another event's;
//! - a log whose topic0 is the selector of a named event of the contract's ABI (configured or not) is never
//!   an anonymous event's;
//! - an anonymous event takes a log of its exact shape (its topic count; data exactly as long as its
//!   parameters when they are static; data that decodes), unless an anonymous event before it in the
//!   configured order took it already. Configs refuse two anonymous events of one topic count; this order
//!   settles it anyway, so no log is ever stored twice as two events.
//!
//! The raw `logs` table keeps exactly the logs some event took (or, named, claimed and failed to decode):
//! [`Offer::kept`].

use alloy_primitives::B256;

use super::{Claim, DecodeError, EventDecoder, Values};

/// One log offered to a contract's events in their configured order; see the module docs.
#[derive(Debug, Clone)]
pub struct Offer<'l> {
    topics: &'l [B256],
    data: &'l [u8],
    /// topic0 of every named event of the contract's ABI, configured or not, sorted.
    named_selectors: &'l [B256],
    /// An anonymous event took the log: no later one may.
    anonymous_taken: bool,
    /// Some event took the log, or claimed it by topic0 (then the log is kept even when it fails to decode).
    kept: bool,
}

impl<'l> Offer<'l> {
    /// A log with `topics` and `data` of a contract whose ABI's named events have `named_selectors`
    /// (sorted), to be offered to the contract's configured events in their order.
    pub fn new(topics: &'l [B256], data: &'l [u8], named_selectors: &'l [B256]) -> Self {
        Self {
            topics,
            data,
            named_selectors,
            anonymous_taken: false,
            kept: false,
        }
    }

    /// Offers the log to `event`: `Ok(Some(values))` when it takes it, `Ok(None)` when the log is not its.
    ///
    /// # Errors
    /// [`DecodeError::Mismatch`] when `event` is named and the log has its topic0 and topic count but does
    /// not decode (malformed; [`Offer::kept`] then holds). A log that does not fit an anonymous event is
    /// simply not that event's.
    pub fn decode(&mut self, event: &EventDecoder) -> Result<Option<Values>, DecodeError> {
        match event.claim(self.topics, self.named_selectors) {
            Claim::No => Ok(None),
            Claim::Named => {
                self.kept = true;
                event.decode(self.topics, self.data).map(Some)
            }
            Claim::Anonymous if self.anonymous_taken => Ok(None),
            Claim::Anonymous => {
                let values = event.decode(self.topics, self.data).ok();
                if values.is_some() {
                    self.anonymous_taken = true;
                    self.kept = true;
                }
                Ok(values)
            }
        }
    }

    /// [`Offer::decode`] for whether the log is kept raw only: true when `event` takes or claims it. A
    /// named event's values are not built; an anonymous event's are, since only they tell its shape.
    pub fn takes(&mut self, event: &EventDecoder) -> bool {
        match event.claim(self.topics, self.named_selectors) {
            Claim::No => false,
            Claim::Named => {
                self.kept = true;
                true
            }
            Claim::Anonymous => self.decode(event).is_ok_and(|values| values.is_some()),
        }
    }

    /// Whether an event offered the log so far took it, or claimed it by topic0: the raw `logs` table keeps
    /// it.
    pub fn kept(&self) -> bool {
        self.kept
    }
}
