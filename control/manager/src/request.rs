//! The ResourceRequest controller's I/O on a provider (§1.2 step 6, §1.4): for each copy of a
//! consumer's request, the incoming ForeignCluster, the ResourceOffer computed from our nodes
//! and pods by `control::offer`, the request's status.

use std::{collections::BTreeMap, sync::Arc};

use control::{
    api::{
        discovery::{ForeignCluster, OfferState, ResourceRequest},
        sharing::ResourceOffer,
    },
    consts::{discovery_types, labels, values},
    names,
    offer::{self, NodeInput, OfferPod},
};
use k8s_openapi::{
    api::{core::v1::Node, storage::v1::StorageClass},
    apimachinery::pkg::api::resource::Quantity,
};
use kube::{
    Api, Resource, ResourceExt,
    api::{DeleteParams, ListParams, Patch, PatchParams, PostParams},
    runtime::controller::Action as Requeue,
};
use serde_json::json;

use crate::{
    context::Context,
    error::{Error, kube as kerr},
    kit::not_found,
    kit::{apply, apply_status, controller_ref, now},
};
use control::peering::request::{self as decide, Action, Observed, PublishedOffer, RequestPhase};

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
    if !crate::kit::trusted(
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

/// The ForeignCluster for the request's consumer, created (incoming, both directions `Auto`)
/// when missing.
async fn incoming_foreign_cluster(
    ctx: &Context,
    rr: &ResourceRequest,
) -> Result<ForeignCluster, Error> {
    let consumer = &rr.spec.cluster_identity;
    let api: Api<ForeignCluster> = Api::all(ctx.client.clone());
    if let Some(fc) = crate::kit::foreign_cluster(ctx, &consumer.cluster_id).await? {
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
    // The class twin claims get here is the one consumers' claims get too.
    let configured = ctx
        .settings
        .storage
        .as_ref()
        .and_then(|s| s.real_class.as_deref());
    Ok(decide::storage_classes(&classes, configured))
}

/// How long an offer waits for the pods' store to have listed before it lists the pods itself.
const STORE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The offer for a consumer from our nodes and pods.
async fn compute(
    ctx: &Context,
    consumer: &control::api::ClusterId,
) -> Result<BTreeMap<String, Quantity>, Error> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let pods: Api<OfferPod> = Api::all(ctx.client.clone());
    let nodes = nodes
        .list(&ListParams::default())
        .await
        .map_err(kerr("list nodes"))?
        .items
        .iter()
        .map(NodeInput::from_node)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::OfferInput(Box::new(e)))?;
    // From the store the pods' watch keeps (`Context::offer_pods`); listed only until it has
    // listed once.
    let listed = tokio::time::timeout(STORE_WAIT, ctx.offer_pods_listed())
        .await
        .unwrap_or(false);
    // Listed as OfferPods too: each read into what the offer needs as it is decoded.
    let running: Vec<Arc<OfferPod>> = if listed {
        ctx.offer_pods
            .state()
            .into_iter()
            .filter(|p| p.running)
            .collect()
    } else {
        pods.list(&ListParams::default().fields("status.phase=Running"))
            .await
            .map_err(kerr("list pods"))?
            .items
            .into_iter()
            .map(Arc::new)
            .collect()
    };
    // Read in place (thousands on a busy provider, every OFFER_THROTTLE): none is copied.
    let pods = running
        .iter()
        .map(|p| p.input.as_ref())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::OfferInput(Box::new(e.clone())))?;
    Ok(offer::offer(&nodes, pods, consumer, ctx.settings.sharing))
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
