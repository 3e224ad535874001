//! JSON-RPC over one WebSocket: requests are multiplexed by id; a background task owns the socket.
//!
//! The task keeps partial frames inside tungstenite's stream, so its `select!` only awaits cancel-safe
//! futures (`mpsc::Receiver::recv`, `StreamExt::next`). When the socket dies, every waiting request fails
//! with [`Error::Dropped`] and the next request reconnects.

use std::collections::HashMap;

use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio_tungstenite::tungstenite::{self, protocol::WebSocketConfig, Message};

use crate::config::SecretUrl;

use super::{ClientOptions, Error};

type Reply = oneshot::Sender<Result<Vec<u8>, Error>>;

struct Outgoing {
    id: u64,
    text: String,
    reply: Reply,
}

pub(super) struct WsTransport {
    url: SecretUrl,
    options: ClientOptions,
    /// The live connection's request queue; `None` or closed means "connect on next request".
    conn: Mutex<Option<mpsc::Sender<Outgoing>>>,
}

impl WsTransport {
    pub(super) fn new(url: SecretUrl, options: ClientOptions) -> Self {
        Self {
            url,
            options,
            conn: Mutex::new(None),
        }
    }

    pub(super) async fn request(&self, id: u64, text: String) -> Result<Vec<u8>, Error> {
        let sender = self.connection().await?;
        let (reply, answer) = oneshot::channel();
        sender
            .send(Outgoing { id, text, reply })
            .await
            .map_err(|_| Error::Dropped {
                detail: "websocket closed".into(),
            })?;
        answer.await.map_err(|_| Error::Dropped {
            detail: "websocket closed".into(),
        })?
    }

    async fn connection(&self) -> Result<mpsc::Sender<Outgoing>, Error> {
        let mut conn = self.conn.lock().await;
        if let Some(sender) = conn.as_ref().filter(|s| !s.is_closed()) {
            return Ok(sender.clone());
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(self.options.max_response_bytes);
        config.max_frame_size = Some(self.options.max_response_bytes);
        let (socket, _) = tokio_tungstenite::connect_async_with_config(
            self.url.expose().as_str(),
            Some(config),
            true,
        )
        .await
        .map_err(handshake_error)?;
        // Bounded: at most this many requests queue for the socket writer.
        let (sender, receiver) = mpsc::channel(64);
        tokio::spawn(run(socket, receiver, self.options.max_response_bytes));
        *conn = Some(sender.clone());
        Ok(sender)
    }
}

#[derive(Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<u64>,
}

async fn run<S>(
    socket: tokio_tungstenite::WebSocketStream<S>,
    mut requests: mpsc::Receiver<Outgoing>,
    limit: usize,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut write, mut read) = socket.split();
    let mut pending: HashMap<u64, Reply> = HashMap::new();
    let failure = loop {
        tokio::select! {
            request = requests.recv() => {
                let Some(Outgoing { id, text, reply }) = request else { break None };
                // A caller that timed out dropped its receiver; forget its slot.
                pending.retain(|_, r| !r.is_closed());
                pending.insert(id, reply);
                if let Err(e) = write.send(Message::text(text)).await {
                    break Some(e.to_string());
                }
            }
            message = read.next() => {
                let bytes = match message {
                    Some(Ok(Message::Text(text))) => text.as_bytes().to_vec(),
                    Some(Ok(Message::Binary(bytes))) => bytes.to_vec(),
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                    Some(Ok(Message::Close(_))) | None => break Some("closed by the node".into()),
                    Some(Err(tungstenite::Error::Capacity(_))) => {
                        for (_, reply) in pending.drain() {
                            let _ = reply.send(Err(Error::TooLarge { limit }));
                        }
                        break None;
                    }
                    Some(Err(e)) => break Some(e.to_string()),
                };
                if let Ok(IdOnly { id: Some(id) }) = serde_json::from_slice::<IdOnly>(&bytes) {
                    if let Some(reply) = pending.remove(&id) {
                        let _ = reply.send(Ok(bytes));
                    }
                }
            }
        }
    };
    let detail = failure.unwrap_or_else(|| "websocket closed".into());
    for (_, reply) in pending.drain() {
        let _ = reply.send(Err(Error::Dropped {
            detail: detail.clone(),
        }));
    }
}

fn handshake_error(err: tungstenite::Error) -> Error {
    match err {
        tungstenite::Error::Http(response) => Error::Http {
            status: response.status().as_u16(),
            retry_after: None,
        },
        tungstenite::Error::Io(e) => Error::Connect {
            detail: e.to_string(),
        },
        // Other handshake failures (TLS, protocol) never include the URL in their Display.
        other => Error::Connect {
            detail: other.to_string(),
        },
    }
}
