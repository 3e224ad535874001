//! One provider: its client, its limits (concurrency, the learned rate, what a call costs), its breaker,
//! its head, and what it served.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::config::MethodCredits;
use crate::rpc::Client;

use super::breaker::{Breaker, State};
use super::rate::Rate;

/// A provider's limits (from its `[[node.providers]]` entry, or `[node]`).
#[derive(Debug, Clone)]
pub struct Limits {
    /// Requests in flight at once.
    pub max_concurrency: usize,
    /// Calls per second, batch items counted one by one: the ceiling of the learned rate. Not used when
    /// `credits` is set.
    pub requests_per_second: u32,
    /// Credits per second and what each method costs, for a provider metered by credits: the ceiling of
    /// the learned rate, in credits.
    pub credits: Option<(u32, MethodCredits)>,
    /// Attempts after the first, at this provider, for one request.
    pub max_retries: u32,
    /// The first backoff.
    pub initial_backoff: Duration,
    /// The longest backoff.
    pub max_backoff: Duration,
}

/// What a provider served in this run.
#[derive(Debug, Default)]
pub struct ProviderStats {
    /// Requests sent (a batch is one request).
    pub requests: AtomicU64,
    /// Answers that were errors of any kind.
    pub errors: AtomicU64,
    /// Of them, refusals for the rate (429, or a rate-limit error).
    pub rate_limited: AtomicU64,
    /// Times it was set aside by its breaker.
    pub set_aside: AtomicU64,
}

/// No head known yet.
const NO_HEAD: u64 = u64::MAX;

/// One provider of the chain.
pub struct Provider {
    /// Its `name`: in logs, errors, status and metrics.
    pub name: String,
    /// Its URL, redacted.
    pub display: String,
    pub(super) client: Arc<Client>,
    pub(super) limits: Limits,
    pub(super) permits: Semaphore,
    pub(super) in_flight: AtomicUsize,
    pub(super) rate: Rate,
    pub(super) breaker: Mutex<Breaker>,
    head: AtomicU64,
    /// Whether it answered the chain's id (a provider not yet checked serves nothing else).
    pub(super) chain_checked: AtomicBool,
    /// What it served.
    pub stats: ProviderStats,
}

impl Provider {
    /// A provider reached through `client`, as `name` (`display`: its redacted URL).
    pub fn new(name: String, display: String, client: Client, limits: Limits) -> Self {
        let ceiling = limits
            .credits
            .as_ref()
            .map_or(limits.requests_per_second, |(per_second, _)| *per_second);
        Self {
            name,
            display,
            client: Arc::new(client),
            permits: Semaphore::new(limits.max_concurrency.max(1)),
            limits,
            in_flight: AtomicUsize::new(0),
            rate: Rate::new(ceiling),
            breaker: Mutex::new(Breaker::default()),
            head: AtomicU64::new(NO_HEAD),
            chain_checked: AtomicBool::new(false),
            stats: ProviderStats::default(),
        }
    }

    /// The client (for what only one provider can serve: a WebSocket subscription).
    pub fn client(&self) -> &Arc<Client> {
        &self.client
    }

    /// What `n_calls` calls of `method` cost against the rate.
    pub(super) fn cost(&self, method: &str, n_calls: usize) -> u32 {
        let n_calls = u32::try_from(n_calls.max(1)).unwrap_or(u32::MAX);
        match &self.limits.credits {
            None => n_calls,
            Some((_, credits)) => credits.of(method).saturating_mul(n_calls),
        }
    }

    /// The most calls of `method` one request may carry at the rate now.
    pub(super) fn admits(&self, method: &str) -> usize {
        let per_window = self.rate.learned().per_window();
        let each = self.cost(method, 1).max(1);
        usize::try_from((per_window / each).max(1)).unwrap_or(usize::MAX)
    }

    /// The last head it reported.
    pub fn head(&self) -> Option<u64> {
        Some(self.head.load(Relaxed)).filter(|head| *head != NO_HEAD)
    }

    /// Records the head it reported.
    pub fn saw_head(&self, head: u64) {
        self.head.store(head, Relaxed);
    }

    /// Whether it answered the chain's id.
    pub fn is_chain_checked(&self) -> bool {
        self.chain_checked.load(Relaxed)
    }

    /// It answered the chain's id.
    pub fn set_chain_checked(&self) {
        self.chain_checked.store(true, Relaxed);
    }

    pub(super) fn breaker(&self) -> std::sync::MutexGuard<'_, Breaker> {
        self.breaker.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How it stands now, for `status`, `bench` and metrics.
    pub fn snapshot(&self) -> ProviderSnapshot {
        let learned = self.rate.learned();
        let state = match self.breaker().state() {
            State::Up => "up",
            State::Down { .. } | State::Probing { .. } => "set aside",
        };
        ProviderSnapshot {
            name: self.name.clone(),
            url: self.display.clone(),
            head: self.head(),
            rate: learned.per_window(),
            ceiling: learned.ceiling(),
            unit: if self.limits.credits.is_some() {
                "credits/s"
            } else {
                "calls/s"
            },
            requests: self.stats.requests.load(Relaxed),
            errors: self.stats.errors.load(Relaxed),
            rate_limited: self.stats.rate_limited.load(Relaxed),
            set_aside: self.stats.set_aside.load(Relaxed),
            state,
        }
    }

    /// When a request of `cost` could start here, as things stand: a provider with no free permit counts
    /// as a window later.
    pub(super) fn ready_at(&self, cost: u32) -> Instant {
        let ready = self.rate.ready_at(cost);
        if self.permits.available_permits() == 0 {
            ready + super::rate::WINDOW
        } else {
            ready
        }
    }
}

/// A provider as `status`, `bench` and metrics show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProviderSnapshot {
    /// Its `name`.
    pub name: String,
    /// Its URL, redacted.
    pub url: String,
    /// The last head it reported.
    pub head: Option<u64>,
    /// The rate in use (learned), in `unit`.
    pub rate: u32,
    /// The configured ceiling, in `unit`.
    pub ceiling: u32,
    /// `calls/s` or `credits/s`.
    pub unit: &'static str,
    /// Requests sent.
    pub requests: u64,
    /// Error answers.
    pub errors: u64,
    /// Refusals for the rate.
    pub rate_limited: u64,
    /// Times set aside by its breaker.
    pub set_aside: u64,
    /// `up` or `set aside`.
    pub state: &'static str,
}
