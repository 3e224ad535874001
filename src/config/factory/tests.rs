use std::path::Path;

use crate::config::{load_str, ConfigError};

const FACTORY: &str = r#"
[[contracts]]
name = "uniswap_v2_factory"
address = "0x5c69bee701ef814a2b6a3edd4b1652cb9cc5aa6f"
start_block = 100
events = ["event PairCreated(address indexed token0, address indexed token1, address pair, uint256 index)"]
"#;

fn load(contracts: &str) -> Result<crate::config::Config, Vec<ConfigError>> {
    let text =
        format!("[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n{contracts}");
    load_str(Path::new("config.toml"), &text, &|_| None).map_err(|errors| errors.0)
}

fn child(factory: &str, extra: &str) -> String {
    format!(
        "[[contracts]]\nname = \"pair\"\nevents = [\"event Sync(uint112 reserve0, uint112 reserve1)\"]\n\
         factory = {factory}\n{extra}"
    )
}

/// The single error of a config, as (field, problem).
fn only_error(contracts: &str) -> (String, String) {
    let errors = load(contracts).expect_err("the config is refused");
    assert_eq!(errors.len(), 1, "{errors:#?}");
    (errors[0].field.clone(), errors[0].problem.clone())
}

const PAIR: &str =
    r#"{ contract = "uniswap_v2_factory", event = "PairCreated", parameter = "pair" }"#;

#[test]
fn a_child_contract_resolves_to_the_factorys_event_and_parameter() {
    // The child comes first in the file: resolution waits until every entry is read.
    let config = load(&format!("{}{FACTORY}", child(PAIR, ""))).expect("valid");
    let pair = &config.contracts[0];
    assert!(pair.addresses.is_empty());
    assert_eq!(pair.start_block, 100, "discovery starts with the factory");
    let factory = pair.factory.as_ref().expect("a factory");
    assert_eq!(factory.contract, "uniswap_v2_factory");
    assert_eq!(factory.event.name, "PairCreated");
    assert_eq!(factory.parameter_index, 2);
    assert!(config.contracts[1].factory.is_none());
}

#[test]
fn every_way_a_factory_can_be_wrong_names_its_field() {
    let cases = [
        (
            child(
                r#"{ contract = "nope", event = "PairCreated", parameter = "pair" }"#,
                "",
            ),
            "contracts[1].factory.contract",
            "not the name",
        ),
        (
            child(
                r#"{ contract = "uniswap_v2_factory", event = "Swap", parameter = "pair" }"#,
                "",
            ),
            "contracts[1].factory.event",
            "not an indexed event",
        ),
        (
            child(
                r#"{ contract = "uniswap_v2_factory", event = "PairCreated", parameter = "pool" }"#,
                "",
            ),
            "contracts[1].factory.parameter",
            "not a parameter",
        ),
        (
            child(
                r#"{ contract = "uniswap_v2_factory", event = "PairCreated", parameter = "index" }"#,
                "",
            ),
            "contracts[1].factory.parameter",
            "not an address",
        ),
        (
            child(
                r#"{ contract = "uniswap_v2_factory", event = "PairCreated", paramter = "pair" }"#,
                "",
            ),
            "contracts[1].factory.paramter",
            "unknown key",
        ),
        (
            child(
                PAIR,
                "address = \"0x0000000000000000000000000000000000000001\"\n",
            ),
            "contracts[1].address",
            "together with factory",
        ),
        (
            child(PAIR, "start_block = 5\n"),
            "contracts[1].start_block",
            "together with factory",
        ),
        (
            child(
                r#"{ contract = "pair", event = "Sync", parameter = "reserve0" }"#,
                "",
            ),
            "contracts[1].factory.contract",
            "names the entry itself",
        ),
        (
            child(PAIR, "filters = { Sync = { reserve0 = [1] } }\n")
                .replace("Sync(uint112 reserve0", "Sync(uint112 indexed reserve0"),
            "contracts[1].filters",
            "together with factory",
        ),
        (
            child(r#""uniswap_v2_factory""#, ""),
            "contracts[1].factory",
            "not a table",
        ),
    ];
    for (child_entry, field, problem) in cases {
        let text = format!("{FACTORY}{child_entry}");
        let errors = load(&text).expect_err("the config is refused");
        assert!(
            errors
                .iter()
                .any(|e| e.field == field && e.problem.contains(problem)),
            "{errors:#?} for {text}"
        );
        // Only the child's entry is blamed (a typo also leaves the right key missing).
        assert!(errors.len() <= 2, "{errors:#?}");
        assert!(
            errors.iter().all(|e| e.field.starts_with("contracts[1]")),
            "{errors:#?}"
        );
    }
}

#[test]
fn factories_of_factories_are_refused() {
    let grandchild = r#"
[[contracts]]
name = "router"
events = ["event Sync(uint112 reserve0, uint112 reserve1)"]
factory = { contract = "pair", event = "Sync", parameter = "reserve0" }
"#;
    let (field, problem) = only_error(&format!("{FACTORY}{}{grandchild}", child(PAIR, "")));
    assert_eq!(field, "contracts[2].factory.contract");
    assert!(problem.contains("itself created by a factory"), "{problem}");
}
