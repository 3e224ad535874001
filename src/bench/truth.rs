//! What `bench` derives from the simulated chain's ground truth: the chunks the store-only phase commits.

use devnode::GroundTruth;
use logslice::fetch::Fetched;
use logslice::primitives::{BlockRange, Log, Topics};

/// The ground truth up to `head` in the ranges a well-cut backfill fetches (generated lazily): contiguous
/// blocks of at most `target_logs` logs, a block over that alone. This is what the store-only ceiling
/// commits, so its batches are the sync's. Fixed 2,000-block chunks made batches of up to 60,000 logs in the
/// dense bursts: fewer transactions than the sync commits, and a peak RSS 60 MB over the sync's.
pub fn truth_chunks(
    truth: GroundTruth,
    head: u64,
    target_logs: u64,
) -> impl Iterator<Item = Fetched> {
    let mut next = 0u64;
    std::iter::from_fn(move || {
        if next > head {
            return None;
        }
        let start = next;
        let mut logs = truth.log_count(start) as u64;
        let mut end = start;
        while end < head {
            let more = truth.log_count(end + 1) as u64;
            if logs + more > target_logs {
                break;
            }
            logs += more;
            end += 1;
        }
        next = end + 1;
        let range = BlockRange::new(start, end).expect("start <= end");
        // Stamped as the node's `blockTimestamp` would (the store phase measures the database, not headers).
        let timestamp_of = |block| truth.timestamp(block);
        let mut stamped: Option<(u64, Option<u64>)> = None;
        let logs = truth
            .logs(start, end)
            .into_iter()
            .map(|l| Log {
                block_timestamp: match stamped {
                    Some((block, timestamp)) if block == l.block_number => timestamp,
                    _ => {
                        let timestamp = timestamp_of(l.block_number);
                        stamped = Some((l.block_number, timestamp));
                        timestamp
                    }
                },
                block_number: l.block_number,
                block_hash: l.block_hash,
                transaction_hash: l.transaction_hash,
                transaction_index: l.transaction_index,
                log_index: l.log_index,
                address: l.address,
                topics: Topics::from_slice(&l.topics).expect("the devnode emits at most 4 topics"),
                data: l.data,
                removed: false,
            })
            .collect();
        Some(Fetched::from_get_logs(range, logs))
    })
}
