//! Against a real node: anvil (Foundry's, from the npm package `@foundry-rs/anvil-linux-amd64`), not our
//! simulated one. Its log objects carry what the spec's do not show (`removed`, `blockTimestamp`, checksummed
//! addresses), its `finalized` block trails the head, and its answers are its own wording; the database must
//! still equal what the node serves, row by row.
//!
//! The chain is made by hand (`chain`): three copies of a contract of a few bytes of EVM code (no compiler needed)
//! that emits `Transfer(from, to, value)` from its calldata, blocks of 0-40 such transactions mined
//! together, and runs of empty blocks between them. Two of the contracts are configured (one with every
//! event of `abis/erc20.json`, one with `Transfer` only); the third's logs must not be stored.
//!
//! anvil is installed by `.ci/run`; when it is missing (the README's test command on a fresh machine) the
//! test installs it the same way, with npm, under `target/tools`. `LOGSLICE_ANVIL` names another binary.

mod chain;

use std::collections::HashMap;

use alloy_primitives::{Address, U256};
use logslice::pipeline::Target;
use serde_json::{json, Value};

use self::chain::{build_chain, reorg, Anvil, Transfers};
use crate::both_backends;
use crate::follow::start_daemon;
use crate::support::{self, int_text, query_texts, stamped_raw_rows, Backend, Contract, Workdir};

/// The two configured contracts: `token_a` with every event of `abis/erc20.json`, `token_b` with `Transfer`.
fn configured(transfers: &Transfers) -> [Contract; 2] {
    let [a, b, _] = transfers.contracts;
    [
        Contract {
            name: "token_a",
            address: a,
            abi: "erc20.json",
            events: &[],
            start_block: 0,
        },
        Contract {
            name: "token_b",
            address: b,
            abi: "erc20.json",
            events: &["Transfer"],
            start_block: 0,
        },
    ]
}

/// What anvil served for the configured contracts: its `eth_getLogs` answer, and the timestamp (decimal
/// text) of each block holding one of those logs, by its `blockNumber` as anvil wrote it.
struct Served {
    logs: Vec<Value>,
    timestamps: HashMap<String, String>,
}

/// Asserts that `logs` and the typed `Transfer` tables of `contracts` hold exactly what anvil's own
/// `eth_getLogs` serves for them up to block `to`, with each block's timestamp from its header; returns
/// what anvil served.
async fn assert_db_equals_anvil(
    anvil: &Anvil,
    work: &Workdir,
    backend: Backend,
    contracts: &[Contract],
    to: u64,
) -> Served {
    let addresses: Vec<Address> = contracts.iter().map(|c| c.address).collect();
    let logs = anvil
        .rpc(
            "eth_getLogs",
            json!([{"fromBlock": "0x0", "toBlock": hexnum(to), "address": addresses}]),
        )
        .await;
    let logs = logs.as_array().expect("a list of logs").clone();
    let mut timestamps = HashMap::new();
    for log in &logs {
        let number = log["blockNumber"]
            .as_str()
            .expect("blockNumber")
            .to_string();
        if !timestamps.contains_key(&number) {
            let header = anvil
                .rpc("eth_getBlockByNumber", json!([number, false]))
                .await;
            timestamps.insert(number.clone(), quantity(&header["timestamp"]));
        }
    }

    let text = |v: &Value| v.as_str().expect("a string").to_lowercase();
    let rows = stamped_raw_rows(work).await;
    assert_eq!(rows.len(), logs.len(), "raw rows against eth_getLogs");
    for (row, log) in rows.iter().zip(&logs) {
        let topics = log["topics"].as_array().expect("topics");
        let topic = |i: usize| topics.get(i).map(text).unwrap_or_default();
        let wanted = vec![
            quantity(&log["blockNumber"]),
            text(&log["blockHash"]),
            text(&log["transactionHash"]),
            quantity(&log["transactionIndex"]),
            quantity(&log["logIndex"]),
            text(&log["address"]),
            topic(0),
            topic(1),
            topic(2),
            topic(3),
            text(&log["data"]),
            timestamps[log["blockNumber"].as_str().expect("blockNumber")].clone(),
        ];
        assert_eq!(row, &wanted, "raw row of {log}");
    }

    for contract in contracts {
        let name = contract.name;
        let rows = query_texts(
            work,
            &format!(
                "SELECT {}, block_hash, transaction_hash, {}, address, {}, from_, to_, {} \
                 FROM {name}_transfer AS t ORDER BY t.block_number, t.log_index",
                int_text(backend, "block_number"),
                int_text(backend, "log_index"),
                int_text(backend, "block_timestamp"),
                match backend {
                    Backend::Sqlite => "value".to_string(),
                    Backend::Postgres => "value::text".to_string(),
                },
            ),
        )
        .await;
        let wanted: Vec<Vec<String>> = logs
            .iter()
            .filter(|log| text(&log["address"]) == format!("{:#x}", contract.address))
            .map(|log| {
                let topics = log["topics"].as_array().expect("topics");
                let party = |i: usize| format!("0x{}", &text(&topics[i])[26..]);
                let value: U256 = text(&log["data"]).parse().expect("a 32-byte value");
                vec![
                    quantity(&log["blockNumber"]),
                    text(&log["blockHash"]),
                    text(&log["transactionHash"]),
                    quantity(&log["logIndex"]),
                    text(&log["address"]),
                    timestamps[log["blockNumber"].as_str().expect("blockNumber")].clone(),
                    party(1),
                    party(2),
                    value.to_string(),
                ]
            })
            .collect();
        assert!(!wanted.is_empty(), "{name} emitted transfers");
        assert_eq!(rows, wanted, "{name}_transfer against eth_getLogs");
    }
    Served { logs, timestamps }
}

/// Goal: against a real node, whose log objects carry fields the spec does not show, the raw `logs` table
/// and the typed `Transfer` tables equal the node's own `eth_getLogs` answer and block headers, row by row
/// and value by value, and nothing of an unconfigured contract is stored. Method: the chain above, `sync
/// --to latest` in-process, then each table against `eth_getLogs` for the two configured addresses.
async fn a_sync_against_anvil_equals_its_logs(backend: Backend) {
    let anvil = Anvil::start();
    let transfers = build_chain(&anvil).await;
    let work = Workdir::with(backend).await;
    let contracts = configured(&transfers);
    let config = work.write_config(&anvil.url, &contracts, "", "");
    let report = support::sync(&config, Target::Latest)
        .await
        .expect("sync against anvil");

    let stored = assert_db_equals_anvil(&anvil, &work, backend, &contracts, report.target)
        .await
        .logs
        .len();
    let unconfigured = anvil
        .rpc(
            "eth_getLogs",
            json!([{"fromBlock": "0x0", "toBlock": hexnum(report.target), "address": [transfers.contracts[2]]}]),
        )
        .await;
    assert!(
        stored > 300 && !unconfigured.as_array().expect("a list").is_empty(),
        "the chain holds logs of every contract: {stored} configured"
    );
    let approvals = query_texts(
        &work,
        &format!(
            "SELECT {} FROM token_a_approval",
            int_text(backend, "block_number")
        ),
    )
    .await;
    assert!(approvals.is_empty(), "no Approval was emitted");
}

both_backends!(a_sync_against_anvil_equals_its_logs);

/// Goal: `logslice run` against a real node's reorganisations: after each, the database holds exactly the
/// new branch's logs (none of an orphaned block). Method: the daemon follows the chain above; anvil replaces
/// its last 1, 5, 17 and 40 blocks (all above its `finalized`, 64 behind the head) with blocks of other
/// transfers (`anvil_reorg`), then mines one more block, which the checkpoint can reach only through the
/// new branch; each time every table is compared with anvil's `eth_getLogs`. Then one more reorg while the
/// daemon is stopped, which the next `sync` must find from the hashes it kept.
async fn a_daemon_against_anvil_rolls_back_its_reorgs(backend: Backend) {
    let anvil = Anvil::start();
    let mut transfers = build_chain(&anvil).await;
    let work = Workdir::with(backend).await;
    let contracts = configured(&transfers);
    let config = work.write_config(&anvil.url, &contracts, "", "poll_interval = \"20ms\"");
    let mut daemon = start_daemon(&config);
    let mut head = quantity(&anvil.rpc("eth_blockNumber", json!([])).await)
        .parse::<u64>()
        .expect("a block number");
    daemon.reaches(head).await;
    assert_db_equals_anvil(&anvil, &work, backend, &contracts, head).await;
    for depth in [1u64, 5, 17, 40] {
        reorg(&anvil, &mut transfers, depth).await;
        transfers.mine(&anvil, 5).await;
        head += 1;
        daemon.reaches(head).await;
        assert_db_equals_anvil(&anvil, &work, backend, &contracts, head).await;
    }
    let stopped = daemon.stop().await;
    assert!(
        matches!(stopped, Err(logslice::pipeline::Error::Interrupted)),
        "{stopped:?}"
    );

    // A reorg while logslice is down is found from the kept hashes by the next `sync`.
    reorg(&anvil, &mut transfers, 12).await;
    let report = support::sync(&config, Target::Latest)
        .await
        .expect("a sync after a reorg while down");
    assert_eq!(report.target, head);
    assert_db_equals_anvil(&anvil, &work, backend, &contracts, head).await;
}

both_backends!(a_daemon_against_anvil_rolls_back_its_reorgs);

/// Goal: the `transactions` table against a real node's transaction objects and receipts (which carry
/// fields the spec does not show: `chainId`, `accessList`, `yParity`, the signature), legacy and EIP-1559
/// transactions alike. Method: `sync --to latest` with `transactions` and `transaction_receipts` on, then
/// every row against anvil's `eth_getTransactionByHash` and `eth_getTransactionReceipt` for the
/// transactions of the configured contracts' logs, and nothing else.
async fn transactions_against_anvil_equal_its_transactions_and_receipts(backend: Backend) {
    let anvil = Anvil::start();
    let transfers = build_chain(&anvil).await;
    let work = Workdir::with(backend).await;
    let contracts = configured(&transfers);
    let config = work.write_config(
        &anvil.url,
        &contracts,
        "",
        "transactions = true\ntransaction_receipts = true",
    );
    let report = support::sync(&config, Target::Latest)
        .await
        .expect("sync against anvil");
    let served = assert_db_equals_anvil(&anvil, &work, backend, &contracts, report.target).await;

    let mut hashes: Vec<&str> = served
        .logs
        .iter()
        .map(|log| log["transactionHash"].as_str().expect("a hash"))
        .collect();
    hashes.dedup();
    let text = |v: &Value| v.as_str().map_or("NULL".to_string(), str::to_lowercase);
    let big = |v: &Value| match v.as_str() {
        Some(hex) => hex.parse::<U256>().expect("a quantity").to_string(),
        None => "NULL".to_string(),
    };
    let mut wanted = Vec::new();
    let mut types = std::collections::BTreeSet::new();
    for hash in hashes {
        let tx = anvil.rpc("eth_getTransactionByHash", json!([hash])).await;
        let receipt = anvil.rpc("eth_getTransactionReceipt", json!([hash])).await;
        let block = tx["blockNumber"].as_str().expect("blockNumber");
        types.insert(quantity(&tx["type"]));
        wanted.push(vec![
            quantity(&tx["blockNumber"]),
            quantity(&tx["transactionIndex"]),
            text(&tx["hash"]),
            text(&tx["blockHash"]),
            served.timestamps[block].clone(),
            text(&tx["from"]),
            text(&tx["to"]),
            big(&tx["value"]),
            big(&tx["gas"]),
            big(&tx["gasPrice"]),
            big(&tx["maxFeePerGas"]),
            big(&tx["maxPriorityFeePerGas"]),
            big(&tx["nonce"]),
            quantity(&tx["type"]),
            text(&tx["input"]),
            quantity(&receipt["status"]),
            big(&receipt["gasUsed"]),
        ]);
    }
    assert!(
        types.len() == 2 && wanted.len() > 300,
        "legacy and EIP-1559 transactions: {types:?}, {} in all",
        wanted.len()
    );
    let int = |c: &str| int_text(backend, c);
    let nullable = |c: &str| format!("coalesce({}, 'NULL')", int_text(backend, c));
    let rows = query_texts(
        &work,
        &format!(
            "SELECT {}, {}, transaction_hash, block_hash, {}, from_address, coalesce(to_address, 'NULL'), \
             {}, {}, {}, {}, {}, {}, {}, input, {}, {} \
             FROM transactions AS t ORDER BY t.block_number, t.transaction_index",
            int("block_number"),
            int("transaction_index"),
            int("block_timestamp"),
            int("value"),
            int("gas"),
            nullable("gas_price"),
            nullable("max_fee_per_gas"),
            nullable("max_priority_fee_per_gas"),
            int("nonce"),
            int("type"),
            nullable("status"),
            nullable("gas_used"),
        ),
    )
    .await;
    assert_eq!(
        rows, wanted,
        "transactions against anvil's transactions and receipts"
    );
}

both_backends!(transactions_against_anvil_equal_its_transactions_and_receipts);

fn hexnum(n: u64) -> String {
    format!("{n:#x}")
}

/// A JSON-RPC quantity as decimal text.
fn quantity(v: &Value) -> String {
    let text = v.as_str().expect("a quantity");
    u64::from_str_radix(text.trim_start_matches("0x"), 16)
        .expect("a hex quantity")
        .to_string()
}
