//! JSON-RPC over one WebSocket: requests are multiplexed by id; a background task owns the socket.
//!
//! The task keeps partial frames inside tungstenite's stream, so its `select!` only awaits cancel-safe
//! futures (`mpsc::Receiver::recv`, `StreamExt::next`). An answer the client cannot take (over
//! `max_response_bytes`, or not JSON) fails only the request it answers, found by its id
//! ([`super::frames`] keeps an over-size message's first bytes for that), or, without a readable id, by
//! elimination (see [`Pending`]); the connection serves on. When the socket dies, every waiting request
//! fails with [`Error::Dropped`] and the next request reconnects.

use std::collections::{HashMap, HashSet};

use futures::{SinkExt, StreamExt};
use serde::de::IgnoredAny;
use serde::Deserialize;
use tokio::sync::{mpsc, oneshot, Mutex};
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::WebSocketStream;

use crate::config::SecretUrl;

use super::frames::{self, Guarded};
use super::{ClientOptions, Error};

/// Answers without a readable id kept until their request is found (see [`Pending`]).
const MAX_UNATTRIBUTED: usize = 4;

/// A request's answer: the message, or why there is none.
type Answer = Result<Vec<u8>, Error>;
type Reply = oneshot::Sender<Answer>;

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
        let limit = self.options.max_response_bytes;
        let (socket, _) =
            tokio_tungstenite::connect_async_with_config(self.url.expose().as_str(), None, true)
                .await
                .map_err(handshake_error)?;
        // The handshake read the node's HTTP answer and nothing after it (a JSON-RPC node speaks when spoken
        // to), so the stream can be taken back and put behind the guard that keeps over-size answers out.
        // tungstenite's own limits stay as a backstop: past the guard, no message is larger than `limit`
        // (or a marker of a few bytes).
        let mut config = WebSocketConfig::default();
        config.max_message_size = Some(limit.saturating_add(1024));
        config.max_frame_size = Some(limit.saturating_add(1024));
        let socket = WebSocketStream::from_raw_socket(
            Guarded::new(socket.into_inner(), limit),
            Role::Client,
            Some(config),
        )
        .await;
        // Bounded: at most this many requests queue for the socket writer.
        let (sender, receiver) = mpsc::channel(64);
        tokio::spawn(run(socket, receiver, limit));
        *conn = Some(sender.clone());
        Ok(sender)
    }
}

#[derive(Deserialize)]
struct IdOnly {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// The requests waiting for an answer, and the answers that came without a readable id.
///
/// An answer without an id (JSON that does not parse and shows no id in its first bytes, an error object
/// with `id: null`, an over-size message whose first bytes hold no id) answers exactly one of the requests
/// waiting when it came, and a node answers each request once. So each such answer keeps the set of those
/// requests as suspects; a request answered (by id, or by elimination) is struck from every set, and a set
/// left with one request gets the answer. Until then the suspects wait, at most their `request_timeout`:
/// failing them all would fail requests that were answered fine, and an over-size answer would split ranges
/// that were never too large. (A request that timed out stays a suspect: it may be the one.)
#[derive(Default)]
struct Pending {
    replies: HashMap<u64, Reply>,
    unattributed: Vec<(HashSet<u64>, Answer)>,
}

impl Pending {
    fn insert(&mut self, id: u64, reply: Reply) {
        // A caller that timed out dropped its receiver: forget its slot, and every set of suspects with
        // nobody left to answer.
        self.replies.retain(|_, r| !r.is_closed());
        let replies = &self.replies;
        self.unattributed
            .retain(|(suspects, _)| suspects.iter().any(|id| replies.contains_key(id)));
        self.replies.insert(id, reply);
    }

    /// Hands `answer` to request `id` (if it still waits); then to each request found by elimination.
    fn answer(&mut self, id: u64, answer: Answer) {
        if let Some(reply) = self.replies.remove(&id) {
            let _ = reply.send(answer);
        }
        let mut answered = vec![id];
        while let Some(id) = answered.pop() {
            for (suspects, _) in &mut self.unattributed {
                suspects.remove(&id);
            }
            self.unattributed
                .retain(|(suspects, _)| !suspects.is_empty());
            while let Some(at) = self.unattributed.iter().position(|(s, _)| s.len() == 1) {
                let (suspects, answer) = self.unattributed.swap_remove(at);
                let culprit = suspects.into_iter().next().expect("one suspect");
                if let Some(reply) = self.replies.remove(&culprit) {
                    let _ = reply.send(answer);
                }
                answered.push(culprit);
            }
        }
    }

    /// An answer to one of the requests waiting now, not knowing which.
    fn unattributed(&mut self, answer: Answer) {
        let suspects: HashSet<u64> = self.replies.keys().copied().collect();
        if suspects.len() == 1 {
            let culprit = suspects.into_iter().next().expect("one suspect");
            self.answer(culprit, answer);
        } else if !suspects.is_empty() {
            // Each set holds an answer (up to `max_response_bytes`): keep a few; the requests of a set let go
            // of simply wait for their timeout.
            if self.unattributed.len() == MAX_UNATTRIBUTED {
                drop(self.unattributed.remove(0));
            }
            self.unattributed.push((suspects, answer));
        }
    }

    fn fail_all(&mut self, detail: &str) {
        for (_, reply) in self.replies.drain() {
            let _ = reply.send(Err(Error::Dropped {
                detail: detail.to_owned(),
            }));
        }
        self.unattributed.clear();
    }
}

/// Hands one message from the node to the request it answers.
fn deliver(pending: &mut Pending, bytes: Vec<u8>, limit: usize) {
    if let Some(oversize) = frames::oversize(&bytes) {
        tracing::debug!(size = oversize.size, id = ?oversize.id, limit, "over-size answer skipped");
        let error = Err(Error::TooLarge { limit });
        return match oversize.id {
            Some(id) => pending.answer(id, error),
            None => pending.unattributed(error),
        };
    }
    match serde_json::from_slice::<IdOnly>(&bytes) {
        Ok(IdOnly { id: Some(id), .. }) => pending.answer(id, Ok(bytes)),
        // An error for a request the node could not read: one of ours. The request parses it as its answer.
        Ok(IdOnly {
            id: None,
            error: Some(_),
        }) => pending.unattributed(Ok(bytes)),
        // Not an answer (a notification): nobody asked for it.
        Ok(IdOnly {
            id: None,
            error: None,
        }) => {}
        // Not JSON: the request it answers fails parsing it (`Error::Malformed`), found by the id its first
        // bytes show, or by elimination.
        Err(_) => match frames::top_level_id(&bytes[..bytes.len().min(256)]) {
            Some(id) => pending.answer(id, Ok(bytes)),
            None => pending.unattributed(Ok(bytes)),
        },
    }
}

async fn run<S>(socket: WebSocketStream<S>, mut requests: mpsc::Receiver<Outgoing>, limit: usize)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut write, mut read) = socket.split();
    let mut pending = Pending::default();
    let failure = loop {
        tokio::select! {
            request = requests.recv() => {
                let Some(Outgoing { id, text, reply }) = request else { break None };
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
                    Some(Err(e)) => break Some(e.to_string()),
                };
                deliver(&mut pending, bytes, limit);
            }
        }
    };
    pending.fail_all(&failure.unwrap_or_else(|| "websocket closed".into()));
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{json, Value};
    use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;

    use super::super::{Client, ClientOptions, Error};
    use super::*;

    const LIMIT: usize = 4096;

    /// The answer the test node gives a call of `method` with `id`.
    fn answer_for(method: &str, id: u64) -> Message {
        match method {
            "eth_big" => {
                let filler = "a".repeat(LIMIT * 3);
                Message::text(json!({"jsonrpc": "2.0", "id": id, "result": filler}).to_string())
            }
            "eth_big_id_last" => {
                let filler = "a".repeat(LIMIT * 3);
                Message::text(format!(
                    r#"{{"jsonrpc":"2.0","result":"{filler}","id":{id}}}"#
                ))
            }
            "eth_cut" => Message::text(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":[1,2"#)),
            "eth_garbage" => Message::text("%% not json %%"),
            "eth_not_utf8" => {
                let mut bytes = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":""#).into_bytes();
                bytes.extend([0xff, b'"', b'}']);
                Message::Frame(Frame::message(bytes, OpCode::Data(Data::Text), true))
            }
            _ => Message::text(json!({"jsonrpc": "2.0", "id": id, "result": method}).to_string()),
        }
    }

    /// A WebSocket node on loopback that waits for `batch` requests, answers them in the order of
    /// `answer_order` (method names), then answers every later request at once. Returns its URL and the
    /// number of connections it accepted.
    async fn node(
        batch: usize,
        answer_order: &'static [&'static str],
    ) -> (SecretUrl, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::Relaxed);
                tokio::spawn(async move {
                    let mut socket = tokio_tungstenite::accept_async(stream)
                        .await
                        .expect("handshake");
                    let mut waiting: Vec<(String, u64)> = Vec::new();
                    let mut answered_first = false;
                    while let Some(Ok(message)) = socket.next().await {
                        let Message::Text(text) = message else {
                            continue;
                        };
                        let call: Value = serde_json::from_str(text.as_str()).expect("JSON");
                        let method = call["method"].as_str().expect("a method").to_owned();
                        let id = call["id"].as_u64().expect("an id");
                        waiting.push((method, id));
                        if answered_first || waiting.len() == batch {
                            answered_first = true;
                            waiting.sort_by_key(|(method, _)| {
                                answer_order.iter().position(|m| *m == method.as_str())
                            });
                            for (method, id) in waiting.drain(..) {
                                socket.send(answer_for(&method, id)).await.expect("send");
                            }
                        }
                    }
                });
            }
        });
        let url = url::Url::parse(&format!("ws://{addr}/ws/v3/key")).expect("url");
        (SecretUrl::new(url), connections)
    }

    fn client(url: &SecretUrl) -> Client {
        Client::ws(
            url,
            ClientOptions {
                request_timeout: Duration::from_secs(10),
                max_response_bytes: LIMIT,
                max_idle_connections: 1,
            },
        )
    }

    async fn call(client: &Client, method: &'static str) -> Result<String, Error> {
        client.call::<String>(method, json!([])).await
    }

    #[tokio::test]
    async fn an_over_size_answer_fails_only_its_own_request_and_the_connection_serves_on() {
        for big in ["eth_big", "eth_big_id_last"] {
            // The over-size answer comes first, while the others wait.
            let order: &'static [&'static str] = if big == "eth_big" {
                &["eth_big", "eth_one", "eth_two"]
            } else {
                &["eth_big_id_last", "eth_one", "eth_two"]
            };
            let (url, connections) = node(3, order).await;
            let client = client(&url);
            let big: &'static str = order[0];
            let (too_large, one, two) = tokio::join!(
                call(&client, big),
                call(&client, "eth_one"),
                call(&client, "eth_two")
            );
            assert_eq!(too_large, Err(Error::TooLarge { limit: LIMIT }), "{big}");
            assert_eq!(one.as_deref(), Ok("eth_one"), "{big}");
            assert_eq!(two.as_deref(), Ok("eth_two"), "{big}");
            assert_eq!(call(&client, "eth_three").await.as_deref(), Ok("eth_three"));
            assert_eq!(connections.load(Ordering::Relaxed), 1, "{big}: reconnected");
        }
    }

    #[tokio::test]
    async fn an_undecodable_answer_fails_only_the_request_it_answers() {
        // The garbage (no id) comes first: its request is found once the others have their answers.
        let (url, connections) =
            node(4, &["eth_garbage", "eth_cut", "eth_not_utf8", "eth_fine"]).await;
        let client = client(&url);
        let (garbage, cut, not_utf8, fine) = tokio::join!(
            call(&client, "eth_garbage"),
            call(&client, "eth_cut"),
            call(&client, "eth_not_utf8"),
            call(&client, "eth_fine")
        );
        for (what, answer) in [("garbage", garbage), ("cut", cut), ("not utf8", not_utf8)] {
            assert!(
                matches!(answer, Err(Error::Malformed { .. })),
                "{what}: {answer:?}"
            );
        }
        assert_eq!(fine.as_deref(), Ok("eth_fine"));
        assert_eq!(call(&client, "eth_again").await.as_deref(), Ok("eth_again"));
        assert_eq!(connections.load(Ordering::Relaxed), 1, "reconnected");
    }

    /// Without a readable id, an answer goes to the one request no other answer can be (see [`Pending`]).
    #[test]
    fn an_answer_without_an_id_goes_to_the_request_left_by_elimination() {
        let mut pending = Pending::default();
        let mut answers: Vec<oneshot::Receiver<Answer>> = Vec::new();
        for id in 1..=3 {
            let (reply, answer) = oneshot::channel();
            pending.insert(id, reply);
            answers.push(answer);
        }
        pending.unattributed(Err(Error::TooLarge { limit: 1 }));
        pending.answer(3, Ok(b"three".to_vec()));
        assert!(answers[0].try_recv().is_err(), "1 and 2 are both suspects");
        pending.answer(1, Ok(b"one".to_vec()));
        assert_eq!(answers[0].try_recv(), Ok(Ok(b"one".to_vec())));
        assert_eq!(answers[1].try_recv(), Ok(Err(Error::TooLarge { limit: 1 })));
        assert_eq!(answers[2].try_recv(), Ok(Ok(b"three".to_vec())));
        assert!(pending.unattributed.is_empty());
    }
}
