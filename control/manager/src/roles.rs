//! The peering RoleBindings (§1.3): the chart's peering ClusterRoles, by their fixed names,
//! bound in a tenant namespace to the peer's user (its cluster ID) as
//! `liqo-binding-<ClusterRole>`.

use std::collections::{BTreeMap, BTreeSet};

use control::{api::discovery::ForeignCluster, consts::labels, names, phase::RoleSet};
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::{
    Api, ResourceExt,
    api::{DeleteParams, ListParams},
};
use serde_json::json;

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::apply,
    kit::not_found,
};

/// The peering ClusterRoles by set: the chart's, by their fixed names ([`RoleSet::cluster_role`];
/// our `bind` right names exactly these).
pub fn peering_roles() -> BTreeMap<RoleSet, Vec<String>> {
    RoleSet::ALL
        .into_iter()
        .map(|set| (set, vec![set.cluster_role().to_owned()]))
        .collect()
}

/// The sets whose ClusterRoles all have their RoleBinding in the tenant namespace.
pub async fn bound_sets(
    ctx: &Context,
    tenant: &str,
    roles: &BTreeMap<RoleSet, Vec<String>>,
) -> Result<BTreeSet<RoleSet>, Error> {
    let api: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), tenant);
    let present: BTreeSet<String> = api
        .list(&ListParams::default())
        .await
        .map_err(kerr(format!("list RoleBindings in {tenant}")))?
        .items
        .into_iter()
        .map(|b| b.name_any())
        .collect();
    let mut bound = BTreeSet::new();
    for (set, roles) in roles {
        let mut all = !roles.is_empty();
        for role in roles {
            let binding = names::role_binding(role).map_err(|e| Error::Name(Box::new(e)))?;
            all &= present.contains(binding.as_str());
        }
        if all {
            bound.insert(*set);
        }
    }
    Ok(bound)
}

/// Binds a set's ClusterRoles to the peer's user.
pub async fn bind(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    roles: Option<&Vec<String>>,
) -> Result<(), Error> {
    let api: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), tenant);
    for role in roles.into_iter().flatten() {
        let name = names::role_binding(role)
            .map_err(|e| Error::Name(Box::new(e)))?
            .to_string();
        let object = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": tenant,
                "labels": {labels::CLUSTER_ID: fc.spec.cluster_identity.cluster_id.as_str()}},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                "name": fc.spec.cluster_identity.cluster_id.as_str()}],
        });
        apply(&api, &name, &object).await?;
    }
    Ok(())
}

/// Deletes a set's RoleBindings.
pub async fn unbind(ctx: &Context, tenant: &str, roles: Option<&Vec<String>>) -> Result<(), Error> {
    let api: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), tenant);
    for role in roles.into_iter().flatten() {
        let name = names::role_binding(role)
            .map_err(|e| Error::Name(Box::new(e)))?
            .to_string();
        api.delete(&name, &DeleteParams::default())
            .await
            .map(drop)
            .or_else(not_found)
            .map_err(kerr(format!("delete RoleBinding {tenant}/{name}")))?;
    }
    Ok(())
}
