//! liqo-netops's integration tests, one binary: the flags (`flags`), and on real API servers (the
//! test kit) under the chart's RBAC: the gateway and route operators with their daemons' files
//! (`operators_k8s`, with `operators/files.rs`) and their release at unpeering (`release_k8s`).
//! Shared helpers in `common`.

mod common;

mod flags;
mod operators_k8s;
mod release_k8s;
