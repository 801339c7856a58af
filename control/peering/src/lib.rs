//! The peering core: what it takes to peer two clusters' data planes, written once.
//!
//! - [`plan`]: pure. From a cluster's recorded peerings, its gateway's peer list and its
//!   overlay agents' configuration; the refusals (self-peering, both clusters behind NAT, an
//!   unknown cluster or node, unpeering clusters that are not peered).
//! - [`ipam`]: the IPAM exchange as single-side steps (each side remaps the other's ranges and
//!   records the other's decision) against the [`ipam::Ipam`] trait, implemented for the
//!   in-memory allocator and, in [`grpc`], for the typed client of the `liqo-ipam` service.
//! - [`peer()`], [`unpeer()`] and [`move_gateway()`]: the orchestration, with the ordering the
//!   data plane needs and a rollback of every step that ran when a later one fails (its undo
//!   recorded before it runs, since a step may take effect and still fail), against the small
//!   traits of [`sinks`] (gateway, overlay, inventory, record store). `unpeer` releases the
//!   IPAM ranges last, after the records: a failed release is reported, never rolled back,
//!   and unpeering again releases them.
//!
//! It owns no Kubernetes object, runs no process and touches no file: the lab implements the
//! traits with its files and processes, the controllers with Kubernetes objects. Who is peered
//! is the record store's state, never read back from a daemon's configuration.

mod error;
pub mod grpc;
pub mod ipam;
mod peer;
mod placement;
/// The pure plan: `control::network::plan`, where the operators read it too.
pub use control::network::plan;
mod rollback;
pub mod sinks;

pub use error::{BoxError, Error, RollbackFailure, Step};
pub use peer::{peer, unpeer};
pub use placement::{Moved, move_gateway};
pub use plan::{ClusterInfo, OverlayPlan, Peering, Peerings, Refusal};
pub use sinks::{Gateway, Inventory, Overlay, Records, Side};

#[cfg(test)]
mod agree_tests;
#[cfg(test)]
mod fakes;
#[cfg(test)]
mod tests;
