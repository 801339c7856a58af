//! The gateway: userspace WireGuard between clusters, in a network namespace of its own.
//!
//! It owns the gateway namespace (a veth to the host namespace and the TUN device inside), the
//! WireGuard data path (boringtun's `noise::Tunn` with our own I/O loop; the UDP socket stays in
//! the host namespace), the routes and policy rules that bring the peers' ranges to it, and one
//! nftables table with the prefix NAT between our pods and each peer's view of them, and the
//! translations through our external CIDR: mapped endpoints (nodes, host-network pods, the API
//! server) reached by the peers they are mapped for, and our other sources seen by peers in it
//! ([`plan`]). Desired state comes from a config file ([`config`]); every change is applied as a
//! minimal diff. The private key file is read again at every apply, and a new key in it is
//! switched to live, every session made anew ([`keys::rotation`], [`wg::Identity`]).
//!
//! It never decides address mappings (the IPAM does; the config carries its answers) and never
//! touches the cluster's CNI or any other nftables table.

pub mod config;
pub mod daemon;
pub mod keys;
pub mod plan;
pub mod status;
pub mod wg;
