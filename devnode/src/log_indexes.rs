//! The opt-in block whose logs are numbered from a high index instead of 0 (`high_log_indexes=N`,
//! `log_index_base=B`): some chains number logs past 2^31 (`docs/schema.md`: 0xffffffe2 is seen), and an
//! indexer must store such an index exactly. Every log object of the block carries its index, in
//! `eth_getLogs`, in receipts and in the ground truth alike, since all of them take it from here.
//!
//! Only the numbering changes: which logs the block has and what they hold stay as they are, so the chain
//! is otherwise byte for byte the one without the option. Nothing here knows JSON.

use super::chain::Chain;

/// The first log index of that block by default: 0xffffffe2, seen on real chains, 30 below 2^32 (so a block
/// of more than 30 logs crosses 2^32 too).
pub const DEFAULT_LOG_INDEX_BASE: u64 = 0xffff_ffe2;

/// Parses a log index base: decimal, or `0x` and hex digits.
///
/// # Errors
/// A message saying what it accepts.
pub(crate) fn parse_base(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(digits) => u64::from_str_radix(digits, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("{text:?} is not a log index (decimal, or 0x and hex digits)"))
}

impl Chain {
    /// The index of the `position`th log of block `number` (0 for its first): its position, from the base
    /// in the opt-in block. Saturates at `u64::MAX` (a base that close to it is asking for a repeated index).
    pub(crate) fn log_index(&self, number: u64, position: usize) -> u64 {
        let position = u64::try_from(position).expect("a block's logs fit in u64");
        match self.params.high_log_indexes {
            Some((block, base)) if block == number => base.saturating_add(position),
            _ => position,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_are_decimal_or_hex() {
        assert_eq!(parse_base("0xffffffe2"), Ok(DEFAULT_LOG_INDEX_BASE));
        assert_eq!(parse_base("4294967266"), Ok(DEFAULT_LOG_INDEX_BASE));
        assert_eq!(parse_base("0x8000000000000000"), Ok(1 << 63));
        for bad in ["", "0x", "-1", "0xg", "18446744073709551616"] {
            assert!(parse_base(bad).is_err(), "{bad:?}");
        }
    }
}
