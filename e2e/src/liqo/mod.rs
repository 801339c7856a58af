//! Liqo installed on the harness's clusters ([`crate::k8s`]) as a user would have it from the
//! chart, with the components run as local processes: per cluster the namespace `liqo` (PSA
//! `enforce=privileged`), the identity ConfigMap (a UUIDv4 kept across re-runs), the CRDs of
//! `chart/crds/` and every object of `chart/files/` (the ClusterRoles), a ServiceAccount per
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

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

pub use components::{COMPONENTS, Component, Ready, probe};
pub use objects::{ensure_identity, new_cluster_id};

use crate::k8s::{Binaries, Cluster, Clusters, K8sError, Proc};

/// The namespace Liqo runs in.
pub const NAMESPACE: &str = control::consts::objects::LIQO_NAMESPACE;
/// How long a component may take to serve.
const READY_SECS: u64 = 60;
/// How long a component of an earlier install gets between SIGTERM and SIGKILL.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);
/// The file (in the set's directory) that records what was installed.
const STATE: &str = "liqo.json";

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
        source: crate::lab::LabError,
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
}

impl Default for Options {
    /// The chart of this source tree; every component.
    fn default() -> Options {
        Options {
            chart: Path::new(env!("CARGO_MANIFEST_DIR")).join("../chart"),
            start: COMPONENTS.iter().map(|c| c.program.to_owned()).collect(),
        }
    }
}

/// A component running for a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Running {
    /// The program (one of [`COMPONENTS`]).
    pub program: String,
    /// The process.
    pub proc: Proc,
    /// Where it answered when it became ready.
    pub url: String,
}

/// Liqo on one cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Installed {
    /// The cluster's name (its context).
    pub cluster: String,
    /// Its cluster ID (the identity ConfigMap's).
    pub cluster_id: String,
    /// The files: kubeconfigs, the CA, the IPAM's state.
    pub dir: PathBuf,
    /// The kubeconfig of each ServiceAccount (by its name).
    pub kubeconfigs: BTreeMap<String, PathBuf>,
    /// The auth service's URL, if it runs.
    pub auth_url: Option<String>,
    /// The components started.
    pub running: Vec<Running>,
}

impl Installed {
    /// The component `program`, if it was started.
    pub fn get(&self, program: &str) -> Option<&Running> {
        self.running.iter().find(|r| r.program == program)
    }
}

/// Liqo on every cluster of a set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Liqo {
    /// A directory with `kubectl`, `liqoctl` and `kubectl-liqo` (links), for `PATH`.
    pub bin: PathBuf,
    /// Per cluster, in the set's order.
    pub clusters: Vec<Installed>,
}

impl Liqo {
    /// The installation on cluster `name`.
    pub fn get(&self, name: &str) -> Option<&Installed> {
        self.clusters.iter().find(|c| c.cluster == name)
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
        out.push(install_one(c, &opts.chart, &wanted, &programs).await?);
    }
    let liqo = Liqo {
        bin: link_tools(&set.dir, bins, &programs)?,
        clusters: out,
    };
    let path = set.dir.join(STATE);
    let json = serde_json::to_vec_pretty(&liqo).map_err(|e| LiqoError::Chart {
        path: path.clone(),
        problem: format!("encoding: {e}"),
    })?;
    std::fs::write(&path, json).map_err(|e| LiqoError::io(&path, e))?;
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
    chart: &Path,
    wanted: &[&'static Component],
    programs: &BTreeMap<&'static str, PathBuf>,
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
    let cluster_id = objects::prepare(&client, c, chart).await?;
    let ca = objects::write_ca(c, &dir)?;
    let mut kubeconfigs = BTreeMap::new();
    for sa in COMPONENTS.iter().filter_map(|x| x.service_account) {
        let path = objects::service_account(&client, c, sa, &dir).await?;
        kubeconfigs.insert(sa.to_owned(), path);
    }
    let mut running = Vec::new();
    let mut auth_url = None;
    for comp in wanted {
        let ctx = components::Ctx {
            cluster: c,
            dir: &dir,
            ca: &ca,
            port: crate::k8s::free_port()?,
            metrics: crate::k8s::free_port()?,
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

/// Makes `<set>/bin` with links to the cached `kubectl` and to `liqoctl` in the directory of
/// our binaries (also as `kubectl-liqo`, the plugin name; a link made before `liqoctl` is built
/// works once it is); returns it.
fn link_tools(
    set_dir: &Path,
    bins: &Binaries,
    programs: &BTreeMap<&'static str, PathBuf>,
) -> Result<PathBuf, LiqoError> {
    let bin = set_dir.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| LiqoError::io(&bin, e))?;
    let link = |target: &Path, name: &str| {
        let at = bin.join(name);
        match std::fs::remove_file(&at) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(LiqoError::io(&at, e)),
        }
        std::os::unix::fs::symlink(target, &at).map_err(|e| LiqoError::io(&at, e))
    };
    link(&bins.path("kubectl"), "kubectl")?;
    let ours = programs
        .values()
        .next()
        .cloned()
        // Nothing started: where liqoctl is, if it is anywhere (a missing liqoctl is reported
        // by `env`, not here).
        .or_else(|| crate::lab::bin("liqoctl").ok());
    if let Some(dir) = ours.as_deref().and_then(Path::parent) {
        link(&dir.join("liqoctl"), "liqoctl")?;
        link(&dir.join("liqoctl"), "kubectl-liqo")?;
    }
    Ok(bin)
}

/// What was installed on set `set` (by [`install`], possibly in another process), if anything.
pub fn load(set: &Clusters) -> Result<Option<Liqo>, LiqoError> {
    let path = set.dir.join(STATE);
    match std::fs::read(&path) {
        Ok(b) => serde_json::from_slice(&b)
            .map(Some)
            .map_err(|e| LiqoError::Chart {
                path,
                problem: format!("decoding: {e}"),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LiqoError::io(&path, e)),
    }
}

/// Shell lines that put `kubectl` and `liqoctl` on `PATH` (the set's `KUBECONFIG` line is
/// [`Clusters::env`]'s), and what runs where.
pub fn env(liqo: &Liqo) -> String {
    let liqoctl = liqo.bin.join("liqoctl").is_file();
    let mut out = format!(
        "export PATH={}:\"$PATH\"  # kubectl (cached build){}\n",
        liqo.bin.display(),
        if liqoctl {
            ", liqoctl, kubectl-liqo"
        } else {
            ""
        }
    );
    if !liqoctl {
        out.push_str(
            "# liqoctl is not built yet: `cargo build -p liqoctl` (the link above then works)\n",
        );
    }
    for i in &liqo.clusters {
        let comps: Vec<String> = i
            .running
            .iter()
            .map(|r| format!("{} pid {} ({})", r.program, r.proc.pid, r.url))
            .collect();
        out.push_str(&format!(
            "# {}: cluster ID {}; {}\n",
            i.cluster,
            i.cluster_id,
            comps.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_puts_the_tools_on_path_and_says_when_liqoctl_is_missing() {
        let dir = std::env::temp_dir().join(format!("liqo-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let liqo = Liqo {
            bin: dir.clone(),
            clusters: vec![Installed {
                cluster: "rome".into(),
                cluster_id: "b07938e3-d241-460c-a77b-e286c0f733c7".into(),
                dir: dir.clone(),
                kubeconfigs: BTreeMap::new(),
                auth_url: None,
                running: vec![Running {
                    program: "liqo-ipam".into(),
                    proc: Proc {
                        name: "liqo-ipam".into(),
                        pid: 42,
                        log: String::new(),
                    },
                    url: "http://127.0.0.1:9106/status".into(),
                }],
            }],
        };
        let text = env(&liqo);
        assert!(
            text.starts_with(&format!("export PATH={}:\"$PATH\"", dir.display())),
            "{text}"
        );
        assert!(text.contains("liqoctl is not built yet"), "{text}");
        assert!(
            text.contains(
                "# rome: cluster ID b07938e3-d241-460c-a77b-e286c0f733c7; liqo-ipam pid 42"
            ),
            "{text}"
        );
        std::fs::write(dir.join("liqoctl"), "").unwrap();
        let text = env(&liqo);
        assert!(text.contains("liqoctl, kubectl-liqo"), "{text}");
        assert!(!text.contains("not built"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
