//! Argument filters (issue 22 §3) end to end: `filters = { Event = { param = [values] } }` on address, uint8,
//! bytes32 and (hashed) string parameters, OR lists and AND across parameters, beside an unfiltered contract
//! and an unfiltered event of a filtered contract, on SQLite and Postgres, also under a low result cap with
//! faults; bad filters are exit 78 naming the field; a changed filter on an existing database is refused
//! naming `--reindex`, which then rebuilds the contract.
//!
//! The expected rows are the ground truth's logs filtered here by the values the node *encoded*
//! (`TruthLog::values`), never by topics: the topic encoding under test is not used to compute what it
//! must produce.

use std::collections::BTreeSet;
use std::path::PathBuf;

use alloy_dyn_abi::DynSolValue;
use alloy_primitives::{Address, B256};
use devnode::{contracts, GroundTruth, TruthLog};
use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{self, node_config, run, Backend, Contract, Workdir};

/// The values the filters of a run keep.
struct Wanted {
    /// `token_a` Transfer `to` (one of them).
    a_to: Vec<Address>,
    /// `token_b` Transfer `from` (one of them) and `to` (one of them).
    b_from: Vec<Address>,
    b_to: Vec<Address>,
    /// `misc` Batch `kind`.
    kinds: Vec<u64>,
    /// `misc` Note `topic` (an indexed string: its hash is the topic).
    note_topics: Vec<&'static str>,
    /// `misc` Order `orderId` (bytes32).
    order_ids: Vec<B256>,
}

fn address_of(value: &DynSolValue) -> Address {
    value.as_address().expect("an address value")
}

/// Every `step`-th of the distinct values of parameter `param_idx` of `event` at `address` (sorted).
fn every<T: Ord + Clone>(
    logs: &[TruthLog],
    address: Address,
    event: &str,
    step: usize,
    value: impl Fn(&TruthLog) -> T,
) -> Vec<T> {
    let all: BTreeSet<T> = logs
        .iter()
        .filter(|log| log.address == address && log.event == event)
        .map(value)
        .collect();
    all.into_iter().step_by(step).collect()
}

impl Wanted {
    /// Filters that keep a fraction of each event's logs: `step` picks how many of the chain's users.
    fn choose(truth: &GroundTruth, to: u64, step: usize) -> Self {
        let logs = truth.logs(0, to);
        let order_ids: Vec<B256> = every(&logs, contracts::MISC, "Order", 1, |log| {
            B256::from_slice(&log.values[0].as_fixed_bytes().expect("bytes32").0[..32])
        })
        .into_iter()
        .take(5)
        .collect();
        Self {
            a_to: every(&logs, contracts::TOKEN_A, "Transfer", step, |log| {
                address_of(&log.values[1])
            }),
            b_from: every(&logs, contracts::TOKEN_B, "Transfer", 2, |log| {
                address_of(&log.values[0])
            }),
            b_to: every(&logs, contracts::TOKEN_B, "Transfer", step / 2, |log| {
                address_of(&log.values[1])
            }),
            kinds: vec![1, 3],
            note_topics: vec!["gm", "déjà vu 🦀"],
            order_ids,
        }
    }

    /// Whether the filters keep `log` (a log of an unfiltered event is kept).
    fn keeps(&self, log: &TruthLog) -> bool {
        let uint = |value: &DynSolValue| {
            let (n, _) = value.as_uint().expect("a uint value");
            u64::try_from(n).expect("small")
        };
        match (log.address, log.event) {
            (a, "Transfer") if a == contracts::TOKEN_A => {
                self.a_to.contains(&address_of(&log.values[1]))
            }
            (a, "Transfer") if a == contracts::TOKEN_B => {
                self.b_from.contains(&address_of(&log.values[0]))
                    && self.b_to.contains(&address_of(&log.values[1]))
            }
            (a, "Batch") if a == contracts::MISC => self.kinds.contains(&uint(&log.values[0])),
            (a, "Note") if a == contracts::MISC => self
                .note_topics
                .contains(&log.values[1].as_str().expect("a string")),
            (a, "Order") if a == contracts::MISC => {
                let id =
                    B256::from_slice(&log.values[0].as_fixed_bytes().expect("bytes32").0[..32]);
                self.order_ids.contains(&id)
            }
            _ => true,
        }
    }

    /// `(contract name, filters = ...)` as config.toml lines, values written in several accepted forms.
    fn toml(&self) -> Vec<(&'static str, String)> {
        let quoted = |items: Vec<String>| items.join(", ");
        let addresses =
            |list: &[Address]| quoted(list.iter().map(|a| format!("\"{a:#x}\"")).collect());
        vec![
            (
                "token_a",
                format!("{{ Transfer = {{ to = [{}] }} }}", addresses(&self.a_to)),
            ),
            (
                "token_b",
                format!(
                    "{{ Transfer = {{ from = [{}], to = [{}] }} }}",
                    addresses(&self.b_from),
                    addresses(&self.b_to)
                ),
            ),
            (
                "misc",
                format!(
                    "{{ Batch = {{ kind = [{}, \"0x{:x}\"] }}, Note = {{ topic = [{}] }}, Order = {{ orderId = [{}] }} }}",
                    self.kinds[0],
                    self.kinds[1],
                    quoted(self.note_topics.iter().map(|t| format!("\"{t}\"")).collect()),
                    quoted(self.order_ids.iter().map(|id| format!("\"{id}\"")).collect()),
                ),
            ),
        ]
    }
}

/// token_a (Transfer filtered, Approval not), token_b (Transfer, filtered on two parameters), the pair
/// (unfiltered) and misc (Note, Batch, Order, each filtered; no anonymous Ping).
fn filtered_contracts() -> Vec<Contract> {
    let mut contracts = support::all_contracts();
    contracts[3].events = &["Note", "Batch", "Order"];
    contracts
}

/// Writes the test's config with `filters` lines added to the named contracts.
fn write_config(
    work: &Workdir,
    url: &str,
    filters: &[(&'static str, String)],
    sync_extra: &str,
) -> PathBuf {
    let path = work.write_config(url, &filtered_contracts(), "", sync_extra);
    let mut text = std::fs::read_to_string(&path).expect("config");
    for (name, filter) in filters {
        let line = format!("name = \"{name}\"\n");
        assert!(text.contains(&line), "{name} is configured");
        text = text.replace(&line, &format!("{line}filters = {filter}\n"));
    }
    std::fs::write(&path, text).expect("write config");
    path
}

/// The ground truth's logs the database must hold under `wanted`.
fn expected(truth: &GroundTruth, wanted: &Wanted, to: u64) -> Vec<(TruthLog, Vec<&'static str>)> {
    let mut expected = support::expected_logs(truth, &filtered_contracts(), to);
    expected.retain(|(log, _)| wanted.keeps(log));
    expected
}

/// Asserts each filtered event keeps some of its logs and drops some, so the comparison means something.
fn assert_filters_bite(truth: &GroundTruth, wanted: &Wanted, to: u64) {
    let logs = truth.logs(0, to);
    for (address, event) in [
        (contracts::TOKEN_A, "Transfer"),
        (contracts::TOKEN_B, "Transfer"),
        (contracts::MISC, "Batch"),
        (contracts::MISC, "Note"),
        (contracts::MISC, "Order"),
    ] {
        let of_event: Vec<&TruthLog> = logs
            .iter()
            .filter(|l| l.address == address && l.event == event)
            .collect();
        let kept = of_event.iter().filter(|l| wanted.keeps(l)).count();
        assert!(
            kept > 0 && kept < of_event.len(),
            "{event} of {address}: {kept} of {} kept",
            of_event.len()
        );
    }
}

/// Goal: with filters on address, uint8, bytes32 and string parameters (OR lists, AND across two
/// parameters), an unfiltered contract and an unfiltered event of a filtered contract in the same run, every
/// table equals the ground truth filtered alike, and the node served only what was asked for (filtered by
/// the node, not here). Method: sync a 20,000-block chain, compare every raw and typed row.
async fn filtered_tables_equal_the_ground_truth_filtered_alike(backend: Backend) {
    let node = support::start(node_config(20_000)).await;
    let truth = node.truth();
    let target = 19_000;
    let wanted = Wanted::choose(&truth, target, 8);
    assert_filters_bite(&truth, &wanted, target);
    let work = Workdir::with(backend).await;
    let path = write_config(&work, &node.http_url(), &wanted.toml(), "");
    support::sync(&path, Target::Number(target))
        .await
        .expect("sync succeeds");
    let n = support::assert_db_holds(
        &work,
        &truth,
        &filtered_contracts(),
        expected(&truth, &wanted, target),
    )
    .await;
    let unfiltered = support::expected_logs(&truth, &filtered_contracts(), target).len();
    assert!(n > 1_000 && n < unfiltered * 2 / 3, "{n} of {unfiltered}");
    // The node filtered: it served what is stored plus a few percent of survey probes, far below what an
    // unfiltered fetch would have carried.
    let served = node.stats().logs_served;
    assert!(
        served >= n as u64 && served <= n as u64 + n as u64 / 5,
        "served {served} logs for {n} stored ({unfiltered} unfiltered): {}",
        node.stats().summary()
    );
    for contract in filtered_contracts() {
        assert_eq!(
            support::checkpoint(&work, contract.name).await,
            Some(target as i64)
        );
    }
}
both_backends!(filtered_tables_equal_the_ground_truth_filtered_alike);

/// Goal: filter groups split and retry like any request: with a result cap far below the range target and
/// transient faults (429, 5xx, dropped connections), the database still equals the filtered ground truth.
/// Method: cap 1,000 results, 5% of each fault, sync, compare every row; the node must have refused ranges.
async fn filtered_sync_under_a_low_cap_and_faults_is_exact(backend: Backend) {
    let mut config = node_config(15_000);
    config.limits.max_results = 1_000;
    config.faults.http_429 = 0.05;
    config.faults.retry_after_secs = 0;
    config.faults.http_5xx = 0.05;
    config.faults.drop = 0.05;
    let node = support::start(config).await;
    let truth = node.truth();
    let target = 14_000;
    assert!(
        truth.next_huge_block(0) > target,
        "no block is over the cap for one address and topic0"
    );
    let wanted = Wanted::choose(&truth, target, 4);
    let work = Workdir::with(backend).await;
    let path = write_config(&work, &node.http_url(), &wanted.toml(), "");
    let report = support::sync(&path, Target::Number(target))
        .await
        .expect("sync succeeds under the cap and faults");
    assert!(report.retries > 0, "faults were met and retried");
    let stats = node.stats();
    assert!(
        stats.methods["eth_getLogs"].errors.values().sum::<u64>() > 0,
        "the cap was hit: {}",
        stats.summary()
    );
    support::assert_db_holds(
        &work,
        &truth,
        &filtered_contracts(),
        expected(&truth, &wanted, target),
    )
    .await;
}
both_backends!(filtered_sync_under_a_low_cap_and_faults_is_exact);

/// Goal: each kind of bad filter stops the binary with exit 78 and a message naming the file, the field
/// and the fix, before any node or database is touched. Method: one config per bad case, `sync`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_filters_exit_78_naming_the_field_and_the_fix() {
    let cases: [(&str, &str, &str, &str); 6] = [
        (
            "token_a",
            "{ Transfer = { value = [1] } }",
            "contracts[0].filters.Transfer.value: \"value\" of Transfer(address,address,uint256) is not indexed",
            "filter by an indexed parameter (from, to)",
        ),
        (
            "token_a",
            "{ Swap = { to = [\"0x0000000000000000000000000000000000000001\"] } }",
            "contracts[0].filters.Swap: \"Swap\" is not an event this contract indexes",
            "filter one of: Approval, Transfer",
        ),
        (
            "token_a",
            "{ Transfer = { owner = [\"0x0000000000000000000000000000000000000001\"] } }",
            "contracts[0].filters.Transfer.owner: Transfer(address,address,uint256) has no parameter \"owner\"",
            "filter by an indexed parameter (from, to)",
        ),
        (
            "token_b",
            "{ Transfer = { to = [\"0x0000000000000000000000000000000000000001\", \"0x1234\"] } }",
            "contracts[1].filters.Transfer.to[1]: \"0x1234\" is not a 20-byte address",
            "write 0x and 40 hex digits",
        ),
        (
            "misc",
            "{ Batch = { kind = [256] } }",
            "contracts[3].filters.Batch.kind[0]: 256 does not fit in uint8",
            "write a whole number from 0 to 255",
        ),
        (
            "misc",
            "{ Order = { orderId = [\"0x12\"] } }",
            "contracts[3].filters.Order.orderId[0]: \"0x12\" is not a bytes32 value",
            "write 0x and 64 hex digits",
        ),
    ];
    for (contract, filter, field, fix) in cases {
        let work = Workdir::new();
        let path = write_config(
            &work,
            "sim://?blocks=100",
            &[(contract, filter.to_owned())],
            "",
        );
        let refused = run(&["sync", "--to", "10"], &path).await;
        assert_eq!(refused.code, Some(78), "{filter}: {}", refused.stderr);
        let file = path.display().to_string();
        // `<file>:<line>: <field>`.
        let located = refused
            .stderr
            .split(&format!("{file}:"))
            .skip(1)
            .any(|rest| {
                let n_digits = rest.chars().take_while(char::is_ascii_digit).count();
                n_digits > 0 && rest[n_digits..].starts_with(&format!(": {field}"))
            });
        assert!(
            located && refused.stderr.contains(fix),
            "{filter}: the message names {file}, a line, {field} and the fix: {}",
            refused.stderr
        );
        assert!(!work.db().exists(), "{filter}: no database was created");
    }
}

/// Goal: changing a contract's filters on a database that holds its rows is refused (never a silent gap),
/// naming `--reindex`; `sync --reindex` then rebuilds that contract under the new filters, and removing the
/// filters is refused the same way. Method: the binary, on both backends, comparing every row after the
/// rebuild.
async fn changed_filters_are_refused_until_reindexed(backend: Backend) {
    let node = support::start(node_config(6_000)).await;
    let truth = node.truth();
    let target = 5_000;
    let work = Workdir::with(backend).await;
    let first = Wanted::choose(&truth, target, 8);
    let path = write_config(&work, &node.http_url(), &first.toml(), "");
    let synced = run(&["sync", "--to", "5000"], &path).await;
    assert_eq!(synced.code, Some(0), "{}", synced.stderr);

    // The same filters written otherwise (`0X` for `0x`) are no change.
    let mut same = first.toml();
    same[0].1 = same[0].1.replace("0x", "0X");
    let path = write_config(&work, &node.http_url(), &same, "");
    let again = run(&["sync", "--to", "5000"], &path).await;
    assert_eq!(again.code, Some(0), "{}", again.stderr);

    let mut second = Wanted::choose(&truth, target, 8);
    second.a_to = Wanted::choose(&truth, target, 5).a_to;
    let path = write_config(&work, &node.http_url(), &second.toml(), "");
    let refused = run(&["sync", "--to", "5000"], &path).await;
    assert_eq!(refused.code, Some(78), "{}", refused.stderr);
    assert!(
        refused
            .stderr
            .contains("contract token_a was indexed with filters")
            && refused
                .stderr
                .contains("logslice sync --reindex token_a --to"),
        "{}",
        refused.stderr
    );
    let unfiltered = write_config(&work, &node.http_url(), &second.toml()[1..], "");
    let refused = run(&["sync", "--to", "5000"], &unfiltered).await;
    assert_eq!(refused.code, Some(78), "{}", refused.stderr);
    assert!(
        refused.stderr.contains("the config now says none")
            && refused.stderr.contains("--reindex token_a"),
        "{}",
        refused.stderr
    );

    let path = write_config(&work, &node.http_url(), &second.toml(), "");
    let rebuilt = run(&["sync", "--to", "5000", "--reindex", "token_a"], &path).await;
    assert_eq!(rebuilt.code, Some(0), "{}", rebuilt.stderr);
    support::assert_db_holds(
        &work,
        &truth,
        &filtered_contracts(),
        expected(&truth, &second, target),
    )
    .await;
}
both_backends!(changed_filters_are_refused_until_reindexed);
