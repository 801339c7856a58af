//! The basic peering roles of an issued identity: the fixed basic ClusterRoles checked before
//! signing, then bound in the tenant namespace to the requesting cluster's user.

use std::collections::BTreeMap;

use control::{
    consts::labels,
    names::{self, NamespaceName},
    phase::RoleSet,
};
use k8s_openapi::api::rbac::v1::{ClusterRole, RoleBinding, RoleRef, Subject};
use kube::{Api, Client, api::ObjectMeta};

use super::{
    AuthError,
    write::{is_conflict, post},
};

/// The basic peering ClusterRoles, bound to every issued identity: fixed names (the `bind`
/// right of the service is on these names; a ClusterRole labelled `basic` by anyone else is
/// never bound).
const BASIC_CLUSTER_ROLES: [&str; 1] = [RoleSet::Basic.cluster_role()];

/// Each basic ClusterRole exists and carries the label of the basic set.
pub(super) async fn check_basic_roles(client: &Client) -> Result<(), AuthError> {
    let api = Api::<ClusterRole>::all(client.clone());
    for name in BASIC_CLUSTER_ROLES {
        let role = api
            .get_opt(name)
            .await
            .map_err(AuthError::kube(format!("reading ClusterRole {name}")))?;
        let labelled = role
            .as_ref()
            .and_then(|r| r.metadata.labels.as_ref())
            .and_then(|l| l.get(labels::REMOTE_PEERING_PERMISSIONS))
            .is_some_and(|v| v == RoleSet::Basic.label_value());
        if !labelled {
            return Err(AuthError::NoBasicRole { name });
        }
    }
    Ok(())
}

/// Binds the basic ClusterRoles in the tenant namespace to User `<id>` (RoleBinding
/// `liqo-binding-<ClusterRole>`); existing bindings are kept.
pub(super) async fn bind_basic_roles(
    client: &Client,
    namespace: &NamespaceName,
    id: &str,
) -> Result<(), AuthError> {
    let api: Api<RoleBinding> = Api::namespaced(client.clone(), namespace.as_str());
    for role_name in BASIC_CLUSTER_ROLES {
        let name = names::role_binding(role_name).map_err(AuthError::RoleName)?;
        let binding = RoleBinding {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                namespace: Some(namespace.to_string()),
                labels: Some(BTreeMap::from([(
                    labels::CLUSTER_ID.to_owned(),
                    id.to_owned(),
                )])),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: role_name.to_owned(),
            },
            subjects: Some(vec![Subject {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "User".into(),
                name: id.to_owned(),
                namespace: None,
            }]),
        };
        match api.create(&post(), &binding).await {
            Ok(_) => {}
            Err(e) if is_conflict(&e) => {}
            Err(e) => {
                return Err(AuthError::kube(format!(
                    "creating RoleBinding {namespace}/{name}"
                ))(e));
            }
        }
    }
    Ok(())
}
