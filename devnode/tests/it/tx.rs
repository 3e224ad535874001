//! The simulated node's transactions and receipts over real sockets: every method agrees with `eth_getLogs`
//! and with the ground truth (transaction indexes, hashes and log indexes), across a reorg, over HTTP and
//! WebSocket; `eth_getBlockReceipts` only when switched on; blocks where one contract alone is over the cap.
//!
//! Expected values come from `GroundTruth::transactions`/`receipts`/`logs`, parsed here from the JSON with the
//! spec's encodings, never from the devnode's own writer.

use alloy_primitives::{keccak256, Address, U256};
use devnode::contracts::TOKEN_A;
use devnode::{DevNode, GroundTruth, TruthReceipt, TruthTransaction};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite;

use crate::serve::{
    assert_log_is, call, error_of, hex, logs_filter, parse_quantity, request, result, start,
    to_hex, GUARD,
};

fn parse_u256(value: &Value) -> U256 {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value}"));
    let digits = text.strip_prefix("0x").expect("0x");
    assert!(
        digits == "0" || !digits.starts_with('0'),
        "leading zero in {text}"
    );
    U256::from_str_radix(digits, 16).unwrap_or_else(|err| panic!("{text}: {err}"))
}

fn opt_address(value: &Value) -> Option<String> {
    value.as_str().map(str::to_owned)
}

fn hex_address(address: &Address) -> String {
    to_hex(address.as_slice())
}

/// Compares a served transaction object with its ground truth, field by field.
fn assert_tx_is(served: &Value, truth: &TruthTransaction) {
    assert_eq!(served["hash"], to_hex(truth.hash.as_slice()), "{served}");
    assert_eq!(served["blockHash"], to_hex(truth.block_hash.as_slice()));
    assert_eq!(parse_quantity(&served["blockNumber"]), truth.block_number);
    assert_eq!(
        parse_quantity(&served["transactionIndex"]),
        truth.transaction_index
    );
    assert_eq!(served["from"], hex_address(&truth.from));
    assert_eq!(
        opt_address(&served["to"]),
        truth.to.as_ref().map(hex_address)
    );
    assert_eq!(parse_u256(&served["value"]), truth.value);
    assert_eq!(parse_quantity(&served["nonce"]), truth.nonce);
    assert_eq!(parse_quantity(&served["gas"]), truth.gas);
    assert_eq!(parse_quantity(&served["gasPrice"]), truth.gas_price);
    assert_eq!(parse_quantity(&served["type"]), truth.tx_type);
    assert_eq!(served["input"], to_hex(&truth.input));
    let optional = |name: &str| served.get(name).map(parse_quantity);
    assert_eq!(optional("maxFeePerGas"), truth.max_fee_per_gas);
    assert_eq!(
        optional("maxPriorityFeePerGas"),
        truth.max_priority_fee_per_gas
    );
    // spec: chainId only for EIP-1559 transactions.
    assert_eq!(
        served.get("chainId").is_some(),
        truth.tx_type == 2,
        "{served}"
    );
    for signature in ["r", "s"] {
        assert_eq!(served[signature].as_str().map(str::len), Some(66));
    }
    parse_quantity(&served["v"]);
}

/// Compares a served receipt with its ground truth, its logs included.
fn assert_receipt_is(served: &Value, truth: &TruthReceipt) {
    assert_eq!(
        served["transactionHash"],
        to_hex(truth.transaction_hash.as_slice()),
        "{served}"
    );
    assert_eq!(
        parse_quantity(&served["transactionIndex"]),
        truth.transaction_index
    );
    assert_eq!(served["blockHash"], to_hex(truth.block_hash.as_slice()));
    assert_eq!(parse_quantity(&served["blockNumber"]), truth.block_number);
    assert_eq!(served["from"], hex_address(&truth.from));
    assert_eq!(
        opt_address(&served["to"]),
        truth.to.as_ref().map(hex_address)
    );
    assert_eq!(
        opt_address(&served["contractAddress"]),
        truth.contract_address.as_ref().map(hex_address)
    );
    assert_eq!(parse_quantity(&served["status"]), u64::from(truth.status));
    assert_eq!(parse_quantity(&served["gasUsed"]), truth.gas_used);
    assert_eq!(
        parse_quantity(&served["cumulativeGasUsed"]),
        truth.cumulative_gas_used
    );
    assert_eq!(
        parse_quantity(&served["effectiveGasPrice"]),
        truth.effective_gas_price
    );
    assert_eq!(parse_quantity(&served["type"]), truth.tx_type);
    assert_eq!(served["logsBloom"].as_str().map(str::len), Some(2 + 512));
    let logs = served["logs"].as_array().expect("logs");
    assert_eq!(logs.len(), truth.logs.len());
    for (log, expected) in logs.iter().zip(&truth.logs) {
        assert_log_is(log, expected, false);
    }
}

/// Blocks that between them have every shape: a dense block, a creation, a legacy transaction, a failed one,
/// a value above 2^128 and a block without transactions.
fn varied_blocks(truth: &GroundTruth) -> Vec<u64> {
    let find = |what: &str, pred: &dyn Fn(u64) -> bool| {
        (1..truth.head())
            .find(|n| pred(*n))
            .unwrap_or_else(|| panic!("the chain has {what}"))
    };
    let two_128 = U256::from(1u8) << 128;
    let txs_of = |n: u64| truth.transactions(n);
    let mut blocks = vec![
        find("a dense block", &|n| truth.log_count(n) >= 100),
        find("a creation with logs", &|n| {
            truth
                .receipts(n)
                .iter()
                .any(|r| r.to.is_none() && !r.logs.is_empty())
        }),
        find("a legacy transaction", &|n| {
            txs_of(n).iter().any(|t| t.tx_type == 0)
        }),
        find("a failed transaction", &|n| {
            truth.receipts(n).iter().any(|r| !r.status)
        }),
        find("a value above 2^128", &|n| {
            txs_of(n).iter().any(|t| t.value > two_128)
        }),
        find("a block without transactions", &|n| txs_of(n).is_empty()),
    ];
    blocks.sort_unstable();
    blocks.dedup();
    blocks
}

/// Goal: every transaction and receipt method agrees with the ground truth and with `eth_getLogs`. Method:
/// for blocks of every shape, the full block's transactions, `eth_getTransactionByHash`,
/// `eth_getTransactionByBlockHashAndIndex` and `…ByBlockNumberAndIndex` give the same objects, equal to the
/// ground truth; the receipts (one per transaction, each method alike) carry exactly the block's
/// `eth_getLogs` answer, split by transaction, with log indexes contiguous across them.
#[tokio::test]
async fn transactions_and_receipts_agree_with_get_logs_and_ground_truth() {
    let node = start(|cfg| {
        cfg.chain.blocks = 3_000;
        cfg.chain.block_receipts = true;
        cfg.chain.log_timestamps = true;
    })
    .await;
    let truth = node.truth();
    for number in varied_blocks(&truth) {
        let expected_txs = truth.transactions(number);
        let expected_receipts = truth.receipts(number);
        assert_eq!(expected_txs.len(), expected_receipts.len());
        let block = result(&node, "eth_getBlockByNumber", json!([hex(number), true])).await;
        let served_txs = block["transactions"].as_array().expect("transactions");
        assert_eq!(served_txs.len(), expected_txs.len(), "block {number}");
        let receipts = result(&node, "eth_getBlockReceipts", json!([hex(number)])).await;
        let receipts = receipts.as_array().expect("receipts").clone();
        assert_eq!(
            receipts.len(),
            served_txs.len(),
            "one receipt per transaction"
        );
        let logs = result(&node, "eth_getLogs", logs_filter(number, number)).await;
        let mut receipt_logs = Vec::new();
        for (tx_idx, (served, expected)) in served_txs.iter().zip(&expected_txs).enumerate() {
            assert_tx_is(served, expected);
            let by_hash = result(&node, "eth_getTransactionByHash", json!([served["hash"]])).await;
            assert_eq!(&by_hash, served);
            let by_block = json!([block["hash"], hex(tx_idx as u64)]);
            let by_index = result(&node, "eth_getTransactionByBlockHashAndIndex", by_block).await;
            assert_eq!(&by_index, served);
            let by_number = json!([hex(number), hex(tx_idx as u64)]);
            let by_number =
                result(&node, "eth_getTransactionByBlockNumberAndIndex", by_number).await;
            assert_eq!(&by_number, served);
            let receipt = result(&node, "eth_getTransactionReceipt", json!([served["hash"]])).await;
            assert_eq!(receipt, receipts[tx_idx]);
            assert_receipt_is(&receipt, &expected_receipts[tx_idx]);
            receipt_logs.extend(receipt["logs"].as_array().expect("logs").iter().cloned());
        }
        assert_eq!(Value::Array(receipt_logs.clone()), logs, "block {number}");
        for (log_idx, log) in receipt_logs.iter().enumerate() {
            assert_eq!(parse_quantity(&log["logIndex"]), log_idx as u64);
            assert_eq!(
                parse_quantity(&log["blockTimestamp"]),
                parse_quantity(&block["timestamp"])
            );
        }
        let gas_used = expected_receipts
            .last()
            .map_or(0, |r| r.cumulative_gas_used);
        assert_eq!(parse_quantity(&block["gasUsed"]), gas_used);
    }
    // Unknown items are null (spec), an index past the block's transactions too.
    let unknown = to_hex(keccak256("no such transaction").as_slice());
    for method in ["eth_getTransactionByHash", "eth_getTransactionReceipt"] {
        assert_eq!(result(&node, method, json!([unknown])).await, Value::Null);
    }
    let hash = to_hex(truth.block(10).expect("block").hash.as_slice());
    let past = json!([hash, hex(truth.transactions(10).len() as u64)]);
    assert_eq!(
        result(&node, "eth_getTransactionByBlockHashAndIndex", past).await,
        Value::Null
    );
    assert_eq!(
        result(
            &node,
            "eth_getBlockReceipts",
            json!([hex(truth.head() + 1)])
        )
        .await,
        Value::Null
    );
    node.shutdown().await;
}

/// `eth_getBlockReceipts` is off by default and then answers -32601, as for any method the node lacks;
/// `eth_getTransactionReceipt` is always served.
#[tokio::test]
async fn block_receipts_answer_32601_unless_switched_on() {
    let node = start(|cfg| cfg.chain.blocks = 500).await;
    let response = call(&node, "eth_getBlockReceipts", json!(["latest"])).await;
    let (code, message) = error_of(&response);
    assert_eq!(code, -32601, "{response}");
    assert!(message.contains("eth_getBlockReceipts"), "{message}");
    let number = (1..500)
        .find(|n| node.truth().log_count(*n) > 0)
        .expect("logs");
    let tx = node.truth().receipts(number)[0].transaction_hash;
    let receipt = result(
        &node,
        "eth_getTransactionReceipt",
        json!([to_hex(tx.as_slice())]),
    )
    .await;
    assert_receipt_is(&receipt, &node.truth().receipts(number)[0]);
    assert_eq!(node.stats().calls("eth_getBlockReceipts"), 1);
    assert_eq!(node.stats().ok("eth_getTransactionReceipt"), 1);
    node.shutdown().await;
    let on = DevNode::start(
        devnode::DevNodeConfig::from_sim_url("sim://?blocks=500&block_receipts=on")
            .expect("valid sim URL"),
    )
    .await
    .expect("starts");
    let receipts = result(&on, "eth_getBlockReceipts", json!([hex(number)])).await;
    assert_receipt_is(&receipts[0], &on.truth().receipts(number)[0]);
    on.shutdown().await;
}

/// Over WebSocket the transaction and receipt methods answer exactly as over HTTP, batches included.
#[tokio::test]
async fn websocket_serves_transactions_and_receipts_like_http() {
    let node = start(|cfg| {
        cfg.chain.blocks = 2_000;
        cfg.chain.block_receipts = true;
    })
    .await;
    let truth = node.truth();
    let number = (1..2_000).find(|n| truth.log_count(*n) >= 5).expect("logs");
    let tx = to_hex(truth.transactions(number)[0].hash.as_slice());
    let (mut socket, _) = tokio_tungstenite::connect_async(node.ws_url())
        .await
        .expect("WebSocket connects");
    let batch = json!([
        request("eth_getTransactionByHash", json!([tx])),
        request("eth_getTransactionReceipt", json!([tx])),
        request("eth_getBlockReceipts", json!([hex(number)])),
    ]);
    socket
        .send(tungstenite::Message::Text(batch.to_string().into()))
        .await
        .expect("send");
    let answer = tokio::time::timeout(GUARD, socket.next())
        .await
        .expect("guard")
        .expect("open")
        .expect("frame");
    let over_ws: Value = serde_json::from_str(answer.to_text().expect("text")).expect("JSON");
    let over_http = crate::serve::post(&node.http_url(), &batch).await.2;
    assert_eq!(over_ws, over_http);
    assert_tx_is(&over_ws[0]["result"], &truth.transactions(number)[0]);
    assert_receipt_is(&over_ws[1]["result"], &truth.receipts(number)[0]);
    assert_eq!(over_ws[2]["result"][0], over_ws[1]["result"]);
    node.shutdown().await;
}

/// After a reorg the orphaned transactions are gone (null by hash, by their block's hash and index, and
/// their receipts), and the replacement blocks' receipts agree with the new `eth_getLogs` and ground truth.
#[tokio::test]
async fn a_reorg_replaces_transactions_and_receipts_with_the_new_blocks() {
    let node = start(|cfg| {
        cfg.chain.blocks = 1_000;
        cfg.chain.block_receipts = true;
        cfg.chain.density = 20.0;
    })
    .await;
    let truth = node.truth();
    let head = truth.head();
    let old_txs: Vec<TruthTransaction> = (head - 2..=head)
        .flat_map(|n| truth.transactions(n))
        .collect();
    assert!(!old_txs.is_empty());
    let old_block = truth.block(old_txs[0].block_number).expect("block");
    let first = node.reorg(3);
    assert_eq!(first, head - 2);
    for old in &old_txs {
        let hash = json!([to_hex(old.hash.as_slice())]);
        assert_eq!(
            result(&node, "eth_getTransactionByHash", hash.clone()).await,
            Value::Null
        );
        assert_eq!(
            result(&node, "eth_getTransactionReceipt", hash).await,
            Value::Null
        );
    }
    let by_old_block = json!([to_hex(old_block.hash.as_slice()), "0x0"]);
    assert_eq!(
        result(&node, "eth_getTransactionByBlockHashAndIndex", by_old_block).await,
        Value::Null
    );
    for number in first..=head {
        let receipts = result(&node, "eth_getBlockReceipts", json!([hex(number)])).await;
        let expected = truth.receipts(number);
        assert_eq!(receipts.as_array().map(Vec::len), Some(expected.len()));
        for (served, expected) in receipts.as_array().expect("receipts").iter().zip(&expected) {
            assert_receipt_is(served, expected);
            let by_hash = json!([served["transactionHash"]]);
            assert_eq!(
                &result(&node, "eth_getTransactionReceipt", by_hash).await,
                served
            );
        }
        let logs: Vec<Value> = receipts
            .as_array()
            .expect("receipts")
            .iter()
            .flat_map(|r| r["logs"].as_array().expect("logs").clone())
            .collect();
        let get_logs = result(&node, "eth_getLogs", logs_filter(number, number)).await;
        assert_eq!(Value::Array(logs), get_logs);
    }
    node.shutdown().await;
}

/// Goal: blocks where one contract alone is over the cap, single and in a run, can only be read from
/// receipts. Method: `eth_getLogs` for that block and address (and its one topic0) answers -32005; the
/// block's receipts hold all its logs, equal to the ground truth, over many transactions; the other
/// blocks and contracts are untouched.
#[tokio::test]
async fn an_overcap_block_refuses_get_logs_for_its_one_contract_and_its_receipts_hold_them() {
    let node = start(|cfg| {
        cfg.chain.blocks = 3_000;
        cfg.chain.block_receipts = true;
        cfg.chain
            .overcap
            .set_option("overcap_blocks", "700")
            .expect("heights");
        cfg.chain
            .overcap
            .set_option("overcap_run", "2000:3")
            .expect("a run");
    })
    .await;
    let truth = node.truth();
    assert_eq!(truth.overcap_blocks(), [700, 2000, 2001, 2002]);
    let transfer = keccak256("Transfer(address,address,uint256)");
    for number in [700, 2000, 2001, 2002] {
        let expected = truth.logs(number, number);
        let of_token: Vec<_> = expected
            .iter()
            .filter(|log| log.address == TOKEN_A)
            .collect();
        assert!(of_token.len() >= 11_000, "{number}: {}", of_token.len());
        let filter = json!([{"fromBlock": hex(number), "toBlock": hex(number),
            "address": to_hex(TOKEN_A.as_slice()), "topics": [to_hex(transfer.as_slice())]}]);
        let response = call(&node, "eth_getLogs", filter).await;
        assert_eq!(error_of(&response).0, -32005, "{number}");
        let receipts = result(&node, "eth_getBlockReceipts", json!([hex(number)])).await;
        let receipts = receipts.as_array().expect("receipts");
        assert!(receipts.len() > 1_000, "spread over many transactions");
        let logs: Vec<&Value> = receipts
            .iter()
            .flat_map(|r| r["logs"].as_array().expect("logs"))
            .collect();
        assert_eq!(logs.len(), expected.len());
        for (served, truth_log) in logs.iter().zip(&expected) {
            assert_log_is(served, truth_log, false);
        }
    }
    // The neighbours are ordinary blocks.
    assert!(truth.log_count(699) < 1_000 && truth.log_count(2003) < 1_000);
    let filter = json!([{"fromBlock": hex(690), "toBlock": hex(699),
        "address": to_hex(TOKEN_A.as_slice())}]);
    result(&node, "eth_getLogs", filter).await;
    node.shutdown().await;
}

/// The `overcap` preset spreads ten single over-cap blocks and a run of five over its 100,000 blocks, and
/// the options parse from a `sim://` URL.
#[tokio::test]
async fn the_overcap_preset_and_sim_url_options_place_overcap_blocks() {
    let cfg = devnode::DevNodeConfig::from_sim_url("sim://?preset=overcap").expect("a preset");
    let truth = GroundTruth::detached(&cfg);
    let heights = truth.overcap_blocks();
    assert_eq!(heights.len(), 15);
    assert_eq!(
        heights.windows(2).filter(|w| w[1] == w[0] + 1).count(),
        4,
        "{heights:?}"
    );
    for number in [heights[0], heights[14]] {
        assert!(truth.log_count(number) >= 11_000);
    }
    let err = devnode::DevNodeConfig::from_sim_url("sim://?overcap_run=5").expect_err("no count");
    assert!(
        err.contains("overcap_run") && err.contains("FIRST:COUNT"),
        "{err}"
    );
}
