//! What the apiserver tests share: clusters torn down on drop, the installer's steps, a side
//! running liqo-auth's server and the controllers in-process, condition and offer checks.

pub(crate) mod net;
pub(crate) mod offloading;

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
            ClusterIdentity, ForeignCluster, PeeringConditionStatus as S, PeeringConditionType as T,
        },
        sharing::ResourceOffer,
    },
    consts::{keys, labels, objects},
    offer::{NodeInput, Percent},
};
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
    api::{ListParams, PostParams},
    config::Kubeconfig,
};
use liqo_auth::{server, url::Overrides};
use liqo_controller_manager::{
    context::{Context, Settings},
    launcher::NoopLauncher,
    metrics::Metrics,
    network, run,
};
use testkit::k8s::{self, Cluster, Options, Pool, Shape};

pub(crate) static NEXT: AtomicUsize = AtomicUsize::new(0);

pub(crate) const ROME_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
pub(crate) const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
pub(crate) const NAPLES_ID: &str = "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9";
pub(crate) const SHARING: u8 = 30;

/// The clusters this binary's tests share, one test at a time per set (`testkit::k8s::Pool`:
/// each test gives its set back with `release` once its components stopped, and the pool
/// removes what the test made). A test that restarts or breaks a cluster, or changes what the
/// cluster had at its start, keeps its own clusters (`Clusters::up`) and says why.
pub(crate) static POOL: Pool = Pool::new("mgs");
/// One cluster with one kwok node.
pub(crate) const ONE: Shape = Shape {
    clusters: 1,
    nodes: 1,
    overlapping: false,
};
/// rome and milan with the same pod and service CIDRs, three kwok nodes each.
pub(crate) const TWO_SAME: Shape = Shape {
    clusters: 2,
    nodes: 3,
    overlapping: true,
};

/// Tears the clusters down even when the test fails.
pub(crate) struct DownOnDrop(pub(crate) testkit::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Best effort in a destructor: a failure here cannot be reported better than the
        // test's own.
        let _ = k8s::down(&self.0);
    }
}

pub(crate) fn options() -> Options {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    Options {
        // At most 10 characters (a Prefix) up to n = 99.
        prefix: format!("mgr{n}x{}", std::process::id() % 10_000)
            .parse()
            .unwrap(),
        clusters: 2,
        nodes: 3,
        overlapping: true,
    }
}

pub(crate) fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

pub(crate) fn identity(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

pub(crate) fn cluster_ca(kubeconfig: &Path) -> Vec<u8> {
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

pub(crate) async fn eventually<F, Fut>(secs: u64, what: &str, mut f: F)
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

/// A running side: its admin client, auth URL, its IPAM's address (with the network manager),
/// and the stop signal of its auth server, IPAM and controllers.
pub(crate) struct Side {
    pub(crate) client: Client,
    pub(crate) url: String,
    pub(crate) ipam: Option<String>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Installs what the installer would (CRDs, `liqo`, the identity ConfigMap, the peering
/// ClusterRoles), then starts the auth server and the controllers.
pub(crate) async fn start(c: &Cluster, me: &ClusterIdentity) -> Side {
    start_with(c, me, None).await
}

/// The network of a side: its gateway's key (the gateway operator's Secret) and the port of
/// its gateway override (address 127.0.0.1).
pub(crate) struct Net {
    pub(crate) public_key: &'static str,
    pub(crate) port: u16,
    /// How long a teardown waits for the peer.
    pub(crate) grace: Duration,
}

/// What the installer makes first: the CRDs, the namespace `liqo` and the identity ConfigMap
/// (cluster `id`, named `name`).
pub(crate) async fn install_base(client: &Client, id: &str, name: &str) {
    k8s::install_crds(client, &repo("chart/crds"))
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
        "data": {keys::CLUSTER_ID: id, keys::CLUSTER_NAME: name},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "liqo")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// [`start`], plus, with `net`, a `liqo-ipam` service in-process (the cluster's pod and service
/// CIDRs, state in memory), the key Secret, and the network manager.
pub(crate) async fn start_with(c: &Cluster, me: &ClusterIdentity, net: Option<Net>) -> Side {
    let client = c.client().await.unwrap();
    install_base(&client, me.cluster_id.as_str(), me.cluster_name.as_str()).await;
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
    let mut ctx = Context::new(
        controllers_client.clone(),
        settings,
        local,
        Arc::new(NoopLauncher),
        Metrics::default(),
    );
    let mut tasks = vec![auth];
    let mut ipam = None;
    if let Some(net) = net {
        let cfg = ipam::Config::new(c.pod_cidr, c.service_cidr);
        let service = ipam::service::Service::open(
            cfg,
            ipam::service::Overrides::default(),
            Box::new(ipam::store::MemStore::default()),
        )
        .unwrap();
        let server = ipam::service::server::Server::bind(
            "127.0.0.1:0".parse().unwrap(),
            &ipam::service::server::Security::default(),
        )
        .await
        .unwrap();
        let address = format!("http://{}", server.local_addr());
        let ipam_stop = stop.clone();
        tasks.push(tokio::spawn(async move {
            server.run(&service, ipam_stop).await.unwrap();
        }));
        let secret: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": control::consts::net::PUBLIC_KEY_SECRET, "namespace": "liqo",
                    "labels": {control::consts::net::KEY_LABEL: control::consts::net::WIREGUARD}},
                "stringData": {control::consts::net::PUBLIC_KEY: net.public_key},
            }))
            .unwrap();
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "liqo")
            .create(&PostParams::default(), &secret)
            .await
            .unwrap();
        let config = network::Config {
            ipam: ipam::service::client::ClientOptions::new(address.clone()),
            gateway: control::network::endpoint::Overrides {
                address: Some("127.0.0.1".parse().unwrap()),
                port: Some(net.port),
            },
            grace: net.grace,
        };
        ctx = ctx.with_network(network::Manager::new(controllers_client, config).unwrap());
        ipam = Some(address);
    }
    tasks.push(tokio::spawn(run::run(Arc::new(ctx), stop)));
    Side {
        client,
        url,
        ipam,
        stop: Some(tx),
        tasks,
    }
}

/// The peers the IPAM at `address` holds.
pub(crate) async fn ipam_peers(address: &str) -> Vec<ipam::service::proto::PeerInfo> {
    let mut c = ipam::service::client::connect(&ipam::service::client::ClientOptions::new(address))
        .await
        .unwrap();
    c.list(ipam::service::proto::Empty {})
        .await
        .unwrap()
        .into_inner()
        .peers
}

/// A client of ServiceAccount `liqo-controller-manager` in `liqo`, bound to the chart's
/// ClusterRole `liqo-controller-manager` (as the installer binds it): the controllers run with
/// exactly those permissions, so a missing verb fails this test.
pub(crate) async fn service_account_client(c: &Cluster, admin: &Client) -> Client {
    let text = service_account_kubeconfig(c, admin).await;
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

/// The kubeconfig (text, holding a token) of ServiceAccount `liqo-controller-manager` in
/// `liqo`, bound to the chart's ClusterRole (made here, as the installer makes them).
pub(crate) async fn service_account_kubeconfig(c: &Cluster, admin: &Client) -> String {
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
    text
}

impl Side {
    pub(crate) async fn stop(mut self) {
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

pub(crate) fn condition(fc: &ForeignCluster, t: T) -> S {
    fc.status.as_ref().map_or(S::None, |s| s.condition(t))
}

pub(crate) async fn fc_conditions(
    client: &Client,
    name: &str,
    want: &[(T, S)],
) -> Result<(), String> {
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
pub(crate) async fn expected_offer(milan: &Client) -> std::collections::BTreeMap<String, Quantity> {
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

pub(crate) async fn offer_is(
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
