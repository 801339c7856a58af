//! Pod reflection on real apiservers (control-plane.md §2.3): plain clusters, rome (home),
//! milan (provider) and turin (the three-cluster Service's second provider);
//! `liqo_virtual_kubelet::reflection::run` in a task with admin clients;
//! the NamespaceMap's status written by the test; the provider's ShadowPod controller played
//! by the test (a Pod owned by the ShadowPod, on milan's kwok node, which runs it). Checks the
//! ShadowPod (labels, spec), the status back (podIP, hostIP), restarts across a remote
//! replacement and a restart of the reflection, the deletion order, an orphan ShadowPod
//! removed at startup, a foreign ShadowPod left alone (Warning Event), a pod in a namespace
//! not offloaded (OffloadingBackOff) and one whose namespace stops being offloaded
//! (OffloadingAborted).

use crate::common;

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use common::{
    AbortOnDrop, DownOnDrop, create, eventually, patch_status,
    pods::{
        NODE, REMOTE_NS, kill_remote, local_pod, local_status, remote_ip, restart_count,
        run_remotely,
    },
};
use control::{
    api::{
        discovery::ClusterIdentity,
        virtualkubelet::{NamespaceMap, ShadowPod},
    },
    consts::reflection as consts,
    shadowpod::token::HomeApi,
};
use k8s_openapi::{
    api::{
        core::v1::{ConfigMap, Namespace, Node, Pod, ServiceAccount},
        events::v1::Event,
    },
    apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
};
use kube::{
    Api, Client,
    api::{DeleteParams, ListParams, Patch, PatchParams},
};
use liqo_virtual_kubelet::{VkConfig, config, reflection};
use serde_json::json;
use testkit::k8s::{self, Clusters};

const ROME_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
const TENANT: &str = "liqo-tenant-milan";
/// The home API server as milan's pods would reach it (API server support on).
const HOME_API: &str = "10.70.0.1";

fn identity(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

fn start(cfg: &Arc<VkConfig>) -> AbortOnDrop<Result<(), reflection::ReflectionError>> {
    AbortOnDrop(tokio::spawn(reflection::run(cfg.clone())))
}

// One worker thread, as the binaries run by default (`--worker-threads`).
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn pods_are_offloaded_through_shadow_pods_and_their_status_comes_back() {
    // Logs help when it fails; another test may have installed a subscriber already.
    tracing_subscriber::fmt().with_test_writer().try_init().ok();
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(&bins, &common::options(3)).await.unwrap();
    let _down = DownOnDrop(set.prefix.clone());
    let (rome_c, milan_c) = (set.get("rome").unwrap(), set.get("milan").unwrap());
    let rome = rome_c.client().await.unwrap();
    let milan = milan_c.client().await.unwrap();
    let kwok_node = milan_c.nodes[0].clone();
    for c in [&rome, &milan] {
        k8s::install_crds(c, &common::repo("chart/crds"))
            .await
            .unwrap();
    }
    let ns_api = |c: &Client| Api::<Namespace>::all(c.clone());
    for ns in [TENANT, "demo", "other"] {
        create(&ns_api(&rome), json!({"metadata": {"name": ns}})).await;
    }
    create(&ns_api(&milan), json!({"metadata": {"name": REMOTE_NS}})).await;
    // The virtual node exists (else the pod GC removes pods bound to it); nobody runs it.
    create(
        &Api::<Node>::all(rome.clone()),
        json!({"metadata": {"name": NODE}}),
    )
    .await;
    for (c, ns) in [(&rome, "demo"), (&rome, "other"), (&milan, REMOTE_NS)] {
        let sa: Api<ServiceAccount> = Api::namespaced(c.clone(), ns);
        eventually(60, &format!("ServiceAccount default in {ns}"), || {
            let sa = sa.clone();
            async move { sa.get("default").await.map(drop).map_err(|e| e.to_string()) }
        })
        .await;
    }
    let maps: Api<NamespaceMap> = Api::namespaced(rome.clone(), TENANT);
    create(
        &maps,
        json!({"apiVersion": "virtualkubelet.liqo.io/v1alpha1", "kind": "NamespaceMap",
               "metadata": {"name": "milan", "namespace": TENANT,
                            "labels": {"liqo.io/remote-cluster-id": MILAN_ID}},
               "spec": {}}),
    )
    .await;
    patch_status(
        &maps,
        "milan",
        json!({"currentMapping": {"demo": {"remoteNamespace": REMOTE_NS, "phase": "Accepted"}}}),
    )
    .await;

    // Before the virtual kubelet starts: an orphan ShadowPod of ours, and a foreign one
    // whose name a local pod takes.
    let shadows: Api<ShadowPod> = Api::namespaced(milan.clone(), REMOTE_NS);
    let ours = BTreeMap::from([
        (consts::ORIGIN.to_owned(), ROME_ID.to_owned()),
        (consts::DESTINATION.to_owned(), MILAN_ID.to_owned()),
    ]);
    let shadow_json = |name: &str, labels: &BTreeMap<String, String>| {
        json!({"apiVersion": "virtualkubelet.liqo.io/v1alpha1", "kind": "ShadowPod",
               "metadata": {"name": name, "namespace": REMOTE_NS, "labels": labels},
               "spec": {"pod": {"containers": [{"name": "c", "image": "busybox"}]}}})
    };
    create(&shadows, shadow_json("orphan", &ours)).await;
    let theirs_labels = BTreeMap::from([("app".to_owned(), "theirs".to_owned())]);
    create(&shadows, shadow_json("theirs", &theirs_labels)).await;
    let rome_pods = |ns: &str| Api::<Pod>::namespaced(rome.clone(), ns);
    create(&rome_pods("demo"), local_pod("theirs", "demo")).await;
    create(&rome_pods("demo"), local_pod("web", "demo")).await;
    create(&rome_pods("other"), local_pod("stray", "other")).await;

    let cfg = Arc::new(VkConfig {
        local: rome.clone(),
        remote: config::Remote::from_config(
            common::config(milan_c).await,
            liqo_auth::rate::DEFAULT,
        )
        .unwrap(),
        home: identity(ROME_ID, "rome"),
        foreign: identity(MILAN_ID, "milan"),
        tenant_namespace: TENANT.into(),
        offer: "milan".into(),
        node_ip: "127.0.0.1".parse().unwrap(),
        listen: "127.0.0.1:0".parse().unwrap(),
        client_ca: None,
        ipam: None,
        liqo_network: false,
        pod_workers: 4,
        lease_duration: config::DEFAULT_LEASE_DURATION,
        ping_interval: config::DEFAULT_PING_INTERVAL,
        ping_timeout: config::DEFAULT_PING_TIMEOUT,
        extra_labels: BTreeMap::new(),
        apiserver_support: false,
        home_api: Some(HomeApi {
            host: HOME_API.into(),
            port: 6443,
        }),
        reflection: Default::default(),
    });
    assert_eq!(cfg.node_name(), NODE);
    let vk = start(&cfg);

    // The ShadowPod of web: reflection labels, the local labels, a stripped spec; the local
    // pod labelled as offloaded.
    let shadow = eventually(60, "ShadowPod web", || {
        let shadows = shadows.clone();
        async move { shadows.get("web").await.map_err(|e| e.to_string()) }
    })
    .await;
    let labels = shadow.metadata.labels.clone().unwrap();
    assert_eq!(
        labels.get(consts::ORIGIN).map(String::as_str),
        Some(ROME_ID)
    );
    assert_eq!(
        labels.get(consts::DESTINATION).map(String::as_str),
        Some(MILAN_ID)
    );
    assert_eq!(labels.get("app").map(String::as_str), Some("web"));
    assert!(!labels.contains_key("liqo.io/shadowPod"), "{labels:?}");
    let spec = &shadow.spec.pod;
    assert_eq!(spec.node_name, None);
    assert_eq!(spec.automount_service_account_token, Some(false));
    assert_eq!(spec.service_account_name.as_deref(), Some("default"));
    let tolerations: Vec<_> = spec
        .tolerations
        .iter()
        .flatten()
        .filter_map(|t| t.key.clone())
        .collect();
    assert_eq!(
        tolerations,
        [
            "node.kubernetes.io/unreachable",
            "node.kubernetes.io/not-ready"
        ]
    );
    let api_access = spec
        .volumes
        .iter()
        .flatten()
        .find(|v| v.name.starts_with("kube-api-access-"))
        .expect("the ServiceAccount volume");
    let sources = api_access
        .projected
        .as_ref()
        .unwrap()
        .sources
        .clone()
        .unwrap();
    assert!(
        sources.iter().all(|s| s.service_account_token.is_none()),
        "{sources:?}"
    );
    assert!(
        sources.iter().any(|s| s
            .secret
            .as_ref()
            .is_some_and(|x| x.name == "liqo-token-web")),
        "the token read from its Secret: {sources:?}"
    );
    assert!(
        sources.iter().any(|s| s
            .config_map
            .as_ref()
            .is_some_and(|c| c.name == "kube-root-ca.crt.0a1b2")),
        "{sources:?}"
    );

    // Orphan removed; foreign ShadowPod untouched, a Warning on the local pod.
    eventually(60, "orphan ShadowPod deleted", || {
        let shadows = shadows.clone();
        async move {
            match shadows.get_opt("orphan").await.map_err(|e| e.to_string())? {
                None => Ok(()),
                Some(_) => Err("still there".into()),
            }
        }
    })
    .await;
    let events: Api<Event> = Api::namespaced(rome.clone(), "demo");
    eventually(60, "Warning event on pod theirs", || {
        let events = events.clone();
        async move {
            let list = events
                .list(&ListParams::default())
                .await
                .map_err(|e| e.to_string())?;
            list.items
                .iter()
                .any(|e| {
                    e.reason.as_deref() == Some("FailedReflection")
                        && e.type_.as_deref() == Some("Warning")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("theirs")
                })
                .then_some(())
                .ok_or(format!("{} events", list.items.len()))
        }
    })
    .await;
    let theirs = shadows.get("theirs").await.unwrap();
    assert_eq!(theirs.metadata.labels, Some(theirs_labels.clone()));
    assert_eq!(
        theirs.spec.pod.containers[0].image.as_deref(),
        Some("busybox")
    );

    // A pod in a namespace not offloaded: Pending/OffloadingBackOff.
    local_status(&rome, "other", "stray", "stray OffloadingBackOff", |p| {
        let s = p.status.clone().unwrap_or_default();
        (s.phase.as_deref() == Some("Pending")
            && s.reason.as_deref() == Some(consts::OFFLOADING_BACK_OFF))
        .then_some(())
        .ok_or(format!("{:?} {:?}", s.phase, s.reason))
    })
    .await;

    // The remote pod runs: its status comes back with its IP and the node's.
    run_remotely(&milan, "web", &kwok_node).await;
    let ip = remote_ip(&milan, "web").await;
    let expect_running = |ip: String, restarts: i32| {
        move |p: &Pod| {
            let s = p.status.clone().unwrap_or_default();
            let ips: Vec<String> = s.pod_ips.iter().flatten().map(|i| i.ip.clone()).collect();
            let ok = s.phase.as_deref() == Some("Running")
                && s.pod_ip.as_deref() == Some(ip.as_str())
                && ips == [ip.clone()]
                && s.host_ip.as_deref() == Some("127.0.0.1")
                && restart_count(p) == restarts;
            ok.then_some(()).ok_or(format!(
                "phase {:?} podIP {:?} podIPs {ips:?} hostIP {:?} restarts {}",
                s.phase,
                s.pod_ip,
                s.host_ip,
                restart_count(p)
            ))
        }
    };
    local_status(
        &rome,
        "demo",
        "web",
        "web Running with the remote IP",
        expect_running(ip, 0),
    )
    .await;
    // The local pod labelled as offloaded: by the status write (one request), or by a write
    // of its own only once its ShadowPod was LABEL_AFTER old with no status yet (a slow run).
    let web = rome_pods("demo").get("web").await.unwrap();
    let label = |m: &&ManagedFieldsEntry| {
        m.manager.as_deref() == Some("reflection.liqo.io")
            && m.fields_v1
                .as_ref()
                .is_some_and(|f| f.0.to_string().contains("f:liqo.io/shadowPod"))
    };
    let fields = web.metadata.managed_fields.clone().unwrap_or_default();
    let by = fields.iter().find(label).expect("the label's writer");
    let due = shadow.metadata.creation_timestamp.clone().unwrap().0
        + (control::shadowpod::reflection::LABEL_AFTER - Duration::from_secs(1));
    assert!(
        by.subresource.as_deref() == Some("status") || by.time.as_ref().is_some_and(|t| t.0 >= due),
        "{fields:?}"
    );
    // Its ShadowPod reads a token of its home ServiceAccount and points at the home API
    // server; milan's Events about it show at home.
    let pod_spec = shadows.get("web").await.unwrap().spec.pod;
    let env = pod_spec.containers[0].env.clone().unwrap_or_default();
    assert!(
        env.iter().any(|e| e.name == "KUBERNETES_SERVICE_HOST"
            && e.value.as_deref() == Some("kubernetes.default.svc")),
        "{env:?}"
    );
    let aliases = pod_spec.host_aliases.clone().unwrap_or_default();
    assert!(
        aliases.iter().any(|a| a.ip == HOME_API
            && a.hostnames
                .iter()
                .flatten()
                .any(|h| h == "kubernetes.default.svc")),
        "the home API server's names at its address: {aliases:?}"
    );
    let token = crate::tokens_k8s::check(rome_c, &rome, &milan, "web").await;
    // Written once: with nothing changing, the local pod stays as it is (no write loop).
    let rv = |p: Pod| p.metadata.resource_version;
    let before = rv(rome_pods("demo").get("web").await.unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(rv(rome_pods("demo").get("web").await.unwrap()), before);

    // The provider replaces the remote pod: one restart.
    let ip = kill_remote(&milan, "web", &kwok_node).await;
    local_status(
        &rome,
        "demo",
        "web",
        "web restartCount 1",
        expect_running(ip, 1),
    )
    .await;

    // The reflection restarts: it adopts the ShadowPod (same UID) and infers the restart.
    drop(vk);
    let vk = start(&cfg);
    // A label change the new reflection must carry to the ShadowPod: once there, it has seen
    // the current remote pod (its first sighting, where the restarts are inferred).
    rome_pods("demo")
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"round": "2"}}})),
        )
        .await
        .unwrap();
    eventually(
        60,
        "ShadowPod web relabelled by the restarted reflection",
        || {
            let shadows = shadows.clone();
            async move {
                let s = shadows.get("web").await.map_err(|e| e.to_string())?;
                let l = s.metadata.labels.unwrap_or_default();
                (l.get("round").map(String::as_str) == Some("2"))
                    .then_some(())
                    .ok_or(format!("{l:?}"))
            }
        },
    )
    .await;
    let ip = kill_remote(&milan, "web", &kwok_node).await;
    local_status(
        &rome,
        "demo",
        "web",
        "web restartCount 2 after a restart",
        expect_running(ip, 2),
    )
    .await;
    assert_eq!(
        shadows.get("web").await.unwrap().metadata.uid,
        shadow.metadata.uid
    );

    // The namespace's root CA is reflected (the offloaded pods' projections name it).
    let root_ca = format!("kube-root-ca.crt.{}", &ROME_ID[..5]);
    eventually(60, "the root CA reflected to demo-rome", || {
        let cms = Api::<ConfigMap>::namespaced(milan.clone(), REMOTE_NS);
        let root_ca = root_ca.clone();
        async move { cms.get(&root_ca).await.map(drop).map_err(|e| e.to_string()) }
    })
    .await;
    // Resource reflection, on these clusters (a namespace pair of its own).
    crate::resources_k8s::check(&cfg, &rome, &milan, rome_c.pod_cidr, milan_c.pod_cidr).await;
    // A Service across three clusters (turin the second provider), bidirectional rome/milan.
    crate::three_k8s::check(&cfg, rome_c, milan_c, set.get("turin").unwrap()).await;
    // A policy refusing the offloaded label on a status holds no status back.
    crate::label_policy_k8s::check(&rome, &milan, &kwok_node).await;

    // Deleting the local pod: ShadowPod gone (milan's GC removes the pod), then the local pod.
    rome_pods("demo")
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually(90, "web gone locally and remotely", || {
        let (shadows, local, remote) = (
            shadows.clone(),
            rome_pods("demo"),
            Api::<Pod>::namespaced(milan.clone(), REMOTE_NS),
        );
        async move {
            let s = shadows.get_opt("web").await.map_err(|e| e.to_string())?;
            let r = remote.get_opt("web").await.map_err(|e| e.to_string())?;
            let l = local.get_opt("web").await.map_err(|e| e.to_string())?;
            match (s, r, l) {
                (None, None, None) => Ok(()),
                (s, r, l) => Err(format!(
                    "shadow {} remote {} local {}",
                    s.is_some(),
                    r.is_some(),
                    l.is_some()
                )),
            }
        }
    })
    .await;

    // The token was bound to the home pod: it died with it.
    eventually(60, "the token refused once its pod is gone", || {
        crate::tokens_k8s::refused(rome_c, &token)
    })
    .await;

    // A running pod whose namespace stops being offloaded: Failed/OffloadingAborted.
    create(&rome_pods("demo"), local_pod("web2", "demo")).await;
    eventually(60, "ShadowPod web2", || {
        let shadows = shadows.clone();
        async move {
            shadows
                .get("web2")
                .await
                .map(drop)
                .map_err(|e| e.to_string())
        }
    })
    .await;
    run_remotely(&milan, "web2", &kwok_node).await;
    let ip = remote_ip(&milan, "web2").await;
    local_status(&rome, "demo", "web2", "web2 Running", expect_running(ip, 0)).await;
    patch_status(&maps, "milan", json!({"currentMapping": {"demo": null}})).await;
    local_status(&rome, "demo", "web2", "web2 OffloadingAborted", |p| {
        let s = p.status.clone().unwrap_or_default();
        let ready = s
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == "Ready")
            .map(|c| c.status.clone());
        (s.phase.as_deref() == Some("Failed")
            && s.reason.as_deref() == Some(consts::OFFLOADING_ABORTED)
            && ready.as_deref() != Some("True"))
        .then_some(())
        .ok_or(format!("{:?} {:?} ready {ready:?}", s.phase, s.reason))
    })
    .await;
    assert!(!vk.0.is_finished(), "the reflection ended");
    drop(vk);
    tokio::time::sleep(Duration::from_millis(100)).await;
}
