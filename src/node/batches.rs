//! Many calls of one method (headers, full blocks, receipts): in JSON-RPC batches through the gate while the
//! providers take them, one request each once one refuses a batch as such. A batch is never larger than what
//! the providers' rates admit now: one refused for the rate lowers that rate, and the rest go in smaller
//! batches.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;

use crate::rpc::{self, Client};

use super::{Call, Error, Gate};

/// A gate and whether the providers still take batches (shared by every caller that learns it).
pub struct Batches<'a> {
    /// Every request goes through it.
    pub gate: &'a Gate,
    /// Cleared for good by the first batch refused as such.
    pub allowed: &'a AtomicBool,
}

impl Batches<'_> {
    /// One call of `method` per item of `items`, in batches of at most what the rate admits now and
    /// `max_per_batch` (`many`), up to `max_concurrency` batches at once; or, from the first batch refused as
    /// such, one request each (`one`, `max_concurrency` at a time). Answers in order. `up_to` is the highest
    /// block the items need, if any.
    ///
    /// # Errors
    /// The first [`Error`] other than a refusal of batches.
    #[allow(clippy::too_many_arguments)]
    pub async fn run<I, T, Many, ManyFut, One, OneFut>(
        &self,
        method: &'static str,
        items: &[I],
        max_per_batch: usize,
        up_to: Option<crate::primitives::BlockNumber>,
        many: Many,
        one: One,
    ) -> Result<Vec<T>, Error>
    where
        I: Copy,
        Many: Fn(Arc<Client>, Vec<I>) -> ManyFut,
        ManyFut: std::future::Future<Output = Result<Vec<T>, rpc::Error>>,
        One: Fn(Arc<Client>, I) -> OneFut,
        OneFut: std::future::Future<Output = Result<T, rpc::Error>>,
    {
        let gate = self.gate;
        let call = |calls: usize| {
            let call = Call::new(method).calls(calls);
            up_to.map_or(call, |block| call.up_to(block))
        };
        let mut answers = Vec::with_capacity(items.len());
        let mut rest = items;
        while !rest.is_empty() && self.allowed.load(Relaxed) {
            let per_batch = gate
                .max_calls_per_request(method)
                .clamp(1, max_per_batch.max(1));
            // Up to `max_concurrency` batches at once: one at a time left the reads of a batch of logs
            // waiting on round trips (measured: 7x slower end-to-end with the table than without, sequential).
            let per_group = per_batch * gate.max_concurrency();
            let group = &rest[..per_group.min(rest.len())];
            let results =
                futures::future::join_all(group.chunks(per_batch).map(|batch| {
                    gate.send(call(batch.len()), |client| many(client, batch.to_vec()))
                }))
                .await;
            // The batches before the first that must go again keep their answers; the rest go again.
            let mut answered = 0;
            let mut again = false;
            for (batch, result) in group.chunks(per_batch).zip(results) {
                match result {
                    Ok(batch_answers) if !again => {
                        answers.extend(batch_answers);
                        answered += batch.len();
                    }
                    Ok(_) => {}
                    // Only a refusal of batches as such turns them off; what is left is then read one by
                    // one below.
                    Err(Error::Fatal {
                        source: source @ rpc::Error::BatchRefused { .. },
                        provider,
                        ..
                    }) => {
                        tracing::info!(%provider, cause = %source, method, "reading one by one from now on");
                        self.allowed.store(false, Relaxed);
                        again = true;
                    }
                    // The rate came down while the group was out: the rest again, in smaller batches.
                    Err(Error::Oversized { .. }) => again = true,
                    Err(err) => return Err(err),
                }
            }
            rest = &rest[answered..];
        }
        let per_round = gate.max_concurrency();
        let one = &one;
        for chunk in rest.chunks(per_round) {
            let round = futures::future::join_all(
                chunk
                    .iter()
                    .map(|&item| gate.send(call(1), move |client| one(client, item))),
            )
            .await;
            for answer in round {
                answers.push(answer?);
            }
        }
        Ok(answers)
    }
}
