//! URLs that carry secrets (an API key in the path, a password in the userinfo), redacted when shown.
//!
//! Redaction is a pure function of the URL; it does not know which provider a URL belongs to, so it errs on
//! the side of hiding: any long token-like path segment is hidden, not only the one after `/v3/`.

/// What replaces a secret.
const MASK: &str = "****";

/// Path segments at least this long, made only of `[A-Za-z0-9_-]`, look like API keys (Alchemy `/v2/<key>`,
/// QuickNode `/<key>/`, ...): 16 chars is shorter than every provider key we know of and longer than
/// ordinary path words.
const MIN_KEY_LEN: usize = 16;

/// A URL whose `Display` and `Debug` never show the API key (the path segment after `/v3/` or `/ws/v3/`,
/// or any path segment after the first when it looks like a key), the password, or query values.
/// The transport calls [`SecretUrl::expose`]; nothing else should.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretUrl(url::Url);

impl SecretUrl {
    /// Wraps a parsed URL.
    pub fn new(url: url::Url) -> Self {
        Self(url)
    }

    /// The real URL, for the transport only.
    pub fn expose(&self) -> &url::Url {
        &self.0
    }

    /// The redacted form, as `Display` shows it: scheme, username, host, port and ordinary path segments
    /// kept; the password, the segment after `v3` (`/v3/<KEY>`, `/ws/v3/<KEY>`), every other key-like path
    /// segment (16 or more of `[A-Za-z0-9_-]`), every query value and any fragment replaced by `****`.
    pub fn redacted(&self) -> String {
        let mut url = self.0.clone();
        if url.cannot_be_a_base() {
            // No structure to keep (e.g. `mailto:`): show the scheme only.
            return format!("{}:{MASK}", url.scheme());
        }
        if url.password().is_some() {
            // Only fails for URLs without a host, which have no password either.
            let _ = url.set_password(Some(MASK));
        }
        // `None` for an empty path (`postgres://host`): nothing to hide, and setting one would add a `/`.
        if let Some(segments) = url
            .path_segments()
            .map(|segments| segments.map(str::to_owned).collect::<Vec<String>>())
        {
            let redacted_segments: Vec<&str> = segments
                .iter()
                .enumerate()
                .map(|(segment_idx, segment)| {
                    let after_v3 = segment_idx > 0 && segments[segment_idx - 1] == "v3";
                    if after_v3 || looks_like_key(segment) {
                        MASK
                    } else {
                        segment.as_str()
                    }
                })
                .collect();
            url.set_path(&format!("/{}", redacted_segments.join("/")));
        }
        if url.query().is_some() {
            let keys: Vec<String> = url.query_pairs().map(|(key, _)| key.into_owned()).collect();
            let query: Vec<String> = keys.iter().map(|key| format!("{key}={MASK}")).collect();
            url.set_query(Some(&query.join("&")));
        }
        if url.fragment().is_some() {
            url.set_fragment(Some(MASK));
        }
        url.to_string()
    }
}

impl std::fmt::Display for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl std::fmt::Debug for SecretUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SecretUrl({})", self.redacted())
    }
}

/// Whether a path segment looks like an API key.
fn looks_like_key(segment: &str) -> bool {
    segment.len() >= MIN_KEY_LEN
        && segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: &str) {
        let secret = SecretUrl::new(url::Url::parse(input).unwrap());
        assert_eq!(secret.redacted(), expected, "{input}");
        assert_eq!(secret.to_string(), expected);
        assert_eq!(format!("{secret:?}"), format!("SecretUrl({expected})"));
    }

    #[test]
    fn redacts_keys_passwords_and_query_values() {
        check(
            "https://node.example/v3/SECRET-KEY-xyz123456789",
            "https://node.example/v3/****",
        );
        check(
            "https://node.example/v3/abc",
            "https://node.example/v3/****",
        );
        check(
            "wss://node.example/ws/v3/abc",
            "wss://node.example/ws/v3/****",
        );
        check(
            "https://node.example:8545/v3/k/extra",
            "https://node.example:8545/v3/****/extra",
        );
        check(
            "https://eth-mainnet.g.alchemy.com/v2/AbCdEf0123456789_-xyz",
            "https://eth-mainnet.g.alchemy.com/v2/****",
        );
        check("http://127.0.0.1:8545/", "http://127.0.0.1:8545/");
        check("http://127.0.0.1:8545", "http://127.0.0.1:8545/");
        check(
            "https://node.example/rpc?apikey=hunter2&x=1",
            "https://node.example/rpc?apikey=****&x=****",
        );
        check(
            "postgres://indexer:s3cret-pass@db.example:5432/logslice?sslmode=require",
            "postgres://indexer:****@db.example:5432/logslice?sslmode=****",
        );
        check(
            "postgres://indexer@db.example/logslice",
            "postgres://indexer@db.example/logslice",
        );
        check(
            "postgres://indexer:pw@db.example",
            "postgres://indexer:****@db.example",
        );
        check("https://node.example/#frag", "https://node.example/#****");
    }
}
