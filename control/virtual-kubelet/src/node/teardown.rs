//! The virtual node's teardown, in the launchers' two steps: [`drain`] while the virtual
//! kubelet still runs (its pod reflection deletes the remote pods and finalizes the local
//! ones), then [`delete`] once it stopped. Deletions carry UID preconditions: an object
//! re-created since under the same name is never deleted.

use std::time::Duration;

use control::api::discovery::ClusterIdentity;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::{
    Api, Client, ResourceExt,
    api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, Preconditions},
};
use serde_json::json;

use control::virtual_node::claim;

use super::kit::{FIELD_MANAGER, NodeError, kerr};

/// How often a refused eviction is retried, and the pods listed while waiting.
const POLL: Duration = Duration::from_millis(500);
/// The least time an eviction gets, even past the drain's deadline: one answer from the
/// apiserver (and the client's first quick retries of a 429).
const EVICT_FLOOR: Duration = Duration::from_secs(1);

/// The pods bound to `node`, in a stable order (namespace, name).
async fn bound_pods(local: &Client, node: &str) -> Result<Vec<Pod>, NodeError> {
    let mut pods = Api::<Pod>::all(local.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(kerr(format!("list the pods of Node {node}")))?
        .items;
    pods.sort_by_key(|p| (p.namespace().unwrap_or_default(), p.name_any()));
    Ok(pods)
}

fn uid_precondition(uid: Option<String>) -> Option<Preconditions> {
    Some(Preconditions {
        uid,
        resource_version: None,
    })
}

/// Whether an eviction answer means "retry": a PodDisruptionBudget refused it (429).
fn refused(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 429)
}

/// Whether a deletion answer means there is nothing (left) to delete: gone (404), or
/// another object of that name now (the UID precondition failed: 409).
fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404 || s.code == 409)
}

/// Cordons Node `node` (`spec.unschedulable`), evicts every pod bound to it through the
/// Eviction API one after the other in (namespace, name) order (a PodDisruptionBudget's
/// refusal is retried until `timeout`), then waits until no pod is bound to it or `timeout`
/// passed. Returns how many pods remain. A Node that is absent is not cordoned (its pods, if
/// any, are still evicted).
pub async fn drain(local: &Client, node: &str, timeout: Duration) -> Result<usize, NodeError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let nodes: Api<Node> = Api::all(local.clone());
    let cordon = json!({"spec": {"unschedulable": true}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match nodes.patch(node, &params, &Patch::Merge(&cordon)).await {
        Ok(_) => {}
        Err(e) if gone(&e) => {}
        Err(e) => return Err(kerr(format!("cordon Node {node}"))(e)),
    }
    for pod in bound_pods(local, node).await? {
        let ns = pod.namespace().unwrap_or_default();
        let name = pod.name_any();
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let api: Api<Pod> = Api::namespaced(local.clone(), &ns);
        let evict = EvictParams {
            delete_options: Some(DeleteParams {
                preconditions: uid_precondition(pod.uid()),
                ..DeleteParams::default()
            }),
            ..EvictParams::default()
        };
        loop {
            // Bounded by the deadline: the client itself retries a 429 (kube's default retry
            // policy, for minutes), which would otherwise hold a PodDisruptionBudget's
            // refusal far past it. A pod after one that used up the deadline still gets
            // [`EVICT_FLOOR`] for a real attempt.
            let until = deadline.max(tokio::time::Instant::now() + EVICT_FLOOR);
            let Ok(answer) = tokio::time::timeout_at(until, api.evict(&name, &evict)).await else {
                tracing::warn!(pod = %format!("{ns}/{name}"), %node, "eviction still refused at the drain's deadline");
                break;
            };
            match answer {
                Ok(_) => break,
                Err(e) if gone(&e) => break,
                Err(e) if refused(&e) => {
                    if tokio::time::Instant::now() >= deadline {
                        tracing::warn!(pod = %format!("{ns}/{name}"), %node, "eviction still refused at the drain's deadline");
                        break;
                    }
                    tokio::time::sleep(POLL).await;
                }
                Err(e) => return Err(kerr(format!("evict Pod {ns}/{name}"))(e)),
            }
        }
    }
    loop {
        let left = bound_pods(local, node).await?.len();
        if left == 0 || tokio::time::Instant::now() >= deadline {
            return Ok(left);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Force-deletes (grace 0, UID precondition) the pods still bound to `foreign`'s virtual
/// node, then deletes the Node (UID precondition; its Lease goes with it, owned). Absent:
/// `Ok`. A Node of that name that is not that provider's virtual node is left alone:
/// [`NodeError::NotOurs`].
pub async fn delete(local: &Client, foreign: &ClusterIdentity) -> Result<(), NodeError> {
    let name = control::names::virtual_node(&foreign.cluster_name).to_string();
    let nodes: Api<Node> = Api::all(local.clone());
    let Some(node) = nodes
        .get_opt(&name)
        .await
        .map_err(kerr(format!("get Node {name}")))?
    else {
        return Ok(());
    };
    claim(Some(&node), foreign.cluster_id.as_str()).map_err(NodeError::NotOurs)?;
    for pod in bound_pods(local, &name).await? {
        let ns = pod.namespace().unwrap_or_default();
        let pod_name = pod.name_any();
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: uid_precondition(pod.uid()),
            ..DeleteParams::default()
        };
        match Api::<Pod>::namespaced(local.clone(), &ns)
            .delete(&pod_name, &params)
            .await
        {
            Ok(_) => {}
            Err(e) if gone(&e) => {}
            Err(e) => return Err(kerr(format!("delete Pod {ns}/{pod_name}"))(e)),
        }
    }
    let params = DeleteParams {
        preconditions: uid_precondition(node.uid()),
        ..DeleteParams::default()
    };
    match nodes.delete(&name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if gone(&e) => Ok(()),
        Err(e) => Err(kerr(format!("delete Node {name}"))(e)),
    }
}
