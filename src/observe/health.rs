//! Whether the job is healthy, and the `/metrics` + `/health` server: [`StallClock`] (when the checkpoint last
//! advanced, and what `run` is riding out), the `/health` answer, and the routes. Decides nothing about the
//! job: `pipeline` moves the clock, this module reads it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio_util::sync::CancellationToken;

use super::{SECONDS_SINCE_ADVANCE, SECONDS_UNHEALTHY};

/// When each chain's checkpoint last advanced, and what the daemon is riding out on each, if anything;
/// shared by the [`super::Observer`]s, `pipeline::run` and the `/health` route. Each call counts for the
/// chain of the calling task ([`super::chain::current`]); the readers answer for the worst chain.
#[derive(Debug, Clone)]
pub struct StallClock(Arc<Mutex<ClockState>>);

#[derive(Debug)]
struct ClockState {
    /// When the clock was made: the advance of a chain not seen yet.
    started: Instant,
    /// Per chain, its last advance.
    advanced: BTreeMap<String, Instant>,
    /// Per chain, what it is riding out.
    failing: BTreeMap<String, Failing>,
}

/// What the daemon has been riding out, and since when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// When it began.
    pub since: Instant,
    /// What is failing, for `/health` (redacted: no URL or password); prefixed with the chain's name when
    /// it is not the only, `default` one.
    pub what: String,
}

impl StallClock {
    /// A clock that starts now (a job that never commits stalls from its start).
    pub fn new() -> Self {
        Self(Arc::new(Mutex::new(ClockState {
            started: Instant::now(),
            advanced: BTreeMap::new(),
            failing: BTreeMap::new(),
        })))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The calling chain's job has started: from now on its stall counts (from the clock's start).
    pub fn joined(&self) {
        let mut state = self.state();
        let started = state.started;
        state
            .advanced
            .entry(super::chain::current().to_string())
            .or_insert(started);
    }

    /// The checkpoint advanced now (or the job is consistent at the head): whatever failed works again.
    pub fn advanced(&self) {
        let chain = super::chain::current().to_string();
        let mut state = self.state();
        state.failing.remove(&chain);
        state.advanced.insert(chain, Instant::now());
    }

    /// Time since the checkpoint last advanced, of the chain that advanced longest ago.
    pub fn since(&self) -> Duration {
        let state = self.state();
        state
            .advanced
            .values()
            .min()
            .unwrap_or(&state.started)
            .elapsed()
    }

    /// The daemon is riding out `what` (kept from the first call until [`StallClock::advanced`], its text
    /// updated).
    pub fn failing(&self, what: String) {
        let chain = super::chain::current().to_string();
        let what = match chain.as_str() {
            crate::config::DEFAULT_CHAIN => what,
            name => format!("chain {name}: {what}"),
        };
        let mut state = self.state();
        let since = state
            .failing
            .get(&chain)
            .map_or_else(Instant::now, |f| f.since);
        state.failing.insert(chain, Failing { since, what });
    }

    /// What the daemon has been riding out longest, if anything.
    pub fn failure(&self) -> Option<Failing> {
        self.state()
            .failing
            .values()
            .min_by_key(|f| f.since)
            .cloned()
    }

    /// Seconds the daemon has been riding out a failure (the longest of any chain); zero while healthy.
    pub fn unhealthy_for(&self) -> Duration {
        self.failure().map_or(Duration::ZERO, |f| f.since.elapsed())
    }
}

impl Default for StallClock {
    fn default() -> Self {
        Self::new()
    }
}

/// What `/metrics` and `/health` read.
#[derive(Clone)]
struct Served {
    handle: PrometheusHandle,
    clock: StallClock,
    max_stall: Duration,
}

/// The `/health` answer: 503 while the daemon rides out a failure (`failing`: for how long, and what), or
/// when the checkpoint has not advanced within `max_stall`; else 200.
pub fn health(
    since_advance: Duration,
    max_stall: Duration,
    failing: Option<(Duration, &str)>,
) -> (StatusCode, String) {
    let since = humantime::format_duration(Duration::from_secs(since_advance.as_secs()));
    if let Some((how_long, what)) = failing {
        let how_long = humantime::format_duration(Duration::from_secs(how_long.as_secs()));
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("unhealthy for {how_long}, retrying: {what}\n"),
        );
    }
    if since_advance > max_stall {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "stalled: the checkpoint has not advanced for {since} (metrics.max_stall is {})\n",
                humantime::format_duration(max_stall)
            ),
        )
    } else {
        (
            StatusCode::OK,
            format!("ok: the checkpoint advanced {since} ago\n"),
        )
    }
}

/// The routes: `GET /metrics` (Prometheus text) and `GET /health`.
fn router(served: Served) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State(served): State<Served>| async move {
                metrics::gauge!(SECONDS_SINCE_ADVANCE).set(served.clock.since().as_secs_f64());
                metrics::gauge!(SECONDS_UNHEALTHY).set(served.clock.unhealthy_for().as_secs_f64());
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    served.handle.render(),
                )
            }),
        )
        .route(
            "/health",
            get(|State(served): State<Served>| async move {
                let failing = served.clock.failure();
                let failing = failing
                    .as_ref()
                    .map(|f| (f.since.elapsed(), f.what.as_str()));
                health(served.clock.since(), served.max_stall, failing)
            }),
        )
        .with_state(served)
}

/// Serves `/metrics` and `/health` on `addr` until `cancel` fires. Returns the bound address.
///
/// # Errors
/// When `addr` cannot be bound.
pub async fn serve(
    addr: SocketAddr,
    handle: PrometheusHandle,
    clock: StallClock,
    max_stall: Duration,
    cancel: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    // Without the exporter's own listener nobody drains histogram buckets between scrapes.
    let upkeep = handle.clone();
    let upkeep_cancel = cancel.clone();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(Duration::from_secs(5));
        loop {
            tokio::select! {
                _ = upkeep_cancel.cancelled() => return,
                _ = interval.tick() => upkeep.run_upkeep(),
            }
        }
    });
    let app = router(Served {
        handle,
        clock,
        max_stall,
    });
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async move { cancel.cancelled().await })
            .await;
        if let Err(err) = served {
            tracing::warn!(cause = %err, "the metrics server stopped");
        }
    });
    Ok(bound)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_fails_once_the_checkpoint_stalls_longer_than_max_stall() {
        let max = Duration::from_secs(300);
        let (code, text) = health(Duration::from_secs(12), max, None);
        assert_eq!(code, StatusCode::OK);
        assert_eq!(text, "ok: the checkpoint advanced 12s ago\n");
        let (code, text) = health(Duration::from_secs(301), max, None);
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            text,
            "stalled: the checkpoint has not advanced for 5m 1s (metrics.max_stall is 5m)\n"
        );
    }

    /// A daemon riding out an outage answers 503 at once, however recently the checkpoint moved, and the
    /// clock says so until the next advance.
    #[test]
    fn health_fails_while_the_daemon_rides_out_a_failure() {
        let max = Duration::from_secs(300);
        let (code, text) = health(
            Duration::from_secs(2),
            max,
            Some((Duration::from_secs(42), "the node is failing")),
        );
        assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(text, "unhealthy for 42s, retrying: the node is failing\n");
        let clock = StallClock::new();
        assert_eq!(clock.failure(), None);
        clock.failing("the database connection is lost".into());
        let first = clock.failure().expect("failing");
        clock.failing("the node is failing".into());
        let second = clock.failure().expect("still failing");
        assert_eq!(second.since, first.since, "one outage, one start");
        assert_eq!(second.what, "the node is failing");
        clock.advanced();
        assert_eq!(clock.failure(), None);
        assert_eq!(clock.unhealthy_for(), Duration::ZERO);
    }
}
