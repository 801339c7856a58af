//! Namespace offloading on real apiservers (control-plane.md §3.5): three clusters, the
//! controller-manager run as a process by `testkit::liqo::install` under the chart's RBAC; rome
//! consumes milan (`topology.liqo.io/region=center`) and turin (`=south`), peered by liqoctl's
//! own commands. Checks the virtual nodes, the seed's NamespaceOffloading example (§3.3) made
//! and removed by `liqoctl offload/unoffload namespace`,
//! the remote namespace with its annotations and RoleBinding, a pre-existing unmanaged
//! namespace (never deleted), restarts of the controller-manager and of a provider's
//! apiserver mid-offload, and the deletion. Prints the timings it measures.

use crate::common;

use std::time::Instant;

use common::{
    DownOnDrop, eventually,
    offloading::{
        REGION, conditions, create_namespace, liqoctl, made_for, ns_exists, offload, peer, row,
        status, virtual_node_as_offered,
    },
};
use control::{
    api::offloading::{NamespaceOffloading, OffloadingPhase},
    consts::offloading as off,
};
use k8s_openapi::api::{core::v1::Namespace, rbac::v1::RoleBinding};
use kube::{
    Api, Client,
    api::{DeleteParams, PostParams},
};
use serde_json::{Value, json};
use testkit::{
    k8s::{self, Clusters},
    liqo,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offloading_across_three_clusters() {
    let bins = k8s::binaries().unwrap();
    let mut options = common::options();
    options.clusters = 3;
    options.nodes = 1;
    // Its own clusters, not the shared pool's: it restarts turin's API server.
    let mut set = Clusters::up(&bins, &options).await.unwrap();
    let _guard = DownOnDrop(set.prefix.clone());
    let mut opts = liqo::Options::default();
    opts.cluster_labels
        .insert("milan".into(), format!("{REGION}=center"));
    opts.cluster_labels
        .insert("turin".into(), format!("{REGION}=south"));
    let mut installed = liqo::install(&set, &bins, &opts).await.unwrap();
    let id = |c: &str| installed.get(c).unwrap().cluster_id.clone();
    let (rome_id, milan_id, turin_id) = (id("rome"), id("milan"), id("turin"));
    let rome = set.get("rome").unwrap().client().await.unwrap();
    let milan = set.get("milan").unwrap().client().await.unwrap();
    let turin = set.get("turin").unwrap().client().await.unwrap();

    let started = Instant::now();
    peer(&set, &installed, "rome", "milan");
    peer(&set, &installed, "rome", "turin");

    // The virtual nodes: name, labels (the provider's region), taint, capacity = the offer.
    for (name, pid, region) in [
        ("milan", &milan_id, "center"),
        ("turin", &turin_id, "south"),
    ] {
        let node_name = format!("liqo-{name}");
        let (rome, pid) = (rome.clone(), pid.clone());
        eventually(
            90,
            &format!("virtual node {node_name} as its offer says"),
            || {
                let (rome, pid, node_name) = (rome.clone(), pid.clone(), node_name.clone());
                async move { virtual_node_as_offered(&rome, &node_name, &pid, region).await }
            },
        )
        .await;
    }
    println!(
        "TIMING peering of rome with milan and turin to both virtual nodes: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // The seed's example, by liqoctl: selector region=south, EnforceSameName; it waits for
    // the controller's verdict.
    let t0 = Instant::now();
    create_namespace(&rome, "liqo-demo").await;
    let (ok, out, err) = liqoctl(
        &set,
        &installed,
        "rome",
        &[
            "offload",
            "namespace",
            "liqo-demo",
            "--namespace-mapping-strategy",
            "EnforceSameName",
            "--pod-offloading-strategy",
            "LocalAndRemote",
            "--selector",
            "topology.liqo.io/region=south",
        ],
    );
    assert!(ok, "liqoctl offload namespace: {out}{err}");
    assert!(
        out.contains("Namespace \"liqo-demo\" offloaded to") && out.contains("turin"),
        "{out}"
    );
    println!(
        "TIMING liqoctl offload namespace liqo-demo returned: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let c = rome.clone();
    eventually(60, "liqo-demo Ready", || {
        let c = c.clone();
        async move {
            let s = status(&c, "liqo-demo").await?;
            (s.offloading_phase == Some(OffloadingPhase::Ready))
                .then_some(())
                .ok_or(format!("{s:?}"))
        }
    })
    .await;
    println!(
        "TIMING liqo-demo offloaded to turin (Ready): {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let s = status(&rome, "liqo-demo").await.unwrap();
    assert_eq!(s.remote_namespace_name.as_deref(), Some("liqo-demo"));
    let conds = conditions(&s);
    let key = |c: &str| {
        conds
            .keys()
            .find(|k| k.starts_with(&format!("{c}-")))
            .unwrap()
            .clone()
    };
    assert_eq!(conds.len(), 2, "{conds:?}");
    assert_eq!(
        conds[&key("milan")],
        [row(
            "OffloadingRequired",
            "False",
            "ClusterNotSelected",
            "You have not selected this cluster through ClusterSelector fields"
        )]
    );
    assert_eq!(
        conds[&key("turin")],
        [
            row(
                "OffloadingRequired",
                "True",
                "ClusterSelected",
                "The remote cluster has been selected through the ClusterSelector field"
            ),
            row(
                "Ready",
                "True",
                "RemoteNamespaceCreated",
                "Namespace correctly offloaded on this cluster"
            ),
        ]
    );
    // On turin only, with the annotations and the RoleBinding.
    let ns = Api::<Namespace>::all(turin.clone())
        .get("liqo-demo")
        .await
        .unwrap();
    let ann = ns.metadata.annotations.unwrap_or_default();
    assert_eq!(
        ann.get(off::ORIGINAL_NAME).map(String::as_str),
        Some("liqo-demo")
    );
    let managed = ann.get(off::MANAGED_BY_NAMESPACE_MAP).cloned().unwrap();
    let (tenant, map) = managed.split_once('/').unwrap();
    assert!(
        tenant.starts_with("liqo-tenant-rome-") && map.starts_with("turin-"),
        "{managed}"
    );
    let rb = Api::<RoleBinding>::namespaced(turin.clone(), "liqo-demo")
        .get(tenant)
        .await
        .unwrap();
    assert_eq!(rb.role_ref.name, "liqo-virtual-kubelet-remote");
    let subjects = serde_json::to_value(rb.subjects).unwrap();
    assert_eq!(subjects[0]["kind"], "User");
    assert_eq!(subjects[0]["name"], Value::from(rome_id.clone()));
    assert!(!ns_exists(&milan, "liqo-demo").await, "liqo-demo on milan");
    let label = |c: Client, n: &'static str| async move {
        Api::<Namespace>::all(c)
            .get(n)
            .await
            .unwrap()
            .metadata
            .labels
            .unwrap_or_default()
            .get(off::SCHEDULING_ENABLED)
            .cloned()
    };
    assert_eq!(
        label(rome.clone(), "liqo-demo").await.as_deref(),
        Some("true")
    );

    // A namespace that exists on turin, unmanaged, asked of both providers: turin's entry in
    // CreationLoopBackOff, milan's Ready, SomeFailed; released, milan's goes, turin's stays.
    Api::<Namespace>::all(turin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "liqo-clash"}})).unwrap(),
        )
        .await
        .unwrap();
    offload(&rome, "liqo-clash", None).await;
    let c = rome.clone();
    eventually(60, "liqo-clash SomeFailed", || {
        let c = c.clone();
        async move {
            let s = status(&c, "liqo-clash").await?;
            let conds = conditions(&s);
            let of = |p: &str| {
                conds
                    .iter()
                    .find(|(k, _)| k.starts_with(p))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            let backoff = of("turin-")
                .iter()
                .any(|r| r[0] == "Ready" && r[1] == "False" && r[2] == "CreationLoopBackOff");
            let ready = of("milan-")
                .iter()
                .any(|r| r[0] == "Ready" && r[1] == "True");
            (s.offloading_phase == Some(OffloadingPhase::SomeFailed) && backoff && ready)
                .then_some(())
                .ok_or(format!("{s:?}"))
        }
    })
    .await;
    assert!(ns_exists(&milan, "liqo-clash").await);
    Api::<NamespaceOffloading>::namespaced(rome.clone(), "liqo-clash")
        .delete("offloading", &DeleteParams::default())
        .await
        .unwrap();
    let t0 = Instant::now();
    let c = rome.clone();
    eventually(30, "liqo-clash's offloading gone", || {
        let c = c.clone();
        async move {
            match status(&c, "liqo-clash").await {
                Err(e) if e.contains("404") || e.contains("not found") => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
    assert!(
        !ns_exists(&milan, "liqo-clash").await,
        "milan's liqo-clash left"
    );
    println!(
        "TIMING liqo-clash's offloading released: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let clash = Api::<Namespace>::all(turin.clone())
        .get("liqo-clash")
        .await
        .unwrap();
    assert!(
        clash.metadata.deletion_timestamp.is_none(),
        "the unmanaged namespace was deleted"
    );

    // Restarts mid-offload: the controller-manager of rome, then turin's apiserver.
    let t0 = Instant::now();
    offload(&rome, "liqo-restart", None).await;
    let killed = liqo::kill9_component(&installed, "rome", "liqo-controller-manager").unwrap();
    let (_, took) = liqo::restart_component(&set, &mut installed, killed)
        .await
        .unwrap();
    println!(
        "TIMING rome's controller-manager restarted in {:.1} s",
        took.as_secs_f64()
    );
    let r = set.restart_apiserver("turin").await.unwrap();
    println!(
        "TIMING turin's apiserver unavailable {:.1} s",
        r.unavailable.as_secs_f64()
    );
    let turin = set.get("turin").unwrap().client().await.unwrap();
    let c = rome.clone();
    eventually(120, "liqo-restart Ready on both", || {
        let c = c.clone();
        async move {
            let s = status(&c, "liqo-restart").await?;
            (s.offloading_phase == Some(OffloadingPhase::Ready))
                .then_some(())
                .ok_or(format!("{s:?}"))
        }
    })
    .await;
    println!(
        "TIMING liqo-restart Ready on milan and turin across the restarts: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let mut on_milan = made_for(&milan, &rome_id).await;
    on_milan.sort();
    assert_eq!(on_milan, ["liqo-restart"]);
    let mut on_turin = made_for(&turin, &rome_id).await;
    on_turin.sort();
    assert_eq!(on_turin, ["liqo-demo", "liqo-restart"]);

    // liqoctl unoffload namespace liqo-demo: the remote namespace and the label go within 30 s.
    let t0 = Instant::now();
    let (ok, out, err) = liqoctl(
        &set,
        &installed,
        "rome",
        &["unoffload", "namespace", "liqo-demo"],
    );
    assert!(ok, "liqoctl unoffload namespace: {out}{err}");
    assert!(
        out.contains("Offloading of namespace \"liqo-demo\" removed"),
        "{out}"
    );
    println!(
        "TIMING liqoctl unoffload namespace liqo-demo returned: {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    let (c, t) = (rome.clone(), turin.clone());
    eventually(30, "liqo-demo released", || {
        let (c, t) = (c.clone(), t.clone());
        async move {
            if ns_exists(&t, "liqo-demo").await {
                return Err("liqo-demo still on turin".into());
            }
            match label(c, "liqo-demo").await {
                None => Ok(()),
                Some(v) => Err(format!("label still {v}")),
            }
        }
    })
    .await;
    println!(
        "TIMING liqo-demo's remote namespace and label gone in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        ns_exists(&turin, "liqo-clash").await,
        "the unmanaged namespace survived"
    );
}
