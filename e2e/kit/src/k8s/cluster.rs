//! Starting one cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok
//! with `nodes` simulated nodes, each step waiting for the previous one to serve.
//!
//! kwok also serves the kubelet API of its nodes (their `kubeletEndpoint` port, on
//! 127.0.0.1): the apiserver calls it, with its kubelet client certificate, for `pods/log` and
//! `pods/exec`. Every container's log is [`Cluster::container_log`] (CRI format, one
//! `<RFC 3339 time> stdout F <line>` per line); an exec runs its command on this host in
//! [`Cluster::exec_dir`].

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use base64::Engine as _;
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::{
    Api, Client,
    api::PostParams,
    config::{KubeConfigOptions, Kubeconfig},
};
use serde::{Deserialize, Serialize};

use super::{
    Binaries, K8sError, pki,
    procs::{self, Proc, free_port},
};

/// One running cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cluster {
    /// Its name, also its kubeconfig context.
    pub name: String,
    /// Its files (certificates, etcd data, logs, kubeconfig).
    pub dir: PathBuf,
    /// Its kubeconfig (one context, named after the cluster).
    pub kubeconfig: PathBuf,
    /// The apiserver's address.
    pub server: String,
    /// Pod CIDR (kwok hands out pod IPs from it).
    pub pod_cidr: Ipv4Net,
    /// Service CIDR.
    pub service_cidr: Ipv4Net,
    /// The simulated nodes.
    pub nodes: Vec<String>,
    /// Its processes, in start order.
    pub procs: Vec<Proc>,
}

impl Cluster {
    /// Its API server's audit log (written only when it was started with
    /// [`super::Named::audit`]).
    pub fn audit_log(&self) -> PathBuf {
        audit_log(&self.dir)
    }

    /// A client for it.
    pub async fn client(&self) -> Result<Client, K8sError> {
        client(&self.kubeconfig, &self.name).await
    }

    /// The cluster CA: it signed the apiserver's kubelet client certificate, so a kubelet
    /// (a virtual kubelet) accepts the clients this CA signed.
    pub fn ca_crt(&self) -> PathBuf {
        self.dir.join("pki").join("ca.crt")
    }

    /// The apiserver's kubelet client certificate and key (for a test that calls a kubelet
    /// as the apiserver does).
    pub fn kubelet_client(&self) -> (PathBuf, PathBuf) {
        let pki = self.dir.join("pki");
        (
            pki.join("apiserver-kubelet-client.crt"),
            pki.join("apiserver-kubelet-client.key"),
        )
    }

    /// The log file kwok serves as every container's log (and previous log) on this
    /// cluster's kwok nodes, in CRI format: append `<RFC 3339 time> stdout F <line>\n`.
    pub fn container_log(&self) -> PathBuf {
        self.dir.join("kwok").join(CONTAINER_LOG)
    }

    /// The working directory of the commands kwok runs for an exec into any of its pods.
    pub fn exec_dir(&self) -> PathBuf {
        self.dir.join("kwok")
    }
}

/// The name of [`Cluster::container_log`] in the kwok directory.
const CONTAINER_LOG: &str = "containers.log";

/// kwok's extra configuration: every pod's containers log [`Cluster::container_log`], and an
/// exec into any of them runs locally in `dir`.
fn kwok_debugging(dir: &Path) -> Result<PathBuf, K8sError> {
    std::fs::create_dir_all(dir).map_err(|e| K8sError::io(dir, e))?;
    let log = dir.join(CONTAINER_LOG);
    pki::write(&log, "", false)?;
    let path = dir.join("debugging.yaml");
    let (log, dir) = (log.display(), dir.display());
    let text = format!(
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterLogs\nmetadata:\n  name: all-pods\nspec:\n  logs:\n  - logsFile: {log:?}\n    previousLogsFile: {log:?}\n---\napiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterExec\nmetadata:\n  name: all-pods\nspec:\n  execs:\n  - local:\n      workDir: {dir:?}\n"
    );
    pki::write(&path, &text, false)?;
    Ok(path)
}

/// A client for `context` of the kubeconfig at `path`.
pub async fn client(path: &Path, context: &str) -> Result<Client, K8sError> {
    let kc = Kubeconfig::read_from(path)
        .map_err(|e| K8sError::Kubeconfig(format!("{}: {e}", path.display())))?;
    let opts = KubeConfigOptions {
        context: Some(context.into()),
        ..KubeConfigOptions::default()
    };
    let cfg = kube::Config::from_custom_kubeconfig(kc, &opts)
        .await
        .map_err(|e| K8sError::Kubeconfig(format!("{}: {e}", path.display())))?;
    Client::try_from(cfg).map_err(K8sError::kube("building a client"))
}

/// The kubeconfig text of one cluster (certificates embedded).
pub(crate) fn kubeconfig_text(
    name: &str,
    server: &str,
    pki: &pki::Pki,
) -> Result<String, K8sError> {
    let b64 = |p: &Path| {
        std::fs::read(p)
            .map(|b| base64::engine::general_purpose::STANDARD.encode(b))
            .map_err(|e| K8sError::io(p, e))
    };
    Ok(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n- name: {name}-admin\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}-admin\ncurrent-context: {name}\n",
        b64(&pki.ca_crt)?,
        b64(&pki.admin_crt)?,
        b64(&pki.admin_key)?
    ))
}

/// Polls `ready` every 100 ms for up to `secs`; on timeout the error carries the end of `p`'s
/// log. Fails at once if the process died.
pub(super) async fn wait<F, Fut>(p: &Proc, secs: u64, mut ready: F) -> Result<(), K8sError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if ready().await {
            return Ok(());
        }
        let dead = !procs::alive(p.pid);
        if dead || Instant::now() > deadline {
            return Err(K8sError::NotReady {
                what: format!("{} ({})", p.name, if dead { "exited" } else { "running" }),
                secs,
                log: p.log.clone(),
                tail: procs::tail(&p.log, 15),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The API server's egress selection: what it dials in the cluster goes through the HTTP
/// CONNECT proxy on Unix socket `uds`.
fn egress_selector(uds: &Path) -> String {
    serde_json::json!({
        "apiVersion": "apiserver.k8s.io/v1beta1",
        "kind": "EgressSelectorConfiguration",
        "egressSelections": [{
            "name": "cluster",
            "connection": {
                "proxyProtocol": "HTTPConnect",
                "transport": {"uds": {"udsName": uds.display().to_string()}},
            },
        }],
    })
    .to_string()
}

/// Every request at level Metadata (who, which client, verb, object; no bodies), once, when
/// its response is complete (a watch: when it started).
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
";

/// The audit log of the cluster whose files are in `dir` (see [`super::Named::audit`]).
pub(crate) fn audit_log(dir: &Path) -> PathBuf {
    dir.join("logs").join("audit.log")
}

fn arg(k: &str, v: impl std::fmt::Display) -> String {
    format!("--{k}={v}")
}

/// What to start.
pub(crate) struct Spec<'a> {
    pub(crate) name: &'a str,
    pub(crate) dir: &'a Path,
    pub(crate) pod_cidr: Ipv4Net,
    pub(crate) service_cidr: Ipv4Net,
    pub(crate) nodes: usize,
    /// `--advertise-address` (default 127.0.0.1).
    pub(crate) advertise: Option<std::net::Ipv4Addr>,
    /// The API server's egress proxy (see [`super::Named::egress`]).
    pub(crate) egress: Option<&'a Path>,
    /// More addresses its certificate names (see [`super::Named::public`]).
    pub(crate) public: &'a [std::net::Ipv4Addr],
    /// The audit log on (see [`super::Named::audit`]).
    pub(crate) audit: bool,
}

/// Starts a cluster; every process started is pushed to `started` as soon as it runs, so the
/// caller can stop them if a later step fails.
pub(crate) async fn start(
    bins: &Binaries,
    s: &Spec<'_>,
    started: &mut Vec<Proc>,
) -> Result<Cluster, K8sError> {
    let started_at = Instant::now();
    let logs = s.dir.join("logs");
    std::fs::create_dir_all(&logs).map_err(|e| K8sError::io(&logs, e))?;
    let first_service_ip = s
        .service_cidr
        .hosts()
        .next()
        .unwrap_or(s.service_cidr.addr());
    let more: Vec<std::net::Ipv4Addr> = s.advertise.iter().chain(s.public).copied().collect();
    let pki = pki::create(&s.dir.join("pki"), first_service_ip, &more)?;
    let log = |n: &str| logs.join(format!("{n}.log"));
    let path = |p: &Path| p.display().to_string();
    let egress = match s.egress {
        Some(uds) => {
            let file = s.dir.join("egress-selector.json");
            pki::write(&file, &egress_selector(uds), false)?;
            vec![
                arg("egress-selector-config-file", path(&file)),
                arg("kubelet-preferred-address-types", "InternalIP,Hostname"),
            ]
        }
        None => Vec::new(),
    };
    let audit = if s.audit {
        let file = s.dir.join("audit-policy.yaml");
        pki::write(&file, AUDIT_POLICY, false)?;
        vec![
            arg("audit-policy-file", path(&file)),
            arg("audit-log-path", path(&audit_log(s.dir))),
            arg("audit-log-format", "json"),
            // Buffered: a request does not wait for its line.
            arg("audit-log-mode", "batch"),
            arg("audit-log-batch-max-wait", "1s"),
            arg("audit-log-maxsize", 0),
        ]
    } else {
        Vec::new()
    };

    let (client_port, peer_port) = (free_port()?, free_port()?);
    let etcd_url = format!("http://127.0.0.1:{client_port}");
    let peer_url = format!("http://127.0.0.1:{peer_port}");
    let etcd = procs::spawn(
        "etcd",
        &bins.path("etcd"),
        &[
            arg("name", "node0"),
            arg("data-dir", path(&s.dir.join("etcd"))),
            arg("listen-client-urls", &etcd_url),
            arg("advertise-client-urls", &etcd_url),
            arg("listen-peer-urls", &peer_url),
            arg("initial-advertise-peer-urls", &peer_url),
            arg("initial-cluster", format!("node0={peer_url}")),
            arg("auto-compaction-retention", 1),
            arg("quota-backend-bytes", 1u64 << 30),
            arg("unsafe-no-fsync", true),
        ],
        &log("etcd"),
    )?;
    started.push(etcd.clone());
    let health: SocketAddr = ([127, 0, 0, 1], client_port).into();
    wait(&etcd, 30, || async move {
        liqo_daemon::localhttp::get(health, "/health").is_ok_and(|b| b.contains("true"))
    })
    .await?;

    let api_port = free_port()?;
    let server = format!("https://127.0.0.1:{api_port}");
    let api = procs::spawn(
        "kube-apiserver",
        &bins.path("kube-apiserver"),
        &[
            arg("etcd-servers", &etcd_url),
            arg("bind-address", "127.0.0.1"),
            arg(
                "advertise-address",
                s.advertise.unwrap_or(std::net::Ipv4Addr::LOCALHOST),
            ),
            arg("secure-port", api_port),
            arg("tls-cert-file", path(&pki.serving_crt)),
            arg("tls-private-key-file", path(&pki.serving_key)),
            arg("client-ca-file", path(&pki.ca_crt)),
            arg(
                "service-account-issuer",
                "https://kubernetes.default.svc.cluster.local",
            ),
            arg("service-account-key-file", path(&pki.sa_pub)),
            arg("service-account-signing-key-file", path(&pki.sa_key)),
            arg("service-cluster-ip-range", s.service_cidr),
            arg("authorization-mode", "Node,RBAC"),
            arg("allow-privileged", true),
            // 127.0.0.1 is no address an endpoint may hold: `default/kubernetes` is
            // published only at an advertised address.
            arg(
                "endpoint-reconciler-type",
                if s.advertise.is_some() {
                    "lease"
                } else {
                    "none"
                },
            ),
            arg("cert-dir", path(&s.dir.join("apiserver-certs"))),
            arg("kubelet-client-certificate", path(&pki.kubelet_client_crt)),
            arg("kubelet-client-key", path(&pki.kubelet_client_key)),
        ]
        .into_iter()
        .chain(egress)
        .chain(audit)
        .collect::<Vec<_>>(),
        &log("kube-apiserver"),
    )?;
    started.push(api.clone());
    let kubeconfig = s.dir.join("kubeconfig");
    let text = kubeconfig_text(s.name, &server, &pki)?;
    pki::write(&kubeconfig, &text, true)?; // It holds the admin key.
    let kc = client(&kubeconfig, s.name).await?;
    wait(&api, 60, || readyz(kc.clone())).await?;

    let kcm = procs::spawn(
        "kube-controller-manager",
        &bins.path("kube-controller-manager"),
        &[
            arg("kubeconfig", path(&kubeconfig)),
            arg("leader-elect", false),
            arg("bind-address", "127.0.0.1"),
            arg("secure-port", free_port()?),
            arg("service-account-private-key-file", path(&pki.sa_key)),
            arg("root-ca-file", path(&pki.ca_crt)),
            arg("cluster-signing-cert-file", path(&pki.ca_crt)),
            arg("cluster-signing-key-file", path(&pki.ca_key)),
            arg("controllers", super::controllers::flag()),
        ],
        &log("kube-controller-manager"),
    )?;
    started.push(kcm.clone());
    let sched = procs::spawn(
        "kube-scheduler",
        &bins.path("kube-scheduler"),
        &[
            arg("kubeconfig", path(&kubeconfig)),
            arg("leader-elect", false),
            arg("bind-address", "127.0.0.1"),
            arg("secure-port", free_port()?),
        ],
        &log("kube-scheduler"),
    )?;
    started.push(sched.clone());
    let debugging = kwok_debugging(&s.dir.join("kwok"))?;
    let kubelet_port = free_port()?;
    let kwok = procs::spawn(
        "kwok",
        &bins.path("kwok"),
        &[
            arg("kubeconfig", path(&kubeconfig)),
            arg("config", path(&bins.path("kwok-stage-fast.yaml"))),
            arg("config", path(&debugging)),
            arg("node-port", kubelet_port),
            arg("server-address", format!("127.0.0.1:{kubelet_port}")),
            arg("manage-all-nodes", false),
            arg(
                "manage-nodes-with-annotation-selector",
                "kwok.x-k8s.io/node=fake",
            ),
            arg("cidr", s.pod_cidr),
            arg("node-ip", "127.0.0.1"),
            arg("node-lease-duration-seconds", 40),
        ],
        &log("kwok"),
    )?;
    started.push(kwok.clone());

    let nodes_api: Api<Node> = Api::all(kc.clone());
    let mut nodes = Vec::new();
    for i in 0..s.nodes {
        let name = format!("{}-node-{i}", s.name);
        let node: Node = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": name,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                           "kubernetes.io/arch": "amd64", "type": "kwok"},
            },
            "status": {
                "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            },
        }))
        .map_err(|e| K8sError::Options(format!("node object: {e}")))?;
        nodes_api
            .create(&PostParams::default(), &node)
            .await
            .map_err(K8sError::kube(format!("creating node {name}")))?;
        nodes.push(name);
    }
    wait(&kwok, 60, || {
        let api = nodes_api.clone();
        let want = nodes.len();
        async move {
            api.list(&Default::default())
                .await
                .is_ok_and(|l| l.items.iter().filter(|n| ready(n)).count() == want)
        }
    })
    .await?;
    let sas: Api<ServiceAccount> = Api::namespaced(kc.clone(), "default");
    wait(&kcm, 60, || {
        let sas = sas.clone();
        async move { sas.get_opt("default").await.is_ok_and(|s| s.is_some()) }
    })
    .await?;
    if !procs::alive(sched.pid) {
        return Err(K8sError::NotReady {
            what: "kube-scheduler (exited)".into(),
            secs: started_at.elapsed().as_secs(),
            log: sched.log.clone(),
            tail: procs::tail(&sched.log, 15),
        });
    }
    Ok(Cluster {
        name: s.name.into(),
        dir: s.dir.to_owned(),
        kubeconfig,
        server,
        pod_cidr: s.pod_cidr,
        service_cidr: s.service_cidr,
        nodes,
        procs: started.clone(),
    })
}

/// Whether the apiserver behind `kc` answers `GET /readyz` with `ok`.
pub(super) async fn readyz(kc: Client) -> bool {
    match http::Request::get("/readyz").body(Vec::new()) {
        Ok(r) => kc.request_text(r).await.is_ok_and(|t| t.trim() == "ok"),
        Err(_) => false,
    }
}

/// Whether a node reports Ready.
fn ready(n: &Node) -> bool {
    n.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[cfg(test)]
mod egress_tests {
    #[test]
    fn the_egress_selection_sends_the_cluster_s_traffic_to_the_socket() {
        let y = super::egress_selector(std::path::Path::new("/run/x/egress.sock"));
        let v: serde_json::Value = serde_json::from_str(&y).unwrap();
        let c = &v["egressSelections"][0];
        assert_eq!(c["name"], "cluster", "{y}");
        assert_eq!(c["connection"]["proxyProtocol"], "HTTPConnect", "{y}");
        assert_eq!(
            c["connection"]["transport"]["uds"]["udsName"], "/run/x/egress.sock",
            "{y}"
        );
    }
}
