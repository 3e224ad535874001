//! The transaction and receipt methods: `eth_getTransactionByHash`, `eth_getTransactionByBlockHashAndIndex`,
//! `eth_getTransactionByBlockNumberAndIndex`, `eth_getTransactionReceipt` and, when
//! [`ChainConfig::block_receipts`](super::ChainConfig::block_receipts) is on, `eth_getBlockReceipts`.
//!
//! Every answer comes from the same plan as `eth_getLogs`, so transaction indexes, hashes and log indexes agree
//! with it; a receipt's logs are written by the same writer. Unknown transactions and blocks are `null` (spec:
//! results for unknown items are null, not errors); a method this node does not serve is `-32601`.

use serde_json::Value;

use super::chain::{BlockPlan, ChainState, Header};
use super::config::Finality;
use super::json;
use super::params::{self, BlockTag};
use super::rpc::{arity, RpcError, Service};
use super::view::View;

/// geth's wording for a method it does not serve.
fn not_available(method: &str) -> RpcError {
    RpcError::new(
        -32601,
        format!("the method {method} does not exist/is not available"),
    )
}

impl Service {
    /// Writes the result of a transaction or receipt method; `-32601` for any other method. Returns the number
    /// of logs written (receipts carry logs).
    pub(crate) fn dispatch_tx(
        &self,
        out: &mut Vec<u8>,
        method: &str,
        params: &[Value],
        state: &ChainState,
        view: View,
    ) -> Result<u64, RpcError> {
        match method {
            "eth_getTransactionByHash" => {
                arity(params, 1, 1)?;
                let hash =
                    params::hash(&params[0]).map_err(|e| RpcError::invalid_argument(0, e))?;
                let found = self.chain.locate_tx(state, &hash, view.head);
                self.write_tx(out, found.as_ref().map(|(h, p, i)| (h, p, *i)));
            }
            "eth_getTransactionByBlockHashAndIndex" => {
                arity(params, 2, 2)?;
                let hash =
                    params::hash(&params[0]).map_err(|e| RpcError::invalid_argument(0, e))?;
                let index = tx_index(&params[1])?;
                let number = self.chain.number_of_hash(state, &hash, view.head);
                let block = number.map(|number| self.block_of(state, number));
                self.write_tx(out, block.as_ref().map(|(h, p)| (h, p, index)));
            }
            "eth_getTransactionByBlockNumberAndIndex" => {
                arity(params, 2, 2)?;
                let tag = params::block_tag(&params[0], true)
                    .map_err(|e| RpcError::invalid_argument(0, e))?;
                let index = tx_index(&params[1])?;
                let number = self.resolve(tag, view)?;
                let block = number.map(|number| self.block_of(state, number));
                self.write_tx(out, block.as_ref().map(|(h, p)| (h, p, index)));
            }
            "eth_getTransactionReceipt" if !self.cfg.chain.no_tx_receipts => {
                arity(params, 1, 1)?;
                let hash =
                    params::hash(&params[0]).map_err(|e| RpcError::invalid_argument(0, e))?;
                let Some((header, plan, index)) = self.chain.locate_tx(state, &hash, view.head)
                else {
                    out.extend_from_slice(b"null");
                    return Ok(0);
                };
                let Some(tx) = self.chain.transaction(&header, &plan, index) else {
                    out.extend_from_slice(b"null");
                    return Ok(0);
                };
                let logs = self.chain.tx_logs(&header, &plan, &tx);
                json::receipt(out, &tx, &header, &logs, self.cfg.chain.log_timestamps);
                return Ok(logs.len() as u64);
            }
            "eth_getBlockReceipts" if self.cfg.chain.block_receipts => {
                arity(params, 1, 1)?;
                let number = match &params[0] {
                    Value::String(text) if text.len() == 66 => {
                        let hash = params::hash(&params[0])
                            .map_err(|e| RpcError::invalid_argument(0, e))?;
                        self.chain.number_of_hash(state, &hash, view.head)
                    }
                    Value::Object(object) if object.contains_key("blockHash") => {
                        let hash = params::hash(&object["blockHash"])
                            .map_err(|e| RpcError::invalid_argument(0, e))?;
                        self.chain.number_of_hash(state, &hash, view.head)
                    }
                    other => {
                        let tag = params::block_tag(other, true)
                            .map_err(|e| RpcError::invalid_argument(0, e))?;
                        self.resolve(tag, view)?
                    }
                };
                let Some(number) = number else {
                    out.extend_from_slice(b"null");
                    return Ok(0);
                };
                return Ok(self.write_block_receipts(out, state, number));
            }
            other => return Err(not_available(other)),
        }
        Ok(0)
    }

    fn block_of(&self, state: &ChainState, number: u64) -> (Header, BlockPlan) {
        let header = self.chain.header(state, number);
        let plan = self.chain.plan(number, header.gen, state);
        (header, plan)
    }

    /// A block tag as a canonical height, `None` when the node has no such block (pending, or a number above
    /// the head).
    fn resolve(&self, tag: BlockTag, view: View) -> Result<Option<u64>, RpcError> {
        Ok(match tag {
            BlockTag::Number(n) => Some(n).filter(|n| *n <= view.head),
            BlockTag::Latest => Some(view.head),
            BlockTag::Earliest => Some(0),
            BlockTag::Pending => None,
            BlockTag::Finalized | BlockTag::Safe => match self.cfg.chain.finality {
                Finality::Block => Some(view.finalized),
                Finality::Null => None,
                Finality::Error => {
                    return Err(RpcError::new(-32000, "finalized block not found"));
                }
            },
        })
    }

    fn write_tx(&self, out: &mut Vec<u8>, found: Option<(&Header, &BlockPlan, u32)>) {
        let tx = found.and_then(|(header, plan, index)| {
            Some((header, self.chain.transaction(header, plan, index)?))
        });
        match tx {
            Some((header, tx)) => {
                json::transaction(out, self.cfg.chain.chain_id, &tx, Some(header))
            }
            None => out.extend_from_slice(b"null"),
        }
    }

    /// Writes every receipt of canonical block `number`; returns how many logs they hold.
    fn write_block_receipts(&self, out: &mut Vec<u8>, state: &ChainState, number: u64) -> u64 {
        let (header, plan) = self.block_of(state, number);
        let log_timestamps = self.cfg.chain.log_timestamps;
        let mut n_logs = 0;
        out.push(b'[');
        for (tx_idx, tx) in self.chain.transactions(&header, &plan).iter().enumerate() {
            if tx_idx > 0 {
                out.push(b',');
            }
            let logs = self.chain.tx_logs(&header, &plan, tx);
            n_logs += logs.len() as u64;
            json::receipt(out, tx, &header, &logs, log_timestamps);
        }
        out.push(b']');
        n_logs
    }
}

fn tx_index(value: &Value) -> Result<u32, RpcError> {
    let text = value.as_str().ok_or_else(|| {
        RpcError::invalid_argument(1, format!("expected a hex index, got {value}"))
    })?;
    let index = params::quantity(text).map_err(|e| RpcError::invalid_argument(1, e))?;
    // An index past every block's transactions finds none: null, as for any unknown item.
    Ok(u32::try_from(index).unwrap_or(u32::MAX))
}
