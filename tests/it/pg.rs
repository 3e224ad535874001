//! A Postgres for tests: the server at `LOGSLICE_TEST_PG` (default [`DEFAULT_URL`]) and a schema of its own per
//! test, dropped when the [`TestSchema`] is dropped (best effort, also when the test panics).
//!
//! A missing server fails the test with a message saying how to start one; it is never a silent skip (and under
//! `CI=true` the message says so).

use std::sync::atomic::{AtomicU32, Ordering};

use logslice::config::SecretUrl;
use sqlx::{Connection, Executor, PgConnection};

/// The server used when `LOGSLICE_TEST_PG` is not set.
pub const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The server's URL.
pub fn url() -> url::Url {
    let text = std::env::var("LOGSLICE_TEST_PG").unwrap_or_else(|_| DEFAULT_URL.to_owned());
    url::Url::parse(&text).expect("LOGSLICE_TEST_PG is a postgres:// URL")
}

/// A schema private to one test: `t_<pid>_<counter>_<random>`, unique across parallel test processes.
pub struct TestSchema {
    /// The schema's name.
    pub name: String,
}

impl TestSchema {
    /// Names a fresh schema (the sink creates it) after checking that the server answers.
    ///
    /// # Panics
    /// When the server is not reachable, with how to start it.
    pub async fn new() -> Self {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let server = url();
        if let Err(err) = PgConnection::connect(server.as_str()).await {
            let under_ci = if std::env::var("CI").as_deref() == Ok("true") {
                " (CI=true: a missing Postgres fails the run)"
            } else {
                ""
            };
            panic!(
                "Postgres is not reachable at {} ({err}){under_ci}: start it with \
                 `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, \
                 or point LOGSLICE_TEST_PG at a server",
                SecretUrl::new(server)
            );
        }
        let name = format!(
            "t_{}_{}_{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed),
            fastrand::u32(..)
        );
        Self { name }
    }

    /// The server's URL for the sink; `application_name` is the schema's name so the test can find the
    /// sink's connections in `pg_stat_activity`.
    pub fn secret_url(&self) -> SecretUrl {
        let mut server = url();
        server
            .query_pairs_mut()
            .append_pair("application_name", &self.name);
        SecretUrl::new(server)
    }

    /// A connection of the test's own, with `search_path` set to the schema.
    pub async fn connect(&self) -> PgConnection {
        let mut conn = PgConnection::connect(url().as_str())
            .await
            .expect("Postgres answered a moment ago");
        conn.execute(format!("SET search_path TO \"{}\"", self.name).as_str())
            .await
            .expect("setting search_path");
        conn
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        // Drop cannot await, and the test's runtime may be the current thread: run the cleanup on a thread of
        // its own with a runtime of its own, and ignore failures (the schema names are unique anyway).
        let sql = format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name);
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut conn = PgConnection::connect(url().as_str()).await.ok()?;
                conn.execute(sql.as_str()).await.ok()?;
                conn.close().await.ok()
            })
        })
        .join();
    }
}
