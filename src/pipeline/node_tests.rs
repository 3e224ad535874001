//! `Node::headers` against a scripted HTTP node on loopback: batches sized to the rate, a transient failure
//! of a batch retried with batching kept on, a refusal of batches turning them off for good.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::Node;

/// What the scripted node does and saw.
#[derive(Default)]
struct Script {
    /// Every request received: `Some(n)` for a batch of n calls, `None` for a single call.
    seen: Vec<Option<usize>>,
    /// Answers for the next batches (status, body), given before any batch is answered properly.
    batch_answers: VecDeque<(u16, String)>,
    /// Answer every batch with this (status, body) instead: a node that does not take batches.
    refuse_batches: Option<(u16, String)>,
}

fn header(call: &Value) -> Value {
    let number = call["params"][0].as_str().expect("a hex block number");
    let n = u64::from_str_radix(number.trim_start_matches("0x"), 16).expect("hex");
    let hash = format!("0x{:064x}", n + 1);
    let parent = format!("0x{n:064x}");
    let bloom = format!("0x{}", "0".repeat(512));
    json!({"jsonrpc": "2.0", "id": call["id"], "result": {
        "number": number, "hash": hash, "parentHash": parent, "timestamp": "0x1", "logsBloom": bloom,
    }})
}

async fn answer(State(script): State<Arc<Mutex<Script>>>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).expect("JSON");
    let mut script = script.lock().expect("not poisoned");
    let Value::Array(calls) = request else {
        script.seen.push(None);
        return axum::Json(header(&request)).into_response();
    };
    script.seen.push(Some(calls.len()));
    let scripted = script.batch_answers.pop_front();
    if let Some((status, body)) = scripted.or_else(|| script.refuse_batches.clone()) {
        let status = StatusCode::from_u16(status).expect("a status");
        // `each:` + an error object: every call answered with it, under its own id.
        if let Some(error) = body.strip_prefix("each:") {
            let error: Value = serde_json::from_str(error).expect("an error object");
            let answers = calls
                .iter()
                .map(|call| json!({"jsonrpc": "2.0", "id": call["id"], "error": error}))
                .collect();
            return (status, axum::Json(Value::Array(answers))).into_response();
        }
        return (status, body).into_response();
    }
    axum::Json(Value::Array(calls.iter().map(header).collect())).into_response()
}

/// Serves `script` on loopback; returns a connected [`Node`] with `requests_per_second` (and quick
/// retries) and the script.
async fn node(script: Script, requests_per_second: u32) -> (Node, Arc<Mutex<Script>>) {
    let script = Arc::new(Mutex::new(script));
    let app = axum::Router::new()
        .route("/v3/key", axum::routing::post(answer))
        .with_state(script.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    let text = format!(
        "[node]\nurl = \"http://{addr}/v3/key\"\nrequests_per_second = {requests_per_second}\nmax_retries = 4\n\
         initial_backoff = \"1ms\"\nmax_backoff = \"5ms\"\nrequest_timeout = \"5s\"\n\
         [database]\nurl = \"sqlite::memory:\"\n[[contracts]]\nname = \"a\"\naddress = \"0x{:040x}\"\n\
         events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]\n",
        1
    );
    let config = crate::config::load_str(Path::new("config.toml"), &text, &|_| None)
        .expect("a valid config");
    let node = Node::connect(&config.node, &CancellationToken::new())
        .await
        .expect("connects");
    (node, script)
}

fn seen(script: &Mutex<Script>) -> Vec<Option<usize>> {
    script.lock().expect("not poisoned").seen.clone()
}

async fn read(node: &Node, numbers: std::ops::RangeInclusive<u64>) -> Vec<u64> {
    let numbers: Vec<u64> = numbers.collect();
    node.headers(&numbers)
        .await
        .expect("the headers are read")
        .into_iter()
        .map(|h| h.expect("a known block").number)
        .collect()
}

const RATE_LIMITED: &str = r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"project ID request rate exceeded"}}"#;

#[tokio::test]
async fn headers_go_in_batches_no_larger_than_the_rate() {
    let (node, script) = node(Script::default(), 5).await;
    assert_eq!(read(&node, 10..=16).await, (10..=16).collect::<Vec<_>>());
    assert_eq!(seen(&script), [Some(5), Some(2)]);
}

#[tokio::test]
async fn a_transient_failure_of_a_batch_is_retried_and_batching_stays_on() {
    let each_rate_limited = r#"each:{"code":-32005,"message":"project ID request rate exceeded"}"#;
    let script = Script {
        batch_answers: VecDeque::from([
            (429, RATE_LIMITED.to_owned()),
            (503, "unavailable".to_owned()),
            (200, RATE_LIMITED.to_owned()),
            (200, each_rate_limited.to_owned()),
        ]),
        ..Script::default()
    };
    let (node, script) = node(script, 100).await;
    assert_eq!(read(&node, 1..=3).await, [1, 2, 3]);
    // Three refusals for the rate with nothing answered between bring the rate from 100 to 2: the batch
    // that no longer fits goes in parts.
    assert_eq!(
        seen(&script),
        [Some(3), Some(3), Some(3), Some(3), Some(2), Some(1)]
    );
    assert_eq!(read(&node, 4..=5).await, [4, 5]);
    assert_eq!(seen(&script).last(), Some(&Some(2)), "batching stayed on");
}

#[tokio::test]
async fn a_refused_batch_turns_batching_off_for_good() {
    for refusal in [
        (
            200,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch requests are not supported"}}"#,
        ),
        (
            200,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"the method  does not exist"}}"#,
        ),
        (405, "method not allowed"),
        (413, "payload too large"),
        (400, "bad request"),
    ] {
        let script = Script {
            refuse_batches: Some((refusal.0, refusal.1.to_owned())),
            ..Script::default()
        };
        let (node, script) = node(script, 100).await;
        assert_eq!(read(&node, 1..=3).await, [1, 2, 3], "{refusal:?}");
        assert_eq!(seen(&script), [Some(3), None, None, None], "{refusal:?}");
        assert_eq!(read(&node, 4..=4).await, [4], "{refusal:?}");
        assert_eq!(
            seen(&script).last(),
            Some(&None),
            "{refusal:?}: batching stayed off"
        );
    }
}
