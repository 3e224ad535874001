//! `sim://` wired to the simulated access service: the binary installs [`start`] in the library's
//! [`logslice::pipeline::simulator`] hook, so a config whose `node.url` is `sim://?<options>` runs against an
//! in-process `devnode` (the README's first command, demos, `bench`). The library itself knows no simulator.

use logslice::pipeline::simulator::{self, Simulated, Starting};

/// Installs the simulated node as what `sim://` starts.
pub fn install() {
    simulator::install(start);
}

/// Starts `devnode` with the options of the `sim://` URL's query string, on a loopback port of its own.
fn start(sim_url: &str) -> Starting {
    let options = devnode::DevNodeConfig::from_sim_url(sim_url);
    Box::pin(async move {
        let node = devnode::DevNode::start(options?)
            .await
            .map_err(|e| format!("cannot start the built-in node: {e}"))?;
        Ok(Simulated {
            http_url: node.http_url(),
            ws_url: node.ws_url(),
            keep_alive: Box::new(node),
        })
    })
}
