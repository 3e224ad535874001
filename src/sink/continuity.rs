//! Checkpoints that never skip a block. A batch's ranges must be contiguous, and each checkpoint it moves
//! must be of a contract whose next block (its checkpoint + 1, or its start block before its first
//! checkpoint) the batch covers: otherwise the blocks between would count as indexed and never be fetched.
//! Either is a bug of ours, not the node's, and the batch is refused before anything of it is written.
//!
//! The checks come in a pair, like every check of a batch: [`check`] looks at the batch alone where it is
//! encoded; [`Nexts::claim`] compares it with the checkpoints the sink read back at `prepare` and has moved
//! since, where it is written. Nothing here decides which blocks a batch covers: the pipeline does.

use std::collections::HashMap;

use super::{Batch, BlockNumber, ContractSpec, Error};

/// Checks a batch alone: its ranges are contiguous, and every checkpoint it moves lies within them.
///
/// # Errors
/// [`Error::Gap`] naming the ranges, or the contract and the block its checkpoint would move to.
pub(super) fn check(batch: &Batch) -> Result<(), Error> {
    for pair in batch.ranges.windows(2) {
        if pair[0].end().checked_add(1) != Some(pair[1].start()) {
            return Err(Error::Gap(format!(
                "its range {} is followed by {}",
                pair[0], pair[1]
            )));
        }
    }
    let covered = batch.range();
    for checkpoint in &batch.checkpoints {
        let beyond = covered.is_none_or(|covered| checkpoint.block > covered.end());
        if beyond {
            let covered = covered.map_or("no blocks".to_owned(), |covered| {
                format!("blocks {} to {}", covered.start(), covered.end())
            });
            return Err(Error::Gap(format!(
                "it covers {covered} but would move the checkpoint of contract {:?} to block {}",
                checkpoint.contract, checkpoint.block
            )));
        }
    }
    Ok(())
}

/// The next block of every prepared contract, as the database has it: read back at `prepare`, then moved by
/// every batch the sink takes, by a rollback and by a reindex. It is never behind the database (a batch
/// counts from the moment it is taken, even when its commit then fails), so a batch it refuses skips
/// blocks for certain; the sink is the database's only writer.
#[derive(Debug, Clone, Default)]
pub(super) struct Nexts {
    contracts: HashMap<String, Next>,
}

#[derive(Debug, Clone, Copy)]
struct Next {
    start_block: BlockNumber,
    checkpoint: Option<BlockNumber>,
}

impl Next {
    /// The first block not committed, as the pipeline computes it from the same records.
    fn block(self) -> BlockNumber {
        self.checkpoint.map_or(self.start_block, |checkpoint| {
            self.start_block.max(checkpoint.saturating_add(1))
        })
    }
}

impl Nexts {
    /// The next blocks of `contracts` from their start blocks and the `checkpoints` the database holds.
    pub(super) fn read_back(
        contracts: &[ContractSpec],
        checkpoints: &HashMap<String, BlockNumber>,
    ) -> Self {
        let contracts = contracts
            .iter()
            .map(|contract| {
                let next = Next {
                    start_block: contract.start_block,
                    checkpoint: checkpoints.get(&contract.name).copied(),
                };
                (contract.name.clone(), next)
            })
            .collect();
        Self { contracts }
    }

    /// Takes `batch` if every checkpoint it moves is of a prepared contract whose next block it covers
    /// (from its first block on), and moves those checkpoints; a batch refused moves none.
    ///
    /// # Errors
    /// [`Error::Skipped`] naming the contract, its next block and the batch's first block;
    /// [`Error::Gap`] for a batch that covers no blocks; [`Error::Malformed`] for a contract that was not
    /// prepared.
    pub(super) fn claim(&mut self, batch: &Batch) -> Result<(), Error> {
        for checkpoint in &batch.checkpoints {
            let next = self.contracts.get(&checkpoint.contract).ok_or_else(|| {
                Error::Malformed(format!(
                    "a batch moves the checkpoint of contract {:?}, which the sink was not prepared for",
                    checkpoint.contract
                ))
            })?;
            let Some(covered) = batch.range() else {
                return Err(Error::Gap(format!(
                    "it covers no blocks but would move the checkpoint of contract {:?}",
                    checkpoint.contract
                )));
            };
            let expected = next.block();
            if covered.start() > expected {
                return Err(Error::Skipped {
                    contract: checkpoint.contract.clone(),
                    expected,
                    first: covered.start(),
                });
            }
        }
        for checkpoint in &batch.checkpoints {
            if let Some(next) = self.contracts.get_mut(&checkpoint.contract) {
                next.checkpoint = Some(checkpoint.block);
            }
        }
        Ok(())
    }

    /// Moves checkpoints above `ancestor` back to it, as a rollback does in the database.
    pub(super) fn rolled_back(&mut self, ancestor: BlockNumber) {
        for next in self.contracts.values_mut() {
            if next
                .checkpoint
                .is_some_and(|checkpoint| checkpoint > ancestor)
            {
                next.checkpoint = Some(ancestor);
            }
        }
    }

    /// Forgets the checkpoint of `contract`, as a reindex does in the database.
    pub(super) fn forget(&mut self, contract: &str) {
        if let Some(next) = self.contracts.get_mut(contract) {
            next.checkpoint = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::primitives::BlockRange;
    use crate::sink::Checkpoint;

    fn batch(ranges: &[(u64, u64)], checkpoints: &[(&str, u64)]) -> Batch {
        Batch {
            ranges: ranges
                .iter()
                .map(|&(start, end)| BlockRange::new(start, end).unwrap())
                .collect(),
            checkpoints: checkpoints
                .iter()
                .map(|&(contract, block)| Checkpoint {
                    contract: contract.to_owned(),
                    block,
                })
                .collect(),
            ..Batch::default()
        }
    }

    fn nexts() -> Nexts {
        let spec = |name: &str, start_block| ContractSpec {
            name: name.to_owned(),
            addresses: Vec::new(),
            events: Vec::new(),
            start_block,
            filters: None,
        };
        let checkpoints = HashMap::from([("a".to_owned(), 99)]);
        Nexts::read_back(&[spec("a", 0), spec("b", 150)], &checkpoints)
    }

    #[test]
    fn a_batch_alone_must_be_contiguous_and_hold_its_checkpoints() {
        assert!(check(&batch(&[(100, 149), (150, 199)], &[("a", 199)])).is_ok());
        assert!(
            check(&batch(&[], &[])).is_ok(),
            "a batch of bookkeeping only"
        );
        for (ranges, wanted) in [
            (
                &[(100, 149), (151, 199)][..],
                "[100, 149] is followed by [151, 199]",
            ),
            (
                &[(100, 149), (140, 199)][..],
                "[100, 149] is followed by [140, 199]",
            ),
            (&[(100, 149)][..], "covers blocks 100 to 149 but would move"),
            (&[][..], "covers no blocks"),
        ] {
            let err = check(&batch(ranges, &[("a", 199)])).unwrap_err();
            assert!(
                matches!(&err, Error::Gap(why) if why.contains(wanted)),
                "{ranges:?}: {err}"
            );
        }
    }

    /// Goal: a checkpoint moves only from the contract's next block on, and a refused batch moves none.
    #[test]
    fn a_batch_must_start_at_or_below_each_contracts_next_block() {
        let mut nexts = nexts();
        assert!(nexts.claim(&batch(&[(100, 149)], &[("a", 149)])).is_ok());
        let err = nexts
            .claim(&batch(&[(151, 199)], &[("a", 199)]))
            .unwrap_err();
        assert!(
            matches!(&err, Error::Skipped { contract, expected: 150, first: 151 } if contract == "a"),
            "{err:?}"
        );
        assert!(err
            .to_string()
            .contains("blocks 150 to 150 would never be indexed"));
        // b has no checkpoint: its start block is its next; one bad checkpoint refuses the whole batch.
        let taken = nexts.claim(&batch(&[(150, 199)], &[("a", 199), ("b", 199)]));
        assert!(taken.is_ok(), "a's next is 150, b's its start block 150");
        let refused = nexts.claim(&batch(&[(201, 249)], &[("b", 249)]));
        assert!(matches!(refused, Err(Error::Skipped { expected: 200, .. })));
        assert!(nexts.claim(&batch(&[(200, 249)], &[("a", 249)])).is_ok());
        // An overlap is harmless (rows are idempotent): a batch from below the next block is taken.
        assert!(nexts.claim(&batch(&[(120, 299)], &[("a", 299)])).is_ok());
        let unknown = nexts.claim(&batch(&[(0, 9)], &[("c", 9)]));
        assert!(matches!(unknown, Err(Error::Malformed(_))), "{unknown:?}");
    }

    #[test]
    fn rollbacks_and_reindexes_move_next_blocks_back_as_the_database_does() {
        let mut nexts = nexts();
        nexts.claim(&batch(&[(100, 199)], &[("a", 199)])).unwrap();
        nexts.rolled_back(150);
        assert!(nexts.claim(&batch(&[(151, 160)], &[("a", 160)])).is_ok());
        nexts.forget("a");
        let refused = nexts.claim(&batch(&[(161, 170)], &[("a", 170)]));
        assert!(
            matches!(
                refused,
                Err(Error::Skipped {
                    expected: 0,
                    first: 161,
                    ..
                })
            ),
            "{refused:?}"
        );
    }
}
