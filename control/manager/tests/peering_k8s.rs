//! Two real clusters (the e2e harness), each running liqo-auth's server and these controllers
//! in-process with admin clients: rome peers out of band with milan as `liqoctl peer
//! out-of-band` would (remote token + ForeignCluster); both directions' conditions, the offer
//! (the sharing percentage of milan's kwok nodes, raised by a new node), then the unpeer.

use std::{
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use base64::Engine;
use control::{
    api::{
        discovery::{
            ClusterIdentity, ForeignCluster, PeeringConditionStatus as S,
            PeeringConditionType as T, ResourceRequest,
        },
        sharing::ResourceOffer,
    },
    consts::{keys, labels, objects},
    names,
    offer::{NodeInput, Percent},
};
use e2e::k8s::{self, Cluster, Clusters, Options};
use futures::FutureExt;
use k8s_openapi::{
    api::{
        authentication::v1::TokenRequest,
        core::v1::{ConfigMap, Namespace, Node, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding},
    },
    apimachinery::pkg::api::resource::Quantity,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
    config::Kubeconfig,
};
use liqo_auth::{server, tokens, url::Overrides};
use liqo_controller_manager::{
    context::{Context, Settings},
    launcher::NoopLauncher,
    metrics::Metrics,
    run,
};

static NEXT: AtomicUsize = AtomicUsize::new(0);

const ROME_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
const NAPLES_ID: &str = "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9";
const SHARING: u8 = 30;

/// Tears the clusters down even when the test fails.
struct DownOnDrop(e2e::lab::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Best effort in a destructor: a failure here cannot be reported better than the
        // test's own.
        let _ = k8s::down(&self.0);
    }
}

fn options() -> Options {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Options {
        prefix: format!("mgr{n}x{}", std::process::id() % 100_000)
            .parse()
            .unwrap(),
        clusters: 2,
        nodes: 3,
        overlapping: true,
    }
}

fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn identity(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

fn cluster_ca(kubeconfig: &Path) -> Vec<u8> {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    let data = kc.clusters[0]
        .cluster
        .as_ref()
        .and_then(|c| c.certificate_authority_data.clone())
        .unwrap();
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .unwrap()
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

/// A running side: its admin client, auth URL, and the stop signal of its auth server and
/// controllers.
struct Side {
    client: Client,
    url: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Installs what the installer would (CRDs, `liqo`, the identity ConfigMap, the peering
/// ClusterRoles), then starts the auth server and the controllers.
async fn start(c: &Cluster, me: &ClusterIdentity) -> Side {
    let client = c.client().await.unwrap();
    k8s::install_crds(&client, &repo("chart/crds"))
        .await
        .unwrap();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "liqo"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": objects::CLUSTER_ID_CONFIGMAP, "namespace": "liqo",
            "labels": {labels::APP_NAME: "clusterid-configmap"}},
        "data": {keys::CLUSTER_ID: me.cluster_id.as_str(), keys::CLUSTER_NAME: me.cluster_name.as_str()},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "liqo")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    for set in ["basic", "incoming", "outgoing"] {
        let path = format!("chart/files/liqo-remote-peering-{set}-ClusterRole.yaml");
        let role: ClusterRole =
            serde_saphyr::from_str(&std::fs::read_to_string(repo(&path)).unwrap()).unwrap();
        Api::<ClusterRole>::all(client.clone())
            .create(&PostParams::default(), &role)
            .await
            .unwrap();
    }
    let controllers_client = service_account_client(c, &client).await;
    let config = server::Config::new(
        "127.0.0.1:0".parse().unwrap(),
        "liqo",
        c.server.clone(),
        Some(cluster_ca(&c.kubeconfig)),
    );
    let bound = server::bind(config, client.clone()).await.unwrap();
    let port = bound.local_addr().port();
    let url = format!("https://127.0.0.1:{port}");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let stop = rx.map(drop).shared();
    let auth = tokio::spawn(bound.run(stop.clone()));
    let mut settings = Settings::new("liqo");
    settings.auth_overrides = Overrides {
        address: Some("127.0.0.1".into()),
        port: Some(port),
    };
    settings.sharing = Percent::new(SHARING).unwrap();
    settings.resync = Duration::from_secs(10);
    let local = liqo_auth::cluster::local_identity(&controllers_client, "liqo")
        .await
        .unwrap();
    assert_eq!(&local, me);
    let ctx = Arc::new(Context::new(
        controllers_client,
        settings,
        local,
        Arc::new(NoopLauncher),
        Metrics::default(),
    ));
    let controllers = tokio::spawn(run::run(ctx, stop));
    Side {
        client,
        url,
        stop: Some(tx),
        tasks: vec![auth, controllers],
    }
}

/// A client of ServiceAccount `liqo-controller-manager` in `liqo`, bound to the chart's
/// ClusterRole `liqo-controller-manager` (as the installer binds it): the controllers run with
/// exactly those permissions, so a missing verb fails this test.
async fn service_account_client(c: &Cluster, admin: &Client) -> Client {
    let text =
        std::fs::read_to_string(repo("chart/files/liqo-controller-manager-ClusterRole.yaml"))
            .unwrap();
    let role: ClusterRole = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(
        role.metadata.name.as_deref(),
        Some("liqo-controller-manager")
    );
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let sa: ServiceAccount = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "liqo-controller-manager", "namespace": "liqo"},
    }))
    .unwrap();
    let sas = Api::<ServiceAccount>::namespaced(admin.clone(), "liqo");
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let crb: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "liqo-controller-manager"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "liqo-controller-manager"},
        "subjects": [{"kind": "ServiceAccount", "name": "liqo-controller-manager", "namespace": "liqo"}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &crb)
        .await
        .unwrap();
    let tr: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"audiences": [], "expirationSeconds": 3600},
    }))
    .unwrap();
    let token = sas
        .create_token_request("liqo-controller-manager", &PostParams::default(), &tr)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    let ca = base64::engine::general_purpose::STANDARD.encode(cluster_ca(&c.kubeconfig));
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
        c.server
    );
    let kc = Kubeconfig::from_yaml(&text).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    let client = Client::try_from(config).unwrap();
    // Least privilege: e.g. no Deployments.
    assert!(
        Api::<k8s_openapi::api::apps::v1::Deployment>::all(client.clone())
            .list(&ListParams::default())
            .await
            .is_err()
    );
    client
}

impl Side {
    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            // The receiver may be gone already if a task ended; the join below tells.
            let _ = tx.send(());
        }
        for t in self.tasks.drain(..) {
            tokio::time::timeout(Duration::from_secs(20), t)
                .await
                .expect("stopped in time")
                .unwrap();
        }
    }
}

fn condition(fc: &ForeignCluster, t: T) -> S {
    fc.status.as_ref().map_or(S::None, |s| s.condition(t))
}

async fn fc_conditions(client: &Client, name: &str, want: &[(T, S)]) -> Result<(), String> {
    let fc = Api::<ForeignCluster>::all(client.clone())
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())?
        .ok_or(format!("no ForeignCluster {name}"))?;
    for (t, s) in want {
        let got = condition(&fc, *t);
        if got != *s {
            return Err(format!("{t:?} is {got:?}, want {s:?}: {:?}", fc.status));
        }
    }
    Ok(())
}

/// The offer milan's nodes make at the sharing percentage (no pods run).
async fn expected_offer(milan: &Client) -> std::collections::BTreeMap<String, Quantity> {
    let nodes: Vec<NodeInput> = Api::<Node>::all(milan.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| NodeInput::from_node(n).unwrap())
        .collect();
    control::offer::offer(
        &nodes,
        &[],
        &ROME_ID.parse().unwrap(),
        Percent::new(SHARING).unwrap(),
    )
}

async fn offer_is(
    rome: &Client,
    tenant: &str,
    want: &std::collections::BTreeMap<String, Quantity>,
) -> Result<(), String> {
    let ro = Api::<ResourceOffer>::namespaced(rome.clone(), tenant)
        .get_opt("milan")
        .await
        .map_err(|e| e.to_string())?
        .ok_or("no ResourceOffer milan in rome")?;
    let got = ro
        .spec
        .resource_quota
        .and_then(|q| q.hard)
        .unwrap_or_default();
    if &got == want {
        Ok(())
    } else {
        Err(format!("offer {got:?}, want {want:?}"))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rome_peers_with_milan_out_of_band_gets_an_offer_and_unpeers() {
    // Another test of this binary may have installed it: then that one is used.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let bins = k8s::binaries().unwrap();
    let opts = options();
    let _down = DownOnDrop(opts.prefix.clone());
    let set = Clusters::up(&bins, &opts).await.unwrap();
    let rome_id = identity(ROME_ID, "rome");
    let milan_id = identity(MILAN_ID, "milan");
    let rome = start(&set.clusters[0], &rome_id).await;
    let milan = start(&set.clusters[1], &milan_id).await;

    // What `liqoctl peer out-of-band milan --auth-url --cluster-id --auth-token` writes.
    let milan_token = tokens::local_token(&milan.client, "liqo").await.unwrap();
    tokens::write_remote_token(&rome.client, "liqo", &milan_id.cluster_id, &milan_token)
        .await
        .unwrap();
    let fc: ForeignCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
        "metadata": {"name": "milan", "labels": {labels::CLUSTER_ID: MILAN_ID}},
        "spec": {
            "clusterIdentity": {"clusterID": MILAN_ID, "clusterName": "milan"},
            "foreignAuthUrl": milan.url,
            "outgoingPeeringEnabled": "Yes",
            "incomingPeeringEnabled": "Auto",
            "insecureSkipTLSVerify": true,
        },
    }))
    .unwrap();
    let t = Instant::now();
    Api::<ForeignCluster>::all(rome.client.clone())
        .create(&PostParams::default(), &fc)
        .await
        .unwrap();

    eventually(20, "rome's ForeignCluster for milan established", || {
        fc_conditions(
            &rome.client,
            "milan",
            &[
                (T::ProcessForeignClusterStatus, S::Success),
                (T::AuthenticationStatus, S::Established),
                (T::OutgoingPeering, S::Established),
                (T::IncomingPeering, S::None),
                (T::NetworkStatus, S::None),
            ],
        )
    })
    .await;
    eprintln!("outgoing established in {:.1} s", t.elapsed().as_secs_f64());
    eventually(20, "milan's incoming ForeignCluster for rome", || {
        fc_conditions(
            &milan.client,
            "rome",
            &[
                (T::AuthenticationStatus, S::Established),
                (T::IncomingPeering, S::Established),
                (T::OutgoingPeering, S::None),
            ],
        )
    })
    .await;
    let milan_fc = Api::<ForeignCluster>::all(milan.client.clone())
        .get("rome")
        .await
        .unwrap();
    assert_eq!(
        milan_fc.metadata.labels.unwrap()[labels::DISCOVERY_TYPE],
        "IncomingPeering"
    );

    // The offer: the sharing percentage of milan's 3 kwok nodes (32 cpu, 256Gi each).
    let rome_tenant = names::tenant_namespace(&milan_id).to_string();
    let milan_tenant = names::tenant_namespace(&rome_id).to_string();
    let want = expected_offer(&milan.client).await;
    assert_eq!(want["cpu"], Quantity("28800m".into()));
    eventually(20, "the offer in rome", || {
        offer_is(&rome.client, &rome_tenant, &want)
    })
    .await;

    // Roles: milan lets rome write its own request only (basic); rome lets milan write offers.
    let bindings = |c: Client, ns: String| async move {
        let mut names: Vec<String> =
            Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(c, &ns)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|b| b.metadata.name)
                .collect();
        names.sort();
        names
    };
    assert_eq!(
        bindings(rome.client.clone(), rome_tenant.clone()).await,
        [
            "liqo-binding-liqo-remote-peering-basic",
            "liqo-binding-liqo-remote-peering-outgoing"
        ]
    );
    assert_eq!(
        bindings(milan.client.clone(), milan_tenant.clone()).await,
        [
            "liqo-binding-liqo-remote-peering-basic",
            "liqo-binding-liqo-remote-peering-incoming"
        ]
    );

    // A new kwok node on milan raises the offer.
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": "milan-extra",
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {"kubernetes.io/hostname": "milan-extra", "type": "kwok"},
        },
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
        },
    }))
    .unwrap();
    Api::<Node>::all(milan.client.clone())
        .create(&PostParams::default(), &node)
        .await
        .unwrap();
    eventually(20, "the raised offer in rome", || {
        let (rome, milan, ns) = (
            rome.client.clone(),
            milan.client.clone(),
            rome_tenant.clone(),
        );
        async move {
            let want = expected_offer(&milan).await;
            if want["cpu"] != Quantity("38400m".into()) {
                return Err(format!("milan's new node not Ready yet: {want:?}"));
            }
            offer_is(&rome, &ns, &want).await
        }
    })
    .await;

    // Refusals: our own cluster ID is not processed; a wrong token is denied.
    let bad = |name: &str, id: &str, url: &str| -> ForeignCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.liqo.io/v1alpha1", "kind": "ForeignCluster",
            "metadata": {"name": name},
            "spec": {
                "clusterIdentity": {"clusterID": id, "clusterName": name},
                "foreignAuthUrl": url,
                "outgoingPeeringEnabled": "Yes",
            },
        }))
        .unwrap()
    };
    let fcs = Api::<ForeignCluster>::all(rome.client.clone());
    fcs.create(&PostParams::default(), &bad("myself", ROME_ID, &milan.url))
        .await
        .unwrap();
    let wrong = control::identity::AuthToken::generate().unwrap();
    tokens::write_remote_token(&rome.client, "liqo", &NAPLES_ID.parse().unwrap(), &wrong)
        .await
        .unwrap();
    fcs.create(
        &PostParams::default(),
        &bad("naples", NAPLES_ID, &milan.url),
    )
    .await
    .unwrap();
    eventually(20, "refusals", || async {
        fc_conditions(
            &rome.client,
            "myself",
            &[
                (T::ProcessForeignClusterStatus, S::Error),
                (T::AuthenticationStatus, S::None),
            ],
        )
        .await?;
        fc_conditions(
            &rome.client,
            "naples",
            &[
                (T::ProcessForeignClusterStatus, S::Success),
                (T::AuthenticationStatus, S::Denied),
                (T::OutgoingPeering, S::None),
            ],
        )
        .await
    })
    .await;
    let myself = fcs.get("myself").await.unwrap();
    let process = control::conditions::get(
        &myself.status.unwrap().peering_conditions,
        T::ProcessForeignClusterStatus,
    )
    .cloned()
    .unwrap();
    assert_eq!(process.reason.as_deref(), Some("LocalCluster"));
    let naples = fcs.get("naples").await.unwrap();
    let auth = control::conditions::get(
        &naples.status.unwrap().peering_conditions,
        T::AuthenticationStatus,
    )
    .cloned()
    .unwrap();
    assert_eq!(auth.reason.as_deref(), Some("IdentityDenied"));

    // Unpeer: outgoing No.
    Api::<ForeignCluster>::all(rome.client.clone())
        .patch(
            "milan",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"outgoingPeeringEnabled": "No"}})),
        )
        .await
        .unwrap();
    eventually(20, "unpeered", || {
        let (rome, milan) = (rome.client.clone(), milan.client.clone());
        let (rt, mt) = (rome_tenant.clone(), milan_tenant.clone());
        async move {
            fc_conditions(
                &rome,
                "milan",
                &[
                    (T::OutgoingPeering, S::None),
                    (T::AuthenticationStatus, S::Established),
                ],
            )
            .await?;
            fc_conditions(&milan, "rome", &[(T::IncomingPeering, S::None)]).await?;
            for (c, ns, side) in [(&rome, &rt, "rome"), (&milan, &mt, "milan")] {
                let rrs = Api::<ResourceRequest>::namespaced(c.clone(), ns)
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                let ros = Api::<ResourceOffer>::namespaced(c.clone(), ns)
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                if !rrs.items.is_empty() || !ros.items.is_empty() {
                    return Err(format!(
                        "{side}: {} ResourceRequests, {} ResourceOffers left",
                        rrs.items.len(),
                        ros.items.len()
                    ));
                }
            }
            Ok(())
        }
    })
    .await;
    // The ForeignCluster and the tenant namespaces stay; the outgoing role is unbound.
    assert!(
        Api::<ForeignCluster>::all(rome.client.clone())
            .get_opt("milan")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        bindings(rome.client.clone(), rome_tenant.clone()).await,
        ["liqo-binding-liqo-remote-peering-basic"]
    );

    rome.stop().await;
    milan.stop().await;
    drop(set);
}
