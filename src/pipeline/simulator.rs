//! How `sim://` reaches a simulated node: the library knows no simulator; a binary that has one installs a
//! [`StartSimulator`] once at start-up (`logslice`'s does, with the `devnode` crate, under its default
//! feature `sim`), and [`super::Node::connect`] calls it for a `sim://` endpoint.
//!
//! Without one installed, `sim://` is a configuration error naming the missing feature, never a panic.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;
use std::sync::OnceLock;

/// A simulated node that has started: where it listens, and what keeps it running.
pub struct Simulated {
    /// Its JSON-RPC over HTTP URL (`http://127.0.0.1:<port>/v3/<key>`).
    pub http_url: String,
    /// Its WebSocket URL (`ws://127.0.0.1:<port>/ws/v3/<key>`).
    pub ws_url: String,
    /// Held for as long as the node is used: the simulator stops when it is dropped.
    pub keep_alive: Box<dyn Any + Send + Sync>,
}

/// What starting a simulated node returns: the node, or a message for the user (a bad `sim://` option,
/// a port that cannot be bound) that [`super::Node::connect`] reports under `node.url`.
pub type Starting = Pin<Box<dyn Future<Output = Result<Simulated, String>> + Send>>;

/// Starts a simulated node from the whole `sim://...` URL (its query string holds the simulator's options).
pub type StartSimulator = fn(&str) -> Starting;

static SIMULATOR: OnceLock<StartSimulator> = OnceLock::new();

/// Installs the simulator `sim://` starts. The first installation wins; later ones are ignored (tests of one
/// process install the same function from several places).
pub fn install(start: StartSimulator) {
    let _ = SIMULATOR.set(start);
}

/// Starts the installed simulator for `sim_url`.
///
/// # Errors
/// A message for `node.url`: no simulator in this build, a bad option, or a node that could not start.
pub(super) async fn start(sim_url: &str) -> Result<Simulated, String> {
    let Some(start) = SIMULATOR.get() else {
        return Err(
            "sim:// needs the built-in simulated node, which this build leaves out (build logslice with its \
             default feature `sim`, or point node.url at a real node)"
                .to_owned(),
        );
    };
    start(sim_url).await
}
