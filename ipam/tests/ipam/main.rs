//! The ipam crate's integration tests, one binary: the liqo-ipam service over gRPC (`service`),
//! its TLS, tokens and client certificates (`security`), and its configuration reload
//! (`reload`). Shared helpers in `common`.

mod common;

mod reload;
mod security;
mod service;
