//! The generated CRDs: names, scopes, printer columns, enums, defaults and required fields.

use crate::common;

use common::{crd, field, schema};
use control::api::{NODE_SELECTOR_OPERATORS, crds};

#[test]
fn groups_versions_kinds_and_names() {
    let expected = [
        (
            "ForeignCluster",
            "discovery.liqo.io",
            "foreignclusters",
            "Cluster",
            Some("fc"),
        ),
        (
            "ResourceRequest",
            "discovery.liqo.io",
            "resourcerequests",
            "Namespaced",
            None,
        ),
        (
            "ResourceOffer",
            "sharing.liqo.io",
            "resourceoffers",
            "Namespaced",
            Some("offer"),
        ),
        (
            "NetworkConfig",
            "net.liqo.io",
            "networkconfigs",
            "Namespaced",
            None,
        ),
        (
            "TunnelEndpoint",
            "net.liqo.io",
            "tunnelendpoints",
            "Namespaced",
            None,
        ),
        (
            "NamespaceOffloading",
            "offloading.liqo.io",
            "namespaceoffloadings",
            "Namespaced",
            Some("nsof"),
        ),
        (
            "NamespaceMap",
            "virtualkubelet.liqo.io",
            "namespacemaps",
            "Namespaced",
            None,
        ),
        (
            "ShadowPod",
            "virtualkubelet.liqo.io",
            "shadowpods",
            "Namespaced",
            None,
        ),
    ];
    assert_eq!(crds().len(), expected.len());
    for (kind, group, plural, scope, short) in expected {
        let crd = crd(kind);
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some(format!("{plural}.{group}").as_str())
        );
        assert_eq!(crd.spec.group, group);
        assert_eq!(crd.spec.names.plural, plural);
        assert_eq!(crd.spec.scope, scope, "{kind}");
        assert_eq!(
            crd.spec
                .names
                .short_names
                .as_deref()
                .and_then(|s| s.first())
                .map(String::as_str),
            short
        );
        assert_eq!(
            crd.spec.names.categories,
            Some(vec!["liqo".to_owned()]),
            "{kind}"
        );
        let [version] = crd.spec.versions.as_slice() else {
            panic!("{kind}: one version")
        };
        assert_eq!(
            (version.name.as_str(), version.served, version.storage),
            ("v1alpha1", true, true)
        );
        let has_status = version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some());
        assert_eq!(
            has_status,
            kind != "ShadowPod",
            "{kind}: status subresource"
        );
    }
}

#[test]
fn foreign_cluster_columns_as_kubectl_shows_them() {
    let crd = crd("ForeignCluster");
    let columns = crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap();
    let default: Vec<_> = columns
        .iter()
        .filter(|c| c.priority.unwrap_or(0) == 0)
        .map(|c| c.name.to_uppercase())
        .collect();
    assert_eq!(
        default,
        [
            "OUTGOING PEERING",
            "INCOMING PEERING",
            "NETWORKING",
            "AUTHENTICATION",
            "AGE"
        ]
    );
    let path = |name: &str| {
        columns
            .iter()
            .find(|c| c.name == name)
            .unwrap()
            .json_path
            .clone()
    };
    assert_eq!(
        path("Outgoing peering"),
        ".status.peeringConditions[?(@.type == 'OutgoingPeering')].status"
    );
    assert_eq!(
        path("Networking"),
        ".status.peeringConditions[?(@.type == 'NetworkStatus')].status"
    );
    assert_eq!(
        path("Authentication"),
        ".status.peeringConditions[?(@.type == 'AuthenticationStatus')].status"
    );
    assert_eq!(path("Age"), ".metadata.creationTimestamp");
}

#[test]
fn pod_offloading_strategy_is_an_enum_with_default() {
    let strategy = field("NamespaceOffloading", "spec.podOffloadingStrategy");
    assert_eq!(strategy["type"], "string");
    assert_eq!(
        strategy["enum"],
        serde_json::json!(["Local", "Remote", "LocalAndRemote"])
    );
    assert_eq!(strategy["default"], "LocalAndRemote");
}

#[test]
fn namespace_mapping_strategy_is_an_immutable_enum_with_default() {
    let strategy = field("NamespaceOffloading", "spec.namespaceMappingStrategy");
    assert_eq!(
        strategy["enum"],
        serde_json::json!(["EnforceSameName", "DefaultName"])
    );
    assert_eq!(strategy["default"], "DefaultName");
    assert_eq!(
        strategy["x-kubernetes-validations"][0]["rule"],
        "self == oldSelf"
    );
    let root = schema("NamespaceOffloading");
    assert_eq!(
        root["x-kubernetes-validations"][0]["rule"],
        "self.metadata.name == 'offloading'"
    );
}

#[test]
fn cluster_selector_requires_a_key_and_a_known_operator() {
    let selector = field("NamespaceOffloading", "spec.clusterSelector");
    assert_eq!(
        selector["required"],
        serde_json::json!(["nodeSelectorTerms"])
    );
    let term = &selector["properties"]["nodeSelectorTerms"]["items"]["properties"];
    for list in ["matchExpressions", "matchFields"] {
        let requirement = &term[list]["items"];
        assert_eq!(
            requirement["required"],
            serde_json::json!(["key", "operator"]),
            "{list}"
        );
        assert_eq!(
            requirement["properties"]["operator"]["enum"],
            serde_json::json!(NODE_SELECTOR_OPERATORS)
        );
        assert_eq!(requirement["properties"]["key"]["minLength"], 1);
    }
}

#[test]
fn defaults() {
    let expected = [
        (
            "ForeignCluster",
            "spec.outgoingPeeringEnabled",
            serde_json::json!("Auto"),
        ),
        (
            "ForeignCluster",
            "spec.incomingPeeringEnabled",
            serde_json::json!("Auto"),
        ),
        (
            "ForeignCluster",
            "spec.networkingEnabled",
            serde_json::json!("Yes"),
        ),
        (
            "ForeignCluster",
            "spec.insecureSkipTLSVerify",
            serde_json::json!(true),
        ),
        (
            "ResourceRequest",
            "status.offerState",
            serde_json::json!("None"),
        ),
        (
            "ResourceOffer",
            "status.phase",
            serde_json::json!("Pending"),
        ),
        (
            "ResourceOffer",
            "status.virtualKubeletStatus",
            serde_json::json!("None"),
        ),
        (
            "NetworkConfig",
            "status.processed",
            serde_json::json!(false),
        ),
        (
            "TunnelEndpoint",
            "spec.localNATPodCIDR",
            serde_json::json!("None"),
        ),
        (
            "TunnelEndpoint",
            "spec.localNATExternalCIDR",
            serde_json::json!("None"),
        ),
        (
            "TunnelEndpoint",
            "spec.remoteNATPodCIDR",
            serde_json::json!("None"),
        ),
        (
            "TunnelEndpoint",
            "spec.remoteNATExternalCIDR",
            serde_json::json!("None"),
        ),
        (
            "NamespaceOffloading",
            "spec.podOffloadingStrategy",
            serde_json::json!("LocalAndRemote"),
        ),
        (
            "NamespaceOffloading",
            "spec.namespaceMappingStrategy",
            serde_json::json!("DefaultName"),
        ),
    ];
    for (kind, path, default) in expected {
        assert_eq!(field(kind, path)["default"], default, "{kind} {path}");
    }
    let conditions = field("ForeignCluster", "status.peeringConditions");
    assert_eq!(
        conditions["items"]["properties"]["status"]["default"],
        "None"
    );
}

#[test]
fn required_fields() {
    let required = |kind: &str, path: &str| field(kind, path)["required"].clone();
    assert_eq!(
        required("ForeignCluster", "spec"),
        serde_json::json!(["clusterIdentity", "foreignAuthUrl"])
    );
    assert_eq!(
        required("ForeignCluster", "spec.clusterIdentity"),
        serde_json::json!(["clusterID", "clusterName"])
    );
    assert_eq!(
        required("ResourceOffer", "spec"),
        serde_json::json!(["clusterId"])
    );
    assert_eq!(required("ShadowPod", "spec"), serde_json::json!(["pod"]));
    let spec = required("NetworkConfig", "spec");
    for name in [
        "cluster",
        "podCIDR",
        "externalCIDR",
        "endpointIP",
        "backendType",
        "backend_config",
    ] {
        assert!(
            spec.as_array().unwrap().contains(&name.into()),
            "NetworkConfig {name}"
        );
    }
}
