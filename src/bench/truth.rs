//! What `bench` derives from the simulated chain's ground truth: the chunks the store-only phase commits and
//! the fewest requests the result cap allows (the lower bound every phase's requests are set against).

use crate::devnode::GroundTruth;
use crate::fetch::Fetched;
use crate::primitives::{BlockRange, Log, Topics};

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

/// The fewest `eth_getLogs` requests that can cover the chain: contiguous ranges of at most 10,000 logs and
/// `max_span` blocks (greedy is optimal for this partition), and `ceil(n / 10,000)` requests for a block
/// with `n` over the cap.
pub fn fewest_requests(truth: &GroundTruth, max_span: u64) -> u64 {
    const CAP: u64 = 10_000;
    let mut requests = 0;
    let (mut in_range_logs, mut in_range_blocks) = (0u64, 0u64);
    for block in 0..=truth.head() {
        let n = truth.log_count(block) as u64;
        if n > CAP {
            if in_range_blocks > 0 {
                requests += 1;
            }
            requests += n.div_ceil(CAP);
            (in_range_logs, in_range_blocks) = (0, 0);
            continue;
        }
        if in_range_blocks > 0 && (in_range_logs + n > CAP || in_range_blocks + 1 > max_span) {
            requests += 1;
            (in_range_logs, in_range_blocks) = (0, 0);
        }
        in_range_logs += n;
        in_range_blocks += 1;
    }
    requests + u64::from(in_range_blocks > 0)
}
