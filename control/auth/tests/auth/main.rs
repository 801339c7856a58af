//! liqo-auth's integration tests, one binary, on real API servers (the test kit): the identity
//! protocol (`auth_k8s`), the binary under the chart's RBAC (`binary_k8s`), bad and hostile
//! requests (`hardening_k8s`). Shared helpers in `common`, CSRs in `fixtures/`.

mod common;

mod auth_k8s;
mod binary_k8s;
mod hardening_k8s;
