//! Starting the real nodes of one cluster (see the module doc of [`super`]).

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use dataplane::supervisor::Spec;

use super::{
    host,
    io::{mkdirs, spawn_in, write},
    paths::{CGROUP_FILE, NodePaths},
    render::{self, KubeletInput},
};
use crate::{
    k8s::{Binaries, Cluster as KubeCluster},
    lab::{
        Lab,
        k8s::{K8sLabError, nodes, relay},
    },
    topology::{Cluster, Node as LabNode},
};

/// Debian's CNI plugins.
const CNI_BIN: &str = "/usr/lib/cni";
/// The kernel tunables the kubelet would set host-wide: it gets private copies.
const TUNABLES: &[&str] = &[
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
];
/// How long the nodes of a cluster may take to be Ready.
const READY_SECS: u64 = 120;

/// The API server's egress proxy socket of cluster `c` (served by its API node's relay).
pub fn egress_socket(lab: &Lab, c: &Cluster) -> PathBuf {
    lab.files(c).dir().join("egress.sock")
}

/// Starts containerd, the kubelet and kube-proxy on every node of `c` (whose harness cluster
/// is `kc`), CoreDNS on its API node, and waits until every Node is Ready. With `chart`, the
/// chart's images are imported too.
pub async fn start(
    lab: &Lab,
    c: &Cluster,
    kc: &KubeCluster,
    bins: &Binaries,
    chart: bool,
) -> Result<(), K8sLabError> {
    let images = super::images::archives(chart)?;
    let proc_cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| K8sLabError::lab("reading /proc/self/cgroup", e))?;
    host::check_v1().map_err(|e| K8sLabError::lab("real nodes", e))?;
    let session = host::memory_cgroup(&proc_cgroup)
        .ok_or_else(|| K8sLabError::lab("real nodes", "no memory cgroup in /proc/self/cgroup"))?;
    let pki = kc.dir.join("pki");
    for n in &c.nodes {
        let paths = NodePaths::of(lab, c, n.name.as_str());
        let cgroup = host::node_cgroup(
            &session,
            lab.prefix.as_str(),
            c.name.as_str(),
            n.name.as_str(),
        );
        prepare(&paths, c, n, &pki, &cgroup)?;
        service_route(lab, c, n).await?;
        let ns = format!(
            "--net=/var/run/netns/{}",
            lab.node_netns(c.name.as_str(), n.name.as_str())
        );
        containerd(&paths, bins, &ns, &cgroup).await?;
        for image in &images {
            import(&paths, bins, image)?;
        }
        kubelet(
            &paths,
            bins,
            &ns,
            &cgroup,
            n,
            render::cluster_dns(c.service_cidr),
        )?;
        let proxy = Spec::new("kube-proxy", "nsenter", paths.log("kube-proxy"))
            .args([ns.as_str()])
            .args([bins.path("kube-proxy")])
            .args(["--config".into(), paths.file("kube-proxy.json")]);
        spawn_in(proxy, &cgroup)?;
        if n.name == relay::api_node(c).name {
            super::dns::coredns(&paths, bins, &ns, &cgroup, n)?;
        }
    }
    let client = kc
        .client()
        .await
        .map_err(|e| K8sLabError::lab("a client", e))?;
    super::dns::objects(&client, c).await?;
    nodes::wait_ready(&client, c, READY_SECS).await
}

/// The route to the service CIDR a node's own programs (host-network pods) need: kube-proxy
/// translates a ClusterIP only after the kernel found a route to it (a node of a real cluster
/// has its default route).
async fn service_route(lab: &Lab, c: &Cluster, n: &LabNode) -> Result<(), K8sLabError> {
    let ns = lab.node(c, n.name.as_str())?;
    let route = dataplane::route::RouteSpec {
        dev: Some("eth0".parse().expect("literal")),
        src: Some(n.lan_addr.addr().into()),
        ..dataplane::route::RouteSpec::to(ipnet::IpNet::V4(c.service_cidr))
    };
    dataplane::Netlink::connect_in(&ns)
        .map_err(|e| K8sLabError::lab(format!("netlink in {}", ns.name()), e))?
        .add_route(&route)
        .await
        .map_err(|e| K8sLabError::lab(format!("route {route} in {}", ns.name()), e))
}

/// The node's directories, certificates, configurations, private tunables and cgroup.
fn prepare(
    paths: &NodePaths,
    c: &Cluster,
    n: &LabNode,
    pki: &Path,
    cgroup: &str,
) -> Result<(), K8sLabError> {
    let tunables = paths.file("tunables");
    mkdirs(&[
        &paths.dir,
        &paths.data,
        &paths.cni_conf,
        &paths.cni_ipam,
        &paths.kubelet_root,
        &paths.pod_logs,
        &paths.containerd_root,
        &paths.containerd_state,
        &tunables,
    ])?;
    write(&paths.file(CGROUP_FILE), cgroup, false)?;
    let ca = std::fs::read_to_string(pki.join("ca.crt"))
        .map_err(|e| K8sLabError::lab("reading the cluster's CA", e))?;
    write(&paths.ca, &ca, false)?;
    let server = format!("https://{}", relay::API_LISTEN);
    let name = n.name.as_str();
    for (who, cn, org) in [
        (
            "kubelet",
            format!("system:node:{name}"),
            Some("system:nodes"),
        ),
        ("kube-proxy", "system:kube-proxy".to_owned(), None),
        ("coredns", "system:coredns".to_owned(), None),
    ] {
        let (crt, key) = (
            paths.file(&format!("{who}.crt")),
            paths.file(&format!("{who}.key")),
        );
        testkit::k8s::issue_client(pki, &cn, org, &crt, &key)
            .map_err(|e| K8sLabError::lab(format!("the {who} certificate"), e))?;
        write(
            &paths.kubeconfig(who),
            &render::kubeconfig(&server, &paths.ca, &crt, &key),
            true,
        )?;
    }
    // The lab's own pods hold the addresses from 2 on; real pods start at 16 at least.
    let first_host = (n.pods.len() as u32 + 2).max(16);
    let first = std::net::Ipv4Addr::from(u32::from(n.pod_slice.network()) + first_host);
    write(
        &paths.cni_conf.join("10-liqo-lab.conflist"),
        &render::cni_conflist(n.pod_slice, first, n.bridge_addr.addr(), &paths.cni_ipam),
        false,
    )?;
    write(&paths.resolv_conf, "", false)?;
    write(
        &paths.file("kube-proxy.json"),
        &render::kube_proxy_config(paths, name, c.pod_cidr),
        false,
    )?;
    for t in TUNABLES {
        let value = std::fs::read_to_string(Path::new("/proc/sys").join(t))
            .map_err(|e| K8sLabError::lab(format!("reading /proc/sys/{t}"), e))?;
        write(&tunables.join(t.replace('/', ".")), &value, false)?;
    }
    host::create_cgroup(cgroup).map_err(|e| K8sLabError::lab("the node's cgroup", e))?;
    host::shared_bind(&paths.kubelet_root)
        .map_err(|e| K8sLabError::lab("the kubelet's root", e))?;
    Ok(())
}

async fn containerd(
    paths: &NodePaths,
    bins: &Binaries,
    ns: &str,
    cgroup: &str,
) -> Result<(), K8sLabError> {
    let conf = paths.file("containerd.toml");
    write(
        &conf,
        &render::containerd_toml(paths, &bins.path("runc"), Path::new(CNI_BIN)),
        false,
    )?;
    let path = format!(
        "{}:{}",
        bins.dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // In a mount namespace of its own whose /run/netns is the node's (a slave of the host's
    // mounts, so the kubelet's volumes still reach it): what its containers make there (the
    // gateway's namespace) is the node's, as on a machine of its own, not the host's.
    let netns_dir = &paths.netns;
    mkdirs(&[netns_dir])?;
    // The host's /run/netns is unmounted there first (every mount stacked on it): containerd
    // reads the propagation of the first mount it finds at a path, not the top one.
    let script = "mount --make-rslave / && while mountpoint -q /run/netns; do umount -l /run/netns || exit 1; done && mount --bind \"$1\" /run/netns && mount --make-shared /run/netns && exec \"$2\" --config \"$3\"";
    let spec = Spec::new("containerd", "nsenter", paths.log("containerd"))
        .env("PATH", path)
        .args([
            ns,
            "unshare",
            "--mount",
            "--propagation",
            "unchanged",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .args([netns_dir.as_path(), &bins.path("containerd"), &conf]);
    let pid = spawn_in(spec, cgroup)?;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !paths.cri_socket.exists() {
        if !dataplane::supervisor::alive(pid) {
            return Err(K8sLabError::lab(
                "containerd",
                format!("it exited; see {}", paths.log("containerd").display()),
            ));
        }
        if Instant::now() > deadline {
            return Err(K8sLabError::lab(
                "containerd",
                format!(
                    "no socket {} within 20 s; see {}",
                    paths.cri_socket.display(),
                    paths.log("containerd").display()
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Imports an OCI archive into the node's containerd (namespace `k8s.io`, as the CRI sees it).
fn import(paths: &NodePaths, bins: &Binaries, image: &Path) -> Result<(), K8sLabError> {
    let out = Command::new("timeout")
        .arg("120")
        .arg(bins.path("ctr"))
        .arg("--address")
        .arg(&paths.cri_socket)
        .args(["--namespace", "k8s.io", "images", "import"])
        .arg(image)
        .output()
        .map_err(|e| K8sLabError::lab("running ctr", e))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(K8sLabError::lab(
            format!("importing {}", image.display()),
            format!(
                "ctr exited {}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ))
    }
}

/// The kubelet, in a mount namespace of its own where the host-wide tunables it sets are
/// private copies.
fn kubelet(
    paths: &NodePaths,
    bins: &Binaries,
    ns: &str,
    cgroup: &str,
    n: &LabNode,
    cluster_dns: std::net::Ipv4Addr,
) -> Result<(), K8sLabError> {
    let conf = paths.file("kubelet.json");
    let input = KubeletInput {
        paths,
        address: n.lan_addr.addr(),
        cgroup_root: cgroup,
        cluster_dns,
    };
    write(&conf, &render::kubelet_config(&input), false)?;
    let tunables = paths.file("tunables");
    let binds: String = TUNABLES
        .iter()
        .map(|t| {
            format!(
                "mount --bind {} /proc/sys/{t} && ",
                tunables.join(t.replace('/', ".")).display()
            )
        })
        .collect();
    // /proc made private first: on a host whose /proc is shared the binds would reach it.
    let script = format!(
        "mount --make-rprivate /proc && {binds}exec {} --config {} --kubeconfig {} --root-dir {} --cert-dir {} --hostname-override {} --node-ip {}",
        bins.path("kubelet").display(),
        conf.display(),
        paths.kubeconfig("kubelet").display(),
        paths.kubelet_root.display(),
        paths.file("kubelet-pki").display(),
        n.name,
        n.lan_addr.addr(),
    );
    let spec = Spec::new("kubelet", "nsenter", paths.log("kubelet")).args([
        ns,
        "unshare",
        "--mount",
        "--propagation",
        "unchanged",
        "sh",
        "-c",
        &script,
    ]);
    spawn_in(spec, cgroup).map(drop)
}
