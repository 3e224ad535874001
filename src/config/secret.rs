//! URLs that carry secrets (an API key in the path, a password in the userinfo), redacted when shown.

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

    /// The redacted form, as `Display` shows it.
    pub fn redacted(&self) -> String {
        todo!("SecretUrl::redacted")
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
