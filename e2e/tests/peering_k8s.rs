//! Liqo on the harness's real clusters (`e2e::k8s`), installed by `e2e::liqo` as `liqo-lab k8s
//! up --liqo` does: the components run as processes with the chart's RBAC through their own
//! ServiceAccount tokens, each cluster has its own identity, and `liqo-lab k8s down` (here
//! `k8s::down`) stops the components with the clusters.
//!
//! Needs the components built next to this test (`cargo build -p ipam -p liqo-auth -p
//! liqo-controller-manager -p liqoctl`) or in `$LIQO_BIN_DIR`.

use std::{
    collections::BTreeSet,
    os::unix::fs::PermissionsExt,
    sync::atomic::{AtomicUsize, Ordering},
};

use control::{
    api::discovery::ForeignCluster,
    consts::{keys, labels, objects, values},
};
use e2e::{
    k8s::{self, Clusters, Options},
    liqo,
};
use k8s_openapi::api::{
    authentication::v1::SelfSubjectReview,
    core::v1::{ConfigMap, Secret},
    rbac::v1::ClusterRole,
};
use kube::{
    Api,
    api::{ListParams, PostParams},
};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Tears a detached set down even when the test fails.
struct DownOnDrop(e2e::lab::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Nothing to do about a failed teardown here; the test's own asserts report it.
        let _ = k8s::down(&self.0);
    }
}

fn options(clusters: usize) -> Options {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Options {
        prefix: format!("hl{n}x{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters,
        nodes: 1,
        overlapping: true,
    }
}

/// The components started: those whose binaries serve so far (liqo-auth and
/// liqo-controller-manager join when they do; then every row of `liqo::COMPONENTS`).
const STARTED: &[&str] = &["liqo-ipam"];

/// The names of the ClusterRoles in `chart/files/`.
fn chart_cluster_roles() -> Vec<String> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/files");
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_str_multiple(&text).unwrap();
        out.extend(
            docs.iter()
                .filter(|d| d["kind"] == "ClusterRole")
                .filter_map(|d| d["metadata"]["name"].as_str().map(str::to_owned)),
        );
    }
    out
}

fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>) {
    match r {
        Err(kube::Error::Api(s)) => assert_eq!(s.code, 403, "{s:?}"),
        other => panic!("allowed: {other:?}"),
    }
}

fn gone(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat.contains(") Z")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_runs_every_component_with_its_own_identity_and_real_rbac() {
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(&bins, &options(2)).await.unwrap();
    let _guard = DownOnDrop(set.prefix.clone());
    let opts = liqo::Options {
        start: STARTED.iter().map(|s| s.to_string()).collect(),
        ..liqo::Options::default()
    };
    let installed = liqo::install(&set, &bins, &opts).await.unwrap();
    assert_eq!(installed.clusters.len(), 2);

    let mut ids = BTreeSet::new();
    for c in &set.clusters {
        let i = installed.get(&c.name).unwrap();
        // Every component runs and serves.
        for program in STARTED {
            let r = i
                .get(program)
                .unwrap_or_else(|| panic!("{program} not started on {}", c.name));
            assert!(!gone(r.proc.pid), "{} of {} exited", r.program, c.name);
            liqo::probe(&r.url)
                .await
                .unwrap_or_else(|e| panic!("{} of {}: {e}", r.program, c.name));
        }
        let client = c.client().await.unwrap();

        // The identity: a UUIDv4, labelled, kept when installed again.
        let cm = Api::<ConfigMap>::namespaced(client.clone(), liqo::NAMESPACE)
            .get(objects::CLUSTER_ID_CONFIGMAP)
            .await
            .unwrap();
        assert_eq!(
            cm.metadata.labels.unwrap_or_default().get(labels::APP_NAME),
            Some(&values::CLUSTER_ID_CONFIGMAP_APP.to_owned())
        );
        let data = cm.data.unwrap_or_default();
        let id = data[keys::CLUSTER_ID].clone();
        assert_eq!(id, i.cluster_id);
        assert_eq!(data[keys::CLUSTER_NAME], c.name);
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12],
            "{id}"
        );
        assert!(parts[2].starts_with('4'), "version 4: {id}");
        assert_eq!(
            liqo::ensure_identity(&client, &c.name).await.unwrap(),
            id,
            "a re-run keeps the cluster ID"
        );
        ids.insert(id);

        // Every ClusterRole of chart/files is there (the peering ones at least).
        let roles = chart_cluster_roles();
        assert!(roles.len() >= 3, "{roles:?}");
        for r in &roles {
            Api::<ClusterRole>::all(client.clone())
                .get(r)
                .await
                .unwrap_or_else(|e| panic!("ClusterRole {r} on {}: {e}", c.name));
        }

        // One kubeconfig per ServiceAccount, private; RBAC is real: each token is its
        // ServiceAccount's and can do what its ClusterRole allows and nothing else.
        for (sa, path) in &i.kubeconfigs {
            let mode = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{sa}: {}", path.display());
        }
        let manager = k8s::client(&i.kubeconfigs["liqo-controller-manager"], &c.name)
            .await
            .unwrap();
        let review: SelfSubjectReview = Api::all(manager.clone())
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await
            .unwrap();
        assert_eq!(
            review
                .status
                .and_then(|s| s.user_info)
                .and_then(|u| u.username)
                .as_deref(),
            Some("system:serviceaccount:liqo:liqo-controller-manager")
        );
        Api::<ForeignCluster>::all(manager.clone())
            .list(&ListParams::default())
            .await
            .unwrap();
        // Its role reads the identity ConfigMap by name, never lists ConfigMaps.
        forbidden(
            Api::<ConfigMap>::namespaced(manager.clone(), "kube-system")
                .list(&ListParams::default())
                .await,
        );
        let auth = k8s::client(&i.kubeconfigs["liqo-auth"], &c.name)
            .await
            .unwrap();
        Api::<ConfigMap>::namespaced(auth.clone(), liqo::NAMESPACE)
            .get(objects::CLUSTER_ID_CONFIGMAP)
            .await
            .unwrap();
        // Its role gets, creates and patches Secrets, never lists them.
        forbidden(
            Api::<Secret>::namespaced(auth.clone(), "kube-system")
                .list(&ListParams::default())
                .await,
        );
    }
    assert_eq!(ids.len(), 2, "two clusters, two IDs: {ids:?}");

    // `liqo-lab k8s env` finds it again.
    let env = liqo::env(&liqo::load(&set).unwrap().unwrap());
    assert!(env.contains("export PATH="), "{env}");
    assert!(installed.bin.join("kubectl").is_file());

    // `liqo-lab k8s down` stops the components with the clusters and leaves nothing.
    let pids: Vec<u32> = installed
        .clusters
        .iter()
        .flat_map(|i| i.running.iter().map(|r| r.proc.pid))
        .collect();
    assert_eq!(pids.len(), 2 * STARTED.len());
    let (prefix, dir) = (set.prefix.clone(), set.dir.clone());
    set.detach();
    let d = k8s::down(&prefix).unwrap();
    assert_eq!((d.stopped, d.removed), (2 * 5 + pids.len(), true), "{d:?}");
    assert!(!dir.exists(), "{} left behind", dir.display());
    for pid in pids {
        assert!(gone(pid), "process {pid} still runs");
    }
}
