//! Integration tests: one binary, a module per feature (linked once on a 2-core CI).

mod devnode;
mod support;
mod sync;
