//! `factory = { contract, event, parameter }` on a `[[contracts]]` entry: the contract's addresses are the
//! children a factory announces in one of its events, found while indexing. Read per entry, then resolved
//! against the other entries once all are read (the factory may come later in the file).

use super::check::{field, Checker, Span};
use super::raw::{RawContract, RawFactory};
use super::{ContractConfig, FactoryConfig};

/// A `factory` table as written, before the contract it names is known.
#[derive(Debug, Clone)]
pub(super) struct WrittenFactory {
    /// The field it was read from, e.g. `contracts[1].factory`.
    field: String,
    /// Where each of `contract`, `event` and `parameter` is written.
    spans: [Span; 3],
    contract: String,
    event: String,
    parameter: String,
}

/// Reads `factory` of `section`; `None` when it is bad (reported). The entry then takes no `address`,
/// `addresses` or `start_block` (reported when given): its children have addresses of their own, and each
/// is indexed from the block of the log that created it.
pub(super) fn read(
    checker: &mut Checker<'_>,
    section: &str,
    entry: &RawContract,
) -> Option<WrittenFactory> {
    let factory_field = field(section, "factory");
    let (table, at) = checker.table(
        entry.factory.as_ref(),
        &factory_field,
        "write factory = { contract = \"...\", event = \"...\", parameter = \"...\" }",
    )?;
    let addresses_span = entry.addresses.as_ref().map(|a| a.span());
    for (key, span, why) in [
        ("address", entry.address.as_ref().map(|l| l.span()), "its children's addresses come from the factory's events"),
        ("addresses", addresses_span, "its children's addresses come from the factory's events"),
        ("start_block", entry.start_block.as_ref().map(|l| l.span()), "each child is indexed from the block of the log that created it; the factory contract's own start_block says where discovery starts"),
    ] {
        if let Some(span) = span {
            checker.error(
                Some(&span),
                &field(section, key),
                "is given together with factory",
                format!("remove it: {why}"),
            );
        }
    }
    let RawFactory {
        contract,
        event,
        parameter,
    } = table;
    let mut value = |key: &str, leaf: &Option<super::raw::Leaf>, example: &str| {
        checker.required_string(
            leaf.as_ref(),
            Some(&at),
            &field(&factory_field, key),
            &format!("write {key} = \"{example}\""),
        )
    };
    let contract = value("contract", contract, "uniswap_v2_factory");
    let event = value("event", event, "PairCreated");
    let parameter = value("parameter", parameter, "pair");
    let (contract, event, parameter) = (contract?, event?, parameter?);
    Some(WrittenFactory {
        field: factory_field,
        spans: [contract.span, event.span, parameter.span],
        contract: contract.value,
        event: event.value,
        parameter: parameter.value,
    })
}

/// Resolves `raw` of `contracts[child]`: the named contract must be another entry with addresses of its
/// own (factories of factories are not supported), the event one of its indexed events, and the parameter an
/// `address` input of that event (indexed or not). `None` when not (reported).
pub(super) fn resolve(
    checker: &mut Checker<'_>,
    contracts: &[ContractConfig],
    child: usize,
    raw: &WrittenFactory,
) -> Option<FactoryConfig> {
    let contract_field = field(&raw.field, "contract");
    let wanted = crate::decode::snake_case(&raw.contract);
    let Some(parent) = contracts.iter().find(|c| c.name == wanted) else {
        let names: Vec<&str> = contracts.iter().map(|c| c.name.as_str()).collect();
        checker.error(
            Some(&raw.spans[0]),
            &contract_field,
            format!(
                "\"{}\" is not the name of a [[contracts]] entry",
                raw.contract
            ),
            format!("name the factory's own entry, one of: {}", names.join(", ")),
        );
        return None;
    };
    if parent.name == contracts[child].name {
        checker.error(
            Some(&raw.spans[0]),
            &contract_field,
            "names the entry itself",
            "name the factory contract's entry, which has an address",
        );
        return None;
    }
    if parent.factory.is_some() || parent.addresses.is_empty() {
        checker.error(
            Some(&raw.spans[0]),
            &contract_field,
            format!("\"{}\" is itself created by a factory", raw.contract),
            "name a contract with an address: factories of factories are not supported",
        );
        return None;
    }
    let event_field = field(&raw.field, "event");
    let by_name: Vec<_> = parent
        .events
        .iter()
        .filter(|e| e.event.name == raw.event || e.event.signature() == raw.event)
        .collect();
    let event =
        match by_name.as_slice() {
            [one] => one.event.clone(),
            [] => {
                let names: Vec<String> =
                    parent.events.iter().map(|e| e.event.signature()).collect();
                checker.error(
                    Some(&raw.spans[1]),
                    &event_field,
                    format!(
                        "\"{}\" is not an indexed event of {}",
                        raw.event, parent.name
                    ),
                    format!(
                    "use one of: {} (an event left out by its events = [...] must be added there)",
                    names.join(", ")
                ),
                );
                return None;
            }
            _ => {
                checker.error(
                    Some(&raw.spans[1]),
                &event_field,
                format!("\"{}\" names several overloads of {}", raw.event, parent.name),
                "give the full signature, e.g. \"PairCreated(address,address,address,uint256)\"",
            );
                return None;
            }
        };
    let parameter_field = field(&raw.field, "parameter");
    let Some(parameter_index) = event.inputs.iter().position(|p| p.name == raw.parameter) else {
        let names: Vec<String> = event
            .inputs
            .iter()
            .filter(|p| !p.name.is_empty())
            .map(|p| format!("{} ({})", p.name, p.ty))
            .collect();
        checker.error(
            Some(&raw.spans[2]),
            &parameter_field,
            format!(
                "\"{}\" is not a parameter of {}",
                raw.parameter,
                event.signature()
            ),
            format!("use one of: {}", names.join(", ")),
        );
        return None;
    };
    let ty = &event.inputs[parameter_index].ty;
    if ty != "address" {
        checker.error(
            Some(&raw.spans[2]),
            &parameter_field,
            format!("\"{}\" is a {ty}, not an address", raw.parameter),
            "name the parameter that holds the created contract's address",
        );
        return None;
    }
    Some(FactoryConfig {
        contract: parent.name.clone(),
        event,
        parameter: raw.parameter.clone(),
        parameter_index,
    })
}

#[cfg(test)]
mod tests;
