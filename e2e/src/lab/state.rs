//! The lab's state: the plan it was built from (`/run/liqo-lab/<prefix>.json`, for `status`,
//! `exec`, `check`, `peer`, ...), the per-cluster directory of service files, and teardown.
//!
//! Teardown does not need the state file: it removes every namespace whose name carries the
//! prefix, so it also cleans up after a crash in the middle of `up`.

use std::{
    fs, io,
    path::{Path, PathBuf},
};

use dataplane::{Netns, NetnsName};

use super::{
    LabError,
    error::STATE_DIR,
    names::{self, Prefix, Target},
};
use crate::topology::{Cluster, Topology};

/// A lab that is up: its prefix and its topology.
#[derive(Debug, Clone)]
pub struct Lab {
    /// The prefix of everything it created.
    pub prefix: Prefix,
    /// The plan it was built from.
    pub topology: Topology,
}

impl Lab {
    /// The lab with this prefix, from its state file.
    pub fn load(prefix: &Prefix) -> Result<Lab, LabError> {
        let text = match fs::read(path(prefix)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(LabError::NotUp(prefix.clone()));
            }
            Err(e) => return Err(state_err(prefix)(e.into())),
        };
        let topology: Topology =
            serde_json::from_slice(&text).map_err(|e| state_err(prefix)(e.into()))?;
        Ok(Lab {
            prefix: prefix.clone(),
            topology,
        })
    }

    /// The namespace of a target (`rome/n0`, `rome/n0-p1`, `rome/lan`, `wan`).
    pub fn netns(&self, target: &Target) -> Result<Netns, LabError> {
        Ok(Netns::open(&self.netns_name(target)?)?)
    }

    /// The namespace name of a target, checked against the topology.
    pub fn netns_name(&self, target: &Target) -> Result<NetnsName, LabError> {
        Ok(names::resolve(&self.prefix, &self.topology, target)?)
    }

    /// Namespace name of a pod.
    pub fn pod_netns(&self, cluster: &str, pod: &str) -> NetnsName {
        names::netns(&self.prefix, &[cluster, pod])
    }

    /// Namespace name of a node.
    pub fn node_netns(&self, cluster: &str, node: &str) -> NetnsName {
        names::netns(&self.prefix, &[cluster, node])
    }

    /// The namespace of a node of `c` (validated topology names).
    pub(crate) fn node(&self, c: &Cluster, node: &str) -> Result<Netns, LabError> {
        Ok(Netns::open(&self.node_netns(c.name.as_str(), node))?)
    }

    /// The files of cluster `c`.
    pub(crate) fn files(&self, c: &Cluster) -> Files {
        Files(cluster_dir(&self.prefix, c.name.as_str()))
    }
}

/// The directory of a cluster's service files (configs, keys, state, logs) and their names.
#[derive(Debug, Clone)]
pub(crate) struct Files(PathBuf);

impl Files {
    pub(crate) fn dir(&self) -> &Path {
        &self.0
    }
    pub(crate) fn gateway_config(&self) -> PathBuf {
        self.0.join("gateway.yaml")
    }
    pub(crate) fn gateway_log(&self) -> PathBuf {
        self.0.join("gateway.log")
    }
    pub(crate) fn gateway_pid(&self) -> PathBuf {
        self.0.join("gateway.pid")
    }
    /// Where the gateway runs (absent: on `nodes[0]`).
    pub(crate) fn gateway_node(&self) -> PathBuf {
        self.0.join("gateway-node")
    }
    pub(crate) fn private_key(&self) -> PathBuf {
        self.0.join("private.key")
    }
    pub(crate) fn overlay_config(&self, node: &str) -> PathBuf {
        self.0.join(format!("overlay-{node}.yaml"))
    }
    pub(crate) fn overlay_log(&self, node: &str) -> PathBuf {
        self.0.join(format!("overlay-{node}.log"))
    }
    pub(crate) fn ipam_state(&self) -> PathBuf {
        self.0.join("ipam.json")
    }
    pub(crate) fn ipam_log(&self) -> PathBuf {
        self.0.join("ipam.log")
    }
    /// The recorded peerings of the cluster.
    pub(crate) fn peerings(&self) -> PathBuf {
        self.0.join("peerings.json")
    }
}

fn path(prefix: &Prefix) -> PathBuf {
    PathBuf::from(STATE_DIR).join(format!("{prefix}.json"))
}

/// Directory of a cluster's service files.
fn cluster_dir(prefix: &Prefix, cluster: &str) -> PathBuf {
    PathBuf::from(STATE_DIR)
        .join(format!("{prefix}.d"))
        .join(cluster)
}

fn state_err(prefix: &Prefix) -> impl FnOnce(Box<dyn std::error::Error + Send + Sync>) -> LabError {
    let path = path(prefix);
    move |source| LabError::State { path, source }
}

/// Writes `text` to `path` atomically ([`liqo_netops::files::write_atomic`]): a daemon watching
/// the file or a crash never sees half of it.
pub(crate) fn write_atomic(path: &Path, text: &str) -> Result<(), LabError> {
    Ok(liqo_netops::files::write_atomic(path, text)?)
}

/// Records a lab that is up.
pub(crate) fn save(lab: &Lab) -> Result<(), LabError> {
    fs::create_dir_all(STATE_DIR).map_err(|e| state_err(&lab.prefix)(e.into()))?;
    let json = serde_json::to_string_pretty(&lab.topology)
        .map_err(|e| state_err(&lab.prefix)(e.into()))?;
    write_atomic(&path(&lab.prefix), &json)
}

/// Whether a state file exists for `prefix`.
pub(crate) fn exists(prefix: &Prefix) -> bool {
    path(prefix).exists()
}

/// The namespaces that belong to a lab with this prefix.
pub(crate) fn namespaces(prefix: &Prefix) -> Result<Vec<NetnsName>, LabError> {
    Ok(Netns::list()?
        .into_iter()
        .filter(|n| prefix.owns(n))
        .collect())
}

/// What [`down`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownReport {
    /// Namespaces deleted.
    pub namespaces: usize,
    /// Processes killed inside them.
    pub processes: usize,
    /// Whether a state file was removed.
    pub state: bool,
}

/// Tears down the lab with this prefix: kills every process inside its namespaces, deletes the
/// namespaces (and with them every link, address, route and nft table inside) and the state
/// file. Works without a state file and after a partial `up`; doing it twice is harmless.
pub fn down(prefix: &Prefix) -> Result<DownReport, LabError> {
    let mut report = DownReport::default();
    for name in namespaces(prefix)? {
        let (killed, deleted) = Netns::purge(&name)?;
        report.processes += killed;
        report.namespaces += usize::from(deleted);
    }
    match fs::remove_file(path(prefix)) {
        Ok(()) => report.state = true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(state_err(prefix)(e.into())),
    }
    let dir = PathBuf::from(STATE_DIR).join(format!("{prefix}.d"));
    if let Err(e) = fs::remove_dir_all(&dir)
        && e.kind() != io::ErrorKind::NotFound
    {
        return Err(state_err(prefix)(e.into()));
    }
    Ok(report)
}
