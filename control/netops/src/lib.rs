//! The Kubernetes side of the data plane, so that `gateway/` and `overlay/` never know of
//! Kubernetes: two operators that carry out `control::network`'s decisions, turning objects
//! into the daemons' config files (through the one plan, `control::network::plan`, the same
//! code the lab runs) and the daemons' `/status` back into objects.
//!
//! - `liqo-gateway-operator` ([`gateway_op`]), beside the gateway: every TunnelEndpoint →
//!   the gateway's config file over a base config (`control::network::gateway`), plus our
//!   external CIDR and the endpoint mappings from the IPAM's `List`; the gateway's `/status` →
//!   each TunnelEndpoint's `status.connection` (Connected on a recent handshake, Connecting,
//!   Error naming the bad field) and `status.gatewayIP`; finalizer
//!   `net.liqo.io/gateway-operator` until the gateway dropped the peer; the key Secrets
//!   ([`kube::keys`]) and the Lease `liqo-gateway` ([`kube::lease`]).
//! - `liqo-route-operator` ([`route_op`]), one per node: Nodes + the Lease + every
//!   TunnelEndpoint → this node's overlay config file (`control::network::routes`); finalizer
//!   `net.liqo.io/route-operator` held by every node's operator until its agent dropped the
//!   ranges.
//! - [`files`]: the config file written atomically, its digest, one look at a daemon's status
//!   (`control::network::daemon`) and the core's `Gateway` and `Overlay` sinks over files and
//!   status ([`files::sinks`]); no Kubernetes (for the lab too).
//! - [`kube`]: the thin I/O, and the core's `Records` (TunnelEndpoints, read with
//!   `control::network::tunnel`) and `Inventory` (Nodes, Lease, identity) over Kubernetes
//!   objects.
//!
//! The decisions (`control::network::{tunnel, gateway, routes, release}`) are pure and
//! unit-tested there; the operators only list, write files, read status and apply. They never
//! write a TunnelEndpoint's spec (the network manager owns it), never run or stop a daemon,
//! never touch the kernel, and never log a private key. `--fake-dataplane` runs them without
//! daemons (tests, harness clusters): nothing is written and a rendered peer counts as
//! connected.

pub mod cli;
pub mod error;
pub mod files;
pub mod gateway_op;
pub mod kube;
pub mod metrics;
pub mod route_op;
pub mod runner;
