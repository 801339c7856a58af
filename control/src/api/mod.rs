//! Liqo's API types: one module per API group, with the groups, versions, kinds and field names
//! of upstream Liqo v0.5 (`apis/*/v1alpha1`), so that objects written by either read the same.
//!
//! Enums, defaults and patterns live in the schemas, so the apiserver refuses what the Rust
//! types would refuse (an unknown strategy, a malformed cluster ID or CIDR, a node selector
//! requirement without a key or with an unknown operator). Printer columns use kube's JSON
//! form (`printcolumn = r#"{..}"#`): the structured form repeats `type_ = ..` across columns,
//! which clippy reports as duplicated attributes.

pub mod cidr;
pub mod discovery;
pub mod net;
pub mod offloading;
mod schema;
pub mod sharing;
pub mod virtualkubelet;

pub use cidr::NatCidr;
pub use liqo_types::{Cidr, ClusterId, ClusterName, InvalidCidr, InvalidId, id as ids};
pub use schema::NODE_SELECTOR_OPERATORS;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Every CRD this crate defines, in a fixed order. Descriptions are reflowed (doc comments'
/// line breaks dropped, paragraphs kept) and quantities are checked by pattern, as
/// controller-gen does, instead of carrying Quantity's long description.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut crds = vec![
        discovery::ForeignCluster::crd(),
        discovery::ResourceRequest::crd(),
        sharing::ResourceOffer::crd(),
        net::NetworkConfig::crd(),
        net::TunnelEndpoint::crd(),
        offloading::NamespaceOffloading::crd(),
        virtualkubelet::NamespaceMap::crd(),
        virtualkubelet::ShadowPod::crd(),
    ];
    for version in crds.iter_mut().flat_map(|crd| &mut crd.spec.versions) {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            schema::tidy(schema);
        }
    }
    crds
}
