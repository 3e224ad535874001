//! Unknown keys: the keys `serde_ignored` saw the serde types of `config::raw` skip, each reported at its
//! line with the nearest key its table declares (or the list of them).

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::check::{Checker, Span};
use super::raw;

/// One step of a path into the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Segment {
    /// A table's key.
    Key(String),
    /// An array's element.
    Index(usize),
}

/// The steps of an ignored value's path from the root, without the wrappers serde adds (`Option`,
/// `toml::Spanned`'s private fields).
pub(super) fn segments(path: &serde_ignored::Path<'_>) -> Vec<Segment> {
    let mut out = Vec::new();
    let mut at = path;
    loop {
        at = match at {
            serde_ignored::Path::Root => break,
            serde_ignored::Path::Seq { parent, index } => {
                out.push(Segment::Index(*index));
                parent
            }
            serde_ignored::Path::Map { parent, key } => {
                if !key.starts_with("$__serde_spanned_private_") {
                    out.push(Segment::Key(key.clone()));
                }
                parent
            }
            serde_ignored::Path::Some { parent }
            | serde_ignored::Path::NewtypeStruct { parent }
            | serde_ignored::Path::NewtypeVariant { parent } => parent,
        };
    }
    out.reverse();
    out
}

/// Reports each ignored path of `text` as an unknown key.
pub(super) fn report(checker: &mut Checker<'_>, text: &str, ignored: &[Vec<Segment>]) {
    // Parsed again only when there is something to locate: `toml::Spanned` gives values' spans, not keys'.
    let tree = match ignored.is_empty() {
        true => None,
        false => DeTable::parse(text).ok(),
    };
    // In file order (serde visits a table's keys sorted); a key not found goes last.
    let mut located: Vec<(Option<Span>, &Vec<Segment>)> = ignored
        .iter()
        .map(|path| (tree.as_ref().and_then(|tree| key_span(tree, path)), path))
        .collect();
    located.sort_by_key(|(span, _)| span.as_ref().map_or(usize::MAX, |span| span.start));
    for (span, path) in located {
        let Some((Segment::Key(key), parent)) = path.split_last() else {
            continue;
        };
        let (mut shown, mut pattern) = (String::new(), String::new());
        for (depth, segment) in parent.iter().enumerate() {
            match segment {
                Segment::Key(k) => {
                    let dot = if shown.is_empty() { "" } else { "." };
                    shown.push_str(&format!("{dot}{k}"));
                    // A chain's name is the user's: `[chains.base]`'s keys are those of `chains.*`.
                    let is_chain_name = depth == 1 && parent[0] == Segment::Key("chains".into());
                    let k = if is_chain_name { "*" } else { k.as_str() };
                    pattern.push_str(&format!("{dot}{k}"));
                }
                Segment::Index(idx) => {
                    shown.push_str(&format!("[{idx}]"));
                    pattern.push_str("[]");
                }
            }
        }
        let known = raw::sections()
            .into_iter()
            .find(|(section, _)| *section == pattern)
            .map_or(&[][..], |(_, keys)| keys);
        let fix = match nearest(key, known) {
            Some(suggestion) => format!("did you mean \"{suggestion}\"?"),
            None => format!("valid keys here: {}", known.join(", ")),
        };
        checker.error(
            span.as_ref(),
            &super::check::field(&shown, key),
            format!("unknown key \"{key}\""),
            fix,
        );
    }
}

/// Where the last key of `path` is written.
fn key_span(root: &Spanned<DeTable<'_>>, path: &[Segment]) -> Option<Span> {
    let (Segment::Key(last), parent) = path.split_last()? else {
        return None;
    };
    let mut table = root.get_ref();
    let mut segments = parent.iter().peekable();
    while let Some(segment) = segments.next() {
        let Segment::Key(key) = segment else {
            return None;
        };
        let mut value = entry(table, key)?.1.get_ref();
        while let Some(Segment::Index(idx)) = segments.peek() {
            segments.next();
            let DeValue::Array(array) = value else {
                return None;
            };
            value = array.get(*idx)?.get_ref();
        }
        let DeValue::Table(inner) = value else {
            return None;
        };
        table = inner;
    }
    entry(table, last).map(|(key, _)| key.span())
}

/// The key and value of `table` at `key`.
fn entry<'t, 'i>(
    table: &'t DeTable<'i>,
    key: &str,
) -> Option<(
    &'t Spanned<toml::de::DeString<'i>>,
    &'t Spanned<DeValue<'i>>,
)> {
    table.iter().find(|(k, _)| k.get_ref() == key)
}

/// The known key nearest to `key`, when near enough to be a likely typo.
fn nearest<'k>(key: &str, known: &[&'k str]) -> Option<&'k str> {
    known
        .iter()
        .map(|candidate| (strsim::jaro_winkler(key, candidate), *candidate))
        .filter(|(similarity, candidate)| {
            *similarity >= 0.85 || strsim::levenshtein(key, candidate) <= 2
        })
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, candidate)| candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_nearest(key: &str, expected: Option<&str>) {
        let known = [
            "url",
            "ws_url",
            "transport",
            "max_concurrency",
            "max_retries",
            "requests_per_second",
        ];
        assert_eq!(nearest(key, &known), expected, "{key}");
    }

    #[test]
    fn suggests_the_nearest_key_for_typos_only() {
        check_nearest("max_concurency", Some("max_concurrency"));
        check_nearest("urll", Some("url"));
        check_nearest("wsurl", Some("ws_url"));
        check_nearest("max_retry", Some("max_retries"));
        check_nearest("requests_per_sec", Some("requests_per_second"));
        check_nearest("colour", None);
    }
}
