//! The command line (clap derive types only). Names and meanings are fixed by `interface.md`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::pipeline::Target;

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
    /// Serve the built-in simulated access service (for demos, tests and benchmarks).
    Devnode(Box<crate::devnode::cli::DevnodeArgs>),
    /// Benchmark against the simulated node: logs/s, requests per 10,000 logs, errors, peak RSS.
    Bench(crate::bench::BenchArgs),
}

impl Cli {
    /// Whether the command writes to Postgres (a config whose `database.url` is one, or `bench
    /// --database postgres://...`), read before the runtime is built to size it. A config that does not
    /// load says no here; the command reports its errors.
    pub fn writes_postgres(&self) -> bool {
        let config_is_postgres = |path: &std::path::Path| {
            crate::config::load(path).is_ok_and(|config| {
                matches!(config.database.url, crate::config::DatabaseUrl::Postgres(_))
            })
        };
        match &self.command {
            Command::Sync(args) => config_is_postgres(&args.config.config),
            Command::Run(args) => config_is_postgres(&args.config),
            Command::Bench(args) => args.postgres_url().is_some(),
            Command::Status(_) | Command::Check(_) | Command::Devnode(_) => false,
        }
    }
}

/// `--config`.
#[derive(Debug, Args)]
pub struct ConfigArg {
    /// The config file.
    #[arg(long, short = 'c', default_value = "config.toml")]
    pub config: PathBuf,
}

/// `sync` arguments.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The last block to index: a number, latest, safe or finalized.
    #[arg(long, value_parser = clap::value_parser!(Target))]
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

impl clap::builder::ValueParserFactory for Target {
    type Parser = clap::builder::ValueParser;
    fn value_parser() -> Self::Parser {
        clap::builder::ValueParser::new(|s: &str| s.parse::<Target>())
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }

    /// The example config as it is (SQLite) and pointed at Postgres, beside the example's ABIs.
    #[test]
    fn postgres_is_told_apart_before_the_runtime_is_built() {
        use clap::Parser;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let dir = tempfile::tempdir().expect("a temp dir");
        std::os::unix::fs::symlink(root.join("abis"), dir.path().join("abis")).expect("abis");
        let example = std::fs::read_to_string(root.join("config.toml")).expect("the example");
        let on_postgres = example.replace(
            "url = \"sqlite://logslice.db\"",
            "url = \"postgres://postgres@127.0.0.1:5432/test\"",
        );
        assert_ne!(on_postgres, example, "the example's database line moved");
        let (sqlite, postgres) = (dir.path().join("sqlite.toml"), dir.path().join("pg.toml"));
        std::fs::write(&sqlite, example).expect("write");
        std::fs::write(&postgres, on_postgres).expect("write");
        let writes_postgres = |args: &[&str]| {
            super::Cli::try_parse_from([&["logslice"], args].concat())
                .expect("parses")
                .writes_postgres()
        };
        let (sqlite, postgres) = (sqlite.to_str().unwrap(), postgres.to_str().unwrap());
        assert!(writes_postgres(&[
            "sync", "--to", "10", "--config", postgres
        ]));
        assert!(writes_postgres(&["run", "--config", postgres]));
        assert!(!writes_postgres(&[
            "sync", "--to", "10", "--config", sqlite
        ]));
        assert!(!writes_postgres(&["run", "--config", sqlite]));
        assert!(!writes_postgres(&[
            "sync",
            "--to",
            "10",
            "--config",
            "/no/such/config.toml"
        ]));
        assert!(writes_postgres(&[
            "bench",
            "--database",
            "postgres://u@h/db"
        ]));
        assert!(!writes_postgres(&[
            "bench",
            "--database",
            "sqlite:///tmp/b.db"
        ]));
        assert!(!writes_postgres(&["bench"]));
        assert!(!writes_postgres(&["status", "--config", postgres]));
    }
}
