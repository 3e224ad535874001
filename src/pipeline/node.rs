//! The node as the pipeline sees it: a client, the gate every request passes, and the questions asked
//! of it (chain id, head, finalized block, headers), with what a run learns about the node (batches,
//! finality).

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{Endpoint, Finality, NodeConfig, ProviderConfig, Transport};
use crate::fetch::{self, Access, Selection};
use crate::node::{Call, Gate, Limits, Provider, ProviderSnapshot};
use crate::primitives::{BlockNumber, Log};
use crate::rpc::{self, BlockTag, Client, ClientOptions};

use super::{Error, SyncReport, Target};

/// Most calls in one header batch: geth takes up to 1,000 and some providers fewer, and a batch over a
/// node's limit is refused whole (which turns batches off for the run); a hundred headers already make the
/// batch's own overhead negligible.
const MAX_HEADERS_PER_BATCH: usize = 100;

/// The chain's providers as the pipeline sees them: the gate in front of them, what fetching learns through
/// it, and the simulated nodes behind `sim://`, kept alive.
pub struct Node {
    /// The gate every request passes, and what fetching learns through it.
    pub access: Arc<Access>,
    /// The gate (the same as `access.gate`).
    pub gate: Arc<Gate>,
    /// The providers by name and redacted URL, for messages about the chain as a whole.
    pub display: String,
    /// Whether to read headers in batches: HTTP, until a provider refuses one (the spec does not say
    /// whether it takes batches; mainstream nodes do).
    batches: std::sync::atomic::AtomicBool,
    /// Whether this run has said that block timestamps cost header reads ([`Node::tell_header_reads`]).
    told_header_reads: std::sync::atomic::AtomicBool,
    /// What this run learnt about a node without finality.
    no_finality: NoFinality,
    /// What this run saw of finality: the last final block reported, whether the chain reorged.
    pub(super) finality: super::finality::SeenFinality,
    /// The chain id the first provider to answer gave: every other must agree.
    chain: std::sync::OnceLock<u64>,
    /// The simulated nodes `sim://` endpoints started; they stop when the `Node` is dropped.
    _simulated: Vec<super::simulator::Simulated>,
}

impl Node {
    /// Connects to the configured providers, starting the installed simulator ([`super::simulator`]) for
    /// each `sim://`. Sends nothing yet. Once `cancel` fires, every request through the gate (waiting,
    /// retrying or in flight) ends with [`Error::Interrupted`].
    ///
    /// # Errors
    /// [`Error::Config`] for a bad `sim://` option; [`Error::Node`] when no client can be built.
    pub async fn connect(config: &NodeConfig, cancel: &CancellationToken) -> Result<Self, Error> {
        let mut providers = Vec::with_capacity(config.providers.len());
        let mut simulated = Vec::new();
        let several = config.providers.len() > 1;
        for (index, provider) in config.providers.iter().enumerate() {
            let field = if several {
                format!("node.providers[{index}].url")
            } else {
                "node.url".to_owned()
            };
            let (provider, sim) = connect_provider(provider, &field).await?;
            providers.push(provider);
            simulated.extend(sim);
        }
        let supports_batches = providers.iter().all(|p| p.client().supports_batches());
        let display = providers
            .iter()
            .map(|p| format!("{} ({})", p.name, p.display))
            .collect::<Vec<_>>()
            .join(", ");
        let gate = Arc::new(Gate::new(providers, cancel.clone()));
        Ok(Self {
            access: Arc::new(Access::new(gate.clone())),
            gate,
            batches: std::sync::atomic::AtomicBool::new(supports_batches),
            told_header_reads: std::sync::atomic::AtomicBool::new(false),
            display,
            no_finality: NoFinality::default(),
            finality: super::finality::SeenFinality::default(),
            chain: std::sync::OnceLock::new(),
            _simulated: simulated,
        })
    }

    /// Each provider as it stands now.
    pub fn providers(&self) -> Vec<ProviderSnapshot> {
        self.gate
            .providers()
            .iter()
            .map(Provider::snapshot)
            .collect()
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
    /// most what the rate admits now (a batch of n calls costs n) and [`MAX_HEADERS_PER_BATCH`], or, from
    /// the first batch a provider refuses as such, one request each (`max_concurrency` at a time).
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::Interrupted`].
    pub(super) async fn headers(
        &self,
        numbers: &[BlockNumber],
    ) -> Result<Vec<Option<rpc::Header>>, Error> {
        self.batched(
            "eth_getBlockByNumber",
            numbers,
            MAX_HEADERS_PER_BATCH,
            |client, batch: Vec<BlockNumber>| async move { client.headers(&batch).await },
            |client, n| async move { client.header(BlockTag::Number(n)).await },
        )
        .await
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
            |client, batch: Vec<BlockNumber>| async move {
                client.blocks_with_transactions(&batch).await
            },
            |client, n| async move { client.block_with_transactions(BlockTag::Number(n)).await },
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
        let batches = crate::node::Batches {
            gate: &self.gate,
            allowed: &self.batches,
        };
        batches
            .run(
                "eth_getTransactionReceipt",
                hashes,
                MAX_HEADERS_PER_BATCH,
                None,
                |client, batch: Vec<alloy_primitives::B256>| async move {
                    client.receipts(&batch).await
                },
                |client, hash| async move { client.receipt(hash).await },
            )
            .await
            .map_err(|e| self.error()(e.into()))
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
        fetch::block_receipts(&self.access, numbers)
            .await
            .map_err(self.error())
    }

    /// [`crate::node::Batches`] of blocks `numbers` through this node's gate, batches turned off for good
    /// once a provider refuses one; never asked of a provider whose head is below the highest.
    async fn batched<T, Many, ManyFut, One, OneFut>(
        &self,
        method: &'static str,
        numbers: &[BlockNumber],
        max_per_batch: usize,
        many: Many,
        one: One,
    ) -> Result<Vec<T>, Error>
    where
        Many: Fn(Arc<Client>, Vec<BlockNumber>) -> ManyFut,
        ManyFut: std::future::Future<Output = Result<Vec<T>, rpc::Error>>,
        One: Fn(Arc<Client>, BlockNumber) -> OneFut,
        OneFut: std::future::Future<Output = Result<T, rpc::Error>>,
    {
        let batches = crate::node::Batches {
            gate: &self.gate,
            allowed: &self.batches,
        };
        batches
            .run(
                method,
                numbers,
                max_per_batch,
                numbers.iter().max().copied(),
                many,
                one,
            )
            .await
            .map_err(|e| self.error()(e.into()))
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
        fetch::get_logs(&self.access, blocks, selection).await
    }

    /// `eth_getBlockByNumber(tag, false)` through the gate: `None` when the node does not know the block.
    ///
    /// # Errors
    /// [`Error::Node`].
    pub(super) async fn header(&self, tag: BlockTag) -> Result<Option<rpc::Header>, Error> {
        let call = Call::new("eth_getBlockByNumber");
        let call = match tag {
            BlockTag::Number(n) => call.up_to(n),
            _ => call,
        };
        self.gate
            .send(call, |client| async move { client.header(tag).await })
            .await
            .map_err(|e| self.error()(e.into()))
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
        report.rate_limited = stats.rate_limited.load(Relaxed);
        report.providers = self.providers();
        report.retries = stats.retries.load(Relaxed);
        report.splits = stats.splits.load(Relaxed);
        report.topic_only = stats.topic_only.load(Relaxed);
        report.foreign_logs = stats.foreign_logs.load(Relaxed);
        report.repeated_logs = stats.repeated_logs.load(Relaxed);
        report.receipt_blocks = stats.receipt_blocks.load(Relaxed);
        report.children_filled = stats.children_filled.load(Relaxed);
    }

    /// The chain's id: every provider is asked, and all that answer must agree. One that cannot be reached
    /// now is checked when it answers a head poll, and serves nothing before.
    ///
    /// # Errors
    /// [`Error::Config`] naming a provider whose chain id differs; [`Error::Node`] when none answers.
    pub async fn chain_id(&self) -> Result<u64, Error> {
        let providers = self.gate.providers();
        let answers = futures::future::join_all((0..providers.len()).map(|index| {
            self.gate.send_to(
                Call::new("eth_chainId"),
                index,
                false,
                |client| async move { client.chain_id().await },
            )
        }))
        .await;
        let mut first_error = None;
        for (index, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(id) => self.chain_checked(index, id)?,
                Err(err)
                    if providers.len() > 1 && !matches!(err, crate::node::Error::Interrupted) =>
                {
                    tracing::warn!(provider = %providers[index].name, cause = %err, "the provider does not answer its chain id; it serves nothing until it does");
                    first_error.get_or_insert(err);
                }
                Err(err) => return Err(self.error()(err.into())),
            }
        }
        match (self.chain.get(), first_error) {
            (Some(id), _) => Ok(*id),
            (None, Some(err)) => Err(self.error()(err.into())),
            (None, None) => unreachable!("a gate has a provider"),
        }
    }

    /// Each provider's chain id, asked once each (for `check`), in config order.
    pub async fn chain_ids(&self) -> Vec<Result<u64, Error>> {
        self.ask_each(
            "eth_chainId",
            |client| async move { client.chain_id().await },
        )
        .await
    }

    /// Each provider's head, asked once each (for `status`), in config order.
    pub async fn heads(&self) -> Vec<Result<u64, Error>> {
        self.ask_each("eth_blockNumber", |client| async move {
            client.block_number().await
        })
        .await
    }

    /// `method` of every provider at once, one attempt each, errors naming the provider.
    async fn ask_each<F, Fut>(&self, method: &'static str, request: F) -> Vec<Result<u64, Error>>
    where
        F: Fn(Arc<Client>) -> Fut + Copy,
        Fut: std::future::Future<Output = Result<u64, rpc::Error>>,
    {
        let providers = self.gate.providers();
        futures::future::join_all((0..providers.len()).map(|index| async move {
            self.gate
                .send_to(Call::new(method), index, true, request)
                .await
                .map_err(|err| Error::Node {
                    node: format!("{} ({})", providers[index].name, providers[index].display),
                    source: err.into(),
                })
        }))
        .await
    }

    /// Provider `index` answered chain id `id`: the chain's, or the config is wrong.
    fn chain_checked(&self, index: usize, id: u64) -> Result<(), Error> {
        let expected = *self.chain.get_or_init(|| id);
        let provider = &self.gate.providers()[index];
        if id != expected {
            let first = self
                .gate
                .providers()
                .iter()
                .find(|p| p.is_chain_checked())
                .map_or("another provider", |p| p.name.as_str());
            return Err(Error::Config(format!(
                "node.providers[{index}] ({}): it serves chain id {id}, but {first} serves {expected} \
                 (every provider of a chain must serve the same chain: fix or remove its url)",
                provider.name
            )));
        }
        provider.set_chain_checked();
        Ok(())
    }

    /// The head: every provider is asked once (those not checked yet, their chain id first), each one's head
    /// is recorded, and the highest is the chain's; when none answers, the gate's retries decide.
    ///
    /// # Errors
    /// [`Error::Node`]; [`Error::Config`] for a provider on another chain.
    pub(super) async fn latest(&self) -> Result<BlockNumber, Error> {
        let providers = self.gate.providers();
        if providers.len() > 1 {
            let answers =
                futures::future::join_all((0..providers.len()).map(|index| self.head_of(index)))
                    .await;
            let mut best = None;
            for answer in answers {
                match answer {
                    Ok(head) => best = best.max(Some(head)),
                    Err(err @ Error::Config(_)) => return Err(err),
                    Err(Error::Interrupted) => return Err(Error::Interrupted),
                    Err(_) => {}
                }
            }
            if let Some(head) = best {
                return Ok(head);
            }
        }
        self.gate
            .send(Call::new("eth_blockNumber"), |client| async move {
                client.block_number().await
            })
            .await
            .map_err(|e| self.error()(e.into()))
            .inspect(|head| {
                if providers.len() == 1 {
                    providers[0].saw_head(*head);
                }
            })
    }

    /// Provider `index`'s head, asked once (its chain id first if it was never checked).
    async fn head_of(&self, index: usize) -> Result<BlockNumber, Error> {
        let provider = &self.gate.providers()[index];
        if !provider.is_chain_checked() {
            let id = self
                .gate
                .send_to(Call::new("eth_chainId"), index, true, |client| async move {
                    client.chain_id().await
                })
                .await
                .map_err(|e| self.error()(e.into()))?;
            self.chain_checked(index, id)?;
        }
        let head = self
            .gate
            .send_to(
                Call::new("eth_blockNumber"),
                index,
                true,
                |client| async move { client.block_number().await },
            )
            .await
            .map_err(|e| self.error()(e.into()))?;
        provider.saw_head(head);
        Ok(head)
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
            .send(Call::new("eth_getBlockByNumber"), |client| async move {
                client.header(BlockTag::Finalized).await
            })
            .await
        {
            Ok(Some(header)) => Ok(Finalized::Block(header.number)),
            Ok(None) => Ok(Finalized::None(
                "it answers null for the `finalized` block".into(),
            )),
            Err(crate::node::Error::Fatal { source, .. }) => {
                let why = format!("it refuses the `finalized` tag: {source}");
                let _ = self.no_finality.refused.set(why.clone());
                Ok(Finalized::None(why))
            }
            Err(err) => Err(self.error()(err.into())),
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
        match target {
            Target::Number(n) => return Ok(n),
            Target::Latest => return self.latest().await,
            Target::Safe => {
                match self
                    .gate
                    .send(Call::new("eth_getBlockByNumber"), |client| async move {
                        client.header(BlockTag::Safe).await
                    })
                    .await
                {
                    Ok(Some(header)) => return Ok(header.number),
                    // spec: getBlockByNumber does not support `safe`; `finalized` is to be used instead.
                    Err(crate::node::Error::Fatal { .. }) => {
                        tracing::warn!(
                            "the node refuses the `safe` tag; syncing to `finalized` instead"
                        );
                    }
                    Ok(None) => {
                        tracing::warn!(
                            "the node has no `safe` block; syncing to `finalized` instead"
                        );
                    }
                    Err(err) => return Err(self.error()(err.into())),
                }
            }
            Target::Finalized => {}
        }
        match self.finalized().await? {
            Finalized::Block(n) => Ok(n),
            Finalized::None(why) => {
                self.warn_no_finality(&why, window);
                Ok(self.latest().await?.saturating_sub(window))
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

/// One provider of `config` (`field` names its url in messages), with the simulated node its `sim://`
/// started.
async fn connect_provider(
    config: &ProviderConfig,
    field: &str,
) -> Result<(Provider, Option<super::simulator::Simulated>), Error> {
    let options = ClientOptions {
        request_timeout: config.request_timeout,
        max_response_bytes: config.max_response_bytes,
        max_idle_connections: config.max_concurrency,
    };
    let endpoint = match config.transport {
        Transport::Ws => config.ws_endpoint.as_ref().unwrap_or(&config.endpoint),
        Transport::Http => &config.endpoint,
    };
    let (url, simulated) = match endpoint {
        Endpoint::Url(url) => (url.clone(), None),
        Endpoint::Sim(sim) => {
            let simulated = super::simulator::start(sim)
                .await
                .map_err(|e| Error::Config(format!("{field}: {e}")))?;
            let raw = match config.transport {
                Transport::Http => &simulated.http_url,
                Transport::Ws => &simulated.ws_url,
            };
            let url = url::Url::parse(raw)
                .map_err(|e| Error::Config(format!("{field}: built-in node address: {e}")))?;
            (crate::config::SecretUrl::new(url), Some(simulated))
        }
    };
    let display = url.to_string();
    let client = match config.transport {
        Transport::Http => Client::http(&url, options).map_err(|e| Error::Node {
            node: format!("{} ({display})", config.name),
            source: fetch::Error::Fatal {
                provider: config.name.as_str().into(),
                method: "connect",
                source: e,
            },
        })?,
        Transport::Ws => Client::ws(&url, options),
    };
    let limits = Limits {
        max_concurrency: config.max_concurrency,
        requests_per_second: config.requests_per_second,
        credits: config
            .credits_per_second
            .map(|per_second| (per_second, config.method_credits.clone())),
        max_retries: config.max_retries,
        initial_backoff: config.initial_backoff,
        max_backoff: config.max_backoff,
    };
    let provider = Provider::new(config.name.clone(), display, client, limits);
    Ok((provider, simulated))
}
