//! The chains of one database (`chains`, migration 9): which chain id each configured chain name serves,
//! and the sink bound to one of them ([`Sink::bind_chain`]), so that every statement reading or writing
//! chain data names that chain id. Also what is per chain beside the rows: the last reorg and the
//! providers' report, columns of the chain's row (they were `meta` keys before migration 9).
//!
//! Nothing here asks the node: the caller gives the chain id it learned (or the one recorded).

use super::read::Record;
use super::write::{int, Param, Statement};
use super::{Error, Sink, META_LAST_REORG, META_PROVIDERS};

/// The chain a sink is bound to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Bound {
    /// The chain's `eth_chainId`.
    pub id: u64,
    /// The same, as the `chain_id` columns hold it (checked to fit at binding).
    pub column: i64,
    /// The chain's name in the config.
    pub name: String,
}

/// The chain binding of a sink ([`Sink::bind_chain`] and the reads of `chains`).
impl Sink {
    /// Binds the sink to chain `name`, which serves `chain_id`: records `(chain_id, name)` in `chains` on
    /// first use, and from now on every statement that reads or writes chain data names this chain id.
    /// Binding to another chain forgets what [`Sink::prepare`] set up (prepare again).
    ///
    /// # Errors
    /// [`Error::Mismatch`] naming both ids, the chain and the fix, when `name` is recorded with another chain
    /// id or `chain_id` under another name; [`Error::Invalid`] when a record cannot be read or `chain_id`
    /// does not fit the column; [`Error::Query`].
    pub async fn bind_chain(&mut self, name: &str, chain_id: u64) -> Result<(), Error> {
        bind(self, name, chain_id).await
    }

    /// Binds the sink to chain `name` with the chain id the database records for it (for commands that do
    /// not ask the node, such as `status` and `--reindex`); the id, or `None` (left unbound) when the
    /// database records no such chain.
    ///
    /// # Errors
    /// As [`Sink::bind_chain`].
    pub async fn bind_recorded(&mut self, name: &str) -> Result<Option<u64>, Error> {
        match recorded(self, name).await? {
            Some(chain_id) => {
                bind(self, name, chain_id).await?;
                Ok(Some(chain_id))
            }
            None => Ok(None),
        }
    }

    /// The chain id the database records for chain `name`; `None` before its first sync.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] when the record cannot be read.
    pub async fn recorded_chain(&self, name: &str) -> Result<Option<u64>, Error> {
        recorded(self, name).await
    }

    /// Every chain the database records, `(name, chain id)` in name order.
    ///
    /// # Errors
    /// [`Error::Query`]; [`Error::Invalid`] when a record cannot be read.
    pub async fn chains(&self) -> Result<Vec<(String, u64)>, Error> {
        all(self).await
    }

    /// The chain id the sink is bound to ([`Sink::bind_chain`]); `None` before.
    pub fn bound_chain(&self) -> Option<u64> {
        self.chain().map(|chain| chain.id)
    }
}

/// The column of `chains` holding a per-chain fact that a `meta` key named before migration 9.
pub(super) fn column_of(key: &str) -> Option<&'static str> {
    match key {
        META_LAST_REORG => Some("last_reorg"),
        META_PROVIDERS => Some("providers"),
        _ => None,
    }
}

/// `(name, chain id)` of every recorded chain whose name or id is one of those given (all when `None`).
async fn rows(sink: &Sink, filter: Option<(&str, i64)>) -> Result<Vec<(String, u64)>, Error> {
    let (sql, params) = match filter {
        Some((name, id)) => (
            "SELECT name, CAST(chain_id AS TEXT) FROM chains WHERE name = $1 OR chain_id = $2 \
             ORDER BY name",
            vec![Param::Text(name.to_owned()), Param::Int(id)],
        ),
        None => (
            "SELECT name, CAST(chain_id AS TEXT) FROM chains ORDER BY name",
            Vec::new(),
        ),
    };
    let rows = sink.fetch("reading the chains", sql, &params).await?;
    rows.into_iter()
        .map(|cells| {
            let mut record = Record::new("chains", cells);
            let name = record.key_text("name")?;
            Ok((name, record.number("chain_id", "a chain id")?))
        })
        .collect()
}

/// Every recorded chain, in name order.
pub(super) async fn all(sink: &Sink) -> Result<Vec<(String, u64)>, Error> {
    rows(sink, None).await
}

/// The chain id recorded for `name`.
pub(super) async fn recorded(sink: &Sink, name: &str) -> Result<Option<u64>, Error> {
    Ok(all(sink)
        .await?
        .into_iter()
        .find(|(recorded, _)| recorded == name)
        .map(|(_, id)| id))
}

/// The refusal of binding `name` to `chain_id` given what `chains` records, if any. Pure.
fn refusal(name: &str, chain_id: u64, recorded: &[(String, u64)]) -> Option<Error> {
    for (other_name, other_id) in recorded {
        if other_name == name && *other_id != chain_id {
            return Some(Error::Mismatch(format!(
                "the database holds chain {name:?} as chain id {other_id}, but its node serves chain id \
                 {chain_id}: point database.url at another database (on Postgres, database.schema at another \
                 schema will do), or point chain {name:?} at a node of chain {other_id}"
            )));
        }
        if *other_id == chain_id && other_name != name {
            return Some(Error::Mismatch(format!(
                "the database holds chain id {chain_id} as chain {other_name:?}, and the config names it \
                 {name:?}: rename the chain back to {other_name:?} in the config, or point database.url at \
                 another database (on Postgres, database.schema at another schema will do)"
            )));
        }
    }
    None
}

/// Binds `sink` to chain `name` serving `chain_id`, recording the pair on first use.
pub(super) async fn bind(sink: &mut Sink, name: &str, chain_id: u64) -> Result<(), Error> {
    let column = int("chains", format!("name = {name:?}"), "chain_id", chain_id)?;
    let recorded = rows(sink, Some((name, column))).await?;
    if let Some(refused) = refusal(name, chain_id, &recorded) {
        return Err(refused);
    }
    if recorded.is_empty() {
        let record = Statement::new(
            "recording the chain",
            "INSERT INTO chains (chain_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            vec![Param::Int(column), Param::Text(name.to_owned())],
        );
        sink.transaction(&[record]).await?;
        // Another process may have recorded either half of the pair meanwhile: check what is there now.
        let now = rows(sink, Some((name, column))).await?;
        if let Some(refused) = refusal(name, chain_id, &now) {
            return Err(refused);
        }
    }
    let bound = Bound {
        id: chain_id,
        column,
        name: name.to_owned(),
    };
    if sink.chain() != Some(&bound) {
        sink.set_chain(bound);
    }
    Ok(())
}

/// The bound chain's `column` of `chains` (a per-chain fact).
pub(super) async fn fact(sink: &Sink, column: &'static str) -> Result<Option<String>, Error> {
    let chain_id = sink.chain_param("reading a fact of the chain")?;
    let rows = sink
        .fetch(
            "reading a fact of the chain",
            &format!("SELECT {column} FROM chains WHERE chain_id = $1"),
            &[chain_id],
        )
        .await?;
    Ok(rows
        .into_iter()
        .next()
        .and_then(|mut cells| cells.remove(0)))
}

/// The statement setting the bound chain's `column` of `chains` to `value`.
pub(super) fn set_fact(
    sink: &Sink,
    column: &'static str,
    value: String,
) -> Result<Statement, Error> {
    let chain_id = sink.chain_param("recording a fact of the chain")?;
    Ok(Statement::new(
        "recording a fact of the chain",
        format!("UPDATE chains SET {column} = $1 WHERE chain_id = $2"),
        vec![Param::Text(value), chain_id],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_is_refused_under_another_id_and_an_id_under_another_name() {
        let recorded = vec![("default".to_owned(), 1)];
        assert!(refusal("default", 1, &recorded).is_none());
        assert!(refusal("base", 8453, &recorded).is_none());
        let other_id = refusal("default", 5, &recorded)
            .expect("another id")
            .to_string();
        for part in ["\"default\"", "chain id 1", "chain id 5", "database.url"] {
            assert!(other_id.contains(part), "{part}: {other_id}");
        }
        let other_name = refusal("mainnet", 1, &recorded)
            .expect("another name")
            .to_string();
        for part in [
            "\"default\"",
            "\"mainnet\"",
            "chain id 1",
            "rename the chain back",
        ] {
            assert!(other_name.contains(part), "{part}: {other_name}");
        }
    }
}
