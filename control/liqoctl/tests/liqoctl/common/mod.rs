//! What the liqoctl apiserver tests share: a one-cluster harness prepared as the installer
//! prepares it (namespace `liqo`, identity ConfigMap, `auth-token` Secret, LoadBalancer Service
//! `liqo-auth` with ingress 127.0.0.1), the built binary run against it, and the
//! ForeignCluster's conditions written as its controller would.

use std::{
    path::{Path, PathBuf},
    process::{Output, Stdio},
    sync::atomic::{AtomicUsize, Ordering},
};

use control::{
    api::discovery::{ForeignCluster, ForeignClusterStatus},
    conditions::{Condition, set},
    consts::{keys, labels, objects, values},
    identity::AuthToken,
};
use k8s_openapi::{
    api::core::v1::{ConfigMap, Namespace, Secret, Service},
    apimachinery::pkg::apis::meta::v1::Time,
    jiff::Timestamp,
};
use kube::{
    Api, Client,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use serde_json::json;
use testkit::k8s::{self, Clusters, Options};

pub(crate) static NEXT: AtomicUsize = AtomicUsize::new(0);

pub(crate) const ROME_ID: &str = "3f1e7f52-6b8a-4d4c-9a0f-1c2d3e4f5a6b";
pub(crate) const MILAN_ID: &str = "b07938e3-d241-460c-a77b-e286c0f733c7";
pub(crate) const AUTH_PORT: i32 = 31443;

/// Tears the clusters down even when the test fails.
pub(crate) struct DownOnDrop(pub(crate) testkit::Prefix);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        // Already down when `Clusters` was dropped first; a failure here cannot be reported
        // from a destructor and leaves nothing `Clusters`' own teardown did not log.
        let _ = k8s::down(&self.0);
    }
}

pub(crate) struct Ctl {
    pub(crate) kubeconfig: PathBuf,
    pub(crate) context: String,
}

impl Ctl {
    pub(crate) fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(env!("CARGO_BIN_EXE_liqoctl"));
        c.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--context")
            .arg(&self.context)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        c
    }

    pub(crate) async fn run(&self, args: &[&str]) -> Output {
        let out = self.command(args).output().await.unwrap();
        eprintln!(
            "$ liqoctl {}\n-> {:?}\nstdout:\n{}stderr:\n{}",
            redact(&args.join(" ")),
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }
}

/// Command lines in the test log without the tokens.
pub(crate) fn redact(s: &str) -> String {
    s.split(' ')
        .map(|w| if w.len() == 128 { "<token>" } else { w })
        .collect::<Vec<_>>()
        .join(" ")
}

pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub(crate) async fn prepare(client: &Client, token: &AuthToken) {
    let nss: Api<Namespace> = Api::all(client.clone());
    nss.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": objects::LIQO_NAMESPACE}})).unwrap(),
    )
    .await
    .unwrap();
    let ns = objects::LIQO_NAMESPACE;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    cms.create(
        &PostParams::default(),
        &serde_json::from_value(json!({
            "metadata": {
                "name": objects::CLUSTER_ID_CONFIGMAP,
                "labels": {labels::APP_NAME: values::CLUSTER_ID_CONFIGMAP_APP},
            },
            "data": {keys::CLUSTER_ID: ROME_ID, keys::CLUSTER_NAME: "rome"},
        }))
        .unwrap(),
    )
    .await
    .unwrap();
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": objects::AUTH_TOKEN_SECRET},
                "stringData": {keys::TOKEN: token.expose()},
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(client.clone(), ns);
    services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": objects::AUTH_SERVICE},
                "spec": {
                    "type": "LoadBalancer",
                    "selector": {"app": "liqo-auth"},
                    "ports": [{"name": "https", "port": AUTH_PORT, "targetPort": AUTH_PORT}],
                },
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    services
        .patch_status(
            objects::AUTH_SERVICE,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}})),
        )
        .await
        .unwrap();
}

/// Writes the ForeignCluster's conditions, as its controller would.
pub(crate) async fn set_conditions(fcs: &Api<ForeignCluster>, name: &str, conds: &[Condition]) {
    let now = Time(Timestamp::now());
    let mut status = ForeignClusterStatus::default();
    for c in conds {
        set(&mut status.peering_conditions, *c, &now);
    }
    fcs.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": status})),
    )
    .await
    .unwrap();
}

pub(crate) async fn fc_names(fcs: &Api<ForeignCluster>) -> Vec<String> {
    let l = fcs.list(&ListParams::default()).await.unwrap();
    l.items
        .into_iter()
        .filter_map(|f| f.metadata.name)
        .collect()
}

/// A stand-in for a remote cluster's auth service that answers only `GET /ids` (HTTPS,
/// self-signed, on `ip` and a free port) with `id` and `name`: what `peer out-of-band` asks
/// before it writes anything. Returns its URL; it serves until the test ends.
pub(crate) async fn fake_auth(ip: &str, id: &str, name: &str) -> String {
    use axum::{Json, Router, routing::get};
    let info = control::identity::ClusterInfo {
        cluster_id: id.parse().unwrap(),
        cluster_name: name.parse().unwrap(),
    };
    let ip: std::net::IpAddr = ip.parse().unwrap();
    let listener = tokio::net::TcpListener::bind((ip, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tls, _) = liqo_auth::server::tls::self_signed(ip, &[]).unwrap();
    let router = Router::new().route(
        control::consts::auth::IDS_PATH,
        get(move || {
            let info = info.clone();
            async move { Json(info) }
        }),
    );
    let limits = liqo_auth::https::Limits {
        handshake: std::time::Duration::from_secs(5),
        header: std::time::Duration::from_secs(5),
        request: std::time::Duration::from_secs(5),
        max_connections: 16,
        keep_alive: None,
    };
    tokio::spawn(liqo_auth::https::serve(
        "fake liqo-auth",
        listener,
        Some(tls),
        router,
        limits,
        liqo_auth::https::Connections::default(),
        std::future::pending::<()>(),
    ));
    format!("https://{addr}")
}

pub(crate) fn crds_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../chart/crds"))
}
/// The prepared cluster and what the phases of the test use.
pub(crate) struct Ctx {
    /// Runs the binary against the cluster.
    pub(crate) ctl: Ctl,
    /// ForeignClusters.
    pub(crate) fcs: Api<ForeignCluster>,
    /// Secrets in `liqo`.
    pub(crate) secrets: Api<Secret>,
    /// The auth URL `generate peer-command` should print.
    pub(crate) auth_url: String,
    /// The cluster's own token.
    pub(crate) rome_token: AuthToken,
    /// The token given for milan.
    pub(crate) milan_token: AuthToken,
    /// milan's auth service (a stand-in answering `/ids`).
    pub(crate) milan_url: String,
    /// A directory of the cluster's, removed with it.
    pub(crate) dir: PathBuf,
    /// The clusters (stopped on drop), then the guard that tears them down even if that failed.
    _set: Clusters,
    _guard: DownOnDrop,
}

impl Ctx {
    /// One cluster under a prefix of this test's, CRDs installed, prepared as the installer
    /// does.
    pub(crate) async fn up() -> Ctx {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let prefix: testkit::Prefix = format!("lq{n}x{}", std::process::id() % 100_000)
            .parse()
            .unwrap();
        let guard = DownOnDrop(prefix.clone());
        let bins = k8s::binaries().unwrap();
        let opts = Options {
            prefix,
            clusters: 1,
            nodes: 1,
            overlapping: true,
        };
        let set = Clusters::up(&bins, &opts).await.unwrap();
        let cluster = &set.clusters[0];
        let client = cluster.client().await.unwrap();
        k8s::install_crds(&client, crds_dir()).await.unwrap();
        let rome_token = AuthToken::from_bytes(&[0x5a; 64]);
        prepare(&client, &rome_token).await;
        Ctx {
            ctl: Ctl {
                kubeconfig: set.kubeconfig.clone(),
                context: cluster.name.clone(),
            },
            fcs: Api::all(client.clone()),
            secrets: Api::namespaced(client, objects::LIQO_NAMESPACE),
            auth_url: format!("https://127.0.0.1:{AUTH_PORT}"),
            rome_token,
            milan_token: AuthToken::from_bytes(&[0x17; 64]),
            milan_url: fake_auth("127.0.0.2", MILAN_ID, "milan").await,
            dir: cluster.dir.clone(),
            _set: set,
            _guard: guard,
        }
    }

    /// `peer out-of-band milan ...` with milan's URL, ID and token (no `--timeout`).
    pub(crate) fn milan_args(&self) -> [&str; 9] {
        [
            "peer",
            "out-of-band",
            "milan",
            "--auth-url",
            &self.milan_url,
            "--cluster-id",
            MILAN_ID,
            "--auth-token",
            self.milan_token.expose(),
        ]
    }
}
