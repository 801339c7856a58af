//! The ForeignCluster controller's I/O (§1.2 step 3): reads what [`crate::decide::fc`] needs,
//! talks to the peer's auth service, writes the decisions and the status.

use std::{collections::BTreeSet, sync::Arc, time::Duration};

use control::{
    api::{
        discovery::{
            ForeignCluster, ForeignClusterStatus, PeeringConditionType, ResourceRequest,
            TenantNamespace,
        },
        sharing::ResourceOffer,
    },
    conditions::{self, Authentication, Condition, Peering, Process},
    consts::{annotations, discovery_types, labels, values},
    names,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams},
    runtime::controller::Action as Requeue,
};
use serde_json::json;

use crate::{
    context::{Context, apply, apply_status, controller_ref, now},
    decide::fc::{self as decide, Action, Observed, RequestState, TunnelState},
    error::{Error, kube as kerr},
    roles,
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "foreigncluster";

pub use crate::fc_auth::AUTH_RETRY;

/// One reconcile of a ForeignCluster.
pub async fn reconcile(fc: Arc<ForeignCluster>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let name = fc.name_any();
    let api: Api<ForeignCluster> = Api::all(ctx.client.clone());
    let now = now();
    let peer = fc.spec.cluster_identity.clone();
    let mut old = fc.status.clone().unwrap_or_default();
    let mut status = old.clone();

    // a. Validation.
    let all = api
        .list(&ListParams::default())
        .await
        .map_err(kerr("list ForeignClusters"))?;
    let key = |f: &ForeignCluster| (f.creation_timestamp().map(|t| t.0), f.name_any());
    let older_duplicate = all.items.iter().any(|o| {
        o.name_any() != name
            && o.spec.cluster_identity.cluster_id == peer.cluster_id
            && key(o) < key(&fc)
    });
    let process = decide::process(&peer.cluster_id, &ctx.local.cluster_id, older_duplicate);
    conditions::set(
        &mut status.peering_conditions,
        Condition::Process(process),
        &now,
    );
    if process != Process::Processable {
        write_status(&api, &name, &old, &status).await?;
        return Ok(Requeue::requeue(ctx.settings.resync));
    }
    if fc.labels().get(labels::CLUSTER_ID) != Some(&peer.cluster_id.to_string()) {
        let patch = json!({
            "apiVersion": ForeignCluster::api_version(&()), "kind": ForeignCluster::kind(&()),
            "metadata": {"name": name, "labels": {labels::CLUSTER_ID: peer.cluster_id.as_str()}},
        });
        apply(&api, &name, &patch).await?;
    }

    // c. Our tenant namespace for the peer.
    let tenant = names::tenant_namespace(&peer).to_string();
    let ns_api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(ctx.client.clone());
    let ns = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": tenant, "labels": {
            labels::CLUSTER_ID: peer.cluster_id.as_str(),
            labels::TENANT_NAMESPACE: values::TRUE,
        }, "annotations": {
            // The peer checks with it that the API server behind its identity is ours.
            annotations::HOST_CLUSTER_ID: ctx.local.cluster_id.as_str(),
        }},
    });
    apply(&ns_api, &tenant, &ns).await?;
    let tenants = status
        .tenant_namespace
        .get_or_insert_with(TenantNamespace::default);
    tenants.local = Some(tenant.clone());

    // d. Our identity at the peer; e. its tenant namespace for us.
    let old_remote = old.tenant_namespace.as_ref().and_then(|t| t.remote.clone());
    let outcome = {
        let (api, name, old, status, now) = (&api, &name, &mut old, &mut status, &now);
        crate::fc_auth::identity(&ctx, &fc, &tenant, old_remote.as_deref(), || async move {
            // Every request is first recorded as Pending: its answer is then a new
            // transition, which liqoctl tells from an answer to an earlier attempt.
            conditions::set(
                &mut status.peering_conditions,
                Condition::Authentication(Authentication::Pending),
                now,
            );
            write_status(api, name, old, status).await?;
            *old = status.clone();
            Ok(())
        })
        .await?
    };
    conditions::set(&mut status.peering_conditions, outcome.condition, &now);
    let remote = outcome.remote;
    status
        .tenant_namespace
        .get_or_insert_with(TenantNamespace::default)
        .remote = remote.clone();

    // f.–h. The peering.
    let observed = observe(&ctx, &fc, &tenant, remote.is_some(), now.0).await?;
    let roles = roles::peering_roles();
    let bound = roles::bound_sets(&ctx, &tenant, &roles).await?;
    let observed = Observed { bound, ..observed };
    let mut requeue = ctx
        .settings
        .resync
        .min(outcome.recheck.unwrap_or(Duration::MAX));
    for action in decide::decide(&observed) {
        match action {
            Action::ApplyRequest => apply_request(&ctx, &fc, &tenant, None).await?,
            Action::WithdrawRequest => apply_request(&ctx, &fc, &tenant, Some(&now)).await?,
            Action::DeleteRequest => {
                let rr_api: Api<ResourceRequest> = Api::namespaced(ctx.client.clone(), &tenant);
                let rr = names::resource_request(&ctx.local.cluster_name);
                rr_api
                    .delete(rr.as_str(), &DeleteParams::default())
                    .await
                    .map(drop)
                    .or_else(not_found)
                    .map_err(kerr(format!("delete ResourceRequest {tenant}/{rr}")))?;
            }
            Action::SetCondition(c) => {
                conditions::set(&mut status.peering_conditions, c, &now);
            }
            Action::SetNetwork(c) => {
                conditions::set(&mut status.peering_conditions, c, &now);
            }
            Action::RecheckAfter(d) => requeue = requeue.min(d),
            Action::Bind(set) => roles::bind(&ctx, &fc, &tenant, roles.get(&set)).await?,
            Action::Unbind(set) => roles::unbind(&ctx, &tenant, roles.get(&set)).await?,
        }
    }
    write_status(&api, &name, &old, &status).await?;
    // i. A ForeignCluster made for an incoming peering goes once neither direction is left.
    let discovered = fc.labels().get(labels::DISCOVERY_TYPE).map(String::as_str)
        == Some(discovery_types::INCOMING_PEERING);
    let direction = |t| {
        conditions::get(&status.peering_conditions, t)
            .and_then(Condition::read)
            .and_then(|c| match c {
                Condition::Outgoing(p) | Condition::Incoming(p) => Some(p),
                _ => None,
            })
            .unwrap_or(Peering::None)
    };
    if decide::delete_discovered(
        discovered,
        observed.deleting,
        direction(PeeringConditionType::OutgoingPeering),
        direction(PeeringConditionType::IncomingPeering),
    ) {
        tracing::info!(%name, "no peering left with a cluster that peered with us: deleting its ForeignCluster");
        api.delete(&name, &DeleteParams::default())
            .await
            .map(drop)
            .or_else(not_found)
            .map_err(kerr(format!("delete ForeignCluster {name}")))?;
    }
    Ok(Requeue::requeue(requeue))
}

/// Errors other than 404 (a delete of something already gone is done).
pub fn not_found(e: kube::Error) -> Result<(), kube::Error> {
    match &e {
        kube::Error::Api(s) if s.code == 404 => Ok(()),
        _ => Err(e),
    }
}

async fn write_status(
    api: &Api<ForeignCluster>,
    name: &str,
    old: &ForeignClusterStatus,
    new: &ForeignClusterStatus,
) -> Result<(), Error> {
    if old == new {
        return Ok(());
    }
    let value = serde_json::to_value(new).expect("a status serializes");
    match apply_status(api, name, &value).await {
        // Deleted meanwhile (its last finalizer gone): nothing to record.
        Err(e) if e.is_not_found() => Ok(()),
        other => other.map(drop),
    }
}

fn request_state(rr: &ResourceRequest) -> RequestState {
    let status = rr.status.clone().unwrap_or_default();
    RequestState {
        deleting: rr.meta().deletion_timestamp.is_some(),
        withdrawing: rr.spec.withdrawal_timestamp.is_some(),
        offer_state: status.offer_state,
        offer_withdrawn: status.offer_withdrawal_timestamp.is_some(),
    }
}

fn is(obj: &impl Resource, key: &str, value: &str) -> bool {
    obj.meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .is_some_and(|v| v == value)
}

/// The requests and offers of both directions, in our tenant namespace.
async fn observe(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    remote_tenant_known: bool,
    now: k8s_openapi::jiff::Timestamp,
) -> Result<Observed, Error> {
    let peer = &fc.spec.cluster_identity;
    let rr_api: Api<ResourceRequest> = Api::namespaced(ctx.client.clone(), tenant);
    let ro_api: Api<ResourceOffer> = Api::namespaced(ctx.client.clone(), tenant);
    let ours = names::resource_request(&ctx.local.cluster_name);
    let theirs = names::resource_request(&peer.cluster_name);
    let get_rr = |n: String| {
        let api = rr_api.clone();
        async move {
            api.get_opt(&n)
                .await
                .map_err(kerr(format!("get ResourceRequest {n}")))
        }
    };
    let get_ro = |n: String| {
        let api = ro_api.clone();
        async move {
            api.get_opt(&n)
                .await
                .map_err(kerr(format!("get ResourceOffer {n}")))
        }
    };
    let request = get_rr(ours.to_string())
        .await?
        .filter(|r| is(r, labels::REPLICATION, values::TRUE));
    let request_from_peer = get_rr(theirs.to_string()).await?.filter(|r| {
        is(r, labels::REPLICATED, values::TRUE)
            && is(r, labels::ORIGIN_ID, peer.cluster_id.as_str())
    });
    // The offer the peer made us is named after the peer; ours to it after us.
    let offer_from_peer = get_ro(names::resource_offer(&peer.cluster_name).to_string())
        .await?
        .filter(|o| {
            is(o, labels::REPLICATED, values::TRUE)
                && is(o, labels::ORIGIN_ID, peer.cluster_id.as_str())
        });
    let offer_to_peer = get_ro(names::resource_offer(&ctx.local.cluster_name).to_string())
        .await?
        .filter(|o| is(o, labels::REPLICATION, values::TRUE));
    let vk = |o: ResourceOffer| o.status.unwrap_or_default().virtual_kubelet_status;
    let tunnel = crate::fc_network::tunnel_state(ctx, tenant, peer).await?;
    let own_refused = match tunnel {
        None | Some(TunnelState::Connecting) => {
            crate::fc_network::own_refused(ctx, tenant, peer).await?
        }
        _ => None,
    };
    Ok(Observed {
        deleting: fc.meta().deletion_timestamp.is_some(),
        outgoing_enabled: fc.spec.outgoing_peering_enabled,
        remote_tenant_known,
        request: request.as_ref().map(request_state),
        offer_from_peer: offer_from_peer.map(vk),
        request_from_peer: request_from_peer.as_ref().map(request_state),
        offer_to_peer: offer_to_peer.map(vk),
        bound: BTreeSet::new(),
        tunnel,
        own_refused,
        now,
    })
}

/// Our ResourceRequest to the peer; `withdrawal` stamps `spec.withdrawalTimestamp`.
async fn apply_request(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    withdrawal: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
) -> Result<(), Error> {
    let api: Api<ResourceRequest> = Api::namespaced(ctx.client.clone(), tenant);
    let name = names::resource_request(&ctx.local.cluster_name).to_string();
    let auth_url = liqo_auth::url::discover(
        &ctx.client,
        &ctx.settings.namespace,
        &ctx.settings.auth_overrides,
    )
    .await
    .map_err(|e| Error::AuthUrl(Box::new(e)))?;
    let mut spec = json!({"clusterIdentity": ctx.local, "authUrl": auth_url});
    if let Some(t) = withdrawal {
        spec["withdrawalTimestamp"] = serde_json::to_value(t).expect("a time serializes");
    }
    let object = json!({
        "apiVersion": ResourceRequest::api_version(&()), "kind": ResourceRequest::kind(&()),
        "metadata": {
            "name": name, "namespace": tenant,
            "labels": {
                labels::REPLICATION: values::TRUE,
                labels::REMOTE_ID: fc.spec.cluster_identity.cluster_id.as_str(),
            },
            "ownerReferences": controller_ref(fc).into_iter().collect::<Vec<_>>(),
        },
        "spec": spec,
    });
    apply(&api, &name, &object).await.map(drop)
}
