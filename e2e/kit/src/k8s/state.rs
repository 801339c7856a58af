//! A set of clusters: starting them, the state of a detached set (`liqo-lab k8s up`), and
//! teardown. Everything of set `<prefix>` lives in `/run/liqo-lab/k8s/<prefix>/`; teardown also
//! finds processes by that directory in their command line, so a crash before the state was
//! written leaves nothing either.

use std::{
    fs,
    os::unix::fs::DirBuilderExt,
    path::{Path, PathBuf},
    time::Duration,
};

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

use super::{
    Binaries, Cluster, K8sError,
    cluster::{self, Spec},
    procs::{self, Proc},
};
use crate::Prefix;

/// Names given to clusters, in order.
pub const NAMES: &[&str] = &["rome", "milan", "turin", "naples", "venice", "genoa"];
/// Where sets live.
pub const ROOT: &str = "/run/liqo-lab/k8s";
/// How long a process gets between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(10);

/// What to start.
#[derive(Debug, Clone)]
pub struct Options {
    /// Prefix of the set (per test: unique).
    pub prefix: Prefix,
    /// Number of clusters (named rome, milan, ...).
    pub clusters: usize,
    /// Simulated nodes per cluster.
    pub nodes: usize,
    /// Give every cluster the same pod and service CIDRs (10.244.0.0/16, 10.96.0.0/16); else
    /// cluster `i` gets 10.(244+i).0.0/16 and 10.(96+i).0.0/16.
    pub overlapping: bool,
}

/// Running clusters. Dropping the value stops them and removes their files, unless
/// [`Clusters::detach`] was called.
#[derive(Debug, Serialize, Deserialize)]
pub struct Clusters {
    /// The prefix.
    pub prefix: Prefix,
    /// Their directory.
    pub dir: PathBuf,
    /// A kubeconfig with one context per cluster.
    pub kubeconfig: PathBuf,
    /// The clusters.
    pub clusters: Vec<Cluster>,
    #[serde(skip)]
    detached: bool,
}

fn dir_of(prefix: &Prefix) -> PathBuf {
    Path::new(ROOT).join(prefix.as_str())
}

fn state_path(prefix: &Prefix) -> PathBuf {
    dir_of(prefix).join("state.json")
}

impl Options {
    fn check(&self) -> Result<(), K8sError> {
        if !(1..=NAMES.len()).contains(&self.clusters) {
            return Err(K8sError::Options(format!(
                "--clusters {} is outside 1..={}",
                self.clusters,
                NAMES.len()
            )));
        }
        if !(1..=50).contains(&self.nodes) {
            return Err(K8sError::Options(format!(
                "--nodes {} is outside 1..=50",
                self.nodes
            )));
        }
        Ok(())
    }

    fn cidrs(&self, i: usize) -> (Ipv4Net, Ipv4Net) {
        let k = if self.overlapping { 0 } else { i as u8 };
        (
            Ipv4Net::new([10, 244 + k, 0, 0].into(), 16).expect("/16"),
            Ipv4Net::new([10, 96 + k, 0, 0].into(), 16).expect("/16"),
        )
    }
}

/// One cluster of [`Clusters::up_named`]: its name, CIDRs and how many kwok nodes the harness
/// makes (0: the caller creates its own Node objects, annotated for kwok).
#[derive(Debug, Clone)]
pub struct Named {
    /// Its name (a label; also its context).
    pub name: String,
    /// Its pod CIDR.
    pub pod_cidr: Ipv4Net,
    /// Its service CIDR.
    pub service_cidr: Ipv4Net,
    /// Simulated nodes the harness creates (`<name>-node-<i>`).
    pub nodes: usize,
    /// The address the API server publishes in `default/kubernetes` (`--advertise-address`;
    /// it still listens on 127.0.0.1 only): the lab's, where a node relays it. Else 127.0.0.1.
    pub advertise: Option<std::net::Ipv4Addr>,
    /// Where the API server sends what it dials in the cluster (kubelets, pods, Services): an
    /// HTTP CONNECT proxy on this Unix socket (`--egress-selector-config-file`), for nodes in
    /// network namespaces the root namespace cannot reach. Kubelets are then dialled at their
    /// InternalIP. Else directly.
    pub egress: Option<std::path::PathBuf>,
    /// More addresses the API server's certificate names (a load balancer's, where peers
    /// reach it).
    pub public: Vec<std::net::Ipv4Addr>,
    /// The API server's audit log (every request's user, client, verb and object at level
    /// Metadata, JSON lines in [`Cluster::audit_log`]): for benches that count requests; off
    /// by default (it costs the API server a write per request).
    pub audit: bool,
}

impl Clusters {
    /// Starts the clusters, all at once; a failure stops every one that started.
    pub async fn up(bins: &Binaries, opts: &Options) -> Result<Clusters, K8sError> {
        opts.check()?;
        let named: Vec<Named> = NAMES
            .iter()
            .take(opts.clusters)
            .enumerate()
            .map(|(i, name)| {
                let (pod_cidr, service_cidr) = opts.cidrs(i);
                Named {
                    name: (*name).to_owned(),
                    pod_cidr,
                    service_cidr,
                    nodes: opts.nodes,
                    advertise: None,
                    egress: None,
                    public: Vec::new(),
                    audit: false,
                }
            })
            .collect();
        Clusters::up_named(bins, &opts.prefix, &named).await
    }

    /// Starts clusters with the given names and CIDRs (the lab's `up --k8s`: one per lab
    /// cluster), as [`Clusters::up`] does.
    pub async fn up_named(
        bins: &Binaries,
        prefix: &Prefix,
        named: &[Named],
    ) -> Result<Clusters, K8sError> {
        let dir = dir_of(prefix);
        fs::create_dir_all(ROOT).map_err(|e| K8sError::io(Path::new(ROOT), e))?;
        // Claimed atomically (two `up` with one prefix cannot both get it), private to root:
        // it holds admin keys, and etcd trusts whoever reaches it.
        if let Err(e) = fs::DirBuilder::new().mode(0o700).create(&dir) {
            return Err(if e.kind() == std::io::ErrorKind::AlreadyExists {
                K8sError::Options(format!(
                    "clusters {} exist already ({}); run `liqo-lab --prefix {} k8s down` first",
                    prefix,
                    dir.display(),
                    prefix
                ))
            } else {
                K8sError::io(&dir, e)
            });
        }
        let mut set = Clusters {
            prefix: prefix.clone(),
            kubeconfig: dir.join("kubeconfig"),
            dir,
            clusters: Vec::new(),
            detached: false,
        };
        // All at once: a cluster's start is mostly waiting (etcd, the apiserver's readiness,
        // nodes Ready), so starting them together takes little longer than the slowest one.
        let starts = named.iter().map(|n| {
            let dir = set.dir.join(&n.name);
            async move {
                let mut started: Vec<Proc> = Vec::new();
                let spec = Spec {
                    name: &n.name,
                    dir: &dir,
                    pod_cidr: n.pod_cidr,
                    service_cidr: n.service_cidr,
                    nodes: n.nodes,
                    advertise: n.advertise,
                    egress: n.egress.as_deref(),
                    public: &n.public,
                    audit: n.audit,
                };
                let result = cluster::start(bins, &spec, &mut started).await;
                (result, started)
            }
        });
        let mut failed = None;
        for (result, mut started) in futures::future::join_all(starts).await {
            match result {
                Ok(c) => set.clusters.push(c),
                Err(e) => {
                    started.reverse();
                    procs::stop(&started, GRACE);
                    if let Some(first) = &failed {
                        // The first failure is returned; the others are said here.
                        tracing::warn!(error = %e, returned = %first, "another cluster failed to start too");
                    } else {
                        failed = Some(e);
                    }
                }
            }
        }
        if let Some(e) = failed {
            return Err(e); // `set` drops: the clusters that started stop, the files go.
        }
        set.write_kubeconfig()?;
        set.save()?;
        Ok(set)
    }

    /// The cluster called `name`.
    pub fn get(&self, name: &str) -> Option<&Cluster> {
        self.clusters.iter().find(|c| c.name == name)
    }

    /// Keeps the clusters running after this value is dropped (for `liqo-lab k8s up`).
    pub fn detach(mut self) {
        self.detached = true;
    }

    pub fn save(&self) -> Result<(), K8sError> {
        let path = state_path(&self.prefix);
        let json = serde_json::to_vec_pretty(self)
            .map_err(|e| K8sError::Options(format!("encoding the state: {e}")))?;
        fs::write(&path, json).map_err(|e| K8sError::io(&path, e))
    }

    /// One kubeconfig with every cluster's context (for `kubectl --context rome`).
    fn write_kubeconfig(&self) -> Result<(), K8sError> {
        let mut clusters = Vec::new();
        let mut users = Vec::new();
        let mut contexts = Vec::new();
        for c in &self.clusters {
            let text =
                fs::read_to_string(&c.kubeconfig).map_err(|e| K8sError::io(&c.kubeconfig, e))?;
            let v: serde_json::Value = serde_saphyr::from_str(&text)
                .map_err(|e| K8sError::Kubeconfig(format!("{}: {e}", c.kubeconfig.display())))?;
            clusters.extend(v["clusters"].as_array().cloned().unwrap_or_default());
            users.extend(v["users"].as_array().cloned().unwrap_or_default());
            contexts.extend(v["contexts"].as_array().cloned().unwrap_or_default());
        }
        let merged = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": clusters, "users": users, "contexts": contexts,
            "current-context": self.clusters.first().map(|c| c.name.clone()).unwrap_or_default(),
        });
        let text = serde_saphyr::to_string(&merged)
            .map_err(|e| K8sError::Kubeconfig(format!("encoding: {e}")))?;
        super::pki::write(&self.kubeconfig, &text, true)
    }

    /// Shell lines that point kubectl at the clusters.
    pub fn env(&self) -> String {
        let mut out = format!("export KUBECONFIG={}\n", self.kubeconfig.display());
        for c in &self.clusters {
            out.push_str(&format!(
                "# {}: kubectl --context {} (server {}, pods {}, services {}, {} nodes)\n",
                c.name,
                c.name,
                c.server,
                c.pod_cidr,
                c.service_cidr,
                c.nodes.len()
            ));
        }
        out
    }
}

impl Drop for Clusters {
    fn drop(&mut self) {
        if !self.detached {
            // Drop cannot return the error (`down` runs the same teardown and returns it): log it.
            if let Err(e) = teardown(&self.prefix) {
                tracing::error!(error = %liqo_types::chain(&e), "tearing down the clusters");
            }
        }
    }
}

/// The detached set `prefix`.
pub fn load(prefix: &Prefix) -> Result<Clusters, K8sError> {
    let path = state_path(prefix);
    let text = fs::read(&path).map_err(|e| K8sError::io(&path, e))?;
    let mut c: Clusters = serde_json::from_slice(&text)
        .map_err(|e| K8sError::Options(format!("{}: {e}", path.display())))?;
    c.detached = true;
    Ok(c)
}

/// What teardown did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Down {
    /// Processes stopped.
    pub stopped: usize,
    /// Of those, how many needed SIGKILL.
    pub killed: usize,
    /// Whether the directory was there.
    pub removed: bool,
}

/// Stops every process of set `prefix` and removes its directory (with or without a state).
pub fn down(prefix: &Prefix) -> Result<Down, K8sError> {
    teardown(prefix)
}

fn teardown(prefix: &Prefix) -> Result<Down, K8sError> {
    let dir = dir_of(prefix);
    let mut found = procs::using(&dir);
    // Stop in reverse start order: Liqo's components, kwok, scheduler, controller-manager,
    // apiserver, then etcd.
    let rank = |p: &Proc| match p.name.as_str() {
        "kwok" => 1,
        "kube-scheduler" => 2,
        "kube-controller-manager" => 3,
        "kube-apiserver" => 4,
        "etcd" => 5,
        _ => 0,
    };
    found.sort_by_key(rank);
    let killed = procs::stop(&found, GRACE);
    let removed = match fs::remove_dir_all(&dir) {
        Ok(()) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => return Err(K8sError::io(&dir, e)),
    };
    Ok(Down {
        stopped: found.len(),
        killed,
        removed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(clusters: usize, nodes: usize, overlapping: bool) -> Options {
        Options {
            prefix: "kt".parse().unwrap(),
            clusters,
            nodes,
            overlapping,
        }
    }

    #[test]
    fn counts_are_checked_and_cidrs_overlap_only_on_request() {
        let e = opts(0, 3, false).check().unwrap_err().to_string();
        assert!(e.contains("--clusters 0"), "{e}");
        let e = opts(2, 51, false).check().unwrap_err().to_string();
        assert!(e.contains("--nodes 51"), "{e}");
        assert!(opts(6, 50, false).check().is_ok());
        let distinct = opts(2, 1, false);
        assert_ne!(distinct.cidrs(0), distinct.cidrs(1));
        assert_eq!(distinct.cidrs(1).0.to_string(), "10.245.0.0/16");
        let same = opts(2, 1, true);
        assert_eq!(same.cidrs(0), same.cidrs(1));
    }
}
