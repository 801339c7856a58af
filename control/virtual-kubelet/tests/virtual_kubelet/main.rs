//! liqo-virtual-kubelet's integration tests, one binary, on real API servers (the test kit): the
//! virtual node (`node_k8s`), the kubelet API with logs and exec (`http_k8s`), pod reflection
//! (`reflection_k8s`; under an admission policy that refuses its label on a status:
//! `label_policy_k8s`), resource reflection on the same clusters (`resources_k8s`), ServiceAccount tokens and Events
//! back home (`tokens_k8s`), a Service across three clusters (`three_k8s`). Shared helpers in `common`.

mod common;

mod http_k8s;
mod label_policy_k8s;
mod node_k8s;
mod reflection_k8s;
mod resources_k8s;
mod three_k8s;
mod tokens_k8s;
