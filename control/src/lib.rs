//! The control plane of Liqo on kube-rs. For now: Liqo's API types ([`api`], the CRDs of
//! upstream Liqo v0.5 with their groups, versions, kinds and field names) and the generator of
//! the chart's CRD files ([`crdgen`], run by the `liqo-crdgen` binary).
//!
//! It owns the shape of the objects and of their schemas; it never talks to an apiserver and
//! holds no controller logic yet.

pub mod api;
pub mod crdgen;
