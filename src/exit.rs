//! Exit codes of `interface.md`, mapped from error classes in one `match`.

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
/// batch that would skip blocks); sysexits' EX_SOFTWARE. Not a code of `interface.md`'s table, whose
/// codes all describe the node, the database or the input: this one says none of them is to blame.
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
            fetch::Error::Panicked(_) | fetch::Error::Unfinished { .. } => SOFTWARE,
            fetch::Error::Fatal { .. }
            | fetch::Error::NoReceipts { .. }
            | fetch::Error::Inconsistent(_)
            | fetch::Error::Conflict(_)
            | fetch::Error::Split(_) => DATA,
        },
    }
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
}
