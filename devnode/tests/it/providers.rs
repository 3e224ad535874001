//! Several providers over one chain: each answers the same chain, with limits, faults, lag, outage and
//! counters of its own; calls and credits metered per second as providers meter them (each batch item a
//! call, a batch refused whole).
//!
//! The rate limits follow the clock over one-second windows opened by a window's first request: a test that
//! says "within the second" sends its requests back to back, a few milliseconds in all.

use devnode::{DevNode, Down, FaultConfig, MethodCredits, Provider, ProviderOptions};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite;

use crate::serve::{
    assert_logs_are, client, error_of, hex, logs_filter, parse_quantity, post, request, start,
    GUARD,
};

async fn provider(node: &DevNode, options: ProviderOptions) -> Provider {
    node.add_provider(options)
        .await
        .expect("a provider binds a loopback port")
}

/// Calls `method` at `url`; returns the HTTP status and the whole response object.
async fn call_at(url: &str, method: &str, params: Value) -> (u16, Value) {
    let (status, _, body) = post(url, &request(method, params)).await;
    (status, body)
}

async fn result_at(url: &str, method: &str, params: Value) -> Value {
    let (status, response) = call_at(url, method, params).await;
    assert_eq!(status, 200, "{method}: {response}");
    assert!(response.get("error").is_none(), "{method}: {response}");
    response["result"].clone()
}

/// A batch of `n` `eth_blockNumber` calls.
fn block_number_batch(n: u64) -> Value {
    (0..n)
        .map(|id| json!({"jsonrpc": "2.0", "id": id, "method": "eth_blockNumber"}))
        .collect()
}

/// Goal: providers serve the node's one chain: the same logs, block hashes and head as the node and the
/// ground truth, also after mining and a reorg, with fault seeds of their own.
#[tokio::test]
async fn two_providers_over_one_chain_answer_the_same_logs_and_hashes() {
    let node = start(|cfg| cfg.chain.blocks = 300).await;
    let truth = node.truth();
    let first = provider(&node, ProviderOptions::default()).await;
    let second = provider(&node, ProviderOptions::default()).await;
    assert_ne!(first.seed(), second.seed());
    assert_ne!(first.http_url(), second.http_url());
    node.mine(4);
    let first_replaced = node.reorg(3);
    assert_eq!((truth.head(), first_replaced), (304, 302));
    let urls = [node.http_url(), first.http_url(), second.http_url()];
    for url in &urls {
        assert_eq!(result_at(url, "eth_blockNumber", json!([])).await, hex(304));
        let logs = result_at(url, "eth_getLogs", logs_filter(0, 304)).await;
        assert_logs_are(&logs, &truth.logs(0, 304));
        for number in [0, 150, 301, 302, 304] {
            let block = result_at(url, "eth_getBlockByNumber", json!([hex(number), false])).await;
            let hash = truth.block(number).expect("canonical").hash;
            assert_eq!(
                block["hash"],
                json!(hash.to_string()),
                "{url} block {number}"
            );
        }
    }
    node.shutdown().await;
}

/// Goal: each provider draws its own faults from its own seed: two providers with the same probability fail
/// on different requests, and the same providers of a node started alike fail on the same ones.
#[tokio::test]
async fn fault_decisions_differ_between_providers_and_repeat_across_runs() {
    async fn statuses(provider: &Provider) -> Vec<u16> {
        let mut statuses = Vec::new();
        for _ in 0..24 {
            // A 5xx has a plain body: only the status is read.
            let sent = client()
                .post(provider.http_url())
                .json(&request("eth_chainId", json!([])))
                .send();
            let response = tokio::time::timeout(GUARD, sent)
                .await
                .expect("guard")
                .expect("answered");
            statuses.push(response.status().as_u16());
        }
        statuses
    }
    let options = ProviderOptions {
        faults: FaultConfig {
            http_5xx: 0.5,
            ..FaultConfig::default()
        },
        ..ProviderOptions::default()
    };
    let mut runs = Vec::new();
    for _ in 0..2 {
        let node = start(|cfg| cfg.chain.blocks = 10).await;
        let first = provider(&node, options.clone()).await;
        let second = provider(&node, options.clone()).await;
        runs.push((statuses(&first).await, statuses(&second).await));
        assert_eq!(
            node.stats().http_requests,
            0,
            "the node itself served nothing"
        );
        node.shutdown().await;
    }
    let (first, second) = &runs[0];
    assert_eq!(&runs[1], &runs[0]);
    assert_ne!(first, second);
    assert!(
        first.contains(&200) && first.iter().any(|s| *s >= 500),
        "{first:?}"
    );
}

/// Goal: `max_rps` counts every call of a batch: a batch of 5 under 4 calls per second is refused whole
/// (HTTP 429, `Retry-After: 1`, every call a `-32005`) and costs nothing, 4 single calls then pass and the
/// 5th within the second is refused; a batch of 4 in a fresh provider passes. Over WebSocket a call over
/// the limit is a `-32005`. The node itself has no limit.
#[tokio::test]
async fn a_batch_of_n_calls_counts_n_against_max_rps() {
    let node = start(|cfg| cfg.chain.blocks = 10).await;
    let limited = ProviderOptions {
        max_rps: Some(4),
        ..ProviderOptions::default()
    };
    let provider_a = provider(&node, limited.clone()).await;
    let url = provider_a.http_url();
    let (status, headers, body) = post(&url, &block_number_batch(5)).await;
    assert_eq!(status, 429);
    assert_eq!(
        headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    let answers = body.as_array().expect("one error per call");
    assert_eq!(answers.len(), 5);
    assert!(answers.iter().all(|answer| error_of(answer).0 == -32005));
    let mut statuses = Vec::new();
    for _ in 0..5 {
        statuses.push(call_at(&url, "eth_blockNumber", json!([])).await.0);
    }
    assert_eq!(statuses, [200, 200, 200, 200, 429]);
    let (mut socket, _) = tokio_tungstenite::connect_async(provider_a.ws_url())
        .await
        .expect("WebSocket connects");
    let message = request("eth_blockNumber", json!([])).to_string();
    socket
        .send(tungstenite::Message::Text(message.into()))
        .await
        .expect("send");
    let answer = tokio::time::timeout(GUARD, socket.next())
        .await
        .expect("guard")
        .expect("open")
        .expect("frame");
    let answer: Value = serde_json::from_str(answer.to_text().expect("text")).expect("JSON");
    assert_eq!(error_of(&answer).0, -32005, "{answer}");
    let stats = provider_a.stats();
    assert_eq!((stats.over_max_rps, stats.over_max_cps), (3, 0));
    assert_eq!((stats.status(429), stats.status(200)), (2, 4));
    assert_eq!(stats.rate_limited, 3);
    assert_eq!(stats.largest_batch, 5);

    let provider_b = provider(&node, limited).await;
    let (status, _, body) = post(&provider_b.http_url(), &block_number_batch(4)).await;
    assert_eq!(status, 200);
    assert_eq!(body.as_array().map(Vec::len), Some(4));
    let (status, _, _) = post(&node.http_url(), &block_number_batch(50)).await;
    assert_eq!(status, 200, "the node has no limit of its own");
    node.shutdown().await;
}

/// Goal: `max_cps` weighs calls by method: under 100 credits per second one `eth_getLogs` (75) passes, a
/// second in the same second is HTTP 429, a batch of two (150) is refused whole, and `eth_chainId` (0)
/// still passes; a table of our own replaces the default prices.
#[tokio::test]
async fn credits_admit_one_get_logs_of_75_under_100_per_second_then_429() {
    let node = start(|cfg| cfg.chain.blocks = 50).await;
    let metered = provider(
        &node,
        ProviderOptions {
            max_cps: Some(100),
            ..ProviderOptions::default()
        },
    )
    .await;
    let url = metered.http_url();
    let get_logs = request("eth_getLogs", logs_filter(0, 50));
    let (status, _, _) = post(&url, &json!([get_logs, get_logs])).await;
    assert_eq!(status, 429, "150 credits are over 100");
    let (status, _) = call_at(&url, "eth_getLogs", logs_filter(0, 50)).await;
    assert_eq!(status, 200);
    let (status, headers, body) = post(&url, &get_logs).await;
    assert_eq!(status, 429);
    assert_eq!(
        headers.get("retry-after").and_then(|v| v.to_str().ok()),
        Some("1")
    );
    assert_eq!(error_of(&body).0, -32005);
    assert_eq!(result_at(&url, "eth_chainId", json!([])).await, "0x539");
    let stats = metered.stats();
    assert_eq!((stats.over_max_cps, stats.over_max_rps), (2, 0));
    assert_eq!(stats.ok("eth_getLogs"), 1);

    let priced = provider(
        &node,
        ProviderOptions {
            max_cps: Some(100),
            method_credits: MethodCredits::parse("eth_getLogs:40,default:0").expect("valid"),
            ..ProviderOptions::default()
        },
    )
    .await;
    let (status, _, _) = post(&priced.http_url(), &json!([get_logs, get_logs])).await;
    assert_eq!(status, 200, "80 credits fit");
    let (status, _, _) = post(&priced.http_url(), &get_logs).await;
    assert_eq!(status, 429, "120 credits do not");
    node.shutdown().await;
}

/// Goal: a provider `lag` blocks behind answers its own head for `eth_blockNumber` and `latest`, `null`
/// above it, finality that much lower, and `eth_getLogs` up to its head only, silently; over WebSocket too.
/// `set_lag(0)` serves the head again, and the node is never behind.
#[tokio::test]
async fn a_lagging_provider_answers_its_head_null_above_it_and_logs_up_to_it() {
    let node = start(|cfg| cfg.chain.blocks = 200).await;
    let truth = node.truth();
    let lagging = provider(
        &node,
        ProviderOptions {
            lag: 10,
            ..ProviderOptions::default()
        },
    )
    .await;
    let url = lagging.http_url();
    assert_eq!(
        result_at(&url, "eth_blockNumber", json!([])).await,
        hex(190)
    );
    let latest = result_at(&url, "eth_getBlockByNumber", json!(["latest", false])).await;
    assert_eq!(
        latest["hash"],
        json!(truth.block(190).expect("block").hash.to_string())
    );
    for above in [191, 200] {
        let block = result_at(&url, "eth_getBlockByNumber", json!([hex(above), false])).await;
        assert_eq!(block, Value::Null, "block {above}");
    }
    let finalized = result_at(&url, "eth_getBlockByNumber", json!(["finalized", false])).await;
    assert_eq!(parse_quantity(&finalized["number"]), 190 - 64);
    let safe = json!([{"fromBlock": "safe", "toBlock": "safe"}]);
    assert_logs_are(
        &result_at(&url, "eth_getLogs", safe).await,
        &truth.logs(190 - 32, 190 - 32),
    );
    let logs = result_at(&url, "eth_getLogs", logs_filter(100, 200)).await;
    assert!(
        !truth.logs(191, 200).is_empty(),
        "the test needs logs above the lagging head"
    );
    assert_logs_are(&logs, &truth.logs(100, 190));
    let above = result_at(&url, "eth_getLogs", logs_filter(195, 200)).await;
    assert_eq!(above, json!([]));

    let (mut socket, _) = tokio_tungstenite::connect_async(lagging.ws_url())
        .await
        .expect("WebSocket connects");
    let message = request("eth_blockNumber", json!([])).to_string();
    socket
        .send(tungstenite::Message::Text(message.into()))
        .await
        .expect("send");
    let answer = socket.next().await.expect("open").expect("frame");
    let answer: Value = serde_json::from_str(answer.to_text().expect("text")).expect("JSON");
    assert_eq!(answer["result"], hex(190));

    node.mine(5);
    assert_eq!(
        result_at(&url, "eth_blockNumber", json!([])).await,
        hex(195)
    );
    assert_eq!(lagging.lag(), 10);
    lagging.set_lag(0);
    assert_eq!(
        result_at(&url, "eth_blockNumber", json!([])).await,
        hex(205)
    );
    assert_eq!(
        result_at(&node.http_url(), "eth_blockNumber", json!([])).await,
        hex(205)
    );
    node.shutdown().await;
}

/// Goal: `lag_blocks=N` puts a whole node N blocks behind, and `set_lag` moves it.
#[tokio::test]
async fn lag_blocks_puts_the_whole_node_behind() {
    let cfg =
        devnode::DevNodeConfig::from_sim_url("sim://?blocks=100&lag_blocks=7").expect("valid");
    let node = DevNode::start(cfg).await.expect("starts");
    let url = node.http_url();
    assert_eq!(result_at(&url, "eth_blockNumber", json!([])).await, hex(93));
    let block = result_at(&url, "eth_getBlockByNumber", json!([hex(94), false])).await;
    assert_eq!(block, Value::Null);
    assert_eq!(
        node.truth().head(),
        100,
        "the ground truth is the true chain"
    );
    node.set_lag(0);
    assert_eq!(
        result_at(&url, "eth_blockNumber", json!([])).await,
        hex(100)
    );
    node.shutdown().await;
}

/// Goal: a provider shut down refuses connections while the node and the other providers serve; one that
/// is down (`Down::Refuse`) drops its requests without touching the node's.
#[tokio::test]
async fn a_provider_shut_down_refuses_connections_while_the_node_serves() {
    let node = start(|cfg| cfg.chain.blocks = 20).await;
    let killed = provider(&node, ProviderOptions::default()).await;
    let down = provider(&node, ProviderOptions::default()).await;
    let killed_url = killed.http_url();
    assert_eq!(
        result_at(&killed_url, "eth_blockNumber", json!([])).await,
        hex(20)
    );
    killed.shutdown().await;
    let refused = client()
        .post(&killed_url)
        .json(&request("eth_blockNumber", json!([])))
        .send()
        .await
        .expect_err("the port is closed");
    assert!(refused.is_connect(), "{refused:?}");

    down.set_down(Down::Refuse);
    let dropped = client()
        .post(down.http_url())
        .json(&request("eth_blockNumber", json!([])))
        .send()
        .await;
    let failed = match dropped {
        Err(_) => true,
        Ok(response) => response.bytes().await.is_err(),
    };
    assert!(failed, "a provider that is down answers nothing");
    assert_eq!(
        result_at(&node.http_url(), "eth_blockNumber", json!([])).await,
        hex(20)
    );
    assert_eq!(down.stats().refused_while_down, 1);
    assert_eq!(node.stats().refused_while_down, 0);
    down.set_down(Down::Up);
    assert_eq!(
        result_at(&down.http_url(), "eth_blockNumber", json!([])).await,
        hex(20)
    );
    node.shutdown().await;
}

/// Goal: each endpoint counts what it served and nothing else: requests, calls per method, logs and 429s.
#[tokio::test]
async fn per_provider_stats_count_separately() {
    let node = start(|cfg| cfg.chain.blocks = 100).await;
    let truth = node.truth();
    let first = provider(&node, ProviderOptions::default()).await;
    let second = provider(
        &node,
        ProviderOptions {
            max_rps: Some(1),
            ..ProviderOptions::default()
        },
    )
    .await;
    result_at(&node.http_url(), "eth_chainId", json!([])).await;
    result_at(&first.http_url(), "eth_getLogs", logs_filter(0, 100)).await;
    result_at(&first.http_url(), "eth_getLogs", logs_filter(0, 100)).await;
    let (status, _, _) = post(&second.http_url(), &block_number_batch(2)).await;
    assert_eq!(status, 429);
    let n_logs = truth.logs(0, 100).len() as u64;
    let (node_stats, first_stats, second_stats) = (node.stats(), first.stats(), second.stats());
    assert_eq!(node_stats.http_requests, 1);
    assert_eq!(node_stats.ok("eth_chainId"), 1);
    assert_eq!(
        (node_stats.calls("eth_getLogs"), node_stats.logs_served),
        (0, 0)
    );
    assert_eq!(first_stats.http_requests, 2);
    assert_eq!(first_stats.ok("eth_getLogs"), 2);
    assert_eq!(first_stats.logs_served, 2 * n_logs);
    assert_eq!(first_stats.calls("eth_chainId"), 0);
    assert_eq!(second_stats.http_requests, 1);
    assert_eq!(
        (second_stats.over_max_rps, second_stats.status(429)),
        (1, 1)
    );
    assert_eq!(
        second_stats.calls("eth_blockNumber"),
        0,
        "a refused batch is not served"
    );
    assert_eq!(node_stats.rate_limited + first_stats.rate_limited, 0);
    let waited = tokio::time::timeout(GUARD, second.wait_for_stats(|s| s.over_max_rps == 1))
        .await
        .expect("already counted");
    assert_eq!(waited.max_calls_per_second, 2);
    node.shutdown().await;
}
