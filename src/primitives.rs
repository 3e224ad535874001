//! primitives (in progress).
