//! JSON-RPC 2.0 dispatch: envelope validation, batches, the methods, `eth_getLogs` limits and error wordings.
//!
//! Pure with respect to I/O: a request body goes in, a response body comes out, given a request counter (for
//! fault decisions) and a [`Lag`] (a node behind the head, a lagging backend). Error codes follow geth and
//! the spec: -32700 parse error, -32600 invalid request, -32601 unknown method, -32602 bad params, -32005 for
//! the spec's result and duration limits, -32000 for "unknown block", a reversed range and (under
//! [`Finality`] `null`/`error`) a finality tag the node has no block for, -32603 internal error.

use std::sync::{Arc, PoisonError};
use std::time::Duration;

use serde_json::{json, Value};

use super::chain::{Chain, ChainState, Header};
use super::config::{DevNodeConfig, Finality, TooManyStyle};
use super::faults::{self, CallFault, CallFaults, Repeat};
use super::json::{self, BlockKind, TxDetail};
use super::params::{self, BlockTag, LogRange};
use super::stats::Stats;
use super::view::{Lag, View};

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn invalid_argument(position: usize, reason: impl std::fmt::Display) -> Self {
        Self::new(-32602, format!("invalid argument {position}: {reason}"))
    }
}

/// Infura's rate-limit wording, the same code as the result cap: a client must back off, not split.
pub(crate) fn rate_limit_error(retry_after_secs: u64) -> RpcError {
    RpcError {
        code: -32005,
        message: "project ID request rate exceeded".to_owned(),
        data: Some(json!({
            "see": "https://infura.io/dashboard",
            "backoff_seconds": retry_after_secs,
        })),
    }
}

/// The `-32000` geth answers `eth_getBlockByNumber` with for a finality tag it has no block for (before the
/// merge: "finalized block not found", "safe block not found").
fn no_tagged_block(tag: BlockTag) -> RpcError {
    let name = if tag == BlockTag::Safe {
        "safe"
    } else {
        "finalized"
    };
    RpcError::new(-32000, format!("{name} block not found"))
}

/// The `-32000` geth's log filter answers for a finality tag it has no header for ("finalized header not
/// found", "safe header not found"): a range cannot be bounded by a block the node does not have.
fn no_tagged_header(tag: BlockTag) -> RpcError {
    let name = if tag == BlockTag::Safe {
        "safe"
    } else {
        "finalized"
    };
    RpcError::new(-32000, format!("{name} header not found"))
}

/// The request-independent part of serving: chain, limits, counters. One per endpoint (the node and each
/// provider); the chain and its scripted reorgs are shared by them all.
#[derive(Debug)]
pub(crate) struct Service {
    pub(crate) cfg: DevNodeConfig,
    pub(crate) chain: Arc<Chain>,
    pub(crate) stats: Arc<Stats>,
    /// Whether the `overcap_reorg` fault fired.
    pub(crate) receipts_reorged: Arc<std::sync::atomic::AtomicBool>,
    /// [`super::DevNode::reorg_after_header`]: once a request has read this block's header by number, the
    /// chain reorganises this deep, right after the answer (so the reader's next request, its logs, finds
    /// the hash it read gone).
    pub(crate) reorg_after_header: Arc<ReorgAfterHeader>,
}

/// An armed reorg: the block whose header triggers it, its depth, and whether a request just read it.
#[derive(Debug, Default)]
pub(crate) struct ReorgAfterHeader {
    armed: std::sync::Mutex<Option<(u64, u64)>>,
    read: std::sync::atomic::AtomicBool,
}

impl ReorgAfterHeader {
    /// Arms it: after the next request that reads block `number`'s header, reorganise `depth` blocks.
    pub(crate) fn arm(&self, number: u64, depth: u64) {
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some((number, depth));
    }

    /// A call is answering block `number`'s header.
    fn header_read(&self, number: u64) {
        let armed = self.armed.lock().unwrap_or_else(PoisonError::into_inner);
        if armed.is_some_and(|(at, _)| at == number) {
            self.read.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The depth to reorganise now, once: the armed header was read by the request just answered.
    fn fire(&self) -> Option<u64> {
        if !self.read.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let armed = self
            .armed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        armed.map(|(_, depth)| depth)
    }
}

/// Why `eth_getLogs` stopped scanning.
enum LogsOutcome {
    Done { n_logs: u64 },
    TooMany { suggested_end: u64 },
    Timeout,
}

impl Service {
    /// Answers a whole HTTP body or WebSocket message: one response object, or an array for a batch.
    pub(crate) fn handle_body(&self, body: &[u8], seq: u64, lag: Lag) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        let request: Value = match serde_json::from_slice(body) {
            Ok(request) => request,
            Err(err) => {
                self.stats.call(None, Err(-32700));
                write_error(
                    &mut out,
                    &Value::Null,
                    &RpcError::new(-32700, format!("parse error: {err}")),
                );
                return out;
            }
        };
        match &request {
            Value::Array(calls) if calls.is_empty() => {
                self.stats.call(None, Err(-32600));
                write_error(
                    &mut out,
                    &Value::Null,
                    &RpcError::new(-32600, "empty batch"),
                );
            }
            Value::Array(calls) if calls.len() > self.cfg.limits.max_batch => {
                self.stats.call(None, Err(-32600));
                let message = format!(
                    "batch too large: {} calls, at most {}",
                    calls.len(),
                    self.cfg.limits.max_batch
                );
                write_error(&mut out, &Value::Null, &RpcError::new(-32600, message));
            }
            Value::Array(calls) => {
                out.push(b'[');
                for (call_idx, call) in calls.iter().enumerate() {
                    if call_idx > 0 {
                        out.push(b',');
                    }
                    self.handle_call(&mut out, call, seq, call_idx as u64, lag);
                }
                out.push(b']');
            }
            single => self.handle_call(&mut out, single, seq, 0, lag),
        }
        // After the whole answer, outside any call's view of the chain.
        if let Some(depth) = self.reorg_after_header.fire() {
            self.chain.reorg(depth);
        }
        out
    }

    /// An error answer to every call of `body` (keeping their ids), for faults decided before dispatch.
    pub(crate) fn error_for_body(&self, body: &[u8], error: &RpcError) -> Vec<u8> {
        let mut out = Vec::new();
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Array(calls)) if !calls.is_empty() => {
                out.push(b'[');
                for (call_idx, call) in calls.iter().enumerate() {
                    if call_idx > 0 {
                        out.push(b',');
                    }
                    write_error(&mut out, call.get("id").unwrap_or(&Value::Null), error);
                }
                out.push(b']');
            }
            Ok(call) => write_error(&mut out, call.get("id").unwrap_or(&Value::Null), error),
            Err(_) => write_error(&mut out, &Value::Null, error),
        }
        out
    }

    fn handle_call(&self, out: &mut Vec<u8>, call: &Value, seq: u64, call_idx: u64, lag: Lag) {
        let id = call.get("id").cloned().unwrap_or(Value::Null);
        let envelope_ok = call.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
            && matches!(id, Value::Null | Value::Number(_) | Value::String(_));
        let method = call.get("method").and_then(Value::as_str);
        let (true, Some(method)) = (envelope_ok, method) else {
            self.stats.call(None, Err(-32600));
            write_error(out, &id, &RpcError::new(-32600, "invalid request"));
            return;
        };
        let call_faults = faults::for_call(self.cfg.seed, seq, call_idx, &self.cfg.faults);
        if let Some(fault) = call_faults.error {
            let error = match fault {
                CallFault::Internal => RpcError::new(-32603, "internal error"),
                CallFault::RateLimit => rate_limit_error(self.cfg.faults.retry_after_secs),
            };
            self.stats.call(Some(method), Err(error.code));
            write_error(out, &id, &error);
            return;
        }
        let params = match call.get("params") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(items)) => items.as_slice(),
            Some(_) => {
                self.stats.call(Some(method), Err(-32602));
                write_error(out, &id, &RpcError::new(-32602, "non-array args"));
                return;
            }
        };
        self.reorg_before_receipts(method, params);
        // The result is written in place; on error, the partial result is cut off again.
        let start = out.len();
        out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
        json::value(out, &id);
        out.extend_from_slice(b",\"result\":");
        match self.dispatch(out, method, params, lag, call_faults) {
            Ok(n_logs) => {
                out.push(b'}');
                self.stats.call(Some(method), Ok(n_logs));
            }
            Err(error) => {
                out.truncate(start);
                self.stats.call(Some(method), Err(error.code));
                write_error(out, &id, &error);
            }
        }
    }

    /// The `overcap_reorg=N` fault: the first `eth_getBlockReceipts` of block N (by number) reorganises the
    /// chain from N up before it is answered, so the receipts are of another block than the one whose
    /// transactions were just read.
    fn reorg_before_receipts(&self, method: &str, params: &[Value]) {
        let Some(target) = self.cfg.chain.overcap.reorg_on_receipts else {
            return;
        };
        let asks = method == "eth_getBlockReceipts"
            && params
                .first()
                .and_then(Value::as_str)
                .and_then(|text| super::params::quantity(text).ok())
                == Some(target);
        if asks
            && !self
                .receipts_reorged
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let head = self.chain.head();
            if head >= target {
                self.chain.reorg(head - target + 1);
            }
        }
    }

    /// Writes the result of one call; returns the number of logs written.
    fn dispatch(
        &self,
        out: &mut Vec<u8>,
        method: &str,
        params: &[Value],
        lag: Lag,
        call: CallFaults,
    ) -> Result<u64, RpcError> {
        let state = self.chain.read();
        let view = View::new(state.head, &self.cfg.chain, lag);
        match method {
            "eth_chainId" => {
                arity(params, 0, 0)?;
                json::quantity(out, self.cfg.chain.chain_id);
            }
            "net_version" => {
                arity(params, 0, 0)?;
                json::string(out, &self.cfg.chain.chain_id.to_string());
            }
            "web3_clientVersion" => {
                arity(params, 0, 0)?;
                json::string(
                    out,
                    concat!("logslice-devnode/v", env!("CARGO_PKG_VERSION")),
                );
            }
            "eth_blockNumber" => {
                arity(params, 0, 0)?;
                json::quantity(out, view.head);
            }
            "eth_getBlockByNumber" => {
                arity(params, 2, 2)?;
                let finality = self.cfg.chain.finality;
                // spec: `safe` is not supported here; the clients the other modes model (geth) accept it.
                let allow_safe = finality != Finality::Block;
                let tag = params::block_tag(&params[0], allow_safe)
                    .map_err(|e| RpcError::invalid_argument(0, e))?;
                let detail = tx_detail(&params[1])?;
                let (number, kind) = match tag {
                    BlockTag::Number(n) => {
                        self.reorg_after_header.header_read(n);
                        (Some(n).filter(|n| *n <= view.head), BlockKind::Mined)
                    }
                    BlockTag::Latest => (Some(view.head), BlockKind::Mined),
                    BlockTag::Earliest => (Some(0), BlockKind::Mined),
                    BlockTag::Finalized | BlockTag::Safe => match finality {
                        Finality::Block => (Some(view.finalized), BlockKind::Mined),
                        Finality::Null => (None, BlockKind::Mined),
                        Finality::Error => return Err(no_tagged_block(tag)),
                    },
                    BlockTag::Pending => (Some(view.head + 1), BlockKind::Pending),
                };
                self.write_block(out, &state, number, kind, detail);
            }
            "eth_getBlockByHash" => {
                arity(params, 2, 2)?;
                let hash =
                    params::hash(&params[0]).map_err(|e| RpcError::invalid_argument(0, e))?;
                let detail = tx_detail(&params[1])?;
                let number = self.chain.number_of_hash(&state, &hash, view.head);
                self.write_block(out, &state, number, BlockKind::Mined, detail);
            }
            "eth_getLogs" => {
                arity(params, 1, 1)?;
                return self.get_logs(out, &state, view, &params[0], call);
            }
            other => return self.dispatch_tx(out, other, params, &state, view),
        }
        Ok(0)
    }

    fn write_block(
        &self,
        out: &mut Vec<u8>,
        state: &ChainState,
        number: Option<u64>,
        kind: BlockKind,
        detail: TxDetail,
    ) {
        match number {
            // spec: results for unknown items are null, not errors.
            None => out.extend_from_slice(b"null"),
            Some(number) => {
                let gen = state.gen(number);
                let block = self.chain.full_block(state, number, gen);
                let txs = (detail == TxDetail::Full).then(|| {
                    let plan = self.chain.plan(number, gen, state);
                    self.chain.transactions(&block.header, &plan)
                });
                json::block(out, &self.chain, &block, kind, txs.as_deref());
            }
        }
    }

    fn get_logs(
        &self,
        out: &mut Vec<u8>,
        state: &ChainState,
        view: View,
        filter_value: &Value,
        call: CallFaults,
    ) -> Result<u64, RpcError> {
        let limits = &self.cfg.limits;
        let request =
            params::filter_request(filter_value).map_err(|e| RpcError::invalid_argument(0, e))?;
        // spec: at most 5,000 parameters in one request, counting addresses and topic values together.
        if request.n_params > limits.max_params {
            return Err(too_many_params(request.n_params, limits.max_params));
        }
        let finality = self.cfg.chain.finality;
        let resolve = |tag: BlockTag| match tag {
            BlockTag::Number(n) => Ok(n),
            BlockTag::Latest | BlockTag::Pending => Ok(view.head),
            BlockTag::Earliest => Ok(0),
            BlockTag::Safe | BlockTag::Finalized if finality != Finality::Block => {
                Err(no_tagged_header(tag))
            }
            BlockTag::Safe => Ok(view.safe),
            BlockTag::Finalized => Ok(view.finalized),
        };
        let (from, to) = match request.range {
            LogRange::Hash(hash) => match self.chain.number_of_hash(state, &hash, view.head) {
                Some(number) => (number, number),
                None => return Err(RpcError::new(-32000, "unknown block")),
            },
            LogRange::Range { from, to } => (resolve(from)?, resolve(to)?),
        };
        if from > to {
            return Err(RpcError::new(-32000, "invalid block range params"));
        }
        out.push(b'[');
        if from > view.head {
            out.push(b']');
            return Ok(0);
        }
        let to = to.min(view.head);
        self.stats.logs_from(from);
        let list_start = out.len();
        let outcome = self.scan_logs(out, state, from, to, &request.filter, call);
        match outcome {
            LogsOutcome::Done { n_logs } => {
                let n_logs = match call.repeat {
                    Some(Repeat::Same) => faults::repeat_list(out, list_start, n_logs),
                    _ => n_logs,
                };
                out.push(b']');
                Ok(n_logs)
            }
            LogsOutcome::Timeout => Err(RpcError::new(-32005, "query timeout exceeded")),
            LogsOutcome::TooMany { suggested_end } => Err(too_many_error(
                limits.too_many_style,
                limits.max_results,
                from,
                suggested_end,
            )),
        }
    }

    /// Writes the matching logs of `from..=to`, modelling the query's duration as it goes.
    fn scan_logs(
        &self,
        out: &mut Vec<u8>,
        state: &ChainState,
        from: u64,
        to: u64,
        filter: &super::filter::LogFilter,
        call: CallFaults,
    ) -> LogsOutcome {
        let limits = &self.cfg.limits;
        let n_blocks = to - from + 1;
        let budget = limits.query_budget;
        // A range whose block count alone exceeds the budget is refused before scanning, as it would time out.
        if limits
            .block_cost
            .saturating_mul(u32::try_from(n_blocks).unwrap_or(u32::MAX))
            > budget
        {
            return LogsOutcome::Timeout;
        }
        let orphans = if call.stale_replica {
            state.orphans_in(from, to)
        } else {
            Vec::new()
        };
        let mut orphan_iter = orphans.iter().peekable();
        let log_timestamps = self.cfg.chain.log_timestamps;
        let mut spent = Duration::ZERO;
        let mut n_logs: u64 = 0;
        let mut conflict = call.repeat == Some(Repeat::Conflicting);
        for number in from..=to {
            spent += limits.block_cost;
            let mut n_in_block = 0u64;
            let mut write = |mut log: super::chain::Log, removed: bool, timestamp: u64| {
                if n_logs > 0 || n_in_block > 0 {
                    out.push(b',');
                }
                json::log(out, &log, removed, log_timestamps.then_some(timestamp));
                n_in_block += 1;
                if std::mem::take(&mut conflict) {
                    faults::conflicting(&mut log);
                    out.push(b',');
                    json::log(out, &log, removed, log_timestamps.then_some(timestamp));
                    n_in_block += 1;
                }
            };
            // A stale replica still serves the orphaned blocks of this height, flagged removed.
            while let Some((_, gen)) = orphan_iter.next_if(|(height, _)| *height == number) {
                let header: Header = self.chain.header_of(number, *gen, state);
                let plan = self.chain.plan(number, *gen, state);
                self.chain.logs_of_block(&header, &plan, filter, |log| {
                    write(log, true, header.timestamp)
                });
            }
            let gen = state.gen(number);
            let plan = self.chain.plan(number, gen, state);
            if !plan.logs.is_empty() {
                let header = self.chain.header_of(number, gen, state);
                self.chain.logs_of_block(&header, &plan, filter, |log| {
                    write(log, false, header.timestamp)
                });
            }
            n_logs += n_in_block;
            if n_logs > limits.max_results as u64 {
                // The results of from..=number-1 fitted: that is the largest range from `from` that does.
                return LogsOutcome::TooMany {
                    suggested_end: number.saturating_sub(1).max(from),
                };
            }
            spent += limits
                .log_cost
                .saturating_mul(u32::try_from(n_in_block).unwrap_or(u32::MAX));
            if spent > budget {
                return LogsOutcome::Timeout;
            }
        }
        LogsOutcome::Done { n_logs }
    }
}

/// The too-many-results error in the configured wording, suggesting `from..=end`.
pub(crate) fn too_many_error(style: TooManyStyle, cap: usize, from: u64, end: u64) -> RpcError {
    match style {
        TooManyStyle::Plain => RpcError::new(-32005, format!("query returned more than {cap} results")),
        TooManyStyle::Infura => RpcError {
            code: -32005,
            message: format!(
                "query returned more than {cap} results. Try with this block range [{from:#x}, {end:#x}]."
            ),
            data: Some(json!({ "from": format!("{from:#x}"), "to": format!("{end:#x}") })),
        },
        TooManyStyle::Alchemy => RpcError::new(
            -32602,
            format!(
                "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no \
                 limit on the response size, or you can request any block range with a cap of 10K logs in the \
                 response. Based on your parameters and the response size limit, this block range should work: \
                 [{from:#x}, {end:#x}]"
            ),
        ),
        TooManyStyle::Reth => RpcError::new(
            -32602,
            format!("query exceeds max results {cap}, retry with the range {from}-{end}"),
        ),
        TooManyStyle::RethServerError => RpcError::new(
            -32000,
            format!("query exceeds max results {cap}, retry with the range {from}-{end}"),
        ),
    }
}

/// The `-32602` for a filter with more addresses and topic values than `limit`. The wording is Erigon's for
/// its filter-size limit ("query exceeds the maximum of 1000 addresses or topics per search position",
/// erigontech/erigon#22014), naming the total the spec counts instead of one position, and the count asked.
pub(crate) fn too_many_params(n_params: usize, limit: usize) -> RpcError {
    RpcError::new(
        -32602,
        format!("query exceeds the maximum of {limit} addresses and topics ({n_params} given)"),
    )
}

pub(crate) fn arity(params: &[Value], min: usize, max: usize) -> Result<(), RpcError> {
    if params.len() > max {
        return Err(RpcError::new(
            -32602,
            format!("too many arguments, want at most {max}"),
        ));
    }
    if params.len() < min {
        return Err(RpcError::new(
            -32602,
            format!("missing value for required argument {}", params.len()),
        ));
    }
    Ok(())
}

fn tx_detail(value: &Value) -> Result<TxDetail, RpcError> {
    match value {
        Value::Bool(true) => Ok(TxDetail::Full),
        Value::Bool(false) => Ok(TxDetail::Hashes),
        other => Err(RpcError::invalid_argument(
            1,
            format!("expected a boolean, got {other}"),
        )),
    }
}

/// Writes a whole error response object.
pub(crate) fn write_error(out: &mut Vec<u8>, id: &Value, error: &RpcError) {
    out.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    json::value(out, id);
    out.extend_from_slice(b",\"error\":{\"code\":");
    out.extend_from_slice(error.code.to_string().as_bytes());
    out.extend_from_slice(b",\"message\":");
    json::string(out, &error.message);
    if let Some(data) = &error.data {
        out.extend_from_slice(b",\"data\":");
        json::value(out, data);
    }
    out.extend_from_slice(b"}}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wording_carries_the_suggested_range_in_its_own_format() {
        let check = |style, code, fragment: &str| {
            let error = too_many_error(style, 10_000, 0x10, 0x2f);
            assert_eq!(error.code, code, "{style:?}");
            assert!(
                error.message.contains(fragment),
                "{style:?}: {}",
                error.message
            );
        };
        check(
            TooManyStyle::Plain,
            -32005,
            "query returned more than 10000 results",
        );
        check(
            TooManyStyle::Infura,
            -32005,
            "Try with this block range [0x10, 0x2f].",
        );
        check(
            TooManyStyle::Alchemy,
            -32602,
            "this block range should work: [0x10, 0x2f]",
        );
        check(
            TooManyStyle::Reth,
            -32602,
            "query exceeds max results 10000, retry with the range 16-47",
        );
        check(
            TooManyStyle::RethServerError,
            -32000,
            "retry with the range 16-47",
        );
    }
}
