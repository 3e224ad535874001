//! The planner's requests as a snapshot: per chain shape, one table of the requests, surveys and refusals a
//! backfill takes on each seed, against a node that suggests no range (the spec's) and one that does
//! (Infura, Alchemy, reth), beside the fewest requests the cap allows. The tables are committed in
//! `src/fetch/simulation/snapshots/`; a planner change that moves any number fails here with the rows that moved, and
//! is accepted by writing the new tables (`LOGSLICE_BLESS=1`) and committing their diff. docs/planner.md says
//! how to read them and when a change is worth keeping.

use std::fmt::Write as _;

use super::{backfill, Node};

/// The seeds of every table: several, so a change that gains on one chain and loses on others shows it.
const SEEDS: [u64; 5] = [1, 2, 3, 4, 7];

/// Set to rewrite the snapshots from what the planner does now instead of comparing with them.
const BLESS_ENV: &str = "LOGSLICE_BLESS";

/// The table of one chain shape: a row per node and seed, then each node's total.
fn table(preset: &str, density: Option<f64>) -> String {
    let shape = match density {
        Some(density) => format!("{preset} at density {density}"),
        None => preset.to_owned(),
    };
    let mut out = format!(
        "# eth_getLogs requests of a backfill of the `{shape}` chain (fetch::simulation)\n\
         # regenerate: {BLESS_ENV}=1 cargo nextest run -p logslice -E 'test(/snapshot/)'\n\
         node        seed  requests  surveys  refused  refused_logs  fewest  ratio\n"
    );
    for (node, name) in [(Node::Plain, "plain"), (Node::Suggesting, "suggesting")] {
        let mut all = [0; 5];
        for seed in SEEDS {
            let (tally, bound) = backfill(preset, seed, density, node);
            let numbers = [
                tally.requests,
                tally.surveys,
                tally.refused,
                tally.refused_logs,
                bound,
            ];
            row(&mut out, name, &seed.to_string(), numbers);
            for (sum, n) in all.iter_mut().zip(numbers) {
                *sum += n;
            }
        }
        row(&mut out, name, "all", all);
    }
    out
}

/// One row: requests, surveys (part of the requests), refused requests, the logs those asked for (what a
/// node that counts before refusing reads for nothing), the fewest requests, and requests / fewest.
fn row(out: &mut String, node: &str, seed: &str, numbers: [u64; 5]) {
    let [requests, surveys, refused, refused_logs, fewest] = numbers;
    let ratio = requests as f64 / fewest.max(1) as f64;
    writeln!(
        out,
        "{node:<10} {seed:>5} {requests:>9} {surveys:>8} {refused:>8} {refused_logs:>13} {fewest:>7} {ratio:>6.3}"
    )
    .expect("a String takes every write");
}

/// Compares the table of a chain shape with its committed snapshot `src/fetch/simulation/snapshots/<name>.txt`, or
/// writes it under [`BLESS_ENV`].
fn check(name: &str, preset: &str, density: Option<f64>) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/fetch/simulation/snapshots")
        .join(format!("{name}.txt"));
    let actual = table(preset, density);
    if std::env::var_os(BLESS_ENV).is_some() {
        std::fs::write(&path, &actual).expect("write the snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let moved: Vec<String> = expected
            .lines()
            .zip(actual.lines())
            .filter(|(e, a)| e != a)
            .map(|(e, a)| format!("  was  {e}\n  now  {a}"))
            .collect();
        panic!(
            "the planner's requests on `{name}` moved from {}:\n{}\n\
             if the change is wanted, rewrite the tables with {BLESS_ENV}=1 and commit their diff\n\
             (docs/planner.md: a change must gain on several seeds and on chains that are not its own)",
            path.display(),
            if moved.is_empty() { actual.clone() } else { moved.join("\n") },
        );
    }
}

#[test]
fn snapshot_default() {
    check("default", "default", None);
}

#[test]
fn snapshot_sparse() {
    check("sparse", "sparse", None);
}

#[test]
fn snapshot_overcap() {
    check("overcap", "overcap", None);
}

#[test]
fn snapshot_bursts() {
    check("bursts", "bursts", None);
}

#[test]
fn snapshot_growth() {
    check("growth", "growth", None);
}

#[test]
fn snapshot_hot() {
    check("hot", "hot", None);
}

#[test]
fn snapshot_huge_runs() {
    check("huge_runs", "huge_runs", None);
}

#[test]
fn snapshot_empty() {
    check("empty", "empty", None);
}

/// Short dense chains like the outside measurement's: 20,001 blocks of about 500,000 logs.
#[test]
fn snapshot_dense() {
    check("dense", "dense", None);
}

/// The same blocks three times as dense: about 1,500,000 logs, many blocks of thousands of logs.
#[test]
fn snapshot_dense_x3() {
    check("dense_x3", "dense", Some(14.4));
}
