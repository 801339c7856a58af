//! What a real node's programs use ([`usage`]): the resident memory of its kubelet, containerd
//! (and its shims), kube-proxy and CoreDNS, read from `/proc` for the processes of the node's
//! cgroup. Read only.

use std::{collections::BTreeMap, fs};

use super::{
    host,
    paths::{CGROUP_FILE, node_dirs},
};
use crate::lab::Prefix;

/// The resident memory of one real node's programs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeUsage {
    /// The cluster.
    pub cluster: String,
    /// The node.
    pub node: String,
    /// KiB resident per program (`kubelet`, `containerd`, `containerd-shim` summed over the
    /// shims, `kube-proxy`, `coredns`), and how many processes each has.
    pub rss_kib: BTreeMap<String, (u64, usize)>,
}

/// The programs counted, by the name the kernel gives them (`comm`, at most 15 bytes).
const PROGRAMS: &[&str] = &[
    "kubelet",
    "containerd",
    "containerd-shim",
    "kube-proxy",
    "coredns",
];

/// The resident memory of a process from its `/proc/<pid>/status`, in KiB.
pub(super) fn vm_rss_kib(status: &str) -> Option<u64> {
    liqo_daemon::memory::status_kib(status, "VmRSS")
}

/// The programs' memory on every real node of lab `prefix` (none when it has no real nodes).
pub fn usage(prefix: &Prefix) -> Vec<NodeUsage> {
    let mut out = Vec::new();
    for dir in node_dirs(prefix) {
        let Ok(cg) = fs::read_to_string(dir.join(CGROUP_FILE)) else {
            continue;
        };
        let name = |p: Option<&std::path::Path>| {
            p.and_then(|p| p.file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let mut u = NodeUsage {
            cluster: name(dir.parent()),
            node: name(Some(&dir)).trim_start_matches("node-").to_owned(),
            rss_kib: BTreeMap::new(),
        };
        for pid in host::pids_in(cg.trim()) {
            let comm = fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let comm = comm.trim();
            let Some(program) = PROGRAMS.iter().find(|p| **p == comm) else {
                continue;
            };
            let rss = fs::read_to_string(format!("/proc/{pid}/status"))
                .ok()
                .and_then(|s| vm_rss_kib(&s))
                .unwrap_or(0);
            let e = u.rss_kib.entry((*program).to_owned()).or_default();
            e.0 += rss;
            e.1 += 1;
        }
        out.push(u);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_resident_memory_is_read_from_a_status_file() {
        let status = "Name:\tkubelet\nVmPeak:\t  900 kB\nVmRSS:\t   61234 kB\nThreads:\t12\n";
        assert_eq!(super::vm_rss_kib(status), Some(61234));
        assert_eq!(super::vm_rss_kib("Name:\tkthreadd\n"), None);
    }
}
