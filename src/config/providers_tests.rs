//! `[node]` and `[[node.providers]]`: inheritance of `[node]`'s keys, provider names, credits, and every
//! refusal with its full message (file, line, field, problem, fix).

use std::path::Path;
use std::time::Duration;

use super::{load_str, Config, Endpoint, MethodCredits, ProviderConfig, Transport};

const KEY: &str = "k3y-0123456789";

fn env(name: &str) -> Option<String> {
    (name == "KEY").then(|| KEY.to_owned())
}

/// `[database]` and one contract, after the node lines of a test.
const REST: [&str; 6] = [
    "[database]",
    "url = \"sqlite::memory:\"",
    "[[contracts]]",
    "name = \"usdc\"",
    "address = \"0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\"",
    "events = [\"event Transfer(address indexed from, address indexed to, uint256 value)\"]",
];

/// `node_lines` then [`REST`], joined by newlines: line N of the config is `node_lines[N - 1]`.
fn text(node_lines: &[&str]) -> String {
    node_lines
        .iter()
        .chain(REST.iter())
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

fn providers(node_lines: &[&str]) -> Vec<ProviderConfig> {
    let text = text(node_lines);
    match load_str(Path::new("config.toml"), &text, &env) {
        Ok(Config { node, .. }) => node.providers,
        Err(errors) => panic!("expected a valid config, got:\n{errors}\n--- config:\n{text}"),
    }
}

fn check_errors(node_lines: &[&str], expected: &[&str]) {
    let text = text(node_lines);
    let errors = match load_str(Path::new("config.toml"), &text, &env) {
        Ok(config) => panic!(
            "expected errors, got {:?}\n--- config:\n{text}",
            config.node
        ),
        Err(errors) => errors.0,
    };
    let actual: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(actual, expected, "\n--- config:\n{text}");
}

fn url(endpoint: &Endpoint) -> String {
    match endpoint {
        Endpoint::Sim(sim) => sim.clone(),
        Endpoint::Url(url) => url.expose().to_string(),
    }
}

fn credits(pairs: &[(&str, u32)], default: u32) -> MethodCredits {
    MethodCredits {
        methods: pairs
            .iter()
            .map(|(method, credits)| ((*method).to_owned(), *credits))
            .collect(),
        default,
    }
}

/// Goal: each entry's own keys win, every other key is `[node]`'s, and what neither sets is the built-in
/// default; `method_credits` layers key by key; names default to the URL's host; order is file order.
#[test]
fn providers_inherit_the_keys_of_node() {
    let providers = providers(&[
        "[node]",
        "max_concurrency = 4",
        "requests_per_second = 10",
        "request_timeout = \"20s\"",
        "method_credits = { eth_getLogs = 60, eth_call = 20 }",
        "[[node.providers]]",
        "name = \"infura\"",
        "url = \"https://mainnet.infura.io/v3/${KEY}\"",
        "requests_per_second = 25",
        "[[node.providers]]",
        "name = \"alchemy\"",
        "url = \"https://eth-mainnet.g.alchemy.com/v2/${KEY}\"",
        "credits_per_second = 330",
        "method_credits = { eth_getLogs = 75, eth_getBlockByNumber = 16, eth_getBlockReceipts = 500, default = 20 }",
        "max_retries = 0",
        "max_concurrency = 2",
        "[[node.providers]]",
        "url = \"http://127.0.0.1:8545\"",
        "initial_backoff = \"1s\"",
    ]);
    let names: Vec<&str> = providers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["infura", "alchemy", "127.0.0.1"]);
    let urls: Vec<String> = providers.iter().map(|p| url(&p.endpoint)).collect();
    assert_eq!(
        urls,
        [
            format!("https://mainnet.infura.io/v3/{KEY}"),
            format!("https://eth-mainnet.g.alchemy.com/v2/{KEY}"),
            "http://127.0.0.1:8545/".to_owned()
        ]
    );
    let limits = |p: &ProviderConfig| {
        (
            p.requests_per_second,
            p.credits_per_second,
            p.max_concurrency,
            p.max_retries,
        )
    };
    assert_eq!(limits(&providers[0]), (25, None, 4, 8));
    assert_eq!(limits(&providers[1]), (10, Some(330), 2, 0));
    assert_eq!(limits(&providers[2]), (10, None, 4, 8));
    let times = |p: &ProviderConfig| (p.request_timeout, p.initial_backoff, p.max_backoff);
    let (s20, ms250, s30) = (
        Duration::from_secs(20),
        Duration::from_millis(250),
        Duration::from_secs(30),
    );
    assert_eq!(times(&providers[0]), (s20, ms250, s30));
    assert_eq!(times(&providers[1]), (s20, ms250, s30));
    assert_eq!(times(&providers[2]), (s20, Duration::from_secs(1), s30));
    assert_eq!(providers[2].max_response_bytes, 32 * 1024 * 1024);
    let node_credits = credits(
        &[
            ("eth_call", 20),
            ("eth_getBlockByNumber", 16),
            ("eth_getBlockReceipts", 500),
            ("eth_getLogs", 60),
        ],
        26,
    );
    assert_eq!(providers[0].method_credits, node_credits);
    assert_eq!(providers[2].method_credits, node_credits);
    assert_eq!(
        providers[1].method_credits,
        credits(
            &[
                ("eth_call", 20),
                ("eth_getBlockByNumber", 16),
                ("eth_getBlockReceipts", 500),
                ("eth_getLogs", 75),
            ],
            20
        )
    );
    assert!(providers.iter().all(|p| p.transport == Transport::Http));
}

/// Goal: `credits_per_second` and `method_credits` in `[node]` itself are the one provider's; methods not
/// given keep the built-in table's credits.
#[test]
fn node_alone_takes_credits_too() {
    let providers = providers(&[
        "[node]",
        "url = \"sim://?seed=7\"",
        "credits_per_second = 100",
        "method_credits = { eth_getLogs = 10, eth_call = 3, default = 5 }",
    ]);
    let [provider] = &providers[..] else {
        panic!("{providers:?}")
    };
    assert_eq!(provider.name, "sim");
    assert_eq!(provider.credits_per_second, Some(100));
    let of = |method| provider.method_credits.of(method);
    assert_eq!(
        [
            of("eth_getLogs"),
            of("eth_call"),
            of("eth_getBlockByNumber"),
            of("eth_getBlockReceipts"),
            of("eth_chainId")
        ],
        [10, 3, 16, 500, 5]
    );
    let plain = &self::providers(&["[node]", "url = \"https://node.example/v3/${KEY}\""])[0];
    assert_eq!(plain.name, "node.example");
    assert_eq!(
        (plain.credits_per_second, &plain.method_credits),
        (None, &MethodCredits::default())
    );
}

/// Goal: `transport` in `[node]` applies to each entry (a WebSocket URL derived from each one's own URL),
/// an entry's `ws_url` and `transport` win, and a `ws(s)://` url makes `ws` the default.
#[test]
fn transport_is_inherited_and_ws_urls_are_per_provider() {
    let providers = providers(&[
        "[node]",
        "transport = \"ws\"",
        "[[node.providers]]",
        "name = \"a\"",
        "url = \"https://a.example/v3/${KEY}\"",
        "[[node.providers]]",
        "name = \"b\"",
        "url = \"https://b.example/rpc\"",
        "ws_url = \"wss://b.example/socket\"",
        "[[node.providers]]",
        "name = \"c\"",
        "url = \"http://c.example/v3/k\"",
        "transport = \"http\"",
        "[[node.providers]]",
        "url = \"sim://\"",
    ]);
    let shown: Vec<(Transport, Option<String>)> = providers
        .iter()
        .map(|p| (p.transport, p.ws_endpoint.as_ref().map(url)))
        .collect();
    assert_eq!(
        shown,
        [
            (Transport::Ws, Some(format!("wss://a.example/ws/v3/{KEY}"))),
            (Transport::Ws, Some("wss://b.example/socket".to_owned())),
            (Transport::Http, None),
            (Transport::Ws, None),
        ]
    );
    let ws = &self::providers(&["[[node.providers]]", "url = \"wss://x.example/ws\""])[0];
    assert_eq!(
        (ws.transport, ws.name.as_str()),
        (Transport::Ws, "x.example")
    );
}

#[test]
fn refuses_node_url_with_providers() {
    check_errors(
        &[
            "[node]",
            "url = \"https://a.example/v3/${KEY}\"",
            "ws_url = \"wss://a.example/ws/v3/${KEY}\"",
            "[[node.providers]]",
            "url = \"https://b.example\"",
        ],
        &[
            "config.toml:2: node.url: is set together with node.providers (use one or the other: node.url for one provider, or url in each [[node.providers]] entry)",
            "config.toml:3: node.ws_url: is set together with node.providers (use one or the other: node.url for one provider, or ws_url in each [[node.providers]] entry)",
        ],
    );
}

#[test]
fn refuses_a_provider_without_url_and_empty_or_misshapen_providers() {
    check_errors(
        &[
            "[[node.providers]]",
            "name = \"a\"",
            "url = \"sim://\"",
            "[[node.providers]]",
            "name = \"b\"",
            "requests_per_second = 5",
        ],
        &["config.toml:4: node.providers[1].url: is missing (write sim://, https://host/path or wss://host/path)"],
    );
    check_errors(
        &["[node]", "providers = []"],
        &["config.toml:2: node.providers: is empty (add a [[node.providers]] section with url = \"https://...\", or remove node.providers and set node.url)"],
    );
    check_errors(
        &["[node]", "providers = \"https://a.example\""],
        &["config.toml:2: node.providers: is a string, not an array of tables (write each provider as a [[node.providers]] section with url = \"https://...\")"],
    );
    check_errors(
        &["[node]", "providers = [\"https://a.example\", { url = \"sim://\" }]"],
        &["config.toml:2: node.providers[0]: is a string, not a table (write each provider as a [[node.providers]] section with url = \"https://...\")"],
    );
}

/// Unknown keys inside an entry, as a section or inline, get the nearest key of a provider (or the list).
#[test]
fn refuses_unknown_keys_inside_a_provider() {
    check_errors(
        &[
            "[node]",
            "max_concurency = 2",
            "[[node.providers]]",
            "urll = \"sim://\"",
            "[[node.providers]]",
            "url = \"sim://?seed=2\"",
            "name = \"second\"",
            "credit_per_second = 5",
            "colour = \"red\"",
            "[node.providers.method_credits]",
            "eth_getLogs = 75",
        ],
        &[
            "config.toml:2: node.max_concurency: unknown key \"max_concurency\" (did you mean \"max_concurrency\"?)",
            "config.toml:4: node.providers[0].urll: unknown key \"urll\" (did you mean \"url\"?)",
            "config.toml:8: node.providers[1].credit_per_second: unknown key \"credit_per_second\" (did you mean \"credits_per_second\"?)",
            "config.toml:9: node.providers[1].colour: unknown key \"colour\" (valid keys here: name, url, ws_url, transport, requests_per_second, credits_per_second, method_credits, max_concurrency, request_timeout, max_retries, initial_backoff, max_backoff, max_response_bytes)",
            "config.toml:3: node.providers[0].url: is missing (write sim://, https://host/path or wss://host/path)",
        ],
    );
    check_errors(
        &[
            "[node]",
            "providers = [",
            "  { url = \"sim://\", nmae = \"a\" },",
            "]",
        ],
        &["config.toml:3: node.providers[0].nmae: unknown key \"nmae\" (did you mean \"name\"?)"],
    );
}

#[test]
fn refuses_zero_and_negative_rates() {
    check_errors(
        &[
            "[node]",
            "requests_per_second = 0",
            "credits_per_second = -1",
            "[[node.providers]]",
            "name = \"a\"",
            "url = \"sim://\"",
            "requests_per_second = -3",
            "credits_per_second = 0",
            "[[node.providers]]",
            "name = \"b\"",
            "url = \"sim://\"",
            "requests_per_second = 2.5",
            "credits_per_second = \"100\"",
        ],
        &[
            "config.toml:2: node.requests_per_second: 0 is below the minimum 1 (set it to 1 or more)",
            "config.toml:3: node.credits_per_second: -1 is negative (set it to 1 or more)",
            "config.toml:7: node.providers[0].requests_per_second: -3 is negative (set it to 1 or more)",
            "config.toml:8: node.providers[0].credits_per_second: 0 is below the minimum 1 (set it to 1 or more)",
            "config.toml:12: node.providers[1].requests_per_second: is a float, not an integer (write a whole number without quotes)",
            "config.toml:13: node.providers[1].credits_per_second: is a string, not an integer (write a whole number without quotes)",
        ],
    );
    check_errors(
        &["[node]", "url = \"sim://\"", "credits_per_second = 0"],
        &["config.toml:3: node.credits_per_second: 0 is below the minimum 1 (set it to 1 or more)"],
    );
}

#[test]
fn refuses_bad_method_credits() {
    check_errors(
        &[
            "[node]",
            "method_credits = 75",
            "[[node.providers]]",
            "url = \"sim://\"",
            "method_credits = { eth_getLogs = -1, eth_call = 1.5, eth_chainId = \"3\", default = 0, eth_getBlockByNumber = 16 }",
        ],
        &[
            "config.toml:2: node.method_credits: is a integer, not a table (write method_credits = { eth_getLogs = 75, default = 26 })",
            "config.toml:5: node.providers[0].method_credits.eth_getLogs: -1 is negative (set it to 1 or more)",
            "config.toml:5: node.providers[0].method_credits.eth_call: is a float, not an integer (write a whole number without quotes)",
            "config.toml:5: node.providers[0].method_credits.eth_chainId: is a string, not an integer (write a whole number without quotes)",
            "config.toml:5: node.providers[0].method_credits.default: 0 is below the minimum 1 (set it to 1 or more)",
        ],
    );
}

/// Goal: names are unique, defaulted names included: two providers of one host (or two `sim://`) without
/// `name` are told to set one; an empty name is refused.
#[test]
fn refuses_two_providers_of_one_name() {
    check_errors(
        &[
            "[[node.providers]]",
            "name = \"main\"",
            "url = \"sim://?seed=1\"",
            "[[node.providers]]",
            "name = \"main\"",
            "url = \"sim://?seed=2\"",
            "[[node.providers]]",
            "url = \"https://mainnet.infura.io/v3/${KEY}\"",
            "[[node.providers]]",
            "url = \"https://mainnet.infura.io/v3/other\"",
            "[[node.providers]]",
            "name = \"mainnet.infura.io\"",
            "url = \"https://a.example\"",
            "[[node.providers]]",
            "url = \"sim://\"",
            "[[node.providers]]",
            "url = \"sim://?seed=3\"",
            "[[node.providers]]",
            "name = \" \"",
            "url = \"sim://?seed=4\"",
        ],
        &[
            "config.toml:19: node.providers[7].name: is empty (write a name such as \"infura\", or remove name to use the url's host)",
            "config.toml:5: node.providers[1].name: \"main\" is also the name of node.providers[0] (give each provider its own name)",
            "config.toml:9: node.providers[3].name: is missing, and its default (the url's host, \"mainnet.infura.io\") is also the name of node.providers[2] (set name = \"...\" in each provider to tell them apart)",
            "config.toml:12: node.providers[4].name: \"mainnet.infura.io\" is also the name of node.providers[2] (give each provider its own name)",
            "config.toml:16: node.providers[6].name: is missing, and its default (the url's host, \"sim\") is also the name of node.providers[5] (set name = \"...\" in each provider to tell them apart)",
        ],
    );
}

/// Each provider's checks run over its inherited keys: a backoff pair split between `[node]` and an entry
/// is reported at the entry's key, a `transport = "http"` of `[node]` at its own line for each `wss://` entry.
#[test]
fn checks_each_provider_over_what_it_inherits() {
    check_errors(
        &[
            "[node]",
            "initial_backoff = \"1m\"",
            "transport = \"http\"",
            "[[node.providers]]",
            "name = \"a\"",
            "url = \"sim://\"",
            "max_backoff = \"10s\"",
            "[[node.providers]]",
            "name = \"b\"",
            "url = \"wss://b.example/ws\"",
            "[[node.providers]]",
            "name = \"c\"",
            "url = \"sim://\"",
            "initial_backoff = \"2m\"",
            "max_backoff = \"90s\"",
        ],
        &[
            "config.toml:7: node.providers[0].max_backoff: 10s is below node.providers[0].initial_backoff (1m) (make initial_backoff at most max_backoff)",
            "config.toml:2: node.initial_backoff: 1m is above node.providers[1].max_backoff (30s) (make initial_backoff at most max_backoff)",
            "config.toml:3: node.transport: \"http\" does not fit a ws:// or wss:// node.providers[1].url (set transport = \"ws\", or give an http(s):// url)",
            "config.toml:14: node.providers[2].initial_backoff: 2m is above node.providers[2].max_backoff (1m 30s) (make initial_backoff at most max_backoff)",
        ],
    );
}

/// A problem in a default of `[node]` is reported once, at `[node]`'s line, however many providers take it.
#[test]
fn a_bad_default_is_reported_once() {
    check_errors(
        &[
            "[node]",
            "max_concurrency = 0",
            "[[node.providers]]",
            "name = \"a\"",
            "url = \"sim://\"",
            "[[node.providers]]",
            "name = \"b\"",
            "url = \"sim://\"",
        ],
        &["config.toml:2: node.max_concurrency: 0 is below the minimum 1 (set it to 1 or more)"],
    );
}
