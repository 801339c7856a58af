//! `virtualkubelet.liqo.io/v1alpha1`: NamespaceMap (the namespaces wanted in one remote
//! cluster, and their state there) and ShadowPod (a pod the provider keeps alive on behalf of
//! the consumer), as in upstream Liqo v0.5.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// NamespaceMapSpec defines the desired state of NamespaceMap.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "virtualkubelet.liqo.io",
    version = "v1alpha1",
    kind = "NamespaceMap",
    plural = "namespacemaps",
    namespaced,
    status = "NamespaceMapStatus",
    category = "liqo",
    derive = "PartialEq",
    doc = "NamespaceMap is the Schema for the namespacemaps API.",
    printcolumn = r#"{"name":"Local", "type":"string", "jsonPath":".metadata.labels.liqo\\.io/replication"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceMapSpec {
    /// DesiredMapping is filled by NamespaceController when a user requires to offload a remote
    /// namespace: every entry maps a local namespace name (the key) to a remote namespace name
    /// (the value). When a new entry is created the NamespaceMap Controller tries to create the
    /// associated remote namespace.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub desired_mapping: BTreeMap<String, String>,
}

/// The state of a remote namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum MappingPhase {
    /// The remote namespace has been created.
    Accepted,
    /// The remote namespace cannot be created at the moment (e.g. it exists, unmanaged).
    CreationLoopBackOff,
    /// The remote namespace is being deleted.
    Terminating,
}

/// RemoteNamespaceStatus contains some information about remote namespace status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoteNamespaceStatus {
    /// RemoteNamespace is the name chosen by the user at creation time according to
    /// NamespaceMappingStrategy
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_namespace: Option<String>,
    /// Phase is the remote Namespace's actual status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MappingPhase>,
}

/// NamespaceMapStatus defines the observed state of NamespaceMap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NamespaceMapStatus {
    /// CurrentMapping is filled by NamespaceMap Controller, when a new remote namespace's
    /// creation is requested. The key is the local namespace name, while the value is a summary
    /// of new remote namespace's status.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub current_mapping: BTreeMap<String, RemoteNamespaceStatus>,
}

/// ShadowPodSpec defines the desired state of ShadowPod.
#[derive(CustomResource, Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "virtualkubelet.liqo.io",
    version = "v1alpha1",
    kind = "ShadowPod",
    plural = "shadowpods",
    namespaced,
    category = "liqo",
    derive = "PartialEq",
    doc = "ShadowPod is the Schema for the Shadowpods API."
)]
#[serde(rename_all = "camelCase")]
pub struct ShadowPodSpec {
    /// Pod contains the complete Kubernetes pod specification.
    #[schemars(schema_with = "super::schema::opaque_object")]
    pub pod: PodSpec,
}
