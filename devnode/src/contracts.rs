//! The simulated contracts: fixed addresses, their ABIs (the JSON files in `abis/`) and which events each emits.
//!
//! The addresses do not depend on the seed, so an example `config.toml` can index them on any devnode. The ABI
//! JSON files are the single source of truth: they are embedded here, parsed once, and every generated log is
//! encoded from the parsed `alloy_json_abi::Event` (topic0 is its `selector()`, never a hand-written hash).
//!
//! The default chain emits from [`ALL_CONTRACTS`]. Opt-in contracts ([`ANON`], the [`FACTORY`] and its pairs)
//! come after them in `EMITTERS`, so a chain without them draws exactly the numbers it always drew.

use std::sync::LazyLock;

use alloy_json_abi::{Event, JsonAbi};
use alloy_primitives::{address, Address, B256};

/// The first ERC-20 token (`abis/erc20.json`): emits `Transfer` and `Approval`.
pub const TOKEN_A: Address = address!("a0a0c0ffee000000000000000000000000000001");
/// The second ERC-20 token (`abis/erc20.json`): emits `Transfer` and `Approval`.
pub const TOKEN_B: Address = address!("b0b0c0ffee000000000000000000000000000002");
/// A Uniswap-V2-style pair (`abis/uniswap_v2_pair.json`): emits `Swap` and `Sync`.
pub const PAIR: Address = address!("da1ec0ffee000000000000000000000000000003");
/// A contract with events of every ABI shape (`abis/misc.json`): `Note`, `Batch`, `Order`, anonymous `Ping`.
pub const MISC: Address = address!("d1ffc0ffee000000000000000000000000000004");

/// A contract whose anonymous events collide with its named ones (`abis/anon.json`), emitted only when
/// [`ChainConfig::anon_contract`](super::ChainConfig::anon_contract) is on.
///
/// Named: `Tick` (1 topic), `Deposit`, `Pause`, `Memo` (2 topics), `Move` (3), `Trade` (4). Anonymous: `Beat`
/// (0 topics), `Skim` (2), `Sweep` (4). Every log of `Deposit` and `Memo` has `Skim`'s topic count and data
/// that decodes as `Skim`, every `Trade` decodes as `Sweep`, and `Tick`'s data has `Beat`'s layout: only the
/// selector in topic0 says which event a log is. `Pause` has `Skim`'s topic count but data too short for it.
/// `Memo` is there to be left out of a config (a named event present in the ABI but not indexed).
pub const ANON: Address = address!("a404c0ffee000000000000000000000000000005");

/// A Uniswap V2 factory (`abis/uniswap_v2_factory.json`), emitted only when
/// [`ChainConfig::factory`](super::ChainConfig::factory) is set: it emits `PairCreated` for pairs created over
/// the chain, whose addresses depend on the seed and which then emit the pair's events
/// (`abis/uniswap_v2_pair.json`: `Transfer`, `Approval`, `Mint`, `Burn`, `Swap`, `Sync`).
pub const FACTORY: Address = address!("fac7c0ffee000000000000000000000000000006");

/// Every contract address of the default chain, in the order above (opt-in contracts such as [`ANON`] are
/// not in it).
pub const ALL_CONTRACTS: [Address; 4] = [TOKEN_A, TOKEN_B, PAIR, MISC];

/// `abis/erc20.json`, embedded.
pub const ERC20_ABI_JSON: &str = include_str!("../../abis/erc20.json");
/// `abis/uniswap_v2_pair.json`, embedded.
pub const UNISWAP_V2_PAIR_ABI_JSON: &str = include_str!("../../abis/uniswap_v2_pair.json");
/// `abis/uniswap_v2_factory.json`, embedded.
pub const UNISWAP_V2_FACTORY_ABI_JSON: &str = include_str!("../../abis/uniswap_v2_factory.json");
/// `abis/misc.json`, embedded.
pub const MISC_ABI_JSON: &str = include_str!("../../abis/misc.json");
/// `abis/anon.json`, embedded.
pub const ANON_ABI_JSON: &str = include_str!("../../abis/anon.json");

/// An event shape the generator knows how to fill with values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EventId {
    Transfer,
    Approval,
    Swap,
    Sync,
    Note,
    Batch,
    Order,
    Ping,
    Tick,
    Deposit,
    Pause,
    Memo,
    Move,
    Trade,
    Beat,
    Skim,
    Sweep,
    PairCreated,
    Mint,
    Burn,
}

impl EventId {
    /// The event's name in its ABI file.
    pub(crate) fn name(self) -> &'static str {
        match self {
            EventId::Transfer => "Transfer",
            EventId::Approval => "Approval",
            EventId::Swap => "Swap",
            EventId::Sync => "Sync",
            EventId::Note => "Note",
            EventId::Batch => "Batch",
            EventId::Order => "Order",
            EventId::Ping => "Ping",
            EventId::Tick => "Tick",
            EventId::Deposit => "Deposit",
            EventId::Pause => "Pause",
            EventId::Memo => "Memo",
            EventId::Move => "Move",
            EventId::Trade => "Trade",
            EventId::Beat => "Beat",
            EventId::Skim => "Skim",
            EventId::Sweep => "Sweep",
            EventId::PairCreated => "PairCreated",
            EventId::Mint => "Mint",
            EventId::Burn => "Burn",
        }
    }

    /// The ABI file text that declares the event.
    fn abi_json(self) -> &'static str {
        match self {
            EventId::Transfer | EventId::Approval => ERC20_ABI_JSON,
            EventId::Swap | EventId::Sync | EventId::Mint | EventId::Burn => {
                UNISWAP_V2_PAIR_ABI_JSON
            }
            EventId::PairCreated => UNISWAP_V2_FACTORY_ABI_JSON,
            EventId::Note | EventId::Batch | EventId::Order | EventId::Ping => MISC_ABI_JSON,
            EventId::Tick
            | EventId::Deposit
            | EventId::Pause
            | EventId::Memo
            | EventId::Move
            | EventId::Trade
            | EventId::Beat
            | EventId::Skim
            | EventId::Sweep => ANON_ABI_JSON,
        }
    }
}

/// One (contract, event) pair that logs are drawn from, with its share of ordinary blocks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Emitter {
    /// Emitting contract.
    pub(crate) address: Address,
    /// Event shape.
    pub(crate) event: EventId,
    /// Relative frequency in ordinary blocks (the >10,000-log blocks draw uniformly).
    pub(crate) weight: u32,
}

/// How many of [`EMITTERS`] the default chain emits: those of [`ALL_CONTRACTS`].
pub(crate) const N_DEFAULT_EMITTERS: usize = 10;

/// How many of [`EMITTERS`] a chain with [`ANON`] draws from: the default ones and the anon contract's.
pub(crate) const N_WEIGHTED_EMITTERS: usize = 19;

/// The address of the emitters of a factory's children: a placeholder, the plan gives each log its pair.
pub(crate) const CHILD: Address = Address::ZERO;

/// [`EMITTERS`] index of the [`FACTORY`]'s `PairCreated`.
pub(crate) const PAIR_CREATED: u8 = 19;
/// [`EMITTERS`] index of a pair's `Transfer` (its liquidity token).
pub(crate) const CHILD_TRANSFER: u8 = 20;
/// [`EMITTERS`] index of a pair's `Approval`.
pub(crate) const CHILD_APPROVAL: u8 = 21;
/// [`EMITTERS`] index of a pair's `Mint`.
pub(crate) const CHILD_MINT: u8 = 22;
/// [`EMITTERS`] index of a pair's `Burn`.
pub(crate) const CHILD_BURN: u8 = 23;
/// [`EMITTERS`] index of a pair's `Swap`.
pub(crate) const CHILD_SWAP: u8 = 24;
/// [`EMITTERS`] index of a pair's `Sync`.
pub(crate) const CHILD_SYNC: u8 = 25;

/// Every (contract, event) pair a chain may emit: the default chain's first, then the opt-in [`ANON`]'s, then
/// the opt-in [`FACTORY`]'s and its children's (never drawn by weight: `factory` plans them).
pub(crate) const EMITTERS: [Emitter; 26] = [
    Emitter {
        address: TOKEN_A,
        event: EventId::Transfer,
        weight: 30,
    },
    Emitter {
        address: TOKEN_A,
        event: EventId::Approval,
        weight: 6,
    },
    Emitter {
        address: TOKEN_B,
        event: EventId::Transfer,
        weight: 20,
    },
    Emitter {
        address: TOKEN_B,
        event: EventId::Approval,
        weight: 4,
    },
    Emitter {
        address: PAIR,
        event: EventId::Swap,
        weight: 12,
    },
    Emitter {
        address: PAIR,
        event: EventId::Sync,
        weight: 12,
    },
    Emitter {
        address: MISC,
        event: EventId::Note,
        weight: 5,
    },
    Emitter {
        address: MISC,
        event: EventId::Batch,
        weight: 4,
    },
    Emitter {
        address: MISC,
        event: EventId::Order,
        weight: 4,
    },
    Emitter {
        address: MISC,
        event: EventId::Ping,
        weight: 3,
    },
    // Opt-in: `ChainConfig::anon_contract`. Weights make each event a few hundred logs in 10,000 blocks.
    Emitter {
        address: ANON,
        event: EventId::Tick,
        weight: 3,
    },
    Emitter {
        address: ANON,
        event: EventId::Deposit,
        weight: 3,
    },
    Emitter {
        address: ANON,
        event: EventId::Pause,
        weight: 2,
    },
    Emitter {
        address: ANON,
        event: EventId::Memo,
        weight: 3,
    },
    Emitter {
        address: ANON,
        event: EventId::Move,
        weight: 3,
    },
    Emitter {
        address: ANON,
        event: EventId::Trade,
        weight: 3,
    },
    Emitter {
        address: ANON,
        event: EventId::Beat,
        weight: 3,
    },
    Emitter {
        address: ANON,
        event: EventId::Skim,
        weight: 3,
    },
    Emitter {
        address: ANON,
        event: EventId::Sweep,
        weight: 3,
    },
    // Opt-in: `ChainConfig::factory`. Planned by `factory`, not drawn by weight; a child's address is its pair's.
    Emitter {
        address: FACTORY,
        event: EventId::PairCreated,
        weight: 0,
    },
    Emitter {
        address: CHILD,
        event: EventId::Transfer,
        weight: 0,
    },
    Emitter {
        address: CHILD,
        event: EventId::Approval,
        weight: 0,
    },
    Emitter {
        address: CHILD,
        event: EventId::Mint,
        weight: 0,
    },
    Emitter {
        address: CHILD,
        event: EventId::Burn,
        weight: 0,
    },
    Emitter {
        address: CHILD,
        event: EventId::Swap,
        weight: 0,
    },
    Emitter {
        address: CHILD,
        event: EventId::Sync,
        weight: 0,
    },
];

/// The emitters of a chain: the default chain's, or with the opt-in [`ANON`] contract's after them.
pub(crate) fn emitters(anon_contract: bool) -> &'static [Emitter] {
    if anon_contract {
        &EMITTERS[..N_WEIGHTED_EMITTERS]
    } else {
        &EMITTERS[..N_DEFAULT_EMITTERS]
    }
}

/// A parsed event and its topic0.
#[derive(Debug)]
pub(crate) struct ParsedEvent {
    /// The ABI item.
    pub(crate) abi: Event,
    /// `keccak256(signature)`, or `None` for an anonymous event (it has no topic0).
    pub(crate) topic0: Option<B256>,
}

/// The parsed events, indexed like [`EMITTERS`].
static PARSED: LazyLock<Vec<ParsedEvent>> = LazyLock::new(|| {
    EMITTERS
        .iter()
        .map(|emitter| {
            let name = emitter.event.name();
            // These files are compiled into the binary; a unit test parses each, so this cannot fail at run time.
            let abi: JsonAbi =
                serde_json::from_str(emitter.event.abi_json()).unwrap_or_else(|err| {
                    panic!("embedded ABI declaring {name} does not parse: {err}")
                });
            let abi = abi
                .events
                .get(name)
                .and_then(|overloads| overloads.first())
                .cloned()
                .unwrap_or_else(|| panic!("embedded ABI does not declare event {name}"));
            let topic0 = (!abi.anonymous).then(|| abi.selector());
            ParsedEvent { abi, topic0 }
        })
        .collect()
});

/// The parsed event of emitter `idx` (an index into [`EMITTERS`]).
pub(crate) fn parsed(idx: usize) -> &'static ParsedEvent {
    &PARSED[idx]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_abi_parses_and_declares_its_events() {
        for (idx, emitter) in EMITTERS.iter().enumerate() {
            let event = parsed(idx);
            assert_eq!(event.abi.name, emitter.event.name());
            assert_eq!(
                event.abi.anonymous,
                matches!(
                    emitter.event,
                    EventId::Ping | EventId::Beat | EventId::Skim | EventId::Sweep
                ),
                "{}",
                emitter.event.name()
            );
        }
    }

    #[test]
    fn the_default_chain_emits_from_the_four_default_contracts_only() {
        let default = emitters(false);
        assert_eq!(default.len(), N_DEFAULT_EMITTERS);
        assert!(default.iter().all(|e| ALL_CONTRACTS.contains(&e.address)));
        assert!(EMITTERS[N_DEFAULT_EMITTERS..N_WEIGHTED_EMITTERS]
            .iter()
            .all(|e| e.address == ANON));
        assert_eq!(emitters(true).len(), N_WEIGHTED_EMITTERS);
        assert!(EMITTERS[N_WEIGHTED_EMITTERS..]
            .iter()
            .all(|e| e.weight == 0 && [FACTORY, CHILD].contains(&e.address)));
    }

    /// The anon contract's ABI is shaped so that named and anonymous events collide: this pins the topic
    /// counts the collisions rely on (see [`ANON`]).
    #[test]
    fn the_anon_contracts_events_have_the_colliding_topic_counts() {
        let topics = |name: &str| {
            let idx = EMITTERS
                .iter()
                .position(|e| e.address == ANON && e.event.name() == name)
                .unwrap_or_else(|| panic!("{name} is emitted"));
            let event = &parsed(idx).abi;
            let n_indexed = event.inputs.iter().filter(|p| p.indexed).count();
            (n_indexed + usize::from(!event.anonymous), event.anonymous)
        };
        assert_eq!(topics("Tick"), (1, false));
        assert_eq!(topics("Deposit"), (2, false));
        assert_eq!(topics("Pause"), (2, false));
        assert_eq!(topics("Memo"), (2, false));
        assert_eq!(topics("Move"), (3, false));
        assert_eq!(topics("Trade"), (4, false));
        assert_eq!(topics("Beat"), (0, true));
        assert_eq!(topics("Skim"), (2, true));
        assert_eq!(topics("Sweep"), (4, true));
    }

    #[test]
    fn topic0_is_the_keccak_of_the_canonical_signature() {
        let transfer = parsed(0);
        assert_eq!(
            transfer.abi.signature(),
            "Transfer(address,address,uint256)"
        );
        assert_eq!(
            transfer.topic0,
            Some(alloy_primitives::b256!(
                "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
            ))
        );
        assert_eq!(parsed(5).abi.signature(), "Sync(uint112,uint112)");
        assert_eq!(parsed(9).topic0, None);
        let pair_created = parsed(usize::from(PAIR_CREATED));
        assert_eq!(
            pair_created.abi.signature(),
            "PairCreated(address,address,address,uint256)"
        );
        assert_eq!(
            pair_created.topic0,
            Some(alloy_primitives::b256!(
                "0d3648bd0f6ba80134a33ba9275ac585d9d315f0ad8355cddefde31afa28d0e9"
            ))
        );
        for (idx, signature) in [
            (CHILD_TRANSFER, "Transfer(address,address,uint256)"),
            (CHILD_APPROVAL, "Approval(address,address,uint256)"),
            (CHILD_MINT, "Mint(address,uint256,uint256)"),
            (CHILD_BURN, "Burn(address,uint256,uint256,address)"),
            (
                CHILD_SWAP,
                "Swap(address,uint256,uint256,uint256,uint256,address)",
            ),
            (CHILD_SYNC, "Sync(uint112,uint112)"),
        ] {
            assert_eq!(parsed(usize::from(idx)).abi.signature(), signature);
        }
    }

    /// The ABI files of the factory and its pairs are the real Uniswap V2 ones: every event the pairs emit is
    /// declared in the pair's file, with its functions beside them.
    #[test]
    fn the_uniswap_v2_abi_files_parse_with_their_events() {
        let pair: JsonAbi = serde_json::from_str(UNISWAP_V2_PAIR_ABI_JSON).expect("pair ABI");
        let mut names: Vec<&str> = pair.events.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(
            names,
            ["Approval", "Burn", "Mint", "Swap", "Sync", "Transfer"]
        );
        assert!(pair.functions.contains_key("getReserves"));
        let factory: JsonAbi =
            serde_json::from_str(UNISWAP_V2_FACTORY_ABI_JSON).expect("factory ABI");
        assert_eq!(factory.events.len(), 1);
        assert!(factory.functions.contains_key("createPair"));
    }
}
