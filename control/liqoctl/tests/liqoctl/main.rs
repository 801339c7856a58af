//! liqoctl's integration tests, one binary: the command line without a cluster (`cli`), and on
//! real API servers (the test kit): out-of-band peering and unpeer (`peer_k8s`), in-band peering
//! (`inband_k8s`), namespace offloading (`offload_k8s`), install and uninstall with Helm
//! (`install_k8s`, on a cluster of its own), two clusters installed by liqoctl peering and
//! offloading with the chart's components (`install_peer_k8s`). Shared helpers in `common`.

mod common;

mod cli;
mod inband_k8s;
mod install_k8s;
mod install_peer_k8s;
mod offload_k8s;
mod peer_k8s;
