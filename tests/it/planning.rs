//! The planner end to end: what a sync asks the node for, on chains shaped to make it guess wrong.

use logslice::pipeline::Target;

use crate::both_backends;
use crate::support::{self, all_contracts, assert_db_matches_truth, node_config, Backend, Workdir};

/// Goal: on a chain too short for the lookahead survey to pay, a refused range is surveyed on the spot
/// instead of halved blind. Method: 20,000 blocks at a fifth of the default density behind a node that
/// suggests no range; the first range holds 767 logs in 2,000 blocks, too few for the lookahead, and the
/// next opens with a dense burst. Narrowed from its start without a survey, every probe held the burst
/// (seven refusals in a row): the node served this sync 33 HTTP requests, 12 of them refused. With a probe from the first answer, one
/// spot survey shows where the burst is: 13 requests, 2 refused. The database equals the truth.
async fn a_short_chain_surveys_a_refused_range_instead_of_halving_it(backend: Backend) {
    let mut config = node_config(20_000);
    config.chain.density = 0.2;
    let node = support::start(config).await;
    let work = Workdir::with(backend).await;
    let path = work.write_config(&node.http_url(), &all_contracts(), "", "");
    support::sync(&path, Target::Number(19_900))
        .await
        .expect("sync succeeds");
    let stats = node.stats();
    let refused = stats.errors_with(-32005);
    assert!(refused <= 5, "{refused} refusals: {}", stats.summary());
    assert_db_matches_truth(&work, &node.truth(), &all_contracts(), 19_900).await;
}
both_backends!(a_short_chain_surveys_a_refused_range_instead_of_halving_it);
