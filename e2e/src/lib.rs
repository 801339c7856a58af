//! The single-host lab and the end-to-end tests.
//!
//! [`topology`] owns the lab's file format, validation and address plan (pure). [`lab`] builds a
//! topology out of network namespaces with [`dataplane`], tears it down, shows its status, checks
//! connectivity with real packets and measures one pod-to-pod path ([`lab::speed`]), and runs
//! Liqo on real Kubernetes control planes with the test kit's harness ([`testkit`], re-exported
//! as [`k8s`] and [`liqo`]). Both start and stop processes through the project's one
//! supervisor, [`dataplane::supervisor`]. The lab's peering logic is `liqo-peering`'s: the lab
//! only implements its traits. The `liqo-lab` binary is a thin CLI over all of it ([`cli`]: what
//! it shares with `liqo-bench`). The benchmarks are the `liqo-bench` crate's, on top of this one:
//! this crate never depends on it. This crate is test and demo infrastructure: no product daemon
//! depends on it.

pub mod cli;
pub mod lab;
pub mod topology;

// The test kit's harness, where the lab and the e2e tests have always found it.
pub use testkit::{k8s, liqo};
