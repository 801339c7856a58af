//! The peering controllers' decisions, pure functions of what a controller observed returning
//! what to do (tested without an apiserver), by controller:
//!
//! - [`fc`]: the ForeignCluster controller (its phase, conditions, identity, ResourceRequest,
//!   NETWORKING from the TunnelEndpoint and the gateway Lease);
//! - [`objects`]: what the ForeignCluster controller writes (tenant namespace, ResourceRequest)
//!   and which of a peer's ForeignClusters it processes;
//! - [`api_server`]: the check that the API server behind a signed identity is the peer's;
//! - [`request`]: the ResourceRequest controller (a provider's offers) and the trust in a
//!   replicated copy ([`request::origin`]);
//! - [`offer`]: the ResourceOffer controller (a consumer's acceptance, the virtual kubelet);
//! - [`replicate`]: the CRD replicator (which copies the peer must hold);
//! - [`secret`]: what an identity Secret says (its selector, its data, its state).
//!
//! The controller-manager executes them (its `fc`, `request`, `offer`, `replicator`
//! modules); `liqoctl` reads the same ones. Nothing here talks to an apiserver.

pub mod api_server;
pub mod fc;
pub mod objects;
pub mod offer;
pub mod replicate;
pub mod request;
pub mod secret;
