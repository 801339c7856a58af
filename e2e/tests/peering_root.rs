//! Peering in the lab (needs root): IPAM services, gateways and overlay agents per cluster, real
//! WireGuard between the gateway nodes, NAT between identical pod CIDRs, every pod of every node
//! reaching every pod of every peer, and the gateway moving between nodes.

mod common;

use common::LabGuard;
use dataplane::Netns;
use e2e::{
    lab::{self, check, outage, peering},
    topology::Topology,
};

fn cross_cluster(m: &check::Matrix) -> Vec<&check::Probe> {
    m.probes
        .iter()
        .filter(|p| m.endpoints[p.src].cluster != m.endpoints[p.dst].cluster)
        .collect()
}

/// What the root namespace holds that a lab could leak into.
fn root_state() -> Vec<String> {
    let run = |args: &[&str]| {
        let out = std::process::Command::new(args[0])
            .args(&args[1..])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
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
    let run = |args: &[&str]| {
        let out = ns.command("ip").args(args).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let rules: String = run(&["rule"])
        .lines()
        .filter(|l| l.contains("1895"))
        .map(|l| format!("{l}\n"))
        .collect();
    format!(
        "{rules}{}{}",
        run(&["route", "show", "table", "18951"]),
        run(&["route", "show", "table", "18952"])
    )
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
                for got in [view.remote_pods, view.remote_external] {
                    assert!(
                        !r.contains(&got) && !got.contains(r),
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
    let views = peering::peerings(&lab).unwrap();
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
    let e = lab::move_gateway(&lab, "rome", "n7")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("rome/n7") && e.contains("n0, n1, n2"), "{e}");

    lab::unpeer(&lab, "rome", "milan").unwrap();
    let m = check::with_peerings(&lab).unwrap();
    assert!(m.failures().is_empty(), "{}", m.render());
    assert_eq!(
        cross_cluster(&m).len(),
        4 * 36,
        "rome-milan gone, the rest untouched"
    );
    let e = lab::unpeer(&lab, "rome", "milan").unwrap_err().to_string();
    assert!(e.contains("unpeering rome and milan"), "{e}");

    // Unpeering everything leaves no rule or route of the overlay or the gateway on any node.
    lab::unpeer(&lab, "rome", "turin").unwrap();
    lab::unpeer(&lab, "milan", "turin").unwrap();
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
