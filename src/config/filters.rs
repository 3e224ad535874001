//! `filters` of a `[[contracts]]` entry: `filters = { Event = { param = [values] } }` -> the topics the node
//! is asked for, one [`EventFilter`] per filtered event.
//!
//! Values are typed by the event's ABI and encoded as the topic an indexed parameter becomes: an address,
//! `uintN`, `intN` (negative ones in two's complement), `bool` and `bytesN` (left-aligned) as their 32-byte
//! word, an indexed `string` or `bytes` as the keccak-256 of its contents. Every value is checked here
//! (type, range, length), so a bad one is exit 78 naming `contracts[i].filters.Event.param[j]`.
//!
//! This module decides nothing about requests: grouping filters into `eth_getLogs` calls is `fetch::groups`'
//! job, and nothing here filters a log (the node does).

use std::collections::BTreeMap;

use alloy_dyn_abi::{DynSolType, Specifier};
use alloy_json_abi::Event;
use alloy_primitives::{keccak256, B256, U256};
use toml::{Spanned, Value};

use super::check::{field, Checker};
use super::contracts::parse_address;
use super::raw::{ArrayOr, Leaf, RawEventFilter, RawFilters, TableOr};
use super::{ContractConfig, EventConfig};

/// How a contract narrows one of its events: only logs whose indexed parameters hold one of the given
/// values (OR within a position, AND across positions).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFilter {
    /// The event's signature, e.g. `Transfer(address,address,uint256)`.
    pub signature: String,
    /// The event's topic0.
    pub selector: B256,
    /// Alternatives for topics 1, 2 and 3 (the indexed parameters in ABI order), sorted and deduplicated;
    /// `None` where any value matches.
    pub topics: [Option<Vec<B256>>; 3],
}

impl EventFilter {
    /// Whether a log's topics are of this event and hold the wanted values: a safety check on the node's
    /// answer, never a reason to drop a log.
    pub fn matches(&self, topics: &[B256]) -> bool {
        topics.first() == Some(&self.selector)
            && self
                .topics
                .iter()
                .enumerate()
                .all(|(position, wanted)| match wanted {
                    None => true,
                    Some(values) => topics
                        .get(position + 1)
                        .is_some_and(|topic| values.binary_search(topic).is_ok()),
                })
    }
}

/// The canonical text of a contract's filters, which the database records to refuse a change: `None` when
/// the contract is unfiltered. Written values that encode to the same topics (`1` and `"0x01"`) give the
/// same text.
pub fn record(filters: &[EventFilter]) -> Option<String> {
    if filters.is_empty() {
        return None;
    }
    let by_event: BTreeMap<&str, &[Option<Vec<B256>>; 3]> = filters
        .iter()
        .map(|filter| (filter.signature.as_str(), &filter.topics))
        .collect();
    Some(serde_json::to_string(&by_event).expect("topics serialize"))
}

/// `filters` of one contract whose `events` resolved; `None` when any part is bad (every problem reported).
pub(super) fn filters(
    checker: &mut Checker<'_>,
    section: &str,
    raw: Option<&Spanned<TableOr<RawFilters>>>,
    events: &[EventConfig],
) -> Option<Vec<EventFilter>> {
    if raw.is_none() {
        return Some(Vec::new());
    }
    let filters_field = field(section, "filters");
    let names: Vec<&str> = events.iter().map(|e| e.event.name.as_str()).collect();
    let (by_event, at) = checker.table(
        raw,
        &filters_field,
        "write filters = { Transfer = { to = [\"0x...\"] } }",
    )?;
    if by_event.is_empty() {
        checker.error(
            Some(&at),
            &filters_field,
            "is empty",
            format!("remove it, or filter one of: {}", names.join(", ")),
        );
        return None;
    }
    if let Some(anonymous) = events.iter().find(|e| e.event.anonymous) {
        // The node can only be asked for logs that match: "every log of the address but the filtered
        // event's other logs", which an anonymous event needs, is not a request it takes.
        checker.error(
            Some(&at),
            &filters_field,
            format!(
                "cannot be combined with the anonymous event {}, which takes any log of its topic count",
                anonymous.event.name
            ),
            "leave the anonymous event out with events = [...], or remove filters",
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for (event_name, params) in by_event {
        let event_field = format!("{filters_field}.{event_name}");
        let overloads: Vec<&Event> = events
            .iter()
            .map(|e| &e.event)
            .filter(|event| event.name == *event_name)
            .collect();
        if overloads.is_empty() {
            checker.error(
                Some(&params.span()),
                &event_field,
                format!("\"{event_name}\" is not an event this contract indexes"),
                format!("filter one of: {}", names.join(", ")),
            );
            ok = false;
            continue;
        }
        let fix = format!("write {event_name} = {{ parameter = [values] }}");
        let Some((params, params_at)) = checker.table(Some(params), &event_field, &fix) else {
            ok = false;
            continue;
        };
        if params.is_empty() {
            checker.error(
                Some(&params_at),
                &event_field,
                "names no parameter",
                format!(
                    "filter by an indexed parameter ({}), or remove it",
                    indexed_names(overloads[0])
                ),
            );
            ok = false;
            continue;
        }
        for event in overloads {
            match event_filter(checker, &event_field, event, params) {
                Some(filter) => out.push(filter),
                None => ok = false,
            }
        }
    }
    ok.then_some(out)
}

/// Refuses a filtered contract that shares an address with another entry: the node's answer for an
/// address serves every entry that has it, so the other entry's logs would reach the filtered event's table.
/// `sections[i]` is the field name of `contracts[i]`.
pub(super) fn check_shared_addresses(
    checker: &mut Checker<'_>,
    contracts: &[ContractConfig],
    sections: &[(String, Option<super::check::Span>)],
) {
    for (contract_idx, contract) in contracts.iter().enumerate() {
        if contract.filters.is_empty() {
            continue;
        }
        for (other_idx, other) in contracts.iter().enumerate() {
            let shared = other
                .addresses
                .iter()
                .find(|a| contract.addresses.contains(a));
            if let (true, Some(shared)) = (other_idx != contract_idx, shared) {
                checker.error(
                    sections[contract_idx].1.as_ref(),
                    &field(&sections[contract_idx].0, "filters"),
                    format!(
                        "address {shared:#x} is also indexed by {}, so the node's logs for it would reach this contract's filtered tables unfiltered",
                        sections[other_idx].0
                    ),
                    "index the address in one [[contracts]] entry",
                );
                break;
            }
        }
    }
}

/// The indexed parameters of `event`, by name, for messages.
fn indexed_names(event: &Event) -> String {
    let names: Vec<&str> = event
        .inputs
        .iter()
        .filter(|p| p.indexed)
        .map(|p| p.name.as_str())
        .collect();
    if names.is_empty() {
        "it has none".to_owned()
    } else {
        names.join(", ")
    }
}

/// One event's filter; `None` when a parameter or value is bad (reported).
fn event_filter(
    checker: &mut Checker<'_>,
    event_field: &str,
    event: &Event,
    params: &RawEventFilter,
) -> Option<EventFilter> {
    let mut topics: [Option<Vec<B256>>; 3] = Default::default();
    let mut ok = true;
    for (param_name, values) in params {
        let param_field = format!("{event_field}.{param_name}");
        let at = Some(values.span());
        let at = at.as_ref();
        let Some(param_idx) = event.inputs.iter().position(|p| p.name == *param_name) else {
            checker.error(
                at,
                &param_field,
                format!("{} has no parameter \"{param_name}\"", event.signature()),
                format!("filter by an indexed parameter ({})", indexed_names(event)),
            );
            ok = false;
            continue;
        };
        let param = &event.inputs[param_idx];
        if !param.indexed {
            checker.error(
                at,
                &param_field,
                format!(
                    "\"{param_name}\" of {} is not indexed, so the node cannot filter by it",
                    event.signature()
                ),
                format!(
                    "filter by an indexed parameter ({}), or remove it",
                    indexed_names(event)
                ),
            );
            ok = false;
            continue;
        }
        let position = event.inputs[..param_idx]
            .iter()
            .filter(|p| p.indexed)
            .count();
        let ty = match param.resolve() {
            Ok(ty) => ty,
            Err(err) => {
                checker.error(at, &param_field, err.to_string(), "fix the event's ABI");
                ok = false;
                continue;
            }
        };
        let list = match values.get_ref() {
            ArrayOr::Array(list) => list,
            ArrayOr::Other(kind) => {
                checker.error(
                    at,
                    &param_field,
                    format!("is a {kind}, not a list"),
                    format!(
                        "write {param_name} = [value, ...] (a log matches when it holds any of them)"
                    ),
                );
                ok = false;
                continue;
            }
        };
        if list.is_empty() {
            checker.error(
                at,
                &param_field,
                "is empty, so no log would match",
                "give at least one value, or remove it",
            );
            ok = false;
            continue;
        }
        match alternatives(checker, &param_field, &ty, list) {
            Some(alternatives) => topics[position] = Some(alternatives),
            None => ok = false,
        }
    }
    ok.then(|| EventFilter {
        signature: event.signature(),
        selector: event.selector(),
        topics,
    })
}

/// The topics a parameter's written values become, sorted and deduplicated; `None` when any is bad (each
/// reported).
fn alternatives(
    checker: &mut Checker<'_>,
    param_field: &str,
    ty: &DynSolType,
    list: &[Leaf],
) -> Option<Vec<B256>> {
    let mut ok = true;
    let mut alternatives = Vec::with_capacity(list.len());
    for (value_idx, value) in list.iter().enumerate() {
        let value_field = format!("{param_field}[{value_idx}]");
        let text;
        let value_at = value.span();
        let written = match value.get_ref() {
            Value::String(raw) => match checker.interpolate(&value_at, &value_field, raw) {
                Some(interpolated) => {
                    text = interpolated;
                    Written::Text(&text)
                }
                None => {
                    ok = false;
                    continue;
                }
            },
            Value::Integer(n) => Written::Integer(*n),
            Value::Boolean(b) => Written::Bool(*b),
            other => Written::Other(other.type_str()),
        };
        match topic(ty, written) {
            Ok(topic) => alternatives.push(topic),
            Err(Bad { problem, fix }) => {
                checker.error(Some(&value_at), &value_field, problem, fix);
                ok = false;
            }
        }
    }
    alternatives.sort();
    alternatives.dedup();
    ok.then_some(alternatives)
}

/// A value as the TOML file gives it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Written<'a> {
    /// A string (interpolated).
    Text(&'a str),
    /// An integer.
    Integer(i64),
    /// A boolean.
    Bool(bool),
    /// Anything else, by its TOML type name.
    Other(&'static str),
}

impl std::fmt::Display for Written<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Written::Text(text) => write!(f, "\"{text}\""),
            Written::Integer(n) => write!(f, "{n}"),
            Written::Bool(b) => write!(f, "{b}"),
            Written::Other(kind) => write!(f, "a {kind}"),
        }
    }
}

/// Why a value is not one of its parameter's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bad {
    problem: String,
    fix: String,
}

fn bad(problem: impl Into<String>, fix: impl Into<String>) -> Bad {
    Bad {
        problem: problem.into(),
        fix: fix.into(),
    }
}

/// The topic an indexed parameter of type `ty` holding `value` becomes.
pub(super) fn topic(ty: &DynSolType, value: Written<'_>) -> Result<B256, Bad> {
    match (ty, value) {
        (DynSolType::Address, Written::Text(text)) => parse_address(text)
            .map(|address| address.into_word())
            .map_err(|(problem, fix)| bad(problem, fix)),
        (DynSolType::Uint(bits), value) => uint(*bits, value).map(B256::from),
        (DynSolType::Int(bits), value) => int(*bits, value),
        (DynSolType::Bool, Written::Bool(b)) => Ok(B256::from(U256::from(u8::from(b)))),
        (DynSolType::FixedBytes(size), Written::Text(text)) => match hex_bytes(text) {
            Some(bytes) if bytes.len() == *size => Ok(B256::right_padding_from(&bytes)),
            _ => Err(bad(
                format!("{value} is not a bytes{size} value"),
                format!("write 0x and {} hex digits", size * 2),
            )),
        },
        (DynSolType::String, Written::Text(text)) => Ok(keccak256(text.as_bytes())),
        (DynSolType::Bytes, Written::Text(text)) => match hex_bytes(text) {
            Some(bytes) => Ok(keccak256(bytes)),
            None => Err(bad(
                format!("{value} is not hex bytes"),
                "write 0x and an even number of hex digits",
            )),
        },
        (DynSolType::Address, _) => Err(bad(
            format!("{value} is not an address"),
            "write it in double quotes: \"0x\" and 40 hex digits",
        )),
        (DynSolType::Bool, _) => Err(bad(
            format!("{value} is not a bool"),
            "write true or false without quotes",
        )),
        (DynSolType::FixedBytes(size), _) => Err(bad(
            format!("{value} is not a bytes{size} value"),
            format!(
                "write it in double quotes: \"0x\" and {} hex digits",
                size * 2
            ),
        )),
        (DynSolType::String | DynSolType::Bytes, _) => Err(bad(
            format!("{value} is not a {ty}"),
            "write it in double quotes",
        )),
        (other, _) => Err(bad(
            format!(
                "a {other} parameter cannot be filtered (its topic is the hash of its encoding)"
            ),
            "filter by an address, number, bool, bytesN, string or bytes parameter",
        )),
    }
}

/// A `uintN` value: a TOML integer, or a decimal or `0x` hex string (for values above 2^63).
fn uint(bits: usize, value: Written<'_>) -> Result<U256, Bad> {
    let max = max_uint(bits);
    let fix = || {
        format!(
            "write a whole number from 0 to {max} (in quotes, as decimal or 0x hex, above 2^63)"
        )
    };
    let parsed = match value {
        Written::Integer(n) => u64::try_from(n).ok().map(U256::from),
        Written::Text(text) => parse_u256(text),
        _ => None,
    };
    match parsed {
        Some(n) if n <= max => Ok(n),
        Some(_) => Err(bad(format!("{value} does not fit in uint{bits}"), fix())),
        None => Err(bad(format!("{value} is not a uint{bits}"), fix())),
    }
}

/// An `intN` value: a TOML integer, or a decimal (optionally negative) or `0x` hex string, as the 32-byte
/// two's complement word the ABI encodes it as.
fn int(bits: usize, value: Written<'_>) -> Result<B256, Bad> {
    // |min| = 2^(bits-1); max = 2^(bits-1) - 1.
    let min_magnitude = U256::from(1u8) << (bits - 1);
    let max = min_magnitude - U256::from(1u8);
    let fix =
        || format!("write a whole number from -{min_magnitude} to {max} (in quotes above 2^63)");
    let parsed: Option<(bool, U256)> = match value {
        Written::Integer(n) => Some((n < 0, U256::from(n.unsigned_abs()))),
        Written::Text(text) => match text.strip_prefix('-') {
            Some(rest) => parse_u256(rest).map(|m| (true, m)),
            None => parse_u256(text).map(|m| (false, m)),
        },
        _ => None,
    };
    match parsed {
        Some((false, magnitude)) if magnitude <= max => Ok(B256::from(magnitude)),
        Some((true, magnitude)) if magnitude <= min_magnitude => {
            Ok(B256::from(magnitude.wrapping_neg()))
        }
        Some(_) => Err(bad(format!("{value} does not fit in int{bits}"), fix())),
        None => Err(bad(format!("{value} is not an int{bits}"), fix())),
    }
}

/// The largest `uintN`.
fn max_uint(bits: usize) -> U256 {
    if bits >= 256 {
        U256::MAX
    } else {
        (U256::from(1u8) << bits) - U256::from(1u8)
    }
}

/// Decimal digits, or `0x` and hex digits; `None` for anything else (signs, spaces, `_`, overflow).
fn parse_u256(text: &str) -> Option<U256> {
    let (digits, radix) = match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => (hex, 16),
        None => (text, 10),
    };
    let valid = !digits.is_empty() && digits.chars().all(|c| c.is_digit(radix));
    valid
        .then(|| U256::from_str_radix(digits, radix as u64).ok())
        .flatten()
}

/// `0x` and an even number of hex digits.
fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))?;
    alloy_primitives::hex::decode(digits).ok()
}

#[cfg(test)]
#[path = "filters_tests.rs"]
mod tests;
