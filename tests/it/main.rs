//! Integration tests.

mod pg;
mod postgres_sink;
