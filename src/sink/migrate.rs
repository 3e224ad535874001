//! Migrations embedded in the binary with `include_str!`, so `sqlx`'s `macros` feature (and its build cost)
//! is not needed; checksums are the same as `sqlx migrate` computes from the files.

use std::borrow::Cow;

use futures::future::BoxFuture;
use sqlx::error::BoxDynError;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

/// `(version, description, sql)` of every SQLite migration, in order.
pub(super) const SQLITE: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/sqlite/0001_init.sql"),
    ),
    (
        2,
        "block timestamps",
        include_str!("../../migrations/sqlite/0002_block_timestamps.sql"),
    ),
    (
        3,
        "factory children",
        include_str!("../../migrations/sqlite/0003_factory_children.sql"),
    ),
    (
        5,
        "transactions",
        include_str!("../../migrations/sqlite/0005_transactions.sql"),
    ),
];

/// `(version, description, sql)` of every Postgres migration, in order; numbered like [`SQLITE`].
pub(super) const POSTGRES: &[(i64, &str, &str)] = &[
    (
        1,
        "init",
        include_str!("../../migrations/postgres/0001_init.sql"),
    ),
    (
        2,
        "block timestamps",
        include_str!("../../migrations/postgres/0002_block_timestamps.sql"),
    ),
    (
        3,
        "factory children",
        include_str!("../../migrations/postgres/0003_factory_children.sql"),
    ),
    (
        5,
        "transactions",
        include_str!("../../migrations/postgres/0005_transactions.sql"),
    ),
];

#[derive(Debug)]
struct Embedded(&'static [(i64, &'static str, &'static str)]);

impl MigrationSource<'static> for Embedded {
    fn resolve(self) -> BoxFuture<'static, Result<Vec<Migration>, BoxDynError>> {
        Box::pin(async move {
            Ok(self
                .0
                .iter()
                .map(|&(version, description, sql)| {
                    Migration::new(
                        version,
                        Cow::Borrowed(description),
                        MigrationType::Simple,
                        Cow::Borrowed(sql),
                        false,
                    )
                })
                .collect())
        })
    }
}

/// A migrator over embedded migrations.
pub(super) async fn migrator(
    migrations: &'static [(i64, &'static str, &'static str)],
) -> Result<Migrator, sqlx::migrate::MigrateError> {
    Migrator::new(Embedded(migrations)).await
}
