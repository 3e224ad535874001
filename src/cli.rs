//! The command line (clap derive types only). Names and meanings are the
//! README's, docs/operations.md's and docs/config.md's.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use logslice::pipeline::Target;

/// logslice: index EVM logs into SQLite or Postgres.
#[derive(Debug, Parser)]
#[command(name = "logslice", version, about, propagate_version = true)]
pub struct Cli {
    /// More log output (-v debug, -vv trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count, conflicts_with = "quiet")]
    pub verbose: u8,
    /// Less log output: warnings and errors only.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    /// Log line format on stderr (RUST_LOG overrides the level).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Cron mode: index every configured event up to the target block, commit, and exit.
    Sync(SyncArgs),
    /// Daemon: backfill, then follow the head (reorg-aware) until SIGINT/SIGTERM.
    Run(ConfigArg),
    /// Per contract and event: checkpoint, rows, blocks behind the node's head; the last reorg seen.
    Status(StatusArgs),
    /// Validate the config, the ABIs, the database and the node without indexing.
    Check(ConfigArg),
    #[cfg(feature = "sim")]
    /// Serve the built-in simulated access service (for demos, tests and benchmarks).
    Devnode(Box<devnode::cli::DevnodeArgs>),
    #[cfg(feature = "sim")]
    /// Benchmark against the simulated node: logs/s, requests per 10,000 logs, errors, peak RSS.
    Bench(crate::bench::BenchArgs),
}

/// `--config` and `--chain`.
#[derive(Debug, Args)]
pub struct ConfigArg {
    /// The config file.
    #[arg(long, short = 'c', default_value = "config.toml")]
    pub config: PathBuf,
    /// Only this chain of the config (a `[chains.NAME]` table; `default` for `[node]`). Repeatable;
    /// default: every chain.
    #[arg(long = "chain", value_name = "NAME")]
    pub chains: Vec<String>,
}

/// `sync` arguments.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The last block to index: a number, latest, safe or finalized.
    #[arg(long, value_parser = parse_target)]
    pub to: Target,
    /// Before syncing, drop this contract's typed tables, raw rows and checkpoint (in one transaction),
    /// then index it again from its start_block; for an ABI or address that changed. Repeatable.
    #[arg(long, value_name = "CONTRACT")]
    pub reindex: Vec<String>,
    /// The config file.
    #[command(flatten)]
    pub config: ConfigArg,
}

/// `status` arguments.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// The config file.
    #[command(flatten)]
    pub config: ConfigArg,
}

/// `--to`: a block number or a tag, as `Target` parses it.
fn parse_target(text: &str) -> Result<Target, <Target as std::str::FromStr>::Err> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
