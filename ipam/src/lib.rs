//! Address management for peered clusters: which local addresses each peer's pods and external
//! ranges appear under, and how single IPs translate for reflected objects.
//!
//! [`Ipam`] is a pure in-memory allocator over IPv4 prefixes: pools (the private ranges by
//! default), the local pod, service and external CIDRs and the reserved subnets (never handed
//! out), and per peer a remapped view of its pod and external CIDRs (the same prefix when free
//! here, else a free prefix of the same length, chosen deterministically). It also records how
//! each peer sees us, so the gateway can build its NAT from IPAM state alone. Persistence sits
//! behind [`store::Store`]: the default [`store::FileStore`] is crash-safe; in a cluster,
//! [`store::configmap::ConfigMapStore`] keeps it in a ConfigMap with compare-and-swap.
//!
//! [`service`] serves it over gRPC (loopback by default; TLS, a bearer token and client
//! certificates for a cluster) and holds the one client connection every caller uses;
//! [`settings`] are the settings of `liqo-ipam serve` and which of them change while running;
//! [`daemon`] runs it (the binary only parses its command line).
//!
//! The allocator never touches the network, and nothing here decides NAT rules; it only answers
//! with addresses. IPv4 only, one local pod CIDR.

mod buddy;
mod core;
pub mod daemon;
mod error;
mod reconfig;
pub mod service;
pub mod settings;
pub mod state;
pub mod store;
mod translate;
mod types;

pub use crate::core::{Ipam, RELEASED_MEMORY, STATE_VERSION};
pub use error::Error;
pub use state::{Config, Endpoint, Peer, State};
pub use translate::EndpointMapping;
pub use types::{ClusterId, Holder, MAX_PREFIX_LEN, check_cidr, cluster_id, parse_cidr, translate};

#[cfg(test)]
mod prop_tests;
#[cfg(test)]
mod tests;
