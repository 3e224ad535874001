//! ABI types -> [`ColumnKind`], and decoded alloy values -> [`Value`]s (including their JSON form).
//!
//! Knows the text forms of the typed tables (lowercase `0x` hex, decimal integers); nothing about SQL.

use std::io::Write as _;

use alloy_dyn_abi::{DynSolType, DynSolValue};
use alloy_primitives::{hex, I256, U256};

use super::{ColumnKind, Value};

/// How a parameter of type `ty` is stored; `indexed` reference types are stored as their topic hash.
pub(super) fn column_kind(ty: &DynSolType, indexed: bool) -> ColumnKind {
    match ty {
        DynSolType::Uint(bits) if *bits <= 56 => ColumnKind::Int64,
        DynSolType::Int(bits) if *bits <= 64 => ColumnKind::Int64,
        DynSolType::Uint(_) | DynSolType::Int(_) => ColumnKind::BigInt,
        DynSolType::Address => ColumnKind::Address,
        DynSolType::FixedBytes(_) | DynSolType::Function => ColumnKind::FixedBytes,
        DynSolType::Bool => ColumnKind::Bool,
        // spec (Solidity ABI): an indexed reference type is stored as the keccak256 of its encoding.
        _ if indexed => ColumnKind::TopicHash,
        DynSolType::Bytes => ColumnKind::Bytes,
        DynSolType::String => ColumnKind::Text,
        // Arrays, fixed arrays, tuples (and eip712 structs, should that feature ever be on).
        _ => ColumnKind::Json,
    }
}

/// Converts a decoded value into the [`Value`] of a column of `kind`.
///
/// # Errors
/// A reason when the value does not fit (an integer with dirty high bits, a value of another type).
pub(super) fn to_value(kind: ColumnKind, dyn_value: &DynSolValue) -> Result<Value, String> {
    let wrong_type = || format!("decoded {dyn_value:?} does not fit a {kind:?} column");
    match kind {
        ColumnKind::Int64 => {
            let small = match dyn_value {
                DynSolValue::Uint(uint, bits) => {
                    check_uint(*uint, *bits)?;
                    i64::try_from(*uint).ok()
                }
                DynSolValue::Int(int, bits) => {
                    check_int(*int, *bits)?;
                    i64::try_from(*int).ok()
                }
                _ => None,
            };
            small.map(Value::Int).ok_or_else(wrong_type)
        }
        ColumnKind::BigInt => match dyn_value {
            DynSolValue::Uint(_, _) | DynSolValue::Int(_, _) => {
                Ok(Value::BigInt(integer(dyn_value)?))
            }
            _ => Err(wrong_type()),
        },
        ColumnKind::Address | ColumnKind::FixedBytes | ColumnKind::TopicHash => {
            word(dyn_value).map(Value::Hex).ok_or_else(wrong_type)
        }
        ColumnKind::Bool => dyn_value.as_bool().map(Value::Bool).ok_or_else(wrong_type),
        ColumnKind::Bytes => match dyn_value {
            DynSolValue::Bytes(bytes) => Ok(Value::Bytes(bytes.clone())),
            _ => Err(wrong_type()),
        },
        ColumnKind::Text => dyn_value
            .as_str()
            .map(|text| Value::Text(text.to_owned()))
            .ok_or_else(wrong_type),
        ColumnKind::Json => Ok(Value::Json(json(dyn_value)?.to_string())),
    }
}

/// The bytes of an address, fixed bytes or function value.
fn word(dyn_value: &DynSolValue) -> Option<Word> {
    match dyn_value {
        DynSolValue::Address(address) => Word::new(address.as_slice()),
        DynSolValue::FixedBytes(word, size) => word.get(..*size).and_then(Word::new),
        DynSolValue::Function(function) => Word::new(function.as_slice()),
        _ => None,
    }
}

/// Up to 32 bytes held in place: an address, a `bytesN`, a `function` or a topic.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Word {
    bytes: [u8; 32],
    len: u8,
}

impl Word {
    /// `bytes` as a word, or `None` when longer than 32 bytes.
    pub fn new(bytes: &[u8]) -> Option<Self> {
        let mut word = Self {
            bytes: [0; 32],
            len: u8::try_from(bytes.len()).ok().filter(|&n| n <= 32)?,
        };
        word.bytes[..bytes.len()].copy_from_slice(bytes);
        Some(word)
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// `0x` + lowercase hex, the form `docs/schema.md` stores.
    pub fn to_hex(&self) -> String {
        hex::encode_prefixed(self.as_bytes())
    }
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// An integer of up to 256 bits, signed or not, held in place: what [`Value::BigInt`] carries, written in
/// decimal by the sinks straight into their buffers. As a decimal `String` it was an allocation per value,
/// about a fifth of a backfill's (heaptrack, default chain: 1.16 M of 4.95 M).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Integer {
    /// The absolute value, big-endian.
    magnitude: [u8; 32],
    negative: bool,
}

/// The longest decimal an [`Integer`] has: a sign and 77 digits (`int256`'s minimum), or 78 digits.
pub const MAX_DECIMAL_LEN: usize = 79;

impl Integer {
    /// An unsigned value.
    pub fn unsigned(value: U256) -> Self {
        Self {
            magnitude: value.to_be_bytes(),
            negative: false,
        }
    }

    /// A signed value.
    pub fn signed(value: I256) -> Self {
        let (sign, abs) = value.into_sign_and_abs();
        Self {
            magnitude: abs.to_be_bytes(),
            negative: sign.is_negative(),
        }
    }

    /// The length of [`Self::decimal`], without writing it (the SQLite encoder sizes its buffer exactly).
    pub fn decimal_len(&self) -> usize {
        let magnitude = U256::from_be_bytes(self.magnitude);
        if magnitude.is_zero() {
            return 1;
        }
        // floor(log10) is `t` or `t - 1` for `t` = floor(bits * log10(2)); one comparison says which.
        let t = (magnitude.bit_len() * 1233) >> 12;
        let floor_log10 = if magnitude >= powers_of_ten()[t] {
            t
        } else {
            t - 1
        };
        floor_log10 + 1 + usize::from(self.negative)
    }

    /// The decimal (a `-` before a negative), written into `out`.
    pub fn decimal<'o>(&self, out: &'o mut [u8; MAX_DECIMAL_LEN]) -> &'o str {
        let mut rest = &mut out[..];
        write!(rest, "{self}").expect("MAX_DECIMAL_LEN holds every 256-bit integer");
        let len = MAX_DECIMAL_LEN - rest.len();
        std::str::from_utf8(&out[..len]).expect("a sign and digits are ASCII")
    }
}

/// 10^0 to 10^77, the largest power of ten under 2^256.
fn powers_of_ten() -> &'static [U256; 78] {
    static POWERS: std::sync::OnceLock<[U256; 78]> = std::sync::OnceLock::new();
    POWERS.get_or_init(|| {
        let mut powers = [U256::from(1u8); 78];
        for i in 1..powers.len() {
            powers[i] = powers[i - 1] * U256::from(10u8);
        }
        powers
    })
}

impl From<i64> for Integer {
    fn from(value: i64) -> Self {
        Self {
            magnitude: U256::from(value.unsigned_abs()).to_be_bytes(),
            negative: value < 0,
        }
    }
}

impl std::fmt::Display for Integer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.negative {
            f.write_str("-")?;
        }
        std::fmt::Display::fmt(&U256::from_be_bytes(self.magnitude), f)
    }
}

impl std::fmt::Debug for Integer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for Integer {
    type Err = String;

    /// Decimal digits with an optional `-` (as [`Integer`]'s `Display` writes them).
    fn from_str(text: &str) -> Result<Self, String> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(digits) => (true, digits),
            None => (false, text),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("{text:?} is not a decimal integer"));
        }
        let magnitude = U256::from_str_radix(digits, 10).map_err(|e| format!("{text:?}: {e}"))?;
        Ok(Self {
            magnitude: magnitude.to_be_bytes(),
            negative: negative && !magnitude.is_zero(),
        })
    }
}

/// Exact value of an integer, after checking its padding.
fn integer(dyn_value: &DynSolValue) -> Result<Integer, String> {
    match dyn_value {
        DynSolValue::Uint(uint, bits) => {
            check_uint(*uint, *bits).map(|()| Integer::unsigned(*uint))
        }
        DynSolValue::Int(int, bits) => check_int(*int, *bits).map(|()| Integer::signed(*int)),
        other => Err(format!("{other:?} is not an integer")),
    }
}

/// A `uintN` word must have its high `256 - N` bits clear.
pub(super) fn check_uint(uint: U256, bits: usize) -> Result<(), String> {
    if uint.bit_len() <= bits {
        Ok(())
    } else {
        Err(format!("{uint} does not fit in uint{bits}"))
    }
}

/// An `intN` word must be the sign extension of its low `N` bits.
pub(super) fn check_int(int: I256, bits: usize) -> Result<(), String> {
    if bits >= 256 {
        return Ok(());
    }
    // |min| = 2^(N-1); max = 2^(N-1) - 1.
    let half = U256::from(1u8) << (bits - 1);
    let (sign, abs) = int.into_sign_and_abs();
    let fits = if sign.is_negative() {
        abs <= half
    } else {
        abs < half
    };
    if fits {
        Ok(())
    } else {
        Err(format!("{int} does not fit in int{bits}"))
    }
}

/// The JSON form of a value (see the module docs of [`super`]).
fn json(dyn_value: &DynSolValue) -> Result<serde_json::Value, String> {
    use serde_json::Value as Json;
    Ok(match dyn_value {
        DynSolValue::Bool(b) => Json::Bool(*b),
        DynSolValue::Uint(..) | DynSolValue::Int(..) => {
            Json::String(integer(dyn_value)?.to_string())
        }
        DynSolValue::Bytes(bytes) => Json::String(hex::encode_prefixed(bytes)),
        DynSolValue::String(text) => Json::String(text.clone()),
        DynSolValue::Address(_) | DynSolValue::FixedBytes(..) | DynSolValue::Function(_) => {
            Json::String(
                word(dyn_value)
                    .map(|w| w.to_hex())
                    .ok_or_else(|| format!("bad word {dyn_value:?}"))?,
            )
        }
        _ => {
            let items = dyn_value
                .as_fixed_seq()
                .or_else(|| dyn_value.as_array())
                .ok_or_else(|| format!("no JSON form for {dyn_value:?}"))?;
            Json::Array(items.iter().map(json).collect::<Result<_, _>>()?)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_written_in_decimal_at_their_extremes() {
        let cases = [
            (Integer::unsigned(U256::MAX), U256::MAX.to_string()),
            (Integer::unsigned(U256::ZERO), "0".to_owned()),
            (Integer::signed(I256::MIN), I256::MIN.to_string()),
            (Integer::signed(I256::MAX), I256::MAX.to_string()),
            (Integer::signed(I256::MINUS_ONE), "-1".to_owned()),
            (Integer::from(i64::MIN), i64::MIN.to_string()),
            (Integer::from(0), "0".to_owned()),
        ];
        for (integer, text) in cases {
            assert_eq!(integer.decimal_len(), text.len(), "{text}");
            assert_eq!(integer.to_string(), text);
            assert_eq!(integer.decimal(&mut [0; MAX_DECIMAL_LEN]), text);
            assert_eq!(text.parse::<Integer>(), Ok(integer), "{text}");
        }
        assert_eq!(Integer::signed(I256::MIN).to_string().len(), 78);
        // Every length, at its edges: 10^k - 1, 10^k, 2^k - 1 and 2^k, either sign.
        let ten = U256::from(10u8);
        let mut edges = Vec::new();
        for k in 0..78 {
            let power = ten.pow(U256::from(k));
            edges.extend([power - U256::from(1u8), power]);
        }
        for k in 0..256 {
            let power = U256::from(1u8) << k;
            edges.extend([power - U256::from(1u8), power]);
        }
        edges.push(U256::MAX);
        for magnitude in edges {
            let unsigned = Integer::unsigned(magnitude);
            assert_eq!(
                unsigned.decimal_len(),
                magnitude.to_string().len(),
                "{magnitude}"
            );
            if let Ok(signed) = I256::try_from(magnitude) {
                let negative = Integer::signed(-signed);
                assert_eq!(
                    negative.decimal_len(),
                    negative.to_string().len(),
                    "-{magnitude}"
                );
            }
        }
        assert_eq!("-0".parse::<Integer>(), Ok(Integer::from(0)));
        for bad in ["", "-", "1.5", "0x10", "+1", &format!("{}0", U256::MAX)] {
            assert!(bad.parse::<Integer>().is_err(), "{bad}");
        }
    }
}
