//! The constants hold what Kubernetes accepts: labels, annotations, finalizers and names.

use std::collections::BTreeSet;

use super::*;
use crate::{
    names::{validate_label, validate_subdomain},
    selector::label_key_problem,
};

const LABELS: &[&str] = &[
    labels::CLUSTER_ID,
    labels::TENANT_NAMESPACE,
    labels::LOCAL_IDENTITY,
    labels::CERTIFICATE_AVAILABLE,
    labels::AUTH_TOKEN,
    labels::REMOTE_TENANT_CSR,
    labels::DISCOVERY_TYPE,
    labels::REPLICATION,
    labels::REPLICATED,
    labels::REMOTE_ID,
    labels::ORIGIN_ID,
    labels::OWNERSHIP,
    labels::REMOTE_PEERING_PERMISSIONS,
    labels::APP_NAME,
    labels::NODE_TYPE,
    labels::REMOTE_CLUSTER_ID,
    labels::OFFLOADED_ORIGIN,
    labels::SHADOW_POD,
    reflection::DESTINATION,
    reflection::MANAGED_BY,
    annotations::CERTIFICATE_EXPIRE_TIME,
    annotations::HOST_CLUSTER_ID,
    annotations::VERIFIED_CLUSTER_ID,
    annotations::LAST_PROOF_TIME,
    net::ROTATE_KEY_ANNOTATION,
    net::KEY_ROTATED_ANNOTATION,
    net::KEY_SINCE_ANNOTATION,
    finalizers::CRD_REPLICATOR,
    finalizers::VIRTUAL_KUBELET,
    finalizers::VIRTUAL_NODE,
    offloading::SCHEDULING_ENABLED,
    offloading::MANAGED_BY_NAMESPACE_MAP,
    offloading::ORIGINAL_NAME,
    offloading::NAMESPACE_OFFLOADING_FINALIZER,
    offloading::NAMESPACE_MAP_FINALIZER,
    offloading::VIRTUAL_NODE_CONTROLLER_FINALIZER,
    virtual_node::NOT_ALLOWED_TAINT,
    virtual_node::STORAGE_AVAILABLE,
    virtual_node::HOSTNAME,
    virtual_node::ROLE,
    virtual_node::OS,
    virtual_node::ARCH,
    virtual_node::EXCLUDE_FROM_EXTERNAL_LB,
    virtual_node::EXCLUDE_BALANCER_ALPHA,
    storage::PROVISIONER,
    storage::VIRTUAL_PVC_NAMESPACE,
    storage::VIRTUAL_PVC_NAME,
    storage::SELECTED_NODE,
    storage::STORAGE_PROVISIONER,
    storage::BETA_STORAGE_PROVISIONER,
    storage::PROVISIONED_BY,
];

/// Label keys, annotation keys and finalizers are qualified names, as Kubernetes checks them
/// (an optional DNS subdomain prefix and `/`, then 1 to 63 of `[A-Za-z0-9_.-]` starting and
/// ending with an alphanumeric): the check of label keys, [`label_key_problem`].
#[test]
fn keys_are_qualified_names() {
    for key in LABELS {
        label_key_problem(key).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
    // The replicator's finalizer has no '/' (upstream's spelling): the apiserver accepts
    // it as a prefix-less qualified name and only warns.
    assert!(label_key_problem("bad key/").is_err());
    assert!(label_key_problem("-x").is_err());
}

#[test]
fn every_string_is_defined_once() {
    let all: Vec<&str> = LABELS
        .iter()
        .copied()
        .chain([
            objects::LIQO_NAMESPACE,
            objects::CLUSTER_ID_CONFIGMAP,
            objects::AUTH_TOKEN_SECRET,
            objects::REMOTE_CERTIFICATE_SECRET,
            objects::AUTH_SERVICE,
            objects::PROXY_SERVICE,
            objects::IDENTITY_GENERATE_NAME,
            objects::REMOTE_TOKEN_PREFIX,
            objects::TENANT_NAMESPACE_PREFIX,
            objects::VIRTUAL_NODE_PREFIX,
            objects::MANAGER_LEADER_LEASE,
            objects::ROLE_BINDING_PREFIX,
            keys::CLUSTER_ID,
            keys::CLUSTER_NAME,
            keys::TOKEN,
            keys::PRIVATE_KEY,
            keys::CSR,
            keys::CERTIFICATE,
            keys::API_SERVER_URL,
            keys::API_SERVER_CA,
            keys::NAMESPACE,
            keys::PROXY_URL,
            auth::IDS_PATH,
            auth::CERTIFICATE_PATH,
            auth::CSR_SIGNER,
            auth::CSR_ORGANIZATION,
            net::TEP_CLUSTER_ID_LABEL,
            net::KEY_LABEL,
            net::WIREGUARD,
            net::PUBLIC_KEY_SECRET,
            net::PRIVATE_KEY_SECRET,
            net::PUBLIC_KEY,
            net::PRIVATE_KEY,
            net::PORT,
            net::GATEWAY_SERVICE_LABEL,
            net::GATEWAY_NODE_IP_ANNOTATION,
            net::GATEWAY_LEASE,
            net::NETWORK_MANAGER_FINALIZER,
            net::GATEWAY_FINALIZER,
            net::ROUTE_FINALIZER,
            net::REFUSED_ANNOTATION,
            net::REFUSED_SPEC_ANNOTATION,
            offloading::VIRTUAL_KUBELET_REMOTE_CLUSTER_ROLE,
            webhook::CONFIGURATION,
            webhook::POD_WEBHOOK,
            webhook::NSOFF_WEBHOOK,
            webhook::POD_PATH,
            webhook::NSOFF_PATH,
            webhook::CERTS_SECRET,
        ])
        .collect();
    let unique: BTreeSet<&str> = all.iter().copied().collect();
    assert_eq!(unique.len(), all.len(), "a string defined twice in {all:?}");
}

#[test]
fn fixed_names_are_kubernetes_names() {
    validate_label(objects::LIQO_NAMESPACE).unwrap();
    for name in [
        objects::CLUSTER_ID_CONFIGMAP,
        objects::AUTH_TOKEN_SECRET,
        objects::REMOTE_CERTIFICATE_SECRET,
        objects::AUTH_SERVICE,
    ] {
        validate_subdomain(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // Prefixes end with '-' and become valid names once something follows.
    for prefix in [
        objects::IDENTITY_GENERATE_NAME,
        objects::REMOTE_TOKEN_PREFIX,
        objects::TENANT_NAMESPACE_PREFIX,
        objects::VIRTUAL_NODE_PREFIX,
        objects::ROLE_BINDING_PREFIX,
    ] {
        validate_label(&format!("{prefix}x")).unwrap_or_else(|e| panic!("{prefix}: {e}"));
    }
}
