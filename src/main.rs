//! The `logslice` binary: parse the command line, install logging and the signal handlers, run the command,
//! exit with its code.

mod app;
#[cfg(feature = "sim")]
mod bench;
mod cli;
#[cfg(feature = "sim")]
mod sim;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

use cli::{Cli, LogFormat};
use logslice::observe::{Console, ProgressMode, Verbosity};

fn main() -> ExitCode {
    logslice::exit::exit_on_panic();
    tune_allocator();
    #[cfg(feature = "sim")]
    sim::install();
    let cli = Cli::parse();
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "warn",
        (false, 0) => "info",
        (false, 1) => "debug",
        (false, _) => "trace",
    };
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("logslice={level},warn")));
    let verbosity = if cli.quiet {
        Verbosity::Quiet
    } else {
        Verbosity::Normal
    };
    let term = std::env::var("TERM").ok();
    let stderr_is_terminal = std::io::stderr().is_terminal();
    let console = Console::new(ProgressMode::choose(
        stderr_is_terminal,
        verbosity,
        term.as_deref(),
    ));
    // Log lines go through the console so they are drawn around the progress bar, never through it.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(console.clone())
        // Colour codes only for a terminal: a log file or journald gets plain text.
        .with_ansi(stderr_is_terminal);
    match cli.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    // SQLite: one core is left to the database writer, SQLite's own thread outside the runtime: with a
    // worker per core, fetching, parsing and an in-process node take CPU from the writer, the bottleneck
    // (on 2 cores end to end runs 15-30% faster this way). Postgres: a worker per core. Its writer's turns
    // (`sink::InTurn`: each batch's COPY and commit) are tasks of the runtime, and with one worker they
    // wait while it parses and decodes. The measurements: docs/bench-log/2026-11-24.md and 2026-11-26.md.
    // `TOKIO_WORKER_THREADS` overrides it.
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let workers = if app::writes_postgres(&cli) {
            cores
        } else {
            cores.saturating_sub(1).max(1)
        };
        runtime.worker_threads(workers);
    }
    let runtime = match runtime.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("cannot start the async runtime: {err}");
            return ExitCode::from(logslice::exit::IO);
        }
    };
    let cancel = CancellationToken::new();
    let code = runtime.block_on(async {
        // Installed before any work starts, so no signal finds the default action (death) in place.
        let signals = Signals::install();
        tokio::spawn(on_signals(signals, cancel.clone()));
        app::run(cli, cancel.clone(), console).await
    });
    if cancel.is_cancelled() {
        // The job has committed or rolled back: whatever is left on the runtime (a request being abandoned, a
        // name lookup on the blocking pool) must not hold the exit up, as dropping the runtime would.
        runtime.shutdown_background();
    }
    ExitCode::from(code)
}

/// Fires `cancel` on the first SIGINT or SIGTERM, which the job drains within `sync.shutdown_grace` (see
/// `app`); on the second, exits at once with 130: the user insists, and what was not committed is rolled
/// back by the database (the batch in flight is lost whole, never half).
async fn on_signals(mut signals: Signals, cancel: CancellationToken) {
    signals.next().await;
    tracing::info!("shutting down: finishing the batch in flight (a second signal stops at once)");
    cancel.cancel();
    signals.next().await;
    tracing::warn!("second signal: stopping now; the batch in flight is rolled back");
    std::process::exit(i32::from(logslice::exit::INTERRUPTED));
}

/// SIGINT and SIGTERM, each listened for on its own: one that cannot be installed is warned about and the
/// other still works (Ctrl-C is not lost because SIGTERM could not be had).
struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Registers the handlers (inside the runtime).
    fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let listen = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(signal) => Some(signal),
                Err(err) => {
                    tracing::warn!(cause = %err, "cannot listen for {name}; it will end the process without a clean shutdown");
                    None
                }
            };
            Self {
                interrupt: listen(SignalKind::interrupt(), "SIGINT"),
                terminate: listen(SignalKind::terminate(), "SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// The next SIGINT or SIGTERM (never, if neither could be installed).
    async fn next(&mut self) {
        #[cfg(unix)]
        {
            async fn on(signal: Option<&mut tokio::signal::unix::Signal>) {
                let received = match signal {
                    Some(signal) => signal.recv().await,
                    None => None,
                };
                if received.is_none() {
                    std::future::pending::<()>().await;
                }
            }
            tokio::select! {
                () = on(self.interrupt.as_mut()) => {}
                () = on(self.terminate.as_mut()) => {}
            }
        }
        #[cfg(not(unix))]
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::warn!(cause = %err, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    }
}

/// Keeps peak memory flat however long a backfill runs. glibc's malloc raises its mmap threshold each time a
/// large block is freed, so after the first few multi-megabyte answers every response body and log vector is
/// carved from the heap arenas (one per thread, up to eight per core) instead of being mapped and unmapped;
/// freed, they leave holes that only grow the resident set. A fixed 1 MiB threshold sends those buffers back
/// to the kernel when they are dropped, and two arenas bound the rest (docs/BENCHMARKS.md, memory).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_allocator() {
    // SAFETY: `mallopt` only sets allocator parameters; it is called first thing in `main`, before any other
    // thread exists or any allocation depends on them. A refused setting (return value 0) leaves the default.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_allocator() {}
