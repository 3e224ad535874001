//! fetch (in progress).
