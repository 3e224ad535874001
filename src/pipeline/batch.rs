//! The decoding stage: fetched ranges become one [`Batch`] of raw logs, typed rows and the checkpoints it
//! moves. Pure: no I/O.

use crate::fetch::Fetched;
use crate::primitives::BlockRange;
use crate::sink::{Batch, Checkpoint, TypedRow};

use super::{Error, Job, SyncReport};

/// Decodes fetched ranges into one batch: the raw logs that match a configured event of a contract that has
/// joined by their block, their typed rows, and the checkpoints the batch moves.
impl Job {
    pub(super) fn build_batch(
        &self,
        fetched: Vec<Fetched>,
        report: &mut SyncReport,
    ) -> Result<Batch, Error> {
        let (contracts, by_address, decoders, strict) = (
            &self.contracts,
            &self.by_address,
            &self.decoders,
            self.strict,
        );
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
        let children = self.children.read().expect("children lock");
        for f in &fetched {
            batch.receipt_blocks.extend(&f.receipt_blocks);
        }
        for log in fetched.into_iter().flat_map(|f| f.logs) {
            if log.removed {
                // A stale replica's copy of an orphaned block's log: never stored.
                continue;
            }
            let log_idx = batch.logs.len();
            let mut matched = false;
            // A factory's child emits for its contract from the block of its creating log on.
            let emitters = by_address
                .get(&log.address)
                .into_iter()
                .flatten()
                .copied()
                .chain(children.emitters(&log.address, log.block_number));
            for contract_idx in emitters {
                let contract = &contracts[contract_idx];
                if contract.next > log.block_number {
                    continue;
                }
                for &table in &contract.tables {
                    let decoder = &decoders[table];
                    // Raw rows keep their rule: a log with the topic count of an anonymous event is kept
                    // raw even when it turns out to be another event's.
                    matched |= decoder.matches(&log.topics);
                    match decoder.decode_own(&log.topics, &log.data, &contract.named_selectors) {
                    Ok(Some(values)) => batch.typed.push(TypedRow { table, log: log_idx, values }),
                    Ok(None) => {}
                    Err(err) if strict => {
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
            if matched {
                batch.logs.push(log);
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
        Ok(batch)
    }
}
