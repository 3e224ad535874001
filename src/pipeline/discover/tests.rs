use alloy_json_abi::Event;
use alloy_primitives::{Address, Bytes, B256, U256};

use super::{merge, Child, Children, Covered, Factory};
use crate::config::FactoryConfig;
use crate::primitives::{BlockRange, Log};

fn address(n: u8) -> Address {
    Address::repeat_byte(n)
}

fn word(address: Address) -> B256 {
    B256::left_padding_from(address.as_slice())
}

fn log(block: u64, index: u64, emitter: Address, topics: Vec<B256>, data: Vec<u8>) -> Log {
    Log {
        block_number: block,
        block_hash: B256::repeat_byte(block as u8),
        transaction_hash: B256::repeat_byte(0xee),
        transaction_index: 0,
        log_index: index,
        address: emitter,
        topics: topics.into_iter().collect(),
        data: Bytes::from(data),
        removed: false,
        block_timestamp: None,
    }
}

fn factory(signature: &str, parameter: &str) -> Factory {
    let event = Event::parse(signature).expect("a signature");
    let parameter_index = event
        .inputs
        .iter()
        .position(|p| p.name == parameter)
        .expect("the parameter");
    let config = FactoryConfig {
        contract: "factory".into(),
        event,
        parameter: parameter.into(),
        parameter_index,
    };
    Factory::new(&config, 1, 0, vec![address(0xfa)]).expect("resolves")
}

#[test]
fn a_child_address_is_read_from_the_data_or_from_a_topic() {
    // Uniswap V2: PairCreated(address indexed token0, address indexed token1, address pair, uint)
    let pairs = factory(
        "event PairCreated(address indexed token0, address indexed token1, address pair, uint256 index)",
        "pair",
    );
    let mut data = word(address(0x77)).to_vec();
    data.extend(B256::from(U256::from(5)).as_slice());
    let topics = vec![pairs.selector, word(address(1)), word(address(2))];
    let created = log(10, 3, address(0xfa), topics.clone(), data.clone());
    let child = pairs.child_of(&created).expect("a child");
    assert_eq!(
        child,
        Child {
            contract: 1,
            address: address(0x77),
            block_number: 10,
            block_hash: created.block_hash,
            log_index: 3,
            factory_address: address(0xfa),
        }
    );
    // Another emitter, another event, or data that does not decode announce nothing.
    assert_eq!(
        pairs.child_of(&log(10, 3, address(0xfb), topics.clone(), data.clone())),
        None
    );
    let mut other = topics.clone();
    other[0] = B256::repeat_byte(9);
    assert_eq!(
        pairs.child_of(&log(10, 3, address(0xfa), other, data)),
        None
    );
    assert_eq!(
        pairs.child_of(&log(10, 3, address(0xfa), topics, vec![1, 2])),
        None
    );

    // Safe-style: ProxyCreation(address indexed proxy, address singleton)
    let proxies = factory(
        "event ProxyCreation(address indexed proxy, address singleton)",
        "proxy",
    );
    let topics = vec![proxies.selector, word(address(0x55))];
    let child = proxies
        .child_of(&log(
            4,
            0,
            address(0xfa),
            topics,
            word(address(0x66)).to_vec(),
        ))
        .expect("a child");
    assert_eq!(child.address, address(0x55));
}

fn child(n: u8, block: u64) -> Child {
    Child {
        contract: 1,
        address: address(n),
        block_number: block,
        block_hash: B256::ZERO,
        log_index: 0,
        factory_address: address(0xfa),
    }
}

/// [`child`], as a child of the second configured contract.
fn child_of_the_second(n: u8, block: u64) -> Child {
    Child {
        contract: 2,
        ..child(n, block)
    }
}

#[test]
fn a_range_counts_the_children_its_selections_covered() {
    let mut children = Children::default();
    let range = |a, b| BlockRange::new(a, b).expect("a range");
    children.selected(0); // covers none
    assert!(children.register(child(1, 5)));
    assert!(
        !children.register(child(1, 7)),
        "one address, one child per contract"
    );
    children.selected(100); // covers one
    children.selected(200);
    assert!(children.register(child(2, 150)));
    children.selected(150); // a piece of the range from 100, selected later: covers two
    assert_eq!(children.covered(range(0, 99)).registered, 0);
    // The range from 100 was cut in two; each piece counts its own selections and those before it.
    assert_eq!(children.covered(range(100, 149)).registered, 1);
    assert_eq!(
        children.covered(range(150, 199)).registered,
        2,
        "a piece asked for on its own"
    );
    children.selected(250);
    // A range that holds selections made at different times counts the fewest; a piece that was never
    // selected on its own counts the selection it came from.
    assert_eq!(children.covered(range(200, 260)).registered, 1);
    assert_eq!(children.covered(range(261, 300)).registered, 2);
    // Asked again for the same start later, the fewest stands.
    children.selected(301);
    children.register(child(3, 400));
    children.selected(301);
    assert_eq!(children.covered(range(301, 500)).registered, 2);
}

#[test]
fn a_child_emits_for_its_contract_from_the_block_of_its_creating_log() {
    let mut children = Children::default();
    children.register(child(1, 10));
    children.register(child_of_the_second(1, 20));
    assert!(children
        .emitters(&address(1), 9)
        .collect::<Vec<_>>()
        .is_empty());
    assert_eq!(
        children.emitters(&address(1), 10).collect::<Vec<_>>(),
        vec![1]
    );
    assert_eq!(
        children.emitters(&address(1), 20).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(children.addresses_of(1, 9), Vec::<Address>::new());
    assert_eq!(children.addresses_of(1, 10), vec![address(1)]);
}

#[test]
fn each_child_joins_once_registered_or_foreseen() {
    let mut children = Children::default();
    children.register(child(1, 10));
    // Foreseen: one registered already, one new, and the first again for another contract.
    children.foresee(vec![child(1, 10), child(2, 20), child_of_the_second(1, 30)]);
    let mut joins = children.join_blocks();
    joins.sort_unstable();
    assert_eq!(joins, vec![10, 20, 30]);
}

#[test]
fn foreseen_children_are_selected_from_their_block_and_not_filled_in_again() {
    let mut children = Children::default();
    let range = |a, b| BlockRange::new(a, b).expect("a range");
    children.selected(0); // before any reading ahead
    let mut announced_again = child(2, 30);
    announced_again.log_index = 1;
    children.foresee(vec![child(2, 20), announced_again, child(1, 10)]);
    children.selected(100);
    assert_eq!(children.addresses_of(1, 9), Vec::<Address>::new());
    assert_eq!(children.addresses_of(1, 19), vec![address(1)]);
    assert_eq!(children.addresses_of(1, 25), vec![address(1), address(2)]);
    assert_eq!(
        children.addresses_of(2, 25),
        Vec::<Address>::new(),
        "another contract"
    );
    // Registered as the decoding meets it: listed once, not twice.
    assert!(children.register(child(1, 10)));
    assert_eq!(children.addresses_of(1, 25), vec![address(1), address(2)]);

    let before = children.covered(range(0, 99));
    let after = children.covered(range(100, 199));
    assert_eq!(
        after,
        Covered {
            registered: 0,
            foreseen: 1
        }
    );
    assert!(
        !children.was_foreseen(&child(2, 20), before),
        "a selection made before the reading did not have it"
    );
    assert!(children.was_foreseen(&child(2, 20), after));
    assert!(
        children.was_foreseen(&child(2, 40), after),
        "created later than foreseen: every range holding it had it"
    );
    assert!(
        !children.was_foreseen(&child(2, 15), after),
        "created earlier than foreseen: the ranges from 15 to 19 were asked for without it"
    );
    assert!(
        !children.was_foreseen(&child(3, 20), after),
        "never foreseen"
    );

    // A second reading adds to the first; selections made before it do not count its children.
    children.foresee(vec![child(4, 150), child(2, 160)]);
    assert_eq!(
        children.addresses_of(1, 200),
        vec![address(1), address(2), address(4)]
    );
    assert!(!children.was_foreseen(&child(4, 150), after));
    children.selected(200);
    let second = children.covered(range(200, 299));
    assert!(children.was_foreseen(&child(4, 150), second));
    assert!(
        !children.was_foreseen(&child(2, 15), second),
        "foreseen from its first creating log"
    );
}

#[test]
fn filled_logs_merge_in_order_without_duplicates() {
    let at = |block, index| log(block, index, address(1), Vec::new(), Vec::new());
    let mut logs = vec![at(1, 0), at(1, 5), at(3, 0)];
    merge(&mut logs, vec![at(1, 2), at(1, 5), at(2, 0)]).expect("a repeat is no conflict");
    let keys: Vec<(u64, u64)> = logs.iter().map(|l| (l.block_number, l.log_index)).collect();
    assert_eq!(keys, vec![(1, 0), (1, 2), (1, 5), (2, 0), (3, 0)]);
}
