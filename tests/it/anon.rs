//! Anonymous events beside named events of the same topic count, end to end: the devnode's opt-in
//! `contracts::ANON` (`abis/anon.json`) emits named and anonymous events whose topic counts and data layouts
//! collide, and the database must still equal the ground truth.
//!
//! The rule under test: a log whose topic0 is the selector of a named event of the contract's ABI (configured
//! or not) never goes to an anonymous event's table; an anonymous event takes the other logs of its exact topic
//! count whose data decodes. Raw rows keep their meaning: a log is stored raw when any configured event
//! matches it (an anonymous one by topic count alone), see `support::expected_logs`.

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
        expected.iter().any(|(log, _)| log.event == "Memo"),
        "Memo logs match the anonymous Skim by topic count, so they are stored raw"
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
