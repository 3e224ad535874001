//! The node as the pipeline sees it: a client, the gate every request passes, and the questions asked
//! of it (chain id, head, finalized block, headers), with what a run learns about the node (batches,
//! finality).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{Endpoint, Finality, NodeConfig, Transport};
use crate::fetch::{self, Gate, GateConfig, OnSplit, Selection};
use crate::primitives::{BlockNumber, Log};
use crate::rpc::{self, BlockTag, Client, ClientOptions};

use super::{Error, SyncReport, Target};

/// Most calls in one header batch: geth takes up to 1,000 and some providers fewer, and a batch over a
/// node's limit is refused whole (which turns batches off for the run); a hundred headers already make the
/// batch's own overhead negligible.
const MAX_HEADERS_PER_BATCH: usize = 100;

/// A connected node: the client, its gate, and the simulated node behind `sim://`, kept alive.
pub struct Node {
    /// The client.
    pub client: Arc<Client>,
    /// The gate every request passes.
    pub gate: Arc<Gate>,
    /// Redacted, for messages.
    pub display: String,
    /// Whether to read headers in batches: HTTP, until the node refuses one (the spec does not say whether
    /// it takes batches; mainstream nodes do).
    batches: std::sync::atomic::AtomicBool,
    /// Whether this run has said that block timestamps cost header reads ([`Node::tell_header_reads`]).
    told_header_reads: std::sync::atomic::AtomicBool,
    /// What this run learnt about a node without finality.
    no_finality: NoFinality,
    /// What this run saw of finality: the last final block reported, whether the chain reorged.
    pub(super) finality: super::finality::SeenFinality,
    /// The simulated node a `sim://` endpoint started; it stops when the `Node` is dropped.
    _simulated: Option<super::simulator::Simulated>,
}

impl Node {
    /// Connects to the configured node, starting the installed simulator ([`super::simulator`]) for `sim://`. Sends nothing yet. Once
    /// `cancel` fires, every request through the node's gate (waiting, retrying or in flight) ends with
    /// [`Error::Interrupted`].
    ///
    /// # Errors
    /// [`Error::Config`] for a bad `sim://` option; [`Error::Node`] when no client can be built.
    pub async fn connect(config: &NodeConfig, cancel: &CancellationToken) -> Result<Self, Error> {
        let config = &config.providers[0];
        let options = ClientOptions {
            request_timeout: config.request_timeout,
            max_response_bytes: config.max_response_bytes,
            max_idle_connections: config.max_concurrency,
        };
        let gate = Arc::new(Gate::new(
            GateConfig {
                max_concurrency: config.max_concurrency,
                requests_per_second: config.requests_per_second,
                max_retries: config.max_retries,
                initial_backoff: config.initial_backoff,
                max_backoff: config.max_backoff,
            },
            cancel.clone(),
        ));
        let endpoint = match config.transport {
            Transport::Ws => config.ws_endpoint.as_ref().unwrap_or(&config.endpoint),
            Transport::Http => &config.endpoint,
        };
        let (url, simulated) = match endpoint {
            Endpoint::Url(url) => (url.clone(), None),
            Endpoint::Sim(sim) => {
                let simulated = super::simulator::start(sim)
                    .await
                    .map_err(|e| Error::Config(format!("node.url: {e}")))?;
                let raw = match config.transport {
                    Transport::Http => &simulated.http_url,
                    Transport::Ws => &simulated.ws_url,
                };
                let url = url::Url::parse(raw)
                    .map_err(|e| Error::Config(format!("node.url: built-in node address: {e}")))?;
                (crate::config::SecretUrl::new(url), Some(simulated))
            }
        };
        let display = url.to_string();
        let client = match config.transport {
            Transport::Http => Client::http(&url, options).map_err(|e| Error::Node {
                node: display.clone(),
                source: fetch::Error::Fatal {
                    method: "connect",
                    source: e,
                },
            })?,
            Transport::Ws => Client::ws(&url, options),
        };
        Ok(Self {
            batches: std::sync::atomic::AtomicBool::new(client.supports_batches()),
            told_header_reads: std::sync::atomic::AtomicBool::new(false),
            client: Arc::new(client),
            gate,
            display,
            no_finality: NoFinality::default(),
            finality: super::finality::SeenFinality::default(),
            _simulated: simulated,
        })
    }

    /// Says once a run, when the first header is read for block timestamps, why the backfill reads headers
    /// and what they cost: at a provider's 25 calls a second, a chain with logs in 20,000 blocks spends over
    /// 13 minutes on them, with no other sign of where the time goes.
    pub(super) fn tell_header_reads(&self) {
        if !self
            .told_header_reads
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::info!(
                node = %self.display,
                "the node's logs carry no blockTimestamp: block_timestamp comes from the header of each block \
                 with logs, one call each within node.requests_per_second ([sync] block_timestamps = false \
                 reads none)"
            );
        }
    }

    /// The headers of `numbers`, in order (`None` where the node does not know the block): in batches of at
    /// most a second's worth of the rate (a batch of n calls costs n) and [`MAX_HEADERS_PER_BATCH`], or, from the first batch the node
    /// refuses as such, one request each (`max_concurrency` at a time).
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::Interrupted`].
    pub(super) async fn headers(
        &self,
        numbers: &[BlockNumber],
    ) -> Result<Vec<Option<rpc::Header>>, Error> {
        use std::sync::atomic::Ordering::Relaxed;
        let mut headers = Vec::with_capacity(numbers.len());
        let per_batch = self
            .gate
            .max_calls_per_request()
            .clamp(1, MAX_HEADERS_PER_BATCH);
        let mut rest = numbers;
        while !rest.is_empty() && self.batches.load(Relaxed) {
            let (batch, after) = rest.split_at(per_batch.min(rest.len()));
            match self
                .gate
                .run_calls("eth_getBlockByNumber", batch.len(), OnSplit::Retry, || {
                    self.client.headers(batch)
                })
                .await
            {
                Ok(answers) => {
                    headers.extend(answers);
                    rest = after;
                }
                // Only a refusal of batches as such turns them off (`rpc` tells it apart); a 429, a 5xx or
                // a timeout was retried by the gate like any request, and is this read's error once the
                // retries are spent.
                Err(fetch::Error::Fatal {
                    source: source @ rpc::Error::BatchRefused { .. },
                    ..
                }) => {
                    tracing::info!(cause = %source, "reading headers one by one from now on");
                    self.batches.store(false, Relaxed);
                }
                Err(err) => return Err(self.error()(err)),
            }
        }
        let per_round = self.gate.config().max_concurrency.max(1);
        for chunk in rest.chunks(per_round) {
            let answers =
                futures::future::join_all(chunk.iter().map(|&n| self.header(BlockTag::Number(n))))
                    .await;
            for answer in answers {
                headers.push(answer?);
            }
        }
        Ok(headers)
    }

    /// The blocks of `numbers` with their full transactions, in order (`None` where the node does not know
    /// the block), batched as [`Node::headers`]: a batch of n calls costs n of the rate.
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::Interrupted`].
    pub(super) async fn blocks_with_transactions(
        &self,
        numbers: &[BlockNumber],
    ) -> Result<Vec<Option<rpc::BlockTransactions>>, Error> {
        // A block with its transactions is larger than a header: a tenth of the header batch keeps one
        // answer of a busy chain's blocks well within the response limit.
        self.batched(
            "eth_getBlockByNumber",
            numbers,
            MAX_HEADERS_PER_BATCH / 10,
            |batch: Vec<BlockNumber>| async move { self.client.blocks_with_transactions(&batch).await },
            |n| self.client.block_with_transactions(BlockTag::Number(n)),
        )
        .await
    }

    /// The receipts of the transactions `hashes`, in order (`None` where the node has none), batched as
    /// [`Node::headers`].
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::Interrupted`].
    pub(super) async fn receipts(
        &self,
        hashes: &[alloy_primitives::B256],
    ) -> Result<Vec<Option<rpc::Receipt>>, Error> {
        self.batched(
            "eth_getTransactionReceipt",
            hashes,
            MAX_HEADERS_PER_BATCH,
            |batch: Vec<alloy_primitives::B256>| async move { self.client.receipts(&batch).await },
            |hash| self.client.receipt(hash),
        )
        .await
    }

    /// The receipts of each block of `numbers` by `eth_getBlockReceipts`, batched, when the node serves it
    /// (learnt once per run, shared with the reads of blocks over the cap); `None` when it does not.
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::Interrupted`].
    pub(super) async fn block_receipts(
        &self,
        numbers: &[BlockNumber],
    ) -> Result<Option<Vec<Option<Vec<rpc::Receipt>>>>, Error> {
        fetch::block_receipts(&self.client, &self.gate, numbers)
            .await
            .map_err(self.error())
    }

    /// [`fetch::batched`] through this node's gate, batches turned off for good once it refuses one.
    async fn batched<I, T, Many, ManyFut, One, OneFut>(
        &self,
        method: &'static str,
        items: &[I],
        max_per_batch: usize,
        many: Many,
        one: One,
    ) -> Result<Vec<T>, Error>
    where
        I: Copy,
        Many: Fn(Vec<I>) -> ManyFut,
        ManyFut: std::future::Future<Output = Result<Vec<T>, rpc::Error>>,
        One: Fn(I) -> OneFut,
        OneFut: std::future::Future<Output = Result<T, rpc::Error>>,
    {
        let batches = fetch::Batches {
            gate: &self.gate,
            allowed: &self.batches,
        };
        batches
            .run(method, items, max_per_batch, many, one)
            .await
            .map_err(self.error())
    }

    /// `eth_getLogs` of `selection` over `blocks` (a request per filter group), through the gate; a
    /// range-too-large answer comes back as [`fetch::Error::Split`] for the caller to narrow.
    ///
    /// # Errors
    /// Any [`fetch::Error`].
    pub(super) async fn get_logs(
        &self,
        blocks: rpc::Blocks,
        selection: &Selection,
    ) -> Result<Vec<Log>, fetch::Error> {
        fetch::get_logs(&self.client, &self.gate, blocks, selection).await
    }

    /// `eth_getBlockByNumber(tag, false)` through the gate: `None` when the node does not know the block.
    ///
    /// # Errors
    /// [`Error::Node`].
    pub(super) async fn header(&self, tag: BlockTag) -> Result<Option<rpc::Header>, Error> {
        self.gate
            .run("eth_getBlockByNumber", OnSplit::Retry, || {
                self.client.header(tag)
            })
            .await
            .map_err(self.error())
    }

    pub(super) fn error(&self) -> impl Fn(fetch::Error) -> Error + '_ {
        |source| match source {
            fetch::Error::Interrupted => Error::Interrupted,
            source => Error::Node {
                node: self.display.clone(),
                source,
            },
        }
    }

    pub(super) fn add_stats(&self, report: &mut SyncReport) {
        use std::sync::atomic::Ordering::Relaxed;
        let stats = &self.gate.stats;
        report.requests = stats.requests.load(Relaxed);
        report.log_requests = stats.log_requests.load(Relaxed);
        report.header_calls = stats.header_calls.load(Relaxed);
        report.errors = stats.errors.load(Relaxed);
        report.retries = stats.retries.load(Relaxed);
        report.splits = stats.splits.load(Relaxed);
        report.topic_only = stats.topic_only.load(Relaxed);
        report.foreign_logs = stats.foreign_logs.load(Relaxed);
        report.repeated_logs = stats.repeated_logs.load(Relaxed);
        report.receipt_blocks = stats.receipt_blocks.load(Relaxed);
        report.children_filled = stats.children_filled.load(Relaxed);
    }

    /// `eth_chainId`, through the gate.
    ///
    /// # Errors
    /// [`Error::Node`].
    pub async fn chain_id(&self) -> Result<u64, Error> {
        self.gate
            .run("eth_chainId", OnSplit::Retry, || self.client.chain_id())
            .await
            .map_err(self.error())
    }

    /// The node's finalized block: [`Finalized::Block`], or why there is none. A node that refuses the tag
    /// is not asked again in this run (docs/node-service.md: that answer does not change).
    ///
    /// # Errors
    /// [`Error::Node`] when the node cannot answer at all.
    pub(super) async fn finalized(&self) -> Result<Finalized, Error> {
        if let Some(why) = self.no_finality.refused.get() {
            return Ok(Finalized::None(why.clone()));
        }
        match self
            .gate
            .run("eth_getBlockByNumber", OnSplit::Retry, || {
                self.client.header(BlockTag::Finalized)
            })
            .await
        {
            Ok(Some(header)) => Ok(Finalized::Block(header.number)),
            Ok(None) => Ok(Finalized::None(
                "it answers null for the `finalized` block".into(),
            )),
            Err(fetch::Error::Fatal { source, .. }) => {
                let why = format!("it refuses the `finalized` tag: {source}");
                let _ = self.no_finality.refused.set(why.clone());
                Ok(Finalized::None(why))
            }
            Err(err) => Err(self.error()(err)),
        }
    }

    /// The highest block treated as final when the head is `head`: `window` (`sync.max_reorg_depth`)
    /// blocks below it, whatever the node reports ([`super::finality`]). The node's finalized block (or
    /// `head - n` with `finality = n`) is read to report against: a reorg under it, a suspect finality.
    pub(super) async fn final_block(
        &self,
        finality: Finality,
        window: u64,
        head: BlockNumber,
    ) -> Result<BlockNumber, Error> {
        let answer = match finality {
            Finality::Finalized => Some(self.finalized().await?),
            Finality::Confirmations(_) => None,
        };
        self.note_finality(finality, answer, head, window);
        Ok(super::finality::final_block(head, head, window))
    }

    /// Records what is final while the head is `head`, by `sync.finality` and the node's `answer` for its
    /// finalized block (asked only under `finality = "finalized"`), for reports against it
    /// ([`super::finality`]); a node without finality is said once.
    pub(super) fn note_finality(
        &self,
        finality: Finality,
        answer: Option<Finalized>,
        head: BlockNumber,
        window: u64,
    ) {
        use super::finality::Source;
        match (finality, answer) {
            (Finality::Confirmations(n), _) => self.finality.saw(
                head.saturating_sub(n),
                head,
                Source::Confirmations,
                &self.display,
            ),
            (Finality::Finalized, Some(Finalized::Block(n))) => {
                self.finality
                    .saw(n.min(head), head, Source::Node, &self.display)
            }
            (Finality::Finalized, Some(Finalized::None(why))) => {
                self.warn_no_finality(&why, window)
            }
            (Finality::Finalized, None) => {}
        }
    }

    /// Says once per run that the node has no finality and what is done instead.
    pub(super) fn warn_no_finality(&self, why: &str, window: u64) {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.no_finality.warned.swap(true, Relaxed) {
            tracing::warn!(
                node = %self.display,
                reason = %why,
                confirmations = window,
                "the node has no finalized block; a reorg deeper than sync.max_reorg_depth cannot be told from one it reports \
                 (the last sync.max_reorg_depth blocks are tracked by hash in any case; sync.finality = <confirmations> \
                 says which reorgs to report as under finality)"
            );
        }
    }

    /// Resolves a target to a block number. `safe` falls back to `finalized` where the node refuses it, and
    /// `finalized` to `window` blocks below the head where the node has no finality.
    ///
    /// # Errors
    /// [`Error::Node`].
    pub async fn resolve(&self, target: Target, window: u64) -> Result<BlockNumber, Error> {
        let latest = || async {
            self.gate
                .run("eth_blockNumber", OnSplit::Retry, || {
                    self.client.block_number()
                })
                .await
                .map_err(self.error())
        };
        match target {
            Target::Number(n) => return Ok(n),
            Target::Latest => return latest().await,
            Target::Safe => {
                match self
                    .gate
                    .run("eth_getBlockByNumber", OnSplit::Retry, || {
                        self.client.header(BlockTag::Safe)
                    })
                    .await
                {
                    Ok(Some(header)) => return Ok(header.number),
                    // spec: getBlockByNumber does not support `safe`; `finalized` is to be used instead.
                    Err(fetch::Error::Fatal { .. }) => {
                        tracing::warn!(
                            "the node refuses the `safe` tag; syncing to `finalized` instead"
                        );
                    }
                    Ok(None) => {
                        tracing::warn!(
                            "the node has no `safe` block; syncing to `finalized` instead"
                        );
                    }
                    Err(err) => return Err(self.error()(err)),
                }
            }
            Target::Finalized => {}
        }
        match self.finalized().await? {
            Finalized::Block(n) => Ok(n),
            Finalized::None(why) => {
                self.warn_no_finality(&why, window);
                Ok(latest().await?.saturating_sub(window))
            }
        }
    }
}

/// The node's answer about its finalized block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Finalized {
    /// This block.
    Block(BlockNumber),
    /// None, and why (answers null, or refuses the tag).
    None(String),
}

/// What a run learnt about a node without finality: a refusal is not asked again, and said once.
#[derive(Debug, Default)]
struct NoFinality {
    /// Why the node refused the `finalized` tag, once it has.
    refused: std::sync::OnceLock<String>,
    /// Whether the fallback was announced.
    warned: std::sync::atomic::AtomicBool,
}
