//! Anonymous events beside named events of the same topic count, end to end: the devnode's opt-in
//! `contracts::ANON` (`abis/anon.json`) emits named and anonymous events whose topic counts and data layouts
//! collide, and the database must still equal the ground truth.
//!
//! The rule under test: a log whose topic0 is the selector of a named event of the contract's ABI (configured
//! or not) never goes to an anonymous event's table; an anonymous event takes the other logs of its exact
//! shape (topic count, data exactly as long as its static parameters, data that decodes). The raw `logs`
//! table holds exactly the logs some configured event takes (see `support::expected_logs`).

use devnode::contracts;
use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{
    self, all_contracts, assert_db_matches_truth, node_config, Backend, Contract, Workdir,
};

/// The anon contract with every event of its ABI but `Memo`, a named event it emits that no table is for.
fn anon_contract() -> Contract {
    Contract {
        name: "anon",
        address: contracts::ANON,
        abi: "anon.json",
        events: &[
            "Tick", "Deposit", "Pause", "Move", "Trade", "Beat", "Skim", "Sweep",
        ],
        start_block: 0,
    }
}

/// Which named events' logs an anonymous event would take if it went by topic count and data alone.
const COLLISIONS: [(&str, &str, &[&str]); 3] = [
    ("anon_beat", "Beat", &[]),
    ("anon_skim", "Skim", &["Deposit", "Memo"]),
    ("anon_sweep", "Sweep", &["Trade"]),
];

/// Goal: an anonymous event's table holds the logs of that event only, never a named event's log of the same
/// topic count whose data happens to decode, whether that named event is configured (`Deposit`, `Trade`) or
/// only present in the ABI (`Memo`); every other table and the raw `logs` stay exact. Method: the example
/// contracts plus the anon contract on one chain, synced to a block, then each anonymous table's row count
/// against the node's count of that event (the clearest message), then every raw and typed row against the
/// ground truth.
async fn anonymous_tables_hold_only_their_own_events_logs(backend: Backend) {
    let mut config = node_config(12_000);
    config.chain.anon_contract = true;
    let node = support::start(config).await;
    let truth = node.truth();
    let target = 11_000;
    let mut contracts = all_contracts();
    contracts.push(anon_contract());

    // The chain holds every collision the test is about, and the raw expectation covers the unselected event.
    let logs = truth.logs(0, target);
    let n_emitted = |event: &str| {
        logs.iter()
            .filter(|log| log.address == contracts::ANON && log.event == event)
            .count()
    };
    for event in [
        "Tick", "Deposit", "Pause", "Memo", "Move", "Trade", "Beat", "Skim", "Sweep",
    ] {
        assert!(n_emitted(event) > 50, "{event}: {} logs", n_emitted(event));
    }
    let expected = support::expected_logs(&truth, &contracts, target);
    assert!(
        !expected.iter().any(|(log, _)| log.event == "Memo"),
        "Memo logs have Skim's shape, but Memo's topic0 (from the ABI): no configured event takes them, so \
         they are not stored raw"
    );

    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &contracts, "", "");
    let report = support::sync(&path, Target::Number(target))
        .await
        .expect("sync succeeds");
    assert_eq!(report.target, target);

    assert_eq!(
        support::row_count(&work, "anon_memo").await,
        None,
        "an event left out of the config has no table"
    );
    for (table, event, named) in COLLISIONS {
        let rows = support::row_count(&work, table).await;
        assert_eq!(
            rows,
            Some(n_emitted(event) as i64),
            "{table} must hold the node's {} {event} logs only; a named event's log of the same topic count \
             ({named:?}, whose topic0 is its selector) must not be in it",
            n_emitted(event)
        );
    }
    assert_db_matches_truth(&work, &truth, &contracts, target).await;
}
both_backends!(anonymous_tables_hold_only_their_own_events_logs);

/// The anon contract's ABI without `Memo` and `Skim`, with an anonymous `Short` of Skim's topic count and one
/// word of data (Memo's and Skim's logs carry two): written to `dir`, its path.
fn narrow_abi(dir: &std::path::Path) -> &'static str {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("abis/anon.json");
    let text = std::fs::read_to_string(path).expect("abis/anon.json");
    let mut abi: Vec<serde_json::Value> = serde_json::from_str(&text).expect("JSON");
    abi.retain(|event| !["Memo", "Skim"].contains(&event["name"].as_str().unwrap_or("")));
    abi.push(serde_json::json!({
        "type": "event", "name": "Short", "anonymous": true, "inputs": [
            {"name": "tag", "type": "bytes32", "indexed": true},
            {"name": "to", "type": "address", "indexed": true},
            {"name": "amount", "type": "uint256", "indexed": false},
        ],
    }));
    let path = dir.join("anon_narrow.json");
    std::fs::write(&path, serde_json::to_string(&abi).expect("JSON")).expect("write the ABI");
    // `Contract::abi` names a file under `abis/` or, as here, an absolute path; the test's contract list
    // needs it for the whole test, so the path is leaked (a few bytes, once).
    Box::leak(path.display().to_string().into_boxed_str())
}

/// Goal: an anonymous event takes no log with data bytes over its parameters, so neither its table nor the
/// raw `logs` gets the logs of events the ABI leaves out that merely share its topic count. Method: the anon
/// contract configured with an ABI lacking `Memo` and `Skim` (whose logs have two topics and two words of
/// data) but with an anonymous `Short` of two topics and one word; synced, `Short`'s table must be empty and
/// every raw and typed row must equal the ground truth, which stores no `Memo` or `Skim` log.
async fn an_anonymous_event_takes_no_log_with_bytes_over_its_parameters(backend: Backend) {
    let mut config = node_config(6_000);
    config.chain.anon_contract = true;
    let node = support::start(config).await;
    let truth = node.truth();
    let target = 5_000;
    let work = Workdir::with(backend).await;
    let contracts = vec![Contract {
        name: "anon",
        address: contracts::ANON,
        abi: narrow_abi(work.dir.path()),
        events: &[],
        start_block: 0,
    }];
    let logs = truth.logs(0, target);
    for event in ["Memo", "Skim"] {
        let n = logs
            .iter()
            .filter(|log| log.address == contracts::ANON && log.event == event)
            .count();
        assert!(n > 20, "{event}: {n} logs");
    }
    let expected = support::expected_logs(&truth, &contracts, target);
    assert!(!expected
        .iter()
        .any(|(log, _)| ["Memo", "Skim"].contains(&log.event)));

    let path = work.write_config(&node.http_url(), &contracts, "", "");
    support::sync(&path, Target::Number(target))
        .await
        .expect("sync succeeds");
    assert_eq!(
        support::row_count(&work, "anon_short").await,
        Some(0),
        "Short takes no Memo or Skim log: their data has a word over Short's one"
    );
    let n = assert_db_matches_truth(&work, &truth, &contracts, target).await;
    assert!(n > 100, "only {n} logs compared");
}
both_backends!(an_anonymous_event_takes_no_log_with_bytes_over_its_parameters);
