//! Block-to-row latency of `logslice run` at the head: a simulated chain producing a block every
//! `BLOCK_TIME`, reorganising `REORG_DEPTH` blocks every `REORG_EVERY` blocks, and the daemon in this
//! process on SQLite. For each block, the time from the node producing it to the daemon's checkpoint
//! reaching it (its rows committed; after a reorg, the new branch's rows), per poll interval.
//!
//! The poll's phase against the block timer is fixed within one daemon's life (both are periodic), so each
//! setting runs `TRIALS` daemons, each started at a random point of the block interval.
//!
//! Run in release from the repository root:
//! `cargo run --release --example head_latency [-- BLOCKS_PER_TRIAL BLOCK_TIME_MS POLL_MS...]`
//! (defaults: 10 blocks, 2000 ms, polls of 2000, 1000 and 500 ms).

use std::time::{Duration, Instant};

use devnode::{DevNode, DevNodeConfig};
use logslice::observe::Observer;
use logslice::pipeline;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

const REORG_EVERY: u64 = 5;
const REORG_DEPTH: u64 = 3;
const TRIALS: u32 = 4;

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let blocks: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let block_ms: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let mut polls: Vec<u64> = args.filter_map(|a| a.parse().ok()).collect();
    if polls.is_empty() {
        polls = vec![2000, 1000, 500];
    }
    println!(
        "block time {block_ms} ms, a reorg {REORG_DEPTH} deep every {REORG_EVERY} blocks, {TRIALS} daemons of {blocks} blocks per setting"
    );
    for poll_ms in polls {
        let mut latencies = Vec::new();
        for _ in 0..TRIALS {
            latencies.extend(measure(blocks, Duration::from_millis(block_ms), poll_ms).await);
        }
        latencies.sort();
        let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q).round() as usize];
        let within = latencies
            .iter()
            .filter(|l| **l <= Duration::from_millis(block_ms))
            .count();
        println!(
            "poll_interval {poll_ms} ms: p50 {:.2} s, p90 {:.2} s, max {:.2} s; {within} of {} blocks within one block time",
            at(0.5).as_secs_f64(),
            at(0.9).as_secs_f64(),
            at(1.0).as_secs_f64(),
            latencies.len()
        );
    }
}

/// The latency of each of `blocks` blocks produced while the daemon follows the head.
async fn measure(blocks: u64, block_time: Duration, poll_ms: u64) -> Vec<Duration> {
    let mut cfg = DevNodeConfig {
        addr: "127.0.0.1:0".parse().expect("address"),
        ..DevNodeConfig::default()
    };
    cfg.chain.blocks = 2_000;
    cfg.chain.block_time = Some(block_time);
    cfg.chain.reorg_every = Some(REORG_EVERY);
    cfg.chain.reorg_depth = REORG_DEPTH;
    let node = DevNode::start(cfg).await.expect("devnode");
    let dir = tempfile::tempdir().expect("temp dir");
    let example = std::fs::read_to_string("config.toml").expect("run from the repository root");
    let abis = std::env::current_dir().expect("cwd").join("abis");
    let text = example
        .replace("abi = \"abis/", &format!("abi = \"{}/", abis.display()))
        .replace(
            "url = \"sim://?log_timestamps=true\"",
            &format!("url = \"{}\"", node.http_url()),
        )
        .replace(
            "url = \"sqlite://logslice.db\"",
            &format!("url = \"sqlite://{}\"", dir.path().join("l.db").display()),
        )
        .replace(
            "[sync]",
            &format!("[sync]\npoll_interval = \"{poll_ms}ms\""),
        );
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).expect("config");
    let config = logslice::config::load(&path).expect("config");
    // A random phase of the daemon's polls against the node's block timer.
    tokio::time::sleep(block_time.mul_f64(fastrand::f64())).await;
    let cancel = CancellationToken::new();
    let (sender, mut progress) = watch::channel(None);
    let daemon = tokio::spawn({
        let cancel = cancel.clone();
        async move { pipeline::run_watched(&config, cancel, sender, &Observer::default()).await }
    });
    // Caught up with the chain as it was, before measuring.
    let start_head = node.truth().head();
    progress
        .wait_for(|cp| cp.is_some_and(|cp| cp >= start_head))
        .await
        .expect("the daemon runs");
    // Each block's production time, taken as the node announces it, whatever the daemon is doing.
    let (produced_tx, mut produced_rx) = tokio::sync::mpsc::channel(1024);
    let mut heads = node.truth().watch_head();
    let recorder = tokio::spawn(async move {
        while heads.changed().await.is_ok() {
            let head = *heads.borrow_and_update();
            if produced_tx.send((head, Instant::now())).await.is_err() {
                break;
            }
        }
    });
    let mut latencies = Vec::new();
    while latencies.len() < blocks as usize {
        let (head, produced) = produced_rx.recv().await.expect("the node produces blocks");
        progress
            .wait_for(|cp| cp.is_some_and(|cp| cp >= head))
            .await
            .expect("the daemon runs");
        latencies.push(produced.elapsed());
    }
    recorder.abort();
    cancel.cancel();
    let _ = daemon.await;
    node.shutdown().await;
    latencies
}
