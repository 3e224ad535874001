//! The exit codes of `docs/schema.md`, mapped from error classes in one `match`; and the panic hook that makes
//! a panic anywhere exit with [`SOFTWARE`].

use std::io::Write;
use std::panic::PanicHookInfo;

use crate::config::SecretUrl;
use crate::fetch;
use crate::pipeline::Error;
use crate::rpc::Class;
use crate::sink;

/// Done.
pub const OK: u8 = 0;
/// Wrong command-line usage.
pub const USAGE: u8 = 2;
/// The node returned data that cannot be right.
pub const DATA: u8 = 65;
/// The node is unreachable or rejected the API key.
pub const UNAVAILABLE: u8 = 69;
/// The database failed.
pub const IO: u8 = 74;
/// Temporary failure: retries exhausted; running again later should succeed.
pub const TEMPFAIL: u8 = 75;
/// The configuration is invalid.
pub const CONFIG: u8 = 78;
/// Interrupted by SIGINT/SIGTERM.
pub const INTERRUPTED: u8 = 130;
/// A bug in logslice (a panic, or an invariant that failed: a fetch that ended with blocks left over, a
/// batch that would skip blocks); sysexits' EX_SOFTWARE. Every other code blames the node, the database or
/// the input; this one says none of them is to blame.
pub const SOFTWARE: u8 = 70;

/// The exit code for a job's error.
pub fn code(err: &Error) -> u8 {
    match err {
        Error::Config(_) => CONFIG,
        Error::NodeData(_) => DATA,
        Error::NotYet(_) => TEMPFAIL,
        Error::Interrupted => INTERRUPTED,
        Error::Internal(_) => SOFTWARE,
        Error::Database {
            source: sink::Error::Mismatch(_),
            ..
        } => CONFIG,
        Error::Database {
            source: sink::Error::Unstorable { .. },
            ..
        } => DATA,
        Error::Database {
            source: sink::Error::Skipped { .. } | sink::Error::Gap(_),
            ..
        } => SOFTWARE,
        Error::Database { .. } => IO,
        Error::Node { source, .. } => match source {
            fetch::Error::Rejected { .. } => UNAVAILABLE,
            fetch::Error::Exhausted { source, .. } if source.class() == Class::Unreachable => {
                UNAVAILABLE
            }
            // A reorg under the request that nothing read again: a later run reads the chain afresh.
            fetch::Error::Exhausted { .. } | fetch::Error::UnknownBlock { .. } => TEMPFAIL,
            fetch::Error::Interrupted => INTERRUPTED,
            fetch::Error::Panicked(_)
            | fetch::Error::Unfinished { .. }
            | fetch::Error::Oversized(_) => SOFTWARE,
            fetch::Error::Fatal { .. }
            | fetch::Error::NoReceipts { .. }
            | fetch::Error::Inconsistent(_)
            | fetch::Error::Conflict(_)
            | fetch::Error::Split(_) => DATA,
        },
    }
}

/// Makes a panic anywhere (the main thread, a task, a blocking thread, a database worker) end the process
/// with [`SOFTWARE`] after printing [`panic_report`] to stderr, instead of exiting 101, or of a task dying
/// while the rest runs on. What was committed stays committed: a transaction open at the panic is rolled
/// back by the database. The binary installs it first thing.
pub fn exit_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        let mut report = panic_report(info);
        let backtrace = std::backtrace::Backtrace::capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            report.push_str(&format!("\n{backtrace}"));
        }
        // Straight to the stream, not through `eprintln!`, which a test harness may capture.
        let _ = writeln!(std::io::stderr().lock(), "{report}");
        std::process::exit(i32::from(SOFTWARE));
    }));
}

/// What a panic says: its message and where it happened, with every URL in the message redacted as
/// [`SecretUrl`] shows it (an API key in a path segment, a password, query values).
pub fn panic_report(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)");
    let location = info
        .location()
        .map(|l| format!(" (at {}:{}:{})", l.file(), l.line(), l.column()))
        .unwrap_or_default();
    format!(
        "internal error (a bug in logslice; please report it): {}{location}",
        redact_urls(message)
    )
}

/// `text` with every `scheme://...` in it replaced by its redacted form; one that does not parse is cut to
/// `scheme://****`. A URL ends at whitespace, a quote or a closing bracket.
fn redact_urls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(found) = rest.find("://") {
        let scheme_start = rest[..found]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
            .map_or(0, |at| at + 1);
        let end = rest[found..]
            .find(|c: char| c.is_whitespace() || "\"'`<>()[]{}".contains(c))
            .map_or(rest.len(), |at| found + at);
        out.push_str(&rest[..scheme_start]);
        let candidate = &rest[scheme_start..end];
        match url::Url::parse(candidate) {
            Ok(url) if scheme_start < found => out.push_str(&SecretUrl::new(url).redacted()),
            _ => {
                out.push_str(&rest[scheme_start..found]);
                out.push_str("://****");
            }
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panicking task is reported with its message and exits 70, never as a hang or a node error.
    #[tokio::test]
    async fn a_panic_in_a_task_becomes_an_internal_error_with_its_message() {
        let task = tokio::spawn(async {
            let empty: Vec<u8> = Vec::new();
            if empty.is_empty() {
                panic!("the reorder buffer lost range 5-9");
            }
        });
        let message = fetch::join_failure(task.await.expect_err("the task panicked"));
        assert_eq!(
            message,
            "a task panicked: the reorder buffer lost range 5-9"
        );
        let err = Error::Internal(message);
        assert_eq!(code(&err), SOFTWARE);
        assert!(err
            .to_string()
            .contains("the reorder buffer lost range 5-9"));
        let via_fetch = Error::Node {
            node: "sim://".into(),
            source: fetch::Error::Panicked("x".into()),
        };
        assert_eq!(code(&via_fetch), SOFTWARE);
    }

    #[test]
    fn panic_messages_show_urls_redacted() {
        let check = |text: &str, expected: &str| assert_eq!(redact_urls(text), expected, "{text}");
        check("no url here", "no url here");
        check(
            "bad node https://node.example/v3/SECRET-KEY-0123456789 (after 3 tries)",
            "bad node https://node.example/v3/**** (after 3 tries)",
        );
        check(
            "\"postgres://indexer:s3cret@db.example/logslice\", then wss://x.example/ws/v3/k",
            "\"postgres://indexer:****@db.example/logslice\", then wss://x.example/ws/v3/****",
        );
        check(
            "odd ://nothing-before and x://[bad",
            "odd ://**** and x://[bad",
        );
    }

    /// What the child process of [`a_panic_anywhere_exits_70_with_its_message_and_no_secret`] does, read
    /// from this variable: where to panic.
    const PANIC_CHILD_ENV: &str = "LOGSLICE_TEST_PANIC_CHILD";

    const KEY: &str = "SECRET-KEY-0123456789abcdef";

    /// Goal: a panic on the main thread, in a spawned task or on the blocking pool ends the binary with 70
    /// and its message, the API key in it redacted. Method: this test runs its own test binary again as a
    /// child with [`PANIC_CHILD_ENV`] set; the child installs the hook as `main` does and panics where told;
    /// the parent reads the child's exit status and stderr.
    #[test]
    fn a_panic_anywhere_exits_70_with_its_message_and_no_secret() {
        if let Ok(place) = std::env::var(PANIC_CHILD_ENV) {
            exit_on_panic();
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .build()
                .expect("a runtime");
            let message = format!("lost range 5-9 asking https://node.example/v3/{KEY}");
            runtime.block_on(async move {
                match place.as_str() {
                    "task" => {
                        let _ = tokio::spawn(async move { panic!("{message}") }).await;
                    }
                    "blocking" => {
                        let _ = tokio::task::spawn_blocking(move || panic!("{message}")).await;
                    }
                    _ => panic!("{message}"),
                }
            });
            unreachable!("the hook exits");
        }
        for place in ["main", "task", "blocking"] {
            let output =
                std::process::Command::new(std::env::current_exe().expect("the test binary"))
                    .args([
                        "--exact",
                        "exit::tests::a_panic_anywhere_exits_70_with_its_message_and_no_secret",
                        "--nocapture",
                    ])
                    .env(PANIC_CHILD_ENV, place)
                    .output()
                    .expect("the child runs");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(
                output.status.code(),
                Some(i32::from(SOFTWARE)),
                "{place}: {stderr}"
            );
            assert!(
                stderr.contains(
                    "internal error (a bug in logslice; please report it): lost range 5-9 asking \
                     https://node.example/v3/**** (at src/exit.rs:"
                ),
                "{place}: {stderr}"
            );
            assert!(!stderr.contains(KEY), "{place}: the key leaked: {stderr}");
        }
    }
}
