//! The ForeignCluster controller's I/O (§1.2 step 3): reads what [`crate::decide::fc`] needs,
//! talks to the peer's auth service, writes the decisions and the status.

use std::{collections::BTreeSet, sync::Arc};

use control::{
    api::{
        discovery::{
            ForeignCluster, ForeignClusterStatus, PeeringConditionType, ResourceRequest,
            TenantNamespace,
        },
        sharing::ResourceOffer,
    },
    conditions::{self, Authentication, Condition, Peering, Process},
    consts::{discovery_types, keys, labels, values},
    identity::{CertificateIdentityRequest, authentication},
    names,
};
use k8s_openapi::{ByteString, api::core::v1::Secret};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, PostParams},
    runtime::controller::Action as Requeue,
};
use serde_json::json;

use crate::{
    context::{Attempt, AuthFailure, Context, apply, apply_status, controller_ref, now},
    decide::fc::{
        self as decide, Action, AuthStep, IdentityState, Observed, RequestState, TunnelState,
    },
    error::{Error, kube as kerr},
    identity, roles,
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "foreigncluster";

/// How soon a refused or unanswered identity request is sent again (at most; the resync
/// period when shorter).
pub const AUTH_RETRY: std::time::Duration = std::time::Duration::from_secs(10);

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
        }},
    });
    apply(&ns_api, &tenant, &ns).await?;
    let tenants = status
        .tenant_namespace
        .get_or_insert_with(TenantNamespace::default);
    tenants.local = Some(tenant.clone());

    // d. Our identity at the peer; e. its tenant namespace for us.
    let secret = identity::find(&ctx.client, &tenant, &peer.cluster_id)
        .await
        .map_err(|e| Error::Identity(Box::new(e)))?;
    let (auth, remote) = match identity::state(secret.as_ref()) {
        IdentityState::Signed { namespace } => (Authentication::Accepted, Some(namespace)),
        state => {
            let token = liqo_auth::tokens::remote_token(
                &ctx.client,
                &ctx.settings.namespace,
                &peer.cluster_id,
            )
            .await
            .map_err(|e| Error::Token(Box::new(e)))?;
            let attempt = Attempt {
                uid: fc.uid(),
                url: fc.spec.foreign_auth_url.clone(),
                token,
            };
            let last = ctx.auth_failures().get(&peer.cluster_id).cloned();
            match last {
                Some(f)
                    if f.attempt == attempt
                        && !decide::auth_retry_due(
                            Some(f.at.elapsed()),
                            AUTH_RETRY.min(ctx.settings.resync),
                        ) =>
                {
                    (f.condition, None)
                }
                _ => {
                    // Every request is first recorded as Pending: its answer is then a new
                    // transition, which liqoctl tells from an answer to an earlier attempt.
                    conditions::set(
                        &mut status.peering_conditions,
                        Condition::Authentication(Authentication::Pending),
                        &now,
                    );
                    write_status(&api, &name, &old, &status).await?;
                    old = status.clone();
                    let step = decide::auth_step(&state);
                    let (condition, remote) =
                        authenticate(&ctx, &fc, &tenant, secret, step).await?;
                    if remote.is_none() {
                        ctx.auth_failures().insert(
                            peer.cluster_id.clone(),
                            AuthFailure {
                                at: std::time::Instant::now(),
                                condition,
                                attempt,
                            },
                        );
                    } else {
                        ctx.auth_failures().remove(&peer.cluster_id);
                    }
                    (condition, remote)
                }
            }
        }
    };
    conditions::set(
        &mut status.peering_conditions,
        Condition::Authentication(auth),
        &now,
    );
    status
        .tenant_namespace
        .get_or_insert_with(TenantNamespace::default)
        .remote = remote.clone();

    // f.–h. The peering.
    let observed = observe(&ctx, &fc, &tenant, remote.is_some(), now.0).await?;
    let roles = roles::peering_roles();
    let bound = roles::bound_sets(&ctx, &tenant, &roles).await?;
    let observed = Observed { bound, ..observed };
    let mut requeue = ctx.settings.resync;
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

/// Asks the peer to sign our identity (making the key and CSR first if needed); stores the
/// answer. Returns the condition and, when signed, the peer's tenant namespace for us.
async fn authenticate(
    ctx: &Context,
    fc: &ForeignCluster,
    tenant: &str,
    secret: Option<Secret>,
    step: AuthStep,
) -> Result<(Authentication, Option<String>), Error> {
    let peer = &fc.spec.cluster_identity.cluster_id;
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), tenant);
    let secret = match (step, secret) {
        (AuthStep::Request, Some(s)) => s,
        _ => {
            let new = identity::new_identity(&ctx.local.cluster_id)
                .map_err(|e| Error::Identity(Box::new(e)))?;
            let expire = now().0.as_second() + 365 * 24 * 3600;
            let s: Secret = serde_json::from_value(json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {
                    "generateName": control::consts::objects::IDENTITY_GENERATE_NAME,
                    "namespace": tenant,
                    "labels": {labels::LOCAL_IDENTITY: values::TRUE, labels::CLUSTER_ID: peer.as_str()},
                    "annotations": {control::consts::annotations::CERTIFICATE_EXPIRE_TIME: expire.to_string()},
                },
                "stringData": {keys::PRIVATE_KEY: new.private_key_pem, keys::CSR: new.csr_pem},
            }))
            .expect("a Secret deserializes");
            secrets
                .create(&PostParams::default(), &s)
                .await
                .map_err(kerr(format!("create identity Secret in {tenant}")))?
        }
    };
    let csr = secret
        .data
        .as_ref()
        .and_then(|d| d.get(keys::CSR))
        .map(|b| b.0.clone())
        .unwrap_or_default();
    let ns = &ctx.settings.namespace;
    let ours = liqo_auth::tokens::local_token(&ctx.client, ns)
        .await
        .map_err(|e| Error::Token(Box::new(e)))?;
    let theirs = liqo_auth::tokens::remote_token(&ctx.client, ns, peer)
        .await
        .map_err(|e| Error::Token(Box::new(e)))?;
    let request = CertificateIdentityRequest::new(ctx.local.clone(), &ours, theirs.as_ref(), csr);
    let answer = ctx
        .auth(fc.spec.insecure_skip_tls_verify)
        .certificate(&fc.spec.foreign_auth_url, &request)
        .await;
    let response = match answer {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(peer = %peer, error = %e, "identity request failed");
            return Ok((authentication(e.http_status(), theirs.is_some()), None));
        }
    };
    // Written on a fresh read, again on a conflict (a concurrent update of the Secret), so
    // the certificate is never left unsaved for a stale copy (update, not patch: the chart's
    // ClusterRole grants no patch on Secrets). The key and CSR are kept as read.
    let mut data = std::collections::BTreeMap::new();
    let mut put = |k: &str, v: Vec<u8>| {
        data.insert(k.to_owned(), ByteString(v));
    };
    put(keys::CERTIFICATE, response.certificate.clone());
    put(
        keys::API_SERVER_URL,
        response.api_server_url.clone().into_bytes(),
    );
    if let Some(ca) = &response.api_server_ca {
        put(keys::API_SERVER_CA, ca.clone());
    }
    put(keys::NAMESPACE, response.namespace.to_string().into_bytes());
    // In-band: the API server is reached through the peer's liqo-proxy.
    if let Some(proxy) = fc.spec.foreign_proxy_url.as_ref().filter(|p| !p.is_empty()) {
        put(keys::PROXY_URL, proxy.clone().into_bytes());
    }
    let secret_name = secret.name_any();
    let mut current = secret.clone();
    let mut attempts = 0;
    loop {
        attempts += 1;
        current.data.get_or_insert_default().extend(data.clone());
        current
            .labels_mut()
            .insert(labels::CERTIFICATE_AVAILABLE.into(), values::TRUE.into());
        match secrets
            .replace(&secret_name, &PostParams::default(), &current)
            .await
        {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 && attempts < 5 => {
                current = secrets
                    .get(&secret_name)
                    .await
                    .map_err(kerr(format!("read identity Secret {tenant}/{secret_name}")))?;
                let same_csr = current
                    .data
                    .as_ref()
                    .and_then(|d| d.get(keys::CSR))
                    .is_some_and(|c| c.0 == request.certificate_signing_request);
                if !same_csr {
                    // A new key pair replaced the one the certificate was asked for: the
                    // certificate is useless; the next reconcile asks for the new one.
                    tracing::warn!(peer = %peer, "identity Secret changed its CSR meanwhile");
                    return Ok((Authentication::Pending, None));
                }
            }
            Err(e) => {
                return Err(kerr(format!(
                    "store identity Secret {tenant}/{secret_name}"
                ))(e));
            }
        }
    }
    tracing::info!(peer = %peer, namespace = %response.namespace, "identity accepted");
    Ok((
        Authentication::Accepted,
        Some(response.namespace.to_string()),
    ))
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
