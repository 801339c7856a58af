//! The test kit: what the Kubernetes tests of every crate start and stop, and nothing else.
//!
//! [`k8s`] runs real Kubernetes control planes (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, kwok) as processes on loopback; [`liqo`] installs Liqo on them as the chart
//! would (CRDs, ClusterRoles, a ServiceAccount token per component) and starts the components
//! as processes; [`Prefix`] names everything one test (or one lab) makes; [`bin`] finds the
//! project's binaries. Processes are started and stopped through the project's one supervisor,
//! [`dataplane::supervisor`], and found through [`dataplane::procs`].
//!
//! It never builds a data plane: no gateway, no overlay, no network namespaces (the lab in the
//! `e2e` crate does that, on top of this kit). No product binary depends on it; the control
//! crates have it as their only dev-dependency for tests on real API servers.

pub mod k8s;
pub mod liqo;
mod names;
mod programs;

pub use names::{InvalidPrefix, Prefix};
pub use programs::{BinNotFound, bin};
