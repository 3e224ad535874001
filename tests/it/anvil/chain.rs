//! The real node of the anvil tests and the chain they build on it: anvil installed and started, three
//! copies of a contract of a few bytes of EVM code (no compiler needed) that emits `Transfer(from, to,
//! value)` from its calldata, transfers from a fixed seed, blocks of them mined on command, and reorgs.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use alloy_primitives::{keccak256, Address, U256};
use serde_json::{json, Value};

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
pub(super) struct Anvil {
    child: Child,
    pub(super) url: String,
    http: reqwest::Client,
}

impl Anvil {
    /// Starts anvil and waits for the line naming its port (its output is then drained on a thread, so a
    /// full pipe never stalls it).
    pub(super) fn start() -> Self {
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

    pub(super) async fn rpc(&self, method: &str, params: Value) -> Value {
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

/// Transfers from a fixed seed: each one a transaction to one of three contracts whose calldata is a
/// `from`, a `to` and a value of any size up to near 2^256.
pub(super) struct Transfers {
    from: String,
    legacy_from: String,
    pub(super) contracts: [Address; 3],
    state: u64,
}

impl Transfers {
    pub(super) fn next(&mut self) -> u64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        self.state
    }

    /// The next transfer, as a transaction request.
    pub(super) fn tx(&mut self) -> Value {
        let to = self.contracts[(self.next() % 3) as usize];
        let mut data = Vec::with_capacity(96);
        data.extend_from_slice(&word(Address::from_word(keccak256(
            self.next().to_be_bytes(),
        ))));
        data.extend_from_slice(&word(Address::from_word(keccak256(
            self.next().to_be_bytes(),
        ))));
        let value = U256::from(self.next()) << (self.next() % 193);
        data.extend_from_slice(&value.to_be_bytes::<32>());
        // A third of them legacy (type 0: a gas price), from a sender of their own (anvil drops one
        // sender's transactions of both kinds pending together), the rest EIP-1559 (type 2).
        if self.next() % 3 == 0 {
            json!({"from": self.legacy_from, "to": to, "data": hex(&data), "gas": "0x30000", "gasPrice": "0x77359400"})
        } else {
            // A fee cap over the base fee plus the tip, so the effective gas price differs from both.
            json!({"from": self.from, "to": to, "data": hex(&data), "gas": "0x30000",
                   "maxFeePerGas": "0xee6b2800", "maxPriorityFeePerGas": "0x3b9aca00"})
        }
    }

    /// Sends `n` transfers to the pool and mines them in one block.
    pub(super) async fn mine(&mut self, anvil: &Anvil, n: u64) {
        for _ in 0..n {
            let tx = self.tx();
            anvil.rpc("eth_sendTransaction", json!([tx])).await;
        }
        anvil.rpc("evm_mine", json!([])).await;
    }
}

/// Builds the chain: the three contracts, then 30 rounds of 0-40 transfers to them mined in one block, with
/// runs of 25 empty blocks after every seventh round. Returns the transfers to come.
pub(super) async fn build_chain(anvil: &Anvil) -> Transfers {
    let accounts = anvil.rpc("eth_accounts", json!([])).await;
    let account = |i: usize| accounts[i].as_str().expect("an account").to_string();
    let from = account(0);
    anvil.rpc("evm_setAutomine", json!([false])).await;
    let contracts: [Address; 3] = anvil
        .deploy(&from, 3)
        .await
        .try_into()
        .expect("three contracts");
    let mut transfers = Transfers {
        from,
        legacy_from: account(1),
        contracts,
        state: 0x2545_f491_4f6c_dd1d,
    };
    for round in 0..30u64 {
        let n = transfers.next() % 41;
        transfers.mine(anvil, n).await;
        if round % 7 == 6 {
            anvil.rpc("anvil_mine", json!(["0x19"])).await;
        }
    }
    transfers
}

/// Replaces the last `depth` blocks with blocks of 0-7 other transfers each (`anvil_reorg`, which keeps the
/// height), and checks that the head block changed.
pub(super) async fn reorg(anvil: &Anvil, transfers: &mut Transfers, depth: u64) {
    let head = || anvil.rpc("eth_getBlockByNumber", json!(["latest", false]));
    let before = head().await;
    let mut pairs = Vec::new();
    for offset in 0..depth {
        for _ in 0..transfers.next() % 8 {
            pairs.push(json!([transfers.tx(), offset]));
        }
    }
    anvil.rpc("anvil_reorg", json!([depth, pairs])).await;
    let after = head().await;
    assert_eq!(
        before["number"], after["number"],
        "anvil_reorg keeps the height"
    );
    assert_ne!(
        before["hash"], after["hash"],
        "anvil replaced the head block"
    );
}
