//! Where a real lab node keeps its files: its configuration, sockets and certificates under the
//! lab's directory (`/run/liqo-lab/<prefix>.d/<cluster>/node-<node>/`), what grows (images,
//! containers, the kubelet's volumes) on disk (`/var/lib/liqo-lab/<prefix>/<cluster>-<node>/`).

use std::path::{Path, PathBuf};

use crate::lab::{Prefix, error::STATE_DIR};

/// Where big node data lives (on disk, not tmpfs).
pub const DATA_ROOT: &str = "/var/lib/liqo-lab";
/// The file in a node's directory that records its cgroup (teardown reads it).
pub(super) const CGROUP_FILE: &str = "cgroup";

/// The files of one real node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePaths {
    /// The node's directory under the lab's.
    pub dir: PathBuf,
    /// Its data directory on disk.
    pub data: PathBuf,
    /// containerd's root (images, snapshots).
    pub containerd_root: PathBuf,
    /// containerd's state (tasks, the pods' network namespaces).
    pub containerd_state: PathBuf,
    /// The CRI socket.
    pub cri_socket: PathBuf,
    /// The CNI network directory.
    pub cni_conf: PathBuf,
    /// host-local's allocations.
    pub cni_ipam: PathBuf,
    /// The kubelet's root directory (a shared mount: its volume mounts reach containerd).
    pub kubelet_root: PathBuf,
    /// The pods' logs.
    pub pod_logs: PathBuf,
    /// The resolv.conf pods with `dnsPolicy: Default` get (empty: no upstream resolver).
    pub resolv_conf: PathBuf,
    /// The cluster's CA (client certificates the kubelet accepts).
    pub ca: PathBuf,
    /// The node's own `/run/netns` (bound there for containerd and its containers): the
    /// network namespaces its pods make (the gateway's).
    pub netns: PathBuf,
}

impl NodePaths {
    /// The paths of node `node` of cluster `cluster` in the lab whose cluster directory is
    /// `cluster_dir`, prefix `prefix`.
    pub fn new(prefix: &str, cluster_dir: &Path, cluster: &str, node: &str) -> NodePaths {
        let dir = cluster_dir.join(format!("node-{node}"));
        let data = Path::new(DATA_ROOT)
            .join(prefix)
            .join(format!("{cluster}-{node}"));
        NodePaths {
            containerd_root: data.join("containerd"),
            containerd_state: dir.join("containerd"),
            cri_socket: dir.join("cri.sock"),
            cni_conf: dir.join("cni"),
            cni_ipam: dir.join("cni-ipam"),
            kubelet_root: data.join("kubelet"),
            pod_logs: data.join("pods"),
            resolv_conf: dir.join("resolv.conf"),
            ca: dir.join("ca.crt"),
            netns: dir.join("run-netns"),
            dir,
            data,
        }
    }

    /// The paths of node `node` of cluster `c` of `lab`.
    pub fn of(lab: &crate::lab::Lab, c: &crate::topology::Cluster, node: &str) -> NodePaths {
        NodePaths::new(
            lab.prefix.as_str(),
            lab.files(c).dir(),
            c.name.as_str(),
            node,
        )
    }

    /// A component's file (`<dir>/<name>`).
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The kubeconfig of component `who` (kubelet, kube-proxy, coredns).
    pub fn kubeconfig(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.kubeconfig"))
    }

    /// A component's log.
    pub fn log(&self, who: &str) -> PathBuf {
        self.dir.join(format!("{who}.log"))
    }
}

/// The directories of lab `prefix`'s real nodes (`<lab dir>/<cluster>/node-<node>`).
pub(super) fn node_dirs(prefix: &Prefix) -> Vec<PathBuf> {
    let lab_dir = Path::new(STATE_DIR).join(format!("{prefix}.d"));
    let mut dirs = Vec::new();
    for cluster in read_dirs(&lab_dir) {
        for node in read_dirs(&cluster) {
            if node
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("node-"))
            {
                dirs.push(node);
            }
        }
    }
    dirs.sort();
    dirs
}

fn read_dirs(d: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}
