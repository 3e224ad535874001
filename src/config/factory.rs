//! `factory = { contract, event, parameter }` on a `[[contracts]]` entry: the contract's addresses are the
//! children a factory announces in one of its events, found while indexing. Read per entry, then resolved
//! against the other entries once all are read (the factory may come later in the file).

use toml::{Table, Value};

use super::reader::{field, Reader};
use super::{ContractConfig, FactoryConfig};

const FACTORY_KEYS: &[&str] = &["contract", "event", "parameter"];

/// A `factory` table as written, before the contract it names is known.
#[derive(Debug, Clone)]
pub(super) struct RawFactory {
    /// The field it was read from, e.g. `contracts[1].factory`.
    field: String,
    contract: String,
    event: String,
    parameter: String,
}

/// Reads `factory` of `section`; `None` when it is bad (reported). The entry then takes no `address`,
/// `addresses` or `start_block` (reported when given): its children have addresses of their own, and each
/// is indexed from the block of the log that created it.
pub(super) fn read(reader: &mut Reader<'_>, section: &str, entry: &Table) -> Option<RawFactory> {
    let factory_field = field(section, "factory");
    let table = match entry.get("factory")? {
        Value::Table(table) => table,
        other => {
            reader.error(
                &factory_field,
                format!("is a {}, not a table", other.type_str()),
                "write factory = { contract = \"...\", event = \"...\", parameter = \"...\" }",
            );
            return None;
        }
    };
    for (key, why) in [
        ("address", "its children's addresses come from the factory's events"),
        ("addresses", "its children's addresses come from the factory's events"),
        ("start_block", "each child is indexed from the block of the log that created it; the factory contract's own start_block says where discovery starts"),
    ] {
        if entry.contains_key(key) {
            reader.error(
                &field(section, key),
                "is given together with factory",
                format!("remove it: {why}"),
            );
        }
    }
    reader.check_keys(&factory_field, table, FACTORY_KEYS);
    let mut value = |key: &str, example: &str| {
        reader
            .required_string(
                table,
                &factory_field,
                key,
                &format!("write {key} = \"{example}\""),
            )
            .map(|setting| setting.value)
    };
    let contract = value("contract", "uniswap_v2_factory");
    let event = value("event", "PairCreated");
    let parameter = value("parameter", "pair");
    Some(RawFactory {
        field: factory_field,
        contract: contract?,
        event: event?,
        parameter: parameter?,
    })
}

/// Resolves `raw` of `contracts[child]`: the named contract must be another entry with addresses of its
/// own (factories of factories are not supported), the event one of its indexed events, and the parameter an
/// `address` input of that event (indexed or not). `None` when not (reported).
pub(super) fn resolve(
    reader: &mut Reader<'_>,
    contracts: &[ContractConfig],
    child: usize,
    raw: &RawFactory,
) -> Option<FactoryConfig> {
    let contract_field = field(&raw.field, "contract");
    let wanted = crate::decode::snake_case(&raw.contract);
    let Some(parent) = contracts.iter().find(|c| c.name == wanted) else {
        let names: Vec<&str> = contracts.iter().map(|c| c.name.as_str()).collect();
        reader.error(
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
        reader.error(
            &contract_field,
            "names the entry itself",
            "name the factory contract's entry, which has an address",
        );
        return None;
    }
    if parent.factory.is_some() || parent.addresses.is_empty() {
        reader.error(
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
                reader.error(
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
                reader.error(
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
        reader.error(
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
        reader.error(
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
