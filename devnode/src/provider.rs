//! Several providers over one chain: more endpoints of a [`DevNode`], each on a port of its own with its own
//! key, rate limits, faults, lag, outage and counters, all serving the node's one chain.
//!
//! A provider shares what is the chain's: blocks, mining, reorgs (scripted ones too) and the ground truth. It
//! shares nothing that is the endpoint's: the node's [`Down`], limits, faults, lag and [`StatsSnapshot`] are
//! its own, and the node is unaffected by the provider's. Its fault decisions come from a seed of its own, so
//! two providers with the same fault probabilities fail on different requests, the same ones on every run.
//! This module builds providers; the server serves them as it serves the node.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::task::JoinHandle;

use super::config::FaultConfig;
use super::credits::MethodCredits;
use super::rng::hash3;
use super::rpc::Service;
use super::server::{self, Down, Shared};
use super::{DevNode, StatsSnapshot, SHUTDOWN_GRACE};

/// Domain tag of the seeds derived for providers.
const TAG_PROVIDER: u64 = 103;

/// What one provider is started with ([`DevNode::add_provider`]); the default is a provider without limits,
/// faults or lag.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderOptions {
    /// The API key accepted in its paths; `None` = the node's key.
    pub key: Option<String>,
    /// Seed of its fault decisions; `None` = derived from the node's seed and the provider's index (1 for
    /// the first provider added, 2 for the next...), so each provider draws its own faults.
    pub seed: Option<u64>,
    /// Calls per second (each item of a batch is a call) above which requests get HTTP 429, a batch over
    /// what is left of the second refused whole; `None` = unlimited.
    pub max_rps: Option<u32>,
    /// Credits per second (`method_credits`, a batch costing the sum of its calls) above which requests get
    /// HTTP 429; `None` = unlimited.
    pub max_cps: Option<u32>,
    /// What each method costs against `max_cps`.
    pub method_credits: MethodCredits,
    /// Blocks behind the true head it serves at start ([`Provider::set_lag`] changes it).
    pub lag: u64,
    /// Its injected faults: probabilities (`http_429`, `http_5xx`, `drop`, `internal_error`, `lag`...),
    /// latency and `Retry-After`. Its `max_rps`, `max_cps`, `method_credits` and `lag_blocks` are not read:
    /// the fields above set them.
    pub faults: FaultConfig,
}

/// One provider of a [`DevNode`]'s chain, serving on a port of its own. Dropping it stops its server too
/// (without waiting); so does shutting the node down.
pub struct Provider {
    addr: SocketAddr,
    key: String,
    seed: u64,
    shared: Arc<Shared>,
    server: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("addr", &self.addr)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl DevNode {
    /// Binds another port (`127.0.0.1:0`) and serves the node's chain there as another provider, with the
    /// limits, faults and lag of `options` and counters of its own. The node keeps serving as before.
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn add_provider(&self, options: ProviderOptions) -> std::io::Result<Provider> {
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let addr = listener.local_addr()?;
        let index = self.n_providers.fetch_add(1, Ordering::Relaxed);
        let node = &self.shared.service;
        let seed = options
            .seed
            .unwrap_or_else(|| hash3(node.cfg.seed, index, 0, TAG_PROVIDER));
        let mut cfg = node.cfg.clone();
        cfg.addr = addr;
        // The chain keeps the node's seed (it is in `Chain`'s own parameters); `cfg.seed` seeds only the
        // fault decisions of the endpoint that serves with it.
        cfg.seed = seed;
        cfg.key = options.key.unwrap_or_else(|| node.cfg.key.clone());
        cfg.chain.block_time = None;
        cfg.faults = FaultConfig {
            max_rps: options.max_rps,
            max_cps: options.max_cps,
            method_credits: options.method_credits,
            lag_blocks: options.lag,
            ..options.faults
        };
        let key = cfg.key.clone();
        let service = Service {
            cfg,
            chain: node.chain.clone(),
            stats: Arc::default(),
            receipts_reorged: node.receipts_reorged.clone(),
            reorg_after_header: node.reorg_after_header.clone(),
        };
        let shared = Arc::new(Shared::new(service, self.shared.shutdown.child_token()));
        let server = server::spawn(listener, shared.clone());
        Ok(Provider {
            addr,
            key,
            seed,
            shared,
            server: Some(server),
        })
    }
}

impl Provider {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/v3/KEY`.
    pub fn http_url(&self) -> String {
        format!("http://{}/v3/{}", self.addr, self.key)
    }

    /// `ws://ADDR/ws/v3/KEY`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}/ws/v3/{}", self.addr, self.key)
    }

    /// The seed of its fault decisions (to replay a failing test with [`ProviderOptions::seed`]).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Stops answering or fails every request of this provider (see [`Down`]), or serves again
    /// (`Down::Up`), from the next request on; the node and other providers are unaffected.
    pub fn set_down(&self, down: Down) {
        self.shared.down.send_replace(down);
    }

    /// Serves every request from the next one on as a provider `blocks` behind the true head would: its
    /// `eth_blockNumber`, `latest`, `finalized` and `safe` that much lower, blocks above its head `null`,
    /// and `eth_getLogs` answering only the logs up to its head (silently, as a lagging node behind a load
    /// balancer does). 0 serves the head again.
    pub fn set_lag(&self, blocks: u64) {
        self.shared.lag_blocks.store(blocks, Ordering::Relaxed);
    }

    /// How many blocks behind the true head it serves now.
    pub fn lag(&self) -> u64 {
        self.shared.lag_blocks.load(Ordering::Relaxed)
    }

    /// The counters of what this provider served (the node and other providers count their own).
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.service.stats.snapshot()
    }

    /// Waits until `done` holds for this provider's counters (woken by every update, no polling); returns
    /// them. Wrap it in a timeout as a failure guard.
    pub async fn wait_for_stats(&self, done: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
        self.shared.service.stats.wait_for(done).await
    }

    /// Stops serving: the port is closed (new connections are refused), open WebSockets closed, in-flight
    /// HTTP requests finished (within a grace period). The node and other providers keep serving.
    pub async fn shutdown(mut self) {
        self.shared.shutdown.cancel();
        if let Some(server) = self.server.take() {
            if tokio::time::timeout(SHUTDOWN_GRACE, server).await.is_err() {
                tracing::warn!(grace = ?SHUTDOWN_GRACE, "provider connections open past the grace");
            }
        }
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}
