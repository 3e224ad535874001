//! Watching a job: the progress bar on a terminal, periodic `progress` log lines elsewhere, Prometheus
//! metrics and the `/health` check.
//!
//! Stages report through the `metrics` facade (the `record_*` functions and the names below) and through
//! an [`Observer`] that `pipeline::sync` calls once per committed batch. Without a recorder installed
//! ([`install_recorder`], done by `app` only when `[metrics]` is configured) every metric call is a no-op,
//! so tests and `bench` pay nothing. This module decides nothing about the job: it counts, draws and serves.
//!
//! The bar and the log lines share stderr: [`Console`] is the tracing writer, and it suspends the bar
//! (clears it, writes the line, redraws it) so a log line never tears the bar.

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};

pub mod chain;
mod health;
pub use health::{health, serve, Failing, StallClock};

use crate::primitives::{BlockNumber, BlockRange};
use crate::rpc::Class;

/// Counter: raw logs committed.
pub const LOGS_INDEXED: &str = "logslice_logs_indexed_total";
/// Counter: typed rows committed.
pub const TYPED_ROWS_INDEXED: &str = "logslice_typed_rows_indexed_total";
/// Counter: blocks covered by committed batches.
pub const BLOCKS_INDEXED: &str = "logslice_blocks_indexed_total";
/// Counter: batches committed.
pub const BATCHES_COMMITTED: &str = "logslice_batches_committed_total";
/// Histogram: seconds one batch's transaction took to commit.
pub const COMMIT_SECONDS: &str = "logslice_commit_seconds";
/// Gauge: the highest block committed by the last batch.
pub const CHECKPOINT_BLOCK: &str = "logslice_checkpoint_block";
/// Gauge: the block the job is syncing to.
pub const TARGET_BLOCK: &str = "logslice_target_block";
/// Gauge: blocks between the checkpoint and the target (the head, when following).
pub const HEAD_LAG_BLOCKS: &str = "logslice_head_lag_blocks";
/// Counter with labels `provider`, `method` and `outcome` (`ok`, `split`, `transient`, `unreachable`,
/// `rejected`, `unknown_block`, `fatal`): JSON-RPC requests sent.
pub const REQUESTS: &str = "logslice_requests_total";
/// Gauge with label `provider`: the rate in use (learned below the configured ceiling), in calls or
/// credits per second.
pub const PROVIDER_RATE: &str = "logslice_provider_rate";
/// Gauge with label `provider`: 1 while it takes requests, 0 while its breaker sets it aside.
pub const PROVIDER_UP: &str = "logslice_provider_up";
/// Counter: answers that split a range (`-32005` too many results or timeout, a stated block limit).
pub const SPLITS: &str = "logslice_splits_total";
/// Counter: requests retried after a transient failure.
pub const RETRIES: &str = "logslice_retries_total";
/// Gauge: blocks in the last fetched range (the planner's current span).
pub const RANGE_SIZE_BLOCKS: &str = "logslice_range_size_blocks";
/// Counter: reorgs detected (the follower bumps it).
pub const REORGS: &str = "logslice_reorgs_total";
/// Counter: `eth_getLogs` requests sent without their addresses (many factory children, `fetch::wide`).
pub const TOPIC_ONLY_REQUESTS: &str = "logslice_topic_only_requests_total";
/// Counter: logs of other contracts carried by topic-only answers and dropped.
pub const FOREIGN_LOGS: &str = "logslice_foreign_logs_dropped_total";
/// Counter: logs an `eth_getLogs` answer delivered twice (or more), kept once (`fetch::answer`).
pub const REPEATED_LOGS: &str = "logslice_repeated_logs_dropped_total";
/// Counter: blocks read from their receipts (over the result cap: for one address and topic0, or for the whole selection once the node is known to serve `eth_getBlockReceipts`; `fetch::receipts`).
pub const RECEIPT_BLOCKS: &str = "logslice_receipt_blocks_total";
/// Gauge: blocks rolled back by the last reorg (the follower sets it).
pub const ROLLBACK_DEPTH_BLOCKS: &str = "logslice_rollback_depth_blocks";
/// Gauge: seconds since the checkpoint last advanced (what `/health` compares with `metrics.max_stall`).
pub const SECONDS_SINCE_ADVANCE: &str = "logslice_seconds_since_checkpoint_advance";
/// Gauge: seconds the daemon has been riding out a failing node or a lost database (0 while healthy).
pub const SECONDS_UNHEALTHY: &str = "logslice_seconds_unhealthy";
/// Counter: reorgs found under the block the node had reported finalized (rolled back all the same).
pub const REORGS_BELOW_FINALIZED: &str = "logslice_reorgs_below_finalized_total";

/// Commit latency buckets, in seconds: a SQLite batch commits in milliseconds, a remote Postgres in tens.
const COMMIT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// How often a `progress` line is logged when no bar is drawn (the first comes with the first batch).
pub const PROGRESS_LOG_INTERVAL: Duration = Duration::from_secs(10);

/// The `chain` label of the running task's metrics ([`chain::current`]).
fn chain_label() -> String {
    chain::current().to_string()
}

/// Records one answer of `provider` to a JSON-RPC request (`None`: success), for [`REQUESTS`].
pub fn record_request(provider: &str, method: &'static str, failure: Option<&Class>) {
    let outcome = match failure {
        None => "ok",
        Some(Class::Split { .. }) => "split",
        Some(Class::Retry { .. }) => "transient",
        Some(Class::Unreachable) => "unreachable",
        Some(Class::Rejected) => "rejected",
        Some(Class::UnknownBlock) => "unknown_block",
        Some(Class::Fatal) => "fatal",
    };
    metrics::counter!(REQUESTS, "chain" => chain_label(), "provider" => provider.to_owned(), "method" => method, "outcome" => outcome)
        .increment(1);
}

/// Records a topic-only `eth_getLogs` request and the logs of other contracts it carried.
pub fn record_topic_only(foreign_logs: u64) {
    metrics::counter!(TOPIC_ONLY_REQUESTS, "chain" => chain_label()).increment(1);
    metrics::counter!(FOREIGN_LOGS, "chain" => chain_label()).increment(foreign_logs);
}

/// Records how each provider stands (rate in use, up or set aside).
pub fn record_providers(providers: &[crate::node::ProviderSnapshot]) {
    for provider in providers {
        let name = provider.name.clone();
        let chain = chain_label();
        metrics::gauge!(PROVIDER_RATE, "chain" => chain.clone(), "provider" => name.clone())
            .set(f64::from(provider.rate));
        let up = if provider.state == "up" { 1.0 } else { 0.0 };
        metrics::gauge!(PROVIDER_UP, "chain" => chain, "provider" => name).set(up);
    }
}

/// Records the repeats of logs one answer delivered twice, dropped.
pub fn record_repeated_logs(n_repeats: u64) {
    metrics::counter!(REPEATED_LOGS, "chain" => chain_label()).increment(n_repeats);
}

/// Records a block read from its receipts.
pub fn record_receipt_block() {
    metrics::counter!(RECEIPT_BLOCKS, "chain" => chain_label()).increment(1);
}

/// Records a split of a range.
pub fn record_split() {
    metrics::counter!(SPLITS, "chain" => chain_label()).increment(1);
}

/// Records a retry.
pub fn record_retry() {
    metrics::counter!(RETRIES, "chain" => chain_label()).increment(1);
}

/// Records a reorg and the depth of its rollback (for the follower).
pub fn record_reorg(rollback_depth: u64) {
    metrics::counter!(REORGS, "chain" => chain_label()).increment(1);
    metrics::gauge!(ROLLBACK_DEPTH_BLOCKS, "chain" => chain_label()).set(rollback_depth as f64);
}

/// Records a reorg that reached below the block the node had reported finalized.
pub fn record_reorg_below_finalized() {
    metrics::counter!(REORGS_BELOW_FINALIZED, "chain" => chain_label()).increment(1);
}

/// Installs the process-wide Prometheus recorder and describes every metric, so each appears (at zero, for
/// each of `chains`) from the first scrape. Call once per process.
///
/// # Errors
/// When a recorder is already installed.
pub fn install_recorder(chains: &[&str]) -> Result<PrometheusHandle, BuildError> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(COMMIT_SECONDS.to_owned()), COMMIT_BUCKETS)?
        .install_recorder()?;
    describe(chains);
    Ok(handle)
}

fn describe(chains: &[&str]) {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    for (name, help) in [
        (LOGS_INDEXED, "raw logs committed"),
        (TYPED_ROWS_INDEXED, "typed rows committed"),
        (BLOCKS_INDEXED, "blocks covered by committed batches"),
        (BATCHES_COMMITTED, "batches committed"),
        (
            SPLITS,
            "answers that split a block range (-32005, block limits)",
        ),
        (RETRIES, "requests retried after a transient failure"),
        (
            RECEIPT_BLOCKS,
            "blocks read from their receipts (over the result cap)",
        ),
        (
            TOPIC_ONLY_REQUESTS,
            "eth_getLogs requests sent without their (many) addresses, cut to them here",
        ),
        (
            FOREIGN_LOGS,
            "logs of other contracts that topic-only answers carried, dropped",
        ),
        (
            REPEATED_LOGS,
            "logs an eth_getLogs answer delivered twice, kept once",
        ),
        (REORGS, "reorgs detected"),
        (
            REORGS_BELOW_FINALIZED,
            "reorgs that reached below the block the node reported finalized",
        ),
    ] {
        describe_counter!(name, help);
        for chain in chains {
            metrics::counter!(name, "chain" => chain.to_string()).absolute(0);
        }
    }
    describe_counter!(
        REQUESTS,
        "JSON-RPC requests by provider, method and outcome"
    );
    describe_gauge!(
        PROVIDER_RATE,
        "The rate in use per provider (learned below its ceiling), calls or credits per second"
    );
    describe_gauge!(
        PROVIDER_UP,
        "1 while a provider takes requests, 0 while set aside"
    );
    for (name, help) in [
        (
            CHECKPOINT_BLOCK,
            "highest block committed by the last batch",
        ),
        (TARGET_BLOCK, "the block the job is syncing to"),
        (
            HEAD_LAG_BLOCKS,
            "blocks between the checkpoint and the target or head",
        ),
        (RANGE_SIZE_BLOCKS, "blocks in the last fetched range"),
        (
            ROLLBACK_DEPTH_BLOCKS,
            "blocks rolled back by the last reorg",
        ),
    ] {
        describe_gauge!(name, help);
        for chain in chains {
            metrics::gauge!(name, "chain" => chain.to_string()).set(0.0);
        }
    }
    // The process's health (`/health`), over every chain: no `chain` label.
    for (name, help) in [
        (
            SECONDS_SINCE_ADVANCE,
            "seconds since a checkpoint last advanced",
        ),
        (
            SECONDS_UNHEALTHY,
            "seconds the daemon has been riding out a failing node or database (0 while healthy)",
        ),
    ] {
        describe_gauge!(name, help);
        metrics::gauge!(name).set(0.0);
    }
    describe_histogram!(COMMIT_SECONDS, Unit::Seconds, "time to commit one batch");
}

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A bar on stderr (a terminal).
    Bar,
    /// Periodic `progress` log lines (stderr is not a terminal, or the terminal is dumb).
    Lines,
}

/// Whether to show quiet output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verbosity {
    /// `-q`: warnings and errors only; no bar.
    Quiet,
    /// Default or `-v`.
    Normal,
}

impl ProgressMode {
    /// A bar only on a terminal that can draw one, and not under `-q` (as cargo decides).
    pub fn choose(stderr_is_terminal: bool, verbosity: Verbosity, term: Option<&str>) -> Self {
        let dumb = term.is_none_or(|t| t == "dumb");
        if stderr_is_terminal && verbosity == Verbosity::Normal && !dumb {
            ProgressMode::Bar
        } else {
            ProgressMode::Lines
        }
    }
}

/// stderr, shared by the tracing writer and the progress bar. Cloning shares it.
#[derive(Clone)]
pub struct Console {
    mode: ProgressMode,
    bar: Arc<Mutex<Option<ProgressBar>>>,
}

impl Default for Console {
    /// Log lines, no bar.
    fn default() -> Self {
        Self::new(ProgressMode::Lines)
    }
}

impl Console {
    /// A console showing progress as `mode` says.
    pub fn new(mode: ProgressMode) -> Self {
        Self {
            mode,
            bar: Arc::new(Mutex::new(None)),
        }
    }

    /// How progress is shown.
    pub fn mode(&self) -> ProgressMode {
        self.mode
    }

    fn bar(&self) -> Option<ProgressBar> {
        self.bar.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_bar(&self, bar: Option<ProgressBar>) -> Option<ProgressBar> {
        std::mem::replace(
            &mut *self.bar.lock().unwrap_or_else(|e| e.into_inner()),
            bar,
        )
    }
}

/// One log event's bytes, written to stderr in one piece when dropped (around the bar, if one is drawn).
pub struct ConsoleWriter {
    console: Console,
    line: Vec<u8>,
}

impl Write for ConsoleWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ConsoleWriter {
    fn drop(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let write = || {
            // Nothing sensible to do when stderr is gone.
            let _ = std::io::stderr().lock().write_all(&self.line);
        };
        match self.console.bar() {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Console {
    type Writer = ConsoleWriter;

    fn make_writer(&'a self) -> Self::Writer {
        ConsoleWriter {
            console: self.clone(),
            line: Vec::new(),
        }
    }
}

/// Progress of one sync, reported by `pipeline::sync`: draws the bar or logs `progress` lines, updates
/// the metrics and the [`StallClock`].
pub struct Observer {
    console: Console,
    clock: StallClock,
    log_interval: Duration,
    state: Mutex<Progress>,
}

#[derive(Debug, Default)]
struct Progress {
    plan: Option<BlockRange>,
    started: Option<Instant>,
    logs: u64,
    last_line: Option<Instant>,
}

impl Default for Observer {
    /// Log lines every [`PROGRESS_LOG_INTERVAL`], no bar.
    fn default() -> Self {
        Self::new(Console::default(), StallClock::new())
    }
}

impl Observer {
    /// An observer drawing on `console` and moving `clock`.
    pub fn new(console: Console, clock: StallClock) -> Self {
        Self {
            console,
            clock,
            log_interval: PROGRESS_LOG_INTERVAL,
            state: Mutex::new(Progress::default()),
        }
    }

    /// The clock `/health` reads.
    pub fn clock(&self) -> &StallClock {
        &self.clock
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Progress> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job will index `plan` (its end is the target).
    pub fn start(&self, plan: BlockRange) {
        self.clock.joined();
        metrics::gauge!(TARGET_BLOCK, "chain" => chain_label()).set(plan.end() as f64);
        metrics::gauge!(HEAD_LAG_BLOCKS, "chain" => chain_label()).set(plan.len() as f64);
        {
            let mut state = self.state();
            state.plan = Some(plan);
            state.started = Some(Instant::now());
            state.logs = 0;
            state.last_line = None;
        }
        if self.console.mode() == ProgressMode::Bar {
            let bar = ProgressBar::with_draw_target(Some(plan.len()), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} {elapsed_precise} [{wide_bar}] {percent}% block {msg} ETA {eta}",
                )
                .expect("the template is valid")
                .progress_chars("=> "),
            );
            bar.set_message(format!("{} / {}", plan.start(), plan.end()));
            if let Some(old) = self.console.set_bar(Some(bar)) {
                old.finish_and_clear();
            }
        }
    }

    /// A range of `range.len()` blocks was fetched (the planner's current span).
    pub fn fetched(&self, range: BlockRange) {
        metrics::gauge!(RANGE_SIZE_BLOCKS, "chain" => chain_label()).set(range.len() as f64);
    }

    /// A batch covering `range` committed `n_logs` raw logs and `n_typed` typed rows in `took`.
    pub fn committed(&self, range: Option<BlockRange>, n_logs: u64, n_typed: u64, took: Duration) {
        metrics::counter!(LOGS_INDEXED, "chain" => chain_label()).increment(n_logs);
        metrics::counter!(TYPED_ROWS_INDEXED, "chain" => chain_label()).increment(n_typed);
        metrics::counter!(BATCHES_COMMITTED, "chain" => chain_label()).increment(1);
        metrics::histogram!(COMMIT_SECONDS, "chain" => chain_label()).record(took.as_secs_f64());
        let Some(range) = range else { return };
        self.clock.advanced();
        metrics::counter!(BLOCKS_INDEXED, "chain" => chain_label()).increment(range.len());
        metrics::gauge!(CHECKPOINT_BLOCK, "chain" => chain_label()).set(range.end() as f64);
        let mut state = self.state();
        state.logs += n_logs;
        let Some(plan) = state.plan else { return };
        let target = plan.end();
        let checkpoint = range.end();
        metrics::gauge!(HEAD_LAG_BLOCKS, "chain" => chain_label())
            .set(target.saturating_sub(checkpoint) as f64);
        let elapsed = state.started.map_or(Duration::ZERO, |s| s.elapsed());
        let logs_per_s = state.logs as f64 / elapsed.as_secs_f64().max(1e-3);
        if let Some(bar) = self.console.bar() {
            bar.set_position(checkpoint.saturating_sub(plan.start()) + 1);
            bar.set_message(format!(
                "{checkpoint} / {target}, {} logs ({logs_per_s:.0}/s)",
                state.logs
            ));
            return;
        }
        let due = state
            .last_line
            .is_none_or(|last| last.elapsed() >= self.log_interval);
        if due {
            state.last_line = Some(Instant::now());
            let eta = eta(plan, checkpoint, elapsed);
            tracing::info!(
                checkpoint,
                target,
                logs = state.logs,
                logs_per_s = logs_per_s as u64,
                eta_secs = eta.map(|e| e.as_secs()),
                eta = %eta.map_or_else(|| "unknown".to_owned(), |e| humantime::format_duration(Duration::from_secs(e.as_secs())).to_string()),
                "progress"
            );
        }
    }

    /// The job ended: the bar is cleared (the result line follows on stdout).
    pub fn finish(&self) {
        if let Some(bar) = self.console.set_bar(None) {
            bar.finish_and_clear();
        }
    }
}

/// Time left to reach `plan.end()` from `checkpoint` at the pace of `elapsed` for the blocks done so far.
pub fn eta(plan: BlockRange, checkpoint: BlockNumber, elapsed: Duration) -> Option<Duration> {
    let done = checkpoint.checked_sub(plan.start())? + 1;
    let left = plan.end().saturating_sub(checkpoint);
    let secs = elapsed.as_secs_f64() * left as f64 / done as f64;
    Duration::try_from_secs_f64(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_eta(plan: (u64, u64), checkpoint: u64, elapsed_s: u64, expected_s: Option<u64>) {
        let plan = BlockRange::new(plan.0, plan.1).unwrap();
        let actual = eta(plan, checkpoint, Duration::from_secs(elapsed_s)).map(|d| d.as_secs());
        assert_eq!(
            actual, expected_s,
            "{plan} at {checkpoint} after {elapsed_s}s"
        );
    }

    #[test]
    fn estimates_the_time_left_from_the_pace_so_far() {
        check_eta((0, 99), 49, 10, Some(10));
        check_eta((100, 199), 124, 10, Some(30));
        check_eta((0, 99), 99, 10, Some(0));
        check_eta((100, 199), 50, 10, None);
    }

    #[test]
    fn draws_a_bar_only_on_a_capable_terminal_when_not_quiet() {
        use ProgressMode::*;
        use Verbosity::*;
        let check = |terminal, verbosity, term, expected| {
            assert_eq!(
                ProgressMode::choose(terminal, verbosity, term),
                expected,
                "{terminal} {verbosity:?} {term:?}"
            );
        };
        check(true, Normal, Some("xterm-256color"), Bar);
        check(true, Quiet, Some("xterm-256color"), Lines);
        check(false, Normal, Some("xterm-256color"), Lines);
        check(true, Normal, Some("dumb"), Lines);
        check(true, Normal, None, Lines);
    }
}
