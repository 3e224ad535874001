//! sink (in progress).
