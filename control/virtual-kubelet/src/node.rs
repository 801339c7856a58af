//! The virtual node `liqo-<provider>` (§2.2, §2.4 of the control-plane spec): [`run`] keeps
//! it applied (labels, taint, InternalIP, kubelet port, the declared WebSocket exec feature;
//! capacity = allocatable = the offer's `spec.resourceQuota.hard`), its conditions current (the offer's resources and, when the
//! network is Liqo's, the TunnelEndpoint `clusterID=<provider>`), and its Lease
//! `kube-node-lease/<node>` renewed every ping interval while the provider's API server
//! answers `GET /livez`. When the ping fails neither the Lease nor the status is written, so
//! kube-controller-manager marks the node Unknown and taints it unreachable. It watches the
//! offer, the TunnelEndpoint and the Node itself (re-applied when deleted or changed); the
//! decisions are `control::virtual_node`'s, pure.
//!
//! [`teardown`] has the launchers' two steps: [`drain`] (cordon, evict, wait) while the
//! virtual kubelet still runs, then [`delete`] (leftover pods forced, the Node deleted).
//!
//! It never writes or deletes a Node that is not this provider's virtual node
//! (`control::virtual_node::claim`), never decides whether the node should exist (the
//! ResourceOffer controller does), and never runs or reflects pods (pod reflection does).

pub mod kit;
pub mod teardown;

use liqo_types::chain;
use std::{collections::BTreeMap, sync::Arc, time::Duration};

use control::api::{
    net::{ConnectionStatus, TunnelEndpoint},
    sharing::ResourceOffer,
};
use futures::{FutureExt, StreamExt, stream::BoxStream};
use k8s_openapi::{
    api::{coordination::v1::Lease, core::v1::Node},
    apimachinery::pkg::apis::meta::v1::{MicroTime, Time},
};
use kube::{
    Api, Client, Resource, ResourceExt,
    api::{Patch, PatchParams},
    runtime::{
        WatchStreamExt,
        reflector::{self, ObjectRef, Store},
        watcher,
    },
};
use serde::de::DeserializeOwned;
use serde_json::json;

pub use control::virtual_node::{ClaimError, LEASE_NAMESPACE, claim};
pub use kit::{FIELD_MANAGER, NodeError};
pub use teardown::{delete, drain};

use crate::VkConfig;
use control::virtual_node::{Observed, Params, Reach, decide, lease};
use kit::kerr;

/// What a watch stream reports to the loop: something changed, or its first list is in.
enum Seen {
    Changed,
    Ready(usize),
}

/// A reflector of `api` with `config` into a store; its events as [`Seen`] (`index` names it).
fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    index: usize,
) -> (Store<K>, BoxStream<'static, Seen>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(api, config).modify(|o| control::lean::meta(o.meta_mut())),
    )
    .default_backoff()
    .map(move |e| match e {
        Ok(watcher::Event::InitDone) => Seen::Ready(index),
        Ok(_) => Seen::Changed,
        Err(e) => {
            // The watcher retries with a backoff; the store keeps its last state.
            tracing::warn!(error = %e, "virtual node: a watch failed (retried with a backoff)");
            Seen::Changed
        }
    })
    .boxed();
    (reader, stream)
}

/// Keeps the virtual node applied, its conditions and Lease current, until dropped. Fails
/// only when the home API server's version (the node's kubelet version) cannot be read.
pub async fn run(cfg: Arc<VkConfig>) -> Result<(), NodeError> {
    let version = cfg
        .local
        .apiserver_version()
        .await
        .map_err(kerr("get the home API server's version"))?;
    let name = cfg.node_name();
    let params = Params {
        foreign: cfg.foreign.clone(),
        node_ip: cfg.node_ip.to_string(),
        port: cfg.listen.port(),
        kubelet_version: version.git_version,
        extra_labels: cfg.extra_labels.clone(),
    };
    let by_name = |n: &str| watcher::Config::default().fields(&format!("metadata.name={n}"));
    let (nodes, node_events) = reflect(Api::<Node>::all(cfg.local.clone()), by_name(&name), 0);
    let (offers, offer_events) = reflect(
        Api::<ResourceOffer>::namespaced(cfg.local.clone(), &cfg.tenant_namespace),
        by_name(&cfg.offer),
        1,
    );
    let mut streams = vec![node_events, offer_events];
    let mut ready = [false, false, !cfg.liqo_network];
    let teps = cfg.liqo_network.then(|| {
        let selector = format!(
            "{}={}",
            control::consts::net::TEP_CLUSTER_ID_LABEL,
            cfg.foreign.cluster_id.as_str()
        );
        let (store, events) = reflect(
            Api::<TunnelEndpoint>::namespaced(cfg.local.clone(), &cfg.tenant_namespace),
            watcher::Config::default().labels(&selector),
            2,
        );
        streams.push(events);
        store
    });
    let mut events = futures::stream::select_all(streams);
    let mut state = NodeLoop {
        name,
        offer: ObjectRef::new(&cfg.offer).within(&cfg.tenant_namespace),
        params,
        nodes,
        offers,
        teps,
        reach: Reach::default(),
        last_applied: None,
        rejected: Vec::new(),
        problem: None,
        cfg,
    };
    let mut tick = tokio::time::interval(state.cfg.ping_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Whether the Lease was renewed since the start: the first renewal comes as soon as the
    // stores have listed (a restarted virtual kubelet's node is Ready again at once, not a
    // ping interval later).
    let mut renewed = false;
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let ping = ping(&state.cfg.remote.api, state.cfg.ping_timeout).await;
                state.pinged(ping);
                if ready.iter().all(|r| *r) {
                    let uid = state.reconcile().await;
                    if let Some(uid) = uid.filter(|_| state.reach.reachable()) {
                        state.renew(&uid).await;
                        renewed = true;
                    }
                }
            }
            Some(seen) = events.next() => {
                let mut mark = |s: Seen| if let Seen::Ready(i) = s { ready[i] = true };
                mark(seen);
                // One reconcile for a burst of events.
                while let Some(Some(s)) = events.next().now_or_never() {
                    mark(s);
                }
                if ready.iter().all(|r| *r) {
                    let uid = state.reconcile().await;
                    if !renewed && let Some(uid) = uid.filter(|_| state.reach.reachable()) {
                        state.renew(&uid).await;
                        renewed = true;
                    }
                }
            }
        }
    }
}

/// Why the provider's API server did not answer the ping.
#[derive(Debug, thiserror::Error)]
pub enum PingError {
    /// The request could not be built.
    #[error(transparent)]
    Request(http::Error),
    /// The request failed.
    #[error(transparent)]
    Kube(kube::Error),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// `GET /livez` of the provider's API server within `timeout`.
pub async fn ping(client: &Client, timeout: Duration) -> Result<(), PingError> {
    let request = http::Request::get("/livez")
        .body(Vec::new())
        .map_err(PingError::Request)?;
    match tokio::time::timeout(timeout, client.request_text(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(PingError::Kube(e)),
        Err(_) => Err(PingError::Timeout(timeout)),
    }
}

/// The node loop's state between events.
struct NodeLoop {
    cfg: Arc<VkConfig>,
    name: String,
    offer: ObjectRef<ResourceOffer>,
    params: Params,
    nodes: Store<Node>,
    offers: Store<ResourceOffer>,
    teps: Option<Store<TunnelEndpoint>>,
    reach: Reach,
    /// The labels this run applied last.
    last_applied: Option<BTreeMap<String, String>>,
    /// The labels left off the node, as last logged.
    rejected: Vec<control::forge::node::RejectedLabel>,
    /// The last failure, as logged (a repeated one is not logged again).
    problem: Option<String>,
}

impl NodeLoop {
    fn pinged(&mut self, ping: Result<(), PingError>) {
        let node = &self.name;
        match (self.reach.observe(ping.is_ok()), ping) {
            (Some(true), _) => {
                tracing::info!(%node, "the provider's API server answers: renewing the node's Lease")
            }
            (Some(false), Err(e)) => {
                let error = chain(&e);
                tracing::warn!(%node, %error, "the provider's API server does not answer: the node's Lease is no longer renewed")
            }
            _ => {}
        }
    }

    fn failed(&mut self, what: String) {
        if self.problem.as_ref() != Some(&what) {
            tracing::warn!(node = %self.name, "{what}");
            self.problem = Some(what);
        }
    }

    /// Observes and writes what [`decide`] says; returns the Node's UID (none when it is
    /// absent or not ours). A failure is logged (once) and retried at the next event or tick.
    async fn reconcile(&mut self) -> Option<String> {
        let node = self.nodes.get(&ObjectRef::new(&self.name));
        let offer = self.offers.get(&self.offer);
        let network_up = self.teps.as_ref().map(|s| {
            s.state().iter().any(|t| {
                t.metadata.deletion_timestamp.is_none()
                    && t.status
                        .as_ref()
                        .and_then(|s| s.connection.as_ref())
                        .and_then(|c| c.status)
                        == Some(ConnectionStatus::Connected)
            })
        });
        let now = Time(k8s_openapi::jiff::Timestamp::now());
        let plan = decide(
            &self.params,
            &Observed {
                node: node.as_deref(),
                offer: offer.as_deref(),
                network_up,
                reachable: self.reach.reachable(),
                last_applied: self.last_applied.as_ref(),
                now: &now,
            },
        );
        if let Some(why) = plan.refused {
            self.failed(format!("not writing the virtual node: {why}"));
            return None;
        }
        if plan.rejected != self.rejected {
            for r in &plan.rejected {
                tracing::warn!(node = %self.name, "{r}");
            }
            self.rejected = plan.rejected;
        }
        let mut uid = node.as_ref().and_then(|n| n.uid());
        match self.write(plan.node, plan.status).await {
            Ok(Some(written)) => uid = Some(written),
            Ok(None) => {}
            Err(e) => self.failed(chain(&e)),
        }
        uid
    }

    /// Applies the Node and its status; returns the UID of the Node written.
    async fn write(
        &mut self,
        node: Option<Node>,
        status: Option<k8s_openapi::api::core::v1::NodeStatus>,
    ) -> Result<Option<String>, NodeError> {
        let api: Api<Node> = Api::all(self.cfg.local.clone());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let name = &self.name;
        let mut uid = None;
        if let Some(node) = node {
            let labels = node.metadata.labels.clone().unwrap_or_default();
            let mut value = serde_json::to_value(&node).map_err(|source| NodeError::Serialize {
                what: format!("Node {name}"),
                source,
            })?;
            value["apiVersion"] = json!("v1");
            value["kind"] = json!("Node");
            let applied = api
                .patch(name, &params, &Patch::Apply(&value))
                .await
                .map_err(kerr(format!("apply Node {name}")))?;
            self.last_applied = Some(labels);
            uid = applied.uid();
        }
        if let Some(status) = status {
            let mut value = json!({"apiVersion": "v1", "kind": "Node", "status": status});
            value["status"]["declaredFeatures"] = json!(control::forge::node::DECLARED_FEATURES);
            let written = api
                .patch_status(name, &params, &Patch::Apply(&value))
                .await
                .map_err(kerr(format!("apply the status of Node {name}")))?;
            uid = written.uid().or(uid);
        }
        self.problem = None;
        Ok(uid)
    }

    /// Renews the Lease of the Node of UID `uid` (a failure is logged; the next tick retries).
    async fn renew(&mut self, uid: &str) {
        let api: Api<Lease> = Api::namespaced(self.cfg.local.clone(), LEASE_NAMESPACE);
        let at = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let value = lease(&self.name, uid, self.cfg.lease_duration, at);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if let Err(e) = api.patch(&self.name, &params, &Patch::Apply(&value)).await {
            let e = kerr(format!("renew Lease {LEASE_NAMESPACE}/{}", self.name))(e);
            self.failed(chain(&e));
        }
    }
}
