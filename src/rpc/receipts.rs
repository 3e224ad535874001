//! What reading a block from its receipts takes: the block's transaction hashes, and its receipts, by
//! `eth_getBlockReceipts` or one `eth_getTransactionReceipt` per transaction (in batches). The wire shapes
//! only; what to do with them is `fetch::receipts`'.

use alloy_primitives::{B256, U256};
use serde::Deserialize;

use super::types::quantity;
use super::{BlockTag, Client, Error, Log};
use crate::primitives::BlockNumber;

/// A block with its transactions' hashes (`eth_getBlockByNumber(n, false)`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockTxHashes {
    /// Number.
    #[serde(deserialize_with = "quantity")]
    pub number: BlockNumber,
    /// Hash.
    pub hash: B256,
    /// Its transactions, in order.
    pub transactions: Vec<B256>,
}

/// A transaction receipt: what reading a block's logs from receipts needs, and what the `transactions`
/// table keeps of it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// The transaction.
    pub transaction_hash: B256,
    /// Its position in the block.
    #[serde(deserialize_with = "quantity")]
    pub transaction_index: u64,
    /// The block.
    pub block_hash: B256,
    /// Its number.
    #[serde(deserialize_with = "quantity")]
    pub block_number: BlockNumber,
    /// 1 success, 0 failure; absent before Byzantium (a `root` instead).
    #[serde(default)]
    pub status: Option<U256>,
    /// Gas used by this transaction.
    pub gas_used: U256,
    /// The logs the transaction emitted, as `eth_getLogs` gives them.
    pub logs: Vec<Log>,
}

impl Client {
    /// `eth_getBlockByNumber(number, false)`: `None` when the node does not know the block.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn block_tx_hashes(
        &self,
        number: BlockNumber,
    ) -> Result<Option<BlockTxHashes>, Error> {
        self.call(
            "eth_getBlockByNumber",
            serde_json::json!([BlockTag::Number(number).to_param(), false]),
        )
        .await
    }

    /// `eth_getBlockReceipts(number)`: `None` when the node does not know the block. A node without the
    /// method answers an error that [`Error::is_method_unavailable`].
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn block_receipts(&self, number: BlockNumber) -> Result<Option<Vec<Receipt>>, Error> {
        self.call(
            "eth_getBlockReceipts",
            serde_json::json!([BlockTag::Number(number).to_param()]),
        )
        .await
    }

    /// `eth_getBlockReceipts` for each of `numbers`, in one JSON-RPC batch (HTTP only).
    ///
    /// # Errors
    /// As [`Client::batch`].
    pub async fn blocks_receipts(
        &self,
        numbers: &[BlockNumber],
    ) -> Result<Vec<Option<Vec<Receipt>>>, Error> {
        let params = numbers
            .iter()
            .map(|&n| serde_json::json!([BlockTag::Number(n).to_param()]))
            .collect();
        self.batch("eth_getBlockReceipts", params).await
    }

    /// `eth_getTransactionReceipt(hash)`: `None` when the node does not know the transaction.
    ///
    /// # Errors
    /// Any [`Error`].
    pub async fn receipt(&self, hash: B256) -> Result<Option<Receipt>, Error> {
        self.call("eth_getTransactionReceipt", serde_json::json!([hash]))
            .await
    }

    /// `eth_getTransactionReceipt` for each of `hashes`, in one JSON-RPC batch (HTTP only).
    ///
    /// # Errors
    /// As [`Client::batch`].
    pub async fn receipts(&self, hashes: &[B256]) -> Result<Vec<Option<Receipt>>, Error> {
        let params = hashes.iter().map(|h| serde_json::json!([h])).collect();
        self.batch("eth_getTransactionReceipt", params).await
    }
}

impl Error {
    /// Whether the node says it does not serve the method: `-32601`, or `-32600`/`-32602`/`-32000` with a
    /// "method not available / not supported / does not exist" wording (providers differ).
    pub fn is_method_unavailable(&self) -> bool {
        let Error::Rpc { code, message, .. } = self else {
            return false;
        };
        if *code == -32601 {
            return true;
        }
        let m = message.to_ascii_lowercase();
        let about_method = m.contains("method") || m.contains("api");
        let unavailable = [
            "not available",
            "not supported",
            "unsupported",
            "does not exist",
            "not found",
            "not enabled",
            "not allowed",
        ]
        .iter()
        .any(|w| m.contains(w));
        matches!(code, -32600 | -32602 | -32000 | -32004) && about_method && unavailable
    }
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

    #[test]
    fn tells_a_method_the_node_lacks_from_other_refusals() {
        for lacking in [
            rpc(
                -32601,
                "the method eth_getBlockReceipts does not exist/is not available",
            ),
            rpc(-32601, "Method not found"),
            rpc(
                -32600,
                "method eth_getBlockReceipts is not available on this network",
            ),
            rpc(-32602, "Unsupported method: eth_getBlockReceipts"),
            rpc(-32000, "the method is not supported by this plan"),
            rpc(-32004, "Method not supported"),
        ] {
            assert!(lacking.is_method_unavailable(), "{lacking}");
        }
        for other in [
            rpc(-32005, "query returned more than 10000 results"),
            rpc(-32602, "invalid argument 0: hex string without 0x prefix"),
            rpc(-32000, "header not found"),
            rpc(-32000, "rate limit exceeded"),
            Error::Http {
                status: 404,
                retry_after: None,
            },
        ] {
            assert!(!other.is_method_unavailable(), "{other}");
        }
    }

    #[test]
    fn reads_a_receipt_with_its_logs() {
        let text = r#"{"transactionHash":"0x1111111111111111111111111111111111111111111111111111111111111111",
            "transactionIndex":"0x1","blockHash":"0x2222222222222222222222222222222222222222222222222222222222222222",
            "blockNumber":"0x10","status":"0x1","gasUsed":"0x5208","logs":[{"address":"0x3333333333333333333333333333333333333333",
            "topics":[],"data":"0x","blockNumber":"0x10","blockHash":"0x2222222222222222222222222222222222222222222222222222222222222222",
            "transactionHash":"0x1111111111111111111111111111111111111111111111111111111111111111","transactionIndex":"0x1",
            "logIndex":"0x4","removed":false}]}"#;
        let receipt: Receipt = serde_json::from_str(text).expect("a receipt");
        assert_eq!(receipt.transaction_index, 1);
        assert_eq!(receipt.block_number, 16);
        assert_eq!(receipt.logs.len(), 1);
        assert_eq!(receipt.logs[0].log_index, 4);
    }
}
