//! JSON-RPC over HTTP POST (reqwest with rustls/ring). The body is read incrementally up to
//! `max_response_bytes`; reqwest errors are stripped of their URL, which carries the API key.

use tokio::sync::MutexGuard;

use crate::config::SecretUrl;

use super::{AnswerSlot, ClientOptions, Error, MAX_KEPT_ANSWER_BYTES};

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

    /// Posts `body`; once the answer's headers are in, waits for `answers` and reads the body into its
    /// buffer, which the caller parses before letting go.
    pub(super) async fn post<'a>(
        &self,
        body: String,
        answers: &'a AnswerSlot,
    ) -> Result<Answer<'a>, Error> {
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
        let mut answer = Answer(answers.lock().await);
        let body = &mut answer.0;
        body.clear();
        // Sized from Content-Length (bounded by the limit) instead of doubling towards it: a 6 MB answer
        // would otherwise pass through 1, 2, 4 and 8 MB buffers, copying each time. The buffer is kept from
        // the answers before, so this seldom allocates.
        let expected = response.content_length().unwrap_or(0);
        body.reserve(expected.min(self.max_response_bytes as u64) as usize);
        while let Some(chunk) = response.chunk().await.map_err(transport_error)? {
            if body.len() + chunk.len() > self.max_response_bytes {
                return Err(Error::TooLarge {
                    limit: self.max_response_bytes,
                });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(answer)
    }
}

/// An answer's body, in the client's one answer buffer, held until it is parsed.
pub(super) struct Answer<'a>(MutexGuard<'a, Vec<u8>>);

impl Answer<'_> {
    pub(super) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        if self.0.capacity() > MAX_KEPT_ANSWER_BYTES {
            *self.0 = Vec::new();
        }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::primitives::BlockRange;
    use crate::rpc::{AnswerSlot, Blocks, Client, ClientOptions, LogFilter, MAX_KEPT_ANSWER_BYTES};
    use devnode::{DevNode, DevNodeConfig};

    #[tokio::test]
    async fn every_answer_is_read_into_the_one_buffer_and_parsed_whole() {
        let node = DevNode::start(DevNodeConfig::default()).await.unwrap();
        let url = crate::config::SecretUrl::new(node.http_url().parse().unwrap());
        let options = ClientOptions {
            request_timeout: Duration::from_secs(30),
            max_response_bytes: 32 << 20,
            max_idle_connections: 1,
        };
        let client = Client::http(&url, options).unwrap();
        let logs = |start, end| LogFilter {
            blocks: Blocks::Range(BlockRange::new(start, end).unwrap()),
            addresses: Vec::new(),
            topic0: None,
            indexed: [None, None, None],
        };
        let first = client.get_logs(&logs(1000, 1200)).await.unwrap();
        let buffer = |client: &Client| {
            let slot = client.answers.try_lock().expect("no answer is being read");
            (slot.as_ptr(), slot.capacity(), slot.len())
        };
        let (at, capacity, len) = buffer(&client);
        assert!(
            len > 0 && capacity >= len,
            "the answer's bytes stay for the next"
        );
        let smaller = client.get_logs(&logs(1000, 1100)).await.unwrap();
        assert_eq!(buffer(&client).0, at, "read into the same buffer");
        // Both answers parsed whole: the smaller range's logs are the first ones of the larger.
        assert!(!smaller.is_empty() && smaller.len() < first.len());
        assert_eq!(smaller[..], first[..smaller.len()]);
        assert!(first
            .iter()
            .all(|l| (1000..=1200).contains(&l.block_number)));
    }

    #[test]
    fn an_outsize_buffer_is_let_go_and_a_usual_one_kept() {
        let slot = AnswerSlot::new(Vec::with_capacity(MAX_KEPT_ANSWER_BYTES + 1));
        drop(super::Answer(slot.try_lock().unwrap()));
        assert_eq!(slot.try_lock().unwrap().capacity(), 0);
        let slot = AnswerSlot::new(Vec::with_capacity(MAX_KEPT_ANSWER_BYTES));
        drop(super::Answer(slot.try_lock().unwrap()));
        assert_eq!(slot.try_lock().unwrap().capacity(), MAX_KEPT_ANSWER_BYTES);
    }
}
