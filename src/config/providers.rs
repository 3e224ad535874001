//! `[node]` -> the chain's providers: `node.url` as the one provider, or each `[[node.providers]]` entry
//! over the defaults that `[node]` sets.
//!
//! Rules:
//! - `node.url` and `node.providers` exclude each other, and so do `node.ws_url` and `node.providers` (a
//!   WebSocket URL belongs to one provider). `node.providers` holds at least one entry, each with a `url`.
//! - Every other key of `[node]` is the default of each entry; a key an entry sets wins. Without
//!   `providers`, `[node]`'s keys are the one provider's. Built-in defaults are under both.
//! - `method_credits` layers the same way, key by key: the built-in table ([`MethodCredits::default`]),
//!   then `[node]`'s keys, then the entry's. `default` is the credits of every method not named.
//! - Errors name the field where the value is written: `node.max_concurrency` for a default,
//!   `node.providers[1].max_concurrency` (entries counted from 0) for an entry's own key.
//! - `name` defaults to the URL's host (`sim` for `sim://`); names are unique, defaulted ones included.

use toml::Spanned;

use super::check::{field, Checker, Span};
use super::endpoint::{default_name, derive_ws_url, parse_endpoint};
use super::raw::{ArrayOr, Leaf, RawMethodCredits, RawNode, RawProvider, TableOr};
use super::{
    Endpoint, MethodCredits, NodeConfig, ProviderConfig, Transport, DEFAULT_INITIAL_BACKOFF,
    DEFAULT_MAX_BACKOFF, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRIES,
    DEFAULT_REQUESTS_PER_SECOND, DEFAULT_REQUEST_TIMEOUT,
};

const URL_FIX: &str = "write sim://, https://host/path or wss://host/path";
/// How to write `section`'s providers, e.g. `[[node.providers]]`.
fn providers_fix(section: &str) -> String {
    format!("write each provider as a [[{section}.providers]] section with url = \"https://...\"")
}

/// `[node]` or `[chains.NAME]` (`section`): its providers; `at` is the table's span, for the keys it lacks.
pub(super) fn node(
    checker: &mut Checker<'_>,
    section: &str,
    table: &RawNode,
    at: Option<&Span>,
) -> NodeConfig {
    let keys = Keys::of_node(table);
    let Some(raw_providers) = &table.providers else {
        let provider = provider(
            checker,
            section,
            &keys,
            at,
            &Limits::default(),
            Scope::Alone,
        );
        return NodeConfig {
            providers: vec![provider.config],
        };
    };
    let providers_field = field(section, "providers");
    for (key, leaf) in [("url", &table.url), ("ws_url", &table.ws_url)] {
        if let Some(leaf) = leaf {
            checker.error(
                Some(&leaf.span()),
                &field(section, key),
                format!("is set together with {providers_field}"),
                format!(
                    "use one or the other: {section}.url for one provider, or {key} in each [[{providers_field}]] entry"
                ),
            );
        }
    }
    let defaults = limits(checker, section, &keys, &Limits::default(), Scope::Defaults);
    let mut providers = Vec::new();
    match raw_providers.get_ref() {
        ArrayOr::Other(kind) => checker.error(
            Some(&raw_providers.span()),
            &providers_field,
            format!("is a {kind}, not an array of tables"),
            providers_fix(section),
        ),
        ArrayOr::Array(entries) if entries.is_empty() => checker.error(
            Some(&raw_providers.span()),
            &providers_field,
            "is empty",
            format!("add a [[{providers_field}]] section with url = \"https://...\", or remove {providers_field} and set {section}.url"),
        ),
        ArrayOr::Array(entries) => {
            for (provider_idx, entry) in entries.iter().enumerate() {
                let entry_section = format!("{providers_field}[{provider_idx}]");
                let fix = providers_fix(section);
                let Some((raw, span)) = checker.table(Some(entry), &entry_section, &fix) else {
                    continue;
                };
                let own = Keys::of_provider(raw);
                let scope = Scope::Entry(&keys, section);
                let provider = provider(checker, &entry_section, &own, Some(&span), &defaults, scope);
                providers.push((entry_section, provider));
            }
        }
    }
    check_unique_names(checker, &providers);
    let mut providers: Vec<ProviderConfig> = providers.into_iter().map(|(_, p)| p.config).collect();
    if providers.is_empty() {
        // Only with an error recorded above; keeps `NodeConfig::providers` non-empty all the same.
        providers.push(placeholder(&defaults));
    }
    NodeConfig { providers }
}

/// The keys of one provider's table, from `[node]` (which has no `name`) or a `[[node.providers]]` entry.
struct Keys<'r> {
    name: Option<&'r Leaf>,
    url: Option<&'r Leaf>,
    ws_url: Option<&'r Leaf>,
    transport: Option<&'r Leaf>,
    requests_per_second: Option<&'r Leaf>,
    credits_per_second: Option<&'r Leaf>,
    method_credits: Option<&'r Spanned<TableOr<RawMethodCredits>>>,
    max_concurrency: Option<&'r Leaf>,
    request_timeout: Option<&'r Leaf>,
    max_retries: Option<&'r Leaf>,
    initial_backoff: Option<&'r Leaf>,
    max_backoff: Option<&'r Leaf>,
    max_response_bytes: Option<&'r Leaf>,
}

impl<'r> Keys<'r> {
    fn of_node(table: &'r RawNode) -> Self {
        Self {
            name: None,
            url: table.url.as_ref(),
            ws_url: table.ws_url.as_ref(),
            transport: table.transport.as_ref(),
            requests_per_second: table.requests_per_second.as_ref(),
            credits_per_second: table.credits_per_second.as_ref(),
            method_credits: table.method_credits.as_ref(),
            max_concurrency: table.max_concurrency.as_ref(),
            request_timeout: table.request_timeout.as_ref(),
            max_retries: table.max_retries.as_ref(),
            initial_backoff: table.initial_backoff.as_ref(),
            max_backoff: table.max_backoff.as_ref(),
            max_response_bytes: table.max_response_bytes.as_ref(),
        }
    }

    fn of_provider(table: &'r RawProvider) -> Self {
        Self {
            name: table.name.as_ref(),
            url: table.url.as_ref(),
            ws_url: table.ws_url.as_ref(),
            transport: table.transport.as_ref(),
            requests_per_second: table.requests_per_second.as_ref(),
            credits_per_second: table.credits_per_second.as_ref(),
            method_credits: table.method_credits.as_ref(),
            max_concurrency: table.max_concurrency.as_ref(),
            request_timeout: table.request_timeout.as_ref(),
            max_retries: table.max_retries.as_ref(),
            initial_backoff: table.initial_backoff.as_ref(),
            max_backoff: table.max_backoff.as_ref(),
            max_response_bytes: table.max_response_bytes.as_ref(),
        }
    }
}

/// Whose keys a table's are, for the checks between two keys that may be written in different tables.
#[derive(Clone, Copy)]
enum Scope<'k> {
    /// `[node]` without `providers`: the one provider.
    Alone,
    /// `[node]` with `providers`: the defaults of the entries.
    Defaults,
    /// A `[[node.providers]]` entry, over `[node]`'s keys (these, written in that section).
    Entry(&'k Keys<'k>, &'k str),
}

/// `transport` as typed, with where it is written (the check against the URL's scheme names it).
#[derive(Debug, Clone)]
struct WrittenTransport {
    transport: Transport,
    span: Span,
    field: String,
}

/// Every key of a provider but its name and endpoints: the built-in defaults, `[node]`'s keys over them, or
/// an entry's keys over `[node]`'s.
#[derive(Debug, Clone)]
struct Limits {
    /// `None`: not written; it follows the URL's scheme.
    transport: Option<WrittenTransport>,
    requests_per_second: u32,
    credits_per_second: Option<u32>,
    method_credits: MethodCredits,
    max_concurrency: usize,
    request_timeout: std::time::Duration,
    max_retries: u32,
    initial_backoff: std::time::Duration,
    max_backoff: std::time::Duration,
    max_response_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            transport: None,
            requests_per_second: DEFAULT_REQUESTS_PER_SECOND,
            credits_per_second: None,
            method_credits: MethodCredits::default(),
            max_concurrency: DEFAULT_MAX_CONCURRENCY,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_retries: DEFAULT_MAX_RETRIES,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// A typed provider, with where its name comes from (for the uniqueness check).
struct Provider {
    config: ProviderConfig,
    name: NameSource,
}

/// Where a provider's name comes from.
enum NameSource {
    /// `name`, written at this span.
    Written(Span),
    /// The URL's host; the span is the provider's table.
    Host(Option<Span>),
    /// No usable name or URL (already reported): left out of the uniqueness check.
    Unknown,
}

/// One provider: `section`'s keys over `base`; `at` is the table's span, for the keys it lacks.
fn provider(
    checker: &mut Checker<'_>,
    section: &str,
    keys: &Keys<'_>,
    at: Option<&Span>,
    base: &Limits,
    scope: Scope<'_>,
) -> Provider {
    let f = |key: &str| field(section, key);
    let url = checker.required_string(keys.url, at, &f("url"), URL_FIX);
    let endpoint = url
        .as_ref()
        .and_then(|url| parse_endpoint(checker, &f("url"), url, &["http", "https", "ws", "wss"]));
    let ws_url = checker.string(keys.ws_url, &f("ws_url"));
    let mut ws_endpoint = ws_url
        .as_ref()
        .and_then(|ws_url| parse_endpoint(checker, &f("ws_url"), ws_url, &["ws", "wss"]));
    let limits = limits(checker, section, keys, base, scope);
    let transport = transport(checker, &limits, endpoint.as_ref(), &f("url"));
    if transport == Transport::Ws && ws_endpoint.is_none() && ws_url.is_none() {
        // sim:// stays None: the pipeline starts the built-in node and knows its WebSocket address.
        if let Some(Endpoint::Url(url)) = &endpoint {
            ws_endpoint = Some(Endpoint::Url(derive_ws_url(url)));
        }
    }
    let written_name = checker.string(keys.name, &f("name")).and_then(|setting| {
        if setting.value.trim().is_empty() {
            checker.error(
                Some(&setting.span),
                &f("name"),
                "is empty",
                "write a name such as \"infura\", or remove name to use the url's host",
            );
            return None;
        }
        Some(setting)
    });
    let (name, source) = match (written_name, &endpoint) {
        (Some(setting), _) => (setting.value, NameSource::Written(setting.span)),
        (None, Some(endpoint)) if keys.name.is_none() => {
            (default_name(endpoint), NameSource::Host(at.cloned()))
        }
        (None, endpoint) => (
            endpoint
                .as_ref()
                .map_or_else(|| "node".to_owned(), default_name),
            NameSource::Unknown,
        ),
    };
    let endpoint = endpoint.unwrap_or_else(|| Endpoint::Sim(String::new()));
    Provider {
        config: build(name, endpoint, ws_endpoint, transport, limits),
        name: source,
    }
}

/// A [`ProviderConfig`] of its parts.
fn build(
    name: String,
    endpoint: Endpoint,
    ws_endpoint: Option<Endpoint>,
    transport: Transport,
    limits: Limits,
) -> ProviderConfig {
    ProviderConfig {
        name,
        endpoint,
        ws_endpoint,
        transport,
        requests_per_second: limits.requests_per_second,
        credits_per_second: limits.credits_per_second,
        method_credits: limits.method_credits,
        max_concurrency: limits.max_concurrency,
        request_timeout: limits.request_timeout,
        max_retries: limits.max_retries,
        initial_backoff: limits.initial_backoff,
        max_backoff: limits.max_backoff,
        max_response_bytes: limits.max_response_bytes,
    }
}

/// The provider standing in when `node.providers` gave none (an error is recorded).
fn placeholder(defaults: &Limits) -> ProviderConfig {
    let transport = defaults
        .transport
        .as_ref()
        .map_or(Transport::Http, |written| written.transport);
    let endpoint = Endpoint::Sim(String::new());
    build(
        default_name(&endpoint),
        endpoint,
        None,
        transport,
        defaults.clone(),
    )
}

/// `section`'s limits over `base`'s, each checked where it is written.
fn limits(
    checker: &mut Checker<'_>,
    section: &str,
    keys: &Keys<'_>,
    base: &Limits,
    scope: Scope<'_>,
) -> Limits {
    let f = |key: &str| field(section, key);
    let transport = match checker.string(keys.transport, &f("transport")) {
        None => base.transport.clone(),
        Some(setting) => {
            let transport = match setting.value.as_str() {
                "http" => Some(Transport::Http),
                "ws" => Some(Transport::Ws),
                _ => {
                    checker.error(
                        Some(&setting.span),
                        &f("transport"),
                        format!("\"{}\" is not a transport", setting.raw),
                        "write \"http\" or \"ws\"",
                    );
                    None
                }
            };
            transport.map(|transport| WrittenTransport {
                transport,
                span: setting.span,
                field: f("transport"),
            })
        }
    };
    let requests_per_second = checker.int(
        keys.requests_per_second,
        &f("requests_per_second"),
        base.requests_per_second,
        1,
    );
    let credits_per_second = match keys.credits_per_second {
        // 0 is below the minimum, so it only comes back for a value already reported.
        Some(leaf) => match checker.int(Some(leaf), &f("credits_per_second"), 0, 1) {
            0 => base.credits_per_second,
            credits => Some(credits),
        },
        None => base.credits_per_second,
    };
    let method_credits =
        method_credits(checker, section, keys.method_credits, &base.method_credits);
    let max_concurrency = checker.int(
        keys.max_concurrency,
        &f("max_concurrency"),
        base.max_concurrency,
        1,
    );
    let request_timeout = checker.duration(
        keys.request_timeout,
        &f("request_timeout"),
        base.request_timeout,
    );
    // 0 retries is meaningful: try each request once.
    let max_retries = checker.int(keys.max_retries, &f("max_retries"), base.max_retries, 0);
    let initial_backoff = checker.duration(
        keys.initial_backoff,
        &f("initial_backoff"),
        base.initial_backoff,
    );
    let max_backoff = checker.duration(keys.max_backoff, &f("max_backoff"), base.max_backoff);
    check_backoffs(
        checker,
        section,
        keys,
        scope,
        (initial_backoff, max_backoff),
    );
    let max_response_bytes = checker.int(
        keys.max_response_bytes,
        &f("max_response_bytes"),
        base.max_response_bytes,
        1,
    );
    Limits {
        transport,
        requests_per_second,
        credits_per_second,
        method_credits,
        max_concurrency,
        request_timeout,
        max_retries,
        initial_backoff,
        max_backoff,
        max_response_bytes,
    }
}

/// `initial_backoff <= max_backoff` for one table's pair (`backoffs`), reported at most once per table:
/// at the first of the two that `section` writes; for an entry that writes neither, at the one `[node]`
/// writes, unless `[node]` writes both (then its own check reported it); for `[node]`'s defaults, only
/// when `[node]` writes both (an entry may set the other).
fn check_backoffs(
    checker: &mut Checker<'_>,
    section: &str,
    keys: &Keys<'_>,
    scope: Scope<'_>,
    (initial_backoff, max_backoff): (std::time::Duration, std::time::Duration),
) {
    const FIX: &str = "make initial_backoff at most max_backoff";
    let writes_both =
        |keys: &Keys<'_>| keys.initial_backoff.is_some() && keys.max_backoff.is_some();
    if initial_backoff <= max_backoff || (matches!(scope, Scope::Defaults) && !writes_both(keys)) {
        return;
    }
    let f = |key: &str| field(section, key);
    let (initial, max) = (
        humantime::format_duration(initial_backoff),
        humantime::format_duration(max_backoff),
    );
    let (written_in, written) = match scope {
        Scope::Entry(node, node_section)
            if keys.initial_backoff.is_none() && keys.max_backoff.is_none() =>
        {
            if writes_both(node) {
                return;
            }
            (node_section, node)
        }
        _ => (section, keys),
    };
    if let Some(leaf) = written.initial_backoff {
        let problem = format!("{initial} is above {} ({max})", f("max_backoff"));
        checker.error(
            Some(&leaf.span()),
            &field(written_in, "initial_backoff"),
            problem,
            FIX,
        );
    } else if let Some(leaf) = written.max_backoff {
        let problem = format!("{max} is below {} ({initial})", f("initial_backoff"));
        checker.error(
            Some(&leaf.span()),
            &field(written_in, "max_backoff"),
            problem,
            FIX,
        );
    }
}

/// `method_credits` over `base`: each method given replaces that method's credits, `default` those of every
/// method not named; the rest of `base` stays.
fn method_credits(
    checker: &mut Checker<'_>,
    section: &str,
    raw: Option<&Spanned<TableOr<RawMethodCredits>>>,
    base: &MethodCredits,
) -> MethodCredits {
    let table_field = field(section, "method_credits");
    let fix = "write method_credits = { eth_getLogs = 75, default = 26 }";
    let mut credits = base.clone();
    let Some((table, _)) = checker.table(raw, &table_field, fix) else {
        return credits;
    };
    // In file order (the map is sorted by method).
    let mut entries: Vec<(&String, &Leaf)> = table.iter().collect();
    entries.sort_by_key(|(_, leaf)| leaf.span().start);
    for (method, leaf) in entries {
        let method_field = format!("{table_field}.{method}");
        // 0 is below the minimum, so it only comes back for a value already reported.
        let n: u32 = checker.int(Some(leaf), &method_field, 0, 1);
        match (n, method.as_str()) {
            (0, _) => {}
            (n, "default") => credits.default = n,
            (n, method) => {
                credits.methods.insert(method.to_owned(), n);
            }
        }
    }
    credits
}

/// `transport` as written (or inherited), else `ws` for a `ws(s)://` url and `http` otherwise; `http`
/// with a `ws(s)://` url is refused, at the line `transport` is written on.
fn transport(
    checker: &mut Checker<'_>,
    limits: &Limits,
    endpoint: Option<&Endpoint>,
    url_field: &str,
) -> Transport {
    let url_is_ws = matches!(endpoint, Some(Endpoint::Url(url)) if matches!(url.expose().scheme(), "ws" | "wss"));
    match &limits.transport {
        None if url_is_ws => Transport::Ws,
        None => Transport::Http,
        Some(written) => {
            if written.transport == Transport::Http && url_is_ws {
                checker.error(
                    Some(&written.span),
                    &written.field,
                    format!("\"http\" does not fit a ws:// or wss:// {url_field}"),
                    "set transport = \"ws\", or give an http(s):// url",
                );
            }
            written.transport
        }
    }
}

/// Two providers may not share a name: the second is refused, with a fix that depends on whether its name
/// is written or the URL's host.
fn check_unique_names(checker: &mut Checker<'_>, providers: &[(String, Provider)]) {
    for (idx, (section, provider)) in providers.iter().enumerate() {
        let name = &provider.config.name;
        let earlier = providers[..idx].iter().find(|(_, other)| {
            !matches!(other.name, NameSource::Unknown) && other.config.name == *name
        });
        let Some((earlier_section, _)) = earlier else {
            continue;
        };
        let name_field = field(section, "name");
        match &provider.name {
            NameSource::Written(span) => checker.error(
                Some(span),
                &name_field,
                format!("\"{name}\" is also the name of {earlier_section}"),
                "give each provider its own name",
            ),
            NameSource::Host(span) => checker.error(
                span.as_ref(),
                &name_field,
                format!(
                    "is missing, and its default (the url's host, \"{name}\") is also the name of {earlier_section}"
                ),
                "set name = \"...\" in each provider to tell them apart",
            ),
            NameSource::Unknown => {}
        }
    }
}
