//! The overlay agent: one per node (a DaemonSet in a cluster). It owns a VXLAN device to every
//! other node of the cluster and one policy-routing table, so that pods on every node reach the
//! remote clusters through the gateway node and their replies come back the same way. Desired
//! state comes from a watched config file; every change is applied as a minimal diff.
//!
//! It never touches the cluster's CNI, its routes or the gateway's namespace.

pub mod agent;
pub mod config;
pub mod plan;
pub mod status;
