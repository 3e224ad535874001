//! The decoding stage: fetched ranges become one [`Batch`] of raw logs, typed rows and the checkpoints it
//! moves. Pure: no I/O.

use crate::decode::{EventDecoder, Offer};
use crate::fetch::Fetched;
use crate::primitives::{BlockRange, Log};
use crate::sink::{Batch, Checkpoint, TypedRow};

use super::discover::Children;
use super::job::Contract;
use super::{Error, Job, SyncReport};

/// Decodes fetched ranges into one batch: the raw logs that a configured event of a contract that has joined
/// by their block takes, their typed rows, and the checkpoints the batch moves.
impl Job {
    pub(super) fn build_batch(
        &self,
        fetched: Vec<Fetched>,
        report: &mut SyncReport,
    ) -> Result<Batch, Error> {
        let mut batch = self.shell(&fetched);
        // Sized once (most logs are stored, most with one typed row): grown a log at a time, the vectors
        // were copied over and over, about 2% of the decoding thread on the default chain.
        let n_logs = fetched.iter().map(|f| f.logs.len()).sum();
        batch.logs.reserve_exact(n_logs);
        batch.typed.reserve_exact(n_logs);
        let children = self.children.read().expect("children lock");
        for log in fetched.into_iter().flat_map(|f| f.logs) {
            // A stale replica's copy of an orphaned block's log: never stored.
            if !log.removed
                && self.decode_log(&children, &log, batch.logs.len(), &mut batch.typed, report)?
            {
                batch.logs.push(log);
            }
        }
        Ok(batch)
    }

    /// [`Job::build_batch`] without the typed rows: the logs to store, and the rest of the batch. A batch
    /// written in parts decodes each part's typed rows as it goes ([`Job::next_part`]).
    pub(super) fn gather_batch(&self, fetched: Vec<Fetched>) -> Batch {
        let mut batch = self.shell(&fetched);
        batch
            .logs
            .reserve_exact(fetched.iter().map(|f| f.logs.len()).sum());
        let children = self.children.read().expect("children lock");
        for log in fetched.into_iter().flat_map(|f| f.logs) {
            let kept = !log.removed
                && self
                    .contracts_of(&children, &log)
                    .any(|contract| keeps(&self.contracts[contract], &self.decoders, &log));
            if kept {
                batch.logs.push(log);
            }
        }
        batch
    }

    /// The next part of a batch written in parts ([`Job::gather_batch`]): its first `part_logs` logs when
    /// more remain (true), else the rest with the batch's bookkeeping (false); with its typed rows.
    ///
    /// # Errors
    /// As [`Job::build_batch`].
    pub(super) fn next_part(
        &self,
        batch: &mut Batch,
        part_logs: usize,
        report: &mut SyncReport,
    ) -> Result<(Batch, bool), Error> {
        let more = batch.logs.len() > part_logs;
        let mut part = if more {
            batch.split_part(part_logs)
        } else {
            std::mem::take(batch)
        };
        part.typed.reserve_exact(part.logs.len());
        let children = self.children.read().expect("children lock");
        for (log_idx, log) in part.logs.iter().enumerate() {
            self.decode_log(&children, log, log_idx, &mut part.typed, report)?;
        }
        Ok((part, more))
    }

    /// A batch of `fetched`'s range with its bookkeeping (children created in it, blocks read from
    /// receipts, the checkpoints it moves) and no rows yet.
    fn shell(&self, fetched: &[Fetched]) -> Batch {
        let last = fetched
            .last()
            .map(|f| f.range.end())
            .expect("a batch has at least one range");
        // Each range as fetched: the sink refuses a batch whose ranges leave a gap (`sink::Error::Gap`).
        let ranges: Vec<BlockRange> = fetched.iter().map(|f| f.range).collect();
        let range = BlockRange::new(ranges[0].start(), last);
        Batch {
            ranges,
            children: range.map_or_else(Vec::new, |range| self.child_rows(range)),
            receipt_blocks: fetched
                .iter()
                .flat_map(|f| f.receipt_blocks.iter().copied())
                .collect(),
            checkpoints: self
                .contracts
                .iter()
                .filter(|c| c.next <= last)
                .map(|c| Checkpoint {
                    contract: c.name.clone(),
                    block: last,
                })
                .collect(),
            ..Batch::default()
        }
    }

    /// Decodes `log` (at `log_idx` of its batch) for every contract it is emitted for, offering it to the
    /// contract's events in their configured order ([`Offer`]: a named event by topic0, anonymous ones by
    /// their exact shape, one anonymous table at most), pushing its typed rows; whether an event took it (or
    /// claimed it by topic0), which keeps it raw.
    ///
    /// # Errors
    /// [`Error::NodeData`] for a log that has a named event's topic0 but does not decode, under
    /// `sync.strict` (otherwise it is counted in `report` and kept raw only).
    fn decode_log(
        &self,
        children: &Children,
        log: &Log,
        log_idx: usize,
        typed: &mut Vec<TypedRow>,
        report: &mut SyncReport,
    ) -> Result<bool, Error> {
        let mut kept = false;
        for contract in self.contracts_of(children, log) {
            let contract = &self.contracts[contract];
            let mut offer = Offer::new(&log.topics, &log.data, &contract.named_selectors);
            for &table in &contract.tables {
                match offer.decode(&self.decoders[table]) {
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
            kept |= offer.kept();
        }
        Ok(kept)
    }

    /// The contracts `log` is emitted for, by their configured address or as a factory's child (from the
    /// block of its creating log on), that have joined by its block.
    fn contracts_of<'a>(
        &'a self,
        children: &'a Children,
        log: &'a Log,
    ) -> impl Iterator<Item = usize> + 'a {
        self.by_address
            .get(&log.address)
            .into_iter()
            .flatten()
            .copied()
            .chain(children.emitters(&log.address, log.block_number))
            .filter(move |&c| self.contracts[c].next <= log.block_number)
    }
}

/// Whether the raw `logs` table keeps `log` for `contract`: one of its configured events takes it, or claims
/// it by topic0 ([`Offer::kept`]), as [`Job::build_batch`] decides without building the typed rows.
pub(super) fn keeps(contract: &Contract, decoders: &[EventDecoder], log: &Log) -> bool {
    let mut offer = Offer::new(&log.topics, &log.data, &contract.named_selectors);
    contract
        .tables
        .iter()
        .any(|&table| offer.takes(&decoders[table]))
}
