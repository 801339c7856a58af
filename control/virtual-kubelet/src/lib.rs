//! The virtual kubelet of one peering (§2 of the control-plane spec), on kube-rs: it stands
//! for the provider as a Node of the home cluster and runs the pods scheduled there on the
//! provider.
//!
//! * [`node`]: the virtual node `liqo-<provider>`: labels, taint, capacity from the
//!   ResourceOffer, conditions from the offer and the TunnelEndpoint, its Lease renewed while
//!   the provider's API server answers the ping; on teardown, the drain.
//! * [`reflection`]: local pods on the virtual node → ShadowPods in the remote namespaces the
//!   NamespaceMap maps; their status back (IPs remapped through the IPAM, restarts carried
//!   over); the fallback for pods it cannot offload.
//! * [`resources`]: the Services, EndpointSlices (addresses remapped through the IPAM),
//!   Ingresses, ConfigMaps, Secrets and ServiceAccounts of those namespaces copied to the
//!   provider and kept equal.
//! * [`http`]: the kubelet API the home API server calls (`/containerLogs`, exec), relayed to
//!   the provider's API server.
//!
//! [`run`] runs the three until shutdown, with one [`config::VkConfig`]. The process model is
//! the caller's: a task of liqo-controller-manager, or the `liqo-virtual-kubelet` binary.
//! It never decides whether a peering should have a virtual kubelet (the ResourceOffer
//! controller does), never writes a remote object it did not make (an Event says so), and
//! never runs a pod itself (the provider's ShadowPod controller does).

pub mod config;
pub mod error;
pub mod home_api;
pub mod http;
pub mod namespaces;
pub mod node;
pub mod reflection;
pub mod resources;
pub mod run;

pub use config::VkConfig;
pub use run::run;
