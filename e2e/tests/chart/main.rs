//! The Helm chart (`chart/`): `helm lint` is clean and the chart's version is the workspace's
//! (`lint`); every case of the values matrix (`chart/tests/values/`) renders as its snapshot
//! (`chart/tests/snapshots/`; `UPDATE_SNAPSHOTS=1` rewrites them), the same at every render and
//! without liqo-ipam's Secret (it makes it itself), and the files of `chart/files/` are in the
//! render unchanged but for their namespace and labels (`snapshots`); bad values are refused
//! naming their key (`refusals`); every container has only the privileges its program needs, and
//! liqo-ipam's Role reaches its Secret and state only (`security`); every rendered command line
//! parses with its program (`args`); what an install prints, and a fresh cluster ID without an
//! override (`notes`); each render passes `kubectl apply --dry-run=server` on a harness cluster,
//! and a render with cluster access keeps the existing cluster ID and leaves liqo-ipam's Secret
//! out (`on_cluster`).
//!
//! helm is `$HELM`, else the one beside the Kubernetes binaries (`e2e/k8s/build.sh`): without
//! it every test fails saying so.

mod args;
mod helm;
mod lint;
mod notes;
mod on_cluster;
mod refusals;
mod security;
mod snapshots;
