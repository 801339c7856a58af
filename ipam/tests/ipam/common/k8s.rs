//! A harness cluster for the ConfigMap store and the TLS Secret, shared by this binary's tests
//! one at a time, and in it per test: a namespace, and a ServiceAccount bound by a Role with
//! exactly the chart's rules for the IPAM (`chart/templates/ipam-rbac.yaml`: configmaps
//! `create`, `get` and `update` of the state's ConfigMap only; secrets `create`, `get` and
//! `update` of its Secret only), whose token `liqo-ipam` runs with.

use std::{
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use dataplane::supervisor::{Attached, Spec};
use ipam::service::{client, proto};
use k8s_openapi::api::{
    authentication::v1::TokenRequest,
    core::v1::{ConfigMap, Namespace, ServiceAccount},
    rbac::v1::{Role, RoleBinding},
};
use kube::{
    Api, Client,
    api::{ListParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};
use testkit::k8s::{Lease, Pool, Shape};

use super::BIN;

/// The cluster this binary's tests share (one kwok node; nothing runs on it).
static POOL: Pool = Pool::new("ipm");
const ONE: Shape = Shape {
    clusters: 1,
    nodes: 1,
    overlapping: false,
};
/// The pool lends a set to one test at a time and starts another for a second test asking
/// meanwhile: the tests take turns, so the binary runs one cluster.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The shared cluster, for this test alone until [`Leased::release`]; dropped unreleased (a
/// failed test), the cluster is torn down with everything the test made.
pub(crate) struct Leased {
    pub(crate) set: Lease,
    pub(crate) admin: Client,
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Leased {
    pub(crate) async fn take() -> Leased {
        let turn = TURN.lock().await;
        let bins = testkit::k8s::binaries().unwrap();
        let set = POOL.lease(&bins, ONE).await.unwrap();
        let admin = set.clusters[0].client().await.unwrap();
        Leased {
            set,
            admin,
            _turn: turn,
        }
    }

    /// Removes what the test made and gives the cluster back (the test's processes stopped).
    pub(crate) async fn release(self) {
        self.set.release().await.unwrap();
    }
}

/// The test's namespace `prefix`, and the ServiceAccount `<prefix>-ipam` bound by a Role with
/// the chart's rules for ConfigMap `configmap`; returns a kubeconfig with its token (in `dir`),
/// after checking that the token can do no more than the role says.
pub(crate) async fn sandbox(leased: &Leased, prefix: &str, configmap: &str, dir: &Path) -> PathBuf {
    let kubeconfig = sandbox_with(leased, prefix, &rules("configmaps", configmap), dir).await;
    // The token reaches its ConfigMap only: no list, no other name.
    let cms = Api::<ConfigMap>::namespaced(client_of(&kubeconfig).await, prefix);
    let e = cms.list(&ListParams::default()).await.unwrap_err();
    assert!(forbidden(&e), "{e}");
    let e = cms.get("another").await.unwrap_err();
    assert!(forbidden(&e), "{e}");
    assert!(cms.get_opt(configmap).await.unwrap().is_none());
    kubeconfig
}

/// The chart's rules for the IPAM's object `name` of `resource` (`configmaps`, `secrets`):
/// `create`, and `get` and `update` of that name.
pub(crate) fn rules(resource: &str, name: &str) -> Vec<serde_json::Value> {
    vec![
        serde_json::json!({"apiGroups": [""], "resources": [resource], "verbs": ["create"]}),
        serde_json::json!({"apiGroups": [""], "resources": [resource], "resourceNames": [name],
         "verbs": ["get", "update"]}),
    ]
}

/// The test's namespace `prefix`, and the ServiceAccount `<prefix>-ipam` bound by a Role with
/// `rules`; returns a kubeconfig with its token (in `dir`).
pub(crate) async fn sandbox_with(
    leased: &Leased,
    prefix: &str,
    rules: &[serde_json::Value],
    dir: &Path,
) -> PathBuf {
    let admin = &leased.admin;
    let create = PostParams::default();
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": prefix}})).unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(&create, &ns)
        .await
        .unwrap();
    let sa_name = format!("{prefix}-ipam");
    let sa: ServiceAccount =
        serde_json::from_value(serde_json::json!({"metadata": {"name": sa_name}})).unwrap();
    let sas = Api::<ServiceAccount>::namespaced(admin.clone(), prefix);
    sas.create(&create, &sa).await.unwrap();
    let role: Role = serde_json::from_value(serde_json::json!({
        "metadata": {"name": sa_name},
        "rules": rules,
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), prefix)
        .create(&create, &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": sa_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa_name},
        "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": prefix}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), prefix)
        .create(&create, &binding)
        .await
        .unwrap();
    let tr: TokenRequest = serde_json::from_value(serde_json::json!({
        "spec": {"audiences": [], "expirationSeconds": 3600},
    }))
    .unwrap();
    let token = sas
        .create_token_request(&sa_name, &create, &tr)
        .await
        .unwrap()
        .status
        .unwrap()
        .token;
    write_kubeconfig(leased, prefix, &token, dir)
}

pub(crate) fn forbidden(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 403)
}

/// A kubeconfig in `dir` for the leased cluster with `token`, namespace `ns`.
fn write_kubeconfig(leased: &Leased, ns: &str, token: &str, dir: &Path) -> PathBuf {
    let kc = Kubeconfig::read_from(&leased.set.clusters[0].kubeconfig).unwrap();
    let cluster = kc.clusters[0].cluster.clone().unwrap();
    let (server, ca) = (
        cluster.server.unwrap(),
        cluster.certificate_authority_data.unwrap(),
    );
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: u\n  user:\n    token: {token}\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n    namespace: {ns}\ncurrent-context: c\n"
    );
    super::secret(dir, "kubeconfig", &text)
}

/// The client config of a kubeconfig file.
pub(crate) async fn config_of(kubeconfig: &Path) -> kube::Config {
    let kc = Kubeconfig::read_from(kubeconfig).unwrap();
    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap()
}

pub(crate) async fn client_of(kubeconfig: &Path) -> Client {
    Client::try_from(config_of(kubeconfig).await).unwrap()
}

/// `liqo-ipam serve --store configmap` as the ServiceAccount of `kubeconfig`, on ConfigMap
/// `ns/name`, gRPC on 127.0.0.1:`port`; its log in `dir`.
pub(crate) fn spec(kubeconfig: &Path, ns: &str, name: &str, port: u16, metrics: u16) -> Spec {
    let dir = kubeconfig.parent().unwrap();
    Spec::new("liqo-ipam", BIN, dir.join("liqo-ipam.log"))
        .args(["serve", "--store", "configmap", "--state-configmap", name])
        .args(["--namespace", ns, "--pod-cidr", "10.200.0.0/16"])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--metrics-listen", &format!("127.0.0.1:{metrics}")])
        .env("KUBECONFIG", kubeconfig)
        .env_remove("LIQO_IPAM_SERVER")
        .kill_on_drop()
}

/// Starts `spec` and waits until it answers `List` (failing after 30 s or if it exits).
pub(crate) async fn start(spec: &Spec, url: &str) -> (Attached, client::Client) {
    let mut child = spec.attached().expect("starting liqo-ipam serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(mut c) = client::connect(&client::ClientOptions::new(url)).await
            && c.list(proto::Empty {}).await.is_ok()
        {
            return (child, c);
        }
        if let Some(status) = child.exited().unwrap() {
            panic!("liqo-ipam serve exited with {status}:\n{}", child.tail(30));
        }
        assert!(
            Instant::now() < deadline,
            "liqo-ipam serve did not come up in 30 s:\n{}",
            child.tail(30)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
