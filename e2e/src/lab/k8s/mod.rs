//! The lab with real control planes (`liqo-lab up --k8s`): every lab cluster gets a harness
//! cluster ([`crate::k8s`]) of its name and pod CIDR whose Node objects are the lab's nodes
//! (InternalIP = the node's LAN address, `spec.podCIDR` = its slice, kept Ready by kwok), Liqo
//! installed by [`crate::liqo`] (its IPAM is the cluster's only one), the gateway's Service (a
//! LoadBalancer whose ingress is the cluster's public address), and per node a relay to the API
//! server and the IPAM ([`relay`]), the route operator and the overlay agent, plus the gateway
//! operator and the gateway on the gateway node ([`fabric`]). The API server publishes itself
//! in `default/kubernetes` at the LAN address of the last node ([`relay::api_node`]), whose
//! relay forwards it: peers reach it there through their tunnel (the virtual kubelets run with
//! API server support, so offloaded pods' tokens work). The operators render the daemons'
//! files from the Kubernetes objects; the lab writes no peer list. `check` reads the peer
//! views from the TunnelEndpoints ([`views`]).
//!
//! Brought up with [`up_in_band`], the clusters can only be peered in-band ([`inband`]); the
//! marker records it. With real nodes and [`Options::chart`], nothing of Liqo is a lab process:
//! `liqoctl install` runs every component as a pod from the chart's images ([`chart`]); the
//! lab keeps only the relays and plays the cloud: load balancers and Internet egress ([`lb`];
//! with two gateway replicas, a `liqo-lab balance` process per cluster, which teardown finds
//! by its `--tag` as it finds the relays).
//!
//! Teardown ([`down`]) needs no state: the marker file says the lab has clusters, the harness
//! finds its processes by directory, the relays (also those started by hand with
//! `liqo-lab --prefix <p> relay --tag <lab dir>/...`) are found by the lab directory in their
//! `--tag`, and everything in a node is killed with its namespace.

pub mod chart;
pub mod demo;
mod diagnose;
mod down;
pub mod egress;
mod error;
pub mod fabric;
pub mod failover;
pub mod inband;
mod k8s_lab;
pub mod lb;
mod moving;
pub mod nodes;
mod peer;
pub mod realnode;
pub mod relay;
pub mod restart;
pub mod rotate;
mod up;
pub mod views;
pub mod volumes;

pub use diagnose::DiagnoseOnPanic;
pub use down::{Down, down};
pub use error::K8sLabError;
pub use k8s_lab::{K8sLab, Options, is_chart, is_in_band, is_k8s};
pub use moving::move_gateway;
pub use up::{up, up_in_band};
