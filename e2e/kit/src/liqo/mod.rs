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
mod error;
pub mod from_chart;
mod objects;
mod probe;
mod record;
mod restart;
mod webhooks;
mod yaml;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

pub use components::{COMPONENTS, Component, Ready, VkMode};
pub use error::LiqoError;
pub use objects::{NAMESPACE, ensure_identity, new_cluster_id};
pub use objects::{service_account, token_kubeconfig};
pub use probe::{ProbeError, probe};
pub use record::{Installed, Liqo, Running, env, load};
pub use record::{record_pods, save};
pub use restart::{Killed, kill9_component, restart_component};

pub use crate::programs::IPAM;
use crate::{
    k8s::{Binaries, Cluster, Clusters, Proc},
    programs::{AUTH, CONTROLLER_MANAGER},
};

/// How long a component of an earlier install gets between SIGTERM and SIGKILL.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

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
    /// Give the virtual kubelets the cluster's IPAM (`--virtual-kubelet-ipam-address`) with
    /// the network manager off: the caller tells the IPAM the peers' views itself.
    pub vk_ipam: bool,
    /// The controller-manager's `--virtual-kubelet-apiserver-support` (process mode): offloaded
    /// pods get tokens of their home ServiceAccounts and the home API server's address.
    pub vk_apiserver_support: bool,
    /// How many controller-manager processes run per cluster: more than one elect a leader
    /// (`--leader-elect`, identities `<cluster>-<n>`), each in `Installed::running` in order;
    /// the webhook configurations call the first.
    pub manager_replicas: usize,
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
            vk_ipam: false,
            vk_apiserver_support: false,
            manager_replicas: 1,
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
    let hooks = webhooks::Webhooks {
        port: crate::k8s::free_port()?,
        pod_failure_policy: Some(opts.pod_webhook_failure_policy.clone()),
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
    let replicas = opts.manager_replicas.max(1);
    let starts = wanted.iter().flat_map(|comp| {
        let n = if comp.program == CONTROLLER_MANAGER {
            replicas
        } else {
            1
        };
        (0..n).map(move |i| (*comp, (replicas > 1 && n > 1).then_some(i)))
    });
    for (comp, replica) in starts {
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
            // A second replica serves its webhooks too, on a port of its own (the
            // configurations call the first).
            webhook: match replica {
                Some(n) if n > 0 => crate::k8s::free_port()?,
                _ => hooks.port,
            },
            replica,
            vk_mode: opts.virtual_kubelet,
            vk_kubeconfig: kubeconfigs
                .get(components::VIRTUAL_KUBELET_SA)
                .map(PathBuf::as_path),
            sharing: opts.sharing_percentage.get(&c.name).copied(),
            vk_pod_workers: opts.vk_pod_workers,
            vk_apiserver_support: opts.vk_apiserver_support,
            vk_ipam: running
                .iter()
                .filter(|_| opts.vk_ipam && !opts.network)
                .find(|r| r.program == IPAM)
                .and_then(|r| r.listen.as_ref())
                .map(|l| format!("http://{l}")),
        };
        if comp.program == AUTH {
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
