//! A plan left unfinished fails the job: a backfill whose planner holds ranges back (a bug, made here on
//! purpose through `Job::hold_back`) ends with exit 70 naming the blocks left, and no checkpoint moves past
//! them, in the database or in the job. Against a scripted node on loopback that answers every
//! `eth_getLogs` with no logs (a checkpoint moves with every batch all the same), and SQLite in a temp dir.

use std::path::Path;
use std::sync::Arc;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use super::{Ctx, Error, Node, SyncReport};
use crate::fetch;
use crate::observe::Observer;
use crate::primitives::BlockRange;

/// One call's answer: no logs for `eth_getLogs`, "method not found" for anything else.
fn answer_call(call: &Value) -> Value {
    match call["method"].as_str() {
        Some("eth_getLogs") => json!({"jsonrpc": "2.0", "id": call["id"], "result": []}),
        _ => json!({"jsonrpc": "2.0", "id": call["id"],
            "error": {"code": -32601, "message": "the method does not exist"}}),
    }
}

async fn answer(body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).expect("JSON");
    let answered = match request {
        Value::Array(calls) => Value::Array(calls.iter().map(answer_call).collect()),
        call => answer_call(&call),
    };
    axum::Json(answered).into_response()
}

/// Serves [`answer`] on loopback; the address.
async fn serve() -> std::net::SocketAddr {
    let app = axum::Router::new().route("/", axum::routing::post(answer));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}

/// Goal: a planner that never hands out some of its ranges cannot let the backfill move checkpoints past
/// them, in a release build too. Method: a backfill of blocks 0-999 in ranges of 100 whose planner holds
/// back every range from block 500 on; the job must fail with exit 70 naming the blocks left, the
/// database's checkpoint must be the last block before them, and the job's next block must not move.
#[tokio::test]
async fn a_planner_that_holds_ranges_back_fails_the_job_and_no_checkpoint_passes_them() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let addr = serve().await;
    let text = format!(
        "[node]\nurl = \"http://{addr}/\"\nrequests_per_second = 10000\nmax_retries = 2\n\
         initial_backoff = \"1ms\"\nmax_backoff = \"5ms\"\n\
         [database]\nurl = \"sqlite://{}\"\n\
         [sync]\ninitial_block_range = 100\nmax_block_range = 100\nblock_timestamps = false\n\
         [[contracts]]\nname = \"a\"\naddress = \"0x{:040x}\"\nstart_block = 0\n\
         events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]\n",
        dir.path().join("logslice.db").display(),
        1
    );
    let config = crate::config::load_str(Path::new("config.toml"), &text, &|_| None)
        .expect("a valid config");
    let cancel = CancellationToken::new();
    let node = Node::connect(&config.node, &cancel)
        .await
        .expect("connects");
    let observer = Observer::default();
    let mut ctx = Ctx::attach(&config, &observer, Arc::new(node), 1)
        .await
        .expect("the database opens");
    ctx.job.hold_back = Some(500);

    let mut report = SyncReport::default();
    let err = ctx
        .backfill(999, &cancel, &mut report)
        .await
        .expect_err("a plan left unfinished fails the job");

    let Error::Node {
        source: fetch::Error::Unfinished { unfinished, unsent },
        ..
    } = &err
    else {
        panic!("expected an unfinished fetch, got {err:?}");
    };
    let checkpoint = ctx.sink.checkpoints().await.expect("checkpoints")["a"];
    assert!((400..999).contains(&checkpoint), "{checkpoint}");
    assert_eq!(unfinished, &[BlockRange::new(checkpoint + 1, 999).unwrap()]);
    assert!(unsent.is_empty(), "{unsent:?}");
    assert_eq!(crate::exit::code(&err), crate::exit::SOFTWARE);
    assert!(
        err.to_string()
            .contains(&format!("not fetched: [{}, 999]", checkpoint + 1)),
        "{err}"
    );
    assert_eq!(
        ctx.job.contracts[0].next, 0,
        "the job's next block stays where it was, not past the held blocks"
    );
    assert!(
        report.batches > 0,
        "the blocks before the held ones were committed"
    );
}
