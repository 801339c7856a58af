//! Real Kubernetes control planes for tests, without Docker: for each cluster an etcd, a
//! kube-apiserver, a kube-controller-manager, a kube-scheduler and kwok (simulated nodes), all
//! built from the Go module proxy by `e2e/k8s/build.sh` and started as processes on loopback
//! with their own data, certificates, service-account keys, free ports, service and pod CIDRs.
//!
//! [`Clusters::up`] waits until every cluster serves, its controllers run and its nodes are
//! Ready; dropping the value (or [`down`] for a detached set started by `liqo-lab k8s up`) stops
//! every process and removes every file, also after a failure halfway.

pub mod account;
mod bins;
mod cluster;
mod controllers;
mod crds;
mod error;
mod pki;
mod procs;
mod restart;
mod shared;
mod state;
mod sweep;

pub use bins::{Binaries, binaries, node_binaries};
pub use cluster::{Cluster, client};
pub use crds::{MANAGER, install_crds};
pub use error::K8sError;
pub use pki::{issue_client, write as write_file};
pub use procs::free_port;
pub use procs::stop as stop_procs;
pub(crate) use procs::using as procs_using;
pub use procs::{CommandLine, Proc, command_line, kill9};
pub use restart::Restarted;
pub use shared::{Lease, Pool, Shape};
pub use state::{Clusters, Down, NAMES, Named, Options, ROOT, down, load};
