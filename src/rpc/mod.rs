//! JSON-RPC 2.0 client over HTTP or WebSocket: one request, one answer, typed.
//!
//! `rpc` reports what happened; callers decide what it means through [`Error::class`]. Nothing here retries,
//! rate-limits or splits ranges (that is `fetch` and `planner`), and no error or log line carries the URL:
//! the key is in its path.

mod answer;
mod error;
mod frames;
mod http;
mod receipts;
mod transactions;
mod types;
mod wire_log;
mod ws;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::value::RawValue;

pub use crate::primitives::Log;
pub use error::{Class, Error, SplitReason};
pub use receipts::{BlockTxHashes, Receipt};
pub use transactions::{BlockTransactions, Transaction};
pub use types::{parse_quantity, BlockTag, Blocks, Header, LogFilter, Quantity};

use crate::config::SecretUrl;
use answer::{parse_logs, parse_response};

/// Per-request limits of a client.
#[derive(Debug, Clone, Copy)]
pub struct ClientOptions {
    /// A request with no complete answer after this fails with [`Error::Timeout`].
    pub request_timeout: Duration,
    /// An answer larger than this fails with [`Error::TooLarge`].
    pub max_response_bytes: usize,
    /// Idle connections kept per host (HTTP).
    pub max_idle_connections: usize,
}

/// Answers are read and parsed one at a time. The rest wait with their headers received (HTTP) or their
/// message queued (WebSocket): a body and its parsed logs take about 10 MB for a 10,000-log answer, and letting
/// all `max_concurrency` of them coincide made peak memory depend on how long a backfill ran, not on the window
/// (docs/BENCHMARKS.md). Reading and parsing take milliseconds and the node's time is spent before the
/// headers, so one at a time keeps the fetch-only ceiling (about ten times the store's) where it was, and
/// the peaks lower: a block over the cap asks for its two filter halves at once, and their answers no longer
/// coincide.
///
/// One at a time also lets every HTTP answer be read into the same buffer ([`AnswerSlot`]): a fresh one of
/// several megabytes is mapped, faulted in and zeroed page by page, which was a third of the page faults of
/// a sync (docs/BENCHMARKS.md).
pub(crate) type AnswerSlot = tokio::sync::Mutex<Vec<u8>>;

/// The capacity the answer buffer keeps between answers: past it (an answer far larger than a full
/// 10,000-log one) the buffer is let go, so that one outlier does not stay resident for the whole run.
pub(crate) const MAX_KEPT_ANSWER_BYTES: usize = 16 << 20;

/// A JSON-RPC client.
pub struct Client {
    transport: Transport,
    options: ClientOptions,
    next_id: AtomicU64,
    /// Held to read and parse an answer, with the buffer HTTP answers are read into ([`AnswerSlot`]).
    answers: AnswerSlot,
}

enum Transport {
    Http(http::HttpTransport),
    Ws(ws::WsTransport),
}

impl Client {
    /// A client that POSTs to `url`. Makes no request yet.
    ///
    /// # Errors
    /// [`Error::Connect`] when the HTTP client cannot be built (no TLS roots).
    pub fn http(url: &SecretUrl, options: ClientOptions) -> Result<Self, Error> {
        Ok(Self::with(
            Transport::Http(http::HttpTransport::new(url.clone(), options)?),
            options,
        ))
    }

    /// A client that sends every request over one WebSocket to `url`, reconnecting when it drops.
    /// Connects on the first request.
    pub fn ws(url: &SecretUrl, options: ClientOptions) -> Self {
        Self::with(
            Transport::Ws(ws::WsTransport::new(url.clone(), options)),
            options,
        )
    }

    fn with(transport: Transport, options: ClientOptions) -> Self {
        Self {
            transport,
            options,
            next_id: AtomicU64::new(1),
            answers: AnswerSlot::new(Vec::new()),
        }
    }

    /// Calls `method` once and parses its result.
    ///
    /// # Errors
    /// Any [`Error`]; classify it with [`Error::class`].
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future abandons the request; its answer, if any, is discarded.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: serde_json::Value,
    ) -> Result<T, Error> {
        self.call_with(method, params, parse_response).await
    }

    /// [`Self::call`], its answer read by `parse`.
    async fn call_with<T>(
        &self,
        method: &'static str,
        params: serde_json::Value,
        parse: fn(&'static str, &[u8]) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
                .to_string();
        tokio::time::timeout(self.options.request_timeout, async {
            match &self.transport {
                Transport::Http(http) => {
                    let answer = http.post(body, &self.answers).await?;
                    parse(method, answer.bytes())
                }
                Transport::Ws(ws) => {
                    let message = ws.request(id, body).await?;
                    let _turn = self.answers.lock().await;
                    parse(method, &message)
                }
            }
        })
        .await
        .map_err(|_| Error::Timeout(self.options.request_timeout))?
    }

    /// `eth_chainId`.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn chain_id(&self) -> Result<u64, Error> {
        self.call::<Quantity>("eth_chainId", serde_json::json!([]))
            .await
            .map(|q| q.0)
    }

    /// `eth_blockNumber`.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn block_number(&self) -> Result<u64, Error> {
        self.call::<Quantity>("eth_blockNumber", serde_json::json!([]))
            .await
            .map(|q| q.0)
    }

    /// `eth_getBlockByNumber(tag, false)`: `None` when the node does not know the block.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn header(&self, tag: BlockTag) -> Result<Option<Header>, Error> {
        self.call(
            "eth_getBlockByNumber",
            serde_json::json!([tag.to_param(), false]),
        )
        .await
    }

    /// Whether [`Self::headers`] can be used (batches go over HTTP only: the WebSocket transport matches one
    /// answer per message by id).
    pub fn supports_batches(&self) -> bool {
        matches!(self.transport, Transport::Http(_))
    }

    /// `eth_getBlockByNumber(n, false)` for every block of `numbers`, in one JSON-RPC batch request, in the
    /// order asked; `None` where the node does not know the block.
    ///
    /// # Errors
    /// [`Error::BatchRefused`] when the node refuses batches as such (see `Error::of_whole_batch`:
    /// refusal codes and wordings, HTTP 400/405/413/501, one answer for the whole batch, an answer that is
    /// not one response per call) and over WebSocket (see [`Self::supports_batches`]); otherwise the
    /// first error answer of any call, or the request's own failure (a 429, a timeout...), as [`Self::call`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Self::call`].
    pub async fn headers(&self, numbers: &[u64]) -> Result<Vec<Option<Header>>, Error> {
        self.blocks_batch(numbers, false).await
    }

    /// `eth_getBlockByNumber(n, true)` for every block of `numbers` in one batch, as [`Self::headers`]: the
    /// blocks with their full transactions.
    ///
    /// # Errors
    /// As [`Self::headers`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Self::call`].
    pub async fn blocks_with_transactions(
        &self,
        numbers: &[u64],
    ) -> Result<Vec<Option<BlockTransactions>>, Error> {
        self.blocks_batch(numbers, true).await
    }

    /// `eth_getBlockByNumber(tag, true)`: the block with its full transactions, `None` when unknown.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn block_with_transactions(
        &self,
        tag: BlockTag,
    ) -> Result<Option<BlockTransactions>, Error> {
        self.call(
            "eth_getBlockByNumber",
            serde_json::json!([tag.to_param(), true]),
        )
        .await
    }

    async fn blocks_batch<T: DeserializeOwned>(
        &self,
        numbers: &[u64],
        full: bool,
    ) -> Result<Vec<Option<T>>, Error> {
        let params = numbers
            .iter()
            .map(|&number| serde_json::json!([BlockTag::Number(number).to_param(), full]))
            .collect();
        self.batch::<Option<T>>("eth_getBlockByNumber", params)
            .await
    }

    /// `method` once for each of `params`, in one JSON-RPC batch request, the results in the order asked.
    ///
    /// # Errors
    /// As [`Self::headers`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`Self::call`].
    pub async fn batch<T: DeserializeOwned>(
        &self,
        method: &'static str,
        params: Vec<serde_json::Value>,
    ) -> Result<Vec<T>, Error> {
        let Transport::Http(http) = &self.transport else {
            return Err(Error::BatchRefused {
                detail: "batches go over HTTP only".into(),
            });
        };
        let n = params.len();
        let first_id = self.next_id.fetch_add(n as u64, Ordering::Relaxed);
        let calls: Vec<serde_json::Value> = params
            .into_iter()
            .zip(first_id..)
            .map(|(params, id)| {
                serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
            })
            .collect();
        let body = serde_json::Value::Array(calls).to_string();
        tokio::time::timeout(self.options.request_timeout, async {
            let answer = http
                .post(body, &self.answers)
                .await
                .map_err(Error::of_batch_request)?;
            parse_batch(method, answer.bytes(), first_id, n)
        })
        .await
        .map_err(|_| Error::Timeout(self.options.request_timeout))?
    }

    /// `eth_getLogs`.
    ///
    /// # Errors
    /// Any [`Error`]; a range too large for the node classifies as [`Class::Split`].
    pub async fn get_logs(&self, filter: &LogFilter) -> Result<Vec<Log>, Error> {
        self.call_with(
            "eth_getLogs",
            serde_json::json!([filter.to_json()]),
            parse_logs,
        )
        .await
    }
}

/// The answers of a batch of `n` calls with ids `first_id..`, in call order (a node may answer in any order).
fn parse_batch<T: DeserializeOwned>(
    method: &'static str,
    body: &[u8],
    first_id: u64,
    n: usize,
) -> Result<Vec<T>, Error> {
    #[derive(Deserialize)]
    struct Id {
        id: u64,
    }
    let refused = |detail: &str| Error::BatchRefused {
        detail: detail.into(),
    };
    let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(body) else {
        // One object for a whole batch: the node refused it, failed it as a whole (a rate limit), or
        // answered as if it were one call. An answer that is no JSON-RPC at all is garbled, as for one call.
        return Err(match parse_response::<serde_json::Value>(method, body) {
            Err(err @ Error::Malformed { .. }) => err,
            Err(err) => err.of_whole_batch(),
            Ok(_) => refused("one answer to a batch of calls"),
        });
    };
    // A node that answers some calls twice, others not at all or under other ids does not do batches right;
    // one by one, it may.
    let mut slots: Vec<Option<T>> = (0..n).map(|_| None).collect();
    for item in items {
        let slot = serde_json::from_str::<Id>(item.get())
            .ok()
            .and_then(|Id { id }| id.checked_sub(first_id))
            .and_then(|idx| slots.get_mut(usize::try_from(idx).ok()?))
            .filter(|slot| slot.is_none())
            .ok_or_else(|| refused("an answer with an id that was not asked, or asked once"))?;
        *slot = Some(parse_response(method, item.get().as_bytes()).map_err(Error::of_batch_item)?);
    }
    slots
        .into_iter()
        .map(|slot| slot.ok_or_else(|| refused("a call of the batch was not answered")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_result_is_none_and_a_missing_one_is_malformed() {
        let null: Option<Header> = parse_response(
            "eth_getBlockByNumber",
            br#"{"jsonrpc":"2.0","id":1,"result":null}"#,
        )
        .unwrap();
        assert_eq!(null, None);
        let missing = parse_response::<Option<Header>>(
            "eth_getBlockByNumber",
            br#"{"jsonrpc":"2.0","id":1}"#,
        );
        assert!(matches!(missing, Err(Error::Malformed { .. })));
    }

    /// How a batch of two calls (ids 7 and 8) answered with `body` ends: `Ok` with the answers, or the
    /// error's class and whether it refuses batches as such.
    fn check_batch(body: &str, expected: Result<Vec<Option<u64>>, (bool, Class)>) {
        let parsed = parse_batch::<Option<Quantity>>("eth_getBlockByNumber", body.as_bytes(), 7, 2);
        let actual = match parsed {
            Ok(answers) => Ok(answers.into_iter().map(|q| q.map(|q| q.0)).collect()),
            Err(err) => Err((matches!(err, Error::BatchRefused { .. }), err.class())),
        };
        assert_eq!(actual, expected, "{body}");
    }

    #[test]
    fn a_refusal_of_the_batch_as_such_is_told_apart_from_a_failure_of_this_one() {
        const RETRY: Class = Class::Retry { after: None };
        let refused = Err((true, Class::Fatal));
        check_batch(
            r#"[{"jsonrpc":"2.0","id":8,"result":"0x2"},{"jsonrpc":"2.0","id":7,"result":null}]"#,
            Ok(vec![None, Some(2)]),
        );
        // Refusals: one error object for the batch, whatever its code, or one success object.
        for body in [
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"batch requests are not supported"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large: 200 calls, at most 100"}}"#,
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"batch size too large"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"result":"0x1"}"#,
            // Answers that do not match the calls.
            r#"[{"jsonrpc":"2.0","id":7,"result":"0x1"}]"#,
            r#"[{"jsonrpc":"2.0","id":7,"result":"0x1"},{"jsonrpc":"2.0","id":7,"result":"0x1"}]"#,
            r#"[{"jsonrpc":"2.0","id":7,"result":"0x1"},{"jsonrpc":"2.0","id":99,"result":"0x1"}]"#,
            // Each call answered with a refusal of batches.
            r#"[{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Batch requests are disabled"}},{"jsonrpc":"2.0","id":8,"result":"0x1"}]"#,
        ] {
            check_batch(body, refused.clone());
        }
        // Failures of this request, to be retried: rate limits as one object or per call, internal errors.
        check_batch(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"project ID request rate exceeded"}}"#,
            Err((false, RETRY)),
        );
        check_batch(
            r#"[{"jsonrpc":"2.0","id":7,"error":{"code":-32005,"message":"project ID request rate exceeded"}},{"jsonrpc":"2.0","id":8,"result":"0x1"}]"#,
            Err((false, RETRY)),
        );
        check_batch(
            r#"[{"jsonrpc":"2.0","id":7,"result":"0x1"},{"jsonrpc":"2.0","id":8,"error":{"code":-32603,"message":"internal error"}}]"#,
            Err((false, RETRY)),
        );
        check_batch(
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":"batch rate limit exceeded"}}"#,
            Err((false, RETRY)),
        );
        // Garbage (a proxy's HTML page) is garbled like any answer: retried.
        check_batch("<html>bad gateway</html>", Err((false, RETRY)));
    }

    #[test]
    fn http_statuses_that_refuse_a_batch_are_told_apart_from_transient_ones() {
        let http = |status| Error::Http {
            status,
            retry_after: None,
        };
        for status in [400, 405, 413, 501] {
            assert!(
                matches!(http(status).of_batch_request(), Error::BatchRefused { .. }),
                "{status}"
            );
        }
        for status in [401, 404, 408, 429, 500, 502, 503] {
            assert_eq!(http(status).of_batch_request(), http(status), "{status}");
        }
        let dropped = Error::Dropped {
            detail: "eof".into(),
        };
        assert_eq!(dropped.clone().of_batch_request(), dropped);
    }

    #[test]
    fn an_error_object_becomes_an_rpc_error_with_its_data() {
        let body =
            br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"limit","data":{"a":1}}}"#;
        let err = parse_response::<Quantity>("eth_getLogs", body).unwrap_err();
        assert_eq!(
            err,
            Error::Rpc {
                code: -32005,
                message: "limit".into(),
                data: Some(r#"{"a":1}"#.into())
            }
        );
    }
}
