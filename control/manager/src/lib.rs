//! The peering controllers of liqo-controller-manager (§1.2–§1.5, §1.7 of the control-plane
//! spec): the ForeignCluster controller (validation, identity at the peer, ResourceRequest,
//! peering conditions, NETWORKING from the TunnelEndpoint while the gateway operator's Lease is
//! fresh ([`gateway_lease`]), and RoleBindings), the CRD replicator, the ResourceRequest
//! controller (a provider's offers), the ResourceOffer controller (a consumer's acceptance, with
//! the virtual kubelet behind [`launcher::Launcher`]), and, given an IPAM, the network manager
//! ([`network`]: NetworkConfigs, the IPAM exchange through `liqo-peering`, TunnelEndpoints);
//! namespace offloading ([`offloading`]: the virtual node of an accepted offer, the
//! virtual-node, NamespaceOffloading and NamespaceMap controllers); with `--enable-storage`,
//! the storage fabric's provisioner ([`storage`]). A shutdown is bounded
//! ([`run::run_bounded`], [`inflight`]).
//!
//! Each controller carries out a pure decision of `control` (`control::peering`,
//! `control::network`, `control::offloading`, `control::shadowpod`) with thin kube-runtime I/O; the
//! helpers they share are [`kit`]. It owns those decisions and their writes (server-side apply,
//! field manager [`FIELD_MANAGER`]); it never serves the auth protocol, mints tokens or reads the
//! cluster identity itself (crate `liqo-auth` does), and never configures the data plane (the
//! gateway and route operators render the TunnelEndpoints).

pub mod duration;
pub mod identity;

/// The field manager of every server-side apply.
pub const FIELD_MANAGER: &str = "liqo-controller-manager";
pub mod context;
pub mod error;
pub mod fc;
pub mod fc_auth;
pub mod fc_network;
pub mod gateway_lease;
pub mod inflight;
pub mod kit;
pub mod launcher;
pub mod leader;
pub mod metrics;
pub mod network;
pub mod offer;
pub mod offloading;
pub mod replicator;
pub mod request;
pub mod roles;
pub mod run;
pub mod storage;
pub mod webhook;

/// Label selectors the controllers watch with.
mod selectors {
    use control::consts::{labels, values};

    /// Copies made by a peer's replicator.
    pub(crate) fn replicated() -> String {
        format!("{}={}", labels::REPLICATED, values::TRUE)
    }

    /// Our sources.
    pub(crate) fn source() -> String {
        format!("{}={}", labels::REPLICATION, values::TRUE)
    }

    /// Virtual nodes.
    pub(crate) fn virtual_nodes() -> String {
        format!("{}={}", labels::NODE_TYPE, values::VIRTUAL_NODE)
    }
}
