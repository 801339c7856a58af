//! The provider's ShadowPod controller on a real apiserver: `liqo-controller-manager` run as a
//! process by `testkit::liqo::install` under the chart's ClusterRole; ShadowPods created as admin
//! (as a consumer's virtual kubelet would). A ShadowPod gets its pod (labels, annotations,
//! spec, controller reference), which kwok runs (Running, an IP of the pod CIDR); the pod
//! deleted is re-created under a new UID within seconds; a pod of the name that the
//! ShadowPod does not control is left alone and reported by an Event; the ShadowPod deleted
//! (background or foreground) takes its pod with it: the controller-manager takes up each
//! deletion (its outcome logged, none failed), besides the garbage collector; deleted with
//! `--cascade=orphan`, its pod stays. Prints the timings it measures.

use crate::common;

use std::time::{Duration, Instant};

use common::{ONE, POOL, eventually};
use control::{api::virtualkubelet::ShadowPod, consts::reflection};
use k8s_openapi::api::core::v1::{Event, Namespace, Pod};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, PostParams},
};
use serde_json::json;
use testkit::{k8s, liqo};

const MANAGER: &str = "liqo-controller-manager";
const NS: &str = "sp-demo";

/// The controller-manager's log, for failure messages.
fn manager_log(c: &k8s::Cluster) -> String {
    let path = c.dir.join("liqo").join(format!("{MANAGER}.log"));
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| format!("{}: {e}", path.display()));
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(30)..].join("\n")
}

fn shadow(name: &str, image: &str) -> ShadowPod {
    serde_json::from_value(json!({
        "apiVersion": "virtualkubelet.liqo.io/v1alpha1", "kind": "ShadowPod",
        "metadata": {"name": name, "namespace": NS,
            "labels": {"app": name, reflection::ORIGIN: "rome"},
            "annotations": {"example.com/note": "from rome"}},
        "spec": {"pod": {"containers": [{"name": "app", "image": image}]}},
    }))
    .unwrap()
}

async fn pod(client: &Client, name: &str) -> Result<Pod, String> {
    Api::<Pod>::namespaced(client.clone(), NS)
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or(format!("no pod {NS}/{name}"))
}

/// Creates ShadowPod `name` (image `registry.example/<name>:1`) and waits until its pod is
/// there as forged.
async fn made(client: &Client, sps: &Api<ShadowPod>, name: &str) -> ShadowPod {
    let image = format!("registry.example/{name}:1");
    let sp = sps
        .create(&PostParams::default(), &shadow(name, &image))
        .await
        .unwrap();
    eventually(30, &format!("the pod of ShadowPod {name}"), || {
        let (client, sp) = (client.clone(), sp.clone());
        let name = name.to_owned();
        async move { check_pod(&pod(&client, &name).await?, &sp).map(drop) }
    })
    .await;
    sp
}

/// Waits up to `secs` until `api` has no object `name`.
async fn gone<K>(secs: u64, api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(secs, &format!("{name} gone"), || {
        let api = api.clone();
        let name = name.to_owned();
        async move {
            match api.get_opt(&name).await {
                Ok(None) => Ok(()),
                Ok(Some(_)) => Err(format!("{name} still there")),
                Err(e) => Err(e.to_string()),
            }
        }
    })
    .await;
}

/// The pod of `sp`: labels, annotations, spec, controller reference; returns its UID.
fn check_pod(p: &Pod, sp: &ShadowPod) -> Result<String, String> {
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let want = [
        ("app", sp.metadata.name.clone().unwrap()),
        (reflection::ORIGIN, "rome".into()),
        (
            reflection::MANAGED_BY,
            reflection::MANAGED_BY_SHADOWPOD.into(),
        ),
    ];
    for (k, v) in want {
        if labels.get(k) != Some(&v) {
            return Err(format!("label {k}: {labels:?}"));
        }
    }
    let notes = p.metadata.annotations.clone().unwrap_or_default();
    if notes.get("example.com/note").map(String::as_str) != Some("from rome") {
        return Err(format!("annotations {notes:?}"));
    }
    let owners = p.metadata.owner_references.clone().unwrap_or_default();
    let ok = owners.iter().any(|o| {
        o.kind == "ShadowPod"
            && Some(&o.uid) == sp.metadata.uid.as_ref()
            && o.controller == Some(true)
            && o.block_owner_deletion == Some(true)
    });
    if !ok {
        return Err(format!("owners {owners:?}"));
    }
    let spec = p.spec.clone().unwrap_or_default();
    if spec.containers.first().and_then(|c| c.image.clone()) != sp.spec.pod.containers[0].image {
        return Err(format!("containers {:?}", spec.containers));
    }
    Ok(p.metadata.uid.clone().unwrap_or_default())
}

/// Whether the pod runs (kwok) with an IP of `cidr`.
fn running_in(p: &Pod, cidr: ipnet::Ipv4Net) -> Result<(), String> {
    let st = p.status.clone().unwrap_or_default();
    let ip: Option<std::net::Ipv4Addr> = st.pod_ip.as_deref().and_then(|i| i.parse().ok());
    match (st.phase.as_deref(), ip) {
        (Some("Running"), Some(ip)) if cidr.contains(&ip) => Ok(()),
        _ => Err(format!("phase {:?}, ip {:?}", st.phase, st.pod_ip)),
    }
}

// One worker thread, as the binaries run by default (`--worker-threads`).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn shadowpods_get_their_pods_again_and_again() {
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    liqo::install(
        &set,
        &bins,
        &liqo::Options {
            start: vec![MANAGER.to_owned()],
            ..liqo::Options::default()
        },
    )
    .await
    .unwrap();
    let c = &set.clusters[0];
    let client = c.client().await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let sps: Api<ShadowPod> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);

    // A ShadowPod: its pod, run by kwok.
    let started = Instant::now();
    let web = sps
        .create(
            &PostParams::default(),
            &shadow("web", "registry.example/web:1"),
        )
        .await
        .unwrap();
    {
        let (client, web) = (client.clone(), web.clone());
        eventually(30, "the ShadowPod's pod", || {
            let (client, web) = (client.clone(), web.clone());
            async move { check_pod(&pod(&client, "web").await?, &web).map(drop) }
        })
        .await;
    }
    let first = check_pod(&pod(&client, "web").await.unwrap(), &web).unwrap();
    println!(
        "TIMING ShadowPod created to its pod: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    let cidr = c.pod_cidr;
    eventually(60, "the pod Running with a pod CIDR IP", || {
        let client = client.clone();
        async move { running_in(&pod(&client, "web").await?, cidr) }
    })
    .await;

    // Deleted: re-created under a new UID.
    for round in 0..2 {
        let old = pod(&client, "web").await.unwrap().metadata.uid.unwrap();
        let started = Instant::now();
        pods.delete("web", &DeleteParams::default()).await.unwrap();
        let (client2, web2) = (client.clone(), web.clone());
        eventually(30, "the pod re-created", || {
            let (client, web, old) = (client2.clone(), web2.clone(), old.clone());
            async move {
                let p = pod(&client, "web").await?;
                let uid = check_pod(&p, &web)?;
                if uid == old || p.metadata.deletion_timestamp.is_some() {
                    return Err(format!("still the old pod {old}"));
                }
                Ok(())
            }
        })
        .await;
        let took = started.elapsed();
        println!(
            "TIMING pod deleted to re-created (round {round}): {:.2} s",
            took.as_secs_f64()
        );
        assert!(
            took < Duration::from_secs(15),
            "{took:?}\n{}",
            manager_log(c)
        );
    }
    assert_ne!(
        pod(&client, "web").await.unwrap().metadata.uid.unwrap(),
        first
    );

    // A pod of the name that another made: untouched, and an Event on the ShadowPod.
    let theirs: Pod = serde_json::from_value(json!({
        "metadata": {"name": "other", "labels": {"mine": "yes"}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/theirs:1"}]},
    }))
    .unwrap();
    let theirs = pods.create(&PostParams::default(), &theirs).await.unwrap();
    let other = sps
        .create(
            &PostParams::default(),
            &shadow("other", "registry.example/web:1"),
        )
        .await
        .unwrap();
    let other_uid = other.metadata.uid.clone().unwrap();
    eventually(30, "a Warning Event on ShadowPod other", || {
        let client = client.clone();
        let other_uid = other_uid.clone();
        async move {
            let events = Api::<Event>::namespaced(client, NS)
                .list(&ListParams::default().fields("involvedObject.name=other"))
                .await
                .map_err(|e| e.to_string())?
                .items;
            events
                .iter()
                .find(|e| {
                    e.reason.as_deref() == Some("PodNotControlled")
                        && e.type_.as_deref() == Some("Warning")
                        && e.involved_object.uid.as_deref() == Some(other_uid.as_str())
                })
                .map(drop)
                .ok_or(format!("events {events:?}"))
        }
    })
    .await;
    let after = pod(&client, "other").await.unwrap();
    assert_eq!(after.metadata.uid, theirs.metadata.uid);
    assert_eq!(after.metadata.owner_references, None);
    assert_eq!(
        after
            .metadata
            .labels
            .unwrap_or_default()
            .get(reflection::MANAGED_BY),
        None
    );
    assert_eq!(
        after.spec.unwrap().containers[0].image.as_deref(),
        Some("registry.example/theirs:1")
    );

    // Deleted in the foreground (the ShadowPod stays, being deleted, until its pod goes): the
    // controller-manager deletes the pod.
    made(&client, &sps, "fg").await;
    sps.delete("fg", &DeleteParams::foreground()).await.unwrap();
    gone(60, &pods, "fg").await;

    // The ShadowPod deleted: its pod goes, the other pod stays.
    let started = Instant::now();
    sps.delete("web", &DeleteParams::default()).await.unwrap();
    sps.delete("other", &DeleteParams::default()).await.unwrap();
    gone(60, &pods, "web").await;
    println!(
        "TIMING ShadowPod deleted to its pod gone: {:.2} s",
        started.elapsed().as_secs_f64()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        pod(&client, "other").await.unwrap().metadata.uid,
        theirs.metadata.uid
    );
    // The controller-manager took up each deletion, not only the garbage collector, which
    // the test clusters run too: its delete may be first (then "absent" or "kept"), so the
    // outcome is printed, not asserted; none failed; the pod it does not control was kept.
    let log_path = c.dir.join("liqo").join(format!("{MANAGER}.log"));
    let outcomes = move |pod: &str| {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        let of = [
            format!("the pod of a deleted ShadowPod pod={NS}/{pod} "),
            format!("the pod of a ShadowPod being deleted pod={NS}/{pod} "),
        ];
        let failed = format!("left to the garbage collector pod={NS}/{pod} ");
        let seen: Vec<String> = log
            .lines()
            .filter(|l| of.iter().any(|m| l.contains(m.as_str())))
            .map(|l| l.split("outcome=").nth(1).unwrap_or(l).to_owned())
            .collect();
        (seen, log.lines().any(|l| l.contains(&failed)))
    };
    // The outcomes logged for the pod of a ShadowPod once there is one (within 30 s).
    let settled = |pod: &'static str| {
        let outcomes = outcomes.clone();
        async move {
            let again = outcomes.clone();
            eventually(
                30,
                &format!("an outcome for the pod of ShadowPod {pod}"),
                || {
                    let (seen, _) = again(pod);
                    async move {
                        if seen.is_empty() {
                            Err("none yet".to_owned())
                        } else {
                            Ok(())
                        }
                    }
                },
            )
            .await;
            outcomes(pod)
        }
    };
    for pod in ["web", "fg", "other"] {
        let (seen, failed) = settled(pod).await;
        assert!(!failed, "{pod}: {}", manager_log(c));
        println!("TIMING outcome for the pod of ShadowPod {pod}: {seen:?}");
        if pod == "other" {
            assert!(seen.iter().all(|o| o.contains("kept")), "{seen:?}");
        }
    }

    // Deleted with --cascade=orphan: its pod stays, without its owner.
    made(&client, &sps, "orph").await;
    let kept_uid = pod(&client, "orph").await.unwrap().metadata.uid;
    let orphan = DeleteParams {
        propagation_policy: Some(kube::api::PropagationPolicy::Orphan),
        ..DeleteParams::default()
    };
    sps.delete("orph", &orphan).await.unwrap();
    gone(60, &sps, "orph").await;
    let (seen, failed) = settled("orph").await;
    assert!(
        !failed && seen.iter().all(|o| o.contains("kept")),
        "{seen:?}: {}",
        manager_log(c)
    );
    let kept = pod(&client, "orph").await.unwrap();
    assert_eq!(kept.metadata.uid, kept_uid);
    assert_eq!(kept.metadata.owner_references, None);
    Api::<Pod>::namespaced(client.clone(), NS)
        .delete("orph", &DeleteParams::default())
        .await
        .unwrap();
    set.release().await.unwrap();
}
