//! Objects for the unit tests of the operators' decisions.

use kube::api::DynamicObject;
use liqo_types::PublicKey;

/// A WireGuard key of bytes `b`, base64.
pub(crate) fn key(b: u8) -> String {
    PublicKey([b; 32]).to_string()
}

/// The spec of a TunnelEndpoint to `peer` (pods 10.71/16 seen as is, external 10.72/16).
pub(crate) fn spec(peer: &str, b: u8) -> serde_json::Value {
    serde_json::json!({
        "clusterID": peer,
        "localPodCIDR": "10.200.0.0/16",
        "localNATPodCIDR": "10.50.0.0/16",
        "localExternalCIDR": "10.201.0.0/16",
        "localNATExternalCIDR": "None",
        "remotePodCIDR": "10.200.0.0/16",
        "remoteNATPodCIDR": format!("10.{b}.0.0/16"),
        "remoteExternalCIDR": "10.201.0.0/16",
        "remoteNATExternalCIDR": format!("10.{}.0.0/16", u16::from(b) + 100),
        "endpointIP": "198.18.0.2",
        "backendType": "wireguard",
        "backend_config": {"publicKey": key(b), "port": "51840"},
    })
}

/// A TunnelEndpoint object `ns/name` with this spec.
pub(crate) fn tep(ns: &str, name: &str, spec: serde_json::Value) -> DynamicObject {
    let peer = spec["clusterID"].as_str().unwrap_or_default().to_owned();
    serde_json::from_value(serde_json::json!({
        "apiVersion": "net.liqo.io/v1alpha1", "kind": "TunnelEndpoint",
        "metadata": {"name": name, "namespace": ns, "labels": {"clusterID": peer}},
        "spec": spec,
    }))
    .unwrap()
}
