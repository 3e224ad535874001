//! rpc (in progress).
