//! SQLite's WAL checkpoints, moved off the writer: a second connection copies committed pages from the
//! write-ahead log into the database file while the writer goes on with the next batch.
//!
//! With `wal_autocheckpoint` the commit that crosses the threshold copies the whole log back itself: a
//! third of the store's time in a backfill (measured: 6.2 s of 20 s for a million logs, the fsync of the
//! database file included), during which nothing else is written. Here the writer asks for a `PASSIVE`
//! checkpoint after each commit and does not wait for it. A passive checkpoint never blocks the writer or a
//! reader; it copies what is committed and returns.
//!
//! The log file only starts over when a transaction begins after a checkpoint has copied all of it, so
//! once a checkpoint reports [`MAX_WAL_BYTES`] the writer waits for the checkpoint it asked for last before
//! it begins the next transaction, and the log stays bounded (a reader that keeps an old snapshot open holds
//! it back, as with `wal_autocheckpoint`). A pass, with the fsync of the database file, spans several
//! commits, so the log peaks at a few times that: 185 MB in a million-log backfill, against 64 MB plus one
//! batch before. The writer connection keeps `wal_autocheckpoint` at [`BACKSTOP_FRAMES`] in case this task is
//! gone.
//!
//! Not here: what is written, transactions, or any other connection's statements.

use sqlx::SqlitePool;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Bytes of pages in the log after which the writer waits for the checkpoint before its next transaction:
/// the log size the writer used to checkpoint at itself (16,384 pages of 4 KiB). In bytes, not frames,
/// because databases of 4 KiB pages (created before 16 KiB) and of 16 KiB pages are both written.
pub(super) const MAX_WAL_BYTES: u64 = 64 << 20;

/// The writer's own `wal_autocheckpoint`, in pages: never reached while the checkpointer runs (256 MiB of
/// 4 KiB pages, 1 GiB of 16 KiB pages; the log peaks at a few times [`MAX_WAL_BYTES`]).
pub(super) const BACKSTOP_FRAMES: u64 = 65_536;

/// What the last checkpoint saw.
#[derive(Debug, Clone, Copy, Default)]
struct Pass {
    /// The request it answered.
    request: u64,
    /// Bytes of pages in the log when it ran.
    wal_bytes: u64,
}

/// The writer's handle on the checkpointing task. Dropping it ends the task.
pub(super) struct Checkpointer {
    /// Requests, numbered: the task checkpoints after each change.
    requested: watch::Sender<u64>,
    /// The last finished pass.
    finished: watch::Receiver<Pass>,
    task: JoinHandle<()>,
}

impl Checkpointer {
    /// Starts checkpointing through `pool`, a connection of its own to the writer's database.
    pub(super) fn start(pool: SqlitePool) -> Self {
        let (requested, requests) = watch::channel(0);
        let (passes, finished) = watch::channel(Pass::default());
        let task = tokio::spawn(run(pool, requests, passes));
        Self {
            requested,
            finished,
            task,
        }
    }

    /// After a commit: asks for a checkpoint, without waiting for it.
    pub(super) fn committed(&self) {
        self.requested.send_modify(|n| *n += 1);
    }

    /// Before a transaction: when the log has grown past [`MAX_WAL_BYTES`], waits until the checkpoint
    /// asked for last has run, so that this transaction starts the log over.
    ///
    /// # Cancel safety
    /// Cancel-safe: it only waits.
    pub(super) async fn before_transaction(&self) {
        let wanted = *self.requested.borrow();
        let last = *self.finished.borrow();
        if last.wal_bytes < MAX_WAL_BYTES || last.request >= wanted {
            return;
        }
        // An error means the task is gone: the backstop autocheckpoint bounds the log then. A receiver of
        // its own: the sinks of several chains share this checkpointer.
        let mut finished = self.finished.clone();
        let _ = finished.wait_for(|pass| pass.request >= wanted).await;
    }

    /// Ends the task after the pass under way, if any.
    pub(super) async fn stop(self) {
        drop(self.requested);
        let _ = self.task.await;
    }
}

async fn run(pool: SqlitePool, mut requests: watch::Receiver<u64>, passes: watch::Sender<Pass>) {
    let mut page_size = None;
    while requests.changed().await.is_ok() {
        let request = *requests.borrow_and_update();
        // (busy, frames in the log, frames checkpointed); busy is 0 for a passive checkpoint.
        let outcome: Result<(i64, i64, i64), _> = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&pool)
            .await;
        // Asked once it answers: a database's page size is fixed once its first table exists.
        if page_size.is_none() {
            page_size = sqlx::query_scalar::<_, i64>("PRAGMA page_size")
                .fetch_one(&pool)
                .await
                .ok()
                .and_then(|size| u64::try_from(size).ok());
        }
        let wal_frames = match outcome {
            Ok((_, frames, _)) => u64::try_from(frames).unwrap_or(0),
            Err(err) => {
                // Nothing is lost: the pages stay in the log, and the next pass (or the backstop) copies them.
                tracing::warn!(cause = %err, "WAL checkpoint failed; retrying after the next commit");
                0
            }
        };
        passes.send_replace(Pass {
            request,
            // SQLite's default page size until the database answers.
            wal_bytes: wal_frames * page_size.unwrap_or(4096),
        });
    }
    pool.close().await;
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
    use sqlx::Executor;

    use super::*;

    async fn connect(options: &SqliteConnectOptions) -> SqlitePool {
        SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await
            .expect("SQLite opens")
    }

    /// Frames in the log now, as a checkpoint that copies nothing reports them.
    async fn wal_frames(pool: &SqlitePool) -> i64 {
        let (_, frames, _): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(NOOP)")
            .fetch_one(pool)
            .await
            .unwrap();
        frames
    }

    /// Goal: the log stays bounded although no commit checkpoints. Method: one commit larger than
    /// [`MAX_WAL_BYTES`], a pass that reports it, then a commit whose pass is still to run: the next
    /// transaction must wait for that pass, and then start the log over.
    #[tokio::test]
    async fn once_the_log_outgrows_the_limit_the_next_transaction_waits_and_starts_it_over() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::from_str("sqlite://wal.db")
            .unwrap()
            .filename(dir.path().join("wal.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .pragma("wal_autocheckpoint", BACKSTOP_FRAMES.to_string());
        let writer = connect(&options).await;
        let mut checkpointer = Checkpointer::start(connect(&options).await);
        writer.execute("CREATE TABLE t (b BLOB)").await.unwrap();

        let big = format!(
            "INSERT INTO t VALUES (zeroblob({}))",
            MAX_WAL_BYTES + (1 << 20)
        );
        writer.execute(big.as_str()).await.unwrap();
        checkpointer.committed();
        let reported = checkpointer
            .finished
            .wait_for(|pass| pass.request >= 1)
            .await
            .map(|pass| *pass)
            .unwrap();
        assert!(reported.wal_bytes > MAX_WAL_BYTES, "{reported:?}");

        writer
            .execute("INSERT INTO t VALUES (zeroblob(4096))")
            .await
            .unwrap();
        checkpointer.committed();
        checkpointer.before_transaction().await;
        assert!(
            checkpointer.finished.borrow().request >= 2,
            "the writer went on before the checkpoint it asked for"
        );
        writer.execute("INSERT INTO t VALUES (1)").await.unwrap();
        let frames = wal_frames(&writer).await;
        assert!(frames < 16, "the log did not start over: {frames} frames");

        checkpointer.stop().await;
        writer.close().await;
    }

    /// Goal: below the limit the writer never waits for a checkpoint.
    #[tokio::test]
    async fn below_the_limit_the_writer_does_not_wait() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("wal.db"))
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal);
        let writer = connect(&options).await;
        let checkpoints = connect(&options).await;
        // Hold the checkpointer's only connection, so no pass can run until it is given back.
        let held = checkpoints.acquire().await.unwrap();
        let checkpointer = Checkpointer::start(checkpoints.clone());
        writer.execute("CREATE TABLE t (b BLOB)").await.unwrap();
        checkpointer.committed();
        checkpointer.before_transaction().await;
        assert_eq!(checkpointer.finished.borrow().request, 0);
        drop(held);
        checkpointer.stop().await;
        writer.close().await;
    }
}
