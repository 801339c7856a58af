//! The control crate's integration tests, one binary: the generated CRDs are fresh (`crds_fresh`),
//! objects round-trip (`roundtrip`, with `fixtures/`), schemas (`schema`) and validation
//! (`validation`). Shared helpers in `common`.

mod common;

mod crds_fresh;
mod roundtrip;
mod schema;
mod validation;
