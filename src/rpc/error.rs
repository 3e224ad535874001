//! `rpc::Error` and its classification: the one place that decides what a node's answer means.
//!
//! `-32005` alone means three things (too many results, query timeout, and at Infura a rate limit), and other
//! providers word the same conditions under other codes (see `docs/node-service.md`). So classification
//! looks at the code *and* the message, here and nowhere else: callers match on [`Class`], never on strings.

use std::time::Duration;

/// What went wrong with one JSON-RPC call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// The TCP/TLS connection could not be made.
    #[error("cannot connect to the node: {detail}")]
    Connect {
        /// The transport's reason (never contains the URL).
        detail: String,
    },
    /// No complete answer within `node.request_timeout`.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The connection closed before the whole answer arrived.
    #[error("connection dropped: {detail}")]
    Dropped {
        /// The transport's reason.
        detail: String,
    },
    /// An HTTP status other than 200.
    #[error("HTTP {status}{}", retry_after.map(|d| format!(" (Retry-After {}s)", d.as_secs())).unwrap_or_default())]
    Http {
        /// The status code.
        status: u16,
        /// `Retry-After`, when the node sent one in seconds.
        retry_after: Option<Duration>,
    },
    /// A JSON-RPC error object.
    #[error("JSON-RPC error {code}: {message}")]
    Rpc {
        /// `error.code`.
        code: i64,
        /// `error.message`.
        message: String,
        /// `error.data`, as JSON text.
        data: Option<String>,
    },
    /// The answer is not the JSON-RPC response it should be.
    #[error("malformed answer to {method}: {detail}")]
    Malformed {
        /// The method called.
        method: &'static str,
        /// What did not parse.
        detail: String,
    },
    /// The answer exceeded `node.max_response_bytes`.
    #[error("answer larger than node.max_response_bytes ({limit} bytes)")]
    TooLarge {
        /// The configured limit.
        limit: usize,
    },
    /// The node does not take JSON-RPC batches, or answers them wrongly: send the calls one by one.
    #[error("the node refuses batches of calls: {detail}")]
    BatchRefused {
        /// How it refused.
        detail: String,
    },
}

/// Why a range must be split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitReason {
    /// More results than the node returns at once (a density problem).
    TooManyResults,
    /// The query took too long (a cost problem: ease off as well).
    Timeout,
    /// The node limits the span in blocks, whatever the results.
    RangeTooWide,
}

/// What the caller should do about an [`Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The same request cannot succeed: ask for less.
    Split {
        /// Why.
        reason: SplitReason,
        /// A range the node suggested, `(from, to)`, as it gave it (the caller clamps it).
        suggested: Option<(u64, u64)>,
        /// A span limit in blocks the node stated.
        max_blocks: Option<u64>,
    },
    /// Transient: try the same request again after a backoff (at least `after`, when the node said so).
    Retry {
        /// The node's hint: `Retry-After` or `data.rate.backoff_seconds`.
        after: Option<Duration>,
    },
    /// Transient, but the node could not be reached at all: after the last retry this is "unreachable".
    Unreachable,
    /// The API key was rejected: retrying cannot help.
    Rejected,
    /// The node does not know the block the request named (by hash: it was reorged away since the hash
    /// was read). Asking again cannot help; reading the chain again can.
    UnknownBlock,
    /// Cannot succeed and is not about size: stop.
    Fatal,
}

impl Error {
    /// Classifies by code *and* message; every provider wording lives here.
    pub fn class(&self) -> Class {
        match self {
            Error::Connect { .. } => Class::Unreachable,
            Error::Timeout(_) | Error::Dropped { .. } | Error::Malformed { .. } => {
                Class::Retry { after: None }
            }
            // The same batch cannot succeed; the calls one by one can.
            Error::BatchRefused { .. } => Class::Fatal,
            Error::TooLarge { .. } => Class::Split {
                reason: SplitReason::TooManyResults,
                suggested: None,
                max_blocks: None,
            },
            Error::Http {
                status,
                retry_after,
            } => match status {
                401 | 403 => Class::Rejected,
                // 413: the answer would be too large for the provider's proxy.
                413 => Class::Split {
                    reason: SplitReason::TooManyResults,
                    suggested: None,
                    max_blocks: None,
                },
                408 | 425 | 429 | 500..=599 => Class::Retry {
                    after: *retry_after,
                },
                _ => Class::Fatal,
            },
            Error::Rpc {
                code,
                message,
                data,
            } => classify_rpc(*code, message, data.as_deref()),
        }
    }
}

impl Error {
    /// Whether the node refused for its rate: HTTP 429, or a rate-limit error object (Infura's `-32005`
    /// "request rate exceeded", `-32007`, `-32012`, code 429). The caller lowers that provider's rate.
    pub fn is_rate_limit(&self) -> bool {
        match self {
            Error::Http { status, .. } => *status == 429,
            Error::Rpc { code, message, .. } => is_rate_limit_rpc(*code, message),
            _ => false,
        }
    }
}

/// What an error of a JSON-RPC batch means: the node refusing batches as such (then it becomes
/// [`Error::BatchRefused`], and the caller sends the calls one by one from then on), or a failure of this
/// request like any other (kept as it is, so a 429, a 5xx, a timeout or a dropped connection is retried and
/// a rejected key reported, and batching stays on).
impl Error {
    /// For an error of the batch's HTTP exchange: 400 (bad request), 405 (no batches at this path), 413
    /// (body too large) and 501 (not implemented) refuse the batch as such.
    pub(crate) fn of_batch_request(self) -> Self {
        match self {
            Error::Http {
                status: status @ (400 | 405 | 413 | 501),
                ..
            } => Error::BatchRefused {
                detail: format!("HTTP {status}"),
            },
            other => other,
        }
    }

    /// For one error object answering the whole batch: unless it is transient or rejects the key, the
    /// node did not answer the calls, whatever it said (`-32600` invalid request, `-32601`, "batch
    /// requests are not supported", "batch too large"...).
    pub(crate) fn of_whole_batch(self) -> Self {
        if self.says_batches_are_refused() {
            return self.into_batch_refused();
        }
        match self.class() {
            Class::Retry { .. } | Class::Unreachable | Class::Rejected | Class::UnknownBlock => {
                self
            }
            Class::Split { .. } | Class::Fatal => self.into_batch_refused(),
        }
    }

    /// For the error answer of one call of a batch: only a wording about batches (some nodes refuse a
    /// batch by answering each call so) refuses the batch; any other is that call's failure.
    pub(crate) fn of_batch_item(self) -> Self {
        if self.says_batches_are_refused() {
            self.into_batch_refused()
        } else {
            self
        }
    }

    /// An error object about batches ("batch requests are not supported", "batch size too large"), not a
    /// rate limit ("batch rate limit exceeded").
    fn says_batches_are_refused(&self) -> bool {
        let Error::Rpc { message, .. } = self else {
            return false;
        };
        let m = message.to_ascii_lowercase();
        m.contains("batch") && !RATE_LIMIT_WORDINGS.iter().any(|p| m.contains(p))
    }

    fn into_batch_refused(self) -> Self {
        Error::BatchRefused {
            detail: self.to_string(),
        }
    }
}

/// How providers word a rate limit, under whatever code.
const RATE_LIMIT_WORDINGS: [&str; 9] = [
    "rate exceeded",
    "rate limit",
    "request rate",
    "too many requests",
    "daily request count",
    "credits limited",
    "request limit reached",
    "calls per second",
    "capacity exceeded",
];

/// Whether an error object refuses for the rate.
fn is_rate_limit_rpc(code: i64, message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    code == -32007
        || code == -32012
        || code == 429
        || RATE_LIMIT_WORDINGS.iter().any(|p| m.contains(p))
}

fn classify_rpc(code: i64, message: &str, data: Option<&str>) -> Class {
    let m = message.to_ascii_lowercase();
    // Rate limits first: Infura sends them as -32005, the code of "too many results".
    if is_rate_limit_rpc(code, message) {
        return Class::Retry {
            after: data.and_then(backoff_seconds),
        };
    }
    if m.contains("timeout") || m.contains("timed out") {
        return split(SplitReason::Timeout, message);
    }
    const TOO_MANY: [&str; 9] = [
        "query returned more than",
        "more than 10000 results",
        "exceeds max results",
        "log response size exceeded",
        "logs matched by query exceeds limit",
        "query exceeds max results",
        "response size should not",
        "response too large",
        "response size exceeded",
    ];
    if TOO_MANY.iter().any(|p| m.contains(p)) || (code == -32005 && m.contains("limit exceeded")) {
        return split(SplitReason::TooManyResults, message);
    }
    const TOO_WIDE: [&str; 17] = [
        "block range",
        "blocks range",
        "range is too large",
        "range too large",
        "range is too wide",
        "range limit exceeded",
        "max range",
        "maximum block range",
        "exceeds the range allowed",
        "ranges over",
        "requested too many blocks",
        "number of requested blocks",
        "blocks distance",
        "range threshold exceeded",
        "exceeded max allowed",
        "exceeds limit of",
        "limited to",
    ];
    // "block range extends beyond current head block": a lagging backend, not a size problem.
    let beyond_head = m.contains("beyond current head") || m.contains("after last accepted block");
    if beyond_head {
        return Class::Retry { after: None };
    }
    if TOO_WIDE.iter().any(|p| m.contains(p)) || (m.contains("at most") && m.contains("blocks")) {
        return split(SplitReason::RangeTooWide, message);
    }
    // A block tag the node does not know (geth before the merge: -32000 "finalized block not found";
    // others: "invalid block tag", "unknown block tag"): asking again within a run does not change it.
    let tag = m.contains("finalized") || m.contains("safe") || m.contains("block tag");
    let refused = ["not found", "not supported", "unknown", "invalid"]
        .iter()
        .any(|p| m.contains(p));
    if tag && refused {
        return Class::Fatal;
    }
    // geth answers a `blockHash` it does not know with -32000 "unknown block"; others say "block not
    // found" or "could not be found". After the tags above ("finalized block not found"). geth's "header
    // not found" stays transient: it answers so for a block number a lagging backend does not have yet.
    const UNKNOWN_BLOCK: [&str; 3] = ["unknown block", "block not found", "could not be found"];
    if UNKNOWN_BLOCK.iter().any(|p| m.contains(p)) {
        return Class::UnknownBlock;
    }
    match code {
        // Internal errors and generic server errors are transient at every provider we know.
        -32603 | -32000 => Class::Retry { after: None },
        _ => Class::Fatal,
    }
}

fn split(reason: SplitReason, message: &str) -> Class {
    let suggested = suggested_range(message);
    // A number in a result-cap message is the cap, not a span: only a span limit is read as blocks.
    let max_blocks = if suggested.is_none() && reason == SplitReason::RangeTooWide {
        stated_block_limit(message)
    } else {
        None
    };
    let reason = if suggested.is_some() {
        SplitReason::TooManyResults
    } else {
        reason
    };
    Class::Split {
        reason,
        suggested,
        max_blocks,
    }
}

/// `data.rate.backoff_seconds` (Infura) as a duration.
fn backoff_seconds(data: &str) -> Option<Duration> {
    let value: serde_json::Value = serde_json::from_str(data).ok()?;
    let secs = value.get("rate")?.get("backoff_seconds")?.as_f64()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(3600.0)))
}

/// A suggested range: hex `[0xA, 0xB]` (Infura, Alchemy) or decimal `range A-B` (reth).
pub(crate) fn suggested_range(message: &str) -> Option<(u64, u64)> {
    if let Some(open) = message.find("[0x") {
        let rest = &message[open + 1..];
        let close = rest.find(']')?;
        let mut parts = rest[..close].split(',').map(|p| parse_hex(p.trim()));
        let (a, b) = (parts.next()??, parts.next()??);
        return Some((a, b));
    }
    let lower = message.to_ascii_lowercase();
    let at = lower.find("with the range ")? + "with the range ".len();
    let rest = &message[at..];
    let (a, rest) = take_digits(rest)?;
    let rest = rest.strip_prefix('-')?;
    let (b, _) = take_digits(rest)?;
    Some((a, b))
}

/// A span limit in blocks stated in the message ("limited to a 10,000 blocks range", "max range: 5000",
/// "maximum is set to 2048", "(2000 > 1000)", "max block range = 1000").
pub(crate) fn stated_block_limit(message: &str) -> Option<u64> {
    let lower = message.to_ascii_lowercase();
    const BEFORE_NUMBER: [&str; 14] = [
        "limited to a ",
        "limited to ",
        "maximum block range: ",
        "max range: ",
        "max block range = ",
        "max block range ",
        "maximum is set to ",
        "maximum allowed is ",
        "at most ",
        "requested blocks is ",
        "blocks distance: ",
        "exceeds limit of ",
        "ranges over ",
        "max is ",
    ];
    for marker in BEFORE_NUMBER {
        if let Some(at) = lower.find(marker) {
            if let Some((n, _)) = take_digits(&lower[at + marker.len()..]) {
                return Some(n);
            }
        }
    }
    // "(A > B)": the allowance is B.
    let open = lower.find('(')?;
    let inner = &lower[open + 1..];
    let (_, rest) = take_digits(inner)?;
    let rest = rest.trim_start().strip_prefix('>')?.trim_start();
    take_digits(rest).map(|(n, _)| n)
}

fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

/// Leading decimal digits (commas allowed as thousands separators, "10k" as 10,000).
fn take_digits(s: &str) -> Option<(u64, &str)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == ','))
        .unwrap_or(s.len());
    let digits: String = s[..end].chars().filter(|c| c.is_ascii_digit()).collect();
    let mut n: u64 = digits.parse().ok()?;
    let mut rest = &s[end..];
    if let Some(r) = rest.strip_prefix('k') {
        n = n.checked_mul(1000)?;
        rest = r;
    }
    Some((n, rest.trim_end_matches(',')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: i64, message: &str) -> Error {
        Error::Rpc {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn check(err: Error, expected: Class) {
        assert_eq!(err.class(), expected, "{err}");
    }

    fn split_class(
        reason: SplitReason,
        suggested: Option<(u64, u64)>,
        max_blocks: Option<u64>,
    ) -> Class {
        Class::Split {
            reason,
            suggested,
            max_blocks,
        }
    }

    const RETRY: Class = Class::Retry { after: None };

    #[test]
    fn classifies_the_spec_wordings_of_32005() {
        check(
            rpc(-32005, "query returned more than 10000 results"),
            split_class(SplitReason::TooManyResults, None, None),
        );
        check(
            rpc(-32005, "query timeout exceeded"),
            split_class(SplitReason::Timeout, None, None),
        );
    }

    /// docs/node-service.md, "Block tags": none of these changes within a run.
    #[test]
    fn classifies_a_refused_block_tag_as_fatal_not_transient() {
        check(rpc(-32000, "finalized block not found"), Class::Fatal);
        check(rpc(-32000, "safe block not found"), Class::Fatal);
        check(rpc(-32602, "invalid block tag finalized"), Class::Fatal);
        check(rpc(-32000, "unknown block tag 'safe'"), Class::Fatal);
        // A generic server error stays transient.
        check(rpc(-32000, "header not found"), RETRY);
        check(rpc(-32603, "internal error"), RETRY);
    }

    /// A block named by hash that the node does not know was reorged away: a reorg signal, not a retry.
    #[test]
    fn classifies_an_unknown_block_hash_as_unknown_block_not_transient() {
        check(rpc(-32000, "unknown block"), Class::UnknownBlock);
        check(
            rpc(-32000, "block not found: 0x5b2c0f2b5e2e4f0c"),
            Class::UnknownBlock,
        );
        check(
            rpc(-32001, "Block 0xab12 could not be found"),
            Class::UnknownBlock,
        );
    }

    #[test]
    fn classifies_infura_rate_limits_under_32005_as_retry_not_split() {
        check(rpc(-32005, "project ID request rate exceeded"), RETRY);
        check(
            rpc(-32005, "daily request count exceeded, request rate limited"),
            RETRY,
        );
        let with_hint = Error::Rpc {
            code: -32005,
            message: "daily request count exceeded, request rate limited".into(),
            data: Some(
                r#"{"rate":{"allowed_rps":1,"backoff_seconds":30,"current_rps":1.1}}"#.into(),
            ),
        };
        check(
            with_hint,
            Class::Retry {
                after: Some(Duration::from_secs(30)),
            },
        );
    }

    #[test]
    fn takes_the_range_the_provider_suggests() {
        check(
            rpc(-32005, "query returned more than 10000 results. Try with this block range [0x1dfaf9, 0x1dfb0c]."),
            split_class(SplitReason::TooManyResults, Some((0x1dfaf9, 0x1dfb0c)), None),
        );
        check(
            rpc(-32602, "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters and the response size limit, this block range should work: [0x1dfaf9, 0x1dfb0c]"),
            split_class(SplitReason::TooManyResults, Some((0x1dfaf9, 0x1dfb0c)), None),
        );
        check(
            rpc(
                -32602,
                "query exceeds max results 10000, retry with the range 100-250",
            ),
            split_class(SplitReason::TooManyResults, Some((100, 250)), None),
        );
        check(
            rpc(-32000, "query exceeds max results 20000"),
            split_class(SplitReason::TooManyResults, None, None),
        );
    }

    #[test]
    fn reads_block_limits_from_other_providers() {
        let wide = |m: &str, n: Option<u64>| {
            check(
                rpc(-32000, m),
                split_class(SplitReason::RangeTooWide, None, n),
            )
        };
        wide(
            "eth_getLogs and eth_newFilter are limited to a 10,000 blocks range",
            Some(10_000),
        );
        wide("eth_getLogs is limited to a 1000 blocks range", Some(1000));
        wide("block range is too wide", None);
        wide("maximum [from, to] blocks distance: 3000", Some(3000));
        wide("limited to 2000 blocks", Some(2000));
        wide("block range too large", None);
        wide("Block range is too large", None);
        wide("Block range limit exceeded.", None);
        wide("please limit the query to at most 1000 blocks", Some(1000));
        wide("maximum block range: 50000", Some(50_000));
        wide("Max range: 3500", Some(3500));
        wide(
            "Maximum allowed number of requested blocks is 5000",
            Some(5000),
        );
        wide(
            "exceeds the range allowed for your plan (5000 > 2000)",
            Some(2000),
        );
        wide(
            "ranges over 10000 blocks are not supported on freetier",
            Some(10_000),
        );
        wide(
            "eth_getLogs range is too large, max is 10k blocks",
            Some(10_000),
        );
        wide(
            "requested too many blocks from 0 to 50000, maximum is set to 2048",
            Some(2048),
        );
        wide("block range is larger than max block range, block range = 1634, max block range = 1000", Some(1000));
        wide(
            "block range too large (2000), maximum allowed is 1000 blocks",
            Some(1000),
        );
        wide("range threshold exceeded", None);
        wide("exceeded max allowed", None);
        wide("query exceeds max block range 100000", Some(100_000));
        check(
            rpc(-32602, "range 1000000 exceeds limit of 10000"),
            split_class(SplitReason::RangeTooWide, None, Some(10_000)),
        );
        check(
            rpc(-32600, "block range is too wide"),
            split_class(SplitReason::RangeTooWide, None, None),
        );
    }

    #[test]
    fn reads_result_caps_from_other_providers() {
        let many = |code, m: &str| {
            check(
                rpc(code, m),
                split_class(SplitReason::TooManyResults, None, None),
            )
        };
        many(-32000, "logs matched by query exceeds limit of 10000");
        many(-32000, "backend response too large");
        many(-32005, "limit exceeded");
        many(-32000, "query exceeds max results");
        many(
            -32000,
            "response size should not greater than 10000000 bytes",
        );
        many(-32000, "query returned more than 1000 results");
    }

    #[test]
    fn retries_transient_errors_and_stops_on_permanent_ones() {
        check(rpc(-32603, "internal error"), RETRY);
        check(rpc(-32000, "header not found"), RETRY);
        check(rpc(-32007, "100/second request limit reached - reduce calls per second or upgrade your account at quicknode.com"), RETRY);
        check(
            rpc(-32000, "block range extends beyond current head block"),
            RETRY,
        );
        check(
            rpc(-32601, "the method eth_foo does not exist/is not available"),
            Class::Fatal,
        );
        check(
            rpc(-32602, "invalid argument 0: hex string without 0x prefix"),
            Class::Fatal,
        );
        check(
            Error::Http {
                status: 429,
                retry_after: Some(Duration::from_secs(2)),
            },
            Class::Retry {
                after: Some(Duration::from_secs(2)),
            },
        );
        check(
            Error::Http {
                status: 503,
                retry_after: None,
            },
            RETRY,
        );
        check(
            Error::Http {
                status: 401,
                retry_after: None,
            },
            Class::Rejected,
        );
        check(
            Error::Http {
                status: 404,
                retry_after: None,
            },
            Class::Fatal,
        );
        check(
            Error::Connect {
                detail: "refused".into(),
            },
            Class::Unreachable,
        );
        check(
            Error::Dropped {
                detail: "eof".into(),
            },
            RETRY,
        );
    }
}
