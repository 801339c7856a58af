//! Real nodes (`liqo-lab up --k8s --real-nodes`): each lab node's network namespace runs
//! containerd (with runc and the CNI plugins), a kubelet registered with the cluster's API server
//! (through the node's relay) and kube-proxy; the API node also runs CoreDNS behind the
//! `kube-dns` Service. Every program of a node and everything it starts lives in the node's
//! cgroup ([`host`]), below the session's; the kubelet runs in a mount namespace of its own whose
//! kernel tunables it would rewrite are private copies (the host's stay as they are), with its
//! root directory a shared mount (its volumes reach containerd). Images come from OCI archives
//! (no registry): every `*.oci.tar` of the lab's image directory is imported into each node.
//! The API server reaches the kubelets through its egress proxy ([`super::egress`]).
//!
//! Teardown ([`stop`]) needs no state but the node directories: each records its cgroup;
//! killing the cgroup stops every program of the node, then its mounts and files go.

mod dns;
mod host;
pub mod images;
mod io;
mod paths;
mod render;
mod start;
mod usage;

use std::path::{Path, PathBuf};

pub use host::HostError;
use paths::{CGROUP_FILE, node_dirs};
pub use paths::{DATA_ROOT, NodePaths};
pub use render::{PAUSE_IMAGE, cluster_dns};
pub use start::{egress_socket, start};
pub use usage::{NodeUsage, usage};

use super::K8sLabError;
use crate::lab::Prefix;

/// What [`stop`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stopped {
    /// Nodes stopped.
    pub nodes: usize,
    /// Processes killed.
    pub killed: usize,
    /// Mounts removed.
    pub unmounted: usize,
}

/// Stops every real node of lab `prefix` (also after a crash): kills each node's cgroup,
/// unmounts what is under its directories, removes its data.
pub fn stop(prefix: &Prefix) -> Result<Stopped, K8sLabError> {
    let mut out = Stopped::default();
    let dirs = node_dirs(prefix);
    let data = Path::new(DATA_ROOT).join(prefix.as_str());
    // Every node is stopped even if one fails; the first failure is returned at the end (its
    // directory, which records its cgroup, stays for another try).
    let mut first: Option<K8sLabError> = None;
    let mut failed: Vec<&Path> = Vec::new();
    for dir in &dirs {
        if let Ok(cg) = std::fs::read_to_string(dir.join(CGROUP_FILE)) {
            match host::remove_cgroup(cg.trim()) {
                Ok(n) => out.killed += n,
                Err(e) => {
                    failed.push(dir);
                    first.get_or_insert(host_err(e));
                }
            }
        }
        out.nodes += 1;
    }
    let mut under: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
    under.push(&data);
    match host::unmount_under(&under) {
        Ok(n) => out.unmounted = n,
        Err(e) => {
            first.get_or_insert(host_err(e));
        }
    }
    host::remove_log_links(&under);
    for d in dirs.iter().map(PathBuf::as_path).chain([data.as_path()]) {
        if failed.contains(&d) {
            continue;
        }
        match std::fs::remove_dir_all(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                first.get_or_insert(K8sLabError::lab(format!("removing {}", d.display()), e));
            }
        }
    }
    match first {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// The pids of the processes named `comm` (as `/proc/<pid>/comm` says) among those of real
/// node `node` of cluster `c`: its containers' too.
pub fn pids_named(
    lab: &crate::lab::Lab,
    c: &crate::topology::Cluster,
    node: &str,
    comm: &str,
) -> Result<Vec<u32>, K8sLabError> {
    let paths = NodePaths::of(lab, c, node);
    let file = paths.file(CGROUP_FILE);
    let cgroup = std::fs::read_to_string(&file)
        .map_err(|e| K8sLabError::lab(format!("reading {}", file.display()), e))?;
    Ok(host::pids_in(cgroup.trim())
        .into_iter()
        .filter_map(|pid| u32::try_from(pid).ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|n| n.trim() == comm)
        })
        .collect())
}

fn host_err(e: HostError) -> K8sLabError {
    K8sLabError::lab("tearing a real node down", e)
}
