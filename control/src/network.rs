//! The network manager's decisions for one peer (§1.5, §1.7 step 8 of the control-plane spec),
//! pure: [`decide`] (what was observed in, the writes and IPAM calls out, in order), the
//! objects it writes ([`specs`]: our NetworkConfig, the status of the peer's copy, the
//! TunnelEndpoint, where the peer shows our ranges), the check of a peer's NetworkConfig
//! ([`validate`]), where peers reach our gateway ([`endpoint`]) and a TunnelEndpoint read back
//! as the data plane needs it ([`tunnel`], for the gateway and route operators). The controller-manager's
//! `network` module carries them out; the views they lead to are the ones the lab's peering
//! makes (`liqo_types::PeerView::of`, the same two IPAM decisions).

pub mod decide;
pub mod endpoint;
pub mod specs;
pub mod tunnel;
pub mod validate;
