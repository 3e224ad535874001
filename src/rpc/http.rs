//! JSON-RPC over HTTP POST (reqwest with rustls/ring). The body is read incrementally up to
//! `max_response_bytes`; reqwest errors are stripped of their URL, which carries the API key.

use tokio::sync::{Semaphore, SemaphorePermit};

use crate::config::SecretUrl;

use super::{ClientOptions, Error};

pub(super) struct HttpTransport {
    client: reqwest::Client,
    url: SecretUrl,
    max_response_bytes: usize,
}

impl HttpTransport {
    pub(super) fn new(url: SecretUrl, options: ClientOptions) -> Result<Self, Error> {
        // reqwest is built with `rustls-no-provider`: ring must be installed before the first client, or
        // building one panics. Installing twice is harmless (the second call returns Err).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(options.max_idle_connections)
            .connect_timeout(options.request_timeout)
            .build()
            .map_err(|e| Error::Connect {
                detail: e.without_url().to_string(),
            })?;
        Ok(Self {
            client,
            url,
            max_response_bytes: options.max_response_bytes,
        })
    }

    /// Posts `body`; once the answer's headers are in, waits for a permit of `answers` and reads the body,
    /// which is returned with the permit (the caller parses it before letting go).
    pub(super) async fn post<'a>(
        &self,
        body: String,
        answers: &'a Semaphore,
    ) -> Result<(Vec<u8>, SemaphorePermit<'a>), Error> {
        let mut response = self
            .client
            .post(self.url.expose().clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .map_err(transport_error)?;
        let status = response.status();
        if status != reqwest::StatusCode::OK {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(std::time::Duration::from_secs);
            return Err(Error::Http {
                status: status.as_u16(),
                retry_after,
            });
        }
        let permit = answers
            .acquire()
            .await
            .expect("the semaphore is never closed");
        // Sized once from Content-Length (bounded by the limit) instead of doubling towards it: a 6 MB
        // answer would otherwise pass through 1, 2, 4 and 8 MB buffers, copying each time.
        let expected = response.content_length().unwrap_or(0);
        let mut body = Vec::with_capacity(expected.min(self.max_response_bytes as u64) as usize);
        while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
            if body.len() + chunk.len() > self.max_response_bytes {
                return Err(Error::TooLarge {
                    limit: self.max_response_bytes,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok((body, permit))
    }
}

fn transport_error(err: reqwest::Error) -> Error {
    let connect = err.is_connect();
    let err = err.without_url();
    // The Display of a reqwest error is terse ("error sending request"); its source says why.
    let mut detail = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        detail.push_str(": ");
        detail.push_str(&cause.to_string());
        source = cause.source();
    }
    if connect {
        Error::Connect { detail }
    } else {
        Error::Dropped { detail }
    }
}
