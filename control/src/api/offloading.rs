//! `offloading.liqo.io/v1alpha1`: NamespaceOffloading, which offloads its namespace to (a
//! subset of) the peered clusters, as in upstream Liqo v0.5.
//!
//! Beyond the upstream schema the apiserver itself enforces two rules upstream left to a
//! webhook: the object is named `offloading`, and `namespaceMappingStrategy` never changes.

use std::collections::BTreeMap;

use k8s_openapi::{api::core::v1::NodeSelector, apimachinery::pkg::apis::meta::v1::Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The only accepted name of a NamespaceOffloading (one per namespace).
pub const NAME: &str = "offloading";

/// How remote namespaces are named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum NamespaceMappingStrategy {
    /// The remote namespace has the local one's name (creation fails on a conflict).
    EnforceSameName,
    /// The local name, the local cluster name and a unique suffix (no conflicts).
    #[default]
    DefaultName,
}

/// Where the namespace's pods may be scheduled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PodOffloadingStrategy {
    /// Local nodes only (no pod offloading).
    Local,
    /// Virtual nodes (remote clusters) only.
    Remote,
    /// Local nodes and the selected virtual nodes.
    #[default]
    LocalAndRemote,
}

/// NamespaceOffloadingSpec defines the desired state of NamespaceOffloading.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "offloading.liqo.io",
    version = "v1alpha1",
    kind = "NamespaceOffloading",
    plural = "namespaceoffloadings",
    namespaced,
    status = "NamespaceOffloadingStatus",
    shortname = "nsof",
    category = "liqo",
    derive = "PartialEq",
    doc = "NamespaceOffloading is the Schema for the namespaceoffloadings API.",
    validation = Rule::new("self.metadata.name == 'offloading'")
        .message("a NamespaceOffloading must be named 'offloading'"),
    printcolumn = r#"{"name":"NamespaceMappingStrategy", "type":"string", "jsonPath":".spec.namespaceMappingStrategy"}"#,
    printcolumn = r#"{"name":"PodOffloadingStrategy", "type":"string", "jsonPath":".spec.podOffloadingStrategy"}"#,
    printcolumn = r#"{"name":"OffloadingPhase", "type":"string", "jsonPath":".status.offloadingPhase"}"#,
    printcolumn = r#"{"name":"RemoteNamespaceName", "type":"string", "jsonPath":".status.remoteNamespaceName", "priority":10}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceOffloadingSpec {
    /// NamespaceMappingStrategy allows users to map local and remote namespace names according
    /// to two different strategies: "DefaultName", which ensures uniqueness and prevents
    /// conflicts, and "EnforceSameName", which enforces the same name at the cost of possible
    /// conflicts. Immutable.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self == oldSelf",
        "message": "namespaceMappingStrategy is immutable",
    }]))]
    pub namespace_mapping_strategy: NamespaceMappingStrategy,
    /// PodOffloadingStrategy allows users to configure how pods in this namespace are
    /// offloaded, according to three different strategies: "Local" (i.e. no pod offloading is
    /// performed), "Remote" (i.e. all pods are offloaded in remote clusters), "LocalAndRemote"
    /// (i.e. no constraints are enforced besides the ones specified by the ClusterSelector).
    #[serde(default)]
    pub pod_offloading_strategy: PodOffloadingStrategy,
    /// ClusterSelector allows users to select a specific subset of remote clusters to perform
    /// pod offloading by means of the standard Kubernetes NodeSelector approach
    /// (<https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#node-affinity>).
    /// A cluster selector with no NodeSelectorTerms matches all clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::node_selector")]
    pub cluster_selector: Option<NodeSelector>,
}

/// The overall state of a namespace's offloading.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OffloadingPhase {
    /// Remote namespaces have been created on every selected cluster.
    Ready,
    /// No cluster matches the selector.
    NoClusterSelected,
    /// Remote namespaces are being created.
    InProgress,
    /// Some remote namespaces could not be created.
    SomeFailed,
    /// No remote namespace could be created.
    AllFailed,
    /// Remote namespaces are being deleted.
    Terminating,
}

/// The kind of a remote namespace condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RemoteNamespaceConditionType {
    /// Whether the cluster was selected for this namespace.
    OffloadingRequired,
    /// Whether the remote namespace exists and is usable.
    Ready,
}

/// The status of a condition, as core/v1 ConditionStatus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known.
    Unknown,
}

/// RemoteNamespaceCondition contains details about state of remote namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteNamespaceCondition {
    /// Type of remote namespace controller condition.
    #[serde(rename = "type")]
    pub type_: RemoteNamespaceConditionType,
    /// Status of the condition, one of True, False, Unknown.
    pub status: ConditionStatus,
    /// LastTransitionTime -> timestamp for when the Namespace last transitioned from one status
    /// to another.
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

/// NamespaceOffloadingStatus defines the observed state of NamespaceOffloading.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceOffloadingStatus {
    /// RemoteNamespaceName is the remote namespace name chosen by means of the
    /// NamespaceMappingStrategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_namespace_name: Option<String>,
    /// OffloadingPhase -> informs users about namespaces offloading status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offloading_phase: Option<OffloadingPhase>,
    /// RemoteNamespacesConditions -> allows user to verify remote Namespaces' presence and
    /// status on all remote clusters through RemoteNamespaceCondition (keyed by cluster).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub remote_namespaces_conditions: BTreeMap<String, Vec<RemoteNamespaceCondition>>,
    /// The generation observed by the NamespaceOffloading controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
