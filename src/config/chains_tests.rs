//! `[chains.NAME]` tables and contracts on chains: what loads, the view each chain's pipeline reads, and
//! every error a config with chains can hold, each named with its field and fix.

use std::time::Duration;

use super::*;

fn env(name: &str) -> Option<String> {
    (name == "KEY").then(|| "SECRET-KEY-abc".to_owned())
}

const TRANSFER: &str =
    "events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]";
const APPROVAL: &str =
    "events = [\"event Approval(address indexed owner, address indexed spender, uint256 value)\"]";

/// Two chains and `rest` (contracts).
fn two_chains(rest: &str) -> String {
    format!(
        r#"[chains.mainnet]
url = "https://mainnet.example/v3/${{KEY}}"
chain_id = 1
finality = 12
[chains.base]
url = "sim://?chain_id=8453"
poll_interval = "250ms"
start_block = 7

[database]
url = "sqlite::memory:"

[sync]
max_reorg_depth = 64

{rest}"#
    )
}

/// A `[[contracts]]` entry.
fn contract(name: &str, chain: Option<&str>, address: &str, events: &str) -> String {
    let chain = chain.map_or(String::new(), |c| format!("chain = \"{c}\"\n"));
    format!("[[contracts]]\nname = \"{name}\"\n{chain}address = \"{address}\"\n{events}\n\n")
}

const A: &str = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48";
const B: &str = "0x833589fcd6edb6e08f4c7c32d4f71b54bda02913";

fn load(text: &str) -> Result<Config, ConfigErrors> {
    load_str(std::path::Path::new("/cfg/config.toml"), text, &env)
}

fn errors(text: &str) -> Vec<String> {
    match load(text) {
        Ok(_) => panic!("expected errors, the config loaded:\n{text}"),
        Err(ConfigErrors(errors)) => errors.iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn two_chains_load_in_file_order_with_their_overrides() {
    let text = two_chains(&format!(
        "{}{}",
        contract("usdc", Some("mainnet"), A, TRANSFER),
        contract("usdc", Some("base"), B, TRANSFER)
    ));
    let config = load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.is_multichain());
    assert_eq!(config.chain_names(), ["mainnet", "base"]);
    let mainnet = &config.chains[0];
    assert_eq!(mainnet.chain_id, Some(1));
    assert_eq!(mainnet.finality, Finality::Confirmations(12));
    assert_eq!(mainnet.max_reorg_depth, 64);
    assert_eq!(mainnet.poll_interval, DEFAULT_POLL_INTERVAL);
    let base = &config.chains[1];
    assert_eq!(base.chain_id, None);
    assert_eq!(base.finality, Finality::Finalized);
    assert_eq!(base.poll_interval, Duration::from_millis(250));
    assert_eq!(base.start_block, 7);
    assert_eq!(
        config.contracts[1].start_block, 7,
        "the chain's start_block"
    );
    assert_eq!(config.contracts[0].start_block, 0);

    let view = config.for_chain("base").expect("a chain");
    assert!(!view.is_multichain());
    assert_eq!(view.chains[0].name, "base");
    assert_eq!(
        view.node.providers[0].endpoint,
        Endpoint::Sim("sim://?chain_id=8453".into())
    );
    assert_eq!(view.sync.poll_interval, Duration::from_millis(250));
    assert_eq!(view.sync.start_block, 7);
    assert_eq!(view.contracts.len(), 1);
    assert_eq!(view.contracts[0].chain, "base");
    assert_eq!(view.contracts[0].addresses[0].to_string().to_lowercase(), B);
    let view = config.for_chain("mainnet").expect("a chain");
    assert_eq!(view.sync.finality, Finality::Confirmations(12));
    assert_eq!(view.node.providers[0].name, "mainnet.example");
    assert!(config.for_chain("arbitrum").is_none());
}

#[test]
fn node_alone_is_the_chain_named_default() {
    let text = format!(
        "[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n{}",
        contract("usdc", None, A, TRANSFER)
    );
    let config = load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(!config.is_multichain());
    assert_eq!(config.chain_names(), [DEFAULT_CHAIN]);
    assert_eq!(config.contracts[0].chain, DEFAULT_CHAIN);
    let view = config.for_chain(DEFAULT_CHAIN).expect("the one chain");
    assert_eq!(view.contracts.len(), 1);
    // `chain = "default"` names it too.
    let text = text.replace(
        "name = \"usdc\"\n",
        "name = \"usdc\"\nchain = \"default\"\n",
    );
    assert!(load(&text).is_ok());
}

#[test]
fn one_chain_table_needs_no_chain_on_its_contracts() {
    let text = format!(
        "[chains.base]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n{}",
        contract("usdc", None, A, TRANSFER)
    );
    let config = load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.contracts[0].chain, "base");
}

#[test]
fn refuses_node_together_with_chains() {
    let text = format!(
        "[node]\nurl = \"sim://\"\n{}",
        two_chains(&contract("usdc", Some("mainnet"), A, TRANSFER))
    );
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml:3: chains: is given together with [node] (keep one: [node] for one chain, or move [node]'s keys into a [chains.NAME] table per chain)"]
    );
}

#[test]
fn refuses_a_contract_without_chain_when_there_are_several() {
    let text = two_chains(&contract("usdc", None, A, TRANSFER));
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml:16: contracts[0].chain: is missing, and the config has several chains (name the contract's chain: chain = one of \"mainnet\", \"base\")"]
    );
}

#[test]
fn refuses_a_chain_that_is_not_defined() {
    let text = two_chains(&contract("usdc", Some("arbitrum"), A, TRANSFER));
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml:18: contracts[0].chain: \"arbitrum\" is not a chain of this config (define [chains.arbitrum], or use one of \"mainnet\", \"base\")"]
    );
    let text = format!(
        "[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n{}",
        contract("usdc", Some("base"), A, TRANSFER)
    );
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml:7: contracts[0].chain: \"base\" is not a chain of this config (remove chain (the config's one chain is [node], named \"default\"), or write the chains as [chains.NAME] tables)"]
    );
}

#[test]
fn refuses_two_chains_with_one_chain_id() {
    let text = two_chains(&contract("usdc", Some("mainnet"), A, TRANSFER))
        .replace("poll_interval = \"250ms\"", "chain_id = 1");
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml:7: chains.base.chain_id: 1 is also the chain id of chains.mainnet (index each chain once: remove one of the two tables, or correct the id)"]
    );
}

#[test]
fn refuses_a_bad_chain_id_and_name() {
    let text = two_chains(&contract("usdc", Some("mainnet"), A, TRANSFER))
        .replace("chain_id = 1", "chain_id = \"1\"")
        .replace("[chains.base]", "[chains.\"base chain\"]");
    assert_eq!(
        errors(&text),
        [
            "/cfg/config.toml:3: chains.mainnet.chain_id: is a string, not an integer (write the chain's eth_chainId as a whole number, e.g. chain_id = 1)",
            "/cfg/config.toml:5: chains.base chain: \"base chain\" is not a chain name (name the chain with letters, digits, _ and -, e.g. [chains.mainnet])",
        ]
    );
}

#[test]
fn the_same_name_on_two_chains_needs_the_same_events() {
    let text = two_chains(&format!(
        "{}{}",
        contract("usdc", Some("mainnet"), A, TRANSFER),
        contract("usdc", Some("base"), B, APPROVAL)
    ));
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml: contracts[1].name: \"usdc\" on chain base has other events than contracts[0] on chain mainnet, and both would share its tables (give both entries the same abi and events, or give one another name)"]
    );
    let text = two_chains(&format!(
        "{}{}",
        contract("usdc", Some("base"), A, TRANSFER),
        contract("USDC", Some("base"), B, TRANSFER)
    ));
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml:23: contracts[1].name: \"USDC\" is also the name of contracts[0] (give each contract its own name (names are compared in snake case))"]
    );
}

#[test]
fn a_factory_is_an_entry_of_its_own_chain() {
    let factory = "[[contracts]]\nname = \"pair\"\nchain = \"base\"\nevents = [\"event Sync(uint112 reserve0, uint112 reserve1)\"]\nfactory = { contract = \"factory\", event = \"PairCreated\", parameter = \"pair\" }\n";
    let text = two_chains(&format!(
        "{}{factory}",
        contract(
            "factory",
            Some("mainnet"),
            A,
            "events = [\"event PairCreated(address indexed token0, address indexed token1, address pair, uint256 n)\"]"
        ),
    ));
    let found = errors(&text);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].contains(
            "contracts[1].factory.contract: \"factory\" is not the name of a [[contracts]] entry"
        ),
        "{found:?}"
    );
    let config = load(&text.replace("chain = \"base\"", "chain = \"mainnet\""))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        config.contracts[1]
            .factory
            .as_ref()
            .map(|f| f.contract.as_str()),
        Some("factory")
    );
}

#[test]
fn a_filtered_address_may_be_indexed_on_another_chain() {
    let filtered = format!("{TRANSFER}\nfilters = {{ Transfer = {{ to = [\"{B}\"] }} }}");
    let text = two_chains(&format!(
        "{}{}",
        contract("usdc", Some("mainnet"), A, &filtered),
        contract("usdc", Some("base"), A, TRANSFER)
    ));
    assert!(load(&text).is_ok(), "{:?}", load(&text).err());
    let text = two_chains(&format!(
        "{}{}",
        contract("usdc", Some("mainnet"), A, &filtered),
        contract("other", Some("mainnet"), A, APPROVAL)
    ));
    let found = errors(&text);
    assert!(
        found[0].contains("is also indexed by contracts[1]"),
        "{found:?}"
    );
}

#[test]
fn refuses_a_chains_own_keys_in_node() {
    let text = format!(
        "[node]\nurl = \"sim://\"\nchain_id = 1\npoll_interval = \"1s\"\n[database]\nurl = \"sqlite::memory:\"\n{}",
        contract("usdc", None, A, TRANSFER)
    );
    assert_eq!(
        errors(&text),
        [
            "/cfg/config.toml:3: node.chain_id: is a key of a [chains.NAME] table, not of [node] (remove it (the database records the chain id on the first sync), or write the chain as a [chains.NAME] table instead of [node])",
            "/cfg/config.toml:4: node.poll_interval: is a key of a [chains.NAME] table, not of [node] (move it to [sync] (it is the one chain's), or write the chain as a [chains.NAME] table with poll_interval)",
        ]
    );
}

#[test]
fn a_chain_table_takes_providers_and_reports_unknown_keys_and_bad_values() {
    let text = two_chains(&contract("usdc", Some("base"), A, TRANSFER)).replace(
        "[chains.base]\nurl = \"sim://?chain_id=8453\"\npoll_interval = \"250ms\"\nstart_block = 7\n",
        "[chains.base]\nmax_concurency = 4\nmax_reorg_depth = 0\n[[chains.base.providers]]\nurl = \"sim://\"\n[[chains.base.providers]]\nname = \"second\"\nurl = \"sim://?seed=2\"\nrequests_per_second = 0\n",
    );
    assert_eq!(
        errors(&text),
        [
            "/cfg/config.toml:6: chains.base.max_concurency: unknown key \"max_concurency\" (did you mean \"max_concurrency\"?)",
            "/cfg/config.toml:13: chains.base.providers[1].requests_per_second: 0 is below the minimum 1 (set it to 1 or more)",
            "/cfg/config.toml:7: chains.base.max_reorg_depth: 0 is below the minimum 1 (set it to 1 or more)",
        ]
    );
    let text = text
        .replace("max_concurency = 4\nmax_reorg_depth = 0\n", "")
        .replace("requests_per_second = 0", "requests_per_second = 5");
    let config = load(&text).unwrap_or_else(|e| panic!("{e}"));
    let base = config.for_chain("base").expect("a chain");
    assert_eq!(base.node.providers.len(), 2);
    assert_eq!(base.node.providers[1].requests_per_second, 5);
}

#[test]
fn a_chains_confirmations_stay_within_its_reorg_window() {
    let text = two_chains(&contract("usdc", Some("mainnet"), A, TRANSFER))
        .replace("finality = 12", "finality = 100");
    assert_eq!(
        errors(&text),
        ["/cfg/config.toml:4: chains.mainnet.finality: 100 confirmations is more than sync.max_reorg_depth (64), the blocks whose hashes are kept to detect a reorg (raise sync.max_reorg_depth to at least 100, or lower finality)"]
    );
    let text = text.replace("finality = 100", "finality = 100\nmax_reorg_depth = 100");
    assert!(load(&text).is_ok(), "{:?}", load(&text).err());
}
