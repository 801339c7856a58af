//! The network's decisions, pure, by controller:
//!
//! - the network manager, for one peer (§1.5, §1.7 step 8 of the control-plane spec):
//!   [`decide`] (what was observed in; the writes and IPAM calls out, in order), the objects it
//!   writes ([`specs`]: our NetworkConfig, the status of the peer's copy, the TunnelEndpoint,
//!   where the peer shows our ranges), the check of a peer's NetworkConfig ([`validate`]) and
//!   where peers reach our gateway ([`endpoint`]); the controller-manager's `network` module
//!   carries them out;
//! - the gateway and route operators: a TunnelEndpoint read back as a peering ([`tunnel`]),
//!   the gateway's file and the connection each TunnelEndpoint reports ([`gateway`]), each
//!   node's overlay file ([`routes`]), when a deleted TunnelEndpoint may go ([`release`]) and
//!   what a look at a daemon's status finds ([`daemon`]); `liqo-netops` carries them out;
//! - the data plane's plan of a cluster's peerings ([`plan`]: the gateway's peer list, the
//!   overlay's files, the refusals), shared by the operators and the lab's peering
//!   (`liqo-peering`). The views come from the same two IPAM decisions on both paths
//!   (`liqo_types::PeerView::of`).

pub mod daemon;
pub mod decide;
pub mod endpoint;
pub mod gateway;
pub mod plan;
pub mod release;
pub mod routes;
pub mod specs;
pub mod tunnel;
pub mod validate;

#[cfg(test)]
mod fixtures;
