//! Node URLs: parsing one (`sim://`, or a URL of the allowed schemes with a host), the WebSocket URL of an
//! HTTP one, and a provider's default name.

use super::check::{Checker, Setting};
use super::{Endpoint, SecretUrl};

/// A provider's name when it has none: the URL's host, `sim` for the built-in node.
pub(super) fn default_name(endpoint: &Endpoint) -> String {
    match endpoint {
        Endpoint::Sim(_) => "sim".to_owned(),
        Endpoint::Url(url) => url.expose().host_str().unwrap_or("node").to_owned(),
    }
}

/// Parses a node URL whose scheme is one of `schemes` (or `sim://`). Messages show the scheme or the redacted
/// URL, never the text: it may hold a key written inline.
pub(super) fn parse_endpoint(
    checker: &mut Checker<'_>,
    field: &str,
    setting: &Setting,
    schemes: &[&str],
) -> Option<Endpoint> {
    if setting.value.starts_with("sim://") {
        return Some(Endpoint::Sim(setting.value.clone()));
    }
    let at = Some(&setting.span);
    let fix = format!(
        "write sim:// or a URL starting with {}://",
        schemes.join("://, ")
    );
    match url::Url::parse(&setting.value) {
        Ok(url) if !schemes.contains(&url.scheme()) => {
            checker.error(
                at,
                field,
                format!("scheme \"{}\" is not supported here", url.scheme()),
                fix,
            );
            None
        }
        Ok(url) if url.host_str().is_none_or(str::is_empty) => {
            checker.error(
                at,
                field,
                format!("{} has no host", SecretUrl::new(url)),
                fix,
            );
            None
        }
        Ok(url) => Some(Endpoint::Url(SecretUrl::new(url))),
        Err(err) => {
            checker.error(at, field, format!("is not a valid URL ({err})"), fix);
            None
        }
    }
}

/// The WebSocket URL of an HTTP one: http -> ws, https -> wss, `/v3/` -> `/ws/v3/` (the access
/// service's URL layout).
pub(super) fn derive_ws_url(url: &SecretUrl) -> SecretUrl {
    let mut ws = url.expose().clone();
    let scheme = match ws.scheme() {
        "http" => "ws",
        "https" => "wss",
        other => other,
    }
    .to_owned();
    // Both are special schemes, so the change is allowed.
    let _ = ws.set_scheme(&scheme);
    let path = ws.path().to_owned();
    if !path.contains("/ws/v3/") {
        if let Some(v3_idx) = path.find("/v3/") {
            ws.set_path(&format!("{}/ws{}", &path[..v3_idx], &path[v3_idx..]));
        }
    }
    SecretUrl::new(ws)
}
