//! The events of a `[[contracts]]` entry: from a JSON ABI file and/or inline signatures, each checked to
//! resolve into a decoder and given its table name; two anonymous events a log cannot tell apart are
//! refused.
//!
//! Reads the ABI files a config names; nothing else touches the disk.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use alloy_json_abi::{Event, JsonAbi};
use alloy_primitives::B256;
use toml::{Spanned, Value};

use super::check::{field, Checker, Setting, Span};
use super::raw::{ArrayOr, Leaf, RawContract};
use super::EventConfig;
use crate::decode;

/// Where an event was configured: the field and its span (for messages).
#[derive(Debug, Clone)]
struct Origin {
    field: String,
    span: Option<Span>,
}

/// An event, where it was configured, and its table name.
type Named = (Event, Origin, String);

/// `events` as written: each entry interpolated, with its span; `Err(())` when it is bad (reported),
/// `Ok(None)` when absent.
fn selection(
    checker: &mut Checker<'_>,
    events_field: &str,
    raw: Option<&Spanned<ArrayOr<Leaf>>>,
) -> Result<Option<Vec<(String, Span)>>, ()> {
    let Some(raw) = raw else {
        return Ok(None);
    };
    let values = match raw.get_ref() {
        ArrayOr::Array(values) if values.is_empty() => {
            checker.error(
                Some(&raw.span()),
                events_field,
                "is empty",
                "remove it to index every event of the ABI, or list some",
            );
            return Err(());
        }
        ArrayOr::Array(values) => values,
        ArrayOr::Other(kind) => {
            checker.error(
                Some(&raw.span()),
                events_field,
                format!("is a {kind}, not an array"),
                "write events = [\"...\"]",
            );
            return Err(());
        }
    };
    let mut entries = Vec::new();
    for (event_idx, leaf) in values.iter().enumerate() {
        let entry_field = format!("{events_field}[{event_idx}]");
        let span = leaf.span();
        match leaf.get_ref() {
            Value::String(raw) => entries.extend(
                checker
                    .interpolate(&span, &entry_field, raw)
                    .map(|entry| (entry, span)),
            ),
            other => checker.error(
                Some(&span),
                &entry_field,
                format!("is a {}, not a string", other.type_str()),
                "write an event name or signature in double quotes",
            ),
        }
    }
    if entries.len() != values.len() {
        return Err(());
    }
    Ok(Some(entries))
}

/// The events to index, with table names, and the topic0 of every non-anonymous event the contract
/// declares (the whole ABI, selected or not; the `events` signatures when there is no ABI); `None` when any
/// is bad (reported). `at` is the entry's span, for the keys it lacks.
pub(super) fn events(
    checker: &mut Checker<'_>,
    section: &str,
    table: &RawContract,
    at: &Span,
    base_dir: &Path,
    contract_name: &str,
) -> Option<(Vec<EventConfig>, Vec<B256>)> {
    let events_field = field(section, "events");
    let abi_field = field(section, "abi");
    let selection = selection(checker, &events_field, table.events.as_ref()).ok()?;
    let abi = match checker.string(table.abi.as_ref(), &abi_field) {
        Some(setting) => Some(load_abi(
            checker,
            section,
            &base_dir.join(&setting.value),
            &setting,
        )?),
        None if table.abi.is_some() => return None,
        None => None,
    };
    // Without an ABI, the signatures that did parse are still checked below, so all problems show at once.
    let mut all_parsed = true;
    let mut named_selectors: Vec<B256> = Vec::new();
    let named: Vec<Named> = match (abi, selection) {
        (None, None) => {
            checker.error(
                Some(at),
                &abi_field,
                "is missing, and so is events",
                "give abi = \"path/to/abi.json\", or events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]",
            );
            return None;
        }
        (Some((abi_file, abi)), selection) => {
            named_selectors.extend(abi.iter().filter(|e| !e.anonymous).map(Event::selector));
            let origin = Origin {
                field: abi_field,
                span: table.abi.as_ref().map(Spanned::span),
            };
            let all = with_table_names(
                contract_name,
                abi.into_iter().map(|event| (event, origin.clone())),
            );
            match selection {
                None => all,
                Some(entries) => select(checker, &events_field, &abi_file, all, &entries)?,
            }
        }
        (None, Some(entries)) => {
            let parsed = parse_signatures(checker, &events_field, &entries);
            all_parsed = parsed.len() == entries.len();
            with_table_names(contract_name, parsed)
        }
    };
    let ties_ok = check_anonymous_ties(checker, contract_name, &named);
    let mut ok = true;
    let mut events = Vec::new();
    for (event, origin, table) in named {
        if let Err(err) = decode::EventDecoder::new(&event) {
            checker.error(
                origin.span.as_ref(),
                &origin.field,
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
    (ok && all_parsed && ties_ok).then_some((events, named_selectors))
}

/// Inline signatures (no ABI), each with where it is written; bad ones are reported and left out, and a
/// signature given twice is kept once.
fn parse_signatures(
    checker: &mut Checker<'_>,
    events_field: &str,
    entries: &[(String, Span)],
) -> Vec<(Event, Origin)> {
    let mut parsed = Vec::new();
    for (event_idx, (entry, span)) in entries.iter().enumerate() {
        let entry_field = format!("{events_field}[{event_idx}]");
        match Event::parse(entry.trim()) {
            Ok(event) => parsed.push((
                event,
                Origin {
                    field: entry_field,
                    span: Some(span.clone()),
                },
            )),
            Err(err) => checker.error(
                Some(span),
                &entry_field,
                format!("\"{entry}\" is not an event signature: {}", one_line(&err.to_string())),
                "write e.g. \"event Transfer(address indexed from, address indexed to, uint256 value)\" (or give abi to select events by name)",
            ),
        }
    }
    let mut seen = BTreeSet::new();
    parsed.retain(|(event, _)| seen.insert(event.full_signature()));
    parsed
}

/// Refuses two anonymous events of one contract with the same number of indexed parameters: with no
/// selector topic, a log's topic count is all that says which event it is, so such a log would be either.
/// `false` when there is such a pair (reported at the later one).
fn check_anonymous_ties(checker: &mut Checker<'_>, contract_name: &str, named: &[Named]) -> bool {
    let mut by_topics: HashMap<usize, &Event> = HashMap::new();
    let mut ok = true;
    for (event, origin, _) in named.iter().filter(|(event, _, _)| event.anonymous) {
        let n_topics = event.inputs.iter().filter(|p| p.indexed).count();
        let Some(first) = by_topics.get(&n_topics) else {
            by_topics.insert(n_topics, event);
            continue;
        };
        checker.error(
            origin.span.as_ref(),
            &origin.field,
            format!(
                "contract {contract_name}: the anonymous events {} and {} both have {n_topics} topic(s), so a log cannot be told to be one or the other",
                first.signature(),
                event.signature()
            ),
            "index only one of them (select events = [...] without the other), or give them different numbers of indexed parameters",
        );
        ok = false;
    }
    ok
}

/// Table names: `<contract>_<event>`; an overloaded name's second event gets `_2`, its third `_3`, in ABI
/// (or `events`) order, so that selecting a subset of the ABI does not rename tables.
fn with_table_names(
    contract_name: &str,
    events: impl IntoIterator<Item = (Event, Origin)>,
) -> Vec<Named> {
    let mut used: BTreeSet<String> = BTreeSet::new();
    events
        .into_iter()
        .map(|(event, origin)| {
            let base = decode::table_name(contract_name, &event.name);
            let mut table = base.clone();
            let mut n = 2;
            while !used.insert(table.clone()) {
                table = format!("{base}_{n}");
                n += 1;
            }
            (event, origin, table)
        })
        .collect()
}

/// The ABI events `entries` name (a name selects every overload; a signature selects one).
fn select(
    checker: &mut Checker<'_>,
    events_field: &str,
    abi_file: &str,
    all: Vec<Named>,
    entries: &[(String, Span)],
) -> Option<Vec<Named>> {
    let mut chosen = BTreeSet::new();
    let mut ok = true;
    for (event_idx, (entry, at)) in entries.iter().enumerate() {
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
                    checker.error(
                        Some(at),
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
            checker.error(
                Some(at),
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
    checker: &mut Checker<'_>,
    section: &str,
    path: &Path,
    written: &Setting,
) -> Option<(String, Vec<Event>)> {
    let raw = &written.raw;
    let abi_field = field(section, "abi");
    let abi_file = path.display().to_string();
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            checker.error(
                Some(&written.span),
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
            checker.error_in(
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
        checker.error_in(
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
