//! Namespace offloading's decisions: the remote namespace's name ([`remote_namespace`]), the
//! NamespaceOffloading status ([`status`]), the NamespaceOffloading controller's decisions on
//! the consumer ([`consumer`]), the NamespaceMap controller's decisions on the provider
//! ([`provider`]), the virtual-node controller's ([`vnode`]), and the pod and NamespaceOffloading
//! webhooks ([`webhook`]).
//!
//! Everything here is pure: it never talks to an apiserver and never reads a clock (time is
//! an input). The controllers in `liqo-controller-manager` observe, call these functions and
//! carry out the actions they return.

use crate::{
    api::{discovery::ClusterIdentity, offloading::NamespaceMappingStrategy},
    names::{InvalidName, NamespaceName, UniqueName},
};

pub mod consumer;
pub mod provider;
pub mod status;
pub mod vnode;
pub mod webhook;

#[cfg(test)]
mod tests;

/// The name of a local namespace in every remote cluster: `EnforceSameName` keeps it,
/// `DefaultName` gives `<ns>-<UniqueName(local)>` (`foo` → `foo-lively-voice-dd8531`).
/// Refused when the result is not a DNS-1123 label (longer than 63 characters): upstream
/// then loops in an unexplained `CreationLoopBackOff`.
pub fn remote_namespace(
    ns: &NamespaceName,
    strategy: NamespaceMappingStrategy,
    local: &ClusterIdentity,
) -> Result<NamespaceName, InvalidName> {
    match strategy {
        NamespaceMappingStrategy::EnforceSameName => Ok(ns.clone()),
        NamespaceMappingStrategy::DefaultName => format!("{ns}-{}", UniqueName::new(local)).parse(),
    }
}
