//! Helpers of the liqo-auth harness tests: a one-cluster set with what the installer would
//! install, the service started in-process, CSRs, clients built from credentials.

use std::{
    path::Path,
    time::{Duration, Instant},
};

use base64::Engine;
use control::{
    api::discovery::ClusterIdentity,
    consts::{keys, labels, objects},
    identity::{AuthToken, CertificateIdentityRequest},
};
use k8s_openapi::api::{
    authentication::v1::TokenRequest,
    certificates::v1::CertificateSigningRequest,
    core::v1::{ConfigMap, Namespace, Pod, ServiceAccount},
    rbac::v1::{ClusterRole, ClusterRoleBinding},
};
use kube::{
    Api, Client,
    api::{ListParams, ObjectMeta, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use liqo_auth::server;
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use testkit::k8s::{self, Pool, Shape};

/// The cluster this binary's tests share, one test at a time (`testkit::k8s::Pool`: each test
/// gives it back with `release` once its servers stopped; the pool removes what the test made).
pub(crate) static POOL: Pool = Pool::new("aus");
/// One cluster with one kwok node.
pub(crate) const ONE: Shape = Shape {
    clusters: 1,
    nodes: 1,
    overlapping: false,
};

pub(crate) const MILAN_ID: &str = "6b2f6a3e-0c8d-4f1a-9e57-3d2c1b0a9f8e";
pub(crate) const ROME_ID: &str = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
pub(crate) const NAPLES_ID: &str = "f1e2d3c4-b5a6-4978-8695-a4b3c2d1e0f9";

pub(crate) fn repo(path: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

pub(crate) fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

pub(crate) fn identity(id: &str, name: &str) -> ClusterIdentity {
    ClusterIdentity {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    }
}

/// A key and a CSR with subject CN=`cn`, O=`o` (PEM), ECDSA P-256.
pub(crate) fn csr(cn: &str, o: &str) -> (KeyPair, String) {
    csr_with(cn, o, &rcgen::PKCS_ECDSA_P256_SHA256)
}

/// The same with a key of the algorithm `alg` (upstream's consumers use Ed25519).
pub(crate) fn csr_with(
    cn: &str,
    o: &str,
    alg: &'static rcgen::SignatureAlgorithm,
) -> (KeyPair, String) {
    let key = KeyPair::generate_for(alg).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn.push(DnType::OrganizationName, o);
    params.distinguished_name = dn;
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    (key, pem)
}

/// A client from a kubeconfig built from its parts.
pub(crate) async fn client_of(server: &str, ca_pem: &[u8], user: &str) -> Client {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: u\n  user:\n{user}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\ncurrent-context: c\n",
        b64(ca_pem)
    );
    let kc = Kubeconfig::from_yaml(&text).unwrap();
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(cfg).unwrap()
}

/// The cluster's CA (PEM), from its kubeconfig.
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

pub(crate) async fn apply_yaml_cluster_role(client: &Client, path: &str) -> String {
    let text = std::fs::read_to_string(repo(path)).unwrap();
    let role: ClusterRole = serde_saphyr::from_str(&text).unwrap();
    let name = role.metadata.name.clone().unwrap();
    Api::<ClusterRole>::all(client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    name
}

/// Installs what the installer would: CRDs, the `liqo` namespace, the identity ConfigMap, the
/// basic peering ClusterRole.
pub(crate) async fn install(admin: &Client) {
    k8s::install_crds(admin, &repo("chart/crds")).await.unwrap();
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("liqo".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(admin.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": objects::CLUSTER_ID_CONFIGMAP,
            "namespace": "liqo",
            "labels": {labels::APP_NAME: "clusterid-configmap"},
        },
        "data": {keys::CLUSTER_ID: MILAN_ID, keys::CLUSTER_NAME: "milan"},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(admin.clone(), "liqo")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    let basic = apply_yaml_cluster_role(
        admin,
        "chart/files/liqo-remote-peering-basic-ClusterRole.yaml",
    )
    .await;
    assert_eq!(basic, "liqo-remote-peering-basic");
}

pub(crate) struct Running {
    pub(crate) url: String,
    /// The service's request counters.
    pub(crate) metrics: liqo_auth::metrics::Metrics,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    pub(crate) async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            stop.send(()).unwrap();
        }
        (&mut self.task).await.unwrap();
    }
}

pub(crate) async fn start(client: Client, api_server_url: &str, ca: &[u8]) -> Running {
    let mut config = server::Config::new(
        "127.0.0.1:0".parse().unwrap(),
        "liqo",
        api_server_url,
        Some(ca.to_vec()),
    );
    config.token_check_period = Duration::from_millis(500);
    let metrics = config.metrics.clone();
    let bound = server::bind(config, client).await.unwrap();
    let url = format!("https://{}", bound.local_addr());
    assert!(
        bound
            .certificate_pem()
            .unwrap()
            .contains("BEGIN CERTIFICATE")
    );
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(bound.run(async move {
        // A dropped sender stops the server too.
        let _ = rx.await;
    }));
    Running {
        url,
        metrics,
        stop: Some(tx),
        task,
    }
}

pub(crate) fn request(
    consumer: &ClusterIdentity,
    ours: &AuthToken,
    theirs: Option<&AuthToken>,
    csr_pem: &str,
) -> CertificateIdentityRequest {
    CertificateIdentityRequest::new(consumer.clone(), ours, theirs, csr_pem.as_bytes().to_vec())
}

/// `request` with a proof of possession of `key` made for milan at `time_ms`.
pub(crate) fn proved(
    request: CertificateIdentityRequest,
    key: &KeyPair,
    time_ms: u64,
) -> CertificateIdentityRequest {
    use rcgen::SigningKey;
    let m = control::identity::proof::message(
        &MILAN_ID.parse().unwrap(),
        &request.certificate_signing_request,
        time_ms,
    );
    let signature = key.sign(&m).unwrap();
    request.with_proof(control::identity::Proof { time_ms, signature })
}

/// The count of `certificate` requests with `outcome` in `metrics`.
pub(crate) fn certificate_count(metrics: &liqo_auth::metrics::Metrics, outcome: &str) -> u64 {
    let text = metrics.encode();
    let key = format!("liqo_auth_requests_total{{path=\"certificate\",outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0, |n| n.trim().parse().unwrap())
}

pub(crate) async fn remote_tenant_csrs(admin: &Client) -> usize {
    Api::<CertificateSigningRequest>::all(admin.clone())
        .list(&ListParams::default().labels(&format!("{}=true", labels::REMOTE_TENANT_CSR)))
        .await
        .unwrap()
        .items
        .len()
}

pub(crate) async fn namespace_exists(admin: &Client, name: &str) -> bool {
    Api::<Namespace>::all(admin.clone())
        .get_opt(name)
        .await
        .unwrap()
        .is_some()
}

pub(crate) async fn eventually<F, Fut, T>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "{what} after {secs} s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Stops (SIGKILL) the child if the test fails before it stopped it.
pub(crate) struct KillOnDrop(pub(crate) Option<std::process::Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            // Best effort during a failed test's unwinding; the child may be gone already.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub(crate) fn free_port() -> u16 {
    // The harness's pick: below the ephemeral range, so no outgoing connection takes it.
    testkit::k8s::free_port().unwrap()
}

/// A plain HTTP GET (the metrics endpoint).
pub(crate) async fn http_get(addr: &str, path: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).await.ok()?;
    Some(out)
}

/// A client with the token of ServiceAccount liqo/liqo-auth, bound only by the chart's
/// ClusterRole (what the installer does).
pub(crate) async fn service_account_client(admin: &Client, server: &str, ca: &[u8]) -> Client {
    let role = apply_yaml_cluster_role(admin, "chart/files/liqo-auth-ClusterRole.yaml").await;
    assert_eq!(role, "liqo-auth");
    let sa: ServiceAccount = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "liqo-auth", "namespace": "liqo"},
    }))
    .unwrap();
    let sas = Api::<ServiceAccount>::namespaced(admin.clone(), "liqo");
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let crb: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "liqo-auth"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "liqo-auth"},
        "subjects": [{"kind": "ServiceAccount", "name": "liqo-auth", "namespace": "liqo"}],
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
    let tr = sas
        .create_token_request("liqo-auth", &PostParams::default(), &tr)
        .await
        .unwrap();
    let token = tr.status.unwrap().token;
    let client = client_of(server, ca, &format!("    token: {token}\n")).await;
    // The ServiceAccount cannot do more than the role: e.g. no pods.
    assert!(
        Api::<Pod>::namespaced(client.clone(), "default")
            .list(&ListParams::default())
            .await
            .is_err()
    );
    client
}
