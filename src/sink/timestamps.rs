//! The `block_timestamp` columns (`[sync] block_timestamps`): whether a database keeps them, and the one
//! decision of what to do when the config and the database disagree. A database records its choice in
//! `meta.block_timestamps` with its first sync; a switch between runs is refused (never a table that is half
//! stamped), and so is a database an earlier version filled without timestamps while they are wanted.
//!
//! Why a refusal and not a fill from headers for an earlier version's rows: the fill costs one header call
//! per block with logs over the whole history (100,000 calls for the default 1,000,000-log chain, over an
//! hour at 25 requests per second), while `--reindex` against a node that sends `blockTimestamp` (most do)
//! costs the few hundred `eth_getLogs` calls of the first sync; and `block_timestamps = false` keeps the
//! database as it is. The user picks; nothing is rebuilt or left NULL behind their back.

use super::write::{Param, Statement};
use super::{read, Error, Sink};

/// `meta` key of the database's choice: `on` or `off`.
pub const META_BLOCK_TIMESTAMPS: &str = "block_timestamps";

/// Whether `logs` and the typed tables carry `block_timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Timestamps {
    /// Not kept (`block_timestamps = false`), and the layout of a sink never told otherwise: typed tables
    /// as before, nothing written to `logs.block_timestamp`.
    #[default]
    Omitted,
    /// Kept: every log of a batch carries its block's timestamp (checked before writing).
    Stored,
}

impl Timestamps {
    fn as_meta(self) -> &'static str {
        match self {
            Timestamps::Stored => "on",
            Timestamps::Omitted => "off",
        }
    }

    fn as_config(self) -> &'static str {
        match self {
            Timestamps::Stored => "true",
            Timestamps::Omitted => "false",
        }
    }
}

/// What the database holds, as far as timestamps go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    /// `meta.block_timestamps`, as written.
    pub recorded: Option<String>,
    /// Whether `logs` has the column.
    pub has_column: bool,
    /// Whether `logs` has rows.
    pub has_rows: bool,
}

/// What to change so that the database matches the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// Nothing: it matches.
    Keep,
    /// Add (`Stored`) or drop (`Omitted`) `logs.block_timestamp` as needed, and record the choice.
    Settle(Timestamps),
}

/// Decides what to do with a database that holds `found` for a config that wants `wanted`. Pure.
///
/// # Errors
/// [`Error::Mismatch`] naming the fixes, when rows exist that were written under the other choice.
pub(super) fn plan(found: &Found, wanted: Timestamps) -> Result<Plan, Error> {
    let column_fits = found.has_column == (wanted == Timestamps::Stored);
    match found.recorded.as_deref() {
        Some(recorded) if recorded == wanted.as_meta() && column_fits => Ok(Plan::Keep),
        // No rows: nothing would be mixed, so the database simply takes the config's choice (a new
        // database, or one emptied by `--reindex` of every contract).
        _ if !found.has_rows => Ok(Plan::Settle(wanted)),
        Some(recorded) => {
            let other = if recorded == "on" {
                Timestamps::Stored
            } else {
                Timestamps::Omitted
            };
            Err(Error::Mismatch(format!(
                "the database was indexed with [sync] block_timestamps = {} and the config now says {}: set it \
                 back to {}, or re-index every contract (`logslice sync --reindex <contract> ...` naming each) \
                 or index into a new database, so that no table mixes rows with and without timestamps",
                other.as_config(),
                wanted.as_config(),
                other.as_config()
            )))
        }
        // Rows of a version before block timestamps: they have none.
        None if wanted == Timestamps::Omitted => Ok(Plan::Settle(Timestamps::Omitted)),
        None => Err(Error::Mismatch(
            "the database was indexed by a logslice without block timestamps, so its rows have none, and \
             [sync] block_timestamps is true (the default): set block_timestamps = false to keep indexing \
             without them, or re-index every contract (`logslice sync --reindex <contract> ...` naming each; \
             against a node that sends blockTimestamp this costs no header requests) or index into a new \
             database"
                .into(),
        )),
    }
}

/// Brings the database in line with `wanted` (see [`plan`]) and tells the sink.
pub(super) async fn settle(sink: &mut Sink, wanted: Timestamps) -> Result<(), Error> {
    let has_column = read::columns(sink, "logs")
        .await?
        .iter()
        .any(|(name, _)| name == "block_timestamp");
    let has_rows = !sink
        .fetch(
            "looking for raw logs",
            "SELECT CAST(block_number AS TEXT) FROM logs LIMIT 1",
            &[],
        )
        .await?
        .is_empty();
    let found = Found {
        recorded: read::meta(sink, META_BLOCK_TIMESTAMPS).await?,
        has_column,
        has_rows,
    };
    if let Plan::Settle(timestamps) = plan(&found, wanted)? {
        let mut statements = Vec::new();
        match (timestamps, found.has_column) {
            (Timestamps::Stored, false) => statements.push(Statement::new(
                "adding logs.block_timestamp",
                format!(
                    "ALTER TABLE logs ADD COLUMN block_timestamp {}",
                    sink.dialect().timestamp_type
                ),
                Vec::new(),
            )),
            (Timestamps::Omitted, true) => statements.push(Statement::new(
                "dropping logs.block_timestamp",
                "ALTER TABLE logs DROP COLUMN block_timestamp",
                Vec::new(),
            )),
            _ => {}
        }
        statements.push(Statement::new(
            "recording block_timestamps",
            "INSERT INTO meta (key, value) VALUES ($1, $2) \
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            vec![
                Param::Text(META_BLOCK_TIMESTAMPS.into()),
                Param::Text(timestamps.as_meta().into()),
            ],
        ));
        sink.transaction(&statements).await?;
    }
    sink.set_timestamps(wanted);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        recorded: Option<&str>,
        has_column: bool,
        has_rows: bool,
        wanted: Timestamps,
    ) -> String {
        let found = Found {
            recorded: recorded.map(str::to_owned),
            has_column,
            has_rows,
        };
        match plan(&found, wanted) {
            Ok(plan) => format!("{plan:?}"),
            Err(err) => err.to_string(),
        }
    }

    use Timestamps::{Omitted, Stored};

    #[test]
    fn an_empty_database_takes_the_config_choice() {
        // New (migration 0002 added the column), or emptied by a reindex of every contract.
        assert_eq!(check(None, true, false, Stored), "Settle(Stored)");
        assert_eq!(check(None, true, false, Omitted), "Settle(Omitted)");
        assert_eq!(check(Some("off"), false, false, Stored), "Settle(Stored)");
        assert_eq!(check(Some("on"), true, false, Omitted), "Settle(Omitted)");
    }

    #[test]
    fn the_same_choice_changes_nothing() {
        assert_eq!(check(Some("on"), true, true, Stored), "Keep");
        assert_eq!(check(Some("off"), false, true, Omitted), "Keep");
    }

    #[test]
    fn a_switch_with_rows_is_refused_naming_the_fixes() {
        let on_to_off = check(Some("on"), true, true, Omitted);
        assert!(
            on_to_off.contains("block_timestamps = true and the config now says false"),
            "{on_to_off}"
        );
        assert!(on_to_off.contains("--reindex"), "{on_to_off}");
        let off_to_on = check(Some("off"), false, true, Stored);
        assert!(off_to_on.contains("set it back to false"), "{off_to_on}");
    }

    #[test]
    fn an_earlier_versions_rows_are_refused_with_timestamps_and_kept_without() {
        let refused = check(None, true, true, Stored);
        assert!(refused.contains("without block timestamps"), "{refused}");
        assert!(refused.contains("block_timestamps = false") && refused.contains("--reindex"));
        assert_eq!(check(None, true, true, Omitted), "Settle(Omitted)");
    }
}
