//! liqo-controller-manager's integration tests, one binary: the binary itself (`binary`), and on
//! real API servers (the test kit) the peering (`peering_k8s`, `untrusted_k8s`, `tenant_k8s`),
//! the network manager (`network_k8s`, `network_refusals_k8s`), namespace offloading
//! (`offloading_k8s`), leader election and failover (`ha_k8s`), ShadowPods (`shadowpod_k8s`),
//! the webhooks (`webhook_k8s`) and the virtual kubelet's logs (`vk_logs_k8s`). Shared helpers
//! in `common`.

mod common;

mod binary;
mod ha_k8s;
mod network_k8s;
mod network_refusals_k8s;
mod offloading_k8s;
mod peering_k8s;
mod shadowpod_k8s;
mod tenant_k8s;
mod untrusted_k8s;
mod vk_logs_k8s;
mod webhook_k8s;
