//! The peering core's gateway sink in the lab: the shared
//! [`FileGateway`](liqo_netops::files::sinks::FileGateway) (the gateway's config file, its fixed
//! settings plus the peer list the core decided; every wait checks that the gateway runs the
//! exact text written, and a refusal is the error at once) on the lab's host ([`sink`]): its process
//! on a node, its `/status` read typed inside that node, the IPAM's mappings.
//!
//! The file also carries the cluster's external CIDR and its endpoint mappings, as its IPAM
//! lists them when the file is written ([`external`]); [`endpoints`] maps and unmaps endpoints and
//! rewrites it. [`sink`] is the sink itself.

mod endpoints;
mod external;
mod sink;

pub use endpoints::{map_endpoint, unmap_endpoint};
pub(crate) use sink::{LabGateway, lab_gateway};
