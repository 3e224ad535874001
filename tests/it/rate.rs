//! The request rate as the node sees it (issue #21): at `requests_per_second = 20`, a sync whose blocks above
//! finality are read in header batches never has the node count more than 20 calls in any second (each call
//! of a batch counted), meets none of the node's own rate limit, and still matches the ground truth.

use logslice::pipeline::Target;

use crate::shutdown::write_config;
use crate::support::{self, all_contracts, assert_db_matches_truth, node_config, Workdir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_second_holds_more_calls_than_requests_per_second_batch_items_counted() {
    let mut config = node_config(3_000);
    // The node enforces the same limit itself, per request: a client over it would meet 429s.
    config.faults.max_rps = Some(20);
    let node = support::start(config).await;
    let truth = node.truth();
    let work = Workdir::new();
    let path = write_config(
        &work,
        &node.http_url(),
        "requests_per_second = 20\nmax_retries = 8\ninitial_backoff = \"50ms\"\nmax_backoff = \"2s\"",
        "initial_block_range = 500\nmax_block_range = 1000",
        &all_contracts(),
    );
    let report = support::sync(&path, Target::Latest)
        .await
        .expect("the sync succeeds");
    let head = truth.head();
    assert_eq!(report.target, head);
    assert_db_matches_truth(&work, &truth, &all_contracts(), head).await;
    let stats = node.stats();
    assert!(
        stats.max_calls_per_second <= 20,
        "the node counted {} calls within one second: {stats:#?}",
        stats.max_calls_per_second
    );
    // The 65 headers from the finalized block to the head went in batches of a second's budget.
    assert_eq!(stats.largest_batch, 20, "{stats:#?}");
    assert_eq!(stats.rate_limited, 0, "the node had to refuse: {stats:#?}");
    assert_eq!(stats.status(429), 0, "{stats:#?}");
}
