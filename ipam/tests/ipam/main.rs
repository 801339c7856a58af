//! The ipam crate's integration tests, one binary: the liqo-ipam service over gRPC (`service`),
//! its TLS, tokens and client certificates (`security`), its configuration reload (`reload`),
//! its state in a ConfigMap of a real API server (`configmap_k8s`) and its certificate and token
//! in a Secret it makes and keeps itself there (`tls_secret_k8s`). Shared helpers in `common`.

mod common;

mod configmap_k8s;
mod reload;
mod security;
mod service;
mod tls_secret_k8s;
