//! The tenant namespace of a requesting cluster: found by its labels, else created, annotated
//! with this cluster's ID (`discovery.liqo.io/host-cluster-id`), which the consumer reads
//! through its new identity to check that the API server it was given is this cluster's. (A
//! namespace made by the controller-manager first carries the same annotation: it applies it.)

use std::collections::BTreeMap;

use control::{
    api::ClusterId,
    consts::{annotations, labels, values},
    names::NamespaceName,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::{
    Api, Client,
    api::{ListParams, ObjectMeta},
};

use super::{
    AuthError,
    write::{is_conflict, post},
};

/// The existing tenant namespace of cluster `id`, found by its labels
/// (`discovery.liqo.io/cluster-id=<id>`, `discovery.liqo.io/tenant-namespace=true`, as upstream
/// `tenantnamespace.GetNamespace`); the first by name when there are several.
pub(super) async fn find(client: &Client, id: &str) -> Result<Option<NamespaceName>, AuthError> {
    let selector = format!(
        "{}={id},{}={}",
        labels::CLUSTER_ID,
        labels::TENANT_NAMESPACE,
        values::TRUE
    );
    let list = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(AuthError::kube(format!(
            "listing the tenant namespaces of cluster {id}"
        )))?;
    let mut found: Vec<String> = list
        .items
        .into_iter()
        .filter_map(|ns| ns.metadata.name)
        .collect();
    found.sort();
    match found.into_iter().next() {
        None => Ok(None),
        Some(name) => name
            .parse()
            .map(Some)
            .map_err(|source| AuthError::NamespaceName {
                namespace: name,
                source,
            }),
    }
}

/// Creates the tenant namespace (annotated with this cluster's ID, `local`), or accepts it
/// when it exists for cluster `id`.
pub(super) async fn ensure(
    client: &Client,
    namespace: &NamespaceName,
    id: &str,
    local: &ClusterId,
) -> Result<(), AuthError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([
                (labels::CLUSTER_ID.to_owned(), id.to_owned()),
                (labels::TENANT_NAMESPACE.to_owned(), values::TRUE.to_owned()),
            ])),
            annotations: Some(BTreeMap::from([(
                annotations::HOST_CLUSTER_ID.to_owned(),
                local.to_string(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&post(), &ns).await {
        Ok(_) => {
            tracing::info!(%namespace, cluster_id = id, "created the tenant namespace");
            Ok(())
        }
        Err(e) if is_conflict(&e) => {
            let existing = api
                .get(namespace.as_str())
                .await
                .map_err(AuthError::kube(format!("reading namespace {namespace}")))?;
            let owner = existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::CLUSTER_ID));
            if owner.map(String::as_str) == Some(id) {
                Ok(())
            } else {
                Err(AuthError::NamespaceTaken {
                    namespace: namespace.to_string(),
                    cluster_id: id.to_owned(),
                })
            }
        }
        Err(e) => Err(AuthError::kube(format!("creating namespace {namespace}"))(
            e,
        )),
    }
}
