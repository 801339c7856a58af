//! What an install leaves for later commands (`liqo-lab k8s env` in another process): the
//! record `liqo.json` in the set's directory, the `bin/` directory of links for `PATH`, and the
//! shell lines that use them.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use serde::{Deserialize, Serialize};

use super::error::LiqoError;
use crate::k8s::{Binaries, Clusters, Proc};

/// The file (in the set's directory) that records what was installed.
const STATE: &str = "liqo.json";

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
    /// The address its service listens on (`127.0.0.1:<port>`: the IPAM's gRPC, the auth
    /// service), if it has one.
    #[serde(default)]
    pub listen: Option<String>,
    /// Where its Prometheus metrics are served (`127.0.0.1:<port>`, path `/metrics`).
    #[serde(default)]
    pub metrics: Option<String>,
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

/// Records Liqo installed from its chart as pods (`clusters`, no process of ours): the tools'
/// directory (`kubectl`, `liqoctl`) and the record, as [`super::install`] leaves them.
pub fn record_pods(
    set: &Clusters,
    bins: &Binaries,
    clusters: Vec<Installed>,
) -> Result<Liqo, LiqoError> {
    let liqo = Liqo {
        bin: link_tools(&set.dir, bins, &BTreeMap::new())?,
        clusters,
    };
    save(set, &liqo)?;
    Ok(liqo)
}

/// Writes the record of `liqo` into the directory of `set`.
pub fn save(set: &Clusters, liqo: &Liqo) -> Result<(), LiqoError> {
    let path = set.dir.join(STATE);
    let json = serde_json::to_vec_pretty(liqo).map_err(|e| LiqoError::Chart {
        path: path.clone(),
        problem: format!("encoding: {e}"),
    })?;
    std::fs::write(&path, json).map_err(|e| LiqoError::io(&path, e))
}

/// Makes `<set>/bin` with links to the cached `kubectl` and to `liqoctl` in the directory of
/// our binaries (also as `kubectl-liqo`, the plugin name; a link made before `liqoctl` is built
/// works once it is); returns it.
pub(super) fn link_tools(
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
        .or_else(|| crate::bin("liqoctl").ok());
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
                    listen: None,
                    metrics: None,
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
}
