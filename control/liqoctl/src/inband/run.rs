//! The I/O of `peer in-band` ([`peer()`]) and `unpeer in-band` ([`unpeer()`]) (the order is
//! in the parent module's doc), and what both share (`common`).

mod common;
mod peer;
mod unpeer;

/// The holder of the IPAM endpoint mappings in-band peering takes (the auth service and the
/// proxy exposed to the peer): a virtual kubelet's releases never drop them.
const IPAM_HOLDER: &str = "liqoctl-in-band";

pub use common::Side;
pub use peer::peer;
pub use unpeer::unpeer;
