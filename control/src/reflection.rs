//! Resource reflection (§5 of the control-plane spec): what a consumer's virtual kubelet makes
//! of the local Services, EndpointSlices, Ingresses, ConfigMaps, Secrets and ServiceAccounts
//! of a namespace offloaded to a provider (and its claims of class `liqo` bound on the virtual
//! node, [`claim`]), and what it does about one object from what it
//! observed on both sides ([`decide()`]). Pods are [`crate::shadowpod`]'s.
//!
//! - [`Reflect`]: one kind's contract: its remote name, whether a local object is reflected
//!   at all, the remote copy forged from it, and which fields of a copy must match exactly;
//!   implemented in [`service`], [`endpointslice`], [`ingress`], [`configmap`], [`secret`]
//!   and [`serviceaccount`];
//! - [`meta`]: what every copy carries (the local labels and annotations plus the reflection
//!   labels), the opt-out annotation and the copies never reflected back;
//! - [`decide()`]: create, apply, delete, or a Warning Event, from the local object and the
//!   remote one of its name; [`same`] compares a copy with what it should be.
//!
//! Pure: it never reads an API server or the IPAM (the caller maps the EndpointSlices'
//! addresses and gives the answers in [`Inputs`]) and never reads a clock. It never decides
//! which namespaces are offloaded (the NamespaceMaps say so).

pub mod claim;
pub mod configmap;
mod contract;
mod decide;
pub mod endpointslice;
pub mod ingress;
pub mod meta;
pub mod secret;
pub mod service;
pub mod serviceaccount;

#[cfg(test)]
mod tests;

pub use contract::{Ctx, Inputs, Kind, REASON_REFUSED, Reflect, ServiceState, Skip};
pub use decide::{Action, decide, ours, same};
