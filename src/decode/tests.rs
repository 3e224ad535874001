//! Tests of columns and decoding: logs are built by encoding values with alloy (topic0 = selector, indexed
//! values as topics, dynamic indexed values hashed, data = the ABI-encoded non-indexed sequence) and the
//! expected values are written out (or, in the property test, computed without the code under test).

use alloy_dyn_abi::DynSolValue;
use alloy_json_abi::Event;
use alloy_primitives::{hex, keccak256, Address, B256, I256, U256};
use proptest::prelude::*;

use super::{ColumnKind, DecodeError, EventDecoder, Value};

pub(super) fn decoder(signature: &str) -> EventDecoder {
    let event = Event::parse(signature).unwrap_or_else(|err| panic!("{signature}: {err}"));
    EventDecoder::new(&event).unwrap_or_else(|err| panic!("{signature}: {err}"))
}

/// Builds the topics and data of a log of `decoder`'s event with these parameter values (ABI order).
pub(super) fn encode_log(event: &Event, values: &[DynSolValue]) -> (Vec<B256>, Vec<u8>) {
    assert_eq!(event.inputs.len(), values.len(), "one value per parameter");
    let mut topics = Vec::new();
    if !event.anonymous {
        topics.push(event.selector());
    }
    let mut body = Vec::new();
    for (param, value) in event.inputs.iter().zip(values) {
        if !param.indexed {
            body.push(value.clone());
            continue;
        }
        topics.push(match value {
            // spec (Solidity ABI, "Events"): string and bytes topics are the keccak of the raw contents.
            DynSolValue::String(text) => keccak256(text.as_bytes()),
            DynSolValue::Bytes(bytes) => keccak256(bytes),
            other if other.as_word().is_some() => other.as_word().unwrap(),
            // Arrays and tuples: some hash; the decoder only passes the topic through.
            other => keccak256(other.abi_encode()),
        });
    }
    let data = DynSolValue::Tuple(body)
        .abi_encode_sequence()
        .expect("a tuple");
    (topics, data)
}

fn check_columns(signature: &str, expected: &[(&str, &str, ColumnKind)]) {
    let decoder = decoder(signature);
    let actual: Vec<(&str, &str, ColumnKind)> = decoder
        .columns()
        .iter()
        .map(|column| (column.name.as_str(), column.sol_type.as_str(), column.kind))
        .collect();
    assert_eq!(actual, expected, "{signature}");
}

/// Encodes `values` as a log of `signature`, decodes it, and compares with `expected`.
fn check_decode(signature: &str, values: &[DynSolValue], expected: &[Value]) {
    let event = Event::parse(signature).unwrap();
    let decoder = EventDecoder::new(&event).unwrap();
    let (topics, data) = encode_log(&event, values);
    assert!(decoder.matches(&topics), "{signature}: matches its own log");
    assert_eq!(
        decoder.decode(&topics, &data).as_deref(),
        Ok(expected),
        "{signature}"
    );
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// The value of an address, `bytesN` or topic column, from its `0x` hex.
fn word(s: &str) -> Value {
    Value::Hex(super::Word::new(&hex::decode(s).expect("hex")).expect("at most 32 bytes"))
}

pub(super) fn uint(n: u64, bits: usize) -> DynSolValue {
    DynSolValue::Uint(U256::from(n), bits)
}

pub(super) fn address(hex_str: &str) -> DynSolValue {
    DynSolValue::Address(hex_str.parse::<Address>().unwrap())
}

pub(super) const A1: &str = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48";
pub(super) const A2: &str = "0xdac17f958d2ee523a2206206994597c13d831ec7";

#[test]
fn maps_parameters_to_columns() {
    use ColumnKind::*;
    check_columns(
        "event Transfer(address indexed from, address indexed to, uint256 value)",
        &[
            ("from_", "address", Address),
            ("to_", "address", Address),
            ("value", "uint256", BigInt),
        ],
    );
    check_columns(
        "event Swap(address indexed sender, uint amount0In, uint amount1In, uint amount0Out, uint amount1Out, address indexed to)",
        &[
            ("sender", "address", Address),
            ("amount0_in", "uint256", BigInt),
            ("amount1_in", "uint256", BigInt),
            ("amount0_out", "uint256", BigInt),
            ("amount1_out", "uint256", BigInt),
            ("to_", "address", Address),
        ],
    );
    check_columns(
        "event E(uint8 a, uint56 b, uint64 c, int8 d, int64 e, int72 f, uint256 g, int256 h)",
        &[
            ("a", "uint8", Int64),
            ("b", "uint56", Int64),
            ("c", "uint64", BigInt),
            ("d", "int8", Int64),
            ("e", "int64", Int64),
            ("f", "int72", BigInt),
            ("g", "uint256", BigInt),
            ("h", "int256", BigInt),
        ],
    );
    check_columns(
        "event E(bytes4 a, bytes32 b, bool c, bytes d, string e, uint256[] f, address[3] g, (address,uint256)[] h, (bool,string) i)",
        &[
            ("a", "bytes4", FixedBytes),
            ("b", "bytes32", FixedBytes),
            ("c", "bool", Bool),
            ("d", "bytes", Bytes),
            ("e", "string", Text),
            ("f", "uint256[]", Json),
            ("g", "address[3]", Json),
            ("h", "(address,uint256)[]", Json),
            ("i", "(bool,string)", Json),
        ],
    );
    check_columns(
        "event E(string indexed a, bytes indexed b, uint256[] indexed c, uint8 indexed d) anonymous",
        &[("a", "string", TopicHash), ("b", "bytes", TopicHash), ("c", "uint256[]", TopicHash), ("d", "uint8", Int64)],
    );
    check_columns(
        "event E(bool indexed, uint256, address address, uint256 blockNumber, uint256 id)",
        &[
            ("arg0", "bool", Bool),
            ("arg1", "uint256", BigInt),
            ("address_", "address", Address),
            ("block_number_", "uint256", BigInt),
            ("id_", "uint256", BigInt),
        ],
    );
}

#[test]
fn describes_the_event() {
    let transfer =
        decoder("event Transfer(address indexed from, address indexed to, uint256 value)");
    assert_eq!(transfer.signature(), "Transfer(address,address,uint256)");
    assert_eq!(
        transfer.selector(),
        Some(B256::from(hex!(
            "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"
        )))
    );
    assert_eq!(transfer.topic_count(), 3);
    let anonymous = decoder("event Ping(uint256 indexed n, string note) anonymous");
    assert_eq!(anonymous.selector(), None);
    assert_eq!(anonymous.topic_count(), 1);
}

#[test]
fn decodes_an_erc20_transfer() {
    check_decode(
        "event Transfer(address indexed from, address indexed to, uint256 value)",
        &[address(A1), address(A2), uint(1_000_000, 256)],
        &[
            word(A1),
            word(A2),
            Value::BigInt("1000000".parse().unwrap()),
        ],
    );
}

#[test]
fn decodes_addresses_as_lowercase_hex() {
    check_decode(
        "event E(address a)",
        &[address("0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48")],
        &[word(A1)],
    );
}

#[test]
fn decodes_a_uniswap_v2_swap() {
    check_decode(
        "event Swap(address indexed sender, uint amount0In, uint amount1In, uint amount0Out, uint amount1Out, address indexed to)",
        &[address(A1), uint(0, 256), uint(5, 256), uint(7, 256), uint(0, 256), address(A2)],
        &[
            word(A1),
            Value::BigInt("0".parse().unwrap()),
            Value::BigInt("5".parse().unwrap()),
            Value::BigInt("7".parse().unwrap()),
            Value::BigInt("0".parse().unwrap()),
            word(A2),
        ],
    );
}

#[test]
fn decodes_integer_extremes_exactly() {
    check_decode(
        "event E(uint256 a, int256 b, int256 c, int256 d, uint8 e, int8 f, int64 g, uint64 h)",
        &[
            DynSolValue::Uint(U256::MAX, 256),
            DynSolValue::Int(I256::MIN, 256),
            DynSolValue::Int(I256::MAX, 256),
            DynSolValue::Int(I256::try_from(-5).unwrap(), 256),
            uint(255, 8),
            DynSolValue::Int(I256::try_from(-128).unwrap(), 8),
            DynSolValue::Int(I256::try_from(i64::MIN).unwrap(), 64),
            DynSolValue::Uint(U256::from(u64::MAX), 64),
        ],
        &[
            Value::BigInt(
                "115792089237316195423570985008687907853269984665640564039457584007913129639935"
                    .parse()
                    .unwrap(),
            ),
            Value::BigInt(
                "-57896044618658097711785492504343953926634992332820282019728792003956564819968"
                    .parse()
                    .unwrap(),
            ),
            Value::BigInt(
                "57896044618658097711785492504343953926634992332820282019728792003956564819967"
                    .parse()
                    .unwrap(),
            ),
            Value::BigInt("-5".parse().unwrap()),
            Value::Int(255),
            Value::Int(-128),
            Value::Int(i64::MIN),
            Value::BigInt("18446744073709551615".parse().unwrap()),
        ],
    );
}

#[test]
fn decodes_strings_bytes_arrays_and_tuples() {
    check_decode(
        "event E(string name, bytes blob, bytes4 tag, bool ok, uint256[] amounts, address[2] pair, (address,uint256,string)[] legs, (bool,bytes) t)",
        &[
            DynSolValue::String("héllo \"x\"".into()),
            DynSolValue::Bytes(vec![0, 1, 0xff]),
            DynSolValue::FixedBytes(B256::right_padding_from(&[0xde, 0xad, 0xbe, 0xef]), 4),
            DynSolValue::Bool(true),
            DynSolValue::Array(vec![uint(1, 256), DynSolValue::Uint(U256::MAX, 256)]),
            DynSolValue::FixedArray(vec![address(A1), address(A2)]),
            DynSolValue::Array(vec![DynSolValue::Tuple(vec![
                address(A1),
                uint(3, 256),
                DynSolValue::String("a".into()),
            ])]),
            DynSolValue::Tuple(vec![DynSolValue::Bool(false), DynSolValue::Bytes(vec![0xab])]),
        ],
        &[
            text("héllo \"x\""),
            Value::Bytes(vec![0, 1, 0xff]),
            word("0xdeadbeef"),
            Value::Bool(true),
            Value::Json(format!(r#"["1","{}"]"#, U256::MAX)),
            Value::Json(format!(r#"["{A1}","{A2}"]"#)),
            Value::Json(format!(r#"[["{A1}","3","a"]]"#)),
            Value::Json(r#"[false,"0xab"]"#.into()),
        ],
    );
}

#[test]
fn decodes_empty_dynamic_values() {
    check_decode(
        "event E(string s, bytes b, uint8[] a)",
        &[
            DynSolValue::String(String::new()),
            DynSolValue::Bytes(vec![]),
            DynSolValue::Array(vec![]),
        ],
        &[text(""), Value::Bytes(vec![]), Value::Json("[]".into())],
    );
}

#[test]
fn stores_an_indexed_string_as_its_topic_hash() {
    let hash = hex::encode_prefixed(keccak256(b"alice"));
    check_decode(
        "event Registered(string indexed name, bytes indexed key, address indexed owner, uint256 fee)",
        &[
            DynSolValue::String("alice".into()),
            DynSolValue::Bytes(b"k".to_vec()),
            address(A1),
            uint(9, 256),
        ],
        &[
            word(&hash),
            word(&hex::encode_prefixed(keccak256(b"k"))),
            word(A1),
            Value::BigInt("9".parse().unwrap()),
        ],
    );
}

#[test]
fn decodes_an_anonymous_event() {
    check_decode(
        "event Ping(uint256 indexed n, address indexed who, string note) anonymous",
        &[uint(42, 256), address(A1), DynSolValue::String("hi".into())],
        &[Value::BigInt("42".parse().unwrap()), word(A1), text("hi")],
    );
    let anonymous =
        decoder("event Ping(uint256 indexed n, address indexed who, string note) anonymous");
    assert!(anonymous.matches(&[B256::ZERO, B256::ZERO]));
    assert!(!anonymous.matches(&[B256::ZERO]));
}

#[test]
fn decodes_invalid_utf8_strings_lossily() {
    let event = Event::parse("event E(string s)").unwrap();
    let decoder = EventDecoder::new(&event).unwrap();
    // Encoded as `bytes`, which has the same layout as `string`.
    let (topics, data) = encode_log(&event, &[DynSolValue::Bytes(vec![b'a', 0xff, b'b'])]);
    assert_eq!(
        decoder.decode(&topics, &data).map(|v| v.into_vec()),
        Ok(vec![text("a\u{fffd}b")])
    );
}

pub(super) fn check_mismatch(signature: &str, topics: &[B256], data: &[u8], reason_contains: &str) {
    let decoder = decoder(signature);
    match decoder.decode(topics, data) {
        Err(DecodeError::Mismatch { event, reason }) => {
            assert_eq!(event, decoder.signature());
            assert!(
                reason.contains(reason_contains),
                "{reason:?} should contain {reason_contains:?}"
            );
        }
        other => panic!("{signature}: expected a mismatch, got {other:?}"),
    }
}

#[test]
fn rejects_logs_that_do_not_fit_the_event() {
    const TRANSFER: &str =
        "event Transfer(address indexed from, address indexed to, uint256 value)";
    let event = Event::parse(TRANSFER).unwrap();
    let (topics, data) = encode_log(&event, &[address(A1), address(A2), uint(1, 256)]);
    // An ERC-721 Transfer: same topic0, the third parameter indexed.
    let erc721_topics = [topics.clone(), vec![B256::with_last_byte(1)]].concat();
    check_mismatch(
        TRANSFER,
        &erc721_topics,
        &[],
        "expected 3 topics, the log has 4",
    );
    check_mismatch(
        TRANSFER,
        &topics[..2],
        &data,
        "expected 3 topics, the log has 2",
    );
    check_mismatch(TRANSFER, &[], &data, "expected 3 topics, the log has 0");
    let mut wrong_topic0 = topics.clone();
    wrong_topic0[0] = keccak256("Approval(address,address,uint256)");
    check_mismatch(TRANSFER, &wrong_topic0, &data, "");
    check_mismatch(TRANSFER, &topics, &data[..31], "");
    check_mismatch(TRANSFER, &topics, &[], "");
    let decoder = decoder(TRANSFER);
    assert!(decoder.matches(&topics));
    assert!(!decoder.matches(&erc721_topics));
    assert!(!decoder.matches(&wrong_topic0));
    assert!(!decoder.matches(&[]));
}

#[test]
fn rejects_integers_with_dirty_high_bits() {
    let event = Event::parse("event E(uint8 a, int8 b)").unwrap();
    let (topics, _) = encode_log(&event, &[uint(0, 8), uint(0, 8)]);
    let mut data = vec![0u8; 64];
    data[30] = 1; // a = 256
    data[63] = 0x80; // b = 128, not sign-extended
    check_mismatch(
        "event E(uint8 a, int8 b)",
        &topics,
        &data,
        "does not fit in uint8",
    );
    data[30] = 0;
    check_mismatch(
        "event E(uint8 a, int8 b)",
        &topics,
        &data,
        "does not fit in int8",
    );
}

#[test]
fn refuses_events_that_do_not_resolve() {
    let mut event =
        Event::parse("event E(uint256 indexed a, uint256 indexed b, uint256 indexed c)").unwrap();
    let mut fourth = event.inputs[0].clone();
    fourth.name = "d".into();
    event.inputs.push(fourth);
    assert!(matches!(
        EventDecoder::new(&event),
        Err(DecodeError::Resolve { .. })
    ));
    let mut bad_type = Event::parse("event E(uint256 a)").unwrap();
    bad_type.inputs[0].ty = "uint257".into();
    match EventDecoder::new(&bad_type) {
        Err(DecodeError::Resolve { event, .. }) => assert_eq!(event, "E(uint257)"),
        other => panic!("expected a resolve error, got {other:?}"),
    }
}

// ---- Property test: random event shapes and values round-trip through encode -> decode. ----

/// A parameter type of the generated events (a subset of the ABI, sizes bounded).
#[derive(Debug, Clone)]
enum Ty {
    Uint(usize),
    Int(usize),
    Address,
    Bool,
    FixedBytes(usize),
    Bytes,
    Str,
    Array(Box<Ty>),
    FixedArray(Box<Ty>, usize),
    Tuple(Vec<Ty>),
}

impl Ty {
    fn sol(&self) -> String {
        match self {
            Ty::Uint(bits) => format!("uint{bits}"),
            Ty::Int(bits) => format!("int{bits}"),
            Ty::Address => "address".into(),
            Ty::Bool => "bool".into(),
            Ty::FixedBytes(size) => format!("bytes{size}"),
            Ty::Bytes => "bytes".into(),
            Ty::Str => "string".into(),
            Ty::Array(inner) => format!("{}[]", inner.sol()),
            Ty::FixedArray(inner, n) => format!("{}[{n}]", inner.sol()),
            Ty::Tuple(items) => format!(
                "({})",
                items.iter().map(Ty::sol).collect::<Vec<_>>().join(",")
            ),
        }
    }

    fn is_word(&self) -> bool {
        matches!(
            self,
            Ty::Uint(_) | Ty::Int(_) | Ty::Address | Ty::Bool | Ty::FixedBytes(_)
        )
    }
}

/// A generated value: what to encode, and what the decoder must give back, computed here.
#[derive(Debug, Clone)]
struct Generated {
    dyn_value: DynSolValue,
    /// The column value when not indexed (and for indexed word types).
    column: Value,
    json: serde_json::Value,
}

fn ty_strategy() -> impl Strategy<Value = Ty> {
    let leaf = prop_oneof![
        prop::sample::select(vec![8usize, 16, 32, 56, 64, 128, 256]).prop_map(Ty::Uint),
        prop::sample::select(vec![8usize, 32, 64, 128, 256]).prop_map(Ty::Int),
        Just(Ty::Address),
        Just(Ty::Bool),
        prop::sample::select(vec![1usize, 4, 20, 32]).prop_map(Ty::FixedBytes),
        Just(Ty::Bytes),
        Just(Ty::Str),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            inner.clone().prop_map(|t| Ty::Array(Box::new(t))),
            (inner.clone(), 1usize..=3).prop_map(|(t, n)| Ty::FixedArray(Box::new(t), n)),
            prop::collection::vec(inner, 1..=3).prop_map(Ty::Tuple),
        ]
    })
}

/// Decimal of a big-endian unsigned number, by long division: independent of ruint's formatting.
fn decimal_of(be_bytes: &[u8]) -> String {
    let mut digits = Vec::new();
    let mut number = be_bytes.to_vec();
    while number.iter().any(|b| *b != 0) {
        let mut remainder = 0u32;
        for byte in number.iter_mut() {
            let acc = (remainder << 8) | u32::from(*byte);
            *byte = (acc / 10) as u8;
            remainder = acc % 10;
        }
        digits.push(char::from(b'0' + remainder as u8));
    }
    if digits.is_empty() {
        return "0".into();
    }
    digits.iter().rev().collect()
}

fn lower_hex(bytes: &[u8]) -> String {
    let mut s = String::from("0x");
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

fn int_value(decimal: String, fits_i64: Option<i64>) -> (Value, serde_json::Value) {
    let json = serde_json::Value::String(decimal.clone());
    match fits_i64 {
        Some(n) => (Value::Int(n), json),
        None => (Value::BigInt(decimal.parse().expect("a decimal")), json),
    }
}

fn value_strategy(ty: &Ty) -> BoxedStrategy<Generated> {
    match ty.clone() {
        Ty::Uint(bits) => any::<[u8; 32]>()
            .prop_map(move |mut word| {
                // Clear the bits above `bits`.
                let clear = (256 - bits) / 8;
                word[..clear].fill(0);
                let uint = U256::from_be_bytes(word);
                let small =
                    (bits <= 56).then(|| u64::from_be_bytes(word[24..].try_into().unwrap()) as i64);
                let (column, json) = int_value(decimal_of(&word), small);
                Generated {
                    dyn_value: DynSolValue::Uint(uint, bits),
                    column,
                    json,
                }
            })
            .boxed(),
        Ty::Int(bits) => any::<i128>()
            .prop_map(move |raw| {
                // Sign-extend the low `bits` bits (bits >= 128 keeps the whole i128).
                let n = if bits >= 128 {
                    raw
                } else {
                    (raw << (128 - bits)) >> (128 - bits)
                };
                let small = (bits <= 64).then_some(n as i64);
                let (column, json) = int_value(n.to_string(), small);
                Generated {
                    dyn_value: DynSolValue::Int(I256::try_from(n).unwrap(), bits),
                    column,
                    json,
                }
            })
            .boxed(),
        Ty::Address => any::<[u8; 20]>()
            .prop_map(|bytes| Generated {
                dyn_value: DynSolValue::Address(Address::from(bytes)),
                column: word(&lower_hex(&bytes)),
                json: serde_json::Value::String(lower_hex(&bytes)),
            })
            .boxed(),
        Ty::Bool => any::<bool>()
            .prop_map(|b| Generated {
                dyn_value: DynSolValue::Bool(b),
                column: Value::Bool(b),
                json: serde_json::Value::Bool(b),
            })
            .boxed(),
        Ty::FixedBytes(size) => prop::collection::vec(any::<u8>(), size)
            .prop_map(move |bytes| Generated {
                dyn_value: DynSolValue::FixedBytes(B256::right_padding_from(&bytes), size),
                column: word(&lower_hex(&bytes)),
                json: serde_json::Value::String(lower_hex(&bytes)),
            })
            .boxed(),
        Ty::Bytes => prop::collection::vec(any::<u8>(), 0..70)
            .prop_map(|bytes| Generated {
                dyn_value: DynSolValue::Bytes(bytes.clone()),
                json: serde_json::Value::String(lower_hex(&bytes)),
                column: Value::Bytes(bytes),
            })
            .boxed(),
        Ty::Str => ".{0,40}"
            .prop_map(|s: String| Generated {
                dyn_value: DynSolValue::String(s.clone()),
                json: serde_json::Value::String(s.clone()),
                column: Value::Text(s),
            })
            .boxed(),
        Ty::Array(inner) => prop::collection::vec(value_strategy(&inner), 0..=4)
            .prop_map(|items| sequence(items, DynSolValue::Array))
            .boxed(),
        Ty::FixedArray(inner, n) => prop::collection::vec(value_strategy(&inner), n)
            .prop_map(|items| sequence(items, DynSolValue::FixedArray))
            .boxed(),
        Ty::Tuple(types) => types
            .iter()
            .map(value_strategy)
            .collect::<Vec<_>>()
            .prop_map(|items| sequence(items, DynSolValue::Tuple))
            .boxed(),
    }
}

fn sequence(items: Vec<Generated>, wrap: fn(Vec<DynSolValue>) -> DynSolValue) -> Generated {
    let json = serde_json::Value::Array(items.iter().map(|item| item.json.clone()).collect());
    Generated {
        dyn_value: wrap(items.into_iter().map(|item| item.dyn_value).collect()),
        column: Value::Json(json.to_string()),
        json,
    }
}

/// Parameters (type, indexed) and whether the event is anonymous.
type Shape = (Vec<(Ty, bool)>, bool);

/// An event shape: parameters (type, indexed) with at most 3 indexed, and whether it is anonymous.
fn shape_strategy() -> impl Strategy<Value = Shape> {
    (
        prop::collection::vec((ty_strategy(), any::<bool>()), 0..=6),
        any::<bool>(),
    )
        .prop_map(|(mut params, anonymous)| {
            let mut n_indexed = 0;
            for (_, indexed) in params.iter_mut() {
                if *indexed {
                    n_indexed += 1;
                    *indexed = n_indexed <= 3;
                }
            }
            (params, anonymous)
        })
}

fn shape_and_values() -> impl Strategy<Value = (Shape, Vec<Generated>)> {
    shape_strategy().prop_flat_map(|shape| {
        let values: Vec<BoxedStrategy<Generated>> =
            shape.0.iter().map(|(ty, _)| value_strategy(ty)).collect();
        (Just(shape), values)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Goal: any valid log of any event shape decodes to the values that were encoded. Method: generate a
    /// shape and values with their expected column values computed here (long division for decimals, own hex),
    /// encode with alloy as a node would, decode, compare.
    #[test]
    fn decodes_what_was_encoded((shape, values) in shape_and_values()) {
        let (params, anonymous) = shape;
        let declared: Vec<String> = params
            .iter()
            .enumerate()
            .map(|(i, (ty, indexed))| format!("{} {}p{i}", ty.sol(), if *indexed { "indexed " } else { "" }))
            .collect();
        let signature = format!(
            "event Generated({}){}",
            declared.join(", "),
            if anonymous { " anonymous" } else { "" }
        );
        let event = Event::parse(&signature).map_err(|err| TestCaseError::fail(format!("{signature}: {err}")))?;
        let decoder = EventDecoder::new(&event).map_err(|err| TestCaseError::fail(err.to_string()))?;
        let dyn_values: Vec<DynSolValue> = values.iter().map(|v| v.dyn_value.clone()).collect();
        let (topics, data) = encode_log(&event, &dyn_values);
        let mut topic_iter = topics.iter().skip(usize::from(!anonymous));
        let expected: Vec<Value> = params
            .iter()
            .zip(&values)
            .map(|((ty, indexed), generated)| {
                if *indexed {
                    let topic = topic_iter.next().unwrap();
                    if ty.is_word() { generated.column.clone() } else { word(&lower_hex(topic.as_slice())) }
                } else {
                    generated.column.clone()
                }
            })
            .collect();
        prop_assert!(decoder.matches(&topics));
        prop_assert_eq!(decoder.decode(&topics, &data).map(|v| v.into_vec()), Ok(expected), "{}", signature);
    }
}

#[test]
fn a_word_holds_up_to_32_bytes_and_shows_as_lowercase_hex() {
    let address = super::Word::new(&[0xab; 20]).unwrap();
    assert_eq!(address.as_bytes(), &[0xab; 20]);
    assert_eq!(address.to_hex(), format!("0x{}", "ab".repeat(20)));
    assert_eq!(super::Word::new(&[]).unwrap().to_hex(), "0x");
    assert!(super::Word::new(&[0; 33]).is_none());
    assert_ne!(
        super::Word::new(&[0; 4]),
        super::Word::new(&[0; 5]),
        "the length counts"
    );
}
