//! The single-host lab and the end-to-end tests.
//!
//! [`topology`] owns the lab's file format, validation and address plan (pure). [`lab`] builds a
//! topology out of network namespaces with [`dataplane`], tears it down, shows its status and
//! checks connectivity with real packets. [`k8s`] runs real Kubernetes control planes (etcd,
//! apiserver, controller-manager, scheduler, kwok) as processes for the control-plane tests;
//! [`liqo`] installs Liqo on them (chart objects, RBAC by ServiceAccount tokens, components as
//! processes);
//! [`bench`] measures the gateway and the lab's paths. All three start and stop processes
//! through the project's one supervisor, [`dataplane::supervisor`]. The lab's peering logic is
//! `liqo-peering`'s: the lab only implements its traits. The `liqo-lab` binary is a thin CLI
//! over all of it. This crate is test and demo infrastructure: no product daemon depends on it.

pub mod bench;
pub mod k8s;
pub mod lab;
pub mod liqo;
pub mod topology;
