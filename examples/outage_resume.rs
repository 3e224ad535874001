//! How long `logslice run` takes to resume after an outage: the daemon in this process follows a simulated
//! chain with the default `[node]` retry settings (8 retries, backoff 250 ms to 30 s, 15 s timeout); the
//! node fails every request for `WINDOW` seconds in one way after another (JSON-RPC errors, 429, 502,
//! requests never answered, connections refused), blocks are mined meanwhile, and for each window the time
//! from the node healing to the daemon's checkpoint reaching the head is printed.
//!
//! With `postgres` (the server of `LOGSLICE_TEST_PG`, default `postgres://postgres@127.0.0.1:5432/test`, in
//! a schema of its own, dropped at the end) the database is Postgres, and a last window restarts the server
//! with `pg_ctlcluster` (stop, `WINDOW` seconds, start): do not run it beside tests that use that server.
//!
//! Run from the repository root:
//! `cargo run --release --example outage_resume [-- WINDOW_SECS [postgres]]` (default 30 s, SQLite).

use std::time::{Duration, Instant};

use devnode::{DevNode, DevNodeConfig, Down};
use logslice::observe::Observer;
use logslice::pipeline;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

#[tokio::main]
async fn main() {
    // The daemon's warnings (one per outage) and recoveries, on stderr; RUST_LOG for more.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "logslice=info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let mut args = std::env::args().skip(1);
    let window = Duration::from_secs(args.next().and_then(|a| a.parse().ok()).unwrap_or(30));
    let postgres = args.next().is_some_and(|a| a == "postgres");
    let mut cfg = DevNodeConfig {
        addr: "127.0.0.1:0".parse().expect("address"),
        ..DevNodeConfig::default()
    };
    cfg.chain.blocks = 20_000;
    // As the example config's node: logs carry their block's timestamp, so no header is read for it.
    cfg.chain.log_timestamps = true;
    let node = DevNode::start(cfg).await.expect("devnode");
    let dir = tempfile::tempdir().expect("temp dir");
    let schema = format!("outage_resume_{}", std::process::id());
    let server = std::env::var("LOGSLICE_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let database = match postgres {
        true => format!("url = \"{server}\"\nschema = \"{schema}\""),
        false => format!("url = \"sqlite://{}\"", dir.path().join("l.db").display()),
    };
    let example = std::fs::read_to_string("config.toml").expect("run from the repository root");
    let abis = std::env::current_dir().expect("cwd").join("abis");
    let text = example
        .replace("abi = \"abis/", &format!("abi = \"{}/", abis.display()))
        .replace(
            "url = \"sim://?log_timestamps=true\"",
            &format!("url = \"{}\"", node.http_url()),
        )
        .replace("requests_per_second = 1000", "requests_per_second = 25")
        .replace("url = \"sqlite://logslice.db\"", &database);
    let path = dir.path().join("config.toml");
    std::fs::write(&path, text).expect("config");
    let config = logslice::config::load(&path).expect("config");
    let cancel = CancellationToken::new();
    let (sender, mut progress) = watch::channel(None);
    let daemon = tokio::spawn({
        let cancel = cancel.clone();
        async move { pipeline::run_watched(&config, cancel, sender, &Observer::default()).await }
    });
    let started = Instant::now();
    let head = node.truth().head();
    reach(&mut progress, head).await;
    println!(
        "caught up with {head} blocks in {:.1} s; outages of {} s each ({})",
        started.elapsed().as_secs_f64(),
        window.as_secs(),
        if postgres { "Postgres" } else { "SQLite" }
    );
    for (name, down) in [
        ("JSON-RPC errors", Down::RpcErrors),
        ("HTTP 429", Down::Status(429)),
        ("HTTP 502", Down::Status(502)),
        ("requests never answered", Down::Hang),
        ("connections refused", Down::Refuse),
    ] {
        node.set_down(down);
        let head = node.mine(5);
        tokio::time::sleep(window).await;
        node.set_down(Down::Up);
        let healed = Instant::now();
        reach(&mut progress, head).await;
        println!(
            "{name}: resumed {:.2} s after the node healed",
            healed.elapsed().as_secs_f64()
        );
    }
    if postgres {
        let cluster = std::fs::read_dir("/etc/postgresql")
            .expect("a Debian Postgres")
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .next()
            .expect("a cluster");
        let pg = |action: &str| {
            let status = std::process::Command::new("pg_ctlcluster")
                .args(["--skip-systemctl-redirect", &cluster, "main", action])
                .status()
                .expect("pg_ctlcluster");
            assert!(status.success(), "pg_ctlcluster {action}");
        };
        pg("stop");
        let head = node.mine(5);
        tokio::time::sleep(window).await;
        pg("start");
        let healed = Instant::now();
        reach(&mut progress, head).await;
        println!(
            "Postgres stopped: resumed {:.2} s after the server started again",
            healed.elapsed().as_secs_f64()
        );
    }
    cancel.cancel();
    let _ = daemon.await;
    if postgres {
        use sqlx::Connection;
        if let Ok(mut conn) = sqlx::PgConnection::connect(&server).await {
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"))
                .execute(&mut conn)
                .await;
        }
    }
    node.shutdown().await;
}

async fn reach(progress: &mut watch::Receiver<Option<u64>>, head: u64) {
    progress
        .wait_for(|cp| cp.is_some_and(|cp| cp >= head))
        .await
        .expect("the daemon runs");
}
