//! The lab on real Kubernetes control planes, one binary (root: network namespaces, the test
//! kit's clusters and Liqo's processes; `liqo-lab up --k8s`): the lab and its rotation
//! (`lab_k8s_root`), under chaos (`lab_k8s_chaos_root`), in-band peering through the tunnel
//! (`inband_lab_root`), offloading across it (`offload_lab_root`) and real nodes
//! (`real_nodes_root`; Liqo from its chart on them). Each test builds a whole lab, so they run one at a time
//! ([`lab_k8s::ONE_AT_A_TIME`]). Shared helpers in `lab_k8s` and `offload_lab`.

mod lab_k8s;
mod offload_lab;

mod inband_by_hand;
mod inband_lab_root;
mod lab_k8s_chaos_root;
mod lab_k8s_root;
mod offload_lab_root;
mod real_nodes_chart;
mod real_nodes_offload;
mod real_nodes_report;
mod real_nodes_root;
mod real_nodes_stateful;
mod real_nodes_storage;
