//! Liqo installed on the harness's clusters ([`crate::k8s`]) as a user would have it from the
//! chart, with the components run as local processes: per cluster the namespace `liqo` (PSA
//! `enforce=privileged`), the identity ConfigMap (a UUIDv4 kept across re-runs), the CRDs of
//! `chart/crds/` and every object of `chart/files/` (the ClusterRoles; the webhook
//! configurations rewritten to call the controller-manager at `https://127.0.0.1:<port>`, with
//! the pod webhook's failurePolicy of [`Options`]), a ServiceAccount per
//! component bound to the ClusterRole of its name, a token per ServiceAccount (TokenRequest) in
//! a kubeconfig per component (0600), so the components run with exactly the chart's RBAC; then
//! `liqo-ipam serve`, `liqo-auth` and `liqo-controller-manager` started through
//! [`dataplane::supervisor`] and waited on until they serve, and the Service `liqo-auth` of type
//! LoadBalancer whose status says `127.0.0.1` (what a cloud load balancer would write).
//!
//! It never stops anything itself: every process gets its cluster's directory in its command
//! line or in `KUBECONFIG`, so [`crate::k8s::down`] (and dropping [`crate::k8s::Clusters`])
//! finds and stops them with the cluster, also after a crash.

mod components;
mod objects;
mod record;
mod restart;
mod webhooks;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

pub(crate) use components::VIRTUAL_KUBELET;
pub use components::{COMPONENTS, Component, Ready, probe};
pub use objects::service_account;
pub use objects::{ensure_identity, new_cluster_id};
pub use record::save;
pub use record::{Installed, Liqo, Running, env, load};
pub use restart::{Killed, kill9_component, restart_component};

use crate::k8s::{Binaries, Cluster, Clusters, K8sError, Proc};

/// The IPAM's program (the controller-manager is given its address).
pub const IPAM: &str = "liqo-ipam";
/// The namespace Liqo runs in.
pub const NAMESPACE: &str = control::consts::objects::LIQO_NAMESPACE;
/// How long a component may take to serve.
const READY_SECS: u64 = 60;
/// How long a component of an earlier install gets between SIGTERM and SIGKILL.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum LiqoError {
    /// The harness failed (a client, a CRD, a free port).
    #[error(transparent)]
    K8s(#[from] K8sError),
    /// A Kubernetes API call failed.
    #[error("{what}")]
    Kube {
        /// The call.
        what: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
    /// A file operation failed.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A chart file is not what it should be.
    #[error("{path}: {problem}")]
    Chart {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// A component's binary is missing.
    #[error(
        "no {program} binary; build it with `cargo build -p {package} --bin {program}` or set LIQO_BIN_DIR"
    )]
    Binary {
        /// The program.
        program: &'static str,
        /// Its package.
        package: &'static str,
        /// Where it was looked for.
        #[source]
        source: crate::BinNotFound,
    },
    /// A component could not be started.
    #[error("starting {program} for {cluster}")]
    Spawn {
        /// The program.
        program: &'static str,
        /// The cluster.
        cluster: String,
        /// The cause.
        #[source]
        source: dataplane::supervisor::Error,
    },
    /// A component did not become ready in time; the end of its log says why.
    #[error("{program} of {cluster} not ready after {secs} s ({why}); the end of {log}:\n{tail}")]
    NotReady {
        /// The program.
        program: &'static str,
        /// The cluster.
        cluster: String,
        /// How long we waited.
        secs: u64,
        /// The last answer (or that the process exited).
        why: String,
        /// Its log.
        log: String,
        /// The last lines of it.
        tail: String,
    },
    /// An unknown component was asked for.
    #[error("unknown component {name:?}; known: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The programs of [`COMPONENTS`].
        known: String,
    },
    /// A component that should run (by the record) does not.
    #[error("{program} of {cluster} is not running")]
    NotRunning {
        /// The program.
        program: String,
        /// The cluster.
        cluster: String,
    },
    /// A component survived SIGKILL.
    #[error("{program} of {cluster} (pid {pid}) survived SIGKILL")]
    Stuck {
        /// The program.
        program: &'static str,
        /// The cluster.
        cluster: String,
        /// Its pid.
        pid: u32,
    },
    /// Randomness for the cluster ID was unavailable.
    #[error("no randomness for a cluster ID: {0}")]
    Random(String),
}

impl LiqoError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> LiqoError {
        LiqoError::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> LiqoError {
        let what = what.into();
        move |source| LiqoError::Kube { what, source }
    }
}

/// What to install.
#[derive(Debug, Clone)]
pub struct Options {
    /// The chart's directory (its `crds/` and `files/` are applied).
    pub chart: PathBuf,
    /// The programs to start (names from [`COMPONENTS`]); ServiceAccounts, tokens and
    /// kubeconfigs are made for every component that has a ServiceAccount, started or not.
    pub start: Vec<String>,
    /// Subnets the IPAM of a cluster (by name) must never hand out (`--reserved-subnets`).
    pub reserved_subnets: BTreeMap<String, Vec<ipnet::Ipv4Net>>,
    /// Turn the controller-manager's network manager on (it is given the IPAM's address):
    /// only where the gateway and route operators run (the lab's `up --k8s`), else the
    /// TunnelEndpoints never connect.
    pub network: bool,
    /// The controller-manager's `--cluster-labels` of a cluster (by name), `k=v,k2=v2`.
    pub cluster_labels: BTreeMap<String, String>,
    /// The pod webhook's failurePolicy (`Fail`, as the chart, or `Ignore`). The chart's webhook
    /// configurations are applied even when the controller-manager is not started: then pod
    /// creation fails (with `Fail`) in namespaces labelled `liqo.io/scheduling-enabled=true`.
    pub pod_webhook_failure_policy: String,
    /// How the controller-manager runs the virtual kubelets (`--virtual-kubelet-mode`).
    pub virtual_kubelet: VkMode,
    /// The controller-manager's `--resource-sharing-percentage` of a cluster (by name; default 30).
    pub sharing_percentage: BTreeMap<String, u8>,
    /// The controller-manager's `--virtual-kubelet-pod-workers` (default 10).
    pub vk_pod_workers: Option<usize>,
}

/// How the controller-manager runs the virtual kubelets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum VkMode {
    /// A child process per peering (`liqo-virtual-kubelet`), with the token of ServiceAccount
    /// `liqo-virtual-kubelet-local` (the chart's RBAC for it) and its own pid (its memory and
    /// CPU can be measured).
    #[default]
    Process,
    /// A task of the controller-manager (its identity).
    InProcess,
}

impl VkMode {
    /// The value of `--virtual-kubelet-mode`.
    pub fn flag(self) -> &'static str {
        match self {
            VkMode::Process => "process",
            VkMode::InProcess => "in-process",
        }
    }
}

impl Default for Options {
    /// The chart of this source tree; every component.
    fn default() -> Options {
        Options {
            chart: Path::new(env!("CARGO_MANIFEST_DIR")).join("../../chart"),
            start: COMPONENTS.iter().map(|c| c.program.to_owned()).collect(),
            reserved_subnets: BTreeMap::new(),
            network: false,
            cluster_labels: BTreeMap::new(),
            pod_webhook_failure_policy: "Fail".to_owned(),
            virtual_kubelet: VkMode::default(),
            sharing_percentage: BTreeMap::new(),
            vk_pod_workers: None,
        }
    }
}

/// Installs Liqo on every cluster of `set` (one after the other) and records it in the set's
/// directory. Installing again replaces the components (the cluster IDs stay). On failure the
/// processes started so far keep running until the set is torn down (dropping `set`, or
/// `liqo-lab k8s down`).
pub async fn install(set: &Clusters, bins: &Binaries, opts: &Options) -> Result<Liqo, LiqoError> {
    let wanted = selected(&opts.start)?;
    // Every binary first: a missing one fails before anything is started.
    let mut programs = BTreeMap::new();
    for c in &wanted {
        programs.insert(c.program, c.binary()?);
    }
    let mut out = Vec::new();
    for c in &set.clusters {
        let reserved = opts
            .reserved_subnets
            .get(&c.name)
            .map_or(&[][..], Vec::as_slice);
        out.push(install_one(c, opts, &wanted, &programs, reserved).await?);
    }
    let liqo = Liqo {
        bin: record::link_tools(&set.dir, bins, &programs)?,
        clusters: out,
    };
    record::save(set, &liqo)?;
    Ok(liqo)
}

/// The rows of [`COMPONENTS`] named in `start`.
fn selected(start: &[String]) -> Result<Vec<&'static Component>, LiqoError> {
    start
        .iter()
        .map(|n| {
            COMPONENTS
                .iter()
                .find(|c| c.program == n)
                .ok_or_else(|| LiqoError::Unknown {
                    name: n.clone(),
                    known: COMPONENTS
                        .iter()
                        .map(|c| c.program)
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        })
        .collect()
}

async fn install_one(
    c: &Cluster,
    opts: &Options,
    wanted: &[&'static Component],
    programs: &BTreeMap<&'static str, PathBuf>,
    reserved: &[ipnet::Ipv4Net],
) -> Result<Installed, LiqoError> {
    let client = c.client().await?;
    let dir = c.dir.join("liqo");
    std::fs::create_dir_all(&dir).map_err(|e| LiqoError::io(&dir, e))?;
    // A re-run replaces the components of an earlier one.
    let earlier: Vec<Proc> = crate::k8s::procs_using(&c.dir)
        .into_iter()
        .filter(|p| COMPONENTS.iter().any(|x| x.program == p.name))
        .collect();
    crate::k8s::stop_procs(&earlier, STOP_GRACE);
    let hooks = objects::Webhooks {
        port: crate::k8s::free_port()?,
        pod_failure_policy: opts.pod_webhook_failure_policy.clone(),
    };
    let cluster_id = objects::prepare(&client, c, &opts.chart, &hooks).await?;
    let ca = objects::write_ca(c, &dir)?;
    let mut kubeconfigs = BTreeMap::new();
    let sas = COMPONENTS.iter().filter_map(|x| x.service_account);
    for sa in sas.chain([components::VIRTUAL_KUBELET_SA]) {
        let path = objects::service_account(&client, c, sa, &dir, None).await?;
        kubeconfigs.insert(sa.to_owned(), path);
    }
    let mut running: Vec<Running> = Vec::new();
    let mut auth_url = None;
    for comp in wanted {
        let ipam = running
            .iter()
            .filter(|_| opts.network)
            .find(|r| r.program == IPAM)
            .and_then(|r| r.listen.as_ref())
            .map(|l| format!("http://{l}"));
        let ctx = components::Ctx {
            cluster: c,
            dir: &dir,
            ca: &ca,
            port: crate::k8s::free_port()?,
            metrics: crate::k8s::free_port()?,
            reserved,
            ipam: ipam.as_deref(),
            cluster_labels: opts.cluster_labels.get(&c.name).map(String::as_str),
            webhook: hooks.port,
            vk_mode: opts.virtual_kubelet,
            vk_kubeconfig: kubeconfigs
                .get(components::VIRTUAL_KUBELET_SA)
                .map(PathBuf::as_path),
            sharing: opts.sharing_percentage.get(&c.name).copied(),
            vk_pod_workers: opts.vk_pod_workers,
        };
        if comp.program == components::AUTH {
            objects::auth_service(&client, ctx.port).await?;
            auth_url = Some(format!("https://127.0.0.1:{}", ctx.port));
        }
        let kubeconfig = comp.service_account.and_then(|sa| kubeconfigs.get(sa));
        let r = comp
            .start(&ctx, &programs[comp.program], kubeconfig)
            .await?;
        running.push(r);
    }
    Ok(Installed {
        cluster: c.name.clone(),
        cluster_id,
        dir,
        kubeconfigs,
        auth_url,
        running,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_components_are_named() {
        let e = selected(&["liqo-ipam".into(), "liqo-proxy".into()])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "unknown component \"liqo-proxy\"; known: liqo-ipam, liqo-auth, liqo-controller-manager"
        );
        let all = selected(&Options::default().start).unwrap();
        assert_eq!(all.len(), COMPONENTS.len());
        let names: Vec<&str> = COMPONENTS.iter().map(|c| c.program).collect();
        assert_eq!(names, ["liqo-ipam", "liqo-auth", "liqo-controller-manager"]);
    }
}
