//! The operators' Kubernetes I/O, thin: TunnelEndpoints listed untyped and read with
//! `control::network::tunnel`, finalizers and status written with server-side apply (each operator its own
//! field manager: `teps`), the gateway's key Secrets and Lease, its pod's active label, the node address on the gateway's
//! Service, and the peering core's [`liqo_peering::Records`] and [`liqo_peering::Inventory`]
//! over those objects (`records`). Every call fails with a [`KubeError`].

mod error;
pub mod keys;
pub mod lease;
pub mod pod;
mod records;
pub mod service;
mod teps;

pub use error::{KubeError, api};
pub use records::{KubeInventory, Snapshot, TepRecords};
pub use teps::{
    apply_status, dead_holds, hold_finalizer, hold_first, list_teps, owns_finalizer, prune_holds,
    resolve, tep_api, tep_resource, warning,
};
