//! liqo-proxy's integration tests, one binary: the relay on loopback (`relay`) and in front of a
//! real kube-apiserver (`apiserver_k8s`).

mod apiserver_k8s;
mod relay;
