//! Which configured event takes a log ([`Offer`]): named events by topic0, anonymous events by their exact
//! shape, at most one anonymous event per log, and what the raw table keeps. Logs are encoded with alloy as
//! in `tests`.

use alloy_dyn_abi::DynSolValue;
use alloy_json_abi::Event;
use alloy_primitives::B256;

use super::tests::{address, decoder, encode_log, uint, A1, A2};
use super::{DecodeError, EventDecoder, Offer};

/// Offers one log to `decoders` in order: the indexes of those that take it, and whether it is kept raw.
/// Every named log here decodes.
fn takers(
    decoders: &[EventDecoder],
    topics: &[B256],
    data: &[u8],
    named_selectors: &[B256],
) -> (Vec<usize>, bool) {
    let mut offer = Offer::new(topics, data, named_selectors);
    let takers = decoders
        .iter()
        .enumerate()
        .filter(|(_, decoder)| {
            offer
                .decode(decoder)
                .expect("every named log here decodes")
                .is_some()
        })
        .map(|(idx, _)| idx)
        .collect();
    (takers, offer.kept())
}

/// `takers` with only `Offer::takes`, the raw table's answer: whether the log is kept.
fn kept(decoders: &[EventDecoder], topics: &[B256], data: &[u8], named_selectors: &[B256]) -> bool {
    let mut offer = Offer::new(topics, data, named_selectors);
    decoders.iter().any(|decoder| offer.takes(decoder))
}

fn decoders(signatures: &[&str]) -> Vec<EventDecoder> {
    signatures
        .iter()
        .map(|signature| decoder(signature))
        .collect()
}

fn log_of(signature: &str, values: &[DynSolValue]) -> (Vec<B256>, Vec<u8>) {
    encode_log(&Event::parse(signature).expect("parses"), values)
}

/// Goal: each log reaches exactly its own event's table when a contract has named events of 1 to 4 topics
/// and anonymous events of 0, 2 and 4 topics that share their topic counts. Method: encode one log of each
/// event (and of an ABI event that is not configured), offer every log to every configured decoder, and
/// compare who takes it with who emitted it.
#[test]
fn a_log_goes_to_its_own_event_and_never_to_an_anonymous_one_of_the_same_shape() {
    let configured = [
        "event Tick(uint256 value)",
        "event Deposit(address indexed who, uint256 amount)",
        "event Transfer(address indexed from, address indexed to, uint256 value)",
        "event Moved(address indexed a, address indexed b, uint256 indexed c, uint256 d)",
        "event Blob(string s) anonymous",
        "event Ping(uint256 indexed seq, address indexed who, string note) anonymous",
        "event Quad(bytes32 indexed a, bytes32 indexed b, bytes32 indexed c, bytes32 indexed d) anonymous",
    ];
    // In the ABI, not configured: its logs have Ping's topic count and must not become Pings.
    let unconfigured = "event Hidden(uint256 indexed x, string y)";
    let events: Vec<Event> = configured
        .iter()
        .chain([&unconfigured])
        .map(|signature| Event::parse(signature).unwrap())
        .collect();
    let mut named_selectors: Vec<B256> = events
        .iter()
        .filter(|e| !e.anonymous)
        .map(Event::selector)
        .collect();
    named_selectors.sort();
    let decoders: Vec<EventDecoder> = events[..configured.len()]
        .iter()
        .map(|e| EventDecoder::new(e).unwrap())
        .collect();
    let word = |byte: u8| DynSolValue::FixedBytes(B256::repeat_byte(byte), 32);
    let values: Vec<Vec<DynSolValue>> = vec![
        vec![uint(7, 256)],
        vec![address(A1), uint(8, 256)],
        vec![address(A1), address(A2), uint(9, 256)],
        vec![address(A1), address(A2), uint(10, 256), uint(11, 256)],
        vec![DynSolValue::String("blob".into())],
        vec![
            uint(12, 256),
            address(A2),
            DynSolValue::String("ping".into()),
        ],
        vec![word(1), word(2), word(3), word(4)],
        vec![uint(13, 256), DynSolValue::String("hidden".into())],
    ];
    let mut logs: Vec<(Option<usize>, Vec<B256>, Vec<u8>)> = events
        .iter()
        .zip(&values)
        .enumerate()
        .map(|(event_idx, (event, values))| {
            let (topics, data) = encode_log(event, values);
            let owner = (event_idx < configured.len()).then_some(event_idx);
            (owner, topics, data)
        })
        .collect();
    // Logs of events the contract does not declare: taken by an anonymous event only if their data decodes.
    let ping_data = encode_log(&events[5], &values[5]).1;
    logs.push((Some(5), vec![B256::repeat_byte(0xee); 2], ping_data));
    logs.push((None, vec![B256::repeat_byte(0xee); 2], vec![0xff; 32]));
    logs.push((None, vec![], vec![0xff; 32]));
    for (owner, topics, data) in &logs {
        let (takers, kept) = takers(&decoders, topics, data, &named_selectors);
        assert_eq!(kept, owner.is_some(), "kept raw exactly when taken");
        assert_eq!(
            takers,
            owner.iter().copied().collect::<Vec<_>>(),
            "log with {} topics, topic0 {:?}",
            topics.len(),
            topics.first()
        );
    }
    // A named event's log that does not decode is an error, not silently another event's, and kept raw.
    let (topics, _) = encode_log(&events[1], &values[1]);
    let mut offer = Offer::new(&topics, &[], &named_selectors);
    assert!(offer.decode(&decoders[1]).is_err());
    assert!(offer.kept());
}

/// Goal: a log two anonymous events could both be goes to one table, the first configured that it fits.
/// Method: the same log offered to two anonymous events of one shape in both orders, and to two of one
/// topic count whose data lengths differ (only the second fits).
#[test]
fn two_anonymous_events_of_one_topic_count_take_a_log_once_the_first_configured_that_fits() {
    const A: &str = "event A(address indexed who, uint256 amount) anonymous";
    const B: &str = "event B(address indexed owner, uint256 value) anonymous";
    const WIDE: &str = "event Wide(address indexed who, uint256 a, uint256 b) anonymous";
    let (topics, data) = log_of(A, &[address(A1), uint(5, 256)]);
    assert_eq!(
        takers(&decoders(&[A, B]), &topics, &data, &[]),
        (vec![0], true)
    );
    assert_eq!(
        takers(&decoders(&[B, A]), &topics, &data, &[]),
        (vec![0], true)
    );
    assert_eq!(
        takers(&decoders(&[WIDE, A]), &topics, &data, &[]),
        (vec![1], true)
    );
    assert!(kept(&decoders(&[WIDE, A]), &topics, &data, &[]));
    // A named event before or between them does not change which anonymous one takes it.
    let named = "event Other(address indexed who, uint256 amount)";
    assert_eq!(
        takers(&decoders(&[named, B, A]), &topics, &data, &[]),
        (vec![1], true)
    );
}

/// Goal: data longer (or shorter) than an event's static parameters is not that event's. Method: a
/// Transfer and an anonymous event of its shape, each with a word and a byte over, and a word short.
#[test]
fn a_static_body_with_bytes_over_is_not_the_events() {
    const TRANSFER: &str =
        "event Transfer(address indexed from, address indexed to, uint256 value)";
    const SKIM: &str =
        "event Skim(address indexed from, address indexed to, uint256 value) anonymous";
    let (topics, data) = log_of(TRANSFER, &[address(A1), address(A2), uint(9, 256)]);
    for over in [vec![0u8; 32], vec![0u8; 1]] {
        let long = [&data[..], &over[..]].concat();
        let transfer = decoder(TRANSFER);
        let err = transfer.decode(&topics, &long).unwrap_err();
        assert!(
            matches!(&err, DecodeError::Mismatch { reason, .. }
                if reason.contains(&format!("the data is {} bytes", long.len())) && reason.contains("exactly 32")),
            "{err}"
        );
        // Named: the log is the Transfer's by topic0, malformed, kept raw; never an anonymous event's.
        let mut offer = Offer::new(&topics, &long, &[]);
        assert!(offer.decode(&transfer).is_err());
        assert!(offer.kept());
        // Anonymous: a log with bytes over is simply not its, and not kept.
        let (anonymous_topics, _) = log_of(SKIM, &[address(A1), address(A2), uint(9, 256)]);
        assert_eq!(
            takers(&decoders(&[SKIM]), &anonymous_topics, &long, &[]),
            (vec![], false)
        );
        assert!(!kept(&decoders(&[SKIM]), &anonymous_topics, &long, &[]));
    }
    assert!(decoder(TRANSFER).decode(&topics, &data[..0]).is_err());
    // Dynamic parameters have no one length: their data is decoded as alloy reads it.
    let note = "event Note(string text) anonymous";
    let (topics, data) = log_of(note, &[DynSolValue::String("hi".into())]);
    assert_eq!(
        takers(&decoders(&[note]), &topics, &data, &[]),
        (vec![0], true)
    );
}

/// Goal: a log of a named event the contract's ABI lacks, with an anonymous event's topic count, is that
/// anonymous event's only when its data has the anonymous event's exact shape (then nothing tells them
/// apart), and never when the ABI names its topic0. Method: logs of three undeclared events with Skim's
/// topic count: two words of data (Skim's shape), three words, none.
#[test]
fn a_named_event_missing_from_the_abi_is_an_anonymous_ones_only_in_its_exact_shape() {
    const SKIM: &str =
        "event Skim(bytes32 indexed tag, address indexed to, uint256 a, uint256 b) anonymous";
    const MEMO: &str = "event Memo(address indexed who, uint256 a, uint256 b)";
    const NOTE: &str = "event Note(address indexed who, uint256 a, uint256 b, uint256 c)";
    const PAUSE: &str = "event Pause(address indexed who)";
    let skim = decoders(&[SKIM]);
    let memo = log_of(MEMO, &[address(A1), uint(1, 256), uint(2, 256)]);
    let note = log_of(
        NOTE,
        &[address(A1), uint(1, 256), uint(2, 256), uint(3, 256)],
    );
    let pause = log_of(PAUSE, &[address(A1)]);
    assert_eq!(takers(&skim, &memo.0, &memo.1, &[]), (vec![0], true));
    assert_eq!(takers(&skim, &note.0, &note.1, &[]), (vec![], false));
    assert_eq!(takers(&skim, &pause.0, &pause.1, &[]), (vec![], false));
    assert!(!kept(&skim, &note.0, &note.1, &[]) && !kept(&skim, &pause.0, &pause.1, &[]));
    // Declared in the ABI (not configured): its logs are its own, never Skim's, and not kept.
    let memo_selector = [memo.0[0]];
    assert_eq!(
        takers(&skim, &memo.0, &memo.1, &memo_selector),
        (vec![], false)
    );
}
