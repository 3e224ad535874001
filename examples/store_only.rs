//! The store-only ceiling on its own: the default chain's ground truth decoded and committed into a fresh
//! SQLite file with `config.toml`'s contracts, no network, as `logslice bench`'s store-only phase does it.
//! Prints the time spent decoding and committing and the bytes the process wrote (`/proc/self/io`).
//!
//! Run in release from the repository root:
//! `cargo run --release --example store_only [-- BLOCKS DB_PATH MAX_BATCH_LOGS [ahead]]`
//! (defaults: 200000, a file in a temp dir, 5000). By default each range is generated when the previous
//! batch has committed, with the clock stopped, as `bench` does; `ahead` generates the whole chain into
//! memory first (about 550 MB for the default chain), so the batches commit back to back and nothing runs
//! in the background of SQLite off the clock (its checkpoints, the kernel's writeback).

use std::path::Path;
use std::time::Instant;

use devnode::{DevNodeConfig, GroundTruth};

// The chunks `logslice bench` commits in its store-only phase, from the binary's own module.
#[path = "../src/bench/truth.rs"]
mod truth;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let blocks: u64 = args.next().and_then(|t| t.parse().ok()).unwrap_or(200_000);
    let dir = tempfile::tempdir().expect("a temp dir");
    let db = args.next().map_or_else(
        || dir.path().join("store.db"),
        |path| Path::new(&path).to_path_buf(),
    );
    let max_batch_logs: usize = args.next().and_then(|t| t.parse().ok()).unwrap_or(5000);
    let ahead = args.next().is_some_and(|t| t == "ahead");
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
    }
    let mut node = DevNodeConfig::default();
    node.chain.blocks = blocks;
    let truth = GroundTruth::detached(&node);
    let text = std::fs::read_to_string("config.toml")
        .expect("run from the repository root (config.toml)")
        .replace(
            "sqlite://logslice.db",
            &format!("sqlite://{}", db.display()),
        )
        .replace(
            "# max_batch_logs = 5000",
            &format!("max_batch_logs = {max_batch_logs}"),
        );
    let config = logslice::config::load_str(Path::new("config.toml"), &text, &|key| {
        std::env::var(key).ok()
    })
    .expect("config.toml loads");
    let head = truth.head();
    // Generated lazily, outside the timed part, or all of it first.
    let ranges = truth::truth_chunks(truth, head, config.sync.target_logs_per_request);
    let ranges: Box<dyn Iterator<Item = _>> = if ahead {
        Box::new(ranges.collect::<Vec<_>>().into_iter())
    } else {
        Box::new(ranges)
    };
    let started = Instant::now();
    let report = logslice::pipeline::store_only(&config, head, ranges)
        .await
        .expect("the store-only run");
    let written = std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|io| {
            io.lines()
                .find_map(|line| line.strip_prefix("wchar: ").map(str::to_owned))
        })
        .unwrap_or_else(|| "?".into());
    let db_bytes = std::fs::metadata(&db).map_or(0, |m| m.len());
    println!(
        "{} logs: {:.2?} decoding and committing ({:.0} logs/s), {:.2?} in all; {} bytes written, database {} bytes",
        report.logs,
        report.elapsed,
        report.logs as f64 / report.elapsed.as_secs_f64(),
        started.elapsed(),
        written,
        db_bytes,
    );
}
