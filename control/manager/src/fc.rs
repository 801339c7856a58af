//! The ForeignCluster controller's I/O (§1.2 step 3): reads what [`control::peering::fc`] needs,
//! talks to the peer's auth service, writes the decisions and the status.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::Duration,
};

use control::{
    api::{
        discovery::{
            ClusterIdentity, ForeignCluster, ForeignClusterStatus, PeeringConditionType,
            ResourceRequest, TenantNamespace,
        },
        sharing::ResourceOffer,
    },
    conditions::{self, Authentication, Condition, Peering, Process},
    consts::{discovery_types, labels, values},
    names,
    phase::RoleSet,
};
use k8s_openapi::{api::core::v1::Namespace, apimachinery::pkg::apis::meta::v1::Time};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams},
    runtime::controller::Action as Requeue,
};

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::{apply, apply_status, controller_ref, not_found, now},
    roles,
};
use control::peering::{
    fc::{self as decide, Action, Observed, RequestState, TunnelState},
    objects,
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "foreigncluster";

pub use crate::fc_auth::AUTH_RETRY;

/// One reconcile of a ForeignCluster, in the order of §1.2 step 3: (a) validation, (c) our
/// tenant namespace, (d, e) our identity at the peer and its tenant namespace for us,
/// (f–h) the peering's decisions carried out, (i) a discovered ForeignCluster left without a
/// peering deleted. The decisions are `control::peering`'s.
pub async fn reconcile(fc: Arc<ForeignCluster>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let name = fc.name_any();
    let api: Api<ForeignCluster> = Api::all(ctx.client.clone());
    let now = now();
    let peer = fc.spec.cluster_identity.clone();
    let mut old = fc.status.clone().unwrap_or_default();
    let mut status = old.clone();

    // a. Validation.
    if !processable(&ctx, &api, &fc, &mut status, &now).await? {
        write_status(&api, &name, &old, &status).await?;
        return Ok(Requeue::requeue(ctx.settings.resync));
    }

    // c. Our tenant namespace for the peer.
    let (tenant, terminating) = tenant_namespace(&ctx, &peer).await?;
    let named = status
        .tenant_namespace
        .as_ref()
        .and_then(|t| t.local.as_deref())
        .is_some_and(|t| t == tenant);
    if decide::wait_for_tenant(terminating, named, fc.metadata.deletion_timestamp.is_some()) {
        // Named once it is gone and made again (liqoctl would write the peer's NetworkConfig
        // into the terminating one).
        tracing::debug!(%name, %tenant, "the tenant namespace is still being deleted: waiting for it to go");
        write_status(&api, &name, &old, &status).await?;
        return Ok(Requeue::requeue(TENANT_TERMINATING_RECHECK));
    }
    status
        .tenant_namespace
        .get_or_insert_with(TenantNamespace::default)
        .local = Some(tenant.clone());

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
        let recheck = carry_out(&ctx, &fc, &tenant, &roles, &mut status, &now, action).await?;
        requeue = requeue.min(recheck.unwrap_or(Duration::MAX));
    }
    write_status(&api, &name, &old, &status).await?;

    // i. A ForeignCluster made for an incoming peering goes once neither direction is left.
    if left_without_peering(&fc, observed.deleting, &status) {
        tracing::info!(%name, "no peering left with a cluster that peered with us: deleting its ForeignCluster");
        api.delete(&name, &DeleteParams::default())
            .await
            .map(drop)
            .or_else(not_found)
            .map_err(kerr(format!("delete ForeignCluster {name}")))?;
    }
    Ok(Requeue::requeue(requeue))
}

/// (a) Whether the ForeignCluster is processed (not our own cluster, not a younger duplicate
/// of another for the same peer), recorded as its `ProcessForeignClusterStatus`; a processed
/// one is labelled with its peer's cluster ID.
async fn processable(
    ctx: &Context,
    api: &Api<ForeignCluster>,
    fc: &ForeignCluster,
    status: &mut ForeignClusterStatus,
    now: &Time,
) -> Result<bool, Error> {
    let peer = &fc.spec.cluster_identity.cluster_id;
    let all = api
        .list(&ListParams::default())
        .await
        .map_err(kerr("list ForeignClusters"))?;
    let older_duplicate = objects::older_duplicate(&all.items, fc);
    let process = decide::process(peer, &ctx.local.cluster_id, older_duplicate);
    conditions::set(
        &mut status.peering_conditions,
        Condition::Process(process),
        now,
    );
    if process != Process::Processable {
        return Ok(false);
    }
    if fc.labels().get(labels::CLUSTER_ID) != Some(&peer.to_string()) {
        let name = fc.name_any();
        apply(api, &name, &objects::cluster_id_label(&name, peer)).await?;
    }
    Ok(true)
}

/// How soon a ForeignCluster whose tenant namespace is still terminating is looked at again
/// (the namespace's deletion wakes no ForeignCluster reconcile).
const TENANT_TERMINATING_RECHECK: Duration = Duration::from_secs(2);

/// (c) Our tenant namespace for the peer, applied; its name, and whether it is terminating
/// (an earlier peering's, deleted by unpeer).
async fn tenant_namespace(ctx: &Context, peer: &ClusterIdentity) -> Result<(String, bool), Error> {
    let tenant = names::tenant_namespace(peer).to_string();
    let ns_api: Api<Namespace> = Api::all(ctx.client.clone());
    let ns = objects::tenant_namespace(&tenant, &peer.cluster_id, &ctx.local.cluster_id);
    let applied = apply(&ns_api, &tenant, &ns).await?;
    Ok((tenant, applied.metadata.deletion_timestamp.is_some()))
}

/// (f–h) Carries out one of the peering's actions; a recheck it asks for.
async fn carry_out(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    roles: &BTreeMap<RoleSet, Vec<String>>,
    status: &mut ForeignClusterStatus,
    now: &Time,
    action: Action,
) -> Result<Option<Duration>, Error> {
    match action {
        Action::ApplyRequest => apply_request(ctx, fc, tenant, None).await?,
        Action::WithdrawRequest => apply_request(ctx, fc, tenant, Some(now)).await?,
        Action::DeleteRequest => {
            let rr_api: Api<ResourceRequest> = Api::namespaced(ctx.client.clone(), tenant);
            let rr = names::resource_request(&ctx.local.cluster_name);
            rr_api
                .delete(rr.as_str(), &DeleteParams::default())
                .await
                .map(drop)
                .or_else(not_found)
                .map_err(kerr(format!("delete ResourceRequest {tenant}/{rr}")))?;
        }
        Action::SetCondition(c) => {
            conditions::set(&mut status.peering_conditions, c, now);
        }
        Action::SetNetwork(c) => {
            conditions::set(&mut status.peering_conditions, c, now);
        }
        Action::RecheckAfter(d) => return Ok(Some(d)),
        Action::Bind(set) => roles::bind(ctx, fc, tenant, roles.get(&set)).await?,
        Action::Unbind(set) => roles::unbind(ctx, tenant, roles.get(&set)).await?,
    }
    Ok(None)
}

/// (i) Whether a ForeignCluster discovered by an incoming peering is left with no direction.
fn left_without_peering(
    fc: &ForeignCluster,
    deleting: bool,
    status: &ForeignClusterStatus,
) -> bool {
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
    decide::delete_discovered(
        discovered,
        deleting,
        direction(PeeringConditionType::OutgoingPeering),
        direction(PeeringConditionType::IncomingPeering),
    )
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

/// Our ResourceRequest to the peer ([`objects::resource_request`]).
async fn apply_request(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    withdrawal: Option<&Time>,
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
    let object = objects::resource_request(
        &name,
        tenant,
        &ctx.local,
        &auth_url,
        &fc.spec.cluster_identity.cluster_id,
        controller_ref(fc),
        withdrawal,
    );
    apply(&api, &name, &object).await.map(drop)
}
