//! cli (in progress).
