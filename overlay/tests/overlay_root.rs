//! The overlay on the real kernel (needs root): three nodes on a LAN, pods on the ordinary nodes
//! reach a remote range behind the gateway node over VXLAN, replies come back the same way
//! (strict reverse-path filters on), the gateway role moves, and nothing is left behind.

use std::{
    process::Child,
    sync::atomic::{AtomicUsize, Ordering},
    thread,
    time::{Duration, Instant},
};

use dataplane::{
    Netlink, Netns,
    addr::AddressSpec,
    link::{LinkKind, LinkSpec},
    netns::require_root,
};

use dataplane::testing::{Spaces, route, wire};

const BIN: &str = env!("CARGO_BIN_EXE_liqo-overlay");
static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A namespace with `lo` up and forwarding on, removed on drop.
async fn add(s: &mut Spaces, name: String) -> Netns {
    let ns = s.create(&name).await;
    ns.run(|| dataplane::sysctl::set("net.ipv4.ip_forward", "1"))
        .unwrap()
        .unwrap();
    ns
}

fn config(me: &str, gateway: &str) -> String {
    format!(
        "node: {me}\ngateway: {gateway}\nremoteCIDRs: [10.71.0.0/16]\nnodes:\n  - {{name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}}\n  - {{name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}}\n  - {{name: n2, address: 172.18.0.3, podCIDR: 10.200.2.0/24}}\n"
    )
}

fn write(dir: &std::path::Path, me: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(format!("{me}.yaml"));
    std::fs::write(p.with_extension("tmp"), text).unwrap();
    std::fs::rename(p.with_extension("tmp"), &p).unwrap();
    p
}

fn ping(ns: &Netns, ip: &str) -> bool {
    ns.command("ping")
        .args(["-c1", "-W2", "-q", ip])
        .output()
        .unwrap()
        .status
        .success()
}

fn out(ns: &Netns, args: &[&str]) -> String {
    String::from_utf8(ns.command("ip").args(args).output().unwrap().stdout).unwrap()
}

fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < end {
        if f() {
            return true;
        }
        thread::sleep(Duration::from_millis(100));
    }
    false
}

#[tokio::test]
async fn pods_on_every_node_reach_remote_ranges_through_the_gateway_node() {
    require_root();
    let p = format!(
        "ovt{}{}",
        std::process::id() % 100_000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let mut s = Spaces::new();
    let lan = add(&mut s, format!("{p}-lan")).await;
    Netlink::connect_in(&lan)
        .unwrap()
        .add_link(&LinkSpec {
            name: "br0".parse().unwrap(),
            kind: LinkKind::Bridge,
            mtu: None,
            controller: None,
            up: true,
        })
        .await
        .unwrap();
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for i in 0..3 {
        let n = add(&mut s, format!("{p}-n{i}")).await;
        wire(
            &lan,
            &format!("n{i}"),
            "",
            Some("br0"),
            &n,
            "eth0",
            &format!("172.18.0.{}/24", i + 1),
        )
        .await;
        let pod = add(&mut s, format!("{p}-n{i}-p0")).await;
        wire(
            &n,
            "p0",
            &format!("10.200.{i}.1/24"),
            None,
            &pod,
            "eth0",
            &format!("10.200.{i}.2/24"),
        )
        .await;
        route(&pod, "0.0.0.0/0", &format!("10.200.{i}.1")).await;
        // Strict reverse-path filtering: an asymmetric return path would be dropped.
        n.run(|| {
            dataplane::sysctl::set("net.ipv4.conf.all.rp_filter", "1").unwrap();
            dataplane::sysctl::set("net.ipv4.conf.eth0.rp_filter", "1").unwrap();
        })
        .unwrap();
        nodes.push(n);
        pods.push(pod);
    }
    for (i, node) in nodes.iter().enumerate() {
        for j in (0..3).filter(|j| *j != i) {
            route(
                node,
                &format!("10.200.{j}.0/24"),
                &format!("172.18.0.{}", j + 1),
            )
            .await;
        }
    }
    // A stand-in for the remote cluster behind the gateway node n0: 10.71.0.2.
    let remote = add(&mut s, format!("{p}-remote")).await;
    wire(
        &nodes[0],
        "gw0",
        "169.254.1.1/30",
        None,
        &remote,
        "eth0",
        "169.254.1.2/30",
    )
    .await;
    Netlink::connect_in(&remote)
        .unwrap()
        .add_address(&AddressSpec {
            link: "eth0".parse().unwrap(),
            addr: "10.71.0.2/32".parse().unwrap(),
        })
        .await
        .unwrap();
    route(&remote, "0.0.0.0/0", "169.254.1.1").await;
    route(&nodes[0], "10.71.0.0/16", "169.254.1.2").await;

    assert!(!ping(&pods[1], "10.71.0.2"), "no path before the overlay");
    let dir = std::env::temp_dir().join(&p);
    std::fs::create_dir_all(&dir).unwrap();
    let mut agents: Vec<Child> = (0..3)
        .map(|i| {
            let cfg = write(&dir, &format!("n{i}"), &config(&format!("n{i}"), "n0"));
            nodes[i]
                .command(BIN)
                .args(["run", "--config"])
                .arg(cfg)
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    assert!(
        eventually(10, || ping(&pods[1], "10.71.0.2")
            && ping(&pods[2], "10.71.0.2")),
        "pods on ordinary nodes reach the remote range"
    );
    assert!(
        out(&nodes[0], &["rule"]).contains("from 10.71.0.0/16 lookup 18952"),
        "{}",
        out(&nodes[0], &["rule"])
    );
    assert_eq!(
        out(&nodes[1], &["route", "show", "table", "18952"]).trim(),
        "10.71.0.0/16 via 240.18.0.1 dev liqo.vxlan proto static onlink"
    );

    // kill -9 and restart: same state, no duplicates.
    let before = (
        out(&nodes[1], &["rule"]),
        out(&nodes[1], &["route", "show", "table", "18952"]),
        out(&nodes[1], &["neigh", "show", "dev", "liqo.vxlan"]),
    );
    agents[1].kill().unwrap();
    agents[1].wait().unwrap();
    agents[1] = nodes[1]
        .command(BIN)
        .args(["run", "--config"])
        .arg(dir.join("n1.yaml"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(eventually(5, || ping(&pods[1], "10.71.0.2")));
    thread::sleep(Duration::from_millis(500));
    assert_eq!(
        before,
        (
            out(&nodes[1], &["rule"]),
            out(&nodes[1], &["route", "show", "table", "18952"]),
            out(&nodes[1], &["neigh", "show", "dev", "liqo.vxlan"])
        )
    );

    // n2 leaves: n1 drops its forwarding entry and neighbour, nothing else changes.
    let without_n2 = config("n1", "n0").replace(
        "  - {name: n2, address: 172.18.0.3, podCIDR: 10.200.2.0/24}\n",
        "",
    );
    assert_ne!(without_n2, config("n1", "n0"));
    write(&dir, "n1", &without_n2);
    assert!(
        eventually(5, || !out(
            &nodes[1],
            &["neigh", "show", "dev", "liqo.vxlan"]
        )
        .contains("240.18.0.3")),
        "n2's neighbour is removed on n1"
    );
    let fdb = String::from_utf8(
        nodes[1]
            .command("bridge")
            .args(["fdb", "show", "dev", "liqo.vxlan"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(
        !fdb.contains("172.18.0.3") && fdb.contains("172.18.0.1"),
        "{fdb}"
    );
    assert!(out(&nodes[1], &["neigh", "show", "dev", "liqo.vxlan"]).contains("240.18.0.1"));
    assert!(
        ping(&pods[1], "10.71.0.2"),
        "n1 still reaches the remote range"
    );

    // The gateway role moves to n2: n1's table follows within a reload.
    for i in 0..3 {
        write(&dir, &format!("n{i}"), &config(&format!("n{i}"), "n2"));
    }
    assert!(
        eventually(5, || out(&nodes[1], &["route", "show", "table", "18952"])
            .contains("via 240.18.0.3")),
        "n1 follows the new gateway"
    );
    assert!(
        eventually(5, || out(&nodes[2], &["rule"])
            .contains("from 10.71.0.0/16 lookup 18952")),
        "n2 takes the gateway role"
    );
    assert!(
        eventually(5, || !out(&nodes[0], &["rule"]).contains("lookup 18952")
            || out(&nodes[0], &["rule"])
                .contains("to 10.71.0.0/16 lookup 18952")),
        "n0 becomes ordinary"
    );

    // A bad file is refused and the running state kept.
    write(&dir, "n1", &config("n1", "n9"));
    thread::sleep(Duration::from_millis(1200));
    assert!(out(&nodes[1], &["route", "show", "table", "18952"]).contains("via 240.18.0.3"));

    // SIGTERM removes everything.
    for (i, a) in agents.iter_mut().enumerate() {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(a.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        a.wait().unwrap();
        assert!(
            !out(&nodes[i], &["rule"]).contains("18952"),
            "rules left on n{i}"
        );
        assert!(
            out(&nodes[i], &["route", "show", "table", "18952"])
                .trim()
                .is_empty(),
            "routes left on n{i}"
        );
        assert!(
            !out(&nodes[i], &["-br", "link"]).contains("liqo.vxlan"),
            "device left on n{i}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
