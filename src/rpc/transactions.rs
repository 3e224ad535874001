//! The wire types of a block with its full transactions (`eth_getBlockByNumber(n, true)`), for the opt-in
//! `transactions` table. Wei amounts, gas and nonces are 256-bit quantities, parsed exactly; optional fields
//! of the spec's transaction object (`maxFeePerGas`, `maxPriorityFeePerGas` of type 2 only, `to` null for a
//! creation) are `Option`s, never defaults.

use alloy_primitives::{Address, Bytes, B256, U256};
use serde::Deserialize;

use super::types::quantity;
use crate::primitives::BlockNumber;

/// A block with its transactions as objects.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockTransactions {
    /// Number.
    #[serde(deserialize_with = "quantity")]
    pub number: BlockNumber,
    /// Hash.
    pub hash: B256,
    /// Unix timestamp.
    #[serde(deserialize_with = "quantity")]
    pub timestamp: u64,
    /// Its transactions, in order.
    pub transactions: Vec<Transaction>,
}

/// A transaction object, with the fields the `transactions` table keeps.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transaction {
    /// Hash.
    pub hash: B256,
    /// Position in the block.
    #[serde(deserialize_with = "quantity")]
    pub transaction_index: u64,
    /// Sender.
    pub from: Address,
    /// Receiver; `None` for a contract creation.
    #[serde(default)]
    pub to: Option<Address>,
    /// Wei transferred.
    pub value: U256,
    /// Gas provided.
    pub gas: U256,
    /// Gas price.
    #[serde(default)]
    pub gas_price: Option<U256>,
    /// EIP-1559 only.
    #[serde(default)]
    pub max_fee_per_gas: Option<U256>,
    /// EIP-1559 only.
    #[serde(default)]
    pub max_priority_fee_per_gas: Option<U256>,
    /// Sender's nonce.
    pub nonce: U256,
    /// Transaction type (absent before typed transactions: 0).
    #[serde(rename = "type", default)]
    pub tx_type: Option<U256>,
    /// Input data.
    pub input: Bytes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_legacy_and_eip1559_transactions_exactly() {
        let json = r#"{"number":"0x5","hash":"0x0000000000000000000000000000000000000000000000000000000000000001",
            "timestamp":"0x3c","parentHash":"0x0000000000000000000000000000000000000000000000000000000000000000",
            "transactions":[
            {"blockHash":"0x0000000000000000000000000000000000000000000000000000000000000001","blockNumber":"0x5",
             "from":"0x00000000000000000000000000000000000000aa","gas":"0x5208","gasPrice":"0x7",
             "hash":"0x00000000000000000000000000000000000000000000000000000000000000ff","input":"0x",
             "nonce":"0x1","to":null,"transactionIndex":"0x0",
             "value":"0xffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff","type":"0x0",
             "v":"0x1b","r":"0x1","s":"0x2"},
            {"from":"0x00000000000000000000000000000000000000aa","gas":"0x5208","gasPrice":"0x7",
             "maxFeePerGas":"0x9","maxPriorityFeePerGas":"0x2",
             "hash":"0x00000000000000000000000000000000000000000000000000000000000000fe","input":"0xabcd",
             "nonce":"0x2","to":"0x00000000000000000000000000000000000000bb","transactionIndex":"0x1",
             "value":"0x10000000000000000","type":"0x2","chainId":"0x539"}]}"#;
        let block: BlockTransactions = serde_json::from_str(json).expect("parses");
        assert_eq!(block.number, 5);
        let [legacy, dynamic] = &block.transactions[..] else {
            panic!("two transactions")
        };
        assert_eq!(legacy.value, U256::MAX);
        assert_eq!(legacy.to, None);
        assert_eq!(legacy.max_fee_per_gas, None);
        assert_eq!(dynamic.value, U256::from(1u128 << 64));
        assert_eq!(dynamic.max_priority_fee_per_gas, Some(U256::from(2)));
        assert_eq!(dynamic.tx_type, Some(U256::from(2)));
        assert_eq!(dynamic.input.as_ref(), [0xab, 0xcd]);
    }
}
