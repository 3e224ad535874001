//! Against a real node: anvil (Foundry's, from the npm package `@foundry-rs/anvil-linux-amd64`), not our
//! simulated one. Its log objects carry what the spec's do not show (`removed`, `blockTimestamp`, checksummed
//! addresses), its `finalized` block trails the head, and its answers are its own wording; the database must
//! still equal what the node serves, row by row.
//!
//! The chain is made by hand: three copies of a contract of a few bytes of EVM code (no compiler needed)
//! that emits `Transfer(from, to, value)` from its calldata, blocks of 0-40 such transactions mined
//! together, and runs of empty blocks between them. Two of the contracts are configured (one with every
//! event of `abis/erc20.json`, one with `Transfer` only); the third's logs must not be stored.
//!
//! anvil is installed by `.ci/run`; when it is missing (the README's test command on a fresh machine) the
//! test installs it the same way, with npm, under `target/tools`. `LOGSLICE_ANVIL` names another binary.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use alloy_primitives::{keccak256, Address, U256};
use logslice::pipeline::Target;
use serde_json::{json, Value};

use crate::both_backends;
use crate::support::{self, int_text, query_texts, stamped_raw_rows, Backend, Contract, Workdir};

const ANVIL_PACKAGE: &str = "@foundry-rs/anvil-linux-amd64@1.7.1";
const ANVIL_DIR: &str = "target/tools/anvil-1.7.1";

/// The anvil binary: `LOGSLICE_ANVIL`, else the one under `target/tools`, installed with npm when missing
/// (into a directory of its own, then renamed into place, so two tests installing at once both end up with
/// a whole copy).
fn anvil_binary() -> PathBuf {
    if let Ok(path) = std::env::var("LOGSLICE_ANVIL") {
        return PathBuf::from(path);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join(ANVIL_DIR);
    let binary = dir.join("bin/anvil");
    if binary.exists() {
        return binary;
    }
    let staging = root.join(format!("target/tools/.staging-{}", std::process::id()));
    let status = Command::new("npm")
        .args(["install", "--no-save", "--no-audit", "--no-fund", "--prefix"])
        .arg(&staging)
        .arg(ANVIL_PACKAGE)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| {
            panic!("anvil is not installed and npm could not run ({e}): run .ci/run, or set LOGSLICE_ANVIL")
        });
    assert!(
        status.success(),
        "npm install {ANVIL_PACKAGE} failed: run .ci/run, or set LOGSLICE_ANVIL"
    );
    // Losing the race to another test leaves its copy in place; ours is dropped.
    let _ = std::fs::rename(
        staging.join("node_modules/@foundry-rs/anvil-linux-amd64"),
        &dir,
    );
    let _ = std::fs::remove_dir_all(&staging);
    assert!(binary.exists(), "{} after npm install", binary.display());
    binary
}

/// A running anvil on an ephemeral port, killed on drop.
struct Anvil {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Anvil {
    /// Starts anvil and waits for the line naming its port (its output is then drained on a thread, so a
    /// full pipe never stalls it).
    fn start() -> Self {
        let mut child = Command::new(anvil_binary())
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("anvil starts");
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let addr = loop {
            let line = lines
                .next()
                .expect("anvil names its address before exiting")
                .expect("anvil's output");
            if let Some(addr) = line.strip_prefix("Listening on ") {
                break addr.trim().to_string();
            }
        };
        std::thread::spawn(move || lines.for_each(drop));
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            child,
            url: format!("http://{addr}/"),
            http: reqwest::Client::new(),
        }
    }

    async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer: Value = self
            .http
            .post(&self.url)
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"))
            .json()
            .await
            .unwrap_or_else(|e| panic!("{method}: {e}"));
        match answer.get("error") {
            Some(error) => panic!("{method}: {error}"),
            None => answer["result"].clone(),
        }
    }

    /// Deploys `n` Transfer emitters from `from` in one block (mined on demand: automine is off, so no
    /// answer is read before its block exists); returns their addresses.
    async fn deploy(&self, from: &str, n: usize) -> Vec<Address> {
        let mut hashes = Vec::new();
        for _ in 0..n {
            let tx = json!([{"from": from, "data": hex(&init_code()), "gas": "0x100000"}]);
            hashes.push(self.rpc("eth_sendTransaction", tx).await);
        }
        self.rpc("evm_mine", json!([])).await;
        let mut addresses = Vec::new();
        for hash in hashes {
            let receipt = self.rpc("eth_getTransactionReceipt", json!([hash])).await;
            let address = receipt["contractAddress"]
                .as_str()
                .unwrap_or_else(|| panic!("a contract address in {receipt}"));
            addresses.push(address.parse().expect("an address"));
        }
        addresses
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hex(bytes: &[u8]) -> String {
    alloy_primitives::hex::encode_prefixed(bytes)
}

/// `Transfer(address,address,uint256)`'s selector.
fn transfer_topic() -> [u8; 32] {
    keccak256("Transfer(address,address,uint256)").0
}

/// Runtime code: `LOG3(mem[0..32] = calldata[64..96], Transfer, calldata[0..32], calldata[32..64])`, then
/// stop. The calldata is `from`, `to` and `value`, one word each.
fn runtime_code() -> Vec<u8> {
    let mut code = vec![
        0x60, 0x20, 0x60, 0x40, 0x60, 0x00, 0x37, // CALLDATACOPY(0, 64, 32): the value
        0x60, 0x20, 0x35, // CALLDATALOAD(32): to, topic 2
        0x60, 0x00, 0x35, // CALLDATALOAD(0): from, topic 1
        0x7f, // PUSH32 the selector, topic 0
    ];
    code.extend_from_slice(&transfer_topic());
    code.extend_from_slice(&[
        0x60, 0x20, 0x60, 0x00, 0xa3, // LOG3(0, 32, ...)
        0x00, // STOP
    ]);
    code
}

/// Init code returning [`runtime_code`]: `CODECOPY(0, 11, len)`, `RETURN(0, len)`.
fn init_code() -> Vec<u8> {
    let runtime = runtime_code();
    let len = u8::try_from(runtime.len()).expect("short code");
    let mut code = vec![
        0x60, len, 0x80, 0x60, 0x0b, 0x60, 0x00, 0x39, 0x60, 0x00, 0xf3,
    ];
    assert_eq!(code.len(), 0x0b);
    code.extend_from_slice(&runtime);
    code
}

/// A word of calldata holding `address`.
fn word(address: Address) -> [u8; 32] {
    let mut word = [0u8; 32];
    word[12..].copy_from_slice(address.as_slice());
    word
}

/// Builds the chain: the three contracts, then 30 rounds of 0-40 transfers to them mined in one block, with
/// runs of 25 empty blocks after every seventh round. Returns the contracts.
async fn build_chain(anvil: &Anvil) -> [Address; 3] {
    let accounts = anvil.rpc("eth_accounts", json!([])).await;
    let from = accounts[0].as_str().expect("an account").to_string();
    anvil.rpc("evm_setAutomine", json!([false])).await;
    let contracts: [Address; 3] = anvil
        .deploy(&from, 3)
        .await
        .try_into()
        .expect("three contracts");
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for round in 0..30u64 {
        for _ in 0..next() % 41 {
            let to = contracts[(next() % 3) as usize];
            let mut data = Vec::with_capacity(96);
            data.extend_from_slice(&word(Address::from_word(keccak256(next().to_be_bytes()))));
            data.extend_from_slice(&word(Address::from_word(keccak256(next().to_be_bytes()))));
            // Values of every size, up to near 2^256.
            let value = U256::from(next()) << (next() % 193);
            data.extend_from_slice(&value.to_be_bytes::<32>());
            anvil
                .rpc(
                    "eth_sendTransaction",
                    json!([{"from": from, "to": to, "data": hex(&data), "gas": "0x30000"}]),
                )
                .await;
        }
        anvil.rpc("evm_mine", json!([])).await;
        if round % 7 == 6 {
            anvil.rpc("anvil_mine", json!(["0x19"])).await;
        }
    }
    contracts
}

/// Goal: against a real node, whose log objects carry fields the spec does not show, the raw `logs` table
/// and the typed `Transfer` tables equal the node's own `eth_getLogs` answer and block headers, row by row
/// and value by value, and nothing of an unconfigured contract is stored. Method: the chain above, `sync
/// --to latest` in-process, then each table against `eth_getLogs` for the two configured addresses.
async fn a_sync_against_anvil_equals_its_logs(backend: Backend) {
    let anvil = Anvil::start();
    let [a, b, unconfigured] = build_chain(&anvil).await;
    let work = Workdir::with(backend).await;
    let contracts = [
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
    ];
    let config = work.write_config(&anvil.url, &contracts, "", "");
    let report = support::sync(&config, Target::Latest)
        .await
        .expect("sync against anvil");

    let logs = anvil
        .rpc(
            "eth_getLogs",
            json!([{"fromBlock": "0x0", "toBlock": hexnum(report.target), "address": [a, b]}]),
        )
        .await;
    let logs = logs.as_array().expect("a list of logs").clone();
    let all = anvil
        .rpc(
            "eth_getLogs",
            json!([{"fromBlock": "0x0", "toBlock": hexnum(report.target), "address": [unconfigured]}]),
        )
        .await;
    assert!(
        logs.len() > 300 && !all.as_array().expect("a list").is_empty(),
        "the chain holds logs of every contract: {} configured",
        logs.len()
    );
    let mut timestamps = std::collections::HashMap::new();
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
    let rows = stamped_raw_rows(&work).await;
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

    for (name, address) in [("token_a", a), ("token_b", b)] {
        let rows = query_texts(
            &work,
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
            .filter(|log| text(&log["address"]) == format!("{address:#x}"))
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
