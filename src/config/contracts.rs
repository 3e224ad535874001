//! `[[contracts]]`: names, addresses (EIP-55 checked), factories and filters, and the checks across
//! entries (unique names and tables, factories resolved, filtered addresses not shared). Events are
//! `config::events`'.

use std::collections::HashMap;
use std::path::Path;

use alloy_primitives::Address;
use toml::{Spanned, Value};

use super::check::{field, Checker, Span};
use super::events::events;
use super::factory::{self, WrittenFactory};
use super::filters;
use super::raw::{ArrayOr, Leaf, RawContract, TableOr};
use super::ContractConfig;
use crate::decode;

const FIX: &str = "add a [[contracts]] section with name, address, and abi or events";

/// Every `[[contracts]]` entry; `base_dir` is the config file's directory (ABI paths are relative to it).
pub(super) fn contracts(
    checker: &mut Checker<'_>,
    raw: Option<&Spanned<ArrayOr<Spanned<TableOr<RawContract>>>>>,
    base_dir: &Path,
    default_start_block: u64,
) -> Vec<ContractConfig> {
    let Some(raw) = raw else {
        checker.error(None, "contracts", "no contracts are configured", FIX);
        return Vec::new();
    };
    let entries = match raw.get_ref() {
        ArrayOr::Array(entries) if !entries.is_empty() => entries,
        ArrayOr::Array(_) => {
            checker.error(Some(&raw.span()), "contracts", "is empty", FIX);
            return Vec::new();
        }
        ArrayOr::Other(kind) => {
            checker.error(
                Some(&raw.span()),
                "contracts",
                format!("is a {kind}, not an array of tables"),
                FIX,
            );
            return Vec::new();
        }
    };
    let mut contracts: Vec<ContractConfig> = Vec::new();
    // The field name of each of `contracts` and the span of its `filters`, for checks across entries.
    let mut sections: Vec<(String, Option<Span>)> = Vec::new();
    // Table name -> the contract section that owns it, to catch `token_a` + `Transfer` vs `token` + `ATransfer`.
    let mut table_owners: HashMap<String, String> = HashMap::new();
    // Snake-cased name -> the contract section that has it.
    let mut names: HashMap<String, String> = HashMap::new();
    // (index in `contracts`, its factory as written): resolved once every entry is read.
    let mut factories: Vec<(usize, WrittenFactory)> = Vec::new();
    for (contract_idx, entry) in entries.iter().enumerate() {
        let section = format!("contracts[{contract_idx}]");
        let Some((table, at)) = checker.table(Some(entry), &section, FIX) else {
            continue;
        };
        let name_at = table.name.as_ref().map(Spanned::span);
        // Checked here, not on the built contract, so a duplicate is reported even when the first fails.
        if let Some(Value::String(raw)) = table.name.as_ref().map(Spanned::get_ref) {
            let name = decode::snake_case(raw);
            if let Some(other) = names.get(&name) {
                checker.error(
                    name_at.as_ref(),
                    &field(&section, "name"),
                    format!("\"{raw}\" is also the name of {other}"),
                    "give each contract its own name (names are compared in snake case)",
                );
            } else {
                names.insert(name, section.clone());
            }
        }
        let Some((contract, written_factory)) =
            contract(checker, &section, table, &at, base_dir, default_start_block)
        else {
            continue;
        };
        factories.extend(written_factory.map(|written| (contracts.len(), written)));
        for event in &contract.events {
            if let Some(owner) = table_owners.insert(event.table.clone(), section.clone()) {
                checker.error(
                    name_at.as_ref(),
                    &field(&section, "name"),
                    format!("table {} is also a table of {owner}", event.table),
                    "rename one of the contracts",
                );
            }
        }
        contracts.push(contract);
        sections.push((section, table.filters.as_ref().map(Spanned::span)));
    }
    resolve_factories(checker, &mut contracts, &sections, factories);
    filters::check_shared_addresses(checker, &contracts, &sections);
    contracts
}

/// Resolves each child's factory against the other entries, once all are read.
fn resolve_factories(
    checker: &mut Checker<'_>,
    contracts: &mut [ContractConfig],
    sections: &[(String, Option<Span>)],
    factories: Vec<(usize, WrittenFactory)>,
) {
    for (child, written) in factories {
        if !contracts[child].filters.is_empty() {
            checker.error(
                sections[child].1.as_ref(),
                &field(&sections[child].0, "filters"),
                "is given together with factory",
                "remove it: filters on a factory's children are not supported (filter in SQL on the typed tables)",
            );
        }
        if let Some(resolved) = factory::resolve(checker, contracts, child, &written) {
            // Discovery starts where the factory's own indexing does.
            let parent_start = contracts
                .iter()
                .find(|c| c.name == resolved.contract)
                .map_or(0, |c| c.start_block);
            contracts[child].start_block = parent_start;
            contracts[child].factory = Some(resolved);
        }
    }
}

/// One entry (`at` is its span, for the keys it lacks), with its `factory` as written; `None` when it is
/// too broken to describe (its problems are reported).
fn contract(
    checker: &mut Checker<'_>,
    section: &str,
    table: &RawContract,
    at: &Span,
    base_dir: &Path,
    default_start_block: u64,
) -> Option<(ContractConfig, Option<WrittenFactory>)> {
    let name = checker
        .required_string(
            table.name.as_ref(),
            Some(at),
            &field(section, "name"),
            "name the contract, e.g. name = \"usdc\" (used in table names)",
        )
        .and_then(|setting| {
            let name = decode::snake_case(&setting.value);
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                Some(name)
            } else {
                checker.error(
                    Some(&setting.span),
                    &field(section, "name"),
                    format!(
                        "\"{}\" does not start with a letter in snake case (\"{name}\")",
                        setting.raw
                    ),
                    "use a name like \"usdc\" or \"uniswap_v2_pair\"",
                );
                None
            }
        });
    let (addresses, written_factory) = if table.factory.is_some() {
        // Its children are found while indexing; a bad factory still lets the rest be checked.
        let written = factory::read(checker, section, table);
        (written.is_some().then(Vec::new), written)
    } else {
        (addresses(checker, section, table, at), None)
    };
    let start_block = checker.int(
        table.start_block.as_ref(),
        &field(section, "start_block"),
        default_start_block,
        0,
    );
    let contract_name = name.as_deref().unwrap_or("contract");
    let (events, named_selectors) = events(checker, section, table, at, base_dir, contract_name)?;
    let filters = filters::filters(checker, section, table.filters.as_ref(), &events)?;
    Some((
        ContractConfig {
            name: name?,
            addresses: addresses?,
            start_block,
            events,
            named_selectors,
            factory: None,
            filters,
        },
        written_factory,
    ))
}

/// `address` or `addresses`: exactly one, at least one address, deduplicated in file order.
fn addresses(
    checker: &mut Checker<'_>,
    section: &str,
    table: &RawContract,
    at: &Span,
) -> Option<Vec<Address>> {
    const FIX: &str = "write address = \"0x...\" or addresses = [\"0x...\", ...]";
    let addresses_field = field(section, "addresses");
    let written: Vec<(String, &Leaf)> = match (&table.address, &table.addresses) {
        (Some(_), Some(list)) => {
            checker.error(
                Some(&list.span()),
                &addresses_field,
                "is given together with address",
                "keep only one of them",
            );
            return None;
        }
        (None, None) => {
            checker.error(Some(at), &field(section, "address"), "is missing", FIX);
            return None;
        }
        (Some(leaf), None) => vec![(field(section, "address"), leaf)],
        (None, Some(list)) => match list.get_ref() {
            ArrayOr::Array(values) if !values.is_empty() => values
                .iter()
                .enumerate()
                .map(|(address_idx, leaf)| (format!("{addresses_field}[{address_idx}]"), leaf))
                .collect(),
            ArrayOr::Array(_) => {
                checker.error(Some(&list.span()), &addresses_field, "is empty", FIX);
                return None;
            }
            ArrayOr::Other(kind) => {
                checker.error(
                    Some(&list.span()),
                    &addresses_field,
                    format!("is a {kind}, not an array"),
                    FIX,
                );
                return None;
            }
        },
    };
    let mut addresses = Vec::new();
    let mut ok = true;
    for (field, leaf) in written {
        let span = leaf.span();
        let Value::String(raw) = leaf.get_ref() else {
            checker.error(
                Some(&span),
                &field,
                format!("is a {}, not a string", leaf.get_ref().type_str()),
                FIX,
            );
            ok = false;
            continue;
        };
        let Some(text) = checker.interpolate(&span, &field, raw) else {
            ok = false;
            continue;
        };
        match parse_address(&text) {
            Ok(address) if !addresses.contains(&address) => addresses.push(address),
            Ok(_) => {}
            Err((problem, fix)) => {
                checker.error(Some(&span), &field, problem, fix);
                ok = false;
            }
        }
    }
    ok.then_some(addresses)
}

/// `0x` + 40 hex digits; mixed case must be a valid EIP-55 checksum.
pub(super) fn parse_address(text: &str) -> Result<Address, (String, String)> {
    let hex_digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"));
    let Some(hex_digits) =
        hex_digits.filter(|h| h.len() == 40 && h.bytes().all(|b| b.is_ascii_hexdigit()))
    else {
        return Err((
            format!("\"{text}\" is not a 20-byte address"),
            "write 0x and 40 hex digits".to_owned(),
        ));
    };
    let address: Address = hex_digits
        .parse()
        .map_err(|err| (format!("\"{text}\": {err}"), String::new()))?;
    let has_lower = hex_digits.bytes().any(|b| b.is_ascii_lowercase());
    let has_upper = hex_digits.bytes().any(|b| b.is_ascii_uppercase());
    // EIP-55: mixed case carries a checksum; all-lower or all-upper carries none.
    if has_lower
        && has_upper
        && Address::parse_checksummed(format!("0x{hex_digits}"), None).is_err()
    {
        return Err((
            format!("\"{text}\" has mixed case but a wrong EIP-55 checksum (a typo?)"),
            format!(
                "check the address; if it is right, write {} or all lowercase",
                address.to_checksum(None)
            ),
        ));
    }
    Ok(address)
}
