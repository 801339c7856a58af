//! `sharing.liqo.io/v1alpha1`: ResourceOffer, what a provider makes available to a consumer
//! (accepting it creates the virtual node), as in upstream Liqo v0.5.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::core::v1::{ContainerImage, ResourceQuotaSpec},
    apimachinery::pkg::{api::resource::Quantity, apis::meta::v1::Time},
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ClusterId;

/// ResourceOfferSpec defines the desired state of ResourceOffer.
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "sharing.liqo.io",
    version = "v1alpha1",
    kind = "ResourceOffer",
    plural = "resourceoffers",
    namespaced,
    status = "ResourceOfferStatus",
    shortname = "offer",
    category = "liqo",
    derive = "PartialEq",
    doc = "ResourceOffer is the Schema for the resourceOffers API.",
    printcolumn = r#"{"name":"Status", "type":"string", "jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"VirtualKubeletStatus", "type":"string", "jsonPath":".status.virtualKubeletStatus"}"#,
    printcolumn = r#"{"name":"Local", "type":"string", "jsonPath":".metadata.labels.liqo\\.io/replication"}"#,
    printcolumn = r#"{"name":"Age", "type":"date", "jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ResourceOfferSpec {
    /// ClusterID is the identifier of the cluster that is sending this ResourceOffer.
    #[serde(rename = "clusterId")]
    pub cluster_id: ClusterId,
    /// Images is the list of the images already stored in the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ContainerImage>,
    /// ResourceQuota contains the quantity of resources made available by the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_quota: Option<ResourceQuotaSpec>,
    /// Labels contains the label to be added to the virtual node.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Prices contains the possible prices for every kind of resource (cpu, memory, image).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prices: BTreeMap<String, Quantity>,
    /// WithdrawalTimestamp is set when a graceful deletion is requested by the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub withdrawal_timestamp: Option<Time>,
    /// StorageClasses contains the list of the storage classes offered by the cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_classes: Vec<StorageType>,
}

/// StorageType defines the type of storage offered by a resource offer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageType {
    /// StorageClassName indicates the name of the storage class.
    pub storage_class_name: String,
    /// Default indicates whether this storage class is the default storage class for Liqo.
    #[serde(default)]
    pub default: bool,
}

/// Whether a ResourceOffer has been accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum OfferPhase {
    /// Not checked yet.
    #[default]
    Pending,
    /// Waiting for an administrator's decision.
    ManualActionRequired,
    /// Accepted: a virtual kubelet is created for the foreign cluster.
    Accepted,
    /// Refused.
    Refused,
}

/// The state of the virtual kubelet a ResourceOffer produced.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum VirtualKubeletStatus {
    /// Not created.
    #[default]
    None,
    /// Created.
    Created,
    /// Being deleted.
    Deleting,
}

/// ResourceOfferStatus defines the observed state of ResourceOffer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceOfferStatus {
    /// Phase is the status of this ResourceOffer. When the offer is created it is checked by
    /// the operator, which sets this field to "Accepted" or "Refused" on the base of cluster
    /// configuration. If the ResourceOffer is accepted a virtual-kubelet for the foreign
    /// cluster will be created.
    #[serde(default)]
    pub phase: OfferPhase,
    /// VirtualKubeletStatus indicates if the virtual-kubelet for this ResourceOffer has been
    /// created or not.
    #[serde(default)]
    pub virtual_kubelet_status: VirtualKubeletStatus,
}
