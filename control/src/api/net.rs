//! `net.liqo.io/v1alpha1`: NetworkConfig (one cluster's network parameters, replicated to the
//! peer, which writes back how it remapped them) and TunnelEndpoint (both sides combined: what
//! the gateway configures), as in upstream Liqo v0.5.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Cidr, ClusterId, cidr::NatCidr, discovery::ClusterIdentity};

/// NetworkConfigSpec defines the desired state of NetworkConfig.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "net.liqo.io",
    version = "v1alpha1",
    kind = "NetworkConfig",
    plural = "networkconfigs",
    namespaced,
    status = "NetworkConfigStatus",
    category = "liqo",
    derive = "PartialEq",
    doc = "NetworkConfig is the Schema for the networkconfigs API.",
    printcolumn = r#"{"name":"Peering Cluster", "type":"string", "jsonPath":".spec.cluster.clusterName"}"#,
    printcolumn = r#"{"name":"Endpoint IP", "type":"string", "jsonPath":".spec.endpointIP", "priority":1}"#,
    printcolumn = r#"{"name":"VPN Backend", "type":"string", "jsonPath":".spec.backendType", "priority":1}"#,
    printcolumn = r#"{"name":"Processed", "type":"string", "jsonPath":".status.processed"}"#,
    printcolumn = r#"{"name":"Local", "type":"string", "jsonPath":".metadata.labels.liqo\\.io/replication"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct NetworkConfigSpec {
    /// The remote cluster that will receive this CRD.
    pub cluster: ClusterIdentity,
    /// Network used in the local cluster for the pod IPs.
    #[serde(rename = "podCIDR")]
    pub pod_cidr: Cidr,
    /// Network used for local service endpoints.
    #[serde(rename = "externalCIDR")]
    pub external_cidr: Cidr,
    /// Public IP (or name) of the node where the VPN tunnel is created.
    #[serde(rename = "endpointIP")]
    pub endpoint_ip: String,
    /// Vpn technology used to interconnect two clusters.
    #[serde(rename = "backendType")]
    pub backend_type: String,
    /// Connection parameters (wireguard: `publicKey`, `port`).
    #[serde(rename = "backend_config")]
    pub backend_config: BTreeMap<String, String>,
}

/// NetworkConfigStatus defines the observed state of NetworkConfig.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NetworkConfigStatus {
    /// Indicates if this network config has been processed by the remote cluster.
    #[serde(default)]
    pub processed: bool,
    /// The new subnet used to NAT the podCidr of the remote cluster. The original PodCidr may
    /// have been mapped to this network by the remote cluster.
    #[serde(
        rename = "podCIDRNAT",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub pod_cidr_nat: Option<NatCidr>,
    /// The new subnet used to NAT the externalCIDR of the remote cluster. The original
    /// ExternalCIDR may have been mapped to this network by the remote cluster.
    #[serde(
        rename = "externalCIDRNAT",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub external_cidr_nat: Option<NatCidr>,
    /// Why the receiving cluster refused this config, naming the bad field (for example
    /// `spec.podCIDR: 10.0.0.1/16 has host bits set`). Absent while the config is accepted;
    /// removed as soon as a corrected spec is processed. Not in upstream Liqo, which only logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// TunnelEndpointSpec defines the desired state of TunnelEndpoint.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "net.liqo.io",
    version = "v1alpha1",
    kind = "TunnelEndpoint",
    plural = "tunnelendpoints",
    namespaced,
    status = "TunnelEndpointStatus",
    category = "liqo",
    derive = "PartialEq",
    doc = "TunnelEndpoint is the Schema for the endpoints API.",
    printcolumn = r#"{"name":"Peering Cluster ID", "type":"string", "jsonPath":".spec.clusterID"}"#,
    printcolumn = r#"{"name":"Endpoint IP", "type":"string", "jsonPath":".spec.endpointIP", "priority":1}"#,
    printcolumn = r#"{"name":"Backend type", "type":"string", "jsonPath":".spec.backendType"}"#,
    printcolumn = r#"{"name":"Connection status", "type":"string", "jsonPath":".status.connection.status"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
pub struct TunnelEndpointSpec {
    /// The ID of the remote cluster.
    #[serde(rename = "clusterID")]
    pub cluster_id: ClusterId,
    /// PodCIDR of local cluster.
    #[serde(rename = "localPodCIDR")]
    pub local_pod_cidr: Cidr,
    /// Network used in the remote cluster to map the local PodCIDR, in case of conflicts (in
    /// the remote cluster).
    #[serde(rename = "localNATPodCIDR", default)]
    pub local_nat_pod_cidr: NatCidr,
    /// ExternalCIDR of local cluster.
    #[serde(rename = "localExternalCIDR")]
    pub local_external_cidr: Cidr,
    /// Network used in the remote cluster to map the local ExternalCIDR, in case of conflicts
    /// (in the remote cluster).
    #[serde(rename = "localNATExternalCIDR", default)]
    pub local_nat_external_cidr: NatCidr,
    /// PodCIDR of remote cluster.
    #[serde(rename = "remotePodCIDR")]
    pub remote_pod_cidr: Cidr,
    /// Network used in the local cluster to map the remote cluster PodCIDR, in case of
    /// conflicts with RemotePodCIDR.
    #[serde(rename = "remoteNATPodCIDR", default)]
    pub remote_nat_pod_cidr: NatCidr,
    /// ExternalCIDR of remote cluster.
    #[serde(rename = "remoteExternalCIDR")]
    pub remote_external_cidr: Cidr,
    /// Network used in the local cluster to map the remote cluster ExternalCIDR, in case of
    /// conflicts with RemoteExternalCIDR.
    #[serde(rename = "remoteNATExternalCIDR", default)]
    pub remote_nat_external_cidr: NatCidr,
    /// Public IP (or name) of the node where the VPN tunnel is created.
    #[serde(rename = "endpointIP")]
    pub endpoint_ip: String,
    /// Vpn technology used to interconnect two clusters.
    #[serde(rename = "backendType")]
    pub backend_type: String,
    /// Connection parameters.
    #[serde(rename = "backend_config")]
    pub backend_config: BTreeMap<String, String>,
}

/// The state of the tunnel to the remote cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConnectionStatus {
    /// The tunnel is up (a handshake happened).
    Connected,
    /// Waiting for the first handshake.
    Connecting,
    /// The tunnel could not be configured.
    Error,
}

/// Connection holds the configuration and status of a vpn tunnel connecting to remote cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// The status of the vpn connection with the remote cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ConnectionStatus>,
    /// Details on the status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Backend-specific details of the peer (wireguard: endpoint, latest handshake, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub peer_configuration: BTreeMap<String, String>,
}

/// TunnelEndpointStatus defines the observed state of TunnelEndpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TunnelEndpointStatus {
    /// Index of the tunnel interface.
    #[serde(
        rename = "tunnelIFaceIndex",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tunnel_iface_index: Option<i32>,
    /// Name of the tunnel interface.
    #[serde(
        rename = "tunnelIFaceName",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub tunnel_iface_name: Option<String>,
    /// Index of the gateway's veth interface.
    #[serde(
        rename = "vethIFaceIndex",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub veth_iface_index: Option<i32>,
    /// Name of the gateway's veth interface.
    #[serde(
        rename = "vethIFaceName",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub veth_iface_name: Option<String>,
    /// Address of the gateway's veth interface.
    #[serde(rename = "vethIP", default, skip_serializing_if = "Option::is_none")]
    pub veth_ip: Option<String>,
    /// Address through which the other nodes reach the active gateway.
    #[serde(rename = "gatewayIP", default, skip_serializing_if = "Option::is_none")]
    pub gateway_ip: Option<String>,
    /// The tunnel's configuration and state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<Connection>,
}
