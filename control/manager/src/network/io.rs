//! Small helpers the network manager's reconcile and executor share: the name of our
//! per-peer objects, a namespaced dynamic API, a peer's IPAM error.

use control::names::UniqueName;
use kube::{Api, Client, api::DynamicObject, core::ApiResource};
use liqo_peering::grpc::GrpcError;
use liqo_types::ClusterId;

use crate::error::Error;

/// The name of our NetworkConfig and TunnelEndpoint for `peer`: its UniqueName.
pub fn tunnel_name(peer: &control::api::discovery::ClusterIdentity) -> String {
    UniqueName::new(peer).to_object_name().to_string()
}

pub(super) fn ipam_error(peer: &ClusterId) -> impl FnOnce(GrpcError) -> Error {
    let peer = peer.to_string();
    move |source| Error::Ipam {
        peer,
        source: Box::new(source),
    }
}

/// A namespaced API of a dynamic kind.
pub(super) fn dyn_api(client: &Client, ns: &str, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, ar)
}
