//! The simulated node's refusals and header invariants over real sockets, HTTP and WebSocket alike: methods it
//! does not serve (`-32601`), the 5,000-parameter limit of `eth_getLogs` (`-32602`), and block timestamps
//! that strictly increase across mining and reorgs.

use alloy_primitives::Address;
use devnode::DevNode;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite;

use crate::serve::{call, hex, parse_quantity, request, result, start, to_hex, GUARD};

/// Methods of the spec, of Ethereum clients, and made up, that the devnode does not serve.
const UNSERVED: [&str; 14] = [
    "ext_simulateTransactions",
    "ext_estimateFee",
    "eth_getUncleByBlockNumberAndIndex",
    "eth_getUncleByBlockHashAndIndex",
    // Served only when switched on (`block_receipts`); the transaction methods are served.
    "eth_getBlockReceipts",
    "eth_getBlockTransactionCountByNumber",
    "eth_getBalance",
    "eth_estimateGas",
    "eth_call",
    "eth_subscribe",
    "eth_newFilter",
    "debug_traceTransaction",
    "ETH_GETLOGS",
    "logslice_nonsense",
];

/// A WebSocket to `node` that answers one message at a time.
struct Socket(
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>,
);

impl Socket {
    async fn open(node: &DevNode) -> Self {
        let (socket, _) = tokio_tungstenite::connect_async(node.ws_url())
            .await
            .expect("WebSocket connects");
        Self(socket)
    }

    async fn ask(&mut self, body: &Value) -> Value {
        self.0
            .send(tungstenite::Message::Text(body.to_string().into()))
            .await
            .expect("send");
        let answer = tokio::time::timeout(GUARD, self.0.next())
            .await
            .expect("guard")
            .expect("open")
            .expect("frame");
        serde_json::from_str(answer.to_text().expect("text")).expect("JSON")
    }
}

fn assert_unknown_method(response: &Value, method: &str, id: &Value) {
    assert_eq!(response["error"]["code"], -32601, "{method}: {response}");
    assert_eq!(
        response["error"]["message"],
        format!("the method {method} does not exist/is not available")
    );
    assert_eq!(&response["id"], id);
    assert!(response.get("result").is_none());
}

/// Goal: every method the node does not serve is answered `-32601` naming it, alone or in a batch, over
/// HTTP and over WebSocket, and the connection keeps serving.
#[tokio::test]
async fn every_unserved_method_is_32601_over_http_and_websocket() {
    let node = start(|cfg| cfg.chain.blocks = 50).await;
    let mut socket = Socket::open(&node).await;
    for method in UNSERVED {
        let params = json!([]);
        assert_unknown_method(
            &call(&node, method, params.clone()).await,
            method,
            &json!(1),
        );
        let over_ws = socket.ask(&request(method, params)).await;
        assert_unknown_method(&over_ws, method, &json!(1));
    }
    let batch: Vec<Value> = UNSERVED
        .iter()
        .enumerate()
        .map(|(id, method)| json!({"jsonrpc": "2.0", "id": id, "method": method, "params": []}))
        .chain([json!({"jsonrpc": "2.0", "id": "last", "method": "eth_blockNumber"})])
        .collect();
    let over_ws = socket.ask(&json!(batch)).await;
    let over_ws = over_ws.as_array().expect("a batch answer");
    assert_eq!(over_ws.len(), UNSERVED.len() + 1);
    for (id, method) in UNSERVED.iter().enumerate() {
        assert_unknown_method(&over_ws[id], method, &json!(id));
    }
    assert_eq!(over_ws[UNSERVED.len()]["result"], hex(50));
    assert_eq!(result(&node, "eth_chainId", json!([])).await, "0x539");
    node.shutdown().await;
}

/// Goal: a filter with more than 5,000 addresses and topic values together is refused with `-32602` over
/// both transports (as a factory with thousands of children would need), and 5,000 exactly is served.
#[tokio::test]
async fn more_than_5000_parameters_are_32602_over_http_and_websocket() {
    let node = start(|cfg| cfg.chain.blocks = 100).await;
    let mut socket = Socket::open(&node).await;
    let addresses: Vec<String> = (1..=5_001u64)
        .map(|i| to_hex(Address::left_padding_from(&i.to_be_bytes()).as_slice()))
        .collect();
    let filter = |n: usize, topics: Value| json!([{"fromBlock": "0x0", "toBlock": hex(100), "address": addresses[..n], "topics": topics}]);
    let topic = to_hex(&[7u8; 32]);
    for (params, refused) in [
        (filter(5_000, json!([])), None),
        (filter(5_001, json!([])), Some(5_001)),
        (filter(4_999, json!([topic])), None),
        (filter(4_999, json!([[topic, topic]])), Some(5_001)),
    ] {
        let over_http = call(&node, "eth_getLogs", params.clone()).await;
        let over_ws = socket.ask(&request("eth_getLogs", params)).await;
        assert_eq!(over_http, over_ws);
        match refused {
            None => assert_eq!(over_http["result"], json!([])),
            Some(n_params) => {
                assert_eq!(over_http["error"]["code"], -32602);
                assert_eq!(
                    over_http["error"]["message"],
                    format!(
                        "query exceeds the maximum of 5000 addresses and topics ({n_params} given)"
                    )
                );
            }
        }
    }
    node.shutdown().await;
}

/// Goal: header timestamps strictly increase from the genesis to the head, also across produced blocks and
/// a reorg, as served and as the ground truth says.
#[tokio::test]
async fn block_timestamps_strictly_increase_across_mining_and_reorgs() {
    let node = start(|cfg| cfg.chain.blocks = 300).await;
    let truth = node.truth();
    node.mine(7);
    node.reorg(5);
    let head = truth.head();
    assert_eq!(head, 307);
    let batch: Vec<Value> = (0..=head)
        .map(|n| json!({"jsonrpc": "2.0", "id": n, "method": "eth_getBlockByNumber", "params": [hex(n), false]}))
        .collect();
    let served = crate::serve::post(&node.http_url(), &json!(batch)).await.2;
    let served = served.as_array().expect("a batch answer");
    let timestamps: Vec<u64> = served
        .iter()
        .map(|answer| parse_quantity(&answer["result"]["timestamp"]))
        .collect();
    assert!(timestamps.windows(2).all(|w| w[0] < w[1]));
    for (number, timestamp) in timestamps.iter().enumerate() {
        let block = truth.block(number as u64).expect("canonical block");
        assert_eq!(block.timestamp, *timestamp);
    }
    node.shutdown().await;
}
