//! `filters` tests: whole configs through `load_str` (each error's full text), and property tests of the
//! value encoding against alloy's ABI encoder, an implementation independent of ours.

use std::path::Path;

use alloy_dyn_abi::{DynSolType, DynSolValue};
use alloy_primitives::{keccak256, B256, I256, U256};
use proptest::prelude::*;

use super::{record, topic, EventFilter, Written};
use crate::config::{load_str, Config, ConfigErrors};

const TRANSFER: &str = "event Transfer(address indexed from, address indexed to, uint256 value)";
const KINDS: &str = "event Kinds(uint8 indexed small, int64 indexed signed, bytes32 indexed id)";
const FLAGS: &str = "event Flags(bool indexed on, string indexed label, bytes indexed blob)";
const A1: &str = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48";
const A2: &str = "0xdac17f958d2ee523a2206206994597c13d831ec7";

/// A config with one contract `c` at `A1` indexing `events`, with `filters = <filters>`, plus `extra`.
fn config(events: &[&str], filters: &str, extra: &str) -> String {
    let events: Vec<String> = events.iter().map(|e| format!("\"{e}\"")).collect();
    format!(
        "[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\n\
         [[contracts]]\nname = \"c\"\naddress = \"{A1}\"\nevents = [{}]\nfilters = {filters}\n{extra}",
        events.join(", ")
    )
}

fn load(text: &str) -> Result<Config, ConfigErrors> {
    load_str(Path::new("config.toml"), text, &|name| {
        (name == "WHO").then(|| A2.to_owned())
    })
}

fn check_filters(text: &str, expected: &[EventFilter]) {
    match load(text) {
        Ok(config) => assert_eq!(config.contracts[0].filters, expected, "{text}"),
        Err(errors) => panic!("expected a valid config, got:\n{errors}\n--- config:\n{text}"),
    }
}

fn check_errors(text: &str, expected: &[&str]) {
    let errors = match load(text) {
        Ok(_) => panic!("expected errors, the config loaded:\n{text}"),
        Err(ConfigErrors(errors)) => errors,
    };
    let actual: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(actual, expected, "\n--- config:\n{text}");
}

fn word(hex: &str) -> B256 {
    let mut out = [0u8; 32];
    let bytes = alloy_primitives::hex::decode(hex).unwrap();
    out[32 - bytes.len()..].copy_from_slice(&bytes);
    B256::from(out)
}

fn filter(signature: &str, topics: [Option<Vec<B256>>; 3]) -> EventFilter {
    EventFilter {
        signature: signature.to_owned(),
        selector: keccak256(signature.as_bytes()),
        topics,
    }
}

#[test]
fn typed_values_become_the_topics_the_node_is_asked_for() {
    // OR within a list (sorted, deduplicated), AND across parameters, ${VAR} interpolated.
    check_filters(
        &config(
            &[TRANSFER],
            &format!(
                "{{ Transfer = {{ to = [\"{A2}\", \"${{WHO}}\", \"{A1}\"], from = [\"{A1}\"] }} }}"
            ),
            "",
        ),
        &[filter(
            "Transfer(address,address,uint256)",
            [
                Some(vec![word(&A1[2..])]),
                Some(vec![word(&A1[2..]), word(&A2[2..])]),
                None,
            ],
        )],
    );
    let mut id = [0u8; 32];
    id[0] = 0xab;
    check_filters(
        &config(
            &[KINDS],
            &format!("{{ Kinds = {{ small = [3, \"0x02\", \"255\"], signed = [-1], id = [\"0xab{}\"] }} }}", "00".repeat(31)),
            "",
        ),
        &[filter(
            "Kinds(uint8,int64,bytes32)",
            [
                Some(vec![word("02"), word("03"), word("ff")]),
                Some(vec![B256::repeat_byte(0xff)]),
                Some(vec![B256::from(id)]),
            ],
        )],
    );
    check_filters(
        &config(
            &[FLAGS],
            "{ Flags = { on = [true], label = [\"gm\"], blob = [\"0x0102\"] } }",
            "",
        ),
        &[filter(
            "Flags(bool,string,bytes)",
            [
                Some(vec![word("01")]),
                Some(vec![keccak256("gm")]),
                Some(vec![keccak256([1u8, 2])]),
            ],
        )],
    );
}

#[test]
fn every_bad_filter_is_reported_with_its_field_and_fix() {
    check_errors(
        &config(
            &[TRANSFER, KINDS],
            "{ Transfer = { value = [1], to = [\"0x12\", 5], owner = [\"0x00\"] }, Kinds = { small = [256, -1, \"x\"], signed = [\"-9223372036854775809\"], id = [\"0x12\", true] }, Approval = { owner = [] } }",
            "",
        ),
        &[
            "config.toml:9: contracts[0].filters.Approval: \"Approval\" is not an event this contract indexes (filter one of: Transfer, Kinds)",
            "config.toml:9: contracts[0].filters.Kinds.id[0]: \"0x12\" is not a bytes32 value (write 0x and 64 hex digits)",
            "config.toml:9: contracts[0].filters.Kinds.id[1]: true is not a bytes32 value (write it in double quotes: \"0x\" and 64 hex digits)",
            "config.toml:9: contracts[0].filters.Kinds.signed[0]: \"-9223372036854775809\" does not fit in int64 (write a whole number from -9223372036854775808 to 9223372036854775807 (in quotes above 2^63))",
            "config.toml:9: contracts[0].filters.Kinds.small[0]: 256 does not fit in uint8 (write a whole number from 0 to 255 (in quotes, as decimal or 0x hex, above 2^63))",
            "config.toml:9: contracts[0].filters.Kinds.small[1]: -1 is not a uint8 (write a whole number from 0 to 255 (in quotes, as decimal or 0x hex, above 2^63))",
            "config.toml:9: contracts[0].filters.Kinds.small[2]: \"x\" is not a uint8 (write a whole number from 0 to 255 (in quotes, as decimal or 0x hex, above 2^63))",
            "config.toml:9: contracts[0].filters.Transfer.owner: Transfer(address,address,uint256) has no parameter \"owner\" (filter by an indexed parameter (from, to))",
            "config.toml:9: contracts[0].filters.Transfer.to[0]: \"0x12\" is not a 20-byte address (write 0x and 40 hex digits)",
            "config.toml:9: contracts[0].filters.Transfer.to[1]: 5 is not an address (write it in double quotes: \"0x\" and 40 hex digits)",
            "config.toml:9: contracts[0].filters.Transfer.value: \"value\" of Transfer(address,address,uint256) is not indexed, so the node cannot filter by it (filter by an indexed parameter (from, to), or remove it)",
        ],
    );
    check_errors(
        &config(&[TRANSFER], "{ Transfer = { to = [] } }", ""),
        &["config.toml:9: contracts[0].filters.Transfer.to: is empty, so no log would match (give at least one value, or remove it)"],
    );
    check_errors(
        &config(&[TRANSFER], "{ Transfer = { to = \"0x00\" } }", ""),
        &["config.toml:9: contracts[0].filters.Transfer.to: is a string, not a list (write to = [value, ...] (a log matches when it holds any of them))"],
    );
    check_errors(
        &config(&[TRANSFER], "{ Transfer = {} }", ""),
        &["config.toml:9: contracts[0].filters.Transfer: names no parameter (filter by an indexed parameter (from, to), or remove it)"],
    );
    check_errors(
        &config(&[TRANSFER], "[\"Transfer\"]", ""),
        &["config.toml:9: contracts[0].filters: is a array, not a table (write filters = { Transfer = { to = [\"0x...\"] } })"],
    );
    check_errors(
        &config(
            &[TRANSFER, "event Ping(uint256 indexed n) anonymous"],
            "{ Transfer = { to = [\"0x0000000000000000000000000000000000000001\"] } }",
            "",
        ),
        &["config.toml:9: contracts[0].filters: cannot be combined with the anonymous event Ping, which takes any log of its topic count (leave the anonymous event out with events = [...], or remove filters)"],
    );
    check_errors(
        &config(
            &["event Many(uint256[] indexed ids)"],
            "{ Many = { ids = [\"1\"] } }",
            "",
        ),
        &["config.toml:9: contracts[0].filters.Many.ids[0]: a uint256[] parameter cannot be filtered (its topic is the hash of its encoding) (filter by an address, number, bool, bytesN, string or bytes parameter)"],
    );
    // A filtered contract shares no address with another entry.
    check_errors(
        &config(
            &[TRANSFER],
            "{ Transfer = { to = [\"0x0000000000000000000000000000000000000001\"] } }",
            &format!("[[contracts]]\nname = \"d\"\naddresses = [\"{A2}\", \"{A1}\"]\nevents = [\"{TRANSFER}\"]\n"),
        ),
        &[&format!("config.toml:9: contracts[0].filters: address {A1} is also indexed by contracts[1], so the node's logs for it would reach this contract's filtered tables unfiltered (index the address in one [[contracts]] entry)")],
    );
}

#[test]
fn the_record_is_the_same_for_values_that_encode_alike() {
    let record_of = |filters: &str| {
        let config = load(&config(&[KINDS], filters, "")).unwrap();
        record(&config.contracts[0].filters)
    };
    assert_eq!(
        record_of("{ Kinds = { small = [1, 2] } }"),
        record_of("{ Kinds = { small = [\"0x02\", \"1\", 1] } }")
    );
    assert_ne!(
        record_of("{ Kinds = { small = [1] } }"),
        record_of("{ Kinds = { small = [2] } }")
    );
    assert_eq!(record(&[]), None);
}

#[test]
fn a_filter_matches_the_topics_it_asks_for() {
    let f = filter(
        "Transfer(address,address,uint256)",
        [None, Some(vec![word("01"), word("02")]), None],
    );
    let t0 = f.selector;
    assert!(f.matches(&[t0, word("09"), word("02")]));
    assert!(!f.matches(&[t0, word("09"), word("03")]));
    assert!(!f.matches(&[word("05"), word("09"), word("02")]));
    assert!(!f.matches(&[t0, word("09")]));
}

/// The word alloy's ABI encoder gives a value type (what a Solidity contract emits as the topic).
fn encoded(value: DynSolValue) -> B256 {
    B256::from_slice(&value.abi_encode())
}

proptest! {
    #[test]
    fn uints_encode_as_the_abi_does(bits in (1usize..=32).prop_map(|n| n * 8), limbs in any::<[u64; 4]>(), as_hex in any::<bool>()) {
        let value = U256::from_limbs(limbs) >> (256 - bits);
        let text = if as_hex { format!("0x{value:x}") } else { value.to_string() };
        let ty = DynSolType::Uint(bits);
        prop_assert_eq!(topic(&ty, Written::Text(&text)), Ok(encoded(DynSolValue::Uint(value, bits))));
        if let Ok(small) = i64::try_from(value) {
            prop_assert_eq!(topic(&ty, Written::Integer(small)), Ok(encoded(DynSolValue::Uint(value, bits))));
        }
        if bits < 256 {
            let over = (value | (U256::from(1u8) << (bits - 1))) + (U256::from(1u8) << (bits - 1));
            prop_assert!(topic(&ty, Written::Text(&over.to_string())).is_err());
        }
    }

    #[test]
    fn ints_encode_in_twos_complement_as_the_abi_does(bits in (1usize..=32).prop_map(|n| n * 8), limbs in any::<[u64; 4]>()) {
        // Any value of the type: the raw word, sign-extended from `bits`.
        let shift = 256 - bits;
        let value = I256::from_raw(U256::from_limbs(limbs) << shift).asr(shift);
        let ty = DynSolType::Int(bits);
        prop_assert_eq!(topic(&ty, Written::Text(&value.to_string())), Ok(encoded(DynSolValue::Int(value, bits))));
        if let Ok(small) = i64::try_from(value) {
            prop_assert_eq!(topic(&ty, Written::Integer(small)), Ok(encoded(DynSolValue::Int(value, bits))));
        }
    }

    #[test]
    fn fixed_bytes_are_left_aligned_as_the_abi_does(bytes in prop::collection::vec(any::<u8>(), 1..=32)) {
        let size = bytes.len();
        let text = format!("0x{}", alloy_primitives::hex::encode(&bytes));
        let expected = encoded(DynSolValue::FixedBytes(B256::right_padding_from(&bytes), size));
        prop_assert_eq!(topic(&DynSolType::FixedBytes(size), Written::Text(&text)), Ok(expected));
        if size < 32 {
            prop_assert!(topic(&DynSolType::FixedBytes(size + 1), Written::Text(&text)).is_err());
        }
    }

    #[test]
    fn strings_and_bytes_are_hashed(text in ".{0,40}", bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        prop_assert_eq!(topic(&DynSolType::String, Written::Text(&text)), Ok(keccak256(text.as_bytes())));
        let hex = format!("0x{}", alloy_primitives::hex::encode(&bytes));
        prop_assert_eq!(topic(&DynSolType::Bytes, Written::Text(&hex)), Ok(keccak256(&bytes)));
    }
}
