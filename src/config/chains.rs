//! `[node]` or `[chains.NAME]` -> the chains a config indexes: each chain's providers (`config::providers`)
//! and its own `chain_id`, `finality`, `max_reorg_depth`, `poll_interval` and `start_block` over `[sync]`'s.
//!
//! Rules:
//! - `[node]` alone is one chain named [`DEFAULT_CHAIN`]; `[node]` and `[chains]` exclude each other, and
//!   `[node]` holds none of a chain's own keys (they belong in `[sync]` for the one chain).
//! - Chain names are letters, digits, `_` and `-` (they are written on the command line, in metrics labels
//!   and in `status`); two chains never declare the same `chain_id`.
//! - A chain's confirmations are at most its reorg window, as `[sync]`'s are.

use toml::Value;

use super::check::{field, Checker};
use super::raw::{RawConfig, RawNode, CHAIN_KEYS};
use super::sections::{check_finality_depth, finality};
use super::{providers, ChainConfig, SyncConfig, DEFAULT_CHAIN};

const NODE_FIX: &str = "add a [node] section with url = \"https://...\" or \"sim://\"";
const CHAIN_FIX: &str =
    "write each chain as a [chains.NAME] table with url = \"https://...\" or \"sim://\"";

/// The chains of `root`, in file order (`[chains]` tables in the order written); never empty (a missing
/// `[node]` is reported and stood in for).
pub(super) fn chains(
    checker: &mut Checker<'_>,
    root: &RawConfig,
    sync: &SyncConfig,
) -> Vec<ChainConfig> {
    match (&root.node, &root.chains) {
        (Some(_), Some(chains)) => {
            checker.error(
                Some(&chains.span()),
                "chains",
                "is given together with [node]",
                "keep one: [node] for one chain, or move [node]'s keys into a [chains.NAME] table per chain",
            );
            // The contracts name these chains: checked against them, not against [node].
            if let Some(chains) = several(checker, root, sync) {
                return chains;
            }
        }
        (None, Some(_)) => {
            if let Some(chains) = several(checker, root, sync) {
                return chains;
            }
        }
        (None, None) => checker.error(None, "node", "is missing", NODE_FIX),
        (Some(_), None) => {}
    }
    vec![default_chain(checker, root, sync)]
}

/// `[node]` as the one chain (an empty one when it is missing or not a table: reported).
fn default_chain(checker: &mut Checker<'_>, root: &RawConfig, sync: &SyncConfig) -> ChainConfig {
    let node = checker.table(root.node.as_ref(), "node", "write it as a [node] section");
    let node = match node {
        Some((table, span)) => {
            refuse_chain_keys(checker, table);
            providers::node(checker, "node", table, Some(&span))
        }
        None => providers::node(checker, "node", &RawNode::default(), None),
    };
    ChainConfig {
        name: DEFAULT_CHAIN.to_owned(),
        chain_id: None,
        node,
        finality: sync.finality,
        max_reorg_depth: sync.max_reorg_depth,
        poll_interval: sync.poll_interval,
        start_block: sync.start_block,
    }
}

/// A chain's own key written in `[node]`: each is an error naming where it goes.
fn refuse_chain_keys(checker: &mut Checker<'_>, table: &RawNode) {
    let written = [
        &table.chain_id,
        &table.finality,
        &table.max_reorg_depth,
        &table.poll_interval,
        &table.start_block,
    ];
    for (key, leaf) in CHAIN_KEYS.iter().zip(written) {
        let Some(leaf) = leaf else {
            continue;
        };
        let fix = match *key {
            "chain_id" => "remove it (the database records the chain id on the first sync), or write the chain as a [chains.NAME] table instead of [node]".to_owned(),
            key => format!("move it to [sync] (it is the one chain's), or write the chain as a [chains.NAME] table with {key}"),
        };
        checker.error(
            Some(&leaf.span()),
            &field("node", key),
            "is a key of a [chains.NAME] table, not of [node]",
            fix,
        );
    }
}

/// `[chains]`: `None` when it holds no usable chain (reported).
fn several(
    checker: &mut Checker<'_>,
    root: &RawConfig,
    sync: &SyncConfig,
) -> Option<Vec<ChainConfig>> {
    let (tables, at) = checker.table(root.chains.as_ref(), "chains", CHAIN_FIX)?;
    if tables.is_empty() {
        checker.error(Some(&at), "chains", "has no chains", CHAIN_FIX);
        return None;
    }
    // Written order: a BTreeMap sorts by name, the file's order is the spans'.
    let mut written: Vec<_> = tables.iter().collect();
    written.sort_by_key(|(_, table)| table.span().start);
    let mut chains: Vec<ChainConfig> = Vec::new();
    // chain id -> the section that declares it.
    let mut ids: Vec<(u64, String)> = Vec::new();
    for (name, table) in written {
        let section = format!("chains.{name}");
        let Some((raw, span)) = checker.table(Some(table), &section, CHAIN_FIX) else {
            continue;
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            checker.error(
                Some(&span),
                &section,
                format!("\"{name}\" is not a chain name"),
                "name the chain with letters, digits, _ and -, e.g. [chains.mainnet]",
            );
        }
        let chain = chain(checker, &section, name, raw, &span, sync);
        if let Some(id) = chain.chain_id {
            if let Some((_, other)) = ids.iter().find(|(seen, _)| *seen == id) {
                checker.error(
                    raw.chain_id.as_ref().map(|l| l.span()).as_ref(),
                    &field(&section, "chain_id"),
                    format!("{id} is also the chain id of {other}"),
                    "index each chain once: remove one of the two tables, or correct the id",
                );
            } else {
                ids.push((id, section.clone()));
            }
        }
        chains.push(chain);
    }
    (!chains.is_empty()).then_some(chains)
}

/// One `[chains.NAME]` table (`at` is its span).
fn chain(
    checker: &mut Checker<'_>,
    section: &str,
    name: &str,
    raw: &RawNode,
    at: &super::check::Span,
    sync: &SyncConfig,
) -> ChainConfig {
    let f = |key: &str| field(section, key);
    let node = providers::node(checker, section, raw, Some(at));
    let chain_id = match &raw.chain_id {
        Some(leaf) if matches!(leaf.get_ref(), Value::Integer(_)) => {
            let id = checker.int(Some(leaf), &f("chain_id"), 0u64, 1);
            (id > 0).then_some(id)
        }
        Some(leaf) => {
            checker.error(
                Some(&leaf.span()),
                &f("chain_id"),
                format!("is a {}, not an integer", leaf.get_ref().type_str()),
                "write the chain's eth_chainId as a whole number, e.g. chain_id = 1",
            );
            None
        }
        None => None,
    };
    let finality = match &raw.finality {
        Some(leaf) => finality(checker, Some(leaf), &f("finality")),
        None => sync.finality,
    };
    let max_reorg_depth = checker.int(
        raw.max_reorg_depth.as_ref(),
        &f("max_reorg_depth"),
        sync.max_reorg_depth,
        1,
    );
    if raw.finality.is_some() || raw.max_reorg_depth.is_some() {
        let finality_field = match raw.finality {
            Some(_) => f("finality"),
            None => "sync.finality".to_owned(),
        };
        let depth_field = match raw.max_reorg_depth {
            Some(_) => f("max_reorg_depth"),
            None => "sync.max_reorg_depth".to_owned(),
        };
        check_finality_depth(
            checker,
            raw.finality.as_ref().or(raw.max_reorg_depth.as_ref()),
            (&finality_field, finality),
            (&depth_field, max_reorg_depth),
        );
    }
    ChainConfig {
        name: name.to_owned(),
        chain_id,
        node,
        finality,
        max_reorg_depth,
        poll_interval: checker.duration(
            raw.poll_interval.as_ref(),
            &f("poll_interval"),
            sync.poll_interval,
        ),
        start_block: checker.int(
            raw.start_block.as_ref(),
            &f("start_block"),
            sync.start_block,
            0,
        ),
    }
}
