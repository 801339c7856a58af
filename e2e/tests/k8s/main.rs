//! The end-to-end tests on the test kit's Kubernetes clusters, one binary (no network
//! namespaces): the harness itself (`k8s_clusters`), peering with Liqo's processes
//! (`peering_k8s`), the acceptance of peering trust (`peering_k8s_acceptance`, with its
//! `trust.rs` and what both share, `common.rs`) and peering under chaos (`peering_k8s_chaos`,
//! with `chaos/`).

mod chaos;

mod k8s_clusters;
mod peering_k8s;
mod peering_k8s_acceptance;
mod peering_k8s_chaos;
