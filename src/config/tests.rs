//! Config tests: each feeds TOML text (and ABI files in a temp dir) to `load_str` with a fixed environment
//! and compares the result, or the full text of every error, with what is expected.

use std::path::{Path, PathBuf};
use std::time::Duration;

use alloy_primitives::address;

use super::*;

const API_KEY: &str = "SECRET-KEY-xyz123456789";
const PG_PASSWORD: &str = "pa55-w0rd-s3cret";

fn env(name: &str) -> Option<String> {
    match name {
        "LOGSLICE_API_KEY" => Some(API_KEY.to_owned()),
        "PGPASS" => Some(PG_PASSWORD.to_owned()),
        _ => None,
    }
}

const ERC20_ABI: &str = r#"[
  {"type":"function","name":"transfer","inputs":[{"name":"to","type":"address"},{"name":"value","type":"uint256"}],"outputs":[{"name":"","type":"bool"}],"stateMutability":"nonpayable"},
  {"type":"event","name":"Transfer","anonymous":false,"inputs":[
    {"name":"from","type":"address","indexed":true},{"name":"to","type":"address","indexed":true},{"name":"value","type":"uint256","indexed":false}]},
  {"type":"event","name":"Approval","anonymous":false,"inputs":[
    {"name":"owner","type":"address","indexed":true},{"name":"spender","type":"address","indexed":true},{"name":"value","type":"uint256","indexed":false}]},
  {"type":"event","name":"Deposit","anonymous":false,"inputs":[
    {"name":"who","type":"address","indexed":true},{"name":"amount","type":"uint256","indexed":false}]},
  {"type":"event","name":"Deposit","anonymous":false,"inputs":[
    {"name":"who","type":"address","indexed":true},{"name":"amount","type":"uint256","indexed":false},{"name":"memo","type":"bytes","indexed":false}]}
]"#;

/// A directory with `abis/erc20.json`, an artifact, an ABI without events and a broken one.
fn abi_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("abis")).unwrap();
    std::fs::write(dir.path().join("abis/erc20.json"), ERC20_ABI).unwrap();
    std::fs::write(
        dir.path().join("abis/artifact.json"),
        format!(r#"{{"contractName":"Token","abi":{ERC20_ABI},"bytecode":"0x00"}}"#),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("abis/no_events.json"),
        r#"[{"type":"function","name":"f","inputs":[],"outputs":[],"stateMutability":"view"}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("abis/broken.json"),
        "[{\"type\": \"event\",\n \"name\": }]",
    )
    .unwrap();
    dir
}

/// A valid config: `[node]`, `[database]`, then whatever `rest` adds (contracts by default).
fn config_text(rest: &str) -> String {
    format!("[node]\nurl = \"sim://\"\n\n[database]\nurl = \"sqlite::memory:\"\n\n{rest}")
}

const TRANSFER_CONTRACT: &str = r#"
[[contracts]]
name = "usdc"
address = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
events = ["event Transfer(address indexed from, address indexed to, uint256 value)"]
"#;

fn load_in(dir: &Path, text: &str) -> Result<Config, ConfigErrors> {
    load_str(&dir.join("config.toml"), text, &env)
}

fn check_ok(text: &str) -> Config {
    let dir = abi_dir();
    match load_in(dir.path(), text) {
        Ok(config) => config,
        Err(errors) => panic!("expected a valid config, got:\n{errors}\n--- config:\n{text}"),
    }
}

/// Loads `text` (from `<tmp>/config.toml`) and compares every error, as displayed, with `expected`, where
/// `<dir>` stands for the temp dir.
fn check_errors(text: &str, expected: &[&str]) {
    let dir = abi_dir();
    let errors = match load_in(dir.path(), text) {
        Ok(_) => panic!("expected errors, the config loaded:\n{text}"),
        Err(ConfigErrors(errors)) => errors,
    };
    let dir_text = dir.path().display().to_string();
    let actual: Vec<String> = errors
        .iter()
        .map(|e| e.to_string().replace(&dir_text, "<dir>"))
        .collect();
    let expected: Vec<String> = expected.iter().map(|e| e.to_string()).collect();
    assert_eq!(actual, expected, "\n--- config:\n{text}");
}

#[test]
fn fills_in_every_default() {
    let config = check_ok(&config_text(TRANSFER_CONTRACT));
    assert_eq!(
        config.node.providers[0].endpoint,
        Endpoint::Sim("sim://".into())
    );
    assert_eq!(config.node.providers[0].ws_endpoint, None);
    assert_eq!(config.node.providers[0].transport, Transport::Http);
    assert_eq!(config.node.providers[0].requests_per_second, 25);
    assert_eq!(config.node.providers[0].max_concurrency, 8);
    assert_eq!(
        config.node.providers[0].request_timeout,
        Duration::from_secs(15)
    );
    assert_eq!(config.node.providers[0].max_retries, 8);
    assert_eq!(config.database.max_retries, 5);
    assert_eq!(
        config.node.providers[0].initial_backoff,
        Duration::from_millis(250)
    );
    assert_eq!(
        config.node.providers[0].max_backoff,
        Duration::from_secs(30)
    );
    assert_eq!(
        config.node.providers[0].max_response_bytes,
        32 * 1024 * 1024
    );
    assert_eq!(
        config.database.url,
        DatabaseUrl::Sqlite(PathBuf::from(":memory:"))
    );
    assert_eq!(config.database.schema, None);
    let sync = &config.sync;
    assert_eq!(
        (
            sync.start_block,
            sync.finality,
            sync.initial_block_range,
            sync.max_block_range
        ),
        (0, Finality::Finalized, 2000, 100_000)
    );
    assert_eq!(
        (
            sync.target_logs_per_request,
            sync.max_batch_logs,
            sync.max_queued_batches,
            sync.max_reorg_depth
        ),
        (9500, 5000, 2, 128)
    );
    assert_eq!(
        (sync.poll_interval, sync.shutdown_grace, sync.strict),
        (Duration::from_secs(1), Duration::from_secs(10), false)
    );
    assert!(sync.block_timestamps, "block timestamps are on by default");
    assert_eq!(config.contracts.len(), 1);
    let usdc = &config.contracts[0];
    assert_eq!(usdc.name, "usdc");
    assert_eq!(
        usdc.addresses,
        vec![address!("a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48")]
    );
    assert_eq!(usdc.start_block, 0);
    assert_eq!(usdc.events.len(), 1);
    assert_eq!(usdc.events[0].table, "usdc_transfer");
    assert_eq!(
        usdc.events[0].event.signature(),
        "Transfer(address,address,uint256)"
    );
}

#[test]
fn reads_every_key() {
    let config = check_ok(
        r#"
[node]
url = "https://node.example/v3/${LOGSLICE_API_KEY}"
transport = "ws"
requests_per_second = 50
max_concurrency = 4
request_timeout = "20s"
max_retries = 0
initial_backoff = "100ms"
max_backoff = "1m"
max_response_bytes = 1048576

[database]
url = "postgres://indexer:${PGPASS}@db.example/logslice"
schema = "chain_1"

[sync]
start_block = 100
finality = 12
initial_block_range = 10
max_block_range = 10
target_logs_per_request = 1000
max_batch_logs = 200
max_queued_batches = 2
max_reorg_depth = 64
poll_interval = "500ms"
shutdown_grace = "3s"
strict = true
block_timestamps = false

[[contracts]]
name = "USDC"
addresses = ["0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48", "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48", "0xDAC17F958D2EE523A2206206994597C13D831EC7"]
abi = "abis/erc20.json"
events = ["Transfer"]
start_block = 6082465
"#,
    );
    let node = &config.node.providers[0];
    let Endpoint::Url(url) = &node.endpoint else {
        panic!("{:?}", node.endpoint)
    };
    assert_eq!(
        url.expose().as_str(),
        format!("https://node.example/v3/{API_KEY}")
    );
    assert_eq!(url.to_string(), "https://node.example/v3/****");
    let Some(Endpoint::Url(ws)) = &node.ws_endpoint else {
        panic!("{:?}", node.ws_endpoint)
    };
    assert_eq!(
        ws.expose().as_str(),
        format!("wss://node.example/ws/v3/{API_KEY}")
    );
    assert_eq!(node.transport, Transport::Ws);
    assert_eq!(
        (
            node.requests_per_second,
            node.max_concurrency,
            node.max_retries
        ),
        (50, 4, 0)
    );
    assert_eq!(
        (node.request_timeout, node.initial_backoff, node.max_backoff),
        (
            Duration::from_secs(20),
            Duration::from_millis(100),
            Duration::from_secs(60)
        )
    );
    assert_eq!(node.max_response_bytes, 1_048_576);
    let DatabaseUrl::Postgres(db) = &config.database.url else {
        panic!("{:?}", config.database.url)
    };
    assert_eq!(db.expose().password(), Some(PG_PASSWORD));
    assert_eq!(
        db.to_string(),
        "postgres://indexer:****@db.example/logslice"
    );
    assert_eq!(config.database.schema.as_deref(), Some("chain_1"));
    let sync = &config.sync;
    assert_eq!(
        (sync.start_block, sync.finality),
        (100, Finality::Confirmations(12))
    );
    assert_eq!(
        (
            sync.initial_block_range,
            sync.max_block_range,
            sync.target_logs_per_request
        ),
        (10, 10, 1000)
    );
    assert_eq!(
        (
            sync.max_batch_logs,
            sync.max_queued_batches,
            sync.max_reorg_depth
        ),
        (200, 2, 64)
    );
    assert_eq!(
        (sync.poll_interval, sync.shutdown_grace, sync.strict),
        (Duration::from_millis(500), Duration::from_secs(3), true)
    );
    assert!(!sync.block_timestamps);
    let usdc = &config.contracts[0];
    assert_eq!(usdc.name, "usdc");
    assert_eq!(
        usdc.addresses,
        vec![
            address!("a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"),
            address!("dac17f958d2ee523a2206206994597c13d831ec7")
        ],
        "deduplicated, in file order"
    );
    assert_eq!(usdc.start_block, 6_082_465);
    let tables: Vec<&str> = usdc.events.iter().map(|e| e.table.as_str()).collect();
    assert_eq!(tables, ["usdc_transfer"]);
}

#[test]
fn reports_unknown_keys_everywhere_with_the_nearest_valid_key() {
    check_errors(
        r#"
colour = "blue"
[node]
url = "sim://"
max_concurency = 4
[database]
url = "sqlite::memory:"
shema = "x"
[sync]
finalty = 12
[[contracts]]
name = "usdc"
adress = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
address = "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
events = ["event Transfer(address indexed from, address indexed to, uint256 value)"]
"#,
        &[
            "<dir>/config.toml:2: colour: unknown key \"colour\" (valid keys here: node, chains, database, sync, contracts, metrics)",
            "<dir>/config.toml:5: node.max_concurency: unknown key \"max_concurency\" (did you mean \"max_concurrency\"?)",
            "<dir>/config.toml:8: database.shema: unknown key \"shema\" (did you mean \"schema\"?)",
            "<dir>/config.toml:10: sync.finalty: unknown key \"finalty\" (did you mean \"finality\"?)",
            "<dir>/config.toml:13: contracts[0].adress: unknown key \"adress\" (did you mean \"address\"?)",
        ],
    );
}

#[test]
fn reports_bad_toml_with_its_position_only() {
    check_errors(
        &format!("[node]\nurl = \"https://node.example/v3/{API_KEY}\nx = 1\n"),
        &["<dir>/config.toml: line 2, column 55: invalid basic string, expected `\"` (fix the TOML syntax)"],
    );
}

#[test]
fn reports_missing_sections() {
    check_errors(
        "",
        &[
            "<dir>/config.toml: node: is missing (add a [node] section with url = \"https://...\" or \"sim://\")",
            "<dir>/config.toml: node.url: is missing (write sim://, https://host/path or wss://host/path)",
            "<dir>/config.toml: database: is missing (add a [database] section with url = \"sqlite://logslice.db\")",
            "<dir>/config.toml: database.url: is missing (write url = \"sqlite://logslice.db\" or \"postgres://user@host/db\")",
            "<dir>/config.toml: contracts: no contracts are configured (add a [[contracts]] section with name, address, and abi or events)",
        ],
    );
}

fn node_config(node_lines: &str) -> Result<ProviderConfig, Vec<String>> {
    let dir = abi_dir();
    let text =
        format!("[node]\n{node_lines}\n[database]\nurl = \"sqlite::memory:\"\n{TRANSFER_CONTRACT}");
    load_in(dir.path(), &text)
        .map(|mut config| config.node.providers.remove(0))
        .map_err(|errors| {
            errors
                .0
                .iter()
                .map(|e| format!("{}: {} ({})", e.field, e.problem, e.fix))
                .collect()
        })
}

fn check_endpoints(node_lines: &str, expected: (&str, Option<&str>, Transport)) {
    let node = node_config(node_lines).unwrap_or_else(|errors| panic!("{node_lines}: {errors:?}"));
    let show = |endpoint: &Endpoint| match endpoint {
        Endpoint::Sim(s) => s.clone(),
        Endpoint::Url(url) => url.expose().to_string(),
    };
    let actual = (
        show(&node.endpoint),
        node.ws_endpoint.as_ref().map(show),
        node.transport,
    );
    assert_eq!(
        (actual.0.as_str(), actual.1.as_deref(), actual.2),
        expected,
        "{node_lines}"
    );
}

#[test]
fn parses_node_endpoints_and_derives_the_websocket_url() {
    check_endpoints("url = \"sim://\"", ("sim://", None, Transport::Http));
    check_endpoints(
        "url = \"sim://?seed=7&reorgs=1\"",
        ("sim://?seed=7&reorgs=1", None, Transport::Http),
    );
    check_endpoints(
        "url = \"sim://\"\ntransport = \"ws\"",
        ("sim://", None, Transport::Ws),
    );
    check_endpoints(
        "url = \"http://127.0.0.1:8545\"",
        ("http://127.0.0.1:8545/", None, Transport::Http),
    );
    check_endpoints(
        "url = \"http://127.0.0.1:8545/v3/k\"\ntransport = \"ws\"",
        (
            "http://127.0.0.1:8545/v3/k",
            Some("ws://127.0.0.1:8545/ws/v3/k"),
            Transport::Ws,
        ),
    );
    check_endpoints(
        "url = \"https://a.example/rpc\"\ntransport = \"ws\"",
        (
            "https://a.example/rpc",
            Some("wss://a.example/rpc"),
            Transport::Ws,
        ),
    );
    check_endpoints(
        "url = \"https://a.example/v3/k\"\nws_url = \"wss://b.example/socket\"",
        (
            "https://a.example/v3/k",
            Some("wss://b.example/socket"),
            Transport::Http,
        ),
    );
    check_endpoints(
        "url = \"wss://a.example/ws/v3/k\"",
        (
            "wss://a.example/ws/v3/k",
            Some("wss://a.example/ws/v3/k"),
            Transport::Ws,
        ),
    );
}

fn check_node_errors(node_lines: &str, expected: &[&str]) {
    match node_config(node_lines) {
        Ok(node) => panic!("{node_lines}: expected errors, got {node:?}"),
        Err(errors) => assert_eq!(errors, expected, "{node_lines}"),
    }
}

#[test]
fn rejects_bad_node_settings() {
    check_node_errors(
        "url = \"ftp://files.example/v3/${LOGSLICE_API_KEY}\"",
        &["node.url: scheme \"ftp\" is not supported here (write sim:// or a URL starting with http://, https://, ws://, wss://)"],
    );
    check_node_errors(
        "url = \"not a url\"",
        &["node.url: is not a valid URL (relative URL without a base) (write sim:// or a URL starting with http://, https://, ws://, wss://)"],
    );
    check_node_errors(
        "url = \"sim://\"\nws_url = \"https://a.example\"\ntransport = \"carrier-pigeon\"",
        &[
            "node.ws_url: scheme \"https\" is not supported here (write sim:// or a URL starting with ws://, wss://)",
            "node.transport: \"carrier-pigeon\" is not a transport (write \"http\" or \"ws\")",
        ],
    );
    check_node_errors(
        "url = \"wss://a.example\"\ntransport = \"http\"",
        &["node.transport: \"http\" does not fit a ws:// or wss:// node.url (set transport = \"ws\", or give an http(s):// url)"],
    );
    check_node_errors(
        "url = \"sim://\"\nrequests_per_second = 0\nmax_concurrency = -1\nrequest_timeout = \"0s\"\nmax_retries = \"3\"\ninitial_backoff = \"1m\"\nmax_backoff = \"10s\"\nmax_response_bytes = 0",
        &[
            "node.requests_per_second: 0 is below the minimum 1 (set it to 1 or more)",
            "node.max_concurrency: -1 is negative (set it to 1 or more)",
            "node.request_timeout: \"0s\" is zero (use a duration above zero)",
            "node.max_retries: is a string, not an integer (write a whole number without quotes)",
            "node.initial_backoff: 1m is above node.max_backoff (10s) (make initial_backoff at most max_backoff)",
            "node.max_response_bytes: 0 is below the minimum 1 (set it to 1 or more)",
        ],
    );
    check_node_errors(
        "url = \"sim://\"\nrequest_timeout = 15\npoll = 1\nmax_backoff = \"soon\"",
        &[
            "node.poll: unknown key \"poll\" (valid keys here: url, ws_url, transport, requests_per_second, credits_per_second, method_credits, max_concurrency, request_timeout, max_retries, initial_backoff, max_backoff, max_response_bytes, providers)",
            "node.request_timeout: is a integer, not a string (put the value in double quotes)",
            "node.request_timeout: needs a unit (write a duration like \"15s\" or \"250ms\")",
            "node.max_backoff: \"soon\" is not a duration: expected number at 0 (write a duration like \"15s\" or \"250ms\")",
        ],
    );
}

fn check_database(url: &str, expected: Result<DatabaseUrl, &str>) {
    let dir = abi_dir();
    let text =
        format!("[node]\nurl = \"sim://\"\n[database]\nurl = \"{url}\"\n{TRANSFER_CONTRACT}");
    let actual = load_in(dir.path(), &text)
        .map(|config| config.database.url)
        .map_err(|errors| {
            errors
                .to_string()
                .replace(&dir.path().display().to_string(), "<dir>")
        });
    match expected {
        Ok(expected) => assert_eq!(actual, Ok(expected), "{url}"),
        Err(expected) => assert_eq!(actual, Err(expected.to_owned()), "{url}"),
    }
}

#[test]
fn parses_database_urls() {
    let sqlite = |path: &str| Ok(DatabaseUrl::Sqlite(PathBuf::from(path)));
    check_database("sqlite://logslice.db", sqlite("logslice.db"));
    check_database(
        "sqlite:///var/lib/logslice.db",
        sqlite("/var/lib/logslice.db"),
    );
    check_database("sqlite:data/x.db", sqlite("data/x.db"));
    check_database("sqlite::memory:", sqlite(":memory:"));
    let pg = |url: &str| {
        Ok(DatabaseUrl::Postgres(SecretUrl::new(
            url::Url::parse(url).unwrap(),
        )))
    };
    check_database("postgres://u@h/db", pg("postgres://u@h/db"));
    check_database("postgresql://u@h:5433/db", pg("postgresql://u@h:5433/db"));
    check_database(
        "postgres://u:${PGPASS}@h/db",
        pg(&format!("postgres://u:{PG_PASSWORD}@h/db")),
    );
    const FIX: &str =
        "(write sqlite://path/to/file.db, sqlite::memory: or postgres://user@host/db)";
    check_database(
        "mysql://root:hunter2@h/db",
        Err(&format!(
            "<dir>/config.toml:4: database.url: scheme \"mysql\" is not supported {FIX}"
        )),
    );
    check_database(
        "logslice.db",
        Err(&format!(
            "<dir>/config.toml:4: database.url: is not a database URL {FIX}"
        )),
    );
    check_database(
        "sqlite://",
        Err(&format!(
            "<dir>/config.toml:4: database.url: names no SQLite file {FIX}"
        )),
    );
}

#[test]
fn checks_the_database_schema() {
    check_ok(&format!("[node]\nurl = \"sim://\"\n[database]\nurl = \"postgres://u@h/db\"\nschema = \"idx_1\"\n{TRANSFER_CONTRACT}"));
    check_errors(
        &format!("[node]\nurl = \"sim://\"\n[database]\nurl = \"postgres://u@h/db\"\nschema = \"a; drop\"\n{TRANSFER_CONTRACT}"),
        &["<dir>/config.toml:5: database.schema: \"a; drop\" is not a plain identifier (use letters, digits and _, starting with a letter, at most 63 characters)"],
    );
    check_errors(
        &format!("[node]\nurl = \"sim://\"\n[database]\nurl = \"sqlite::memory:\"\nschema = \"idx\"\n{TRANSFER_CONTRACT}"),
        &["<dir>/config.toml:5: database.schema: only applies to Postgres (remove it, or use a postgres:// url)"],
    );
}

fn check_sync(sync_lines: &str, expected: Result<Finality, &[&str]>) {
    let dir = abi_dir();
    let text = config_text(&format!("[sync]\n{sync_lines}\n{TRANSFER_CONTRACT}"));
    let actual = load_in(dir.path(), &text)
        .map(|config| config.sync.finality)
        .map_err(|errors| {
            errors
                .0
                .iter()
                .map(|e| format!("{}: {} ({})", e.field, e.problem, e.fix))
                .collect::<Vec<_>>()
        });
    match expected {
        Ok(finality) => assert_eq!(actual, Ok(finality), "{sync_lines}"),
        Err(expected) => assert_eq!(
            actual,
            Err(expected.iter().map(|e| e.to_string()).collect()),
            "{sync_lines}"
        ),
    }
}

#[test]
fn parses_finality_and_checks_sync_limits() {
    check_sync("", Ok(Finality::Finalized));
    check_sync("finality = \"finalized\"", Ok(Finality::Finalized));
    check_sync("finality = 0", Ok(Finality::Confirmations(0)));
    check_sync("finality = 12", Ok(Finality::Confirmations(12)));
    check_sync("finality = \"64\"", Ok(Finality::Confirmations(64)));
    const FIX: &str = "(write \"finalized\" or a number of confirmations such as 12)";
    check_sync(
        "finality = \"safe\"",
        Err(&[&format!("sync.finality: \"safe\" is not a finality {FIX}")]),
    );
    check_sync(
        "finality = \"+5\"",
        Err(&[&format!("sync.finality: \"+5\" is not a finality {FIX}")]),
    );
    check_sync(
        "finality = -1",
        Err(&["sync.finality: -1 is negative (write a number of 0 or more)"]),
    );
    check_sync(
        "finality = true",
        Err(&[&format!("sync.finality: is a boolean {FIX}")]),
    );
    check_sync("finality = 128", Ok(Finality::Confirmations(128)));
    check_sync(
        "finality = 129",
        Err(&["sync.finality: 129 confirmations is more than sync.max_reorg_depth (128), the blocks whose hashes are kept to detect a reorg (raise sync.max_reorg_depth to at least 129, or lower finality)"]),
    );
    check_sync(
        "finality = 200\nmax_reorg_depth = 200",
        Ok(Finality::Confirmations(200)),
    );
    check_sync(
        "initial_block_range = 5000\nmax_block_range = 1000\nmax_batch_logs = 0\nmax_queued_batches = 0\npoll_interval = \"0ms\"\nstrict = \"yes\"",
        Err(&[
            "sync.initial_block_range: 5000 is above sync.max_block_range (1000) (make initial_block_range at most max_block_range)",
            "sync.max_batch_logs: 0 is below the minimum 1 (set it to 1 or more)",
            "sync.max_queued_batches: 0 is below the minimum 1 (set it to 1 or more)",
            "sync.poll_interval: \"0ms\" is zero (use a duration above zero)",
            "sync.strict: is a string, not a boolean (write true or false without quotes)",
        ]),
    );
}

fn contract(body: &str) -> String {
    config_text(&format!("[[contracts]]\n{body}\n"))
}

fn tables(config: &Config) -> Vec<(String, String)> {
    config
        .contracts
        .iter()
        .flat_map(|c| {
            c.events
                .iter()
                .map(|e| (e.table.clone(), e.event.signature()))
        })
        .collect()
}

fn check_tables(text: &str, expected: &[(&str, &str)]) {
    let config = check_ok(text);
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(t, s)| (t.to_string(), s.to_string()))
        .collect();
    assert_eq!(tables(&config), expected, "{text}");
}

#[test]
fn selects_events_from_abi_files_and_names_their_tables() {
    const ALL: &[(&str, &str)] = &[
        ("token_approval", "Approval(address,address,uint256)"),
        ("token_deposit", "Deposit(address,uint256)"),
        ("token_deposit_2", "Deposit(address,uint256,bytes)"),
        ("token_transfer", "Transfer(address,address,uint256)"),
    ];
    check_tables(
        &contract(&format!(
            "name = \"Token\"\naddress = \"{}\"\nabi = \"abis/erc20.json\"",
            "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"
        )),
        ALL,
    );
    check_tables(&contract("name = \"token\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nabi = \"abis/artifact.json\""), ALL);
    check_tables(
        &contract("name = \"token\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nabi = \"abis/erc20.json\"\nevents = [\"Deposit(address,uint256,bytes)\", \"Transfer\"]"),
        &[("token_deposit_2", "Deposit(address,uint256,bytes)"), ("token_transfer", "Transfer(address,address,uint256)")],
    );
    check_tables(
        &contract("name = \"token\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nabi = \"abis/erc20.json\"\nevents = [\"Deposit\"]"),
        &[("token_deposit", "Deposit(address,uint256)"), ("token_deposit_2", "Deposit(address,uint256,bytes)")],
    );
}

/// The topic0s that keep logs out of anonymous events' tables: every named event of the ABI, selected or
/// not; without an ABI, the named events written in `events`.
#[test]
fn knows_the_selectors_of_every_named_event_of_the_abi() {
    let selected = check_ok(&contract("name = \"token\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nabi = \"abis/erc20.json\"\nevents = [\"Transfer\"]"));
    let mut expected: Vec<alloy_primitives::B256> = [
        "Approval(address,address,uint256)",
        "Deposit(address,uint256)",
        "Deposit(address,uint256,bytes)",
        "Transfer(address,address,uint256)",
    ]
    .iter()
    .map(|signature| alloy_primitives::keccak256(signature.as_bytes()))
    .collect();
    expected.sort();
    assert_eq!(selected.contracts[0].named_selectors, expected);
    let inline = check_ok(&contract("name = \"c\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nevents = [\"event Sync(uint112 a, uint112 b)\", \"event Ping(uint256 indexed n) anonymous\"]"));
    assert_eq!(
        inline.contracts[0].named_selectors,
        [alloy_primitives::keccak256("Sync(uint112,uint112)")]
    );
}

#[test]
fn parses_inline_event_signatures() {
    check_tables(
        &contract(
            "name = \"pair\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nevents = [\n\"Swap(address indexed sender, uint amount0In, uint amount1In, uint amount0Out, uint amount1Out, address indexed to)\",\n\"event Sync(uint112 reserve0, uint112 reserve1)\",\n\"event Ping(uint256 indexed n) anonymous\",\n\"event Ping(uint256 indexed n, uint256 indexed m) anonymous\",\n]\nstart_block = 5",
        ),
        &[
            ("pair_swap", "Swap(address,uint256,uint256,uint256,uint256,address)"),
            ("pair_sync", "Sync(uint112,uint112)"),
            ("pair_ping", "Ping(uint256)"),
            ("pair_ping_2", "Ping(uint256,uint256)"),
        ],
    );
}

#[test]
fn rejects_bad_contracts() {
    const A: &str = "address = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"";
    const EV: &str =
        "events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]";
    check_errors(
        &config_text(&format!(
            "[[contracts]]\nname = \"9lives\"\n{A}\n{EV}\n\
             [[contracts]]\nname = \"a\"\naddress = \"0x12\"\n{EV}\n\
             [[contracts]]\nname = \"b\"\naddress = \"0xa0B86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\n{EV}\n\
             [[contracts]]\nname = \"c\"\naddresses = []\n{EV}\n\
             [[contracts]]\nname = \"d\"\n{A}\naddresses = [\"0xDAC17F958D2EE523A2206206994597C13D831EC7\"]\n{EV}\n\
             [[contracts]]\nname = \"e\"\n{A}\n\
             [[contracts]]\nname = \"A\"\n{A}\n{EV}\n"
        )),
        &[
            "<dir>/config.toml:8: contracts[0].name: \"9lives\" does not start with a letter in snake case (\"9lives\") (use a name like \"usdc\" or \"uniswap_v2_pair\")",
            "<dir>/config.toml:13: contracts[1].address: \"0x12\" is not a 20-byte address (write 0x and 40 hex digits)",
            "<dir>/config.toml:17: contracts[2].address: \"0xa0B86991c6218b36c1d19d4a2e9eb0ce3606eb48\" has mixed case but a wrong EIP-55 checksum (a typo?) (check the address; if it is right, write 0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48 or all lowercase)",
            "<dir>/config.toml:21: contracts[3].addresses: is empty (write address = \"0x...\" or addresses = [\"0x...\", ...])",
            "<dir>/config.toml:26: contracts[4].addresses: is given together with address (keep only one of them)",
            "<dir>/config.toml:28: contracts[5].abi: is missing, and so is events (give abi = \"path/to/abi.json\", or events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"])",
            "<dir>/config.toml:32: contracts[6].name: \"A\" is also the name of contracts[1] (give each contract its own name (names are compared in snake case))",
        ],
    );
}

#[test]
fn rejects_bad_abis_and_event_selections() {
    const A: &str = "address = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"";
    check_errors(
        &config_text(&format!(
            "[[contracts]]\nname = \"a\"\n{A}\nabi = \"abis/missing.json\"\n\
             [[contracts]]\nname = \"b\"\n{A}\nabi = \"abis/broken.json\"\n\
             [[contracts]]\nname = \"c\"\n{A}\nabi = \"abis/no_events.json\"\n\
             [[contracts]]\nname = \"d\"\n{A}\nabi = \"abis/erc20.json\"\nevents = [\"Transfer\", \"Tranfser\"]\n\
             [[contracts]]\nname = \"e\"\n{A}\nevents = [\"Transfer\", \"event Bad(uint256 indexed a, uint256 indexed b, uint256 indexed c, uint256 indexed d)\"]\n\
             [[contracts]]\nname = \"f\"\n{A}\nevents = []\n"
        )),
        &[
            "<dir>/config.toml:10: contracts[0].abi: cannot read \"abis/missing.json\" (<dir>/abis/missing.json): No such file or directory (os error 2) (check the path; it is relative to the config file's directory)",
            "<dir>/abis/broken.json: contracts[1].abi: is not a JSON ABI: expected value at line 2 column 10 (give a JSON array of ABI items, or a Hardhat/Foundry artifact with an \"abi\" field)",
            "<dir>/abis/no_events.json: contracts[2].abi: the ABI has no events (point abi at the contract that emits the events, or list events = [\"event ...\"])",
            "<dir>/config.toml:23: contracts[3].events[1]: \"Tranfser\" is not an event of <dir>/abis/erc20.json (use one of: Approval(address,address,uint256), Deposit(address,uint256), Deposit(address,uint256,bytes), Transfer(address,address,uint256))",
            "<dir>/config.toml:27: contracts[4].events[0]: \"Transfer\" is not an event signature: parser error: Transfer ^ expected `(` (write e.g. \"event Transfer(address indexed from, address indexed to, uint256 value)\" (or give abi to select events by name))",
            "<dir>/config.toml:27: contracts[4].events[1]: event Bad(uint256,uint256,uint256,uint256): invalid log topic list length: expected 4 topics, got 5 (fix the event's parameter types (at most 3 indexed, 4 if anonymous))",
            "<dir>/config.toml:31: contracts[5].events: is empty (remove it to index every event of the ABI, or list some)",
        ],
    );
}

#[test]
fn rejects_table_names_shared_by_two_contracts() {
    check_errors(
        &config_text(
            "[[contracts]]\nname = \"token_a\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nevents = [\"event Transfer(uint256 x)\"]\n\
             [[contracts]]\nname = \"token\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nevents = [\"event ATransfer(uint256 x)\"]\n",
        ),
        &["<dir>/config.toml:12: contracts[1].name: table token_a_transfer is also a table of contracts[0] (rename one of the contracts)"],
    );
}

#[test]
fn accepts_all_lower_and_all_upper_addresses() {
    for written in [
        "0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48",
        "0xA0B86991C6218B36C1D19D4A2E9EB0CE3606EB48",
        "0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48",
    ] {
        assert_eq!(
            contracts::parse_address(written),
            Ok(address!("a0b86991c6218b36c1d19d4a2e9eb0ce3606eb48")),
            "{written}"
        );
    }
}

/// Goal: no error, Display or Debug output shows the API key or the database password. Method: a config whose
/// URLs hold both (inline and through `${VAR}`) and that fails elsewhere, then every output scanned.
#[test]
fn never_prints_the_api_key_or_the_password() {
    let secrets = [
        API_KEY,
        PG_PASSWORD,
        "inline-pw-1234",
        "ANOTHER-SECRET-KEY-0987654321",
    ];
    let assert_clean = |output: &str| {
        for secret in secrets {
            assert!(!output.contains(secret), "{secret} leaked in:\n{output}");
        }
    };
    let failing = [
        // An unknown key elsewhere; the key interpolated into the URL.
        format!("[node]\nurl = \"https://node.example/v3/${{LOGSLICE_API_KEY}}\"\nmax_concurency = 1\n[database]\nurl = \"postgres://u:${{PGPASS}}@h/db\"\n{TRANSFER_CONTRACT}"),
        // Keys written inline, in URLs that fail.
        "[node]\nurl = \"ftp://node.example/v3/ANOTHER-SECRET-KEY-0987654321\"\nws_url = \"https://h/v3/ANOTHER-SECRET-KEY-0987654321\"\n[database]\nurl = \"mysql://u:inline-pw-1234@h/db\"\n".to_owned(),
        format!("[node]\nurl = \"https://node.example/v3/{API_KEY}\"\ntransport = \"http\"\nws_url = \"http://x/{API_KEY}\"\n[database]\nurl = \"postgres://u:inline-pw-1234@h/db\"\nschema = 1\n"),
        // A secret in a broken TOML line.
        format!("[node]\nurl = \"https://node.example/v3/{API_KEY}\n"),
        // A secret variable used where a number or duration goes.
        "[node]\nurl = \"sim://\"\nrequest_timeout = \"${PGPASS}\"\n[database]\nurl = \"sqlite::memory:\"\n[sync]\nfinality = \"${LOGSLICE_API_KEY}\"\n".to_owned(),
    ];
    for text in &failing {
        let errors = load_str(Path::new("config.toml"), text, &env).expect_err("the config fails");
        assert!(!errors.0.is_empty());
        assert_clean(&errors.to_string());
        assert_clean(&format!("{errors:?}"));
    }
    let config = load_str(
        Path::new("config.toml"),
        &format!("[node]\nurl = \"https://node.example/v3/${{LOGSLICE_API_KEY}}\"\ntransport = \"ws\"\n[database]\nurl = \"postgres://u:${{PGPASS}}@h/db?password=inline-pw-1234\"\n{TRANSFER_CONTRACT}"),
        &env,
    )
    .expect("valid");
    assert_clean(&format!("{config:?}"));
}

#[test]
fn loads_a_file_and_resolves_abi_paths_beside_it() {
    let dir = abi_dir();
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        config_text("[[contracts]]\nname = \"t\"\naddress = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"\nabi = \"abis/erc20.json\"\nevents = [\"Approval\"]\n"),
    )
    .unwrap();
    let config = load(&path).expect("valid");
    assert_eq!(config.source, path);
    assert_eq!(config.contracts[0].events[0].table, "t_approval");
    let missing = dir.path().join("nope.toml");
    let errors = load(&missing).expect_err("no such file");
    assert_eq!(errors.0.len(), 1);
    assert!(
        errors
            .to_string()
            .starts_with(&format!("{}: (file): cannot read it: ", missing.display())),
        "{errors}"
    );
}

#[test]
fn reads_the_metrics_section_with_its_default_stall() {
    let config = check_ok(&config_text(TRANSFER_CONTRACT));
    assert_eq!(config.metrics, None);
    let config = check_ok(&config_text(&format!(
        "[metrics]\naddr = \"127.0.0.1:9090\"\n{TRANSFER_CONTRACT}"
    )));
    assert_eq!(
        config.metrics,
        Some(MetricsConfig {
            addr: "127.0.0.1:9090".parse().unwrap(),
            max_stall: DEFAULT_MAX_STALL,
        })
    );
    let config = check_ok(&config_text(&format!(
        "[metrics]\naddr = \"[::1]:9100\"\nmax_stall = \"90s\"\n{TRANSFER_CONTRACT}"
    )));
    assert_eq!(
        config.metrics.map(|m| m.max_stall),
        Some(Duration::from_secs(90))
    );
}

#[test]
fn rejects_bad_metrics_settings() {
    check_errors(
        &config_text(&format!(
            "[metrics]\naddr = \"localhost\"\nmax_stal = \"1m\"\n{TRANSFER_CONTRACT}"
        )),
        &[
            "<dir>/config.toml:9: metrics.max_stal: unknown key \"max_stal\" (did you mean \"max_stall\"?)",
            "<dir>/config.toml:8: metrics.addr: \"localhost\" is not an IP address and port (write addr = \"127.0.0.1:9090\" (host:port), or remove the [metrics] section)",
        ],
    );
    check_errors(
        &config_text(&format!("[metrics]\nmax_stall = \"0s\"\n{TRANSFER_CONTRACT}")),
        &[
            "<dir>/config.toml:8: metrics.max_stall: \"0s\" is zero (use a duration above zero)",
            "<dir>/config.toml:7: metrics.addr: is missing (write addr = \"127.0.0.1:9090\" (host:port), or remove the [metrics] section)",
        ],
    );
}
