//! On a harness cluster (`testkit::k8s`: one per test binary, pool `chr`, lent to one test at a
//! time and torn down at exit, or at once when a test fails): every render of the values matrix
//! passes `kubectl apply --dry-run=server` with the CRDs applied; with cluster access, a render
//! keeps the existing cluster ID and leaves the IPAM's Secret (liqo-ipam's own) out, and
//! NOTES.txt leaves out the Pod Security command once the namespace has the label.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::{Api, Client, api::PostParams};
use serde_json::json;
use testkit::k8s::{self, Cluster, Pool, Shape};

use crate::helm::{self, IPAM_SECRET, NAMESPACE};

/// This binary's clusters.
static POOL: Pool = Pool::new("chr");
/// One cluster with one kwok node.
const ONE: Shape = Shape {
    clusters: 1,
    nodes: 1,
    overlapping: false,
};
/// The cluster tests take turns: a second lease while the first is out would start a second
/// cluster.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The release namespace, labelled for Pod Security as NOTES.txt asks, and the chart's CRDs.
async fn prepare(client: &Client) {
    k8s::install_crds(client, &helm::chart().join("crds"))
        .await
        .unwrap();
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": NAMESPACE, "labels": {
            "pod-security.kubernetes.io/enforce": "privileged",
        }},
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// `kubectl apply --dry-run=server` of `render` on `c`; returns kubectl's lines.
fn dry_run(kubectl: &Path, c: &Cluster, case: &str, render: &str) -> Vec<String> {
    let mut child = Command::new(kubectl)
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["--context", &c.name, "apply", "--dry-run=server", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {}: {e}", kubectl.display()));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(render.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{case}: kubectl apply --dry-run=server failed ({}):\n{}{stdout}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

/// `--kubeconfig <c's> --kube-context <c>`: helm with access to `c`.
fn helm_access(c: &Cluster) -> Vec<String> {
    vec![
        "--kubeconfig".into(),
        c.kubeconfig.display().to_string(),
        "--kube-context".into(),
        c.name.clone(),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_render_of_the_values_matrix_passes_a_server_side_dry_run() {
    let renders: Vec<(String, String)> = helm::cases()
        .into_iter()
        .map(|c| {
            let r = helm::template(&c.values, &[]).expect_ok();
            (c.name, r)
        })
        .collect();
    let _turn = TURN.lock().await;
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let c = &set.clusters[0];
    prepare(&c.client().await.unwrap()).await;
    let kubectl = bins.path("kubectl");
    for (case, render) in &renders {
        let want = helm::objects(render).len();
        let lines = dry_run(&kubectl, c, case, render);
        let done = lines
            .iter()
            .filter(|l| l.ends_with("(server dry run)"))
            .count();
        assert_eq!(
            done,
            want,
            "{case}: {want} objects, kubectl said:\n{}",
            lines.join("\n")
        );
    }
    set.release().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_render_with_cluster_access_keeps_the_cluster_id_and_leaves_the_ipam_secret_alone() {
    let values = helm::case("defaults");
    let _turn = TURN.lock().await;
    let bins = k8s::binaries().unwrap();
    let set = POOL.lease(&bins, ONE).await.unwrap();
    let c = &set.clusters[0];
    let client = c.client().await.unwrap();
    prepare(&client).await;
    let access = helm_access(c);
    let access: Vec<&str> = access.iter().map(String::as_str).collect();

    // What an earlier install of release liqo left (with Helm's marks of ownership, which an
    // upgrade checks): its identity; and the Secret liqo-ipam made (not Helm's).
    let owned = |name: &str| {
        json!({
            "name": name,
            "labels": {"app.kubernetes.io/managed-by": "Helm"},
            "annotations": {
                "meta.helm.sh/release-name": helm::RELEASE,
                "meta.helm.sh/release-namespace": NAMESPACE,
            },
        })
    };
    let id = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": owned("liqo-clusterid-configmap"),
        "data": {"CLUSTER_ID": id, "CLUSTER_NAME": "rome"},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {
            "name": IPAM_SECRET,
            "labels": {"app.kubernetes.io/managed-by": "liqo-ipam"},
        },
        "stringData": {"ca.crt": "CA", "token": "t".repeat(64)},
    }))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), NAMESPACE)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();

    let mut extra = vec![
        "--dry-run=server",
        "--set",
        "discovery.config.clusterIDOverride=",
    ];
    extra.extend(&access);
    let render = helm::template(&values, &extra).expect_ok();
    let objects = helm::objects(&render);
    let got = helm::find(&objects, "ConfigMap", "liqo-clusterid-configmap").unwrap();
    assert_eq!(
        got["data"]["CLUSTER_ID"], id,
        "the upgrade changed the cluster ID"
    );
    assert!(
        helm::find(&objects, "Secret", IPAM_SECRET).is_none(),
        "the render holds {IPAM_SECRET}: an upgrade would take it over"
    );
    assert_eq!(
        render,
        helm::template(
            &values,
            &[
                "--set",
                "discovery.config.clusterIDOverride=",
                "--set",
                &format!("discovery.config.clusterIDOverride={id}")
            ]
        )
        .expect_ok(),
        "with cluster access the render is the one without, given the installed cluster ID"
    );

    // The namespace has the Pod Security label: NOTES.txt does not ask for it.
    let chart = helm::chart();
    let mut args = vec![
        "install",
        "liqo",
        chart.to_str().unwrap(),
        "--namespace",
        NAMESPACE,
    ];
    args.extend(["--values", values.to_str().unwrap(), "--dry-run=server"]);
    args.extend(&access);
    let out = helm::run(&args).expect_ok();
    assert!(out.contains("NOTES:"), "{out}");
    assert!(!out.contains("kubectl label namespace"), "{out}");
    set.release().await.unwrap();
}
