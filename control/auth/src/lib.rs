//! The identity side of peering, as Kubernetes objects and as the `liqo-auth` service:
//!
//! - [`cluster`]: the local cluster's identity (ConfigMap `liqo-clusterid-configmap`);
//! - [`tokens`]: the local auth token (Secret `auth-token`, made here when missing) and the
//!   tokens of remote clusters (Secrets `remote-token-<id>`);
//! - [`url`]: the URL at which peers reach this cluster's auth service;
//! - [`client`]: the consumer's side of the protocol (`GET /ids`, `POST /identity/certificate`);
//! - [`server`]: the provider's side: it checks the token, creates the tenant namespace, has the
//!   apiserver sign the consumer's certificate, binds the basic peering roles and answers
//!   with the identity;
//! - [`metrics`]: the service's requests by outcome;
//! - [`peer_client`]: the clients of a peer's API server, with timeouts;
//! - [`rate`]: the clients' rate limits (a token bucket in front of a client);
//! - [`stack`]: the HTTP stack of the controller-manager's and virtual kubelet's clients
//!   (kube's layers, the rate limit, a pool whose idle connections close, the proxy tunnel);
//! - [`compact`]: reflector stores and maps that give their memory back after a burst, and
//!   the list page of per-pod watches;
//! - [`ready`]: a store's readiness that any number of tasks can wait for;
//! - [`relist`]: the deletions a re-list implies, passed on as events (for `owns_stream`);
//! - [`https`]: the serving loop (TLS, connection limits, timeouts) shared with the
//!   controller-manager's webhooks.
//!
//! It never creates the identity ConfigMap (the installer does), never binds the outgoing or
//! incoming role sets (the controller-manager does, by peering phase) and never logs a token or
//! a key.

pub mod client;
pub mod cluster;
pub mod compact;
pub mod https;
pub mod metrics;
pub mod peer_client;
pub mod rate;
pub mod ready;
pub mod relist;
pub mod server;
pub mod stack;
pub mod tokens;
pub mod url;
pub mod user_agent;

/// The field manager of this component's writes.
pub const FIELD_MANAGER: &str = "liqo-auth";
