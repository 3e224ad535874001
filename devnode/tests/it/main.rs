//! The simulated access service from outside: its answers over real sockets, checked against the spec's
//! shapes and its own ground truth. One test binary, a module per feature.

mod factory;
mod limits;
mod providers;
mod serve;
mod tx;
