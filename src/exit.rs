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

/// The exit code for a job's error.
pub fn code(err: &Error) -> u8 {
    match err {
        Error::Config(_) => CONFIG,
        Error::NodeData(_) => DATA,
        Error::NotYet(_) => TEMPFAIL,
        Error::Interrupted => INTERRUPTED,
        Error::Database {
            source: sink::Error::Mismatch(_),
            ..
        } => CONFIG,
        Error::Database { .. } => IO,
        Error::Node { source, .. } => match source {
            fetch::Error::Rejected { .. } => UNAVAILABLE,
            fetch::Error::Exhausted { source, .. } if source.class() == Class::Unreachable => {
                UNAVAILABLE
            }
            fetch::Error::Exhausted { .. } => TEMPFAIL,
            fetch::Error::Interrupted => INTERRUPTED,
            fetch::Error::Fatal { .. }
            | fetch::Error::BlockOverflow { .. }
            | fetch::Error::Inconsistent(_)
            | fetch::Error::Split(_) => DATA,
        },
    }
}
