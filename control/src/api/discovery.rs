//! `discovery.liqo.io/v1alpha1`: ForeignCluster (a remote cluster and the desired peering with
//! it) and ResourceRequest (a consumer asking a provider for a ResourceOffer), as in upstream
//! Liqo v0.5.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ClusterId, ClusterName};

/// The identity of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterIdentity {
    /// Foreign Cluster ID, this is a unique identifier of that cluster.
    #[serde(rename = "clusterID")]
    pub cluster_id: ClusterId,
    /// Foreign Cluster Name to be shown in GUIs.
    #[serde(rename = "clusterName")]
    pub cluster_name: ClusterName,
}

/// Whether a peering direction is wanted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PeeringEnabled {
    /// The default of the discovery method (manual and incoming: No; LAN: Yes).
    #[default]
    Auto,
    /// Disabled.
    No,
    /// Enabled.
    Yes,
}

/// Whether Liqo handles the network interconnection with the remote cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NetworkingEnabled {
    /// Liqo does not set up the network.
    No,
    /// Liqo sets up the network.
    #[default]
    Yes,
}

/// Upstream's check on `foreignAuthUrl` (an https URL with a dotted host or address).
const AUTH_URL_PATTERN: &str = r"https:\/\/(www\.)?[-a-zA-Z0-9@:%._\+~#=]{1,256}\.[a-zA-Z0-9()]{1,6}\b([-a-zA-Z0-9()@:%_\+.~#?&//=]*)";

fn default_true() -> bool {
    true
}

/// ForeignClusterSpec defines the desired state of ForeignCluster.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "discovery.liqo.io",
    version = "v1alpha1",
    kind = "ForeignCluster",
    plural = "foreignclusters",
    status = "ForeignClusterStatus",
    shortname = "fc",
    category = "liqo",
    derive = "PartialEq",
    doc = "ForeignCluster is the Schema for the foreignclusters API.",
    printcolumn = r#"{"name":"ClusterID", "type":"string", "jsonPath":".spec.clusterIdentity.clusterID", "priority":1}"#,
    printcolumn = r#"{"name":"ClusterName", "type":"string", "jsonPath":".spec.clusterIdentity.clusterName", "priority":1}"#,
    printcolumn = r#"{"name":"Outgoing peering", "type":"string", "jsonPath":".status.peeringConditions[?(@.type == 'OutgoingPeering')].status"}"#,
    printcolumn = r#"{"name":"Incoming peering", "type":"string", "jsonPath":".status.peeringConditions[?(@.type == 'IncomingPeering')].status"}"#,
    printcolumn = r#"{"name":"Networking", "type":"string", "jsonPath":".status.peeringConditions[?(@.type == 'NetworkStatus')].status"}"#,
    printcolumn = r#"{"name":"Authentication", "type":"string", "jsonPath":".status.peeringConditions[?(@.type == 'AuthenticationStatus')].status"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ForeignClusterSpec {
    /// Foreign Cluster Identity.
    pub cluster_identity: ClusterIdentity,
    /// Enable the peering process to the remote cluster.
    #[serde(default)]
    pub outgoing_peering_enabled: PeeringEnabled,
    /// Allow the remote cluster to establish a peering with our cluster.
    #[serde(default)]
    pub incoming_peering_enabled: PeeringEnabled,
    /// Indicates if Liqo has to handle the network interconnection with the remote cluster.
    #[serde(default)]
    pub networking_enabled: NetworkingEnabled,
    /// URL where to contact foreign Auth service.
    #[schemars(regex(pattern = AUTH_URL_PATTERN))]
    pub foreign_auth_url: String,
    /// URL where to contact foreign proxy for the api server. This URL is used when creating
    /// the k8s clients toward the remote cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign_proxy_url: Option<String>,
    /// Indicates if the local cluster has to skip the tls verification over the remote
    /// Authentication Service or not.
    #[serde(rename = "insecureSkipTLSVerify", default = "default_true")]
    pub insecure_skip_tls_verify: bool,
    /// If discoveryType is LAN or WAN and this indicates the number of seconds after that this
    /// ForeignCluster will be removed if no updates have been received.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ttl: Option<i64>,
}

impl ForeignClusterSpec {
    /// The peer's proxy URL, when peered in-band (`foreignProxyUrl` set and not empty): its
    /// API server is reached through its liqo-proxy, over the tunnel between the clusters.
    pub fn proxy_url(&self) -> Option<&str> {
        self.foreign_proxy_url.as_deref().filter(|u| !u.is_empty())
    }

    /// Whether the peer is reached in-band (see [`Self::proxy_url`]).
    pub fn in_band(&self) -> bool {
        self.proxy_url().is_some()
    }
}

/// The kind of a peering condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PeeringConditionType {
    /// The outgoing peering (we consume the remote cluster's resources).
    OutgoingPeering,
    /// The incoming peering (the remote cluster consumes ours).
    IncomingPeering,
    /// The network interconnection.
    NetworkStatus,
    /// The authentication with the remote cluster.
    AuthenticationStatus,
    /// Whether the ForeignCluster can be processed.
    ProcessForeignClusterStatus,
}

/// The phase of a peering condition.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PeeringConditionStatus {
    /// No peering.
    #[default]
    None,
    /// Waiting for the remote cluster's feedback or for us to accept the ResourceOffer.
    Pending,
    /// Established.
    Established,
    /// Being torn down.
    Disconnecting,
    /// Authentication denied although a token was given.
    Denied,
    /// Identity verification denied with an empty token.
    EmptyDenied,
    /// An error occurred.
    Error,
    /// Successful.
    Success,
}

/// PeeringCondition contains details about state of the peering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PeeringCondition {
    /// Type of the peering condition.
    #[serde(rename = "type")]
    pub type_: PeeringConditionType,
    /// Status of the condition.
    #[serde(default)]
    pub status: PeeringConditionStatus,
    /// LastTransitionTime -> timestamp for when the condition last transitioned from one
    /// status to another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Reason -> Machine-readable, UpperCamelCase text indicating the reason for the
    /// condition's last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Message -> Human-readable message indicating details about the last status transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The names of the local and the remote namespaces assigned to the pair of clusters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TenantNamespace {
    /// local TenantNamespace name
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    /// remote TenantNamespace name
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
}

/// ForeignClusterStatus defines the observed state of ForeignCluster.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForeignClusterStatus {
    /// TenantNamespace names in the peered clusters
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_namespace: Option<TenantNamespace>,
    /// PeeringConditions contains the conditions about the peering related to this
    /// ForeignCluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peering_conditions: Vec<PeeringCondition>,
}

/// ResourceRequestSpec defines the desired state of ResourceRequest.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "discovery.liqo.io",
    version = "v1alpha1",
    kind = "ResourceRequest",
    plural = "resourcerequests",
    namespaced,
    status = "ResourceRequestStatus",
    category = "liqo",
    derive = "PartialEq",
    doc = "ResourceRequest is the Schema for the ResourceRequests API.",
    printcolumn = r#"{"name":"Local", "type":"string", "jsonPath":".metadata.labels.liqo\\.io/replication"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequestSpec {
    /// Foreign Cluster Identity
    pub cluster_identity: ClusterIdentity,
    /// Local auth service address
    pub auth_url: String,
    /// WithdrawalTimestamp is set when a graceful deletion is requested by the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawal_timestamp: Option<Time>,
}

/// The state of the ResourceOffer a ResourceRequest produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OfferState {
    /// Not created yet.
    #[default]
    None,
    /// Created.
    Created,
}

/// ResourceRequestStatus defines the observed state of ResourceRequest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequestStatus {
    /// OfferStateType defines the state of the child ResourceOffer resource.
    #[serde(default)]
    pub offer_state: OfferState,
    /// OfferWithdrawalTimestamp is the withdrawal timestamp of the child ResourceOffer
    /// resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offer_withdrawal_timestamp: Option<Time>,
}
