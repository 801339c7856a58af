//! Peering in the lab (needs root): IPAM services, gateways and overlay agents per cluster, real
//! WireGuard between the gateway nodes, NAT between identical pod CIDRs, every pod of every node
//! reaching every pod of every peer, and the gateway moving between nodes.

use crate::common;

use common::LabGuard;
use dataplane::Netns;
use std::process::Command;

use e2e::{
    lab::{self, check, outage},
    topology::Topology,
};

fn cross_cluster(m: &check::Matrix) -> Vec<&check::Probe> {
    m.probes
        .iter()
        .filter(|p| m.endpoints[p.src].cluster != m.endpoints[p.dst].cluster)
        .collect()
}

/// The stdout of `cmd`, or an error with its exit status and stderr: a command that failed
/// never passes for one that printed nothing.
fn stdout_of(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn a_failing_command_is_an_error_not_empty_output() {
    // `ip` prints nothing on stdout and fails for a link that does not exist.
    let e = stdout_of(Command::new("ip").args(["link", "show", "dev", "nosuchlink0"])).unwrap_err();
    assert!(
        e.contains("exit status") && e.contains("nosuchlink0"),
        "{e}"
    );
    assert!(stdout_of(&mut Command::new("/nonexistent/ip")).is_err());
    assert!(
        stdout_of(Command::new("ip").args(["-br", "link"]))
            .unwrap()
            .contains("lo")
    );
}

/// What the root namespace holds that a lab could leak into.
fn root_state() -> Vec<String> {
    let run = |args: &[&str]| stdout_of(Command::new(args[0]).args(&args[1..])).unwrap();
    vec![
        run(&["ip", "-br", "link"]),
        run(&["ip", "rule"]),
        run(&["ip", "route", "show", "table", "all"]),
        run(&["nft", "list", "tables"]),
    ]
}

/// Every rule or route of the overlay (18952) and the gateway's host side (18951) in `ns`.
fn peering_state(ns: &str) -> String {
    let ns = Netns::open(&ns.parse().unwrap()).unwrap();
    let run = |args: &[&str]| stdout_of(ns.command("ip").args(args)).unwrap();
    let rules: String = run(&["rule"])
        .lines()
        .filter(|l| l.contains("1895"))
        .map(|l| format!("{l}\n"))
        .collect();
    // A table that does not exist is an error for `ip route show table N`; empty tables are
    // what we expect here, so list everything and keep the two tables.
    let routes: String = run(&["route", "show", "table", "all"])
        .lines()
        .filter(|l| l.contains("table 18951") || l.contains("table 18952"))
        .map(|l| format!("{l}\n"))
        .collect();
    format!("{rules}{routes}")
}

/// The peers `cluster` has recorded (the record the lab keeps, not a daemon's file).
fn recorded(prefix: &lab::Prefix, cluster: &str) -> Vec<String> {
    let path = format!("/run/liqo-lab/{prefix}.d/{cluster}/peerings.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v.as_object().unwrap().keys().cloned().collect()
}

#[tokio::test]
async fn three_clusters_with_one_pod_cidr_peered_pairwise() {
    let before = root_state();
    let g = LabGuard::new('p');
    let lab = lab::up(g.0.clone(), Topology::preset("three-clusters").unwrap())
        .await
        .unwrap();
    for (a, b) in [("rome", "milan"), ("rome", "turin"), ("milan", "turin")] {
        let (va, vb) = lab::peer(&lab, a, b).unwrap();
        // Each cluster never maps a peer into one of its own reserved subnets.
        for (cluster, view) in [(a, &va), (b, &vb)] {
            for r in &lab.topology.cluster(cluster).unwrap().reserved_subnets {
                for got in view.remote_ranges() {
                    assert!(
                        !r.contains(&got.net()) && !got.contains(r),
                        "{cluster}: {view:?} in reserved {r}"
                    );
                }
            }
        }
    }
    // 3 clusters x 3 nodes x 2 pods: every pod to every other pod.
    let m = check::with_peerings(&lab).unwrap();
    assert_eq!(m.endpoints.len(), 18);
    assert_eq!(m.probes.len(), 18 * 17, "{}", m.render());
    assert!(m.failures().is_empty(), "{}", m.render());
    let cross = cross_cluster(&m);
    assert_eq!(cross.len(), 6 * 36, "{}", m.render());
    let views = lab::peerings(&lab).unwrap();
    assert_eq!(recorded(&g.0, "rome"), ["milan", "turin"]);
    assert_eq!(views.len(), 6);
    for p in &cross {
        let (src, dst) = (&m.endpoints[p.src], &m.endpoints[p.dst]);
        // Reached at a remapped address, and seen by the server in its cluster's view of the
        // client's cluster.
        assert_ne!(p.addr, dst.addr, "{}", m.render());
        assert_eq!(p.tcp.as_ref().unwrap(), &p.expect_seen);
        let (_, _, server_view) = views
            .iter()
            .find(|(c, peer, _)| *c == dst.cluster && *peer == src.cluster)
            .unwrap();
        assert!(
            server_view.remote_pods.contains(&p.expect_seen),
            "{} not in {}'s view of {}",
            p.expect_seen,
            dst.cluster,
            src.cluster
        );
    }

    // The gateway moves to another node; a pod on a third node keeps talking to milan.
    let (src, dst, addr, _) = outage::pair_across(&lab, "rome", &["n0", "n1"])
        .unwrap()
        .unwrap();
    assert!(src.to_string().ends_with("rome-n2-p0"), "{src}");
    let prober = outage::Prober::start(&src, &dst, addr).unwrap();
    let moved = lab::move_gateway(&lab, "rome", "n1").await.unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let o = prober.finish().unwrap();
    eprintln!("gateway move: {moved:?}, traffic: {o:?}");
    assert!(o.up_at_end, "{o:?}");
    assert!(o.answered > 10, "{o:?}");
    assert!(o.longest_gap.as_secs_f64() < 5.0, "{o:?}");
    assert!(peering_state(&format!("{}-rome-n0", g.0)).contains("lookup 18952"));
    let m = check::with_peerings(&lab).unwrap();
    assert!(m.failures().is_empty(), "after the move: {}", m.render());
    assert!(
        lab::move_gateway(&lab, "rome", "n1").await.is_err(),
        "already there"
    );
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::move_gateway(&lab, "rome", "n7").await.unwrap_err())
    );
    assert!(e.contains("rome/n7") && e.contains("n0, n1, n2"), "{e}");

    lab::unpeer(&lab, "rome", "milan").unwrap();
    let m = check::with_peerings(&lab).unwrap();
    assert!(m.failures().is_empty(), "{}", m.render());
    assert_eq!(
        cross_cluster(&m).len(),
        4 * 36,
        "rome-milan gone, the rest untouched"
    );
    assert_eq!(recorded(&g.0, "rome"), ["turin"]);
    assert_eq!(recorded(&g.0, "milan"), ["turin"]);
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::unpeer(&lab, "rome", "milan").unwrap_err())
    );
    assert!(
        e.contains("unpeering rome and milan") && e.contains("rome is not peered with milan"),
        "{e}"
    );

    // Unpeering everything leaves no rule or route of the overlay or the gateway on any node.
    lab::unpeer(&lab, "rome", "turin").unwrap();
    lab::unpeer(&lab, "milan", "turin").unwrap();
    for c in ["rome", "milan", "turin"] {
        assert!(recorded(&g.0, c).is_empty(), "{c}");
    }
    for c in &lab.topology.clusters {
        for n in &c.nodes {
            let ns = format!("{}-{}-{}", g.0, c.name, n.name);
            assert_eq!(peering_state(&ns), "", "left in {ns}");
        }
    }
    lab::down(&g.0).unwrap();
    assert!(
        dataplane::Netns::list()
            .unwrap()
            .iter()
            .all(|n| !n.to_string().starts_with(&format!("{}-", g.0))),
        "namespaces left"
    );
    assert_eq!(root_state(), before, "the root namespace changed");
}

#[tokio::test]
async fn a_cluster_behind_nat_peers_with_a_public_one() {
    let g = LabGuard::new('p');
    let topo = Topology::from_yaml(
        "clusters:\n  - name: home\n    podCIDR: 10.200.0.0/16\n    behindNat: true\n    nodes: 2\n  - name: cloud\n    podCIDR: 10.200.0.0/16\n    nodes: 1\n  - name: office\n    podCIDR: 10.200.0.0/16\n    behindNat: true\n    nodes: 1\n",
    )
    .unwrap();
    let lab = lab::up(g.0.clone(), topo).await.unwrap();
    assert!(
        Netns::open(&format!("{}-home-nat", g.0).parse().unwrap()).is_ok(),
        "the NAT router exists"
    );
    lab::peer(&lab, "home", "cloud").unwrap();
    let m = check::with_peerings(&lab).unwrap();
    // home: 2 nodes x 2 pods, cloud: 1 node x 2 pods.
    assert_eq!(cross_cluster(&m).len(), 2 * 4 * 2);
    assert!(m.failures().is_empty(), "{}", m.render());
    // Behind NAT, the gateway moves with the link to the router; cloud learns the new session.
    lab::move_gateway(&lab, "home", "n1").await.unwrap();
    let m = check::with_peerings(&lab).unwrap();
    assert!(m.failures().is_empty(), "after the move: {}", m.render());
    // Two NATed clusters cannot reach each other directly: refused, naming why.
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::peer(&lab, "home", "office").unwrap_err())
    );
    assert!(e.contains("both clusters are behind NAT"), "{e}");
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::peer(&lab, "home", "mars").unwrap_err())
    );
    assert!(
        e.contains("mars") && e.contains("home, cloud, office"),
        "{e}"
    );
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::peer(&lab, "home", "home").unwrap_err())
    );
    assert!(e.contains("cannot peer with itself"), "{e}");
}

#[tokio::test]
async fn a_failed_peering_puts_both_clusters_back() {
    let g = LabGuard::new('p');
    let lab = lab::up(g.0.clone(), Topology::preset("two-clusters").unwrap())
        .await
        .unwrap();
    let in_node = |cluster: &str, program: &str, args: &[&str]| -> String {
        let ns = lab
            .netns(&format!("{cluster}/n0").parse().unwrap())
            .unwrap();
        stdout_of(ns.command(lab::bin(program).unwrap()).args(args)).unwrap()
    };
    let gateway_peers = |cluster: &str| -> usize {
        let out = in_node(cluster, "liqo-gateway", &["status", "-o", "json"]);
        serde_json::from_str::<gateway::status::Status>(&out)
            .unwrap()
            .peers
            .len()
    };
    // milan's IPAM already holds "rome" with other CIDRs: milan's half of the exchange fails
    // after rome's half acquired ranges for milan.
    in_node(
        "milan",
        "liqo-ipam",
        &[
            "remap",
            "--peer",
            "rome",
            "--pod-cidr",
            "10.99.0.0/16",
            "--external-cidr",
            "10.98.0.0/16",
        ],
    );
    let rome_before = in_node("rome", "liqo-ipam", &["list", "-o", "json"]);
    let e = format!(
        "{:#}",
        anyhow::Error::from(lab::peer(&lab, "rome", "milan").unwrap_err())
    );
    assert!(
        e.contains("remapping rome's CIDRs in the IPAM on milan")
            && e.contains("everything was put back")
            && e.contains("already announced"),
        "{e}"
    );
    assert_eq!(
        in_node("rome", "liqo-ipam", &["list", "-o", "json"]),
        rome_before,
        "rome's ranges for milan were released"
    );
    assert!(lab::peerings(&lab).unwrap().is_empty());
    assert_eq!((gateway_peers("rome"), gateway_peers("milan")), (0, 0));

    // Without the stale entry the same peering works.
    in_node("milan", "liqo-ipam", &["release", "--peer", "rome"]);
    lab::peer(&lab, "rome", "milan").unwrap();
    assert_eq!((gateway_peers("rome"), gateway_peers("milan")), (1, 1));
    let m = check::with_peerings(&lab).unwrap();
    assert!(m.failures().is_empty(), "{}", m.render());
}
