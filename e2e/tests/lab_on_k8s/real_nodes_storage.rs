//! The storage fabric on real nodes (the lab's static hostPath volumes as the real class,
//! [`e2e::lab::k8s::volumes`]), on the lab the quickstart left (`liqo-demo` offloaded to
//! milan): a pod on `liqo-milan` writes 100 MiB to its `liqo` claim (data on a milan node);
//! deleted and made again, it reads the same sha256. `liqoctl move volume` is refused with a
//! pod mounting the claim, for a claim of another class and for a node that does not exist,
//! nothing changed each time; a move whose receiver is killed fails saying so and deletes what
//! it made, and a move killed (liqoctl) while it copies leaves the original bound and its data
//! on milan; the next one moves it to rome's node n1: a pod there reads the same sha256,
//! the claim of the same name is bound to a volume on n1, and milan's copy is gone. Everything
//! made is deleted at the end (the lab goes anyway).

use std::{process::Stdio, time::Instant};

use e2e::lab::k8s::{K8sLab, demo, volumes};
use k8s_openapi::api::{
    batch::v1::Job,
    core::v1::{PersistentVolume, PersistentVolumeClaim, Pod},
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;

use crate::offload_lab::{run, until};

const NS: &str = demo::NAMESPACE;
const CLAIM: &str = "data";
const TARGET: &str = "n1";
const MOVE_OF: &str = control::storage::moving::MOVE_OF;

fn claim(name: &str, class: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {"storageClassName": class, "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "200Mi"}}},
    }))
    .unwrap()
}

/// A pod mounting [`CLAIM`] at /data running `script`; on the virtual node when `remote`.
fn pod(name: &str, script: &str, remote: bool) -> Pod {
    let mut spec = json!({
        "restartPolicy": "Never",
        // Root, as a database's entrypoint that owns its data directory: the lab's hostPath
        // volumes are root's.
        "securityContext": {"runAsUser": 0},
        "containers": [{"name": "c", "image": demo::IMAGE, "imagePullPolicy": "Never",
            "command": ["bash", "-c", script],
            "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}],
    });
    if remote {
        spec["nodeSelector"] = json!({"liqo.io/type": "virtual-node"});
        spec["tolerations"] =
            json!([{"key": demo::VIRTUAL_NODE_TAINT, "operator": "Exists", "effect": "NoExecute"}]);
    }
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}, "spec": spec}))
        .unwrap()
}

/// Runs `p` to its end; its node and the last line of its log.
async fn run_pod(k: &K8sLab, pods: &Api<Pod>, p: Pod) -> (String, String) {
    let name = p.metadata.name.clone().unwrap();
    pods.create(&PostParams::default(), &p).await.unwrap();
    let node = until(180, &format!("pod {name} done"), || async {
        let p = pods.get(&name).await.map_err(|e| e.to_string())?;
        match p.status.as_ref().and_then(|s| s.phase.as_deref()) {
            Some("Succeeded") => Ok(demo::node_of(&p)),
            Some("Failed") => panic!("pod {name} failed: {:?}", p.status),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let log = run(k, "kubectl", "rome", &["logs", "-n", NS, &name]);
    gone_pod(pods, &name).await;
    (node, log.lines().last().unwrap_or_default().to_owned())
}

async fn gone_pod(pods: &Api<Pod>, name: &str) {
    if let Err(e) = pods.delete(name, &DeleteParams::default()).await {
        panic!("deleting pod {name}: {e}");
    }
    until(120, &format!("pod {name} gone"), || async {
        match pods.get_opt(name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
}

/// The claim's UID and volume, Bound.
async fn bound(claims: &Api<PersistentVolumeClaim>) -> (String, String) {
    until(120, "the claim bound", || async {
        let c = claims.get(CLAIM).await.map_err(|e| e.to_string())?;
        match (
            c.status.as_ref().and_then(|s| s.phase.as_deref()),
            c.spec.and_then(|s| s.volume_name),
        ) {
            (Some("Bound"), Some(v)) => Ok((c.metadata.uid.unwrap(), v)),
            other => Err(format!("{other:?}")),
        }
    })
    .await
}

/// How many Jobs of a move there are in rome's `liqo-demo`.
async fn move_jobs(rome: &Client) -> usize {
    Api::<Job>::namespaced(rome.clone(), NS)
        .list(&ListParams::default().labels(MOVE_OF))
        .await
        .unwrap()
        .items
        .len()
}

/// milan's copy of the claim (in the namespace milan holds rome's `liqo-demo` in), if any.
async fn milan_copy(milan: &Client) -> Option<PersistentVolumeClaim> {
    let ns = crate::real_nodes_offload::remote_ns(milan).await;
    Api::<PersistentVolumeClaim>::namespaced(milan.clone(), &ns)
        .get_opt(CLAIM)
        .await
        .unwrap()
}

fn liqoctl_move(k: &K8sLab, claim: &str, node: &str) -> std::process::Output {
    k.tool(
        "liqoctl",
        "rome",
        &[
            "move",
            "volume",
            claim,
            "-n",
            NS,
            "--node",
            node,
            "--timeout",
            "5m",
        ],
    )
    .unwrap()
}

/// liqoctl move refused: its stderr, checked to hold `why`; nothing of the claim changed.
async fn refused(
    k: &K8sLab,
    claims: &Api<PersistentVolumeClaim>,
    claim: &str,
    node: &str,
    why: &str,
) {
    let before = bound(claims).await;
    let out = liqoctl_move(k, claim, node);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "move {claim} to {node} not refused: {err}"
    );
    assert!(err.contains(why), "move {claim} to {node}: {err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert_eq!(bound(claims).await, before, "the claim changed");
    assert_eq!(move_jobs(&claims.clone().into_client()).await, 0);
    eprintln!("refused as it should: {}", err.trim());
}

/// After a gateway failover, rome's connections to milan's API server went through a NAT entry
/// that is gone: TCP keepalive on the peer clients must find them dead so that the virtual
/// kubelet's remote watches start again, well before the 300 s a silent watch may last. A pod
/// on `liqo-milan` (no volume), made once the failover is over and every pod pair answers
/// again, runs to its end, its status brought home by those watches, and is deleted within
/// 90 s; no component is restarted.
pub(crate) async fn remote_watches_recover(k: &K8sLab) {
    let rome = k.client("rome").await.unwrap();
    let pods = Api::<Pod>::namespaced(rome, NS);
    let t = Instant::now();
    let mut p = pod("after-failover", "echo done", true);
    let spec = p.spec.as_mut().unwrap();
    spec.volumes = None;
    spec.containers[0].volume_mounts = None;
    let (node, said) = run_pod(k, &pods, p).await;
    assert_eq!(node, "liqo-milan");
    assert_eq!(said, "done");
    let took = t.elapsed();
    eprintln!(
        "TIMING after the failover, a pod on liqo-milan done (remote watches live again): {:.1} s",
        took.as_secs_f64()
    );
    assert!(
        took < std::time::Duration::from_secs(90),
        "the remote watches took {took:?} to come back"
    );
}

/// The checks above on lab `k`.
pub(crate) async fn claims_move(k: &K8sLab) {
    let rome = k.client("rome").await.unwrap();
    let milan = k.client("milan").await.unwrap();
    let claims = Api::<PersistentVolumeClaim>::namespaced(rome.clone(), NS);
    let pods = Api::<Pod>::namespaced(rome.clone(), NS);
    claims
        .create(&PostParams::default(), &claim(CLAIM, "liqo"))
        .await
        .unwrap();

    // 100 MiB written on liqo-milan, read back by another pod there.
    let t = Instant::now();
    let write = "head -c 104857600 /dev/urandom > /data/blob && sync && sha256sum /data/blob | cut -d' ' -f1";
    let (node, sum) = run_pod(k, &pods, pod("writer", write, true)).await;
    assert_eq!(node, "liqo-milan");
    assert_eq!(sum.len(), 64, "{sum}");
    eprintln!(
        "TIMING 100 MiB written on liqo-milan: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let copy = milan_copy(&milan).await.expect("milan's copy of the claim");
    assert_eq!(
        copy.spec.as_ref().unwrap().storage_class_name.as_deref(),
        Some(volumes::CLASS)
    );
    assert_eq!(
        copy.status.as_ref().unwrap().phase.as_deref(),
        Some("Bound")
    );
    let read = "sha256sum /data/blob | cut -d' ' -f1";
    let (_, again) = run_pod(k, &pods, pod("reader", read, true)).await;
    assert_eq!(again, sum, "the bytes read back on liqo-milan");
    let (uid, volume) = bound(&claims).await;

    // Refusals, nothing changed.
    pods.create(
        &PostParams::default(),
        &pod("holder", "sleep infinity", true),
    )
    .await
    .unwrap();
    refused(
        k,
        &claims,
        CLAIM,
        TARGET,
        &format!("mounted by pod {NS}/holder"),
    )
    .await;
    gone_pod(&pods, "holder").await;
    claims
        .create(&PostParams::default(), &claim("plain", volumes::CLASS))
        .await
        .unwrap();
    refused(
        k,
        &claims,
        "plain",
        TARGET,
        "is of class \"lab-local\", not liqo",
    )
    .await;
    claims
        .delete("plain", &DeleteParams::default())
        .await
        .unwrap();
    refused(
        k,
        &claims,
        CLAIM,
        "nowhere",
        "node \"nowhere\" does not exist",
    )
    .await;

    // A move whose receiver is killed while it copies: liqoctl says so and deletes what it
    // made; the original as it was.
    let child = k
        .tool_command(
            "liqoctl",
            "rome",
            &["move", "volume", CLAIM, "-n", NS, "--node", TARGET],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let receiver = until(120, "the move's receiver running", || async {
        let l = pods
            .list(&ListParams::default().labels("storage.liqo.io/move-role=receive"))
            .await
            .map_err(|e| e.to_string())?;
        let running = l
            .items
            .iter()
            .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
        running
            .and_then(|p| p.metadata.name.clone())
            .ok_or_else(|| format!("{} receiver pods, none Running", l.items.len()))
    })
    .await;
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    pods.delete(&receiver, &now).await.unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success(),
        "the move with its receiver killed: {err}"
    );
    assert!(err.contains("failed") && err.contains("untouched"), "{err}");
    eprintln!("the move with its receiver killed: {}", err.trim());
    assert_eq!(
        bound(&claims).await,
        (uid.clone(), volume.clone()),
        "after the failed move"
    );
    assert!(
        milan_copy(&milan).await.is_some(),
        "milan's copy after the failed move"
    );
    assert_eq!(move_jobs(&rome).await, 0, "the failed move's Jobs left");
    // Its pods going (the sender's through the virtual kubelet) before the next move starts.
    until(240, "the failed move's pods gone", || async {
        let l = pods
            .list(&ListParams::default().labels(MOVE_OF))
            .await
            .map_err(|e| e.to_string())?;
        match l.items.len() {
            0 => Ok(()),
            n => Err(format!("{n} pods")),
        }
    })
    .await;

    // A move killed while it copies: the original as it was.
    let mut child = k
        .tool_command(
            "liqoctl",
            "rome",
            &["move", "volume", CLAIM, "-n", NS, "--node", TARGET],
        )
        // Its progress and any error in the test's output.
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let jobs = Api::<Job>::namespaced(rome.clone(), NS);
    until(240, "the move's receiver Job", || async {
        let l = jobs.list(&ListParams::default().labels(MOVE_OF)).await;
        match l.map_err(|e| e.to_string())?.items.len() {
            2 => Ok(()),
            n => Err(format!("{n} Jobs")),
        }
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        bound(&claims).await,
        (uid.clone(), volume.clone()),
        "after the killed move"
    );
    assert!(
        milan_copy(&milan).await.is_some(),
        "milan's copy after the killed move"
    );

    // The move: verified, re-bound, milan's copy gone.
    let t = Instant::now();
    let out = liqoctl_move(k, CLAIM, TARGET);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "move: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "TIMING liqoctl move volume (100 MiB from liqo-milan to {TARGET}): {:.1} s\n{said}",
        t.elapsed().as_secs_f64()
    );
    assert!(said.contains("earlier, interrupted move"), "{said}");
    assert!(said.contains("Copied and verified"), "{said}");
    let (new_uid, new_volume) = bound(&claims).await;
    assert_ne!(new_uid, uid);
    assert_ne!(new_volume, volume);
    let v = Api::<PersistentVolume>::all(rome.clone())
        .get(&new_volume)
        .await
        .unwrap();
    let affinity = serde_json::to_string(&v.spec.as_ref().unwrap().node_affinity).unwrap();
    assert!(affinity.contains(&format!("\"{TARGET}\"")), "{affinity}");
    assert_eq!(
        v.spec
            .as_ref()
            .unwrap()
            .persistent_volume_reclaim_policy
            .as_deref(),
        Some("Delete")
    );
    assert_eq!(move_jobs(&rome).await, 0, "the move's Jobs left");
    until(60, "milan's copy gone", || async {
        match milan_copy(&milan).await {
            None => Ok(()),
            Some(c) => Err(format!("{:?}", c.metadata.deletion_timestamp)),
        }
    })
    .await;
    let (node, moved) = run_pod(k, &pods, pod("reader", read, false)).await;
    assert_eq!(node, TARGET);
    assert_eq!(moved, sum, "the bytes read on {TARGET} after the move");

    claims
        .delete(CLAIM, &DeleteParams::default())
        .await
        .unwrap();
    until(60, "the claim gone", || async {
        match claims.get_opt(CLAIM).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("still there".into()),
        }
    })
    .await;
}
