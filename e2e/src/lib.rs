//! The single-host lab and the end-to-end tests.
//!
//! [`topology`] owns the lab's file format, validation and address plan (pure). [`lab`] builds a
//! topology out of network namespaces with [`dataplane`], tears it down, shows its status and
//! checks connectivity with real packets. The `liqo-lab` binary is a thin CLI over both. This
//! crate is test and demo infrastructure: no product daemon depends on it.

pub mod bench;
pub mod lab;
pub mod topology;
