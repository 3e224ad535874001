//! The fast path for events made of words: every parameter is one 32-byte word, a topic or a word of the
//! data (`Transfer`, `Approval`, `Swap`, `Sync`: integers, addresses, bools, `bytesN`, and any indexed
//! parameter, which is its topic). Such a log is read straight from its topics and data into [`Value`]s,
//! with no alloy values in between: alloy builds a `DynSolValue` per parameter and a vector per log, which
//! was about a sixth of the decoding thread's time on the default chain (`docs/BENCHMARKS.md`).
//!
//! It reads what alloy reads and nothing else, and where a log is anything but plain (a topic0 of another
//! event, data that is not exactly one word per non-indexed parameter, an integer with dirty high bits) it
//! gives up and the caller decodes the log with alloy, whose answer, value or error, stands. So the values are alloy's; the property test below holds
//! the two paths equal over random events and words.

use alloy_dyn_abi::DynSolType;
use alloy_primitives::{B256, I256, U256};

use super::value::{check_int, check_uint};
use super::{ColumnKind, Integer, Value, Values, Word};

/// How one word is read: alloy's `detokenize` for each word type.
#[derive(Debug, Clone, Copy)]
enum WordType {
    /// `uintN`: the word as a big-endian integer; its high `256 - N` bits must be clear.
    Uint(usize),
    /// `intN`: the word as a two's complement integer, sign-extended from `N` bits.
    Int(usize),
    /// The low 20 bytes (the high 12 are not checked, as alloy does not).
    Address,
    /// The high 24 bytes.
    Function,
    /// The high `N` bytes.
    FixedBytes(usize),
    /// Any bit set.
    Bool,
    /// An indexed reference type: the topic itself.
    Topic,
}

/// Where a parameter's word is.
#[derive(Debug, Clone, Copy)]
enum Source {
    /// `topics[i]`.
    Topic(usize),
    /// The `i`th word of the data.
    Data(usize),
}

/// The words of an event whose every parameter is one word, in ABI order.
#[derive(Debug, Clone)]
pub(super) struct Words {
    /// Per parameter, where its word is, how to read it, and its column's kind.
    params: Vec<(Source, WordType, ColumnKind)>,
    /// topic0 for a non-anonymous event.
    selector: Option<B256>,
    /// Words of data a log has: one per non-indexed parameter, no more.
    data_words: usize,
}

impl Words {
    /// The layout of an event of `params` (type, indexed, column kind), or `None` when a non-indexed
    /// parameter is not one word (`bytes`, `string`, arrays, tuples: alloy decodes those).
    pub(super) fn new(
        params: &[(DynSolType, bool, ColumnKind)],
        selector: Option<B256>,
    ) -> Option<Self> {
        let mut topic = usize::from(selector.is_some());
        let mut data_words = 0;
        let mut layout = Vec::with_capacity(params.len());
        for (ty, indexed, kind) in params {
            let word_type = match ty {
                DynSolType::Uint(bits) => WordType::Uint(*bits),
                DynSolType::Int(bits) => WordType::Int(*bits),
                DynSolType::Address => WordType::Address,
                DynSolType::Function => WordType::Function,
                DynSolType::FixedBytes(size) => WordType::FixedBytes(*size),
                DynSolType::Bool => WordType::Bool,
                _ if *indexed => WordType::Topic,
                _ => return None,
            };
            let source = if *indexed {
                topic += 1;
                Source::Topic(topic - 1)
            } else {
                data_words += 1;
                Source::Data(data_words - 1)
            };
            layout.push((source, word_type, *kind));
        }
        Some(Self {
            params: layout,
            selector,
            data_words,
        })
    }

    /// The values of a log of this event, one per parameter, or `None` when the log is not plainly this
    /// event's: then alloy decodes it. `topics` has the event's count.
    pub(super) fn decode(&self, topics: &[B256], data: &[u8]) -> Option<Values> {
        if let Some(selector) = self.selector {
            if topics.first() != Some(&selector) {
                return None;
            }
        }
        if data.len() != 32 * self.data_words {
            return None;
        }
        // Sized once: collecting through `Option` knows no length and grew the vector per log.
        let mut values = Values::with_capacity(self.params.len());
        for &(source, word_type, kind) in &self.params {
            let word: &[u8; 32] = match source {
                Source::Topic(i) => &topics.get(i)?.0,
                Source::Data(i) => data.get(32 * i..32 * i + 32)?.try_into().ok()?,
            };
            values.push(value(word_type, kind, word)?);
        }
        Some(values)
    }
}

/// The value of `word` read as `word_type` for a column of `kind` (what `value::to_value` makes of alloy's
/// value), `None` when it does not fit.
fn value(word_type: WordType, kind: ColumnKind, word: &[u8; 32]) -> Option<Value> {
    match (word_type, kind) {
        (WordType::Uint(bits), ColumnKind::Int64 | ColumnKind::BigInt) => {
            let uint = U256::from_be_bytes(*word);
            check_uint(uint, bits).ok()?;
            Some(match kind {
                ColumnKind::Int64 => Value::Int(i64::try_from(uint).ok()?),
                _ => Value::BigInt(Integer::unsigned(uint)),
            })
        }
        (WordType::Int(bits), ColumnKind::Int64 | ColumnKind::BigInt) => {
            let int = I256::from_be_bytes(*word);
            check_int(int, bits).ok()?;
            Some(match kind {
                ColumnKind::Int64 => Value::Int(i64::try_from(int).ok()?),
                _ => Value::BigInt(Integer::signed(int)),
            })
        }
        (WordType::Address, ColumnKind::Address) => Word::new(&word[12..]).map(Value::Hex),
        (WordType::Function, ColumnKind::FixedBytes) => Word::new(&word[..24]).map(Value::Hex),
        (WordType::FixedBytes(size), ColumnKind::FixedBytes) => {
            Word::new(word.get(..size)?).map(Value::Hex)
        }
        (WordType::Topic, ColumnKind::TopicHash) => Word::new(word).map(Value::Hex),
        (WordType::Bool, ColumnKind::Bool) => Some(Value::Bool(word.iter().any(|&b| b != 0))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use alloy_json_abi::Event;
    use alloy_primitives::B256;
    use proptest::prelude::*;

    use super::super::{DecodeError, EventDecoder, Value};

    /// Parameter types: every word type in a few sizes, and three that are not words (indexed, they are
    /// topics; not indexed, alloy decodes them).
    const TYPES: &[&str] = &[
        "uint8",
        "uint56",
        "uint64",
        "uint112",
        "uint256",
        "int8",
        "int64",
        "int128",
        "int256",
        "address",
        "bool",
        "bytes1",
        "bytes20",
        "bytes32",
        "function",
        "string",
        "bytes",
        "uint256[2]",
    ];

    fn decoder(signature: &str) -> EventDecoder {
        EventDecoder::new(&Event::parse(signature).expect("parses")).expect("resolves")
    }

    /// A word as a log may carry it: any bytes, padded as a small, negative, address or bool value, or one byte
    /// set anywhere (a dirty high bit, a bool that is not 0 or 1).
    fn word() -> impl Strategy<Value = [u8; 32]> {
        let padded = |fill: u8, low: &[u8]| {
            let mut word = [fill; 32];
            word[32 - low.len()..].copy_from_slice(low);
            word
        };
        prop_oneof![
            any::<[u8; 32]>(),
            any::<[u8; 8]>().prop_map(move |low| padded(0, &low)),
            any::<[u8; 8]>().prop_map(move |low| padded(0xff, &low)),
            any::<[u8; 20]>().prop_map(move |low| padded(0, &low)),
            (0..32usize, 1..=255u8).prop_map(|(at, byte)| {
                let mut word = [0; 32];
                word[at] = byte;
                word
            }),
            Just(padded(0, &[])),
            Just(padded(0, &[1])),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// Goal: for any log of an event made of words, the fast path gives alloy's answer, value or
        /// error, and data with bytes over is refused as short data is. Method: random events, topics and
        /// data words in every padding (dirty high bits included), now and then a topic0 of another event
        /// or data cut short or with bytes over; `decode` (fast path first) against the length check and
        /// alloy's decoder alone.
        #[test]
        fn the_fast_path_gives_what_alloy_gives(
            params in prop::collection::vec((prop::sample::select(TYPES.to_vec()), any::<bool>()), 0..=5),
            anonymous in any::<bool>(),
            other_topic0 in prop::bool::weighted(0.1),
            words in prop::collection::vec(word(), 10),
            data_change in prop_oneof![4 => Just(0i64), 1 => -40i64..40],
        ) {
            let mut n_indexed = 0;
            let declared: Vec<String> = params
                .iter()
                .enumerate()
                .map(|(i, (ty, indexed))| {
                    n_indexed += usize::from(*indexed);
                    let indexed = *indexed && n_indexed <= 3;
                    format!("{ty}{} p{i}", if indexed { " indexed" } else { "" })
                })
                .collect();
            let signature = format!(
                "event E({}){}",
                declared.join(", "),
                if anonymous { " anonymous" } else { "" }
            );
            let event = Event::parse(&signature).expect("a valid event");
            let decoder = EventDecoder::new(&event).expect("resolves");
            let mut words = words.into_iter();
            let mut topics = Vec::new();
            if !anonymous {
                topics.push(if other_topic0 { B256::from(words.next().unwrap()) } else { event.selector() });
            }
            let mut data = Vec::new();
            for param in &event.inputs {
                let word = words.next().expect("enough words");
                if param.indexed {
                    topics.push(B256::from(word));
                } else {
                    data.extend_from_slice(&word);
                }
            }
            match usize::try_from(data_change) {
                Ok(extra) => data.extend(std::iter::repeat_n(0xab, extra)),
                Err(_) => data.truncate(data.len().saturating_sub(data_change.unsigned_abs() as usize)),
            }
            let slow = decoder
                .check_data_len(&data)
                .and_then(|()| decoder.decode_with_alloy(&topics, &data));
            prop_assert_eq!(decoder.decode(&topics, &data), slow, "{}", signature);
            if data_change > 0 && decoder.words.is_some() {
                prop_assert!(decoder.decode(&topics, &data).is_err(), "{} with bytes over", signature);
            }
        }
    }

    #[test]
    fn events_of_words_take_the_fast_path_and_others_do_not() {
        for signature in [
            "event Transfer(address indexed from, address indexed to, uint256 value)",
            "event Swap(address indexed sender, uint256 a0, uint256 a1, uint256 b0, uint256 b1, address indexed to)",
            "event Sync(uint112 reserve0, uint112 reserve1)",
            "event Note(string indexed tag, bytes32 id, bool ok, int64 delta, function f) anonymous",
        ] {
            assert!(decoder(signature).words.is_some(), "{signature}");
        }
        for signature in [
            "event Note(string text)",
            "event Batch(uint256[] ids)",
            "event Pair(uint256[2] pair)",
        ] {
            assert!(decoder(signature).words.is_none(), "{signature}");
        }
    }

    #[test]
    fn the_fast_path_reads_each_word_as_alloy_does() {
        let transfer =
            decoder("event Transfer(address indexed from, address indexed to, uint8 value)");
        let selector = transfer.selector().expect("a named event");
        // An address with its high bytes set is its low 20 bytes, as alloy reads it.
        let dirty_address = B256::repeat_byte(0xee);
        let mut value = [0u8; 32];
        value[31] = 7;
        let words = transfer
            .words
            .as_ref()
            .expect("the fast path")
            .decode(&[selector, dirty_address, B256::ZERO], &value)
            .expect("a plain log");
        assert_eq!(words[0], Value::Hex(super::Word::new(&[0xee; 20]).unwrap()));
        assert_eq!(words[2], Value::Int(7));
        // A byte over the one word of data: not plainly a Transfer, and not one at all.
        let over = [&value[..], &[0]].concat();
        let fast = transfer.words.as_ref().unwrap();
        assert!(fast
            .decode(&[selector, dirty_address, B256::ZERO], &over)
            .is_none());
        assert!(matches!(
            transfer.decode(&[selector, dirty_address, B256::ZERO], &over),
            Err(DecodeError::Mismatch { reason, .. }) if reason.contains("the data is 33 bytes")
        ));
        // A uint8 with a high bit set is left to alloy, whose error stands.
        value[0] = 1;
        assert!(transfer
            .words
            .as_ref()
            .unwrap()
            .decode(&[selector, dirty_address, B256::ZERO], &value)
            .is_none());
        assert!(matches!(
            transfer.decode(&[selector, dirty_address, B256::ZERO], &value),
            Err(DecodeError::Mismatch { .. })
        ));
    }
}
