//! When the secondary indexes are built after a backfill instead of maintained row by row (how is
//! `sink`'s: `Sink::defer_indexes`, `Sink::build_indexes`).
//!
//! A backfill defers them when it has at least `sync.defer_indexes_min_blocks` blocks ahead and at least as
//! many as the database already covers ([`defers`]): building an index reads every row stored, so a short
//! catch-up over a large database keeps its indexes, while a first backfill, or one that at least doubles
//! the database, builds them once at the end. They are built as soon as the backfill reaches its target,
//! before `sync` exits 0 and before `run` follows the head, and on any later start whose backfill is done
//! (a run killed before or during the build).

use crate::primitives::BlockNumber;
use crate::sink::{self, Sink};

use super::Job;

/// Whether a backfill of `ahead` blocks, over a database whose contracts cover at most `covered` blocks,
/// builds the secondary indexes at its end instead of maintaining them (see the module's docs).
pub(super) fn defers(ahead: u64, covered: u64, min_blocks: u64) -> bool {
    ahead >= min_blocks && ahead >= covered
}

/// Defers the secondary indexes if the backfill of `job` up to `end` is long ([`defers`]).
///
/// # Errors
/// As [`Sink::defer_indexes`].
pub(super) async fn defer_for_backfill(
    sink: &mut Sink,
    job: &Job,
    end: BlockNumber,
    min_blocks: u64,
) -> Result<(), sink::Error> {
    let Some(start) = job.start(end) else {
        return Ok(());
    };
    let ahead = end - start + 1;
    let covered = job
        .contracts
        .iter()
        .map(|c| c.next.saturating_sub(c.start_block))
        .max()
        .unwrap_or(0);
    if !defers(ahead, covered, min_blocks) {
        return Ok(());
    }
    let deferred = sink.defer_indexes().await?;
    if !deferred.is_empty() {
        tracing::info!(
            indexes = %deferred.join(", "),
            blocks = ahead,
            "secondary indexes deferred: built once the backfill reaches its target"
        );
    }
    Ok(())
}

/// Builds the deferred secondary indexes, if any.
///
/// # Errors
/// As [`Sink::build_indexes`].
pub(super) async fn build_deferred(sink: &mut Sink) -> Result<(), sink::Error> {
    for (index, took) in sink.build_indexes().await? {
        tracing::info!(index, secs = took.as_secs_f64(), "built index");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::defers;

    #[test]
    fn a_long_backfill_over_a_small_database_defers_the_indexes() {
        // (ahead, covered, min_blocks) -> defers
        let check = |ahead, covered, min_blocks, expected: bool| {
            assert_eq!(
                defers(ahead, covered, min_blocks),
                expected,
                "{ahead} {covered} {min_blocks}"
            );
        };
        check(200_000, 0, 10_000, true);
        check(10_000, 0, 10_000, true);
        check(9_999, 0, 10_000, false);
        // A cron catch-up over a large database keeps its indexes.
        check(50_000, 1_000_000, 10_000, false);
        check(1_000_000, 1_000_000, 10_000, true);
    }
}
