//! The ResourceRequest controller's I/O on a provider (§1.2 step 6, §1.4): for each copy of a
//! consumer's request, the incoming ForeignCluster, the ResourceOffer computed from our nodes
//! and pods by `control::offer`, the request's status.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
};

use control::{
    api::{
        discovery::{ForeignCluster, OfferState, ResourceRequest},
        sharing::ResourceOffer,
    },
    consts::{discovery_types, labels, values},
    names,
    offer::{self, NodeInput, PodInput},
};
use k8s_openapi::{
    api::{
        core::v1::{Namespace, Node, Pod},
        storage::v1::StorageClass,
    },
    apimachinery::pkg::api::resource::Quantity,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::controller::Action as Requeue,
};
use serde_json::json;

use crate::{
    context::{Context, apply, apply_status, controller_ref, now},
    decide::request::{self as decide, Action, Observed, PublishedOffer, RequestPhase},
    error::{Error, kube as kerr},
    fc::not_found,
};

/// The controller's name in metrics and logs.
pub const NAME: &str = "resourcerequest";

/// One reconcile of a request copy (`liqo.io/replicated=true`).
pub async fn reconcile(rr: Arc<ResourceRequest>, ctx: Arc<Context>) -> Result<Requeue, Error> {
    ctx.metrics.reconcile(NAME);
    let requeue = Requeue::requeue(ctx.settings.resync);
    let ns = rr.namespace().ok_or(Error::Incomplete("namespace"))?;
    let name = rr.name_any();
    let consumer = &rr.spec.cluster_identity;
    let origin = rr.labels().get(labels::ORIGIN_ID).map(String::as_str);
    if !trusted(
        &ctx,
        "ResourceRequest",
        &rr.metadata,
        &ns,
        origin,
        &consumer.cluster_id,
    )
    .await?
    {
        return Ok(Requeue::await_change());
    }
    let fc = incoming_foreign_cluster(&ctx, &rr).await?;
    let rr_api: Api<ResourceRequest> = Api::namespaced(ctx.client.clone(), &ns);
    let has_controller = rr
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true));
    if !has_controller && rr.meta().deletion_timestamp.is_none() {
        let patch = json!({"metadata": {"ownerReferences": controller_ref(&fc).into_iter().collect::<Vec<_>>()}});
        rr_api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(kerr(format!("owner of ResourceRequest {ns}/{name}")))?;
    }
    let withdrawn =
        rr.meta().deletion_timestamp.is_some() || rr.spec.withdrawal_timestamp.is_some();
    let phase = decide::phase(
        withdrawn,
        fc.spec.incoming_peering_enabled,
        ctx.settings.enable_incoming,
    );
    let ro_api: Api<control::api::sharing::ResourceOffer> =
        Api::namespaced(ctx.client.clone(), &ns);
    let ro_name = names::resource_offer(&ctx.local.cluster_name).to_string();
    let offer = ro_api
        .get_opt(&ro_name)
        .await
        .map_err(kerr(format!("get ResourceOffer {ns}/{ro_name}")))?
        .filter(|o| o.labels().get(labels::REPLICATION).map(String::as_str) == Some(values::TRUE));
    let published = offer.as_ref().map(|o| PublishedOffer {
        quota: o
            .spec
            .resource_quota
            .as_ref()
            .and_then(|q| q.hard.clone())
            .unwrap_or_default(),
        storage_classes: o.spec.storage_classes.clone(),
        labels: o.spec.labels.clone(),
        withdrawing: o.spec.withdrawal_timestamp.is_some(),
        virtual_kubelet: o.status.clone().unwrap_or_default().virtual_kubelet_status,
    });
    let (computed, storage_classes) = if phase == RequestPhase::Allow {
        (
            compute(&ctx, &consumer.cluster_id).await?,
            storage(&ctx).await?,
        )
    } else {
        (BTreeMap::new(), Vec::new())
    };
    let status = rr.status.clone().unwrap_or_default();
    let observed = Observed {
        phase,
        offer: published.clone(),
        computed,
        storage_classes: storage_classes.clone(),
        labels: ctx.settings.cluster_labels.clone(),
        threshold: offer::DEFAULT_UPDATE_THRESHOLD,
        offer_withdrawn: status.offer_withdrawal_timestamp.is_some(),
    };
    for action in decide::decide(&observed).map_err(|e| Error::Quantity(Box::new(e)))? {
        match action {
            Action::ApplyOffer(quota) => {
                let labels = &ctx.settings.cluster_labels;
                let offer = (&quota, storage_classes.as_slice(), labels);
                apply_offer(&ctx, &rr, &ns, &ro_name, offer, false).await?
            }
            Action::WithdrawOffer => {
                let old = published.clone().unwrap_or_default();
                let offer = (&old.quota, old.storage_classes.as_slice(), &old.labels);
                apply_offer(&ctx, &rr, &ns, &ro_name, offer, true).await?
            }
            Action::DeleteOffer => ro_api
                .delete(&ro_name, &DeleteParams::default())
                .await
                .map(drop)
                .or_else(not_found)
                .map_err(kerr(format!("delete ResourceOffer {ns}/{ro_name}")))?,
            Action::RequestStatus { created, withdrawn } => {
                if rr.meta().deletion_timestamp.is_some() {
                    continue;
                }
                let state = if created {
                    OfferState::Created
                } else {
                    OfferState::None
                };
                let stamp = withdrawn.then(|| {
                    status
                        .offer_withdrawal_timestamp
                        .clone()
                        .unwrap_or_else(now)
                });
                if status.offer_state == state && status.offer_withdrawal_timestamp == stamp {
                    continue;
                }
                let mut value = json!({"offerState": state});
                if let Some(t) = stamp {
                    value["offerWithdrawalTimestamp"] =
                        serde_json::to_value(t).expect("a time serializes");
                }
                apply_status(&rr_api, &name, &value).await?;
            }
        }
    }
    Ok(requeue)
}

/// The objects already warned about as untrusted (by UID), so each is logged once.
static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Whether a replicated copy (`kind`, in tenant namespace `ns`, labelled `liqo.io/originID` =
/// `origin`, its spec naming `claimed`) speaks for the peer whose tenant namespace holds it
/// ([`decide::origin`]); an untrusted copy is warned about once and must not be acted upon.
pub async fn trusted(
    ctx: &Context,
    kind: &str,
    meta: &kube::api::ObjectMeta,
    ns: &str,
    origin: Option<&str>,
    claimed: &control::api::ClusterId,
) -> Result<bool, Error> {
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    let namespace = namespaces
        .get_opt(ns)
        .await
        .map_err(kerr(format!("get Namespace {ns}")))?;
    let Err(why) = decide::origin(namespace.as_ref().map(|n| n.labels()), origin, claimed) else {
        return Ok(true);
    };
    let uid = meta.uid.clone().unwrap_or_default();
    // A poisoned memo only means a warning may repeat.
    let first = WARNED.lock().map(|mut w| w.insert(uid)).unwrap_or(true);
    if first {
        let name = meta.name.as_deref().unwrap_or_default();
        tracing::warn!(
            kind, namespace = ns, name, claimed = %claimed, origin = ?origin, reason = ?why,
            "ignoring a replicated object that does not come from its tenant namespace's peer"
        );
    }
    Ok(false)
}

/// The ForeignCluster for the request's consumer, created (incoming, both directions `Auto`)
/// when missing.
async fn incoming_foreign_cluster(
    ctx: &Context,
    rr: &ResourceRequest,
) -> Result<ForeignCluster, Error> {
    let consumer = &rr.spec.cluster_identity;
    let api: Api<ForeignCluster> = Api::all(ctx.client.clone());
    if let Some(fc) = foreign_cluster(ctx, &consumer.cluster_id).await? {
        return Ok(fc);
    }
    let holder = api
        .get_opt(consumer.cluster_name.as_str())
        .await
        .map_err(kerr("get ForeignCluster"))?
        .map(|f| f.spec.cluster_identity.cluster_id);
    let name = names::incoming_foreign_cluster(consumer, holder.as_ref()).to_string();
    let fc: ForeignCluster = serde_json::from_value(json!({
        "apiVersion": ForeignCluster::api_version(&()), "kind": ForeignCluster::kind(&()),
        "metadata": {"name": name, "labels": {
            labels::CLUSTER_ID: consumer.cluster_id.as_str(),
            labels::DISCOVERY_TYPE: discovery_types::INCOMING_PEERING,
        }},
        "spec": {
            "clusterIdentity": consumer,
            "foreignAuthUrl": rr.spec.auth_url,
            "outgoingPeeringEnabled": "Auto",
            "incomingPeeringEnabled": "Auto",
            "insecureSkipTLSVerify": true,
        },
    }))
    .expect("a ForeignCluster deserializes");
    tracing::info!(consumer = %consumer.cluster_id, %name, "incoming peering: new ForeignCluster");
    api.create(&PostParams::default(), &fc)
        .await
        .map_err(kerr(format!("create ForeignCluster {name}")))
}

/// The ForeignCluster of a peer, matched by `spec.clusterIdentity.clusterID` (the
/// `discovery.liqo.io/cluster-id` label only appears after its first reconcile); the oldest
/// when there are several.
pub async fn foreign_cluster(
    ctx: &Context,
    id: &control::api::ClusterId,
) -> Result<Option<ForeignCluster>, Error> {
    let api: Api<ForeignCluster> = Api::all(ctx.client.clone());
    let all = api
        .list(&ListParams::default())
        .await
        .map_err(kerr("list ForeignClusters"))?;
    Ok(all
        .items
        .into_iter()
        .filter(|f| f.spec.cluster_identity.cluster_id == *id)
        .min_by_key(|f| (f.creation_timestamp().map(|t| t.0), f.name_any())))
}

/// Our storage classes, for the offer.
async fn storage(ctx: &Context) -> Result<Vec<control::api::sharing::StorageType>, Error> {
    let api: Api<StorageClass> = Api::all(ctx.client.clone());
    let classes: Vec<(String, bool)> = api
        .list(&ListParams::default())
        .await
        .map_err(kerr("list StorageClasses"))?
        .items
        .iter()
        .map(|c| {
            let default = c
                .annotations()
                .get(control::consts::annotations::DEFAULT_STORAGE_CLASS)
                .map(String::as_str)
                == Some("true");
            (c.name_any(), default)
        })
        .collect();
    Ok(decide::storage_classes(&classes, None))
}

/// The offer for a consumer from our nodes and pods.
async fn compute(
    ctx: &Context,
    consumer: &control::api::ClusterId,
) -> Result<BTreeMap<String, Quantity>, Error> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let pods: Api<Pod> = Api::all(ctx.client.clone());
    let nodes = nodes
        .list(&ListParams::default())
        .await
        .map_err(kerr("list nodes"))?
        .items
        .iter()
        .map(NodeInput::from_node)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::OfferInput(Box::new(e)))?;
    let pods = pods
        .list(&ListParams::default().fields("status.phase=Running"))
        .await
        .map_err(kerr("list pods"))?
        .items
        .iter()
        .map(PodInput::from_pod)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::OfferInput(Box::new(e)))?;
    Ok(offer::offer(&nodes, &pods, consumer, ctx.settings.sharing))
}

async fn apply_offer(
    ctx: &Context,
    rr: &ResourceRequest,
    ns: &str,
    name: &str,
    (quota, storage_classes, offer_labels): (
        &BTreeMap<String, Quantity>,
        &[control::api::sharing::StorageType],
        &BTreeMap<String, String>,
    ),
    withdraw: bool,
) -> Result<(), Error> {
    let api: Api<control::api::sharing::ResourceOffer> = Api::namespaced(ctx.client.clone(), ns);
    let consumer = rr.spec.cluster_identity.cluster_id.as_str();
    let mut spec = json!({"clusterId": ctx.local.cluster_id, "resourceQuota": {"hard": quota}});
    if !storage_classes.is_empty() {
        spec["storageClasses"] = serde_json::to_value(storage_classes).expect("classes serialize");
    }
    if !offer_labels.is_empty() {
        spec["labels"] = json!(offer_labels);
    }
    if withdraw {
        spec["withdrawalTimestamp"] = serde_json::to_value(now()).expect("a time serializes");
    }
    let object = json!({
        "apiVersion": ResourceOffer::api_version(&()), "kind": ResourceOffer::kind(&()),
        "metadata": {"name": name, "namespace": ns,
            "labels": {
                labels::CLUSTER_ID: consumer,
                labels::REPLICATION: values::TRUE,
                labels::REMOTE_ID: consumer,
            },
            "ownerReferences": controller_ref(rr).into_iter().collect::<Vec<_>>()},
        "spec": spec,
    });
    apply(&api, name, &object).await.map(drop)
}
