//! A burst of a contract the probe does not see: the survey is distrusted over the refused range, the
//! burst's answers stay out of the probe's share, and once an answer after the burst agrees with the
//! survey again, the blocks after it are cut by the survey.

use super::super::survey::Survey;
use super::*;

/// A surveying planner (5% share) whose survey found a probe hit every ten blocks, two logs a block, and the
/// range it cut by that survey, which the node refused with a suggestion of its first 20 blocks: a burst
/// the probe does not see. Returns the planner with that suggestion handed out, and the range.
fn refused_with_a_suggestion() -> (Planner, BlockRange) {
    let mut planner = surveying(range(0, 1_000_000));
    let survey = planner.next_survey().unwrap();
    let hits: Vec<u64> = (survey.range.start()..=survey.range.end())
        .step_by(10)
        .collect();
    let refused = next_range_surveying(&mut planner, survey, &hits);
    assert!(refused.len() > 1_000, "{refused}: cut by the survey");
    let start = refused.start();
    planner.report(
        refused,
        Outcome::TooManyResults {
            suggested: Some((start, start + 19)),
        },
    );
    assert_eq!(planner.next_range(), Some(range(start, start + 19)));
    (planner, refused)
}

/// [`refused_with_a_suggestion`], with the suggested range answered by 4,900 logs.
fn past_a_burst_start() -> (Planner, BlockRange) {
    let (mut planner, refused) = refused_with_a_suggestion();
    let burst = range(refused.start(), refused.start() + 19);
    planner.observe_mix(burst, 4_900, &[2, 4_898]);
    planner.report(burst, Outcome::Logs { n: 4_900 });
    (planner, refused)
}

/// The suggested range's answer holds a hundred times what the survey put in its blocks, so the blocks
/// behind it are cut by its density, not by the survey that put the whole refused range under the cap.
#[test]
fn an_answer_far_over_its_survey_estimate_has_the_blocks_behind_it_cut_by_its_density() {
    let (mut planner, refused) = past_a_burst_start();
    let rest = planner.next_range().unwrap();
    assert_eq!(rest.start(), refused.start() + 20);
    assert!(rest.len() < 20, "{rest}: cut by the survey, blind here");
}

#[test]
fn after_a_burst_an_answer_the_survey_agrees_with_has_the_blocks_after_it_cut_by_the_survey() {
    let (mut planner, refused) = past_a_burst_start();
    // Cut by the burst's density: a few blocks.
    let after = planner.next_range().unwrap();
    // Two logs a block, as the survey says: the burst is over.
    planner.report(after, Outcome::Logs { n: 2 * after.len() });
    let rest = planner.next_range().unwrap();
    assert_eq!(rest.start(), after.end() + 1);
    assert_eq!(
        rest.end(),
        refused.end(),
        "{rest}: the survey put the refused range's rest under the target, and is trusted again"
    );
}

#[test]
fn an_answer_before_any_burst_keeps_the_survey_distrusted() {
    let (mut planner, refused) = past_a_burst_start();
    let after = planner.next_range().unwrap();
    // Still burst-dense: the survey stays distrusted, and the next piece is cut by the answers' density.
    planner.report(
        after,
        Outcome::Logs {
            n: 240 * after.len(),
        },
    );
    let next = planner.next_range().unwrap();
    assert_eq!(next.start(), after.end() + 1);
    assert!(next.len() < 40, "{next}: cut by the burst's density");
    assert!(next.end() < refused.end());
}

#[test]
fn a_burst_answer_does_not_lower_the_probe_share() {
    let (mut planner, refused) = refused_with_a_suggestion();
    let extent = planner.addresses.extent(0, 999);
    let estimate = planner.survey.estimate(100, extent);
    // The suggested range's answer, in the stretch the refusal distrusted: left out of the share.
    let burst = range(refused.start(), refused.start() + 19);
    planner.observe_mix(burst, 4_900, &[2, 4_898]);
    planner.report(burst, Outcome::Logs { n: 4_900 });
    assert_eq!(planner.survey.estimate(100, extent), estimate);
    // Another burst answer there: left out too.
    let after = planner.next_range().unwrap();
    assert!(refused.contains(after.start()));
    planner.observe_mix(after, 4_000, &[1, 3_999]);
    assert_eq!(planner.survey.estimate(100, extent), estimate);
    // An answer where the survey is trusted is counted as ever.
    planner.observe_mix(range(10, 99), 4_000, &[1, 3_999]);
    assert!(planner.survey.estimate(100, extent) > estimate);
}

#[test]
fn overlapping_distrusted_stretches_are_joined() {
    let mut survey = Survey::new(1_000);
    survey.record(range(0, 999), &[]);
    survey.distrust(range(100, 200));
    survey.distrust(range(50, 300));
    survey.distrust(range(280, 400));
    for block in [50, 150, 250, 399] {
        assert!(!survey.covers(block), "{block} is distrusted");
    }
    assert!(survey.covers(49) && survey.covers(401));
}

/// A refused range the survey nearly judged right is not distrusted, but the answer of its first part, far
/// over the survey's count, is a burst all the same: counted, it diluted the share before the stretch was
/// distrusted (behind a suggesting node, the suggested range's answer).
#[test]
fn the_first_part_of_a_refused_range_far_over_its_count_does_not_lower_the_probe_share() {
    let (mut planner, refused) = refused_nearly_right();
    let first = planner.next_range().unwrap();
    assert_eq!(first.start(), refused.start());
    assert!(
        planner.survey.covers(first.start()),
        "not distrusted: the survey nearly judged the refused range right"
    );
    let extent = planner.addresses.extent(0, 999);
    let estimate = planner.survey.estimate(100, extent);
    planner.observe_mix(first, 4_900, &[2, 4_898]);
    assert_eq!(planner.survey.estimate(100, extent), estimate);
}
