//! The HTTP and WebSocket front: routes, API-key check, request-level faults, a node that goes down, graceful
//! shutdown.
//!
//! `POST /v3/{key}` and `GET /ws/v3/{key}` (WebSocket) answer JSON-RPC through [`Service`]; `GET /stats` serves
//! the counters. A wrong key is refused with 401 before any upgrade; an unknown path is 404 and a wrong method
//! 405, both with a JSON-RPC error body. Work per request is bounded by the modelled query budget (a range is
//! refused before scanning when its block count alone exceeds it), so it runs inline on the runtime.
//! While [`DevNode::set_down`] says so, requests get no answer at all: their connection is dropped, or left
//! hanging. The node and each of its providers ([`super::Provider`]) are served by this front, each with a
//! [`Shared`] of its own over the one chain.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::IgnoredAny;
use serde_json::Value;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::credits::Meter;
use super::faults;
use super::rpc::{rate_limit_error, write_error, RpcError, Service};
use super::stats::Calls;
use super::view::Lag;
use super::DevNode;

/// Largest request body accepted (a 5,000-address filter is about 250 KB).
const MAX_BODY_BYTES: usize = 16 * 1024 * 1024;

/// State shared by every connection of one endpoint (the node, or one provider).
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) service: Service,
    /// Counts HTTP requests and WebSocket messages; the fault decisions are keyed on it.
    pub(crate) seq: AtomicU64,
    /// `max_rps` and `max_cps`, when either is set.
    pub(crate) meter: Option<Meter>,
    /// Fired by `shutdown`: the server stops accepting and open WebSockets close.
    pub(crate) shutdown: CancellationToken,
    /// Whether requests are answered ([`DevNode::set_down`]).
    pub(crate) down: watch::Sender<Down>,
    /// How many blocks behind the true head every request is served (`lag_blocks`, `set_lag`).
    pub(crate) lag_blocks: AtomicU64,
}

impl Shared {
    /// An endpoint serving `service`, up, with its faults' limits and lag.
    pub(crate) fn new(service: Service, shutdown: CancellationToken) -> Self {
        Self {
            meter: Meter::of(&service.cfg.faults),
            lag_blocks: AtomicU64::new(service.cfg.faults.lag_blocks),
            service,
            seq: AtomicU64::new(0),
            shutdown,
            down: watch::Sender::new(Down::Up),
        }
    }

    /// The lag of a request whose backend lags `backend` blocks (the `fault_lag` fault).
    fn lag(&self, backend: u64) -> Lag {
        Lag {
            behind: self.lag_blocks.load(Ordering::Relaxed),
            backend,
        }
    }

    /// Whether the request `body` fits `max_rps` and `max_cps` now; counts a refusal.
    fn admitted(&self, body: &[u8]) -> bool {
        let Some(meter) = &self.meter else {
            return true;
        };
        match meter.admit(body) {
            Ok(()) => true,
            Err(over) => {
                self.service.stats.over_limit(over);
                false
            }
        }
    }
}

/// Serves `shared`'s routes on `listener` until its shutdown token fires (open HTTP requests finish first).
pub(crate) fn spawn(listener: tokio::net::TcpListener, shared: Arc<Shared>) -> JoinHandle<()> {
    let shutdown = shared.shutdown.clone();
    let app = router(shared);
    tokio::spawn(async move {
        let serving = axum::serve(listener, app).with_graceful_shutdown(shutdown.cancelled_owned());
        if let Err(err) = serving.await {
            tracing::error!(cause = %err, "devnode server failed");
        }
    })
}

/// Whether the devnode answers, for tests of a node that goes away or fails ([`DevNode::set_down`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Down {
    /// Serving.
    #[default]
    Up,
    /// Every request's connection is dropped before any answer (a crashed node behind a load balancer):
    /// the client sees the connection close.
    Refuse,
    /// Requests are never answered (a node stuck mid-request): the client waits for its own timeout. When
    /// the node is up again, their connections are dropped.
    Hang,
    /// Every request is answered with this HTTP status: 429 with `Retry-After` and a rate-limit body (a
    /// key over its budget), 5xx with a plain body (a provider's outage). Over WebSocket: a `-32005` rate
    /// limit or a `-32603` error.
    Status(u16),
    /// Every call is answered with a JSON-RPC `-32603` "internal error" (HTTP 200): a backend failing
    /// behind a healthy front.
    RpcErrors,
}

impl DevNode {
    /// Stops answering or fails every request (see [`Down`]), or serves again (`Down::Up`), from the next
    /// request on. Requests refused, left hanging or failed are counted in [`super::StatsSnapshot`]
    /// (`refused_while_down`, `hung_while_down`, `failed_while_down`), not as served.
    pub fn set_down(&self, down: Down) {
        self.shared.down.send_replace(down);
    }
}

/// What the node does with a request arriving now while it is down.
enum Outage {
    /// Serve it.
    Serve,
    /// Drop its connection (after any hanging is over).
    Drop,
    /// Answer this HTTP status.
    Status(u16),
    /// Answer every call with `-32603`.
    RpcErrors,
}

/// What the node does with a request arriving now.
async fn outage(shared: &Shared) -> Outage {
    let mut down = shared.down.subscribe();
    let mode = *down.borrow_and_update();
    match mode {
        Down::Up => return Outage::Serve,
        Down::Refuse => shared.service.stats.refused_while_down(),
        Down::Hang => {
            shared.service.stats.hung_while_down();
            tokio::select! {
                _ = down.wait_for(|mode| *mode != Down::Hang) => {}
                () = shared.shutdown.cancelled() => {}
            }
        }
        Down::Status(status) => {
            shared.service.stats.failed_while_down();
            return Outage::Status(status);
        }
        Down::RpcErrors => {
            shared.service.stats.failed_while_down();
            return Outage::RpcErrors;
        }
    }
    Outage::Drop
}

/// An HTTP status with a plain body (429 goes through [`too_many_requests`]).
fn plain_status(shared: &Shared, status: u16) -> Response {
    shared.service.stats.status(status);
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = Response::new(Body::from(status.canonical_reason().unwrap_or("error")));
    *response.status_mut() = status;
    response
}

/// A response that makes hyper abort the connection before any of it is read: its body fails at once.
fn dropped_connection() -> Response {
    let failure: [Result<Bytes, std::io::Error>; 1] = [Err(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "devnode: down",
    ))];
    Response::new(Body::from_stream(futures::stream::iter(failure)))
}

/// The calls in a request body: the items of a batch, else one.
fn calls(body: &[u8]) -> Calls {
    if body.trim_ascii_start().first() == Some(&b'[') {
        if let Ok(calls) = serde_json::from_slice::<Vec<IgnoredAny>>(body) {
            return Calls::Batch(calls.len() as u64);
        }
    }
    Calls::Single
}

/// The devnode's routes.
pub(crate) fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/v3/{key}", post(http_rpc).fallback(method_not_allowed))
        .route("/ws/v3/{key}", get(ws_rpc).fallback(method_not_allowed))
        .route("/stats", get(stats))
        .fallback(not_found)
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(shared)
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(shared: &Shared, status: StatusCode, error: &RpcError) -> Response {
    shared.service.stats.status(status.as_u16());
    let mut body = Vec::new();
    write_error(&mut body, &Value::Null, error);
    json_response(status, body)
}

fn too_many_requests(shared: &Shared, body: &[u8]) -> Response {
    let retry_after = shared.service.cfg.faults.retry_after_secs;
    shared.service.stats.rate_limited();
    shared.service.stats.status(429);
    let body = shared
        .service
        .error_for_body(body, &rate_limit_error(retry_after));
    let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, body);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    response
}

fn unauthorized(shared: &Shared) -> Response {
    error_response(
        shared,
        StatusCode::UNAUTHORIZED,
        &RpcError::new(-32001, "invalid project id"),
    )
}

async fn not_found(State(shared): State<Arc<Shared>>) -> Response {
    error_response(
        &shared,
        StatusCode::NOT_FOUND,
        &RpcError::new(-32601, "not found"),
    )
}

async fn method_not_allowed(State(shared): State<Arc<Shared>>) -> Response {
    let mut response = error_response(
        &shared,
        StatusCode::METHOD_NOT_ALLOWED,
        &RpcError::new(-32600, "method not allowed"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    response
}

async fn stats(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.service.stats.snapshot()).into_response()
}

async fn http_rpc(
    State(shared): State<Arc<Shared>>,
    Path(key): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let failing = outage(&shared).await;
    if matches!(failing, Outage::Status(_) | Outage::RpcErrors) {
        // Counted in the calls per second: what a client sends during an outage is measured too.
        shared.service.stats.arrived(calls(&body));
    }
    match failing {
        Outage::Serve => {}
        Outage::Drop => return dropped_connection(),
        Outage::Status(429) => return too_many_requests(&shared, &body),
        Outage::Status(status) => return plain_status(&shared, status),
        Outage::RpcErrors => {
            let error = RpcError::new(-32603, "internal error");
            return json_response(StatusCode::OK, shared.service.error_for_body(&body, &error));
        }
    }
    let stats = &shared.service.stats;
    stats.http_request();
    if key != shared.service.cfg.key {
        return unauthorized(&shared);
    }
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    if content_type.is_some_and(|ct| !ct.starts_with("application/json")) {
        let error = RpcError::new(
            -32600,
            "invalid content type, only application/json is supported",
        );
        return error_response(&shared, StatusCode::UNSUPPORTED_MEDIA_TYPE, &error);
    }
    stats.arrived(calls(&body));
    let seq = shared.seq.fetch_add(1, Ordering::Relaxed);
    if !shared.admitted(&body) {
        return too_many_requests(&shared, &body);
    }
    let cfg = &shared.service.cfg;
    let decided = faults::for_request(cfg.seed, seq, &cfg.faults);
    if !decided.delay.is_zero() {
        tokio::time::sleep(decided.delay).await;
    }
    match decided.status {
        Some(429) => return too_many_requests(&shared, &body),
        Some(status) => return plain_status(&shared, status),
        None => {}
    }
    let answer = shared
        .service
        .handle_body(&body, seq, shared.lag(decided.lag));
    stats.status(200);
    if decided.drop {
        stats.dropped();
        return dropped_midway(answer);
    }
    json_response(StatusCode::OK, answer)
}

/// A 200 whose body stops after half of `answer`: the stream errors, so hyper aborts the connection and the
/// client sees an incomplete body (chunked encoding never terminated).
fn dropped_midway(answer: Vec<u8>) -> Response {
    let mut first = answer;
    first.truncate(first.len() / 2);
    let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
        Ok(Bytes::from(first)),
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "devnode: connection dropped by fault",
        )),
    ];
    let mut response = Response::new(Body::from_stream(futures::stream::iter(chunks)));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

async fn ws_rpc(
    State(shared): State<Arc<Shared>>,
    Path(key): Path<String>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    match outage(&shared).await {
        Outage::Serve => {}
        Outage::Drop => return dropped_connection(),
        Outage::Status(429) => return too_many_requests(&shared, &[]),
        Outage::Status(status) => return plain_status(&shared, status),
        // The upgrade goes through: the calls get the errors (`ws_answer`).
        Outage::RpcErrors => {}
    }
    shared.service.stats.http_request();
    if key != shared.service.cfg.key {
        return unauthorized(&shared);
    }
    match upgrade {
        Ok(upgrade) => {
            shared.service.stats.status(101);
            upgrade.on_upgrade(move |socket| ws_session(shared, socket))
        }
        Err(rejection) => rejection.into_response(),
    }
}

/// Serves one WebSocket: each text (or binary) message is a request; request-level faults become JSON-RPC
/// errors (429 -> `-32005` rate limit, 5xx -> `-32603`) or a closed socket (drop).
async fn ws_session(shared: Arc<Shared>, mut socket: WebSocket) {
    loop {
        // Both branches are cancel-safe: `recv` keeps partial frames inside the WebSocket.
        let message = tokio::select! {
            () = shared.shutdown.cancelled() => break,
            message = socket.recv() => message,
        };
        let body: Bytes = match message {
            Some(Ok(Message::Text(text))) => Bytes::copy_from_slice(text.as_str().as_bytes()),
            Some(Ok(Message::Binary(bytes))) => bytes,
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Ok(Message::Close(_)) | Err(_)) | None => break,
        };
        let Some(answer) = ws_answer(&shared, &body).await else {
            break;
        };
        // A JSON-RPC answer is valid UTF-8: it is built from ASCII and serde_json-escaped strings.
        let Ok(text) = String::from_utf8(answer) else {
            break;
        };
        if socket.send(Message::Text(text.into())).await.is_err() {
            break;
        }
    }
}

/// The answer to one WebSocket message, or `None` to drop the connection.
async fn ws_answer(shared: &Shared, body: &[u8]) -> Option<Vec<u8>> {
    let service = &shared.service;
    match outage(shared).await {
        Outage::Serve => {}
        Outage::Drop => return None,
        Outage::Status(429) => {
            service.stats.rate_limited();
            let error = rate_limit_error(service.cfg.faults.retry_after_secs);
            return Some(service.error_for_body(body, &error));
        }
        Outage::Status(_) | Outage::RpcErrors => {
            return Some(service.error_for_body(body, &RpcError::new(-32603, "internal error")))
        }
    }
    service.stats.ws_message();
    service.stats.arrived(calls(body));
    let seq = shared.seq.fetch_add(1, Ordering::Relaxed);
    let cfg = &service.cfg;
    if !shared.admitted(body) {
        service.stats.rate_limited();
        return Some(service.error_for_body(body, &rate_limit_error(cfg.faults.retry_after_secs)));
    }
    let decided = faults::for_request(cfg.seed, seq, &cfg.faults);
    if !decided.delay.is_zero() {
        tokio::time::sleep(decided.delay).await;
    }
    match decided.status {
        Some(429) => {
            service.stats.rate_limited();
            return Some(
                service.error_for_body(body, &rate_limit_error(cfg.faults.retry_after_secs)),
            );
        }
        Some(_) => {
            return Some(service.error_for_body(body, &RpcError::new(-32603, "internal error")))
        }
        None => {}
    }
    if decided.drop {
        service.stats.dropped();
        return None;
    }
    Some(service.handle_body(body, seq, shared.lag(decided.lag)))
}
