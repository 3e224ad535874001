//! Measures the devnode: the default chain's size and how many `eth_getLogs` results per second it serves.
//!
//! Run in release: `cargo run --release --example devnode_serve [-- BLOCKS STEP]`. It prints the chain's
//! block and log counts, its biggest block, the in-process serve rate (generate + encode + serialise, one
//! thread, no sockets) and the rate over HTTP (server on a one-thread runtime, one client request at a time).

use std::time::Instant;

use devnode::bench::{measure_in_process, measure_log_serialisation, measure_serve_rate};
use devnode::{DevNodeConfig, GroundTruth};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut cfg = DevNodeConfig::default();
    if let Some(blocks) = args.next().and_then(|text| text.parse().ok()) {
        cfg.chain.blocks = blocks;
    }
    let step: u64 = args.next().and_then(|text| text.parse().ok()).unwrap_or(20);

    let started = Instant::now();
    let truth = GroundTruth::detached(&cfg);
    let (mut n_logs, mut biggest, mut n_over_cap, mut n_empty) =
        (0usize, (0u64, 0usize), 0u64, 0u64);
    for number in 0..=cfg.chain.blocks {
        let count = truth.log_count(number);
        n_logs += count;
        if count > biggest.1 {
            biggest = (number, count);
        }
        n_over_cap += u64::from(count > cfg.limits.max_results);
        n_empty += u64::from(count == 0);
    }
    println!(
        "chain seed {}: {} blocks, {} logs, {} empty blocks, {} blocks over {} logs, biggest block {} with {} logs \
         (counted in {:.2?})",
        cfg.seed,
        cfg.chain.blocks + 1,
        n_logs,
        n_empty,
        n_over_cap,
        cfg.limits.max_results,
        biggest.0,
        biggest.1,
        started.elapsed()
    );

    let rate = measure_in_process(&cfg, step);
    println!(
        "in-process: {} logs, {} MB in {} requests of {step} blocks, {:.2?}: {:.0} logs/s",
        rate.n_logs,
        rate.n_bytes / 1_000_000,
        rate.n_requests,
        rate.elapsed,
        rate.logs_per_sec()
    );

    let (hand_rolled, serde) = measure_log_serialisation(&cfg, 0, 40_000);
    for (name, rate) in [
        ("hand-rolled writer", hand_rolled),
        ("serde_json derive", serde),
    ] {
        println!(
            "serialisation only, {name}: {} logs, {} MB, {:.2?}: {:.0} logs/s",
            rate.n_logs,
            rate.n_bytes / 1_000_000,
            rate.elapsed,
            rate.logs_per_sec()
        );
    }

    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot build a runtime: {err}");
            std::process::exit(1);
        }
    };
    match runtime.block_on(measure_serve_rate(cfg, step)) {
        Ok(rate) => println!(
            "over HTTP (server and client on one thread): {} logs, {} MB in {} requests, {:.2?}: {:.0} logs/s",
            rate.n_logs,
            rate.n_bytes / 1_000_000,
            rate.n_requests,
            rate.elapsed,
            rate.logs_per_sec()
        ),
        Err(err) => {
            eprintln!("HTTP measurement failed: {err}");
            std::process::exit(1);
        }
    }
}
