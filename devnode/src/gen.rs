//! Event values and their ABI encoding: what one simulated log says.
//!
//! Values are drawn from a per-log [`Rng`]; encoding goes through `alloy-dyn-abi` (`DynSolValue`) following the
//! parsed ABI item, so topics and data are exactly what a Solidity contract would emit. Nothing here knows about
//! blocks, filters or JSON.

use alloy_dyn_abi::DynSolValue;
use alloy_primitives::{keccak256, Address, B256, I256, U256};

use super::contracts::{EventId, ParsedEvent};
use super::rng::Rng;

/// Strings used as the indexed `topic` of `Note` (few, so that a filter on one hashed topic matches many logs).
pub const NOTE_TOPICS: [&str; 5] = ["gm", "release", "vote", "incident", "déjà vu 🦀"];

/// Words the non-indexed `Note.text` is made of (some non-ASCII, to exercise UTF-8 handling).
const WORDS: [&str; 10] = [
    "alpha",
    "beta",
    "gamma",
    "log",
    "slice",
    "ünïcödé",
    "日本",
    "",
    "0x00",
    "end",
];

/// How many distinct user addresses the chain's transfers move between.
pub(crate) const N_USERS: u64 = 64;

/// The seed's pool of user addresses.
pub(crate) fn user_pool(seed: u64) -> Vec<Address> {
    (0..N_USERS)
        .map(|user_idx| {
            let mut preimage = [0u8; 24];
            preimage[..8].copy_from_slice(b"dn/users");
            preimage[8..16].copy_from_slice(&seed.to_be_bytes());
            preimage[16..].copy_from_slice(&user_idx.to_be_bytes());
            Address::from_word(keccak256(preimage))
        })
        .collect()
}

/// A random amount: mostly token-sized (up to 128 bits), sometimes the full 256 bits, sometimes zero.
fn amount(rng: &mut Rng) -> U256 {
    let roll = rng.below(100);
    if roll < 2 {
        return U256::ZERO;
    }
    let raw = U256::from_limbs([
        rng.next_u64(),
        rng.next_u64(),
        rng.next_u64(),
        rng.next_u64(),
    ]);
    if roll < 5 {
        return raw;
    }
    let bits = rng.between(1, 128) as usize;
    raw >> (256 - bits)
}

/// A random 32-byte word.
fn word(rng: &mut Rng) -> B256 {
    let mut out = B256::ZERO;
    rng.fill(out.as_mut_slice());
    out
}

fn user(rng: &mut Rng, users: &[Address]) -> Address {
    users[rng.below(users.len() as u64) as usize]
}

fn uint(value: U256, bits: usize) -> DynSolValue {
    DynSolValue::Uint(value, bits)
}

/// Every parameter of `event`, in ABI order, for one log.
pub(crate) fn values_for(event: EventId, rng: &mut Rng, users: &[Address]) -> Vec<DynSolValue> {
    match event {
        EventId::Transfer => {
            // A few mints, from the zero address, as real tokens have.
            let from = if rng.chance(0.03) {
                Address::ZERO
            } else {
                user(rng, users)
            };
            vec![
                DynSolValue::Address(from),
                DynSolValue::Address(user(rng, users)),
                uint(amount(rng), 256),
            ]
        }
        EventId::Approval => {
            let value = if rng.chance(0.1) {
                U256::MAX
            } else {
                amount(rng)
            };
            vec![
                DynSolValue::Address(user(rng, users)),
                DynSolValue::Address(user(rng, users)),
                uint(value, 256),
            ]
        }
        EventId::Swap => {
            let zero_for_one = rng.chance(0.5);
            let (amount_in, amount_out) = (amount(rng), amount(rng));
            let (a0_in, a1_in, a0_out, a1_out) = if zero_for_one {
                (amount_in, U256::ZERO, U256::ZERO, amount_out)
            } else {
                (U256::ZERO, amount_in, amount_out, U256::ZERO)
            };
            vec![
                DynSolValue::Address(user(rng, users)),
                uint(a0_in, 256),
                uint(a1_in, 256),
                uint(a0_out, 256),
                uint(a1_out, 256),
                DynSolValue::Address(user(rng, users)),
            ]
        }
        EventId::Sync => {
            let max_112 = (U256::from(1u8) << 112) - U256::from(1u8);
            vec![
                uint(amount(rng) & max_112, 112),
                uint(amount(rng) & max_112, 112),
            ]
        }
        EventId::Note => {
            let topic = NOTE_TOPICS[rng.below(NOTE_TOPICS.len() as u64) as usize];
            let n_words = rng.below(5);
            let text: Vec<&str> = (0..n_words)
                .map(|_| WORDS[rng.below(WORDS.len() as u64) as usize])
                .collect();
            let mut payload = vec![0u8; rng.below(81) as usize];
            rng.fill(&mut payload);
            vec![
                DynSolValue::Address(user(rng, users)),
                DynSolValue::String(topic.to_owned()),
                DynSolValue::String(text.join(" ")),
                DynSolValue::Bytes(payload),
                DynSolValue::Bool(rng.chance(0.5)),
            ]
        }
        EventId::Batch => {
            let kind = rng.below(4);
            let ids = (0..rng.below(5)).map(|_| uint(amount(rng), 256)).collect();
            let recipients = (0..rng.below(4))
                .map(|_| DynSolValue::Address(user(rng, users)))
                .collect();
            let magnitude = I256::from_raw(amount(rng) >> 1);
            let delta = if rng.chance(0.5) {
                -magnitude
            } else {
                magnitude
            };
            vec![
                uint(U256::from(kind), 8),
                DynSolValue::Array(ids),
                DynSolValue::Array(recipients),
                DynSolValue::Int(delta, 256),
                uint(U256::from(rng.below(u64::from(u32::MAX) + 1)), 32),
            ]
        }
        EventId::Order => {
            let price = rng.next_u64() as i64;
            vec![
                DynSolValue::FixedBytes(word(rng), 32),
                DynSolValue::Tuple(vec![
                    DynSolValue::Address(user(rng, users)),
                    uint(amount(rng), 256),
                    DynSolValue::Bool(rng.chance(0.3)),
                ]),
                DynSolValue::Int(I256::unchecked_from(price), 64),
            ]
        }
        EventId::Ping => {
            vec![
                uint(U256::from(rng.below(1_000_000)), 256),
                DynSolValue::FixedBytes(word(rng), 32),
            ]
        }
        // The anon contract (`abis/anon.json`): plain words, so that every collision it is built for decodes.
        EventId::Tick => vec![
            uint(amount(rng), 256),
            DynSolValue::Address(user(rng, users)),
        ],
        EventId::Deposit => vec![
            DynSolValue::Address(user(rng, users)),
            uint(amount(rng), 256),
            uint(amount(rng), 256),
        ],
        EventId::Pause => vec![DynSolValue::Address(user(rng, users))],
        EventId::Memo => vec![
            DynSolValue::Address(user(rng, users)),
            uint(amount(rng), 256),
            uint(U256::from(rng.below(1_000)), 256),
        ],
        EventId::Move => vec![
            DynSolValue::Address(user(rng, users)),
            DynSolValue::Address(user(rng, users)),
            uint(amount(rng), 256),
        ],
        EventId::Trade => vec![
            DynSolValue::Address(user(rng, users)),
            DynSolValue::Address(user(rng, users)),
            DynSolValue::FixedBytes(word(rng), 32),
            uint(amount(rng), 256),
        ],
        EventId::Beat => vec![
            uint(U256::from(rng.below(1_000_000)), 256),
            DynSolValue::Address(user(rng, users)),
        ],
        EventId::Skim => vec![
            DynSolValue::FixedBytes(word(rng), 32),
            DynSolValue::Address(user(rng, users)),
            uint(amount(rng), 256),
            uint(amount(rng), 256),
        ],
        EventId::Sweep => vec![
            DynSolValue::FixedBytes(word(rng), 32),
            DynSolValue::Address(user(rng, users)),
            DynSolValue::Address(user(rng, users)),
            uint(amount(rng), 256),
            uint(amount(rng), 256),
        ],
        // The factory's logs say which pair they create: `factory::pair_created_values` fills them from the
        // pair's ordinal. These values (any pair) serve the encoding tests only.
        EventId::PairCreated => vec![
            DynSolValue::Address(user(rng, users)),
            DynSolValue::Address(user(rng, users)),
            DynSolValue::Address(user(rng, users)),
            uint(U256::from(rng.below(1_000_000)), 256),
        ],
        EventId::Mint => vec![
            DynSolValue::Address(user(rng, users)),
            uint(amount(rng), 256),
            uint(amount(rng), 256),
        ],
        EventId::Burn => vec![
            DynSolValue::Address(user(rng, users)),
            uint(amount(rng), 256),
            uint(amount(rng), 256),
            DynSolValue::Address(user(rng, users)),
        ],
    }
}

/// The topic an indexed parameter becomes: the word itself for a value type, the keccak of the contents for
/// `string` and `bytes` (Solidity's rule for indexed dynamic types).
fn topic_of(value: &DynSolValue) -> B256 {
    match value {
        DynSolValue::String(text) => keccak256(text.as_bytes()),
        DynSolValue::Bytes(bytes) => keccak256(bytes),
        other => other
            .as_word()
            .unwrap_or_else(|| keccak256(other.abi_encode())),
    }
}

/// The topics and data of a log of `event` carrying `values` (every parameter, ABI order).
pub(crate) fn encode(event: &ParsedEvent, values: &[DynSolValue]) -> (Vec<B256>, Vec<u8>) {
    let mut topics = Vec::with_capacity(4);
    topics.extend(event.topic0);
    let mut body = Vec::with_capacity(values.len());
    for (param, value) in event.abi.inputs.iter().zip(values) {
        if param.indexed {
            topics.push(topic_of(value));
        } else {
            body.push(value.clone());
        }
    }
    let data = if body.is_empty() {
        Vec::new()
    } else {
        DynSolValue::Tuple(body).abi_encode_params()
    };
    (topics, data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contracts::{parsed, EMITTERS};
    use alloy_dyn_abi::EventExt;

    /// Goal: every generated log decodes with the ABI file it claims to follow, to the very values generated.
    /// Method: encode many logs per event, decode them with alloy's event decoder, compare value by value
    /// (indexed `string` compares as its hash, since only the hash is in the log).
    #[test]
    fn every_event_encodes_to_what_its_abi_decodes() {
        let users = user_pool(7);
        for (idx, emitter) in EMITTERS.iter().enumerate() {
            let event = parsed(idx);
            for log_seed in 0..50 {
                let mut rng = Rng::new(log_seed);
                let values = values_for(emitter.event, &mut rng, &users);
                assert_eq!(
                    values.len(),
                    event.abi.inputs.len(),
                    "{}",
                    emitter.event.name()
                );
                let (topics, data) = encode(event, &values);
                let decoded = event
                    .abi
                    .decode_log_parts(topics.iter().copied(), &data)
                    .unwrap_or_else(|err| {
                        panic!("{} does not decode: {err}", emitter.event.name())
                    });
                let (mut indexed, mut body) =
                    (decoded.indexed.into_iter(), decoded.body.into_iter());
                for (param, value) in event.abi.inputs.iter().zip(&values) {
                    if param.indexed {
                        let got = indexed.next();
                        match value {
                            DynSolValue::String(text) => assert_eq!(
                                got,
                                Some(DynSolValue::FixedBytes(keccak256(text.as_bytes()), 32))
                            ),
                            _ => assert_eq!(got.as_ref(), Some(value)),
                        }
                    } else {
                        assert_eq!(body.next().as_ref(), Some(value));
                    }
                }
            }
        }
    }

    fn emitter_of(event: EventId) -> usize {
        EMITTERS
            .iter()
            .position(|emitter| emitter.event == event)
            .expect("emitted")
    }

    /// Goal: the anon contract's collisions are real, so an indexer that routes logs to anonymous events by
    /// topic count alone fills their tables with named events' logs. Method: encode logs of each named event
    /// and decode them with the anonymous event of the same topic count; `Pause`'s data is too short.
    #[test]
    fn the_anon_contracts_named_logs_decode_as_its_anonymous_events() {
        let users = user_pool(7);
        let collisions = [
            (EventId::Deposit, EventId::Skim, true),
            (EventId::Memo, EventId::Skim, true),
            (EventId::Pause, EventId::Skim, false),
            (EventId::Trade, EventId::Sweep, true),
        ];
        for (named, anonymous, decodes) in collisions {
            let named_event = parsed(emitter_of(named));
            let anonymous_event = parsed(emitter_of(anonymous));
            for log_seed in 0..20 {
                let values = values_for(named, &mut Rng::new(log_seed), &users);
                let (topics, data) = encode(named_event, &values);
                let decoded = anonymous_event
                    .abi
                    .decode_log_parts(topics.iter().copied(), &data);
                assert_eq!(
                    decoded.is_ok(),
                    decodes,
                    "{} as {}: {decoded:?}",
                    named.name(),
                    anonymous.name()
                );
            }
        }
        // `Tick`'s data (one topic) is `Beat`'s (no topic): the data alone cannot tell them apart.
        let values = values_for(EventId::Tick, &mut Rng::new(1), &users);
        let (_, data) = encode(parsed(emitter_of(EventId::Tick)), &values);
        let beat = parsed(emitter_of(EventId::Beat));
        assert!(beat.abi.decode_log_parts([], &data).is_ok());
    }

    #[test]
    fn an_anonymous_event_has_no_selector_topic() {
        let ping = parsed(9);
        let values = values_for(EventId::Ping, &mut Rng::new(1), &user_pool(1));
        let (topics, data) = encode(ping, &values);
        assert_eq!(topics.len(), 1);
        assert_eq!(data.len(), 32);
    }
}
