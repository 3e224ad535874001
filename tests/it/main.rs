//! Integration tests.
mod devnode;
