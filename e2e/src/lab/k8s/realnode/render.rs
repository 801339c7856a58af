//! The files of a real lab node, rendered from what the lab knows (pure: tested without root):
//! containerd's configuration, the CNI network of the node's pods, the kubelet's and
//! kube-proxy's configurations, a client kubeconfig, CoreDNS's Corefile.

use std::{net::Ipv4Addr, path::Path};

use ipnet::Ipv4Net;

use super::paths::NodePaths;

/// The sandbox image every node holds (imported, never pulled): `chart/images/build.sh
/// --images e2e/images --tag lab` names the lab's images so.
pub const PAUSE_IMAGE: &str = "localhost/liqo-lab/pause:lab"; // images::TAG
/// The port CoreDNS serves on, at the LAN address of the node that runs it.
pub(super) const DNS_PORT: u16 = 53;

/// containerd 2.x (configuration version 3): its root, state and socket under the node's
/// directories; the CRI with runc `runc` (cgroupfs: the kubelet gives each container its cgroup
/// below the node's), the pinned sandbox image, the CNI network in `paths.cni_conf`, the pods'
/// network namespaces under the state directory (teardown finds them there), and the OOM score
/// never below containerd's own (this host refuses a negative one: no CAP_SYS_RESOURCE).
pub(super) fn containerd_toml(paths: &NodePaths, runc: &Path, cni_bin: &Path) -> String {
    let q = |p: &Path| toml_str(&p.display().to_string());
    format!(
        r#"version = 3
root = {root}
state = {state}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.nri.v1.nri", "io.containerd.internal.v1.opt"]

[grpc]
  address = {sock}

[ttrpc]
  address = {ttrpc}

[debug]
  address = ""

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {pause}

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = {runc}
        Root = {runc_root}
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [{cni_bin}]
    conf_dir = {cni_conf}

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"#,
        root = q(&paths.containerd_root),
        state = q(&paths.containerd_state),
        sock = q(&paths.cri_socket),
        ttrpc = toml_str(&format!("{}.ttrpc", paths.cri_socket.display())),
        pause = toml_str(PAUSE_IMAGE),
        runc = q(runc),
        runc_root = q(&paths.containerd_state.join("runc")),
        cni_bin = q(cni_bin),
        cni_conf = q(&paths.cni_conf),
    )
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The node's pod network: a veth per pod routed from the node's namespace (`ptp`; no L2
/// shortcut past kube-proxy's NAT), addresses from the node's `slice` from `first` on (the
/// lab's own pods hold the addresses before it), the lab's bridge address `gateway` as the
/// pods' gateway, and host ports (`portmap`).
pub(super) fn cni_conflist(
    slice: Ipv4Net,
    first: Ipv4Addr,
    gateway: Ipv4Addr,
    ipam_dir: &Path,
) -> String {
    serde_json::json!({
        "cniVersion": "1.0.0",
        "name": "liqo-lab",
        "plugins": [
            {
                "type": "ptp",
                "ipMasq": false,
                "ipam": {
                    "type": "host-local",
                    "dataDir": ipam_dir.display().to_string(),
                    "ranges": [[{
                        "subnet": slice.to_string(),
                        "rangeStart": first.to_string(),
                        "gateway": gateway.to_string(),
                    }]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": true}},
        ],
    })
    .to_string()
}

/// What the kubelet of a node is told.
#[derive(Debug, Clone)]
pub(super) struct KubeletInput<'a> {
    /// Its files.
    pub(super) paths: &'a NodePaths,
    /// Where it serves (the node's LAN address; port 10250 in the node's namespace).
    pub(super) address: Ipv4Addr,
    /// The cgroup (same path in every hierarchy) its pods go below.
    pub(super) cgroup_root: &'a str,
    /// The cluster's DNS Service address.
    pub(super) cluster_dns: Ipv4Addr,
}

/// The kubelet's configuration (JSON, which it reads as YAML): cgroup v1 accepted
/// (`failCgroupV1: false`, cgroupfs below the node's cgroup), the node's containerd, webhook
/// authentication and authorization (the API server calls it with its kubelet client
/// certificate), no read-only port, pods' logs in the node's directory, no image garbage
/// collection (images are imported: none could be pulled again) and no eviction for disk or
/// memory (several nodes share one host's disk).
pub(super) fn kubelet_config(k: &KubeletInput<'_>) -> String {
    let p = |p: &Path| p.display().to_string();
    serde_json::json!({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": false,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": k.cgroup_root,
        "containerRuntimeEndpoint": format!("unix://{}", p(&k.paths.cri_socket)),
        "address": k.address.to_string(),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "failSwapOn": false,
        "authentication": {
            "anonymous": {"enabled": false},
            "webhook": {"enabled": true},
            "x509": {"clientCAFile": p(&k.paths.ca)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [k.cluster_dns.to_string()],
        "clusterDomain": "cluster.local",
        "resolvConf": p(&k.paths.resolv_conf),
        "podLogsDir": p(&k.paths.pod_logs),
        "volumePluginDir": p(&k.paths.data.join("volume-plugins")),
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "0%", "imagefs.available": "0%"},
        "localStorageCapacityIsolation": false,
        "protectKernelDefaults": false,
        "serializeImagePulls": false,
        "maxPods": 110,
    })
    .to_string()
}

/// kube-proxy's configuration: nftables in the node's namespace, the cluster's pod CIDR, its
/// ports on the node's loopback, and no host-wide conntrack sysctl (several nodes share the
/// host's).
pub(super) fn kube_proxy_config(paths: &NodePaths, node: &str, cluster_cidr: Ipv4Net) -> String {
    serde_json::json!({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": paths.kubeconfig("kube-proxy").display().to_string()},
        "mode": "nftables",
        "hostnameOverride": node,
        "bindAddress": "0.0.0.0",
        "clusterCIDR": cluster_cidr.to_string(),
        "metricsBindAddress": "127.0.0.1:10249",
        "healthzBindAddress": "127.0.0.1:10256",
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    })
    .to_string()
}

/// A kubeconfig for a client certificate (`crt`, `key`) of the cluster whose CA is `ca`, at
/// `server`.
pub(super) fn kubeconfig(server: &str, ca: &Path, crt: &Path, key: &Path) -> String {
    let p = |p: &Path| p.display().to_string();
    serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server, "certificate-authority": p(ca)}}],
        "users": [{"name": "lab", "user": {"client-certificate": p(crt), "client-key": p(key)}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": "lab"}}],
        "current-context": "lab",
    })
    .to_string()
}

/// CoreDNS serving `cluster.local` from the API server (with `kubeconfig`) at `bind`, and
/// nothing else (the lab has no upstream resolver).
pub(super) fn corefile(bind: Ipv4Addr, kubeconfig: &Path) -> String {
    format!(
        ".:{DNS_PORT} {{\n    bind {bind}\n    errors\n    health 127.0.0.1:8080\n    ready 127.0.0.1:8181\n    \
         kubernetes cluster.local in-addr.arpa ip6.arpa {{\n        kubeconfig {}\n        \
         pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }}\n    cache 30\n}}\n",
        kubeconfig.display()
    )
}

/// The DNS Service's address: the tenth of the service CIDR, as kubeadm's.
pub fn cluster_dns(service_cidr: Ipv4Net) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(service_cidr.network()) + 10)
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
