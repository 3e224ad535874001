use alloy_primitives::{Address, Bytes, B256};
use proptest::prelude::*;

use super::*;
use crate::fetch::Group;
use crate::rpc::Blocks;

/// A log at `(block, log_index)` whose content (data) is `content`, of block hash `block`.
fn log(block: u64, log_index: u64, content: u8) -> Log {
    Log {
        block_hash: B256::with_last_byte(block as u8),
        data: Bytes::from(vec![content]),
        ..Log::blank(block, log_index)
    }
}

fn positions(logs: &[Log]) -> Vec<(u64, u64)> {
    logs.iter().map(|l| (l.block_number, l.log_index)).collect()
}

/// `in_log_order(input)` gives `expected` logs and repeats, or the conflict.
fn check(mut input: Vec<Log>, expected: Result<(Vec<Log>, usize), Conflict>) {
    let result = in_log_order(&mut input).map(|n_repeats| (input, n_repeats));
    assert_eq!(result, expected);
}

#[test]
fn an_answer_delivered_twice_is_kept_once() {
    let once = vec![log(1, 0, 1), log(1, 1, 2), log(2, 0, 3)];
    let twice = [once.clone(), once.clone()].concat();
    check(twice, Ok((once.clone(), 3)));
    let each_twice: Vec<Log> = once.iter().flat_map(|l| [l.clone(), l.clone()]).collect();
    check(each_twice, Ok((once.clone(), 3)));
    check(once.clone(), Ok((once, 0)));
    check(Vec::new(), Ok((Vec::new(), 0)));
}

#[test]
fn two_different_logs_at_one_position_are_a_conflict_naming_it() {
    let conflict = Conflict {
        block: 2,
        log_index: 0,
        hashes: [B256::with_last_byte(2); 2],
    };
    check(
        vec![log(1, 0, 1), log(2, 0, 3), log(2, 0, 4)],
        Err(conflict.clone()),
    );
    assert!(!conflict.of_two_blocks());
    assert!(conflict
        .to_string()
        .starts_with("the node answered two different logs at block 2 log index 0"));
    // Another transaction, another address, another topic, another timestamp: each is another log.
    let base = log(2, 0, 3);
    let others = [
        Log {
            transaction_index: 1,
            ..base.clone()
        },
        Log {
            transaction_hash: B256::repeat_byte(9),
            ..base.clone()
        },
        Log {
            address: Address::repeat_byte(9),
            ..base.clone()
        },
        Log {
            topics: [B256::repeat_byte(9)].into(),
            ..base.clone()
        },
        Log {
            block_timestamp: Some(5),
            ..base.clone()
        },
    ];
    for other in others {
        let mut pair = vec![
            Log {
                block_timestamp: Some(4),
                ..base.clone()
            },
            Log {
                block_timestamp: other.block_timestamp.or(Some(4)),
                ..other
            },
        ];
        assert!(in_log_order(&mut pair).is_err(), "{pair:?}");
    }
}

#[test]
fn a_log_of_another_block_hash_at_one_position_is_a_conflict_of_two_blocks() {
    let other_block = Log {
        block_hash: B256::repeat_byte(7),
        ..log(2, 0, 3)
    };
    let mut logs = vec![log(2, 0, 3), other_block];
    let conflict = in_log_order(&mut logs).expect_err("two versions of block 2");
    assert!(conflict.of_two_blocks());
    assert_eq!((conflict.block, conflict.log_index), (2, 0));
}

#[test]
fn a_removed_log_of_an_orphaned_block_stands_beside_the_log_at_its_position() {
    let orphaned = Log {
        block_hash: B256::repeat_byte(7),
        removed: true,
        ..log(2, 0, 9)
    };
    let live = log(2, 0, 3);
    let answer = vec![
        orphaned.clone(),
        live.clone(),
        orphaned.clone(),
        live.clone(),
    ];
    check(answer, Ok((vec![live, orphaned], 2)));
}

#[test]
fn a_repeat_lacking_the_timestamp_is_the_same_log_and_lends_it() {
    let stamped = Log {
        block_timestamp: Some(42),
        ..log(1, 0, 1)
    };
    check(
        vec![log(1, 0, 1), stamped.clone()],
        Ok((vec![stamped.clone()], 1)),
    );
    check(vec![stamped.clone(), log(1, 0, 1)], Ok((vec![stamped], 1)));
}

#[test]
fn a_checked_answer_counts_its_repeats() {
    let stats = GateStats::default();
    let range = BlockRange::new(1, 2).unwrap();
    let filter = Group::unfiltered(vec![Address::ZERO], None).filter(Blocks::Range(range));
    let once = vec![log(1, 0, 1), log(2, 0, 3)];
    let logs = checked(
        &stats,
        range,
        &filter,
        [once.clone(), once.clone()].concat(),
    )
    .expect("a repeat is no error");
    assert_eq!(logs, once);
    assert_eq!(stats.repeated_logs.load(Relaxed), 2);
    let err =
        checked(&stats, range, &filter, vec![log(2, 0, 3), log(2, 0, 4)]).expect_err("a conflict");
    assert!(matches!(err, Error::Conflict(_)), "{err}");
    let by_hash = checked_topics(&stats, &filter, once.iter().rev().cloned().collect())
        .expect("put in order");
    assert_eq!(by_hash, once);
}

/// Up to 40 logs at distinct positions over 8 blocks, in order, each of its own content; beside some, the
/// `removed` notice of an orphaned block's log at that position (as a stale replica serves them).
fn distinct_logs() -> impl Strategy<Value = Vec<Log>> {
    let positions = proptest::collection::btree_set((0u64..8, 0u64..16), 0..40);
    (positions, proptest::collection::vec(any::<bool>(), 40)).prop_map(|(positions, notices)| {
        let mut logs = Vec::new();
        for (i, ((block, log_index), notice)) in positions.into_iter().zip(notices).enumerate() {
            logs.push(log(block, log_index, i as u8));
            if notice {
                logs.push(Log {
                    block_hash: B256::repeat_byte(0xee),
                    removed: true,
                    ..log(block, log_index, 0xee)
                });
            }
        }
        logs
    })
}

proptest! {
    /// Whatever the node repeats, in whatever order, the logs come back once each, in order, and the
    /// repeats are counted exactly.
    #[test]
    fn repeats_in_any_order_come_back_once_each(
        logs in distinct_logs(),
        copies in proptest::collection::vec(0usize..3, 80),
        order in any::<u64>(),
    ) {
        let mut answer: Vec<Log> = Vec::new();
        for (log, extra) in logs.iter().zip(&copies) {
            for _ in 0..=*extra {
                answer.push(log.clone());
            }
        }
        let n_extra = answer.len() - logs.len();
        // A fixed permutation from the seed (no RNG state): rotate, then reverse every other half.
        if !answer.is_empty() {
            let len = answer.len();
            answer.rotate_left((order as usize) % len);
            if order % 2 == 1 {
                answer.reverse();
            }
        }
        let n_repeats = in_log_order(&mut answer);
        prop_assert_eq!(n_repeats, Ok(n_extra));
        prop_assert_eq!(&answer, &logs);
        prop_assert!(positions(&answer).windows(2).all(|w| w[0] <= w[1]));
    }

    /// One log with other content at a position already answered is always the conflict at that position.
    #[test]
    fn another_log_at_an_answered_position_is_always_named(
        logs in distinct_logs().prop_filter("a log to conflict with", |logs| !logs.is_empty()),
        pick in any::<prop::sample::Index>(),
    ) {
        let live: Vec<&Log> = logs.iter().filter(|log| !log.removed).collect();
        let target = (*pick.get(&live)).clone();
        let mut answer = logs.clone();
        answer.push(Log { data: Bytes::from(vec![0xff, 0xff]), ..target.clone() });
        let conflict = in_log_order(&mut answer).expect_err("a conflict");
        prop_assert_eq!((conflict.block, conflict.log_index), (target.block_number, target.log_index));
        prop_assert!(!conflict.of_two_blocks());
    }
}
