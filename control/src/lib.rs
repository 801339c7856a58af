//! The control plane's pure core: Liqo's API types ([`api`], the CRDs of upstream Liqo v0.5
//! with their groups, versions, kinds and field names) and the generator of the chart's CRD
//! files ([`crdgen`], run by the `liqo-crdgen` binary); and the foundations of the peering
//! that the controllers, `liqo-auth` and `liqoctl` build on:
//!
//! - [`consts`]: every label, annotation, finalizer, data key and fixed name, defined once;
//! - [`names`]: `UniqueName`, tenant namespaces, per-peer object names, validated Kubernetes
//!   names;
//! - [`conditions`]: the ForeignCluster's conditions, typed, and how they are written;
//! - [`phase`]: the peering phase, the role sets it binds and the kinds it replicates;
//! - [`identity`]: the auth service's wire types and the auth token;
//! - [`leader`]: leader election on a Lease (the controller-manager's replicas);
//! - [`quantity`]: Kubernetes quantities, parsed exactly;
//! - [`offer`]: the ResourceOffer computed from nodes and pods, and its update threshold;
//! - [`selector`]: node selectors with Kubernetes' semantics (matching, kubectl parsing, the
//!   cartesian merge of an imposed selector into a pod's);
//! - [`offloading`]: namespace offloading's decisions (NamespaceOffloading status and
//!   mappings, the provider's remote namespaces, the pod and NamespaceOffloading webhooks);
//! - [`network`]: the network manager's decisions (NetworkConfigs, TunnelEndpoints, the
//!   IPAM exchange's order, teardown);
//! - [`peering`]: the peering controllers' decisions (ForeignCluster, ResourceRequest,
//!   ResourceOffer, the replicator, the identity Secret's state);
//! - [`shadowpod`]: the ShadowPod contract (the consumer's ShadowPod and status, the
//!   provider's confined pod and decision);
//! - [`virtual_node`]: the virtual kubelet's decisions about its Node (claim, labels, taints,
//!   status, heartbeat, reachability, Lease);
//! - [`reflection`]: resource reflection's decisions (the copies of Services, EndpointSlices,
//!   Ingresses, ConfigMaps, Secrets and ServiceAccounts, and what to do about each);
//! - [`storage`]: the storage fabric's decisions (the `liqo` class's provisioner: twin claims,
//!   virtual and placeholder volumes with data gravity, reclaim);
//! - [`forge`]: objects built whole from their inputs (the virtual node).
//!
//! It owns the shape of the objects and these decisions; it never talks to an apiserver or
//! the network, reads no file and no clock (time is an input). The kernel's random source,
//! for a new auth token, is its one system call.

pub mod api;
pub mod conditions;
pub mod consts;
pub mod crdgen;
pub mod forge;
pub mod identity;
pub mod leader;
pub mod lean;
pub mod names;
pub mod network;
pub mod offer;
pub mod offloading;
pub mod peering;
pub mod phase;
pub mod quantity;
pub mod reflection;
pub mod requests;
pub mod selector;
pub mod shadowpod;
pub mod storage;
pub mod virtual_node;
