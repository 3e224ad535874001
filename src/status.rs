//! `logslice status`: what the database holds per contract and event (checkpoint, rows), how far each is
//! behind the node's head, the last reorg seen and how many stored blocks were read from receipts, as text
//! or JSON.
//!
//! The database part never waits for the node: the node is asked once, with a short timeout and no retry
//! loop, and when it cannot answer the report says "node unreachable" beside everything the database knows.
//! Nothing here writes: the database is opened only when it exists, and only read. The node and the
//! database appear only in their redacted forms.

use std::time::{Duration, UNIX_EPOCH};

use serde::Serialize;

use crate::config::{Config, DatabaseUrl, NodeConfig};
use crate::pipeline::{self, Node};
use crate::sink::{ContractStatus, IndexState};

/// The longest `status` and `check` wait for one answer of the node.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// What the providers said when asked once, and how the last indexing process saw them.
#[derive(Debug, Clone, Serialize)]
pub struct NodeStatus {
    /// The providers by name (one provider: its URL, redacted).
    pub url: String,
    /// The highest head a provider answered.
    pub head: Option<u64>,
    /// Why no provider answered (redacted).
    pub error: Option<String>,
    /// Each provider.
    pub providers: Vec<ProviderStatus>,
    /// When the last indexing process recorded its view of the providers (`reported`), RFC 3339 UTC.
    pub reported_at: Option<String>,
}

/// One provider: asked now, and as the last indexing process saw it.
#[derive(Debug, Clone, Serialize)]
pub struct ProviderStatus {
    /// Its `name`.
    pub name: String,
    /// Its URL, redacted.
    pub url: String,
    /// Its head, when it answered now.
    pub head: Option<u64>,
    /// Why it did not answer now (redacted).
    pub error: Option<String>,
    /// How the last indexing process saw it.
    pub reported: Option<ReportedProvider>,
}

/// A provider as the last indexing process reported it (`meta.providers`).
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct ReportedProvider {
    /// Its `name`.
    pub name: String,
    /// The rate in use (learned), in `unit`.
    pub rate: u32,
    /// The configured ceiling.
    pub ceiling: u32,
    /// `calls/s` or `credits/s`.
    pub unit: String,
    /// Requests sent.
    pub requests: u64,
    /// Error answers.
    pub errors: u64,
    /// Refusals for the rate.
    pub rate_limited: u64,
    /// `up` or `set aside`.
    pub state: String,
}

/// One event of a contract.
#[derive(Debug, Clone, Serialize)]
pub struct EventStatus {
    /// The event's name.
    pub event: String,
    /// Its table.
    pub table: String,
    /// Rows in the table; `None` when the table does not exist yet.
    pub rows: Option<u64>,
}

/// One contract.
#[derive(Debug, Clone, Serialize)]
pub struct ContractReport {
    /// Name.
    pub name: String,
    /// Whether the config names it (a contract only the database records was removed from the config).
    pub in_config: bool,
    /// First block to index.
    pub start_block: u64,
    /// Highest committed block; `None` before the first batch.
    pub checkpoint: Option<u64>,
    /// Blocks between the checkpoint and the node's head; `None` when the node did not answer.
    pub blocks_behind: Option<u64>,
    /// Its events.
    pub events: Vec<EventStatus>,
    /// For a contract created by a factory: the factory's name and the children recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub factory: Option<FactoryStatus>,
}

/// The children of a factory-created contract.
#[derive(Debug, Clone, Serialize)]
pub struct FactoryStatus {
    /// The factory's `[[contracts]]` name.
    pub factory: String,
    /// Children recorded in `factory_children`.
    pub children: u64,
}

/// The secondary indexes (`docs/schema.md`: `status` says when an index build is running).
#[derive(Debug, Clone, Serialize)]
pub struct IndexStatus {
    /// `built` (every index is there), `pending` (deferred for a backfill, built when it reaches its
    /// target) or `building` (a build started and has not finished: running now in another process, or cut
    /// short, then started again by the next `sync` or `run`).
    pub state: &'static str,
    /// The indexes not built yet.
    pub deferred: Vec<String>,
    /// When the build started, RFC 3339 UTC, while `building`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build_started: Option<String>,
}

impl From<IndexState> for IndexStatus {
    fn from(state: IndexState) -> Self {
        let build_started = state.build_started.map(|secs| {
            humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(secs)).to_string()
        });
        let state_name = match (state.deferred.is_empty(), &build_started) {
            (true, _) => "built",
            (false, None) => "pending",
            (false, Some(_)) => "building",
        };
        IndexStatus {
            state: state_name,
            deferred: state.deferred,
            build_started: build_started.filter(|_| state_name == "building"),
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The chain's name (`default` for `[node]`).
    pub chain: String,
    /// The database, redacted.
    pub database: String,
    /// Whether the database exists (a SQLite file not created yet does not).
    pub database_exists: bool,
    /// The chain id the database was built from.
    pub chain_id: Option<u64>,
    /// The last reorg the follower recorded (`meta.last_reorg`); `None`: none seen.
    pub last_reorg: Option<String>,
    /// Stored blocks whose logs were read from their receipts (over the node's result cap); `None` when the
    /// database does not exist.
    pub receipt_blocks: Option<u64>,
    /// The secondary indexes; `None` when the database does not exist.
    pub indexes: Option<IndexStatus>,
    /// The node.
    pub node: NodeStatus,
    /// Every configured contract, then any the database alone records.
    pub contracts: Vec<ContractReport>,
}

/// Asks each provider for its head once: `request_timeout` at most [`PROBE_TIMEOUT`], no retries. `explain`
/// words an error.
pub async fn probe_heads(
    config: &NodeConfig,
    explain: impl Fn(&pipeline::Error) -> String,
) -> NodeStatus {
    let mut status = NodeStatus {
        url: String::from("(not connected)"),
        head: None,
        error: None,
        providers: Vec::new(),
        reported_at: None,
    };
    let node = match Node::connect(
        &probe_config(config),
        &tokio_util::sync::CancellationToken::new(),
    )
    .await
    {
        Ok(node) => node,
        Err(err) => {
            status.error = Some(explain(&err));
            return status;
        }
    };
    status.url = match node.providers().as_slice() {
        [one] => one.url.clone(),
        _ => node.display.clone(),
    };
    let heads = tokio::time::timeout(PROBE_TIMEOUT * 2, node.heads()).await;
    let heads = heads.unwrap_or_else(|_| {
        let late = || {
            Err(pipeline::Error::NodeData(format!(
                "no answer within {}",
                humantime::format_duration(PROBE_TIMEOUT * 2)
            )))
        };
        node.providers().iter().map(|_| late()).collect()
    });
    for (provider, head) in node.providers().into_iter().zip(heads) {
        status.providers.push(ProviderStatus {
            name: provider.name,
            url: provider.url,
            head: head.as_ref().ok().copied(),
            error: head.as_ref().err().map(&explain),
            reported: None,
        });
    }
    status.head = status.providers.iter().filter_map(|p| p.head).max();
    if status.head.is_none() {
        status.error = status.providers.iter().find_map(|p| p.error.clone());
    }
    status
}

/// Adds what the last indexing process recorded (`meta.providers`) to `status`.
fn add_reported(status: &mut NodeStatus, recorded: Option<&str>) {
    #[derive(serde::Deserialize)]
    struct Recorded {
        at: u64,
        providers: Vec<ReportedProvider>,
    }
    let Some(recorded) = recorded.and_then(|text| serde_json::from_str::<Recorded>(text).ok())
    else {
        return;
    };
    status.reported_at = Some(
        humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(recorded.at))
            .to_string(),
    );
    for provider in &mut status.providers {
        provider.reported = recorded
            .providers
            .iter()
            .find(|r| r.name == provider.name)
            .cloned();
    }
}

/// The node settings for a quick look: one attempt, a short timeout.
pub fn probe_config(config: &NodeConfig) -> NodeConfig {
    let mut config = config.clone();
    for provider in &mut config.providers {
        provider.max_retries = 0;
        provider.request_timeout = provider.request_timeout.min(PROBE_TIMEOUT);
    }
    config
}

/// Gathers the report: the database part, then the node's head. `explain` words the node's error.
///
/// # Errors
/// [`pipeline::Error::Database`] when the database cannot be read; the node's failure is part of the
/// report instead.
pub async fn gather(
    config: &Config,
    explain: impl Fn(&pipeline::Error) -> String,
) -> Result<Report, pipeline::Error> {
    let mut node = probe_heads(&config.node, explain).await;
    let exists = match &config.database.url {
        DatabaseUrl::Sqlite(path) => path.as_os_str() == ":memory:" || path.exists(),
        DatabaseUrl::Postgres(_) => true,
    };
    let (database, chain_id, last_reorg, receipt_blocks, indexes, recorded) = if exists {
        let (mut sink, display) = pipeline::open_sink(config).await?;
        let read = async {
            // Per chain: the chain the database records; none before the first sync.
            if sink.bind_recorded(&config.chains[0].name).await?.is_none() {
                return Ok((None, None, None, 0, sink.index_state().await?, Vec::new()));
            }
            Ok::<_, crate::sink::Error>((
                sink.meta(crate::sink::META_PROVIDERS).await?,
                sink.chain_id().await?,
                sink.last_reorg().await?,
                sink.receipt_blocks().await?,
                sink.index_state().await?,
                sink.status().await?,
            ))
        }
        .await;
        sink.close().await;
        let (providers, chain_id, last_reorg, receipt_blocks, indexes, recorded) =
            read.map_err(|source| pipeline::Error::Database {
                database: display.clone(),
                source,
            })?;
        add_reported(&mut node, providers.as_deref());
        (
            display,
            chain_id,
            last_reorg,
            Some(receipt_blocks),
            Some(IndexStatus::from(indexes)),
            recorded,
        )
    } else {
        let display = match &config.database.url {
            DatabaseUrl::Sqlite(path) => format!("sqlite://{}", path.display()),
            DatabaseUrl::Postgres(url) => url.to_string(),
        };
        (display, None, None, None, None, Vec::new())
    };
    Ok(Report {
        chain: config.chains[0].name.clone(),
        database,
        database_exists: exists,
        chain_id,
        last_reorg,
        receipt_blocks,
        indexes,
        contracts: contracts(config, &recorded, node.head),
        node,
    })
}

/// Joins the configured contracts with what the database records.
fn contracts(
    config: &Config,
    recorded: &[ContractStatus],
    head: Option<u64>,
) -> Vec<ContractReport> {
    let rows_of = |table: &str| {
        recorded
            .iter()
            .flat_map(|c| &c.tables)
            .find(|t| t.table == table)
            .and_then(|t| t.rows)
    };
    let behind = |checkpoint: Option<u64>, start_block: u64| {
        head.map(|head| match checkpoint {
            Some(checkpoint) => head.saturating_sub(checkpoint),
            None => (head + 1).saturating_sub(start_block),
        })
    };
    let mut out: Vec<ContractReport> = config
        .contracts
        .iter()
        .map(|contract| {
            let record = recorded.iter().find(|c| c.name == contract.name);
            let checkpoint = record.and_then(|c| c.checkpoint);
            ContractReport {
                factory: contract.factory.as_ref().map(|f| FactoryStatus {
                    factory: f.contract.clone(),
                    children: record.map_or(0, |c| c.children),
                }),
                name: contract.name.clone(),
                in_config: true,
                start_block: contract.start_block,
                checkpoint,
                blocks_behind: behind(checkpoint, contract.start_block),
                events: contract
                    .events
                    .iter()
                    .map(|event| EventStatus {
                        event: event.event.name.clone(),
                        table: event.table.clone(),
                        rows: rows_of(&event.table),
                    })
                    .collect(),
            }
        })
        .collect();
    for contract in recorded
        .iter()
        .filter(|c| !config.contracts.iter().any(|k| k.name == c.name))
    {
        out.push(ContractReport {
            factory: None,
            name: contract.name.clone(),
            in_config: false,
            start_block: contract.start_block,
            checkpoint: contract.checkpoint,
            blocks_behind: behind(contract.checkpoint, contract.start_block),
            events: contract
                .tables
                .iter()
                .map(|t| EventStatus {
                    event: t.event.split('(').next().unwrap_or_default().to_owned(),
                    table: t.table.clone(),
                    rows: t.rows,
                })
                .collect(),
        });
    }
    out
}

/// One line per provider: its head now, and how the last indexing process saw it.
fn write_providers(f: &mut std::fmt::Formatter<'_>, node: &NodeStatus) -> std::fmt::Result {
    for provider in &node.providers {
        let now = match (provider.head, &provider.error) {
            (Some(head), _) => format!("head {head}"),
            (None, Some(err)) => format!("unreachable: {err}"),
            (None, None) => "unreachable".to_owned(),
        };
        write!(f, "  provider  {} {} ({now})", provider.name, provider.url)?;
        if let Some(seen) = &provider.reported {
            write!(
                f,
                "; last run: {}, rate {} of {} {}, {} requests, {} errors ({} for the rate)",
                seen.state,
                seen.rate,
                seen.ceiling,
                seen.unit,
                seen.requests,
                seen.errors,
                seen.rate_limited
            )?;
        }
        writeln!(f)?;
    }
    if let Some(at) = &node.reported_at {
        writeln!(f, "  (last run's view recorded at {at})")?;
    }
    Ok(())
}

impl std::fmt::Display for Report {
    /// The human form: a header, then one line per contract and event.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let chain = self.chain_id.map_or_else(
            || "chain id not recorded yet".to_owned(),
            |c| format!("chain id {c}"),
        );
        writeln!(f, "chain       {}", self.chain)?;
        if self.database_exists {
            writeln!(f, "database    {} ({chain})", self.database)?;
        } else {
            writeln!(
                f,
                "database    {} (does not exist yet: run logslice sync)",
                self.database
            )?;
        }
        match (&self.node.head, &self.node.error) {
            (Some(head), _) => writeln!(f, "node        {} (head {head})", self.node.url)?,
            (None, Some(err)) => writeln!(f, "node        node unreachable: {err}")?,
            (None, None) => writeln!(f, "node        node unreachable")?,
        }
        if self.node.providers.len() > 1 || self.node.reported_at.is_some() {
            write_providers(f, &self.node)?;
        }
        writeln!(
            f,
            "last reorg  {}",
            self.last_reorg.as_deref().unwrap_or("none")
        )?;
        if let Some(n_blocks) = self.receipt_blocks {
            writeln!(
                f,
                "receipts    {n_blocks} block{} read from receipts (over the node's result cap)",
                if n_blocks == 1 { "" } else { "s" }
            )?;
        }
        if let Some(indexes) = &self.indexes {
            let names = indexes.deferred.join(", ");
            match (indexes.state, &indexes.build_started) {
                ("building", Some(started)) => writeln!(
                    f,
                    "indexes     building since {started}: {names} (if no logslice is running, the build \
                     was cut short and runs again at the next sync or run)"
                )?,
                ("built", _) => writeln!(f, "indexes     built")?,
                _ => writeln!(
                    f,
                    "indexes     pending: {names} (deferred for the backfill; built when it reaches its \
                     target)"
                )?,
            }
        }
        writeln!(f)?;
        let mut rows: Vec<[String; 6]> = vec![[
            "contract".into(),
            "event".into(),
            "table".into(),
            "checkpoint".into(),
            "rows".into(),
            "behind".into(),
        ]];
        for contract in &self.contracts {
            let mut name = if contract.in_config {
                contract.name.clone()
            } else {
                format!("{} (not in config)", contract.name)
            };
            if let Some(factory) = &contract.factory {
                name = format!(
                    "{name} ({} children of {})",
                    factory.children, factory.factory
                );
            }
            let checkpoint = contract
                .checkpoint
                .map_or_else(|| "not started".to_owned(), |c| c.to_string());
            let behind = contract
                .blocks_behind
                .map_or_else(|| "node unreachable".to_owned(), |b| b.to_string());
            for event in &contract.events {
                rows.push([
                    name.clone(),
                    event.event.clone(),
                    event.table.clone(),
                    checkpoint.clone(),
                    event.rows.map_or_else(|| "-".to_owned(), |r| r.to_string()),
                    behind.clone(),
                ]);
            }
        }
        let widths: Vec<usize> = (0..6)
            .map(|col| rows.iter().map(|r| r[col].len()).max().unwrap_or(0))
            .collect();
        for row in rows {
            let line: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            writeln!(f, "{}", line.join("  ").trim_end())?;
        }
        Ok(())
    }
}
