//! The overlay on the real kernel (needs root): three nodes on a LAN, pods on the ordinary nodes
//! reach a remote range behind the gateway node over VXLAN, replies come back the same way
//! (strict reverse-path filters on), the gateway role moves, and nothing is left behind.

use crate::common;

use common::{Agent, Dir, add, eventually, prefix, wait_status};
use dataplane::{
    Netns,
    testing::{Spaces, route, wire},
};
use liqo_daemon::digest;

fn config(me: &str, gateway: &str) -> String {
    format!(
        "node: {me}\ngateway: {gateway}\nremoteCIDRs: [10.71.0.0/16]\nnodes:\n  - {{name: n0, address: 172.18.0.1, podCIDR: 10.200.0.0/24}}\n  - {{name: n1, address: 172.18.0.2, podCIDR: 10.200.1.0/24}}\n  - {{name: n2, address: 172.18.0.3, podCIDR: 10.200.2.0/24}}\n"
    )
}

/// Writes node `me`'s config file in `dir`; its path.
fn write(dir: &std::path::Path, me: &str, text: &str) -> std::path::PathBuf {
    let p = dir.join(format!("{me}.yaml"));
    common::write(&p, text);
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

/// `ip <args>` in `ns`; its output, once it succeeded. A routing table that does not exist
/// (never used in this namespace) reads as empty.
fn out(ns: &Netns, args: &[&str]) -> String {
    let o = ns.command("ip").args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() && stderr.contains("FIB table does not exist") {
        return String::new();
    }
    assert!(o.status.success(), "ip {args:?}: {stderr}");
    String::from_utf8(o.stdout).unwrap()
}

#[tokio::test]
async fn pods_on_every_node_reach_remote_ranges_through_the_gateway_node() {
    let p = prefix("t");
    let mut s = Spaces::new();
    let lan = common::lan(&mut s, &p).await;
    let mut nodes = Vec::new();
    let mut pods = Vec::new();
    for i in 0..3 {
        let n = common::node(&mut s, &p, &lan, i).await;
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
    common::remote(&mut s, &p, &nodes[0]).await;

    assert!(!ping(&pods[1], "10.71.0.2"), "no path before the overlay");
    let guard = Dir(std::env::temp_dir().join(&p));
    let dir = guard.0.clone();
    std::fs::create_dir_all(&dir).unwrap();
    let log = |i: usize| dir.join(format!("n{i}.log"));
    let mut agents: Vec<Agent> = (0..3)
        .map(|i| {
            let cfg = write(&dir, &format!("n{i}"), &config(&format!("n{i}"), "n0"));
            Agent::start(&nodes[i], &cfg, &log(i))
        })
        .collect();
    assert!(
        eventually(10, || ping(&pods[1], "10.71.0.2")
            && ping(&pods[2], "10.71.0.2")),
        "pods on ordinary nodes reach the remote range"
    );
    assert!(
        out(&nodes[0], &["rule"]).contains("iif liqo.host"),
        "{}",
        out(&nodes[0], &["rule"])
    );
    // (What follows `onlink`, such as the route's MTU, is the plan's business.)
    let table = out(&nodes[1], &["route", "show", "table", "18952"]);
    assert!(
        table.lines().count() == 1
            && table.starts_with("10.71.0.0/16 via 240.18.0.1 dev liqo.vxlan proto static onlink"),
        "{table}"
    );

    // kill -9 and restart: same state, no duplicates.
    let before = (
        out(&nodes[1], &["rule"]),
        out(&nodes[1], &["route", "show", "table", "18952"]),
        out(&nodes[1], &["neigh", "show", "dev", "liqo.vxlan"]),
    );
    agents[1].kill9();
    agents[1] = Agent::start(&nodes[1], &dir.join("n1.yaml"), &log(1));
    assert!(eventually(5, || ping(&pods[1], "10.71.0.2")));
    // It answers /status once its first apply is done.
    wait_status(&nodes[1], "restarted", |s| s.reload.applied.is_some());
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
        eventually(5, || out(&nodes[2], &["rule"]).contains("iif liqo.host")),
        "n2 takes the gateway role"
    );
    assert!(
        eventually(5, || out(&nodes[0], &["rule"])
            .contains("from all lookup 18952")
            && !out(&nodes[0], &["rule"]).contains("iif liqo.host")),
        "n0 becomes ordinary"
    );

    // A bad file is refused and the running state kept.
    let bad = config("n1", "n9");
    write(&dir, "n1", &bad);
    let st = wait_status(&nodes[1], "refused", |s| {
        s.reload
            .refused
            .as_ref()
            .is_some_and(|r| r.digest == digest(&bad))
    });
    assert_eq!(st.reload.refused.unwrap().field, "gateway");
    assert_eq!(st.gateway, "n2");
    assert!(out(&nodes[1], &["route", "show", "table", "18952"]).contains("via 240.18.0.3"));

    // SIGTERM removes everything.
    for (i, a) in agents.iter_mut().enumerate() {
        a.stop();
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
    drop(agents);
    drop(guard);
    assert!(!dir.exists());
}

#[tokio::test]
async fn status_shows_refusals_read_errors_and_kernel_failures_until_they_clear() {
    let p = prefix("s");
    let mut s = Spaces::new();
    let lan = add(&mut s, format!("{p}-lan")).await;
    let n1 = add(&mut s, format!("{p}-n1")).await;
    wire(
        &lan,
        "n1",
        "172.18.0.9/24",
        None,
        &n1,
        "eth0",
        "172.18.0.2/24",
    )
    .await;
    let dir = Dir(std::env::temp_dir().join(&p));
    std::fs::create_dir_all(&dir.0).unwrap();
    let running = config("n1", "n0");
    let path = write(&dir.0, "n1", &running);
    let log = dir.0.join("agent.log");
    let mut agent = Agent::start(&n1, &path, &log);
    let st = wait_status(&n1, "started", |s| s.reload.applied.is_some());
    let applied = st.reload.applied.clone().unwrap();
    assert_eq!((applied.digest, applied.count), (digest(&running), 1));
    assert_eq!(st.reload.source, path.display().to_string());
    assert_eq!(st.reload.problem(), None);
    assert_eq!((st.gateway.as_str(), st.node.as_str()), ("n0", "n1"));
    let table = || out(&n1, &["route", "show", "table", "18952"]);
    let before = table();
    assert!(before.contains("via 240.18.0.1"), "{before}");

    // A file that does not validate: refused with its field, the running state kept.
    let bad = config("n1", "n9");
    write(&dir.0, "n1", &bad);
    let st = wait_status(&n1, "refused", |s| {
        s.reload
            .refused
            .as_ref()
            .is_some_and(|r| r.digest == digest(&bad))
    });
    assert_eq!(st.reload.refused.as_ref().unwrap().field, "gateway");
    assert_eq!(st.gateway, "n0");
    assert_eq!(table(), before);

    // Back to the running text: cleared.
    write(&dir.0, "n1", &running);
    let st = wait_status(&n1, "refusal cleared", |s| s.reload.refused.is_none());
    assert_eq!(st.reload.problem(), None);
    assert_eq!(st.reload.applied.unwrap().count, 1);

    // Unreadable (removed, then a directory in its place) until it is back.
    std::fs::remove_file(&path).unwrap();
    let st = wait_status(&n1, "missing", |s| s.reload.read_error.is_some());
    assert!(
        st.reload
            .read_error
            .as_ref()
            .unwrap()
            .contains("No such file"),
        "{st:?}"
    );
    std::fs::create_dir(&path).unwrap();
    wait_status(&n1, "a directory", |s| {
        s.reload
            .read_error
            .as_ref()
            .is_some_and(|e| e.contains("Is a directory"))
    });
    std::fs::remove_dir(&path).unwrap();
    write(&dir.0, "n1", &running);
    let st = wait_status(&n1, "readable", |s| s.reload.read_error.is_none());
    assert_eq!(st.reload.problem(), None);
    assert_eq!(table(), before, "nothing changed meanwhile");

    // A change the kernel refuses: another program holds the new VXLAN port. Shown, retried,
    // rolled back to the running device; applied once the port is free.
    let holder = n1
        .run(|| std::net::UdpSocket::bind("0.0.0.0:4880"))
        .unwrap()
        .unwrap();
    let moved = format!("{running}port: 4880\n");
    write(&dir.0, "n1", &moved);
    let st = wait_status(&n1, "apply retried", |s| {
        s.reload
            .apply_error
            .as_ref()
            .is_some_and(|f| f.digest == digest(&moved) && f.attempts >= 2)
    });
    let f = st.reload.apply_error.as_ref().unwrap();
    assert!(f.error.contains("Address already in use"), "{f:?}");
    assert_eq!(
        st.reload.applied.as_ref().unwrap().digest,
        digest(&running),
        "the running text still runs"
    );
    assert!(
        eventually(5, || out(&n1, &["-d", "link", "show", "liqo.vxlan"])
            .contains("dstport 4879")
            && table() == before),
        "rolled back to the running device and routes: {}",
        out(&n1, &["-d", "link", "show", "liqo.vxlan"])
    );
    drop(holder);
    let st = wait_status(&n1, "applied once the port is free", |s| {
        s.reload
            .applied
            .as_ref()
            .is_some_and(|a| a.digest == digest(&moved))
    });
    assert_eq!(st.reload.apply_error, None);
    assert_eq!(st.reload.problem(), None);
    assert!(out(&n1, &["-d", "link", "show", "liqo.vxlan"]).contains("dstport 4880"));
    assert_eq!(table(), before);

    // SIGTERM: a clean exit that removes everything.
    agent.stop();
    assert!(!out(&n1, &["-br", "link"]).contains("liqo.vxlan"));
    assert!(table().trim().is_empty());
}
