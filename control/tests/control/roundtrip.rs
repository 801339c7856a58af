//! Every kind, field for field: a sample object written as upstream Liqo v0.5 writes it (and as
//! the docs show it) parses into the Rust type and serializes back to the same document.

use control::api::{
    discovery::{
        ForeignCluster, NetworkingEnabled, PeeringConditionStatus, PeeringConditionType,
        PeeringEnabled, ResourceRequest,
    },
    net::{ConnectionStatus, NetworkConfig, TunnelEndpoint},
    offloading::{NamespaceMappingStrategy, NamespaceOffloading, PodOffloadingStrategy},
    sharing::{OfferPhase, ResourceOffer},
    virtualkubelet::{MappingPhase, NamespaceMap, ShadowPod},
};
use serde::{Serialize, de::DeserializeOwned};
use serde_json::Value;

/// Parses `sample` as `T`, writes it back, and checks both documents hold the same data.
fn round_trip<T: DeserializeOwned + Serialize>(sample: &str) -> T {
    let typed: T = serde_saphyr::from_str(sample).unwrap();
    let written = serde_saphyr::to_string(&typed).unwrap();
    let before: Value = serde_saphyr::from_str(sample).unwrap();
    let after: Value = serde_saphyr::from_str(&written).unwrap();
    assert_eq!(before, after, "written back as:\n{written}");
    typed
}

const FOREIGN_CLUSTER: &str = include_str!("fixtures/foreigncluster.yaml");

#[test]
fn foreign_cluster() {
    let fc: ForeignCluster = round_trip(FOREIGN_CLUSTER);
    assert_eq!(fc.spec.cluster_identity.cluster_id.short(), "b07938e3");
    assert_eq!(fc.spec.outgoing_peering_enabled, PeeringEnabled::Yes);
    assert_eq!(fc.spec.networking_enabled, NetworkingEnabled::Yes);
    let status = fc.status.unwrap();
    use PeeringConditionType::*;
    assert_eq!(
        status.condition(OutgoingPeering),
        PeeringConditionStatus::Established
    );
    assert_eq!(
        status.condition(IncomingPeering),
        PeeringConditionStatus::None
    );
    assert_eq!(
        status.condition(ProcessForeignClusterStatus),
        PeeringConditionStatus::None
    );
}

#[test]
fn foreign_cluster_defaults() {
    let fc: ForeignCluster = serde_saphyr::from_str(
        "apiVersion: discovery.liqo.io/v1alpha1\nkind: ForeignCluster\nmetadata: {name: naples}\n\
         spec:\n  clusterIdentity: {clusterID: naples-id, clusterName: naples}\n  \
         foreignAuthUrl: https://10.0.0.1:443\n",
    )
    .unwrap();
    assert_eq!(fc.spec.outgoing_peering_enabled, PeeringEnabled::Auto);
    assert_eq!(fc.spec.incoming_peering_enabled, PeeringEnabled::Auto);
    assert_eq!(fc.spec.networking_enabled, NetworkingEnabled::Yes);
    assert!(fc.spec.insecure_skip_tls_verify);
    assert_eq!(fc.spec.ttl, None);
}

#[test]
fn foreign_cluster_rejects_malformed_ids() {
    let bad = FOREIGN_CLUSTER.replace("clusterName: milan", "clusterName: Milan");
    assert!(serde_saphyr::from_str::<ForeignCluster>(&bad).is_err());
}

#[test]
fn resource_request() {
    let rr: ResourceRequest = round_trip(include_str!("fixtures/resourcerequest.yaml"));
    assert_eq!(rr.spec.cluster_identity.cluster_name.as_str(), "rome");
}

#[test]
fn resource_offer() {
    let offer: ResourceOffer = round_trip(include_str!("fixtures/resourceoffer.yaml"));
    assert_eq!(offer.status.unwrap().phase, OfferPhase::Accepted);
    assert_eq!(offer.spec.storage_classes[0].storage_class_name, "standard");
}

#[test]
fn network_config() {
    let nc: NetworkConfig = round_trip(include_str!("fixtures/networkconfig.yaml"));
    assert_eq!(nc.spec.pod_cidr.to_string(), "10.200.0.0/16");
    let status = nc.status.unwrap();
    assert_eq!(status.pod_cidr_nat.unwrap().to_string(), "10.71.0.0/16");
    assert_eq!(status.external_cidr_nat.unwrap().0, None);
}

#[test]
fn tunnel_endpoint() {
    let tep: TunnelEndpoint = round_trip(include_str!("fixtures/tunnelendpoint.yaml"));
    assert_eq!(tep.spec.local_nat_external_cidr.0, None);
    let remote = tep.spec.remote_nat_pod_cidr.or(tep.spec.remote_pod_cidr);
    assert_eq!(remote.to_string(), "10.68.0.0/16");
    let connection = tep.status.unwrap().connection.unwrap();
    assert_eq!(connection.status, Some(ConnectionStatus::Connected));
}

#[test]
fn tunnel_endpoint_nat_defaults_to_none() {
    let tep: TunnelEndpoint = serde_saphyr::from_str(
        "apiVersion: net.liqo.io/v1alpha1\nkind: TunnelEndpoint\nmetadata: {name: t}\nspec:\n  \
         clusterID: c1\n  localPodCIDR: 10.0.0.0/16\n  localExternalCIDR: 10.1.0.0/16\n  \
         remotePodCIDR: 10.2.0.0/16\n  remoteExternalCIDR: 10.3.0.0/16\n  endpointIP: 1.2.3.4\n  \
         backendType: wireguard\n  backend_config: {}\n",
    )
    .unwrap();
    let written = serde_json::to_value(&tep.spec).unwrap();
    for field in [
        "localNATPodCIDR",
        "localNATExternalCIDR",
        "remoteNATPodCIDR",
        "remoteNATExternalCIDR",
    ] {
        assert_eq!(written[field], "None", "{field}");
    }
}

/// The docs' example (liqo-demo offloaded to the south region, both clusters' conditions).
const NAMESPACE_OFFLOADING: &str = include_str!("fixtures/namespaceoffloading.yaml");

#[test]
fn namespace_offloading() {
    let nsof: NamespaceOffloading = round_trip(NAMESPACE_OFFLOADING);
    assert_eq!(
        nsof.spec.namespace_mapping_strategy,
        NamespaceMappingStrategy::EnforceSameName
    );
    let selector = nsof.spec.cluster_selector.unwrap();
    let expression = &selector.node_selector_terms[0]
        .match_expressions
        .as_ref()
        .unwrap()[0];
    assert_eq!(expression.operator, "In");
    assert_eq!(
        nsof.status.unwrap().remote_namespaces_conditions["naples-7881be"].len(),
        2
    );
}

#[test]
fn namespace_offloading_defaults() {
    let nsof: NamespaceOffloading = serde_saphyr::from_str(
        "apiVersion: offloading.liqo.io/v1alpha1\nkind: NamespaceOffloading\n\
         metadata: {name: offloading, namespace: foo}\nspec: {}\n",
    )
    .unwrap();
    assert_eq!(
        nsof.spec.namespace_mapping_strategy,
        NamespaceMappingStrategy::DefaultName
    );
    assert_eq!(
        nsof.spec.pod_offloading_strategy,
        PodOffloadingStrategy::LocalAndRemote
    );
    assert_eq!(nsof.spec.cluster_selector, None);
}

#[test]
fn namespace_offloading_rejects_unknown_strategy() {
    let bad = NAMESPACE_OFFLOADING.replace(
        "podOffloadingStrategy: LocalAndRemote",
        "podOffloadingStrategy: Anywhere",
    );
    assert!(serde_saphyr::from_str::<NamespaceOffloading>(&bad).is_err());
}

#[test]
fn namespace_map() {
    let map: NamespaceMap = round_trip(include_str!("fixtures/namespacemap.yaml"));
    assert_eq!(
        map.status.unwrap().current_mapping["foo"].phase,
        Some(MappingPhase::CreationLoopBackOff)
    );
}

#[test]
fn shadow_pod() {
    let shadow: ShadowPod = round_trip(include_str!("fixtures/shadowpod.yaml"));
    assert_eq!(shadow.spec.pod.containers[0].name, "nginx");
}
