//! The storage fabric on the lab's control planes (kwok nodes: binding and placement, no data;
//! control-plane.md §6): a no-provisioner class `lab-local`, default on both clusters, stands
//! in for the real class, with static local volumes on milan (its scheduler binds them) and on
//! each of rome's own nodes (two sizes; nothing but the controller-manager binds a twin claim:
//! it has no pod). Then:
//! - a claim of class `liqo` whose first consumer lands on a rome node: the twin claim in
//!   `liqo-storage` bound by the controller-manager to the smallest static volume on that node,
//!   the virtual volume with the real one's source and affinity plus
//!   `liqo.io/type DoesNotExist`, a second consumer on the same node;
//! - a claim of class `liqo` whose first consumer is offloaded: the placeholder volume pinned to
//!   `liqo-milan`, the copy on milan bound with the offer's class, a second consumer on
//!   `liqo-milan`;
//! - a pod on `liqo-milan` naming a claim that exists only on milan (externally managed
//!   storage, manual §20.2): the remote pod has it verbatim and runs;
//! - the home claim deleted: the virtual volume after the twin (the offloaded one stays: the
//!   unpeer at the end of the test is refused for it, then asked to delete it);
//! - (`storage_guard`: `liqoctl unoffload namespace` of another namespace with such a claim.)

use std::time::Instant;

use k8s_openapi::api::core::v1::{Namespace, Node, PersistentVolume, PersistentVolumeClaim, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{NS, until};

/// The stand-in for the real class (no provisioner, bound at the first consumer).
pub(crate) const REAL: &str = "lab-local";
/// The namespace of the claim used on rome's own nodes (not offloaded).
const HOME_NS: &str = "storage-home";
const NODE: &str = "liqo-milan";

fn obj<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

pub(super) async fn create<K>(api: &Api<K>, v: Value)
where
    K: kube::Resource + Clone + DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let what = format!("creating {}", v["metadata"]["name"]);
    api.create(&PostParams::default(), &obj(v))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
}

/// The stand-in class, the default on `c` (before the peering: milan's offer names it).
pub(crate) async fn prepare(c: &Client) {
    create(
        &Api::<k8s_openapi::api::storage::v1::StorageClass>::all(c.clone()),
        json!({"metadata": {"name": REAL, "annotations":
                {"storageclass.kubernetes.io/is-default-class": "true"}},
               "provisioner": "kubernetes.io/no-provisioner",
               "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Delete"}),
    )
    .await;
}

/// A local volume of the stand-in class on `node`, 1Gi, bound in advance to `claim` if given.
pub(super) fn local_volume(name: &str, node: &str, claim: Option<(&str, &str)>) -> Value {
    let mut v = json!({
        "metadata": {"name": name},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": REAL, "persistentVolumeReclaimPolicy": "Retain",
                 "local": {"path": format!("/mnt/{name}")},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}}
    });
    if let Some((ns, n)) = claim {
        v["spec"]["claimRef"] = json!({"namespace": ns, "name": n});
    }
    v
}

pub(super) fn claim(name: &str) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"storageClassName": "liqo", "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}})
}

pub(super) fn pod(name: &str, claim: &str) -> Value {
    json!({"metadata": {"name": name},
           "spec": {"containers": [{"name": "main", "image": "busybox:1.37",
                                    "resources": {"requests": {"cpu": "1m", "memory": "1Mi"}},
                                    "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}})
}

/// The node `name` runs on, once Running.
pub(super) async fn running(api: &Api<Pod>, name: &str) -> Result<String, String> {
    let p = api.get(name).await.map_err(|e| e.to_string())?;
    let phase = p.status.as_ref().and_then(|s| s.phase.clone());
    match (phase.as_deref(), p.spec.and_then(|s| s.node_name)) {
        (Some("Running"), Some(n)) => Ok(n),
        other => Err(format!("{other:?}")),
    }
}

pub(super) async fn bound(
    api: &Api<PersistentVolumeClaim>,
    name: &str,
) -> Result<PersistentVolumeClaim, String> {
    let c = api.get(name).await.map_err(|e| e.to_string())?;
    match c.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Bound") => Ok(c),
        other => Err(format!("phase {other:?}")),
    }
}

fn affinity(v: &PersistentVolume) -> Value {
    serde_json::to_value(&v.spec.as_ref().unwrap().node_affinity).unwrap()
}

/// The static volumes on rome's node `node`: the one a 1Gi twin claim there is bound to (the
/// smallest that fits), then a larger one.
fn rome_volumes(node: &str) -> [String; 2] {
    [format!("rome-{node}-1g"), format!("rome-{node}-2g")]
}

/// Runs the checks; returns the seconds each binding took.
pub(crate) async fn claims_follow_their_first_consumer(
    rome: &Client,
    milan: &Client,
) -> (f64, f64) {
    let volumes = Api::<PersistentVolume>::all(rome.clone());
    // A static local volume on milan's n0 for the copy (milan's scheduler binds it).
    create(
        &Api::<PersistentVolume>::all(milan.clone()),
        local_volume("milan-n0-a", "n0", None),
    )
    .await;
    // Static local volumes on each of rome's own nodes, two sizes (the real class has no
    // provisioner: the controller-manager pre-binds each twin claim to one).
    let nodes = Api::<Node>::all(rome.clone())
        .list(&ListParams::default().labels("!liqo.io/type"))
        .await
        .unwrap();
    assert!(!nodes.items.is_empty(), "rome has nodes of its own");
    for n in &nodes.items {
        let node = n.metadata.name.as_deref().unwrap();
        let [small, big] = rome_volumes(node);
        create(&volumes, local_volume(&small, node, None)).await;
        let mut v = local_volume(&big, node, None);
        v["spec"]["capacity"]["storage"] = json!("2Gi");
        create(&volumes, v).await;
    }
    create(
        &Api::<Namespace>::all(rome.clone()),
        json!({"metadata": {"name": HOME_NS}}),
    )
    .await;

    // 1. On rome's own nodes.
    let t = Instant::now();
    let claims = Api::<PersistentVolumeClaim>::namespaced(rome.clone(), HOME_NS);
    let pods = Api::<Pod>::namespaced(rome.clone(), HOME_NS);
    create(&claims, claim("data")).await;
    let uid = claims.get("data").await.unwrap().metadata.uid.unwrap();
    create(&pods, pod("first", "data")).await;
    let twins = Api::<PersistentVolumeClaim>::namespaced(rome.clone(), "liqo-storage");
    let twin = until(60, "the twin claim in liqo-storage", || {
        let twins = twins.clone();
        let uid = uid.clone();
        async move { twins.get(&uid).await.map_err(|e| e.to_string()) }
    })
    .await;
    assert_eq!(
        control::storage::forge::named_claim(&twin.metadata),
        Some((HOME_NS, "data")),
        "the twin names its claim"
    );
    assert_eq!(
        twin.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some(REAL),
        "the default class"
    );
    let node =
        twin.metadata.annotations.clone().unwrap_or_default()["volume.kubernetes.io/selected-node"]
            .clone();
    assert!(!node.starts_with("liqo-"), "a physical node: {node}");
    // Nothing but the controller-manager binds the twin (no pod, no provisioner): to the
    // smallest static volume on its node.
    let [real, _] = rome_volumes(&node);
    let twin = until(30, "the twin claim bound by the controller-manager", || {
        bound(&twins, &uid)
    })
    .await;
    assert_eq!(
        twin.spec.as_ref().unwrap().volume_name.as_deref(),
        Some(real.as_str()),
        "the smallest static volume on {node}"
    );
    let claim_ref = volumes.get(&real).await.unwrap().spec.unwrap().claim_ref;
    assert_eq!(
        claim_ref.and_then(|r| r.uid),
        twin.metadata.uid,
        "{real} is the twin's"
    );
    let on = until(90, "the first consumer Running", || running(&pods, "first")).await;
    let home_secs = t.elapsed().as_secs_f64();
    assert_eq!(on, node, "the pod runs where its claim was provisioned");
    let c = bound(&claims, "data")
        .await
        .expect("the virtual claim is bound");
    let v = volumes
        .get(c.spec.unwrap().volume_name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        v.metadata.name.as_deref(),
        Some(format!("pvc-{uid}").as_str())
    );
    let spec = v.spec.as_ref().unwrap();
    assert_eq!(spec.local.as_ref().unwrap().path, format!("/mnt/{real}"));
    assert_eq!(spec.storage_class_name.as_deref(), Some("liqo"));
    assert_eq!(
        affinity(&v),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]},
            {"key": "liqo.io/type", "operator": "DoesNotExist"}]}]}})
    );
    create(&pods, pod("second", "data")).await;
    let on = until(60, "the second consumer Running", || {
        running(&pods, "second")
    })
    .await;
    assert_eq!(on, node, "a later consumer follows the data");

    // 2. Offloaded: the first consumer lands on liqo-milan.
    let t = Instant::now();
    let claims_o = Api::<PersistentVolumeClaim>::namespaced(rome.clone(), NS);
    let pods_o = Api::<Pod>::namespaced(rome.clone(), NS);
    create(&claims_o, claim("data")).await;
    let uid_o = claims_o.get("data").await.unwrap().metadata.uid.unwrap();
    create(&pods_o, pod("stateful-0", "data")).await;
    let on = until(120, "the offloaded consumer Running", || {
        running(&pods_o, "stateful-0")
    })
    .await;
    let remote_secs = t.elapsed().as_secs_f64();
    assert_eq!(on, NODE);
    let c = bound(&claims_o, "data")
        .await
        .expect("the virtual claim is bound");
    let v = volumes
        .get(c.spec.unwrap().volume_name.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        v.metadata.name.as_deref(),
        Some(format!("pvc-{uid_o}").as_str())
    );
    assert_eq!(
        v.spec.as_ref().unwrap().host_path.as_ref().unwrap().path,
        "/tmp/liqo-placeholder"
    );
    assert_eq!(
        affinity(&v),
        json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}]}]}})
    );
    let remote_claims = Api::<PersistentVolumeClaim>::namespaced(milan.clone(), NS);
    let copy = until(60, "the copy bound on milan", || {
        bound(&remote_claims, "data")
    })
    .await;
    let cs = copy.spec.as_ref().unwrap();
    assert_eq!(
        cs.storage_class_name.as_deref(),
        Some(REAL),
        "the offer's class"
    );
    assert_eq!(cs.volume_name.as_deref(), Some("milan-n0-a"));
    let remote_pod = Api::<Pod>::namespaced(milan.clone(), NS)
        .get("stateful-0")
        .await
        .unwrap();
    assert_eq!(
        remote_pod.spec.unwrap().node_name.as_deref(),
        Some("n0"),
        "where the data is"
    );
    create(&pods_o, pod("stateful-1", "data")).await;
    let on = until(120, "the second offloaded consumer Running", || {
        running(&pods_o, "stateful-1")
    })
    .await;
    assert_eq!(on, NODE, "a later consumer follows the data to liqo-milan");

    // Externally managed storage (§20.2): a claim that exists only on milan, named by a pod
    // placed on liqo-milan by nodeName, reaches the remote pod verbatim.
    create(
        &Api::<PersistentVolume>::all(milan.clone()),
        local_volume("milan-n1-ext", "n1", None),
    )
    .await;
    let ext = json!({"metadata": {"name": "only-on-milan"},
           "spec": {"storageClassName": REAL, "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}});
    create(&remote_claims, ext).await;
    let mut p = pod("ext-0", "only-on-milan");
    p["spec"]["nodeName"] = json!(NODE);
    create(&pods_o, p).await;
    until(120, "ext-0 Running", || running(&pods_o, "ext-0")).await;
    let remote = Api::<Pod>::namespaced(milan.clone(), NS)
        .get("ext-0")
        .await
        .unwrap();
    let vols = serde_json::to_value(&remote.spec.as_ref().unwrap().volumes).unwrap();
    assert!(
        vols.as_array()
            .unwrap()
            .iter()
            .any(|v| v["persistentVolumeClaim"]["claimName"] == "only-on-milan"),
        "the claim verbatim: {vols}"
    );
    bound(&remote_claims, "only-on-milan")
        .await
        .expect("milan bound its own claim");
    pods_o
        .delete("ext-0", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();

    // 3. The home claim deleted by name: the virtual volume goes after the twin claim.
    for n in ["first", "second"] {
        pods.delete(n, &DeleteParams::default().grace_period(0))
            .await
            .unwrap();
    }
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    gone(&volumes, &format!("pvc-{uid}"), "the virtual volume").await;
    assert!(
        twins.get_opt(&uid).await.unwrap().is_none(),
        "the twin claim is gone too"
    );
    Api::<Namespace>::all(rome.clone())
        .delete(HOME_NS, &DeleteParams::default())
        .await
        .unwrap();
    // The offloaded claim stays (with stateful-0 and -1): the unpeer at the end is refused
    // for it.
    (home_secs, remote_secs)
}

/// Polls until the cluster-scoped object `name` is gone.
pub(super) async fn gone<K>(api: &Api<K>, name: &str, what: &str)
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    until(90, &format!("{what} {name} deleted"), || {
        let (api, name) = (api.clone(), name.to_owned());
        async move {
            match api.get_opt(&name).await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
}
