//! The rendered files parse and say what the node needs.

use std::path::Path;

use super::*;

fn paths() -> NodePaths {
    NodePaths::new("lq", Path::new("/run/liqo-lab/lq.d/rome"), "rome", "n1")
}

#[test]
fn containerd_keeps_everything_of_the_node_in_its_directories() {
    let t = containerd_toml(&paths(), Path::new("/x/runc"), Path::new("/usr/lib/cni"));
    // Each key on its line, as containerd reads it (no TOML parser in the workspace).
    for line in [
        r#"root = "/var/lib/liqo-lab/lq/rome-n1/containerd""#,
        r#"state = "/run/liqo-lab/lq.d/rome/node-n1/containerd""#,
        r#"  address = "/run/liqo-lab/lq.d/rome/node-n1/cri.sock""#,
        "  restrict_oom_score_adj = true",
        "  netns_mounts_under_state_dir = true",
        r#"        BinaryName = "/x/runc""#,
        "        SystemdCgroup = false",
        r#"        Root = "/run/liqo-lab/lq.d/rome/node-n1/containerd/runc""#,
        r#"    bin_dirs = ["/usr/lib/cni"]"#,
    ] {
        assert!(t.lines().any(|l| l == line), "no line {line:?} in\n{t}");
    }
    assert!(t.contains(&format!("sandbox = \"{PAUSE_IMAGE}\"")), "{t}");
}

#[test]
fn the_pods_take_addresses_after_the_lab_s_own_and_route_through_the_bridge_address() {
    let c = cni_conflist(
        "10.200.1.0/24".parse().unwrap(),
        "10.200.1.16".parse().unwrap(),
        "10.200.1.1".parse().unwrap(),
        Path::new("/d/ipam"),
    );
    let v: serde_json::Value = serde_json::from_str(&c).unwrap();
    let r = &v["plugins"][0]["ipam"]["ranges"][0][0];
    assert_eq!(v["plugins"][0]["type"], "ptp");
    assert_eq!(r["subnet"], "10.200.1.0/24");
    assert_eq!(r["rangeStart"], "10.200.1.16");
    assert_eq!(r["gateway"], "10.200.1.1");
    assert_eq!(v["plugins"][0]["ipam"]["dataDir"], "/d/ipam");
}

#[test]
fn the_kubelet_accepts_cgroup_v1_and_serves_on_the_node_s_address() {
    let p = paths();
    let k = kubelet_config(&KubeletInput {
        paths: &p,
        address: "172.18.0.2".parse().unwrap(),
        cgroup_root: "/s/liqo-lab-lq-rome-n1",
        cluster_dns: "10.96.0.10".parse().unwrap(),
    });
    let v: serde_json::Value = serde_json::from_str(&k).unwrap();
    assert_eq!(v["failCgroupV1"], false);
    assert_eq!(v["cgroupRoot"], "/s/liqo-lab-lq-rome-n1");
    assert_eq!(v["address"], "172.18.0.2");
    assert_eq!(v["readOnlyPort"], 0);
    assert_eq!(
        v["volumePluginDir"],
        "/var/lib/liqo-lab/lq/rome-n1/volume-plugins"
    );
    assert_eq!(v["authentication"]["anonymous"]["enabled"], false);
    assert_eq!(v["clusterDNS"][0], "10.96.0.10");
    assert_eq!(
        v["containerRuntimeEndpoint"],
        "unix:///run/liqo-lab/lq.d/rome/node-n1/cri.sock"
    );
}

#[test]
fn kube_proxy_uses_nftables_and_leaves_the_host_s_conntrack_alone() {
    let v: serde_json::Value = serde_json::from_str(&kube_proxy_config(
        &paths(),
        "n1",
        "10.200.0.0/16".parse().unwrap(),
    ))
    .unwrap();
    assert_eq!(v["mode"], "nftables");
    assert_eq!(v["hostnameOverride"], "n1");
    assert_eq!(v["conntrack"]["maxPerCore"], 0);
    assert_eq!(
        v["clientConnection"]["kubeconfig"],
        "/run/liqo-lab/lq.d/rome/node-n1/kube-proxy.kubeconfig"
    );
}

#[test]
fn corefile_and_the_dns_address() {
    let c = corefile(
        "172.18.0.2".parse().unwrap(),
        Path::new("/k/coredns.kubeconfig"),
    );
    assert!(c.contains("bind 172.18.0.2"), "{c}");
    assert!(c.contains("kubeconfig /k/coredns.kubeconfig"), "{c}");
    assert!(c.starts_with(".:53 {"), "{c}");
    assert_eq!(c.matches('{').count(), c.matches('}').count(), "{c}");
    assert_eq!(
        cluster_dns("10.96.0.0/12".parse().unwrap()).to_string(),
        "10.96.0.10"
    );
    let k: serde_json::Value = serde_json::from_str(&kubeconfig(
        "https://127.0.0.1:6443",
        Path::new("/ca"),
        Path::new("/c"),
        Path::new("/k"),
    ))
    .unwrap();
    assert_eq!(
        k["clusters"][0]["cluster"]["server"],
        "https://127.0.0.1:6443"
    );
}
