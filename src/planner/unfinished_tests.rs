//! [`Planner::unfinished`]: the blocks a planner names as not done, which a caller that stops early reports
//! instead of moving its checkpoint past them.

use super::tests::{range, CONFIG};
use super::*;

#[test]
fn names_every_block_not_done_in_block_order_until_the_plan_is_finished() {
    let mut planner = Planner::new(CONFIG, range(0, 999), []);
    assert_eq!(planner.unfinished(), [range(0, 999)]);
    let first = planner.next_range().expect("a first range");
    assert_eq!(first, range(0, 99));
    assert_eq!(
        planner.unfinished(),
        [range(0, 999)],
        "a range handed out and the blocks never handed out are joined"
    );
    planner.report(first, Outcome::Logs { n: 0 });
    let second = planner.next_range().expect("a second range");
    assert_eq!(
        planner.report(second, Outcome::TooManyResults { suggested: None }),
        Verdict::Split
    );
    assert_eq!(
        planner.unfinished(),
        [range(100, 999)],
        "split pieces count"
    );
    while let Some(next) = planner.next_range() {
        assert_eq!(
            planner.unfinished().first().map(|r| r.start()),
            Some(next.start())
        );
        planner.report(next, Outcome::Logs { n: 0 });
    }
    assert!(planner.is_finished());
    assert_eq!(planner.unfinished(), []);
}

#[test]
fn a_range_held_back_is_named_and_the_plan_never_finishes() {
    let mut planner = Planner::new(CONFIG, range(0, 999), []);
    planner.hold_back(100);
    let first = planner.next_range().expect("a first range");
    planner.report(first, Outcome::Logs { n: 0 });
    assert_eq!(planner.next_range(), None, "the held range never goes out");
    assert!(!planner.is_finished());
    assert_eq!(planner.unfinished(), [range(100, 999)]);
}
