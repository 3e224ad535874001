//! What fetching reaches the providers through: the gate, and what fetching learns of their answers in a
//! run (how dense long address lists are, which receipts methods are served).

use std::future::Future;
use std::sync::Arc;

use crate::node::{Call, Gate};
use crate::primitives::Log;
use crate::rpc::{self, Blocks, Client, LogFilter};

use super::{receipts, wide, Error, OnSplit};

/// The gate and what fetching has learnt through it (shared by every request of a run).
pub struct Access {
    /// Every request goes through it.
    pub gate: Arc<Gate>,
    /// What answers for long address lists have shown, for choosing how to ask for them.
    pub(super) densities: wide::Densities,
    /// Which receipts methods the providers serve.
    pub(crate) receipts_served: receipts::Served,
}

impl Access {
    /// Fetching through `gate`, nothing learnt yet.
    pub fn new(gate: Arc<Gate>) -> Self {
        Self {
            gate,
            densities: wide::Densities::default(),
            receipts_served: receipts::Served::default(),
        }
    }

    /// [`Gate::send`], its error as fetching's.
    ///
    /// # Errors
    /// As [`Gate::send`].
    pub(crate) async fn send<T, F, Fut>(&self, call: Call, request: F) -> Result<T, Error>
    where
        F: FnMut(Arc<Client>) -> Fut,
        Fut: Future<Output = Result<T, rpc::Error>>,
    {
        self.gate.send(call, request).await.map_err(Error::from)
    }

    /// `eth_getLogs` of `filter`, a "narrower request" answer handed back as [`Error::Split`]; never
    /// asked of a provider whose head is below the filter's last block.
    ///
    /// # Errors
    /// Any [`Error`] of the gate.
    pub(crate) async fn get_logs(&self, filter: &LogFilter) -> Result<Vec<Log>, Error> {
        let call = Call::new("eth_getLogs").on_split(OnSplit::Return);
        let call = match filter.blocks {
            Blocks::Range(range) => call.up_to(range.end()),
            Blocks::Hash(_) => call,
        };
        self.send(call, |client| async move { client.get_logs(filter).await })
            .await
    }
}
