//! Integration tests: one binary, a module per feature (linked once on a 2-core CI).

mod devnode;
mod follow;
mod support;
mod sync;
