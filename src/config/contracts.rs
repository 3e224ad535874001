//! `[[contracts]]`: names, addresses (EIP-55 checked), and events from a JSON ABI file and/or inline
//! signatures, each checked to resolve into a decoder and given its table name.
//!
//! Reads the ABI files a config names; nothing else touches the disk.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use alloy_json_abi::{Event, JsonAbi};
use alloy_primitives::{Address, B256};
use toml::{Table, Value};

use super::factory::{self, RawFactory};
use super::filters;
use super::reader::{field, Reader};
use super::{ContractConfig, EventConfig};
use crate::decode;

const CONTRACT_KEYS: &[&str] = &[
    "name",
    "address",
    "addresses",
    "abi",
    "events",
    "start_block",
    "factory",
    "filters",
];

/// Every `[[contracts]]` entry; `base_dir` is the config file's directory (ABI paths are relative to it).
pub(super) fn contracts(
    reader: &mut Reader<'_>,
    root: &Table,
    base_dir: &Path,
    default_start_block: u64,
) -> Vec<ContractConfig> {
    const FIX: &str = "add a [[contracts]] section with name, address, and abi or events";
    let entries = match root.get("contracts") {
        None => {
            reader.error("contracts", "no contracts are configured", FIX);
            return Vec::new();
        }
        Some(Value::Array(entries)) if !entries.is_empty() => entries,
        Some(Value::Array(_)) => {
            reader.error("contracts", "is empty", FIX);
            return Vec::new();
        }
        Some(other) => {
            reader.error(
                "contracts",
                format!("is a {}, not an array of tables", other.type_str()),
                FIX,
            );
            return Vec::new();
        }
    };
    let mut contracts: Vec<ContractConfig> = Vec::new();
    // The field name of each of `contracts`, for checks across entries.
    let mut sections: Vec<String> = Vec::new();
    // Table name -> the contract section that owns it, to catch `token_a` + `Transfer` vs `token` + `ATransfer`.
    let mut table_owners: HashMap<String, String> = HashMap::new();
    // Snake-cased name -> the contract section that has it.
    let mut names: HashMap<String, String> = HashMap::new();
    // (index in `contracts`, its factory as written): resolved once every entry is read.
    let mut factories: Vec<(usize, RawFactory)> = Vec::new();
    for (contract_idx, entry) in entries.iter().enumerate() {
        let section = format!("contracts[{contract_idx}]");
        let Value::Table(table) = entry else {
            reader.error(
                &section,
                format!("is a {}, not a table", entry.type_str()),
                FIX,
            );
            continue;
        };
        // Checked here, not on the built contract, so a duplicate is reported even when the first fails.
        if let Some(Value::String(raw)) = table.get("name") {
            let name = decode::snake_case(raw);
            if let Some(other) = names.get(&name) {
                reader.error(
                    &field(&section, "name"),
                    format!("\"{raw}\" is also the name of {other}"),
                    "give each contract its own name (names are compared in snake case)",
                );
            } else {
                names.insert(name, section.clone());
            }
        }
        let Some((contract, raw_factory)) =
            contract(reader, &section, table, base_dir, default_start_block)
        else {
            continue;
        };
        factories.extend(raw_factory.map(|raw| (contracts.len(), raw)));
        for event in &contract.events {
            if let Some(owner) = table_owners.insert(event.table.clone(), section.clone()) {
                reader.error(
                    &field(&section, "name"),
                    format!("table {} is also a table of {owner}", event.table),
                    "rename one of the contracts",
                );
            }
        }
        contracts.push(contract);
        sections.push(section);
    }
    for (child, raw) in factories {
        if !contracts[child].filters.is_empty() {
            reader.error(
                &field(&sections[child], "filters"),
                "is given together with factory",
                "remove it: filters on a factory's children are not supported (filter in SQL on the typed tables)",
            );
        }
        if let Some(resolved) = factory::resolve(reader, &contracts, child, &raw) {
            // Discovery starts where the factory's own indexing does.
            let parent_start = contracts
                .iter()
                .find(|c| c.name == resolved.contract)
                .map_or(0, |c| c.start_block);
            contracts[child].start_block = parent_start;
            contracts[child].factory = Some(resolved);
        }
    }
    filters::check_shared_addresses(reader, &contracts, &sections);
    contracts
}

/// One entry, with its `factory` as written; `None` when it is too broken to describe (its problems are
/// reported).
fn contract(
    reader: &mut Reader<'_>,
    section: &str,
    table: &Table,
    base_dir: &Path,
    default_start_block: u64,
) -> Option<(ContractConfig, Option<RawFactory>)> {
    reader.check_keys(section, table, CONTRACT_KEYS);
    let name = reader
        .required_string(
            table,
            section,
            "name",
            "name the contract, e.g. name = \"usdc\" (used in table names)",
        )
        .and_then(|setting| {
            let name = decode::snake_case(&setting.value);
            if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                Some(name)
            } else {
                reader.error(
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
    let (addresses, raw_factory) = if table.contains_key("factory") {
        // Its children are found while indexing; a bad factory still lets the rest be checked.
        let raw = factory::read(reader, section, table);
        (raw.is_some().then(Vec::new), raw)
    } else {
        (addresses(reader, section, table), None)
    };
    let start_block = reader.int(table, section, "start_block", default_start_block, 0);
    let events = events(
        reader,
        section,
        table,
        base_dir,
        name.as_deref().unwrap_or("contract"),
    );
    let (events, named_selectors) = events?;
    let filters = filters::filters(reader, section, table, &events)?;
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
        raw_factory,
    ))
}

/// `address` or `addresses`: exactly one, at least one address, deduplicated in file order.
fn addresses(reader: &mut Reader<'_>, section: &str, table: &Table) -> Option<Vec<Address>> {
    const FIX: &str = "write address = \"0x...\" or addresses = [\"0x...\", ...]";
    let written: Vec<(String, &Value)> = match (table.get("address"), table.get("addresses")) {
        (Some(_), Some(_)) => {
            reader.error(
                &field(section, "addresses"),
                "is given together with address",
                "keep only one of them",
            );
            return None;
        }
        (None, None) => {
            reader.error(&field(section, "address"), "is missing", FIX);
            return None;
        }
        (Some(value), None) => vec![(field(section, "address"), value)],
        (None, Some(Value::Array(values))) if !values.is_empty() => values
            .iter()
            .enumerate()
            .map(|(address_idx, value)| (format!("{section}.addresses[{address_idx}]"), value))
            .collect(),
        (None, Some(Value::Array(_))) => {
            reader.error(&field(section, "addresses"), "is empty", FIX);
            return None;
        }
        (None, Some(other)) => {
            reader.error(
                &field(section, "addresses"),
                format!("is a {}, not an array", other.type_str()),
                FIX,
            );
            return None;
        }
    };
    let mut addresses = Vec::new();
    let mut ok = true;
    for (field, value) in written {
        let Value::String(raw) = value else {
            reader.error(
                &field,
                format!("is a {}, not a string", value.type_str()),
                FIX,
            );
            ok = false;
            continue;
        };
        let Some(text) = reader.interpolate(&field, raw) else {
            ok = false;
            continue;
        };
        match parse_address(&text) {
            Ok(address) if !addresses.contains(&address) => addresses.push(address),
            Ok(_) => {}
            Err((problem, fix)) => {
                reader.error(&field, problem, fix);
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

/// The events to index, with table names, and the topic0 of every non-anonymous event the contract
/// declares (the whole ABI, selected or not; the `events` signatures when there is no ABI); `None` when any
/// is bad (reported).
fn events(
    reader: &mut Reader<'_>,
    section: &str,
    table: &Table,
    base_dir: &Path,
    contract_name: &str,
) -> Option<(Vec<EventConfig>, Vec<B256>)> {
    let events_field = field(section, "events");
    let selection: Option<Vec<String>> = match table.get("events") {
        None => None,
        Some(Value::Array(values)) if values.is_empty() => {
            reader.error(
                &events_field,
                "is empty",
                "remove it to index every event of the ABI, or list some",
            );
            return None;
        }
        Some(Value::Array(values)) => {
            let mut entries = Vec::new();
            for (event_idx, value) in values.iter().enumerate() {
                let entry_field = format!("{events_field}[{event_idx}]");
                match value {
                    Value::String(raw) => entries.extend(reader.interpolate(&entry_field, raw)),
                    other => reader.error(
                        &entry_field,
                        format!("is a {}, not a string", other.type_str()),
                        "write an event name or signature in double quotes",
                    ),
                }
            }
            if entries.len() != values.len() {
                return None;
            }
            Some(entries)
        }
        Some(other) => {
            reader.error(
                &events_field,
                format!("is a {}, not an array", other.type_str()),
                "write events = [\"...\"]",
            );
            return None;
        }
    };
    let abi = match reader.string(table, section, "abi") {
        Some(setting) => Some(load_abi(
            reader,
            section,
            &base_dir.join(&setting.value),
            &setting.raw,
        )?),
        None if table.contains_key("abi") => return None,
        None => None,
    };
    // Without an ABI, the signatures that did parse are still checked below, so all problems show at once.
    let mut all_parsed = true;
    let mut named_selectors: Vec<B256> = Vec::new();
    // (event, field it came from, table name)
    let named: Vec<(Event, String, String)> = match (abi, selection) {
        (None, None) => {
            reader.error(
                &field(section, "abi"),
                "is missing, and so is events",
                "give abi = \"path/to/abi.json\", or events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]",
            );
            return None;
        }
        (Some((abi_file, abi)), selection) => {
            named_selectors.extend(
                abi.iter()
                    .filter(|event| !event.anonymous)
                    .map(Event::selector),
            );
            let all = with_table_names(
                contract_name,
                abi.into_iter().map(|event| (event, field(section, "abi"))),
            );
            match selection {
                None => all,
                Some(entries) => select(reader, &events_field, &abi_file, all, &entries)?,
            }
        }
        (None, Some(entries)) => {
            let mut parsed = Vec::new();
            for (event_idx, entry) in entries.iter().enumerate() {
                let entry_field = format!("{events_field}[{event_idx}]");
                match Event::parse(entry.trim()) {
                    Ok(event) => parsed.push((event, entry_field)),
                    Err(err) => reader.error(
                        &entry_field,
                        format!("\"{entry}\" is not an event signature: {}", one_line(&err.to_string())),
                        "write e.g. \"event Transfer(address indexed from, address indexed to, uint256 value)\" (or give abi to select events by name)",
                    ),
                }
            }
            all_parsed = parsed.len() == entries.len();
            let mut seen = BTreeSet::new();
            parsed.retain(|(event, _)| seen.insert(event.full_signature()));
            with_table_names(contract_name, parsed)
        }
    };
    let mut ok = true;
    let mut events = Vec::new();
    for (event, event_field, table) in named {
        if let Err(err) = decode::EventDecoder::new(&event) {
            reader.error(
                &event_field,
                err.to_string(),
                "fix the event's parameter types (at most 3 indexed, 4 if anonymous)",
            );
            ok = false;
            continue;
        }
        events.push(EventConfig { event, table });
    }
    if named_selectors.is_empty() {
        named_selectors.extend(
            events
                .iter()
                .filter(|e| !e.event.anonymous)
                .map(|e| e.event.selector()),
        );
    }
    named_selectors.sort();
    named_selectors.dedup();
    (ok && all_parsed).then_some((events, named_selectors))
}

/// Table names: `<contract>_<event>`; an overloaded name's second event gets `_2`, its third `_3`, in ABI
/// (or `events`) order, so that selecting a subset of the ABI does not rename tables.
fn with_table_names(
    contract_name: &str,
    events: impl IntoIterator<Item = (Event, String)>,
) -> Vec<(Event, String, String)> {
    let mut used: BTreeSet<String> = BTreeSet::new();
    events
        .into_iter()
        .map(|(event, event_field)| {
            let base = decode::table_name(contract_name, &event.name);
            let mut table = base.clone();
            let mut n = 2;
            while !used.insert(table.clone()) {
                table = format!("{base}_{n}");
                n += 1;
            }
            (event, event_field, table)
        })
        .collect()
}

/// The ABI events `entries` name (a name selects every overload; a signature selects one).
fn select(
    reader: &mut Reader<'_>,
    events_field: &str,
    abi_file: &str,
    all: Vec<(Event, String, String)>,
    entries: &[String],
) -> Option<Vec<(Event, String, String)>> {
    let mut chosen = BTreeSet::new();
    let mut ok = true;
    for (event_idx, entry) in entries.iter().enumerate() {
        let entry = entry.trim();
        let entry_field = format!("{events_field}[{event_idx}]");
        let matches: Vec<usize> = if entry.contains('(') {
            match Event::parse(entry) {
                Ok(wanted) => {
                    let signature = wanted.signature();
                    all.iter()
                        .positions(|(event, _, _)| event.signature() == signature)
                }
                Err(err) => {
                    reader.error(
                        &entry_field,
                        format!("\"{entry}\" is not an event signature: {}", one_line(&err.to_string())),
                        "write an event name such as \"Transfer\", or a signature such as \"Transfer(address,address,uint256)\"",
                    );
                    ok = false;
                    continue;
                }
            }
        } else {
            all.iter().positions(|(event, _, _)| event.name == entry)
        };
        if matches.is_empty() {
            let available: Vec<String> =
                all.iter().map(|(event, _, _)| event.signature()).collect();
            reader.error(
                &entry_field,
                format!("\"{entry}\" is not an event of {abi_file}"),
                format!("use one of: {}", available.join(", ")),
            );
            ok = false;
        }
        chosen.extend(matches);
    }
    if !ok {
        return None;
    }
    Some(
        all.into_iter()
            .enumerate()
            .filter(|(event_idx, _)| chosen.contains(event_idx))
            .map(|(_, entry)| entry)
            .collect(),
    )
}

/// Positions of the items a predicate accepts.
trait Positions: Iterator + Sized {
    fn positions(self, mut predicate: impl FnMut(Self::Item) -> bool) -> Vec<usize> {
        self.enumerate()
            .filter_map(|(idx, item)| predicate(item).then_some(idx))
            .collect()
    }
}

impl<I: Iterator> Positions for I {}

/// Reads a JSON ABI (a bare array, or an artifact object with an `abi` field) and returns its events in
/// file-name order (alloy keeps events sorted by name, overloads in file order), with the file's name.
fn load_abi(
    reader: &mut Reader<'_>,
    section: &str,
    path: &Path,
    raw: &str,
) -> Option<(String, Vec<Event>)> {
    let abi_field = field(section, "abi");
    let abi_file = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            reader.error(
                &abi_field,
                format!("cannot read \"{raw}\" ({abi_file}): {err}"),
                "check the path; it is relative to the config file's directory",
            );
            return None;
        }
    };
    const FIX: &str =
        "give a JSON array of ABI items, or a Hardhat/Foundry artifact with an \"abi\" field";
    /// A Hardhat/Foundry artifact: only its `abi` matters.
    #[derive(serde::Deserialize)]
    struct Artifact {
        abi: JsonAbi,
    }
    let parsed = match text.trim_start().chars().next() {
        Some('{') => serde_json::from_str::<Artifact>(&text).map(|artifact| artifact.abi),
        _ => serde_json::from_str::<JsonAbi>(&text),
    };
    let abi = match parsed {
        Ok(abi) => abi,
        Err(err) => {
            reader.error_in(
                abi_file,
                &abi_field,
                format!("is not a JSON ABI: {err}"),
                FIX,
            );
            return None;
        }
    };
    let events: Vec<Event> = abi.events().cloned().collect();
    if events.is_empty() {
        reader.error_in(
            abi_file,
            &abi_field,
            "the ABI has no events",
            "point abi at the contract that emits the events, or list events = [\"event ...\"]",
        );
        return None;
    }
    Some((abi_file, events))
}

/// A parser message on one line (alloy's span several).
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
