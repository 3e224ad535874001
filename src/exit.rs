//! exit (in progress).
