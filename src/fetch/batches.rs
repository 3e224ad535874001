//! Many calls of one method (headers, full blocks, receipts): in JSON-RPC batches through the gate while the
//! node takes them, one request each once it refuses one as such.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use crate::rpc;

use super::{Error, Gate, OnSplit};

/// A gate and whether the node still takes batches (shared by every caller that learns it).
pub struct Batches<'a> {
    /// Every request goes through it.
    pub gate: &'a Gate,
    /// Cleared for good by the first batch the node refuses as such.
    pub allowed: &'a AtomicBool,
}

impl Batches<'_> {
    /// One call of `method` per item of `items`, in batches of at most a second's worth of the rate and
    /// `max_per_batch` (`many`), up to `max_concurrency` batches at once; or, from the first batch the node
    /// refuses as such, one request each (`one`, `max_concurrency` at a time). Answers in order.
    ///
    /// # Errors
    /// The first [`Error`] other than a refusal of batches.
    pub async fn run<I, T, Many, ManyFut, One, OneFut>(
        &self,
        method: &'static str,
        items: &[I],
        max_per_batch: usize,
        many: Many,
        one: One,
    ) -> Result<Vec<T>, Error>
    where
        I: Copy,
        Many: Fn(Vec<I>) -> ManyFut,
        ManyFut: std::future::Future<Output = Result<Vec<T>, rpc::Error>>,
        One: Fn(I) -> OneFut,
        OneFut: std::future::Future<Output = Result<T, rpc::Error>>,
    {
        let gate = self.gate;
        let mut answers = Vec::with_capacity(items.len());
        let per_batch = gate.max_calls_per_request().clamp(1, max_per_batch.max(1));
        // Up to `max_concurrency` batches at once: one at a time left the reads of a batch of logs waiting
        // on round trips (measured: 7x slower end-to-end with the table than without, sequential).
        let per_group = per_batch * gate.config().max_concurrency.max(1);
        let mut rest = items;
        while !rest.is_empty() && self.allowed.load(Relaxed) {
            let (group, after) = rest.split_at(per_group.min(rest.len()));
            let results = futures::future::join_all(group.chunks(per_batch).map(|batch| {
                gate.run_calls(method, batch.len(), OnSplit::Retry, || many(batch.to_vec()))
            }))
            .await;
            let mut group_answers = Vec::with_capacity(group.len());
            let mut refused = None;
            for result in results {
                match result {
                    Ok(batch_answers) => group_answers.extend(batch_answers),
                    // Only a refusal of batches as such turns them off; the group is then read again one
                    // by one below.
                    Err(Error::Fatal {
                        source: source @ rpc::Error::BatchRefused { .. },
                        ..
                    }) => refused = Some(source),
                    Err(err) => return Err(err),
                }
            }
            match refused {
                Some(source) => {
                    tracing::info!(cause = %source, method, "reading one by one from now on");
                    self.allowed.store(false, Relaxed);
                }
                None => {
                    answers.extend(group_answers);
                    rest = after;
                }
            }
        }
        let per_round = gate.config().max_concurrency.max(1);
        let one = &one;
        for chunk in rest.chunks(per_round) {
            let round = futures::future::join_all(
                chunk
                    .iter()
                    .map(|&item| gate.run(method, OnSplit::Retry, move || one(item))),
            )
            .await;
            for answer in round {
                answers.push(answer?);
            }
        }
        Ok(answers)
    }
}
