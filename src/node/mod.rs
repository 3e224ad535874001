//! Everything about talking to the providers of a chain: each provider's client, its learned rate
//! (`rate`), its concurrency, its breaker (`breaker`) and its head ([`Provider`]); the gate every
//! request passes, which picks a provider, retries and fails over ([`Gate`]); batches of calls within the
//! rate ([`Batches`]).
//!
//! What a request means (which logs, which range) is the caller's: `fetch` plans `eth_getLogs`,
//! `pipeline` asks for heads, headers and finality. Nothing here looks inside an answer but its error
//! class and, for heads, the number.

mod attempts;
mod batches;
mod breaker;
mod error;
mod gate;
mod provider;
mod rate;

pub use batches::Batches;
pub use breaker::State;
pub use error::Error;
pub use gate::{Call, Gate, GateStats, OnSplit};
pub use provider::{Limits, Provider, ProviderSnapshot, ProviderStats};
