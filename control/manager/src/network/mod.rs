//! The network manager (§1.5, §1.7 step 8 of the control-plane spec; upstream's `netcfgcreator` and
//! `tunnelendpointcreator`): per ForeignCluster with networking enabled and a peering pending or
//! established in either direction, our NetworkConfig (ranges from the IPAM, the gateway's key and
//! endpoint), the peer's NetworkConfig checked (`control::network::validate`) and remapped through
//! the peering core's single-side IPAM steps (`liqo_peering::ipam` over the gRPC client of
//! `liqo-ipam`), the peer's decision recorded (`SetPeerView`) once ours comes back processed, the
//! TunnelEndpoint; and the teardown, ending with `Release`.
//!
//! The decisions are `control::network::decide`'s (pure); [`reconcile`] reads and writes. It never
//! configures the gateway or the overlay (the operators render TunnelEndpoints) and never writes
//! the ForeignCluster's status (its controller turns the TunnelEndpoint into NETWORKING).

pub mod abandon;
mod exec;
mod io;
mod manager;
mod reconcile;
pub mod watch;

pub use control::consts::net::{REFUSED_ANNOTATION, REFUSED_SPEC_ANNOTATION};
pub use io::tunnel_name;
pub use manager::{
    Config, DEFAULT_GRACE, IPAM_TIMEOUT, Manager, NAME, REASON_REFUSED,
    REASON_RELEASED_AFTER_GRACE, Shared,
};
pub use reconcile::{controller_trigger, reconcile};
