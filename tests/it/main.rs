//! Integration tests: one binary, a module per feature (linked once on a 2-core CI).

mod ops;
mod support;
mod sync;
