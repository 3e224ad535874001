//! ABI types -> [`ColumnKind`], and decoded alloy values -> [`Value`]s (including their JSON form).
//!
//! Knows the text forms of the typed tables (lowercase `0x` hex, decimal integers); nothing about SQL.

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
                Ok(Value::BigInt(decimal(dyn_value)?))
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

    /// `0x` + lowercase hex, the form `interface.md` stores.
    pub fn to_hex(&self) -> String {
        hex::encode_prefixed(self.as_bytes())
    }
}

impl std::fmt::Debug for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_hex())
    }
}

/// Exact decimal of an integer value, `-` for negatives, after checking its padding.
fn decimal(dyn_value: &DynSolValue) -> Result<String, String> {
    match dyn_value {
        DynSolValue::Uint(uint, bits) => check_uint(*uint, *bits).map(|()| uint.to_string()),
        DynSolValue::Int(int, bits) => check_int(*int, *bits).map(|()| int.to_string()),
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
        DynSolValue::Uint(..) | DynSolValue::Int(..) => Json::String(decimal(dyn_value)?),
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
