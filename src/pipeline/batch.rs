//! The decoding stage: fetched ranges become one [`Batch`] of raw logs, typed rows and the checkpoints it
//! moves. Pure: no I/O.

use crate::fetch::Fetched;
use crate::primitives::{BlockRange, Log};
use crate::sink::{Batch, Checkpoint, TypedRow};

use super::discover::Children;
use super::{Error, Job, SyncReport};

/// Decodes fetched ranges into one batch: the raw logs that match a configured event of a contract that has
/// joined by their block, their typed rows, and the checkpoints the batch moves.
impl Job {
    pub(super) fn build_batch(
        &self,
        fetched: Vec<Fetched>,
        report: &mut SyncReport,
    ) -> Result<Batch, Error> {
        let mut batch = self.gather_batch(fetched);
        batch.typed = self.decode(&batch.logs, report)?;
        Ok(batch)
    }

    /// [`Job::build_batch`] without the typed rows: the logs to store, and the rest of the batch. A batch
    /// written in parts decodes each part's typed rows as it goes ([`Job::decode`]).
    pub(super) fn gather_batch(&self, fetched: Vec<Fetched>) -> Batch {
        let (contracts, decoders) = (&self.contracts, &self.decoders);
        let first = fetched
            .first()
            .map(|f| f.range.start())
            .expect("a batch has at least one range");
        let last = fetched
            .last()
            .map(|f| f.range.end())
            .expect("a batch has at least one range");
        let range = BlockRange::new(first, last);
        let mut batch = Batch {
            range,
            children: range.map_or_else(Vec::new, |range| self.child_rows(range)),
            ..Batch::default()
        };
        for f in &fetched {
            batch.receipt_blocks.extend(&f.receipt_blocks);
        }
        {
            let children = self.children.read().expect("children lock");
            for log in fetched.into_iter().flat_map(|f| f.logs) {
                // A stale replica's copy of an orphaned block's log (`removed`) is never stored.
                // Raw rows keep their rule: a log with the topic count of an anonymous event is kept raw
                // even when it turns out to be another event's.
                let matched = !log.removed
                    && self
                        .tables_of(&children, &log)
                        .any(|(_, table)| decoders[table].matches(&log.topics));
                if matched {
                    batch.logs.push(log);
                }
            }
        }
        batch.checkpoints = contracts
            .iter()
            .filter(|c| c.next <= last)
            .map(|c| Checkpoint {
                contract: c.name.clone(),
                block: last,
            })
            .collect();
        batch
    }

    /// The typed rows of `logs` (each row's `log` its index in `logs`), in log order.
    ///
    /// # Errors
    /// [`Error::NodeData`] for a log that matches an event but does not decode, under `sync.strict`
    /// (otherwise it is counted in `report` and kept raw only).
    pub(super) fn decode(
        &self,
        logs: &[Log],
        report: &mut SyncReport,
    ) -> Result<Vec<TypedRow>, Error> {
        let children = self.children.read().expect("children lock");
        let mut typed = Vec::with_capacity(logs.len());
        for (log_idx, log) in logs.iter().enumerate() {
            for (contract, table) in self.tables_of(&children, log) {
                let contract = &self.contracts[contract];
                match self.decoders[table].decode_own(&log.topics, &log.data, &contract.named_selectors) {
                    Ok(Some(values)) => typed.push(TypedRow { table, log: log_idx, values }),
                    Ok(None) => {}
                    Err(err) if self.strict => {
                        return Err(Error::NodeData(format!(
                            "block {} log {} of {}: {err} (sync.strict is on; set it to false to keep such logs raw only)",
                            log.block_number, log.log_index, contract.name
                        )))
                    }
                    Err(err) => {
                        report.undecodable += 1;
                        tracing::warn!(block = log.block_number, log_index = log.log_index, contract = %contract.name, cause = %err, "kept raw only");
                    }
                }
            }
        }
        Ok(typed)
    }

    /// The contracts `log` is emitted for, by their configured address or as a factory's child (from the
    /// block of its creating log on), that have joined by its block, each with every table of theirs.
    fn tables_of<'a>(
        &'a self,
        children: &'a Children,
        log: &'a Log,
    ) -> impl Iterator<Item = (usize, usize)> + 'a {
        self.by_address
            .get(&log.address)
            .into_iter()
            .flatten()
            .copied()
            .chain(children.emitters(&log.address, log.block_number))
            .filter(move |&c| self.contracts[c].next <= log.block_number)
            .flat_map(move |c| {
                self.contracts[c]
                    .tables
                    .iter()
                    .map(move |&table| (c, table))
            })
    }
}
