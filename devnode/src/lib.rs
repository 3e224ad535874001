//! The simulated access service (`logslice devnode`, `sim://`): a deterministic, lazily generated chain
//! served over real sockets as `docs/node-service.md` describes the service, with its limits and scripted
//! faults (`docs/devnode.md` lists the options and presets).
//!
//! A crate of its own that depends on nothing of the indexer's (no client, decoder, sink or config code), so
//! a bug on one side cannot hide the same bug on the other. Its own JSON is written from the
//! spec's tables (`json`), its own parameters parsed by geth's rules (`params`).
//!
//! Layout: `chain` derives blocks and logs from `(seed, number, fork generation)`; `gen` draws event values and
//! ABI-encodes them for the contracts of `contracts` (ABIs in `abis/`); `factory` plans the opt-in factory's
//! pairs and their logs; `filter` matches logs; `rpc` dispatches JSON-RPC and applies the limits; `view` is
//! the heights a lagging node sees; `faults` decides injected faults; `credits` meters calls and credits per
//! second; `server` is the axum front; `provider` adds endpoints over the same chain; `stats` counts; `cli`
//! is `logslice devnode`; `bench` measures the serve rate. `txs` draws the transactions and receipts of a
//! block, `rpc_tx` serves them, `truth_tx` exposes them to tests, `overcap` plans the opt-in blocks where one
//! contract alone is over the result cap, and `log_indexes` numbers the opt-in block whose log indexes start
//! near 2^32.

pub mod bench;
mod chain;
pub mod cli;
mod config;
pub mod contracts;
mod credits;
mod factory;
mod faults;
mod filter;
mod gen;
mod json;
mod log_indexes;
mod overcap;
mod params;
mod presets;
mod provider;
mod rng;
mod rpc;
mod rpc_tx;
mod server;
mod shapes;
mod stats;
mod truth_tx;
mod txs;
mod view;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use alloy_dyn_abi::DynSolValue;
use alloy_primitives::{Address, Bloom, BloomInput, Bytes, B256};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use config::{
    ChainConfig, DevNodeConfig, FactoryConfig, FaultConfig, Finality, LimitConfig, TooManyStyle,
    DEFAULT_BLOCKS, DEFAULT_CHAIN_ID, DEFAULT_FACTORY_CHILDREN, DEFAULT_FINALIZED_DEPTH,
    DEFAULT_MAX_PARAMS, DEFAULT_MAX_RESULTS, OPTION_NAMES,
};
pub use credits::{MethodCredits, DEFAULT_METHOD_CREDITS};
pub use gen::NOTE_TOPICS;
pub use log_indexes::DEFAULT_LOG_INDEX_BASE;
pub use overcap::{OvercapConfig, DEFAULT_OVERCAP_LOGS, OVERCAP_OPTION_NAMES};
pub use presets::PRESET_NAMES;
pub use provider::{Provider, ProviderOptions};
pub use server::Down;
pub use shapes::{Burst, ShapeConfig, SHAPE_OPTION_NAMES};
pub use stats::{MethodStats, StatsSnapshot};
pub use truth_tx::{TruthReceipt, TruthTransaction};

use chain::{Chain, ChainParams};
use contracts::EMITTERS;
use rpc::Service;
use server::Shared;

/// How long `shutdown` waits for open connections to finish before giving up on them.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

fn chain_params(cfg: &DevNodeConfig) -> ChainParams {
    ChainParams {
        seed: cfg.seed,
        chain_id: cfg.chain.chain_id,
        initial_head: cfg.chain.blocks,
        density: cfg.chain.density,
        genesis_timestamp: cfg.chain.genesis_timestamp,
        finalized_depth: cfg.chain.finalized_depth,
        reorg_every: cfg.chain.reorg_every,
        reorg_depth: cfg.chain.reorg_depth,
        anon_contract: cfg.chain.anon_contract,
        factory: cfg.chain.factory,
        overcap: cfg.chain.overcap.clone(),
        shapes: cfg.chain.shapes.clone(),
        high_log_indexes: cfg
            .chain
            .high_log_indexes
            .map(|block| (block, cfg.chain.log_index_base)),
    }
}

/// A running simulated node. Dropping it stops the server too (without waiting).
pub struct DevNode {
    addr: SocketAddr,
    key: String,
    shared: Arc<Shared>,
    server: Option<JoinHandle<()>>,
    producer: Option<JoinHandle<()>>,
    /// Providers added so far ([`DevNode::add_provider`]): the next one's index, from 1.
    n_providers: AtomicU64,
}

impl std::fmt::Debug for DevNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevNode")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl DevNode {
    /// Binds and starts serving in the background of the current tokio runtime; with
    /// [`ChainConfig::block_time`] set, also produces a block on that timer.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn start(cfg: DevNodeConfig) -> std::io::Result<DevNode> {
        let listener = tokio::net::TcpListener::bind(cfg.addr).await?;
        let addr = listener.local_addr()?;
        let chain = Arc::new(Chain::new(chain_params(&cfg)));
        let shutdown = CancellationToken::new();
        let key = cfg.key.clone();
        let block_time = cfg.chain.block_time;
        let service = Service {
            cfg,
            chain,
            stats: Arc::default(),
            receipts_reorged: Arc::default(),
            reorg_after_header: Arc::default(),
        };
        let shared = Arc::new(Shared::new(service, shutdown.clone()));
        let server = server::spawn(listener, shared.clone());
        let producer = block_time.map(|every| {
            let chain = shared.service.chain.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let mut ticks =
                    tokio::time::interval_at(tokio::time::Instant::now() + every, every);
                loop {
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        _ = ticks.tick() => {
                            let head = chain.mine(1);
                            tracing::debug!(head, "devnode produced a block");
                        }
                    }
                }
            })
        });
        Ok(DevNode {
            addr,
            key,
            shared,
            server: Some(server),
            producer,
            n_providers: AtomicU64::new(1),
        })
    }

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

    /// The canonical chain as it is now and as it will move, bypassing every limit and fault.
    pub fn truth(&self) -> GroundTruth {
        GroundTruth {
            chain: self.shared.service.chain.clone(),
        }
    }

    /// Produces `n` blocks now (applying the scripted `reorg_every` schedule); returns the new head.
    pub fn mine(&self, n: u64) -> u64 {
        self.shared.service.chain.mine(n)
    }

    /// Replaces the top `depth` blocks (never block 0) by a fork with new hashes and different logs; the head
    /// stays. Returns the first replaced height. Deterministic: the n-th reorg of a height gives the same fork.
    pub fn reorg(&self, depth: u64) -> u64 {
        self.shared.service.chain.reorg(depth)
    }

    /// Arms a reorg `depth` blocks deep that happens right after the answer to the next request reading
    /// block `number`'s header by number: the reader's following requests (its logs, a block by hash) meet
    /// the new branch, as when a hash is reorged away between a header read and a logs read.
    pub fn reorg_after_header(&self, number: u64, depth: u64) {
        self.shared.service.reorg_after_header.arm(number, depth);
    }

    /// The counters of what was served so far (by this endpoint: each [`Provider`] counts its own).
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.service.stats.snapshot()
    }

    /// Serves every request from the next one on as a node `blocks` behind the true head would (its head,
    /// `latest`, `finalized` and `safe` that much lower; blocks above its head unknown, logs cut at its
    /// head), as the `lag_blocks` option does from the start. 0 serves the head again.
    pub fn set_lag(&self, blocks: u64) {
        self.shared.lag_blocks.store(blocks, Ordering::Relaxed);
    }

    /// The configuration it runs with (with `addr` as requested, see [`DevNode::addr`] for the bound one).
    pub fn config(&self) -> &DevNodeConfig {
        &self.shared.service.cfg
    }

    /// Stops serving: no new connections, open WebSockets closed, in-flight HTTP requests finished (within a
    /// grace period). Its providers stop too, without being waited for ([`Provider::shutdown`] waits).
    pub async fn shutdown(mut self) {
        self.shared.shutdown.cancel();
        if let Some(producer) = self.producer.take() {
            let _ = producer.await;
        }
        if let Some(server) = self.server.take() {
            if tokio::time::timeout(SHUTDOWN_GRACE, server).await.is_err() {
                tracing::warn!(grace = ?SHUTDOWN_GRACE, "devnode connections still open after the grace period");
            }
        }
    }
}

impl Drop for DevNode {
    fn drop(&mut self) {
        self.shared.shutdown.cancel();
    }
}

/// The node's exact canonical chain, for tests: cheap to clone, reflects the live chain (mining, reorgs).
#[derive(Clone)]
pub struct GroundTruth {
    chain: Arc<Chain>,
}

impl std::fmt::Debug for GroundTruth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroundTruth")
            .field("head", &self.head())
            .finish_non_exhaustive()
    }
}

impl GroundTruth {
    /// A ground truth of the chain `cfg` describes, without any server (for pure tests and benchmarks).
    pub fn detached(cfg: &DevNodeConfig) -> Self {
        Self {
            chain: Arc::new(Chain::new(chain_params(cfg))),
        }
    }

    /// The chain id.
    pub fn chain_id(&self) -> u64 {
        self.chain.params.chain_id
    }

    /// The current head.
    pub fn head(&self) -> u64 {
        self.chain.head()
    }

    /// A receiver of the head, updated whenever blocks are produced (timer or [`DevNode::mine`]): wait with
    /// `wait_for(|head| *head >= n)` instead of polling.
    pub fn watch_head(&self) -> tokio::sync::watch::Receiver<u64> {
        self.chain.watch_head()
    }

    /// The current `finalized` block (head minus the finalized depth). The node names it only under
    /// [`Finality::Block`]; under the other modes this is still where finality would be.
    pub fn finalized(&self) -> u64 {
        self.head()
            .saturating_sub(self.chain.params.finalized_depth)
    }

    /// A canonical block, if it exists (at or below the head).
    pub fn block(&self, number: u64) -> Option<TruthBlock> {
        let state = self.chain.read();
        (number <= state.head).then(|| {
            let block = self.chain.full_block(&state, number, state.gen(number));
            TruthBlock {
                number,
                hash: block.header.hash,
                parent_hash: block.header.parent_hash,
                timestamp: block.header.timestamp,
                logs_bloom: block.bloom,
                transactions: block.tx_hashes,
                n_logs: block.n_logs,
            }
        })
    }

    /// The timestamp of canonical block `number`, if it exists, without generating its logs and transactions
    /// as [`Self::block`] does.
    pub fn timestamp(&self, number: u64) -> Option<u64> {
        let state = self.chain.read();
        (number <= state.head).then(|| self.chain.header(&state, number).timestamp)
    }

    /// The canonical block with this hash, if any.
    pub fn block_by_hash(&self, hash: B256) -> Option<TruthBlock> {
        let number = {
            let state = self.chain.read();
            self.chain.number_of_hash(&state, &hash, state.head)?
        };
        self.block(number).filter(|block| block.hash == hash)
    }

    /// The fewest `eth_getLogs` requests that can cover the chain under the spec's cap of 10,000 results:
    /// contiguous ranges of at most 10,000 logs and `max_span` blocks (greedy is optimal for this
    /// partition), and `ceil(n / 10,000)` requests for a block with `n` logs over the cap. The lower bound
    /// benchmarks and the planner's simulations set their request counts against.
    pub fn fewest_requests(&self, max_span: u64) -> u64 {
        const CAP: u64 = 10_000;
        let mut requests = 0;
        let (mut in_range_logs, mut in_range_blocks) = (0u64, 0u64);
        for block in 0..=self.head() {
            let n = self.log_count(block) as u64;
            if n > CAP {
                if in_range_blocks > 0 {
                    requests += 1;
                }
                requests += n.div_ceil(CAP);
                (in_range_logs, in_range_blocks) = (0, 0);
                continue;
            }
            if in_range_blocks > 0 && (in_range_logs + n > CAP || in_range_blocks + 1 > max_span) {
                requests += 1;
                (in_range_logs, in_range_blocks) = (0, 0);
            }
            in_range_logs += n;
            in_range_blocks += 1;
        }
        requests + u64::from(in_range_blocks > 0)
    }

    /// How many logs canonical block `number` has, without generating them (0 beyond the head).
    pub fn log_count(&self, number: u64) -> usize {
        let state = self.chain.read();
        if number > state.head {
            return 0;
        }
        self.chain
            .plan(number, state.gen(number), &state)
            .logs
            .len()
    }

    /// The (address, topic0) of every log of canonical block `number`, in log-index order, without generating
    /// the logs (empty beyond the head). For simulations that need more than [`Self::log_count`].
    pub fn log_emitters(&self, number: u64) -> Vec<(Address, Option<B256>)> {
        let state = self.chain.read();
        if number > state.head {
            return Vec::new();
        }
        self.chain
            .plan(number, state.gen(number), &state)
            .logs
            .iter()
            .map(|planned| {
                let idx = usize::from(planned.emitter);
                (planned.address, contracts::parsed(idx).topic0)
            })
            .collect()
    }

    /// The first block at or after `from` with more than 10,000 logs (there is one per 50,000 blocks).
    pub fn next_huge_block(&self, from: u64) -> u64 {
        let candidate = self.chain.huge_block_near(from);
        if candidate >= from && candidate != 0 {
            candidate
        } else {
            self.chain
                .huge_block_near(from - from % chain::HUGE_PERIOD + chain::HUGE_PERIOD)
        }
    }

    /// Every child the factory created in canonical blocks `from..=to` (clamped to the head), in block and
    /// log order; empty without [`ChainConfig::factory`]. Their logs are in [`Self::logs`] like any other.
    pub fn factory_children(&self, from: u64, to: u64) -> Vec<TruthChild> {
        let Some(factory) = self.chain.factory() else {
            return Vec::new();
        };
        let state = self.chain.read();
        let to = to.min(state.head);
        if from > to {
            return Vec::new();
        }
        // A pair is created at its due height or, after a reorg, up to `MAX_DELAY` blocks later.
        let candidates = factory.candidates_at(from.max(1)).start..factory.first_due_from(to + 1);
        let heights: std::collections::BTreeSet<u64> = candidates
            .filter_map(|k| factory.creation_height(k, state.gen(factory.due_block(k))))
            .filter(|height| (from..=to).contains(height))
            .collect();
        let mut children = Vec::new();
        for number in heights {
            let header = self.chain.header(&state, number);
            let plan = self.chain.plan(number, header.gen, &state);
            for (position, planned) in plan.logs.iter().enumerate() {
                if planned.emitter == contracts::PAIR_CREATED {
                    children.push(TruthChild {
                        address: factory.address(planned.child),
                        factory: planned.address,
                        block_number: number,
                        block_hash: header.hash,
                        transaction_hash: self.chain.tx_hash(
                            number,
                            &header.hash,
                            planned.tx_index,
                        ),
                        log_index: self.chain.log_index(number, position),
                    });
                }
            }
        }
        children
    }

    /// Every canonical log of blocks `from..=to` (clamped to the head), in `(block_number, log_index)` order.
    pub fn logs(&self, from: u64, to: u64) -> Vec<TruthLog> {
        let state = self.chain.read();
        self.chain
            .canonical_logs(&state, from, to, state.head)
            .into_iter()
            .map(TruthLog::from_log)
            .collect()
    }
}

impl TruthLog {
    fn from_log(log: chain::Log) -> Self {
        TruthLog {
            block_number: log.block_number,
            block_hash: log.block_hash,
            transaction_hash: log.tx_hash,
            transaction_index: u64::from(log.tx_index),
            log_index: log.log_index,
            address: log.address,
            topics: log.topics,
            data: Bytes::from(log.data),
            event: EMITTERS[usize::from(log.emitter)].event.name(),
            values: log.values,
        }
    }
}

/// A canonical block header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TruthBlock {
    /// Number.
    pub number: u64,
    /// Hash.
    pub hash: B256,
    /// Parent hash.
    pub parent_hash: B256,
    /// Unix timestamp.
    pub timestamp: u64,
    /// The 2048-bit bloom of the block's logs' addresses and topics.
    pub logs_bloom: Bloom,
    /// Transaction hashes, in order.
    pub transactions: Vec<B256>,
    /// Number of logs in the block.
    pub n_logs: usize,
}

impl TruthBlock {
    /// Whether the bloom may contain `address` (a bloom has false positives, never false negatives).
    pub fn bloom_may_contain(&self, bytes: &[u8]) -> bool {
        self.logs_bloom.contains_input(BloomInput::Raw(bytes))
    }
}

/// A child the factory created in a canonical block: the `PairCreated` log that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruthChild {
    /// The child (the pair).
    pub address: Address,
    /// The factory that created it ([`contracts::FACTORY`]).
    pub factory: Address,
    /// Block of the creating log.
    pub block_number: u64,
    /// Hash of that block.
    pub block_hash: B256,
    /// The creating transaction.
    pub transaction_hash: B256,
    /// Index of the creating log in its block.
    pub log_index: u64,
}

/// A canonical log and the values it encodes.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthLog {
    /// Block number.
    pub block_number: u64,
    /// Block hash.
    pub block_hash: B256,
    /// Transaction hash.
    pub transaction_hash: B256,
    /// Transaction index.
    pub transaction_index: u64,
    /// Log index in the block.
    pub log_index: u64,
    /// Emitting contract.
    pub address: Address,
    /// 0 to 4 topics.
    pub topics: Vec<B256>,
    /// ABI-encoded non-indexed values.
    pub data: Bytes,
    /// The event's name in its ABI, e.g. `Transfer`.
    pub event: &'static str,
    /// Every parameter's value, in ABI order (indexed ones too, with their original value).
    pub values: Vec<DynSolValue>,
}
