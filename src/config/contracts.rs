//! `[[contracts]]`: names, chains, addresses (EIP-55 checked), factories and filters, and the checks across
//! entries (names unique on a chain, the same name on two chains with the same tables, tables unique,
//! factories resolved and filtered addresses not shared within a chain). Events are `config::events`'.

use std::collections::HashMap;
use std::path::Path;

use alloy_primitives::Address;
use toml::{Spanned, Value};

use super::check::{field, Checker, Span};
use super::events::events;
use super::factory::{self, WrittenFactory};
use super::filters;
use super::raw::{ArrayOr, Leaf, RawContract, TableOr};
use super::{ChainConfig, ContractConfig};
use crate::decode;

const FIX: &str = "add a [[contracts]] section with name, address, and abi or events";

/// Every `[[contracts]]` entry; `base_dir` is the config file's directory (ABI paths are relative to it).
pub(super) fn contracts(
    checker: &mut Checker<'_>,
    raw: Option<&Spanned<ArrayOr<Spanned<TableOr<RawContract>>>>>,
    base_dir: &Path,
    chains: &[ChainConfig],
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
    // Table name -> the contract (name, section) that owns it, to catch `token_a` + `Transfer` vs `token` +
    // `ATransfer`; the same name on another chain shares its tables.
    let mut table_owners: HashMap<String, (String, String)> = HashMap::new();
    // (chain, snake-cased name) -> the contract section that has it.
    let mut names: HashMap<(String, String), String> = HashMap::new();
    // (index in `contracts`, its factory as written): resolved once every entry is read.
    let mut factories: Vec<(usize, WrittenFactory)> = Vec::new();
    for (contract_idx, entry) in entries.iter().enumerate() {
        let section = format!("contracts[{contract_idx}]");
        let Some((table, at)) = checker.table(Some(entry), &section, FIX) else {
            continue;
        };
        let chain = chain(checker, &section, table, &at, chains);
        let name_at = table.name.as_ref().map(Spanned::span);
        // Checked here, not on the built contract, so a duplicate is reported even when the first fails.
        if let Some(Value::String(raw)) = table.name.as_ref().map(Spanned::get_ref) {
            let key = (chain.name.clone(), decode::snake_case(raw));
            if let Some(other) = names.get(&key) {
                checker.error(
                    name_at.as_ref(),
                    &field(&section, "name"),
                    format!("\"{raw}\" is also the name of {other}"),
                    "give each contract its own name (names are compared in snake case)",
                );
            } else {
                names.insert(key, section.clone());
            }
        }
        let Some((mut contract, written_factory)) =
            contract(checker, &section, table, &at, base_dir, chain.start_block)
        else {
            continue;
        };
        contract.chain = chain.name.clone();
        factories.extend(written_factory.map(|written| (contracts.len(), written)));
        for event in &contract.events {
            let owner = (contract.name.clone(), section.clone());
            match table_owners.insert(event.table.clone(), owner) {
                Some((owner_name, owner)) if owner_name != contract.name => checker.error(
                    name_at.as_ref(),
                    &field(&section, "name"),
                    format!("table {} is also a table of {owner}", event.table),
                    "rename one of the contracts",
                ),
                _ => {}
            }
        }
        contracts.push(contract);
        sections.push((section, table.filters.as_ref().map(Spanned::span)));
    }
    check_same_events(checker, &contracts, &sections);
    for chain in chains {
        per_chain(
            checker,
            &mut contracts,
            &sections,
            &mut factories,
            &chain.name,
        );
    }
    contracts
}

/// The chain of an entry: its `chain`, which must name one of `chains`; required when there are several.
/// A missing or unknown one is reported and the first chain stands in, so the rest is still checked.
fn chain<'c>(
    checker: &mut Checker<'_>,
    section: &str,
    table: &RawContract,
    at: &Span,
    chains: &'c [ChainConfig],
) -> &'c ChainConfig {
    let names: Vec<&str> = chains.iter().map(|c| c.name.as_str()).collect();
    let chain_field = field(section, "chain");
    let written = match &table.chain {
        None if chains.len() > 1 => {
            checker.error(
                Some(at),
                &chain_field,
                "is missing, and the config has several chains",
                format!(
                    "name the contract's chain: chain = one of {}",
                    quoted(&names)
                ),
            );
            None
        }
        None => None,
        Some(leaf) => checker.string(Some(leaf), &chain_field).map(|s| (s, leaf)),
    };
    let Some((setting, _)) = written else {
        return &chains[0];
    };
    match chains.iter().find(|c| c.name == setting.value) {
        Some(chain) => chain,
        None => {
            let fix = match chains.len() {
                1 if chains[0].name == super::DEFAULT_CHAIN => {
                    "remove chain (the config's one chain is [node], named \"default\"), or write the chains as [chains.NAME] tables".to_owned()
                }
                _ => format!("define [chains.{}], or use one of {}", setting.value, quoted(&names)),
            };
            checker.error(
                Some(&setting.span),
                &chain_field,
                format!("\"{}\" is not a chain of this config", setting.raw),
                fix,
            );
            &chains[0]
        }
    }
}

/// `"a", "b"`.
fn quoted(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    quoted.join(", ")
}

/// The same name on two chains shares its tables: the entries must declare the same events.
fn check_same_events(
    checker: &mut Checker<'_>,
    contracts: &[ContractConfig],
    sections: &[(String, Option<Span>)],
) {
    let tables = |c: &ContractConfig| -> Vec<(String, String)> {
        let mut tables: Vec<_> = c
            .events
            .iter()
            .map(|e| (e.table.clone(), e.event.full_signature()))
            .collect();
        tables.sort();
        tables
    };
    for (idx, contract) in contracts.iter().enumerate() {
        let first = contracts[..idx]
            .iter()
            .position(|c| c.name == contract.name && c.chain != contract.chain);
        let Some(first) = first else {
            continue;
        };
        if tables(&contracts[first]) != tables(contract) {
            checker.error(
                None,
                &field(&sections[idx].0, "name"),
                format!(
                    "\"{}\" on chain {} has other events than {} on chain {}, and both would share its tables",
                    contract.name, contract.chain, sections[first].0, contracts[first].chain
                ),
                "give both entries the same abi and events, or give one another name",
            );
        }
    }
}

/// Factories and filtered addresses of the entries of `chain`: a factory is another entry of its chain,
/// and an address is shared only with entries of its chain.
fn per_chain(
    checker: &mut Checker<'_>,
    contracts: &mut [ContractConfig],
    sections: &[(String, Option<Span>)],
    factories: &mut Vec<(usize, WrittenFactory)>,
    chain: &str,
) {
    let members: Vec<usize> = (0..contracts.len())
        .filter(|&idx| contracts[idx].chain == chain)
        .collect();
    let mut group: Vec<ContractConfig> = members.iter().map(|&i| contracts[i].clone()).collect();
    let group_sections: Vec<_> = members.iter().map(|&i| sections[i].clone()).collect();
    let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(factories)
        .into_iter()
        .partition(|(idx, _)| members.contains(idx));
    *factories = others;
    let mine = mine
        .into_iter()
        .filter_map(|(idx, written)| Some((members.iter().position(|m| *m == idx)?, written)))
        .collect();
    resolve_factories(checker, &mut group, &group_sections, mine);
    filters::check_shared_addresses(checker, &group, &group_sections);
    for (idx, contract) in members.into_iter().zip(group) {
        contracts[idx] = contract;
    }
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
            chain: String::new(),
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
