//! Where errors point: each error names the line of the value (or key, or table) it is about, several
//! errors are reported together, and a type error hides nothing else. Also the anonymous-event tie rule,
//! and `docs/config.md` against the keys the serde types declare.

use std::path::Path;

use super::{load_str, raw};

/// Loads `lines` joined by newlines (so line N of the config is `lines[N - 1]`) and compares every error.
fn check_errors(lines: &[&str], expected: &[&str]) {
    let text = lines.join("\n");
    let errors = match load_str(Path::new("config.toml"), &text, &|_| None) {
        Ok(_) => panic!("expected errors, the config loaded:\n{text}"),
        Err(errors) => errors.0,
    };
    let actual: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(actual, expected, "\n--- config:\n{text}");
}

const NODE_AND_DATABASE: [&str; 4] = [
    "[node]",
    "url = \"sim://\"",
    "[database]",
    "url = \"sqlite::memory:\"",
];

#[test]
fn each_error_names_the_line_of_its_value() {
    check_errors(
        &[
            "[node]",
            "url = \"sim://\"",
            "max_concurrency = 0",
            "",
            "[database]",
            "url = \"sqlite::memory:\"",
            "",
            "[sync]",
            "poll_interval = \"0s\"",
            "",
            "[[contracts]]",
            "name = \"usdc\"",
            "address = \"0x12\"",
            "events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]",
        ],
        &[
            "config.toml:3: node.max_concurrency: 0 is below the minimum 1 (set it to 1 or more)",
            "config.toml:9: sync.poll_interval: \"0s\" is zero (use a duration above zero)",
            "config.toml:13: contracts[0].address: \"0x12\" is not a 20-byte address (write 0x and 40 hex digits)",
        ],
    );
}

/// Unknown keys come first, in file order, each at its own line, however deep its table.
#[test]
fn unknown_keys_in_nested_tables_are_reported_at_their_line() {
    let mut lines = NODE_AND_DATABASE.to_vec();
    lines.extend([
        "[[contracts]]",
        "name = \"f\"",
        "address = \"0x5c69bee701ef814a2b6a3edd4b1652cb9cc5aa6f\"",
        "events = [\"event PairCreated(address indexed token0, address indexed token1, address pair, uint256 index)\"]",
        "[[contracts]]",
        "name = \"pair\"",
        "events = [\"event Sync(uint112 reserve0, uint112 reserve1)\"]",
        "factory = { contract = \"f\", event = \"PairCreated\", paramter = \"pair\" }",
        "strat_block = 5",
        "[metrics]",
        "addr = \"127.0.0.1:9090\"",
        "max_stal = \"1m\"",
    ]);
    check_errors(
        &lines,
        &[
            "config.toml:12: contracts[1].factory.paramter: unknown key \"paramter\" (did you mean \"parameter\"?)",
            "config.toml:13: contracts[1].strat_block: unknown key \"strat_block\" (did you mean \"start_block\"?)",
            "config.toml:16: metrics.max_stal: unknown key \"max_stal\" (did you mean \"max_stall\"?)",
            "config.toml:12: contracts[1].factory.parameter: is missing (write parameter = \"pair\")",
        ],
    );
}

/// A value of the wrong type is one error among the others: the rest of the file is still checked.
#[test]
fn a_type_error_hides_no_other_error() {
    check_errors(
        &[
            "[node]",
            "url = \"sim://\"",
            "max_concurrency = \"8\"",
            "max_retries = -1",
            "request_timeout = 15",
            "[database]",
            "url = 5",
            "[[contracts]]",
            "name = \"usdc\"",
            "address = 1",
            "events = \"Transfer\"",
        ],
        &[
            "config.toml:3: node.max_concurrency: is a string, not an integer (write a whole number without quotes)",
            "config.toml:5: node.request_timeout: is a integer, not a string (put the value in double quotes)",
            "config.toml:5: node.request_timeout: needs a unit (write a duration like \"15s\" or \"250ms\")",
            "config.toml:4: node.max_retries: -1 is negative (write a number of 0 or more)",
            "config.toml:7: database.url: is a integer, not a string (put the value in double quotes)",
            "config.toml:10: contracts[0].address: is a integer, not a string (write address = \"0x...\" or addresses = [\"0x...\", ...])",
            "config.toml:11: contracts[0].events: is a string, not an array (write events = [\"...\"])",
        ],
    );
}

/// A key that is missing is reported at the header of the table that lacks it; a missing section has no line.
#[test]
fn missing_keys_are_reported_at_their_tables_header() {
    check_errors(
        &["[node]", "transport = \"ws\"", "", "[[contracts]]", "name = \"a\""],
        &[
            "config.toml:1: node.url: is missing (write sim://, https://host/path or wss://host/path)",
            "config.toml: database: is missing (add a [database] section with url = \"sqlite://logslice.db\")",
            "config.toml: database.url: is missing (write url = \"sqlite://logslice.db\" or \"postgres://user@host/db\")",
            "config.toml:4: contracts[0].address: is missing (write address = \"0x...\" or addresses = [\"0x...\", ...])",
            "config.toml:4: contracts[0].abi: is missing, and so is events (give abi = \"path/to/abi.json\", or events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"])",
        ],
    );
}

#[test]
fn a_table_written_as_a_value_is_one_error() {
    check_errors(
        &["node = \"sim://\"", "contracts = 3", "[database]", "url = \"sqlite::memory:\""],
        &[
            "config.toml:1: node: is a string, not a table (write it as a [node] section)",
            "config.toml: node.url: is missing (write sim://, https://host/path or wss://host/path)",
            "config.toml:2: contracts: is a integer, not an array of tables (add a [[contracts]] section with name, address, and abi or events)",
        ],
    );
}

const TIE: &str = "contract c: the anonymous events A(uint256) and B(address,uint256) both have 1 topic(s), so a log cannot be told to be one or the other (index only one of them (select events = [...] without the other), or give them different numbers of indexed parameters)";

/// Goal: two anonymous events that a log cannot tell apart (no selector topic, the same topic count) are
/// refused at config time, inline or from an ABI; differing counts, or selecting one of them, are fine.
#[test]
fn refuses_two_anonymous_events_of_one_topic_count() {
    let contract = |events: &str, abi: &str| {
        let mut lines = NODE_AND_DATABASE.to_vec();
        lines.extend([
            "[[contracts]]",
            "name = \"c\"",
            "address = \"0x5c69bee701ef814a2b6a3edd4b1652cb9cc5aa6f\"",
            events,
            abi,
        ]);
        lines.join("\n")
    };
    let a = "event A(uint256 indexed x) anonymous";
    let b = "event B(address indexed y, uint256 z) anonymous";
    check_errors(
        &[&contract(&format!("events = [\"{a}\", \"{b}\"]"), "")],
        &[&format!("config.toml:8: contracts[0].events[1]: {TIE}")],
    );
    let dir = tempfile::tempdir().unwrap();
    let abi = r#"[
      {"type":"event","name":"A","anonymous":true,"inputs":[{"name":"x","type":"uint256","indexed":true}]},
      {"type":"event","name":"B","anonymous":true,"inputs":[{"name":"y","type":"address","indexed":true},{"name":"z","type":"uint256","indexed":false}]}
    ]"#;
    std::fs::write(dir.path().join("tie.json"), abi).unwrap();
    let path = dir.path().join("config.toml");
    let errors = load_str(&path, &contract("", "abi = \"tie.json\""), &|_| None)
        .expect_err("a tie is refused")
        .0;
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [format!("{}:9: contracts[0].abi: {TIE}", path.display())]
    );
    let selected = load_str(
        &path,
        &contract("events = [\"A\"]", "abi = \"tie.json\""),
        &|_| None,
    );
    assert!(selected.is_ok(), "{selected:?}");
    let c = "event C(uint256 indexed x, uint256 indexed y) anonymous";
    let differing = contract(&format!("events = [\"{a}\", \"{c}\"]"), "");
    let differing = load_str(Path::new("config.toml"), &differing, &|_| None);
    assert!(differing.is_ok(), "{differing:?}");
}

/// Goal: docs/config.md lists every key the serde types accept. Method: for each table of
/// `raw::sections()`, find its heading in the doc and a `| \`key\` |` row under it.
#[test]
fn docs_config_md_lists_every_declared_key() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/config.md"))
        .expect("docs/config.md");
    let part = |heading: &str| -> String {
        let start = doc
            .find(heading)
            .unwrap_or_else(|| panic!("docs/config.md has no heading {heading:?}"));
        let rest = &doc[start + heading.len()..];
        let end = rest.find("\n#").unwrap_or(rest.len());
        rest[..end].to_owned()
    };
    for (section, keys) in raw::sections() {
        for key in keys {
            match section {
                // The file's own keys are its sections.
                "" => assert!(
                    doc.contains(&format!("## `[{key}]`"))
                        || doc.contains(&format!("## `[[{key}]]`")),
                    "docs/config.md has no section for [{key}]"
                ),
                _ => {
                    let heading = match section {
                        "node.providers[]" => "### `[[node.providers]]`".to_owned(),
                        // A chain's providers take the keys of `[[node.providers]]`.
                        "chains.*.providers[]" => "### `[[node.providers]]`".to_owned(),
                        "chains.*" => "## `[chains.NAME]`".to_owned(),
                        "contracts[]" => "## `[[contracts]]`".to_owned(),
                        "contracts[].factory" => "### `factory`".to_owned(),
                        other => format!("## `[{other}]`"),
                    };
                    assert!(
                        part(&heading).contains(&format!("| `{key}` |")),
                        "docs/config.md lists no `{key}` under {heading}"
                    );
                }
            }
        }
    }
}
