//! The lab: whole clusters built out of network namespaces on one host.
//!
//! Every node and every pod is a namespace. A cluster's nodes share a LAN (a bridge inside the
//! cluster's `lan` namespace) and route to each other's pod slices like a host-gateway CNI; each
//! node has a `cni0` bridge its pods hang off. The gateway node (`nodes[0]`) of every cluster also
//! attaches to one WAN segment (a bridge inside the `wan` namespace) with its public address.
//!
//! Everything the lab creates is a namespace named `<prefix>-...`; links, addresses and routes live
//! inside those namespaces, so the root namespace only gains namespace entries, and deleting the
//! namespaces ([`down`]) removes everything, even after a crash. Labs with different prefixes
//! coexist. The lab never sends a packet from the root namespace.
//!
//! Peering, unpeering and moving a gateway are `liqo-peering`'s: the lab implements its traits
//! ([`cluster`]: inventory and recorded peerings; [`gateway`] and [`overlay`]: the daemons'
//! processes, with their files and typed status through `liqo_netops::files` and its sinks,
//! shared with the operators; the IPAM through its typed gRPC client) and [`peering`] wires
//! them. The modules form no cycle: `names` <- `error` <- `state` <- `wan`, `daemons` <-
//! `cluster`, `gateway`, `overlay` <- `services` <- `build`; `peering`, `check` <- `outage`;
//! `status`; `speed` (one pod-to-pod TCP stream and ping, for the quickstart and
//! `liqo-bench path`).

mod build;
pub mod check;
pub mod cluster;
mod daemons;
mod error;
pub mod gateway;
pub mod k8s;
mod names;
pub mod outage;
pub mod overlay;
pub mod peering;
mod services;
pub mod speed;
mod state;
pub mod status;
mod wan;

pub use build::up;
pub use cluster::{gateway_node, peerings};
pub use daemons::{GATEWAY_PORT, GATEWAY_RUN_ENV, IPAM_LISTEN, bin, overlay_status};
pub use error::LabError;
pub use liqo_peering::Moved;
pub use names::{BadTarget, Prefix, Target};
pub use peering::{move_gateway, peer, unpeer};
pub use state::{DownReport, Lab, down};
pub use wan::WAN0;
