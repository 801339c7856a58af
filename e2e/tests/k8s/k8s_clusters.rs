//! Real Kubernetes control planes (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler, kwok) built from the Go module proxy by `e2e/k8s/build.sh` (cached; the first
//! build takes about 11 minutes) and run as local processes: Deployments get Running pods on
//! kwok nodes, the Liqo CRDs of `chart/crds/` are served and enforce their schemas, and teardown
//! leaves no process and no file.

use std::{
    path::Path,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use control::api::{discovery::ForeignCluster, offloading::NamespaceOffloading};
use e2e::k8s::{self, Clusters, Options};
use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace, core::v1::Pod};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// Tears a detached set down even when the test fails.
struct DownOnDrop(e2e::lab::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        let _ = k8s::down(&self.0);
    }
}

fn options(clusters: usize, nodes: usize) -> Options {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Options {
        prefix: format!("k{n}x{}", std::process::id() % 10_000_000)
            .parse()
            .unwrap(),
        clusters,
        nodes,
        overlapping: true,
    }
}

fn crds_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../chart/crds"))
}

async fn eventually<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match f().await {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what} after {secs} s: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

fn deployment(name: &str, replicas: i32) -> Deployment {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.invalid/pause"}]},
            },
        },
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_clusters_run_twenty_replicas_each_on_kwok_nodes_and_leave_nothing() {
    let bins = k8s::binaries().unwrap();
    let t = Instant::now();
    let set = Clusters::up(&bins, &options(2, 3)).await.unwrap();
    eprintln!("2 clusters ready in {:.1} s", t.elapsed().as_secs_f64());
    assert_eq!(set.clusters.len(), 2);
    assert_eq!(
        set.clusters[0].pod_cidr, set.clusters[1].pod_cidr,
        "overlapping on request"
    );
    for c in &set.clusters {
        let client = c.client().await.unwrap();
        let installed = k8s::install_crds(&client, crds_dir()).await.unwrap();
        assert!(installed.contains(&"foreignclusters.discovery.liqo.io".to_owned()));
        let deploys: Api<Deployment> = Api::namespaced(client.clone(), "default");
        deploys
            .create(&PostParams::default(), &deployment("web", 20))
            .await
            .unwrap();
        let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
        let nodes = c.nodes.clone();
        let cidr = c.pod_cidr;
        eventually(60, &format!("20 Running pods in {}", c.name), || {
            let (pods, nodes) = (pods.clone(), nodes.clone());
            async move {
                let l = pods
                    .list(&ListParams::default().labels("app=web"))
                    .await
                    .map_err(|e| e.to_string())?;
                let running = l
                    .items
                    .iter()
                    .filter(|p| {
                        let spec_node = p.spec.as_ref().and_then(|s| s.node_name.clone());
                        let st = p.status.as_ref();
                        st.and_then(|s| s.phase.as_deref()) == Some("Running")
                            && spec_node.is_some_and(|n| nodes.contains(&n))
                            && st
                                .and_then(|s| s.pod_ip.as_deref())
                                .and_then(|ip| ip.parse::<std::net::Ipv4Addr>().ok())
                                .is_some_and(|ip| cidr.contains(&ip))
                    })
                    .count();
                if running == 20 {
                    Ok(())
                } else {
                    Err(format!("{running} of {} Running", l.items.len()))
                }
            }
        })
        .await;
    }
    // Teardown: no process, no file.
    let dir = set.dir.clone();
    let pids: Vec<u32> = set
        .clusters
        .iter()
        .flat_map(|c| c.procs.iter().map(|p| p.pid))
        .collect();
    assert_eq!(pids.len(), 10, "5 processes per cluster");
    // Each runs with the kit's Go runtime settings (one processor, fewer collections), unless
    // this test's own environment chose them.
    for (key, value) in [("GOMAXPROCS", "1"), ("GOGC", "400")] {
        let want = std::env::var(key).unwrap_or_else(|_| value.to_owned());
        for &pid in &pids {
            let cl = k8s::command_line(pid).expect("its command line");
            let got = cl
                .env
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.clone());
            assert_eq!(
                got.as_deref(),
                Some(std::ffi::OsStr::new(&want)),
                "{key} of {}",
                cl.program.display()
            );
        }
    }
    drop(set);
    assert!(!dir.exists(), "{} left behind", dir.display());
    for pid in pids {
        let left = dataplane::procs::Process::read(pid);
        assert!(left.is_none(), "process {pid} still runs: {left:?}");
    }
}

async fn create_err<K>(api: &Api<K>, obj: serde_json::Value) -> String
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    let data = serde_json::to_vec(&obj).unwrap();
    match api
        .create(
            &PostParams::default(),
            &serde_json::from_value::<K>(obj.clone()).unwrap_or_else(|_| panic!("{obj}")),
        )
        .await
    {
        Ok(_) => panic!("accepted: {}", String::from_utf8_lossy(&data)),
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 422, "{s:?}");
            s.message
        }
        Err(e) => panic!("{e}"),
    }
}

/// Creates through the raw API, so that values our own types would refuse reach the apiserver.
async fn raw_create(
    client: &Client,
    path: &str,
    obj: serde_json::Value,
) -> Result<(), (u16, String)> {
    let req = http::Request::post(path)
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&obj).unwrap())
        .unwrap();
    match client.request_text(req).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) => Err((s.code, s.message)),
        Err(e) => Err((0, e.to_string())),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_liqo_crds_enforce_their_schemas_and_print_their_columns() {
    let bins = k8s::binaries().unwrap();
    let set = Clusters::up(&bins, &options(1, 1)).await.unwrap();
    let c = &set.clusters[0];
    let client = c.client().await.unwrap();
    k8s::install_crds(&client, crds_dir()).await.unwrap();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "liqo-demo"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let path = "/apis/offloading.liqo.io/v1alpha1/namespaces/liqo-demo/namespaceoffloadings";
    let offloading = |spec: serde_json::Value| {
        serde_json::json!({
            "apiVersion": "offloading.liqo.io/v1alpha1", "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "namespace": "liqo-demo"}, "spec": spec,
        })
    };

    // Refused by the schema, naming the field.
    let (code, msg) = raw_create(
        &client,
        path,
        offloading(serde_json::json!({"podOffloadingStrategy": "Sideways"})),
    )
    .await
    .unwrap_err();
    assert_eq!(code, 422, "{msg}");
    assert!(
        msg.contains("podOffloadingStrategy") && msg.contains("Sideways"),
        "{msg}"
    );
    let (code, msg) = raw_create(
        &client,
        path,
        offloading(serde_json::json!({"clusterSelector": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.liqo.io/region", "operator": "Near", "values": ["south"]}]}
        ]}})),
    )
    .await
    .unwrap_err();
    assert_eq!(code, 422, "{msg}");
    assert!(msg.contains("operator") && msg.contains("Near"), "{msg}");
    let (code, msg) = raw_create(
        &client,
        path,
        offloading(
            serde_json::json!({"clusterSelector": {"nodeSelectorTerms": [
                {"matchExpressions": [{"operator": "In", "values": ["south"]}]}
            ]}}),
        ),
    )
    .await
    .unwrap_err();
    assert_eq!(code, 422, "{msg}");
    assert!(msg.contains("key"), "{msg}");

    // A valid one round-trips field for field, with the defaults filled in by the apiserver.
    let fixture: NamespaceOffloading = serde_saphyr::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../control/tests/control/fixtures/namespaceoffloading.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let api: Api<NamespaceOffloading> = Api::namespaced(client.clone(), "liqo-demo");
    let mut want = fixture.clone();
    want.status = None;
    want.metadata = kube::api::ObjectMeta {
        name: Some("offloading".into()),
        ..Default::default()
    };
    api.create(&PostParams::default(), &want).await.unwrap();
    let got = api.get("offloading").await.unwrap();
    assert_eq!(got.spec, fixture.spec);
    let minimal = raw_create(
        &client,
        "/apis/offloading.liqo.io/v1alpha1/namespaces/default/namespaceoffloadings",
        serde_json::json!({
            "apiVersion": "offloading.liqo.io/v1alpha1", "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "namespace": "default"}, "spec": {},
        }),
    )
    .await;
    assert_eq!(minimal, Ok(()));
    let defaulted = Api::<NamespaceOffloading>::namespaced(client.clone(), "default")
        .get("offloading")
        .await
        .unwrap();
    let spec = serde_json::to_value(&defaulted.spec).unwrap();
    assert_eq!(spec["podOffloadingStrategy"], "LocalAndRemote", "{spec}");
    assert_eq!(spec["namespaceMappingStrategy"], "DefaultName", "{spec}");

    // ForeignCluster: spec and status (through its subresource) round-trip; kubectl shows the
    // columns of the seeds.
    let fc: ForeignCluster = serde_saphyr::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../control/tests/control/fixtures/foreigncluster.yaml"
        ))
        .unwrap(),
    )
    .unwrap();
    let fcs: Api<ForeignCluster> = Api::all(client.clone());
    let mut create = fc.clone();
    create.status = None;
    fcs.create(&PostParams::default(), &create).await.unwrap();
    let status = serde_json::json!({"status": serde_json::to_value(&fc.status).unwrap()});
    fcs.patch_status("milan", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let got = fcs.get("milan").await.unwrap();
    assert_eq!(got.spec, fc.spec);
    assert_eq!(got.status, fc.status);
    let msg = create_err(
        &fcs,
        serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": "bad"},
            "spec": {"clusterIdentity": {"clusterID": "b07938e3-d241-460c-a77b-e286c0f733c7", "clusterName": "bad"},
                     "foreignAuthUrl": "ftp//nowhere", "outgoingPeeringEnabled": "Yes",
                     "incomingPeeringEnabled": "Auto", "networkingEnabled": "Yes", "insecureSkipTLSVerify": true},
        }),
    )
    .await;
    assert!(msg.contains("foreignAuthUrl"), "{msg}");

    let out = std::process::Command::new(bins.path("kubectl"))
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(["get", "foreignclusters"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "OUTGOING",
            "PEERING",
            "INCOMING",
            "PEERING",
            "NETWORKING",
            "AUTHENTICATION",
            "AGE"
        ],
        "{text}"
    );
    let row: Vec<&str> = text.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["milan", "Established", "None", "Established", "Established"],
        "{text}"
    );
    eprintln!("{text}");

    // A detached set (as `liqo-lab k8s up` leaves it) is found again and torn down by prefix.
    let (prefix, dir) = (set.prefix.clone(), set.dir.clone());
    set.detach();
    let _guard = DownOnDrop(prefix.clone());
    let again = k8s::load(&prefix).unwrap();
    assert_eq!(again.clusters.len(), 1);
    assert!(
        again
            .env()
            .contains(&format!("export KUBECONFIG={}/kubeconfig", dir.display()))
    );
    drop(again);
    assert!(dir.exists(), "a loaded set is not torn down by dropping it");
    let d = k8s::down(&prefix).unwrap();
    assert_eq!((d.stopped, d.removed), (5, true), "{d:?}");
    assert!(!dir.exists());
    assert_eq!(
        k8s::down(&prefix).unwrap(),
        k8s::Down::default(),
        "idempotent"
    );
}
