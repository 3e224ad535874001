//! The simulated access service over real sockets: encodings, errors, limits, faults, reorgs, ground truth.
//!
//! Each test starts its own devnode on an ephemeral port with the fault under test. The chain is lazily generated
//! from seed 7 (the default) unless a test says otherwise; expected values come from `GroundTruth` or from
//! a brute-force reference written here, never from the devnode's own JSON code.

use std::collections::BTreeSet;
use std::time::Duration;

use alloy_primitives::{keccak256, Address, B256};
use devnode::contracts::{ALL_CONTRACTS, MISC, PAIR, TOKEN_A, TOKEN_B};
use devnode::{DevNode, DevNodeConfig, Finality, GroundTruth, TooManyStyle, TruthLog};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite;

/// Failure guard for awaits that should finish at once; never a synchronisation device.
pub(crate) const GUARD: Duration = Duration::from_secs(30);

pub(crate) fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

pub(crate) async fn start(configure: impl FnOnce(&mut DevNodeConfig)) -> DevNode {
    let mut cfg = DevNodeConfig::default();
    configure(&mut cfg);
    DevNode::start(cfg)
        .await
        .expect("devnode starts on an ephemeral port")
}

/// POSTs `body` and returns status, headers and the parsed JSON body.
pub(crate) async fn post(url: &str, body: &Value) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = tokio::time::timeout(GUARD, client().post(url).json(body).send())
        .await
        .expect("guard")
        .expect("request succeeds");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body");
    let value =
        serde_json::from_str(&text).unwrap_or_else(|err| panic!("not JSON ({err}): {text}"));
    (status, headers, value)
}

pub(crate) fn request(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
}

/// Calls `method` and returns the whole response object.
pub(crate) async fn call(node: &DevNode, method: &str, params: Value) -> Value {
    post(&node.http_url(), &request(method, params)).await.2
}

pub(crate) async fn result(node: &DevNode, method: &str, params: Value) -> Value {
    let response = call(node, method, params).await;
    assert!(
        response.get("error").is_none(),
        "{method} failed: {response}"
    );
    response["result"].clone()
}

pub(crate) fn error_of(response: &Value) -> (i64, String) {
    let error = &response["error"];
    (
        error["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("no error in {response}")),
        error["message"].to_string(),
    )
}

pub(crate) fn hex(n: u64) -> String {
    format!("{n:#x}")
}

pub(crate) fn parse_quantity(value: &Value) -> u64 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    let digits = text
        .strip_prefix("0x")
        .unwrap_or_else(|| panic!("no 0x: {text}"));
    assert!(
        digits == "0" || !digits.starts_with('0'),
        "leading zero in {text}"
    );
    assert_eq!(digits, digits.to_lowercase(), "uppercase in {text}");
    u64::from_str_radix(digits, 16).unwrap_or_else(|err| panic!("{text}: {err}"))
}

fn assert_hash(value: &Value, n_bytes: usize) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    assert_eq!(text.len(), 2 + 2 * n_bytes, "{text}");
    assert!(
        text.starts_with("0x")
            && text[2..]
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
    );
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    format!("0x{}", alloy_primitives::hex::encode(bytes))
}

/// Compares one served log object with its ground truth, field by field, from the spec's table.
pub(crate) fn assert_log_is(served: &Value, truth: &TruthLog, removed: bool) {
    assert_eq!(
        served["address"],
        to_hex(truth.address.as_slice()),
        "{served}"
    );
    let topics: Vec<String> = truth.topics.iter().map(|t| to_hex(t.as_slice())).collect();
    assert_eq!(served["topics"], json!(topics));
    assert_eq!(served["data"], to_hex(&truth.data));
    assert_eq!(parse_quantity(&served["blockNumber"]), truth.block_number);
    assert_eq!(served["blockHash"], to_hex(truth.block_hash.as_slice()));
    assert_eq!(
        served["transactionHash"],
        to_hex(truth.transaction_hash.as_slice())
    );
    assert_eq!(
        parse_quantity(&served["transactionIndex"]),
        truth.transaction_index
    );
    assert_eq!(parse_quantity(&served["logIndex"]), truth.log_index);
    assert_eq!(served["removed"], json!(removed));
}

pub(crate) fn assert_logs_are(served: &Value, truth: &[TruthLog]) {
    let served = served
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {served}"));
    assert_eq!(served.len(), truth.len());
    for (served, truth) in served.iter().zip(truth) {
        assert_log_is(served, truth, false);
    }
}

/// A block in a dense segment (a few hundred logs), found from the ground truth's cheap counts.
fn dense_block(truth: &GroundTruth, from: u64) -> u64 {
    (from..truth.head())
        .find(|n| truth.log_count(*n) >= 100)
        .expect("the default chain has dense segments")
}

pub(crate) fn logs_filter(from: u64, to: u64) -> Value {
    json!([{"fromBlock": hex(from), "toBlock": hex(to)}])
}

// ---------------------------------------------------------------------------------------------------------
// Methods and encodings

#[tokio::test]
async fn serves_chain_id_head_and_blocks_with_the_spec_encodings() {
    let node = start(|_| {}).await;
    let truth = node.truth();
    assert_eq!(
        result(&node, "eth_chainId", json!([])).await,
        json!("0x539")
    );
    assert_eq!(
        parse_quantity(&result(&node, "eth_blockNumber", json!([])).await),
        truth.head()
    );
    assert_eq!(truth.head(), 200_000);

    let number = dense_block(&truth, 0);
    let block = result(&node, "eth_getBlockByNumber", json!([hex(number), false])).await;
    let expected = truth.block(number).expect("block exists");
    assert_eq!(parse_quantity(&block["number"]), number);
    assert_eq!(block["hash"], to_hex(expected.hash.as_slice()));
    assert_eq!(block["parentHash"], to_hex(expected.parent_hash.as_slice()));
    assert_eq!(parse_quantity(&block["timestamp"]), expected.timestamp);
    for field in [
        "hash",
        "parentHash",
        "sha3Uncles",
        "transactionsRoot",
        "stateRoot",
        "receiptsRoot",
        "mixHash",
    ] {
        assert_hash(&block[field], 32);
    }
    assert_hash(&block["logsBloom"], 256);
    assert_hash(&block["nonce"], 8);
    assert_hash(&block["miner"], 20);
    for field in [
        "difficulty",
        "totalDifficulty",
        "size",
        "gasLimit",
        "gasUsed",
        "timestamp",
    ] {
        parse_quantity(&block[field]);
    }
    assert!(block["extraData"]
        .as_str()
        .is_some_and(|s| s.starts_with("0x")));
    assert_eq!(block["uncles"], json!([]));
    let tx_hashes: Vec<String> = expected
        .transactions
        .iter()
        .map(|h| to_hex(h.as_slice()))
        .collect();
    assert_eq!(block["transactions"], json!(tx_hashes));
    assert!(!tx_hashes.is_empty());

    let full = result(&node, "eth_getBlockByNumber", json!([hex(number), true])).await;
    let first_tx = &full["transactions"][0];
    assert_eq!(first_tx["hash"], json!(tx_hashes[0]));
    assert_eq!(first_tx["blockHash"], block["hash"]);
    assert_eq!(parse_quantity(&first_tx["transactionIndex"]), 0);
    assert_hash(&first_tx["from"], 20);

    let by_hash = result(&node, "eth_getBlockByHash", json!([block["hash"], false])).await;
    assert_eq!(by_hash, block);
    node.shutdown().await;
}

#[tokio::test]
async fn block_tags_resolve_and_unknown_blocks_are_null() {
    let node = start(|cfg| cfg.chain.blocks = 1_000).await;
    let number_of = |block: &Value| parse_quantity(&block["number"]);
    assert_eq!(
        number_of(&result(&node, "eth_getBlockByNumber", json!(["latest", false])).await),
        1_000
    );
    assert_eq!(
        number_of(&result(&node, "eth_getBlockByNumber", json!(["earliest", false])).await),
        0
    );
    assert_eq!(
        number_of(&result(&node, "eth_getBlockByNumber", json!(["finalized", false])).await),
        1_000 - 64
    );
    let pending = result(&node, "eth_getBlockByNumber", json!(["pending", false])).await;
    for field in ["number", "hash", "nonce", "logsBloom"] {
        assert_eq!(pending[field], Value::Null, "{field}");
    }
    assert_eq!(
        pending["parentHash"],
        result(&node, "eth_getBlockByNumber", json!(["latest", false])).await["hash"]
    );
    // spec: `safe` is not supported by eth_getBlockByNumber.
    let (code, message) =
        error_of(&call(&node, "eth_getBlockByNumber", json!(["safe", false])).await);
    assert_eq!(code, -32602);
    assert!(message.contains("safe"), "{message}");
    assert_eq!(
        result(&node, "eth_getBlockByNumber", json!([hex(1_001), false])).await,
        Value::Null
    );
    let unknown = to_hex(B256::repeat_byte(0x42).as_slice());
    assert_eq!(
        result(&node, "eth_getBlockByHash", json!([unknown, false])).await,
        Value::Null
    );
    node.shutdown().await;
}

#[tokio::test]
async fn hashes_parent_hashes_and_timestamps_chain_up() {
    let node = start(|cfg| cfg.chain.blocks = 300).await;
    let mut previous: Option<Value> = None;
    for number in 0..=40u64 {
        let block = result(&node, "eth_getBlockByNumber", json!([hex(number), false])).await;
        match &previous {
            None => assert_eq!(block["parentHash"], to_hex(&[0u8; 32])),
            Some(parent) => {
                assert_eq!(block["parentHash"], parent["hash"]);
                assert!(parse_quantity(&block["timestamp"]) > parse_quantity(&parent["timestamp"]));
            }
        }
        previous = Some(block);
    }
    node.shutdown().await;
}

#[tokio::test]
async fn the_bloom_contains_every_address_and_topic_of_its_logs() {
    let node = start(|_| {}).await;
    let truth = node.truth();
    let number = dense_block(&truth, 0);
    let block = truth.block(number).expect("block");
    let logs = truth.logs(number, number);
    assert_eq!(logs.len(), block.n_logs);
    for log in &logs {
        assert!(block.bloom_may_contain(log.address.as_slice()));
        for topic in &log.topics {
            assert!(block.bloom_may_contain(topic.as_slice()));
        }
    }
    let served = result(&node, "eth_getBlockByNumber", json!([hex(number), false])).await;
    assert_eq!(served["logsBloom"], to_hex(block.logs_bloom.as_slice()));
    // An empty block has an empty bloom.
    let empty = (1..truth.head())
        .find(|n| truth.log_count(*n) == 0)
        .expect("sparse blocks exist");
    assert!(truth.block(empty).expect("block").logs_bloom.is_zero());
    node.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------------
// Transport and JSON-RPC errors

#[tokio::test]
async fn another_key_is_refused_with_401_over_http_and_websocket() {
    let node = start(|_| {}).await;
    let url = format!("http://{}/v3/wrong", node.addr());
    let (status, _, body) = post(&url, &request("eth_chainId", json!([]))).await;
    assert_eq!(status, 401);
    assert_eq!(body["jsonrpc"], "2.0");
    assert!(body["error"]["code"].is_i64(), "{body}");

    let ws_url = format!("ws://{}/ws/v3/wrong", node.addr());
    match tokio_tungstenite::connect_async(ws_url).await {
        Err(tungstenite::Error::Http(response)) => assert_eq!(response.status().as_u16(), 401),
        other => panic!(
            "the upgrade was not refused: {:?}",
            other.map(|(_, response)| response.status())
        ),
    }
    node.shutdown().await;
}

#[tokio::test]
async fn unknown_paths_are_404_and_wrong_methods_405() {
    let node = start(|_| {}).await;
    let base = format!("http://{}", node.addr());
    let status = |response: reqwest::Response| response.status().as_u16();
    let not_found = client()
        .post(format!("{base}/v2/demo"))
        .json(&json!({}))
        .send()
        .await
        .expect("request");
    assert_eq!(status(not_found), 404);
    let get = client().get(node.http_url()).send().await.expect("request");
    assert_eq!(status(get), 405);
    let put = client()
        .put(node.http_url())
        .body("{}")
        .send()
        .await
        .expect("request");
    assert_eq!(status(put), 405);
    node.shutdown().await;
}

#[tokio::test]
async fn malformed_and_invalid_calls_get_the_standard_codes() {
    let node = start(|_| {}).await;
    let raw = |body: &'static str| {
        let url = node.http_url();
        async move {
            let response = client()
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .expect("request");
            assert_eq!(response.status().as_u16(), 200);
            response.json::<Value>().await.expect("JSON body")
        }
    };
    let parse_error = raw("{\"jsonrpc\": \"2.0\", \"id\": 1,").await;
    assert_eq!(error_of(&parse_error).0, -32700);
    assert_eq!(parse_error["id"], Value::Null);
    assert_eq!(
        error_of(&raw("{\"id\": 1, \"method\": \"eth_chainId\"}").await).0,
        -32600
    );
    assert_eq!(
        error_of(&raw("{\"jsonrpc\": \"2.0\", \"id\": 1}").await).0,
        -32600
    );
    assert_eq!(error_of(&raw("42").await).0, -32600);
    assert_eq!(error_of(&raw("[]").await).0, -32600);

    let unknown = call(&node, "eth_mine", json!([])).await;
    assert_eq!(error_of(&unknown).0, -32601);
    assert_eq!(unknown["id"], 1);
    for (method, params) in [
        ("eth_getBlockByNumber", json!(["0x01", false])),
        ("eth_getBlockByNumber", json!(["10", false])),
        ("eth_getBlockByNumber", json!(["0x1"])),
        ("eth_getBlockByNumber", json!(["0x1", "yes"])),
        ("eth_getBlockByHash", json!(["0x1234", false])),
        ("eth_getLogs", json!([])),
        ("eth_getLogs", json!([{"address": "0x12"}])),
        ("eth_getLogs", json!([{"topics": ["0xzz"]}])),
        ("eth_getLogs", json!([{"fromBlock": "latest!"}])),
        (
            "eth_getLogs",
            json!([{"topics": [null, null, null, null, null]}]),
        ),
        ("eth_chainId", json!([1])),
        ("eth_blockNumber", json!({"a": 1})),
    ] {
        let response = call(&node, method, params.clone()).await;
        assert_eq!(
            error_of(&response).0,
            -32602,
            "{method} {params}: {response}"
        );
    }
    node.shutdown().await;
}

#[tokio::test]
async fn a_batch_is_answered_as_an_array_in_order() {
    let node = start(|cfg| cfg.chain.blocks = 500).await;
    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
        {"jsonrpc": "2.0", "id": "two", "method": "eth_nope", "params": []},
        {"jsonrpc": "2.0", "id": 3, "method": "eth_blockNumber"},
        {"id": 4},
    ]);
    let (status, _, body) = post(&node.http_url(), &batch).await;
    assert_eq!(status, 200);
    let answers = body.as_array().expect("an array");
    assert_eq!(answers.len(), 4);
    assert_eq!(answers[0]["result"], "0x539");
    assert_eq!(answers[1]["id"], "two");
    assert_eq!(error_of(&answers[1]).0, -32601);
    assert_eq!(answers[2]["result"], hex(500));
    assert_eq!(error_of(&answers[3]).0, -32600);
    node.shutdown().await;
}

#[tokio::test]
async fn websocket_answers_like_http_including_batches() {
    let node = start(|_| {}).await;
    let truth = node.truth();
    let from = dense_block(&truth, 0);
    let (mut socket, _) = tokio_tungstenite::connect_async(node.ws_url())
        .await
        .expect("WebSocket connects");
    let mut ask = async |body: Value| {
        socket
            .send(tungstenite::Message::Text(body.to_string().into()))
            .await
            .expect("send");
        let answer = tokio::time::timeout(GUARD, socket.next())
            .await
            .expect("guard")
            .expect("open")
            .expect("frame");
        serde_json::from_str::<Value>(answer.to_text().expect("text")).expect("JSON")
    };
    let over_ws = ask(request("eth_getLogs", logs_filter(from, from + 2))).await;
    let over_http = call(&node, "eth_getLogs", logs_filter(from, from + 2)).await;
    assert_eq!(over_ws, over_http);
    assert_logs_are(&over_ws["result"], &truth.logs(from, from + 2));
    let batch = ask(json!([
        request("eth_chainId", json!([])),
        request("eth_blockNumber", json!([]))
    ]))
    .await;
    assert_eq!(batch[0]["result"], "0x539");
    assert_eq!(parse_quantity(&batch[1]["result"]), truth.head());
    assert_eq!(error_of(&ask(json!({"id": 9})).await).0, -32600);
    node.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------------
// eth_getLogs semantics

/// Geth's filter semantics, written independently of the devnode: any listed address; per topic position,
/// null (wildcard) or any of the listed topics; more positions than the log has topics never match.
pub(crate) fn reference_matches(
    log: &TruthLog,
    addresses: &[Address],
    topics: &[Option<Vec<B256>>],
) -> bool {
    (addresses.is_empty() || addresses.contains(&log.address))
        && topics.len() <= log.topics.len()
        && topics
            .iter()
            .zip(&log.topics)
            .all(|(wanted, topic)| match wanted {
                None => true,
                Some(alternatives) => alternatives.is_empty() || alternatives.contains(topic),
            })
}

/// Goal: eth_getLogs returns exactly what a brute-force filter of the ground truth returns, for random filters.
/// Method: proptest with a fixed seed draws ranges (spanning sparse and dense stretches), address sets and
/// positional topic filters from a pool of topics the chain really has; each is asked over HTTP and compared
/// log by log with the reference, or, when the reference exceeds 10,000, the answer must be -32005.
#[test]
fn get_logs_matches_a_brute_force_reference_on_random_filters() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let node = runtime.block_on(start(|_| {}));
    let truth = node.truth();
    let dense = dense_block(&truth, 0);
    // Topic pool: every distinct topic of a dense stretch, plus one that never occurs.
    let pool: Vec<B256> = truth
        .logs(dense, dense + 3)
        .iter()
        .flat_map(|log| log.topics.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .take(40)
        .chain([B256::repeat_byte(0xee)])
        .collect();
    let n_pool = pool.len();
    let addresses = [TOKEN_A, TOKEN_B, PAIR, MISC, Address::repeat_byte(0x99)];

    let position = prop_oneof![
        Just(None),
        (0..n_pool).prop_map(|i| Some(vec![i])),
        proptest::collection::vec(0..n_pool, 0..4).prop_map(Some),
    ];
    let strategy = (
        prop_oneof![Just(dense - 20), Just(dense), 1..150_000u64],
        0..40u64,
        proptest::collection::vec(0..addresses.len(), 0..3),
        proptest::collection::vec(position, 0..4),
    );
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases: 40,
            max_shrink_iters: 20,
            failure_persistence: None,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7u8; 32]),
    );
    let outcome = runner.run(&strategy, |(from, span, address_idxs, positions)| {
        let to = from + span;
        let chosen: Vec<Address> = address_idxs.iter().map(|i| addresses[*i]).collect();
        let topics: Vec<Option<Vec<B256>>> = positions
            .iter()
            .map(|p| {
                p.as_ref()
                    .map(|idxs| idxs.iter().map(|i| pool[*i]).collect())
            })
            .collect();
        let mut filter = json!({"fromBlock": hex(from), "toBlock": hex(to)});
        match chosen.len() {
            0 => {}
            1 => filter["address"] = json!(to_hex(chosen[0].as_slice())),
            _ => {
                filter["address"] = json!(chosen
                    .iter()
                    .map(|a| to_hex(a.as_slice()))
                    .collect::<Vec<_>>())
            }
        }
        if !topics.is_empty() {
            filter["topics"] = json!(topics
                .iter()
                .map(|p| match p {
                    None => Value::Null,
                    Some(alts) if alts.len() == 1 && from % 2 == 0 =>
                        json!(to_hex(alts[0].as_slice())),
                    Some(alts) => json!(alts
                        .iter()
                        .map(|t| to_hex(t.as_slice()))
                        .collect::<Vec<_>>()),
                })
                .collect::<Vec<_>>());
        }
        let expected: Vec<TruthLog> = truth
            .logs(from, to)
            .into_iter()
            .filter(|log| reference_matches(log, &chosen, &topics))
            .collect();
        let response = runtime.block_on(call(&node, "eth_getLogs", json!([filter])));
        if expected.len() > 10_000 {
            prop_assert_eq!(error_of(&response).0, -32005, "{}", filter);
        } else {
            let served = response["result"].as_array().cloned().unwrap_or_default();
            prop_assert_eq!(served.len(), expected.len(), "{} -> {}", filter, response);
            for (served, truth) in served.iter().zip(&expected) {
                assert_log_is(served, truth, false);
            }
        }
        Ok(())
    });
    if let Err(failure) = outcome {
        panic!("seed [7; 32]: {failure}");
    }
    runtime.block_on(node.shutdown());
}

#[tokio::test]
async fn tags_ranges_and_block_hash_select_the_right_blocks() {
    let number = dense_block(&GroundTruth::detached(&DevNodeConfig::default()), 0);
    let head = number + 100;
    let node = start(|cfg| cfg.chain.blocks = head).await;
    let truth = node.truth();
    let hash = to_hex(truth.block(number).expect("block").hash.as_slice());
    let by_hash = result(&node, "eth_getLogs", json!([{"blockHash": hash}])).await;
    assert_logs_are(&by_hash, &truth.logs(number, number));
    let (code, _) = error_of(
        &call(
            &node,
            "eth_getLogs",
            json!([{"blockHash": hash, "toBlock": "latest"}]),
        )
        .await,
    );
    assert_eq!(code, -32602);
    let unknown = to_hex(B256::repeat_byte(1).as_slice());
    assert_eq!(
        error_of(&call(&node, "eth_getLogs", json!([{"blockHash": unknown}])).await).0,
        -32000
    );
    let (code, message) = error_of(&call(&node, "eth_getLogs", logs_filter(10, 9)).await);
    assert_eq!(
        (code, message.as_str()),
        (-32000, "\"invalid block range params\"")
    );
    // Defaults are latest..latest; earliest is 0; finalized and safe are behind the head.
    let latest = result(&node, "eth_getLogs", json!([{}])).await;
    assert_logs_are(&latest, &truth.logs(head, head));
    let finalized = result(
        &node,
        "eth_getLogs",
        json!([{"fromBlock": "finalized", "toBlock": "finalized"}]),
    )
    .await;
    assert_logs_are(&finalized, &truth.logs(head - 64, head - 64));
    let safe = result(
        &node,
        "eth_getLogs",
        json!([{"fromBlock": "safe", "toBlock": "safe"}]),
    )
    .await;
    assert_logs_are(&safe, &truth.logs(head - 32, head - 32));
    let early = result(
        &node,
        "eth_getLogs",
        json!([{"fromBlock": "earliest", "toBlock": "0x5"}]),
    )
    .await;
    assert_logs_are(&early, &truth.logs(0, 5));
    // Beyond the head: clamped, or empty.
    let beyond = result(
        &node,
        "eth_getLogs",
        logs_filter(head - 10, head + 1_000_000),
    )
    .await;
    assert_logs_are(&beyond, &truth.logs(head - 10, head));
    assert_eq!(
        result(&node, "eth_getLogs", logs_filter(head + 1, head + 5)).await,
        json!([])
    );
    node.shutdown().await;
}

#[tokio::test]
async fn an_indexed_string_is_filtered_by_its_hash() {
    let node = start(|_| {}).await;
    let truth = node.truth();
    let from = dense_block(&truth, 0);
    let note_topic0 = keccak256("Note(address,string,string,bytes,bool)");
    let gm = keccak256("gm");
    let filter = json!([{"fromBlock": hex(from), "toBlock": hex(from + 5), "address": to_hex(MISC.as_slice()),
        "topics": [to_hex(note_topic0.as_slice()), null, to_hex(gm.as_slice())]}]);
    let served = result(&node, "eth_getLogs", filter).await;
    let expected: Vec<TruthLog> = truth
        .logs(from, from + 5)
        .into_iter()
        .filter(|log| log.event == "Note" && log.values[1].as_str() == Some("gm"))
        .collect();
    assert!(!expected.is_empty());
    assert_logs_are(&served, &expected);
    node.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------------
// Limits

/// Sum of the ground truth's per-block log counts over `from..=to`.
fn count(truth: &GroundTruth, from: u64, to: u64) -> usize {
    (from..=to).map(|n| truth.log_count(n)).sum()
}

#[tokio::test]
async fn too_many_results_use_each_wording_with_a_range_that_fits() {
    for style in [
        TooManyStyle::Plain,
        TooManyStyle::Infura,
        TooManyStyle::Alchemy,
        TooManyStyle::Reth,
        TooManyStyle::RethServerError,
    ] {
        let node = start(|cfg| cfg.limits.too_many_style = style).await;
        let truth = node.truth();
        let from = dense_block(&truth, 0);
        let to = from + 300;
        assert!(count(&truth, from, to) > 10_000);
        let (code, message) = error_of(&call(&node, "eth_getLogs", logs_filter(from, to)).await);
        // The suggestion: the largest end from `from` whose results fit the cap.
        let end = (from..=to)
            .take_while(|end| count(&truth, from, *end) <= 10_000)
            .last()
            .expect("from fits");
        let expected = match style {
            TooManyStyle::Plain => (-32005, "query returned more than 10000 results".to_owned()),
            TooManyStyle::Infura => (
                -32005,
                format!("query returned more than 10000 results. Try with this block range [{}, {}].", hex(from),
                    hex(end)),
            ),
            TooManyStyle::Alchemy => (
                -32602,
                format!("Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range \
                    and no limit on the response size, or you can request any block range with a cap of 10K logs \
                    in the response. Based on your parameters and the response size limit, this block range should \
                    work: [{}, {}]", hex(from), hex(end)),
            ),
            TooManyStyle::Reth => (-32602, format!("query exceeds max results 10000, retry with the range {from}-{end}")),
            TooManyStyle::RethServerError => {
                (-32000, format!("query exceeds max results 10000, retry with the range {from}-{end}"))
            }
        };
        assert_eq!(
            (code, message),
            (expected.0, format!("{:?}", expected.1)),
            "{style:?}"
        );
        // The suggested range really works.
        let fitted = result(&node, "eth_getLogs", logs_filter(from, end)).await;
        assert_eq!(
            fitted.as_array().map(Vec::len),
            Some(count(&truth, from, end))
        );
        node.shutdown().await;
    }
}

#[tokio::test]
async fn a_single_block_over_the_cap_suggests_itself_and_each_contract_event_fits() {
    let node = start(|cfg| cfg.limits.too_many_style = TooManyStyle::Infura).await;
    let truth = node.truth();
    let huge = truth.next_huge_block(1);
    assert!(truth.log_count(huge) > 10_000, "{huge}");
    let response = call(&node, "eth_getLogs", logs_filter(huge, huge + 10)).await;
    assert_eq!(error_of(&response).0, -32005);
    assert_eq!(
        response["error"]["data"],
        json!({"from": hex(huge), "to": hex(huge)})
    );
    let logs = truth.logs(huge, huge);
    let transfer = keccak256("Transfer(address,address,uint256)");
    let expected: Vec<TruthLog> = logs
        .into_iter()
        .filter(|log| log.address == TOKEN_A && log.topics[0] == transfer)
        .collect();
    assert!(!expected.is_empty() && expected.len() < 10_000);
    let filter = json!([{"blockHash": to_hex(truth.block(huge).expect("block").hash.as_slice()),
        "address": to_hex(TOKEN_A.as_slice()), "topics": [to_hex(transfer.as_slice())]}]);
    assert_logs_are(&result(&node, "eth_getLogs", filter).await, &expected);
    node.shutdown().await;
}

#[tokio::test]
async fn query_time_is_modelled_from_blocks_scanned_and_logs_matched() {
    let node = start(|cfg| {
        cfg.limits.query_budget = Duration::from_millis(100);
        cfg.limits.block_cost = Duration::from_millis(1);
        cfg.limits.log_cost = Duration::from_millis(1);
    })
    .await;
    let truth = node.truth();
    let timeout = "\"query timeout exceeded\"".to_owned();
    // 150 blocks at 1 ms each exceed 100 ms before any log is counted.
    let sparse_start = (1..truth.head())
        .find(|n| count(&truth, *n, n + 150) < 5)
        .expect("a sparse stretch");
    let response = call(
        &node,
        "eth_getLogs",
        logs_filter(sparse_start, sparse_start + 150),
    )
    .await;
    assert_eq!(error_of(&response), (-32005, timeout.clone()));
    assert!(call(
        &node,
        "eth_getLogs",
        logs_filter(sparse_start, sparse_start + 50)
    )
    .await
    .get("result")
    .is_some());
    // One dense block: few blocks, but 100+ logs at 1 ms each.
    let dense = dense_block(&truth, 0);
    assert_eq!(
        error_of(&call(&node, "eth_getLogs", logs_filter(dense, dense)).await),
        (-32005, timeout)
    );
    // Filtering to a rare event keeps it under budget.
    let ping_only = json!([{"fromBlock": hex(dense), "toBlock": hex(dense), "address": to_hex(PAIR.as_slice()),
        "topics": [to_hex(keccak256("Sync(uint112,uint112)").as_slice())]}]);
    assert!(call(&node, "eth_getLogs", ping_only)
        .await
        .get("result")
        .is_some());
    node.shutdown().await;
}

#[tokio::test]
async fn more_than_5000_addresses_and_topics_are_refused() {
    let node = start(|cfg| cfg.chain.blocks = 100).await;
    let addresses: Vec<String> = (0..4_999u64)
        .map(|i| to_hex(Address::left_padding_from(&i.to_be_bytes()).as_slice()))
        .collect();
    let topic = to_hex(B256::repeat_byte(3).as_slice());
    let at_limit = json!([{"address": addresses, "topics": [topic]}]);
    assert!(call(&node, "eth_getLogs", at_limit)
        .await
        .get("result")
        .is_some());
    let over = json!([{"address": addresses, "topics": [[topic, topic]]}]);
    let (code, message) = error_of(&call(&node, "eth_getLogs", over).await);
    assert_eq!(code, -32602);
    assert!(message.contains("5000"), "{message}");
    node.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------------
// Faults

#[tokio::test]
async fn a_429_fault_carries_retry_after_over_http_and_a_32005_over_websocket() {
    let node = start(|cfg| {
        cfg.faults.http_429 = 1.0;
        cfg.faults.retry_after_secs = 0;
    })
    .await;
    let (status, headers, body) = post(&node.http_url(), &request("eth_chainId", json!([]))).await;
    assert_eq!(status, 429);
    assert_eq!(
        headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("0")
    );
    assert_eq!(error_of(&body).0, -32005);
    let (mut socket, _) = tokio_tungstenite::connect_async(node.ws_url())
        .await
        .expect("connects");
    socket
        .send(tungstenite::Message::Text(
            request("eth_chainId", json!([])).to_string().into(),
        ))
        .await
        .expect("send");
    let answer = socket.next().await.expect("open").expect("frame");
    let answer: Value = serde_json::from_str(answer.to_text().expect("text")).expect("JSON");
    assert_eq!(
        error_of(&answer),
        (-32005, "\"project ID request rate exceeded\"".to_owned())
    );
    assert_eq!(answer["id"], 1);
    assert_eq!(node.stats().rate_limited, 2);
    node.shutdown().await;
}

#[tokio::test]
async fn requests_over_max_rps_get_429() {
    let node = start(|cfg| cfg.faults.max_rps = Some(1)).await;
    let mut statuses = Vec::new();
    for _ in 0..4 {
        statuses.push(
            post(&node.http_url(), &request("eth_chainId", json!([])))
                .await
                .0,
        );
    }
    // Four requests cannot all fall in different one-second windows unless the machine stalls for seconds.
    assert_eq!(statuses[0], 200);
    assert!(statuses.contains(&429), "{statuses:?}");
    let stats = node.stats();
    assert_eq!(stats.status(429) + stats.status(200), 4);
    node.shutdown().await;
}

#[tokio::test]
async fn server_errors_are_500_502_or_503_and_internal_errors_32603() {
    let node = start(|cfg| cfg.faults.http_5xx = 1.0).await;
    let mut seen = BTreeSet::new();
    for _ in 0..12 {
        let response = client()
            .post(node.http_url())
            .json(&request("eth_chainId", json!([])))
            .send()
            .await;
        seen.insert(response.expect("request").status().as_u16());
    }
    assert!(
        seen.iter().all(|s| [500, 502, 503].contains(s)) && seen.len() > 1,
        "{seen:?}"
    );
    node.shutdown().await;

    let node = start(|cfg| cfg.faults.internal_error = 1.0).await;
    assert_eq!(
        error_of(&call(&node, "eth_blockNumber", json!([])).await).0,
        -32603
    );
    assert_eq!(node.stats().errors_with(-32603), 1);
    node.shutdown().await;
}

#[tokio::test]
async fn the_rate_limit_wording_uses_32005_with_a_backoff_hint() {
    let node = start(|cfg| cfg.faults.rate_limit_error = 1.0).await;
    let response = call(&node, "eth_getLogs", logs_filter(1, 2)).await;
    assert_eq!(
        error_of(&response),
        (-32005, "\"project ID request rate exceeded\"".to_owned())
    );
    assert_eq!(response["error"]["data"]["backoff_seconds"], 1);
    node.shutdown().await;
}

#[tokio::test]
async fn a_dropped_connection_cuts_the_body_over_http_and_closes_the_websocket() {
    let node = start(|cfg| cfg.faults.drop = 1.0).await;
    let truth = node.truth();
    let from = dense_block(&truth, 0);
    let response = client()
        .post(node.http_url())
        .json(&request("eth_getLogs", logs_filter(from, from)))
        .send()
        .await;
    // The connection may also break before the headers are read; then there is no body at all.
    if let Ok(response) = response {
        assert!(response.bytes().await.is_err(), "the body arrived whole");
    }
    let (mut socket, _) = tokio_tungstenite::connect_async(node.ws_url())
        .await
        .expect("connects");
    socket
        .send(tungstenite::Message::Text(
            request("eth_chainId", json!([])).to_string().into(),
        ))
        .await
        .expect("send");
    let next = tokio::time::timeout(GUARD, socket.next())
        .await
        .expect("guard");
    assert!(
        matches!(
            next,
            None | Some(Err(_)) | Some(Ok(tungstenite::Message::Close(_)))
        ),
        "{next:?}"
    );
    assert_eq!(node.stats().dropped, 2);
    node.shutdown().await;
}

#[tokio::test]
async fn added_latency_delays_the_answer() {
    let node = start(|cfg| {
        cfg.faults.latency = Duration::from_millis(30);
        cfg.faults.jitter = Duration::from_millis(10);
    })
    .await;
    let started = tokio::time::Instant::now();
    result(&node, "eth_chainId", json!([])).await;
    // A lower bound only: a sleep never ends early.
    assert!(started.elapsed() >= Duration::from_millis(30));
    node.shutdown().await;
}

#[tokio::test]
async fn a_lagging_backend_sees_an_older_head() {
    let node = start(|cfg| {
        cfg.faults.lag = 1.0;
        cfg.faults.lag_depth = 5;
    })
    .await;
    let truth = node.truth();
    let head = truth.head();
    assert_eq!(
        parse_quantity(&result(&node, "eth_blockNumber", json!([])).await),
        head - 5
    );
    assert_eq!(
        result(&node, "eth_getBlockByNumber", json!([hex(head), false])).await,
        Value::Null
    );
    let logs = result(&node, "eth_getLogs", logs_filter(head - 20, head)).await;
    assert_logs_are(&logs, &truth.logs(head - 20, head - 5));
    node.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------------
// A moving head and reorgs

#[tokio::test]
async fn mining_moves_the_head_and_finalized_lags_it() {
    let node = start(|cfg| cfg.chain.blocks = 100).await;
    assert_eq!(node.mine(5), 105);
    assert_eq!(
        parse_quantity(&result(&node, "eth_blockNumber", json!([])).await),
        105
    );
    let finalized = result(&node, "eth_getBlockByNumber", json!(["finalized", false])).await;
    assert_eq!(parse_quantity(&finalized["number"]), 105 - 64);
    assert_eq!(node.truth().finalized(), 41);
    node.shutdown().await;
}

#[tokio::test]
async fn a_block_timer_produces_blocks() {
    let node = start(|cfg| {
        cfg.chain.blocks = 10;
        cfg.chain.block_time = Some(Duration::from_millis(5));
    })
    .await;
    let truth = node.truth();
    let mut heads = truth.watch_head();
    // Waiting for the event (a new head), not for a time: the guard only bounds a broken timer.
    tokio::time::timeout(GUARD, heads.wait_for(|head| *head >= 12))
        .await
        .expect("guard")
        .expect("the chain is alive");
    assert!(truth.head() >= 12);
    node.shutdown().await;
}

/// Goal: a reorg replaces the top blocks by a consistent fork with other logs, and ground truth follows.
/// Method: put the head in a dense stretch, reorg 3, compare hashes, parent links and logs before and after.
#[tokio::test]
async fn a_reorg_replaces_the_top_blocks_with_new_hashes_and_other_logs() {
    let head = dense_block(&GroundTruth::detached(&DevNodeConfig::default()), 0) + 5;
    let node = start(|cfg| cfg.chain.blocks = head).await;
    let truth = node.truth();
    let before: Vec<_> = (head - 5..=head)
        .map(|n| truth.block(n).expect("block"))
        .collect();
    let logs_before = truth.logs(head - 2, head);
    assert_eq!(node.reorg(3), head - 2);
    let after: Vec<_> = (head - 5..=head)
        .map(|n| truth.block(n).expect("block"))
        .collect();
    assert_eq!(before[..3], after[..3]);
    for (old, new) in before[3..].iter().zip(&after[3..]) {
        assert_ne!(old.hash, new.hash);
    }
    let served: Vec<Value> = {
        let mut blocks = Vec::new();
        for n in head - 5..=head {
            blocks.push(result(&node, "eth_getBlockByNumber", json!([hex(n), false])).await);
        }
        blocks
    };
    for (pair, expected) in served.windows(2).zip(&after[1..]) {
        assert_eq!(pair[1]["parentHash"], pair[0]["hash"]);
        assert_eq!(pair[1]["hash"], to_hex(expected.hash.as_slice()));
    }
    let logs_after = truth.logs(head - 2, head);
    let payload = |logs: &[TruthLog]| {
        logs.iter()
            .map(|l| (l.address, l.topics.clone(), l.data.clone()))
            .collect::<Vec<_>>()
    };
    assert_ne!(payload(&logs_before), payload(&logs_after));
    assert_logs_are(
        &result(&node, "eth_getLogs", logs_filter(head - 2, head)).await,
        &logs_after,
    );
    // The old hash is gone.
    let old = to_hex(before[5].hash.as_slice());
    assert_eq!(
        result(&node, "eth_getBlockByHash", json!([old, false])).await,
        Value::Null
    );
    assert!(truth.block_by_hash(before[5].hash).is_none());
    assert_eq!(
        truth.block_by_hash(after[5].hash).map(|b| b.number),
        Some(head)
    );
    node.shutdown().await;
}

#[tokio::test]
async fn scripted_reorgs_happen_every_n_blocks() {
    let node = start(|cfg| {
        cfg.chain.blocks = 95;
        cfg.chain.reorg_every = Some(100);
        cfg.chain.reorg_depth = 2;
    })
    .await;
    let truth = node.truth();
    node.mine(4);
    let before = truth.block(99).expect("block");
    node.mine(1);
    let after = truth.block(99).expect("block");
    assert_ne!(before.hash, after.hash);
    assert_eq!(truth.block(100).expect("block").parent_hash, after.hash);
    node.shutdown().await;
}

#[tokio::test]
async fn a_stale_replica_serves_orphaned_logs_as_removed() {
    let head = dense_block(&GroundTruth::detached(&DevNodeConfig::default()), 0) + 5;
    let node = start(|cfg| {
        cfg.chain.blocks = head;
        cfg.faults.stale_replica = 1.0;
    })
    .await;
    let truth = node.truth();
    let orphaned = truth.logs(head - 1, head);
    node.reorg(2);
    let canonical = truth.logs(head - 1, head);
    let served = result(&node, "eth_getLogs", logs_filter(head - 1, head)).await;
    let served = served.as_array().expect("array");
    assert_eq!(served.len(), orphaned.len() + canonical.len());
    let (removed, kept): (Vec<&Value>, Vec<&Value>) =
        served.iter().partition(|log| log["removed"] == true);
    assert_eq!(removed.len(), orphaned.len());
    for (served, truth) in removed.iter().zip(&orphaned) {
        assert_log_is(served, truth, true);
    }
    for (served, truth) in kept.iter().zip(&canonical) {
        assert_log_is(served, truth, false);
    }
    // Ground truth never includes orphaned logs.
    assert!(canonical
        .iter()
        .all(|log| orphaned.iter().all(|old| old.block_hash != log.block_hash)));
    node.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------------
// Determinism, ground truth, stats, entry points

#[tokio::test]
async fn the_same_seed_gives_the_same_chain_and_another_seed_another() {
    let a = GroundTruth::detached(&DevNodeConfig::default());
    let b = GroundTruth::detached(&DevNodeConfig::default());
    let c = GroundTruth::detached(&DevNodeConfig {
        seed: 8,
        ..DevNodeConfig::default()
    });
    let from = dense_block(&a, 0);
    assert_eq!(a.logs(from, from + 2), b.logs(from, from + 2));
    assert_eq!(a.block(from), b.block(from));
    assert_ne!(a.block(from).map(|b| b.hash), c.block(from).map(|b| b.hash));
    assert_ne!(a.logs(from, from + 2), c.logs(from, from + 2));
    // And over the wire: two nodes of one seed answer byte for byte alike.
    let (x, y) = (start(|_| {}).await, start(|_| {}).await);
    assert_eq!(
        call(&x, "eth_getLogs", logs_filter(from, from + 2)).await,
        call(&y, "eth_getLogs", logs_filter(from, from + 2)).await
    );
    x.shutdown().await;
    y.shutdown().await;
}

#[tokio::test]
async fn ground_truth_values_are_the_original_event_parameters() {
    let truth = GroundTruth::detached(&DevNodeConfig::default());
    let from = dense_block(&truth, 0);
    let logs = truth.logs(from, from + 5);
    let events: BTreeSet<&str> = logs.iter().map(|log| log.event).collect();
    assert!(
        events.contains("Transfer") && events.contains("Swap"),
        "{events:?}"
    );
    for log in &logs {
        assert!(ALL_CONTRACTS.contains(&log.address));
        if log.event == "Transfer" {
            assert_eq!(log.values.len(), 3);
            assert_eq!(
                log.values[0].as_address().map(|a| a.into_word()),
                Some(log.topics[1])
            );
        }
        if log.event == "Ping" {
            assert_eq!(log.topics.len(), 1, "anonymous: no selector topic");
        }
    }
    // log indexes are contiguous per block; a transaction has several logs.
    for block in logs.chunk_by(|a, b| a.block_number == b.block_number) {
        assert!(block
            .iter()
            .enumerate()
            .all(|(i, log)| log.log_index == i as u64));
    }
    assert!(logs
        .windows(2)
        .any(|w| w[0].transaction_hash == w[1].transaction_hash));
}

#[tokio::test]
async fn stats_count_methods_outcomes_and_logs_and_are_served_as_json() {
    let node = start(|_| {}).await;
    let truth = node.truth();
    let from = dense_block(&truth, 0);
    let logs = result(&node, "eth_getLogs", logs_filter(from, from)).await;
    call(&node, "eth_nope", json!([])).await;
    post(
        &format!("http://{}/v3/wrong", node.addr()),
        &request("eth_chainId", json!([])),
    )
    .await;
    let stats = node.stats();
    assert_eq!(stats.ok("eth_getLogs"), 1);
    assert_eq!(
        stats.logs_served,
        logs.as_array().map_or(0, Vec::len) as u64
    );
    assert_eq!(stats.errors_with(-32601), 1);
    assert_eq!(stats.status(401), 1);
    let served: Value = client()
        .get(format!("http://{}/stats", node.addr()))
        .send()
        .await
        .expect("request")
        .json()
        .await
        .expect("JSON");
    assert_eq!(served["logs_served"], stats.logs_served);
    assert_eq!(served["methods"]["eth_getLogs"]["ok"], 1);
    assert!(stats.summary().contains("eth_getLogs"));
    node.shutdown().await;
}

#[tokio::test]
async fn a_sim_url_starts_the_node_it_describes() {
    let cfg = DevNodeConfig::from_sim_url("sim://?seed=3&blocks=1234&chain_id=99")
        .expect("valid sim URL");
    let node = DevNode::start(cfg).await.expect("starts");
    assert_eq!(result(&node, "eth_chainId", json!([])).await, "0x63");
    assert_eq!(result(&node, "eth_blockNumber", json!([])).await, hex(1234));
    assert!(node.http_url().ends_with("/v3/demo") && node.ws_url().starts_with("ws://"));
    node.shutdown().await;
}

#[tokio::test]
async fn the_cli_serves_until_its_token_fires() {
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: devnode::cli::DevnodeArgs,
    }
    // Reserve a free port, then hand it to the CLI.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let cli = Cli::try_parse_from([
        "devnode",
        "--addr",
        &addr,
        "--blocks",
        "50",
        "--block-time",
        "0",
    ])
    .expect("flags");
    let token = tokio_util::sync::CancellationToken::new();
    let running = tokio::spawn(devnode::cli::run(cli.args, token.clone()));
    let url = format!("http://{addr}/v3/demo");
    let head = tokio::time::timeout(GUARD, async {
        loop {
            let answer = client()
                .post(&url)
                .json(&request("eth_blockNumber", json!([])))
                .send()
                .await;
            match answer {
                Ok(response) => break response.json::<Value>().await.expect("JSON"),
                Err(_) => tokio::task::yield_now().await, // not listening yet
            }
        }
    })
    .await
    .expect("the CLI started serving");
    assert_eq!(head["result"], "0x32");
    token.cancel();
    tokio::time::timeout(GUARD, running)
        .await
        .expect("guard")
        .expect("task")
        .expect("clean exit");
}

/// Goal: a chain of 10,000,000 blocks is served lazily: its head, its blocks and its logs are answered at
/// once, and a range too long to scan is refused by the time model rather than scanned.
#[tokio::test]
async fn a_ten_million_block_chain_is_served_without_materialising_it() {
    let node = start(|cfg| cfg.chain.blocks = 10_000_000).await;
    let truth = node.truth();
    let latest = result(&node, "eth_getBlockByNumber", json!(["latest", false])).await;
    assert_eq!(parse_quantity(&latest["number"]), 10_000_000);
    let from = dense_block(&truth, 9_900_000);
    assert_logs_are(
        &result(&node, "eth_getLogs", logs_filter(from, from + 1)).await,
        &truth.logs(from, from + 1),
    );
    // 10,000,000 blocks at the default 5 µs each are 50 s of modelled scanning: over the 10 s budget.
    let (code, message) = error_of(&call(&node, "eth_getLogs", logs_filter(0, 10_000_000)).await);
    assert_eq!(
        (code, message.as_str()),
        (-32005, "\"query timeout exceeded\"")
    );
    node.shutdown().await;
}

#[tokio::test]
async fn over_websocket_a_server_error_becomes_32603() {
    let node = start(|cfg| cfg.faults.http_5xx = 1.0).await;
    let (mut socket, _) = tokio_tungstenite::connect_async(node.ws_url())
        .await
        .expect("connects");
    let message = tungstenite::Message::Text(request("eth_chainId", json!([])).to_string().into());
    socket.send(message).await.expect("send");
    let answer = socket.next().await.expect("open").expect("frame");
    let answer: Value = serde_json::from_str(answer.to_text().expect("text")).expect("JSON");
    assert_eq!(error_of(&answer).0, -32603);
    node.shutdown().await;
}

// ---------------------------------------------------------------------------------------------------------
// Finality tags a node may not know (`docs/node-service.md`, "Block tags")

/// Asserts that `response` is a `-32000` error with exactly `message`.
fn assert_server_error(response: &Value, message: &str) {
    let (code, got) = error_of(response);
    assert_eq!(
        (code, got.as_str()),
        (-32000, format!("{message:?}").as_str()),
        "{response}"
    );
}

/// The default (`finality = block`): `finalized` is a block at the finalized depth, `safe` is refused by
/// `eth_getBlockByNumber` as the spec says, and `eth_getLogs` resolves both tags to their heights.
#[tokio::test]
async fn finality_block_answers_the_finalized_block_and_logs_up_to_the_tags() {
    let node = start(|cfg| {
        cfg.chain.blocks = 1_000;
        cfg.chain.finality = Finality::Block;
    })
    .await;
    let truth = node.truth();
    let block = result(&node, "eth_getBlockByNumber", json!(["finalized", false])).await;
    assert_eq!(parse_quantity(&block["number"]), 1_000 - 64);
    let (code, _) = error_of(&call(&node, "eth_getBlockByNumber", json!(["safe", false])).await);
    assert_eq!(code, -32602);
    let logs = result(
        &node,
        "eth_getLogs",
        json!([{"fromBlock": hex(900), "toBlock": "finalized"}]),
    )
    .await;
    assert_logs_are(&logs, &truth.logs(900, 1_000 - 64));
    let logs = result(
        &node,
        "eth_getLogs",
        json!([{"fromBlock": "safe", "toBlock": "safe"}]),
    )
    .await;
    assert_logs_are(&logs, &truth.logs(1_000 - 32, 1_000 - 32));
    node.shutdown().await;
}

/// `finality = null`, a node that knows no finality: `eth_getBlockByNumber` answers `null` for `finalized`
/// and for `safe` (accepted, as geth does), `eth_getLogs` with either tag in either bound is geth's `-32000`
/// "... header not found", and every other tag and number is served as usual (in a batch too).
#[tokio::test]
async fn finality_null_answers_null_blocks_and_refuses_logs_bounded_by_the_tags() {
    let node = start(|cfg| {
        cfg.chain.blocks = 1_000;
        cfg.chain.finality = Finality::Null;
    })
    .await;
    for tag in ["finalized", "safe"] {
        for detail in [false, true] {
            assert_eq!(
                result(&node, "eth_getBlockByNumber", json!([tag, detail])).await,
                Value::Null,
                "{tag}"
            );
        }
    }
    for (filter, message) in [
        (
            json!({"fromBlock": hex(900), "toBlock": "finalized"}),
            "finalized header not found",
        ),
        (
            json!({"fromBlock": "finalized", "toBlock": "latest"}),
            "finalized header not found",
        ),
        (
            json!({"fromBlock": hex(900), "toBlock": "safe"}),
            "safe header not found",
        ),
    ] {
        assert_server_error(&call(&node, "eth_getLogs", json!([filter])).await, message);
    }
    let latest = result(&node, "eth_getBlockByNumber", json!(["latest", false])).await;
    assert_eq!(parse_quantity(&latest["number"]), 1_000);
    let logs = result(&node, "eth_getLogs", logs_filter(900, 1_000)).await;
    assert_logs_are(&logs, &node.truth().logs(900, 1_000));
    // One JSON-RPC batch: the null is one call's answer, the others are unaffected.
    let (_, _, answers) = post(
        &node.http_url(),
        &json!([
            {"jsonrpc": "2.0", "id": 1, "method": "eth_getBlockByNumber", "params": ["finalized", false]},
            {"jsonrpc": "2.0", "id": 2, "method": "eth_blockNumber", "params": []},
        ]),
    )
    .await;
    assert_eq!(answers[0]["result"], Value::Null, "{answers}");
    assert_eq!(parse_quantity(&answers[1]["result"]), 1_000);
    node.shutdown().await;
}

/// `finality = error`, geth before the merge: `eth_getBlockByNumber` answers `-32000` "finalized block not
/// found" / "safe block not found", over HTTP and WebSocket alike; `eth_getLogs` as under `null`.
#[tokio::test]
async fn finality_error_answers_block_not_found_errors_for_the_tags() {
    let node = start(|cfg| {
        cfg.chain.blocks = 1_000;
        cfg.chain.finality = Finality::Error;
    })
    .await;
    assert_server_error(
        &call(&node, "eth_getBlockByNumber", json!(["finalized", false])).await,
        "finalized block not found",
    );
    assert_server_error(
        &call(&node, "eth_getBlockByNumber", json!(["safe", true])).await,
        "safe block not found",
    );
    assert_server_error(
        &call(
            &node,
            "eth_getLogs",
            json!([{"fromBlock": "safe", "toBlock": "finalized"}]),
        )
        .await,
        "safe header not found",
    );
    let earliest = result(&node, "eth_getBlockByNumber", json!(["earliest", false])).await;
    assert_eq!(parse_quantity(&earliest["number"]), 0);
    let (mut socket, _) = tokio_tungstenite::connect_async(node.ws_url())
        .await
        .expect("websocket connects");
    let request = request("eth_getBlockByNumber", json!(["finalized", false]));
    socket
        .send(tungstenite::Message::text(request.to_string()))
        .await
        .expect("send");
    let answer = loop {
        match tokio::time::timeout(GUARD, socket.next())
            .await
            .expect("guard")
            .expect("an answer")
            .expect("a message")
        {
            tungstenite::Message::Text(text) => {
                break serde_json::from_str::<Value>(&text).expect("JSON");
            }
            _ => continue,
        }
    };
    assert_server_error(&answer, "finalized block not found");
    node.shutdown().await;
}

/// The finality modes over `sim://` options reach the node: `sim://?finality=null` serves null blocks.
#[tokio::test]
async fn finality_is_a_sim_url_option() {
    let mut cfg = DevNodeConfig::from_sim_url("sim://?finality=null&blocks=100").expect("valid");
    cfg.key = "demo".into();
    let node = DevNode::start(cfg).await.expect("starts");
    assert_eq!(
        result(&node, "eth_getBlockByNumber", json!(["finalized", false])).await,
        Value::Null
    );
    node.shutdown().await;
}
